// Short real training runs: a loss that must come down, determinism, and resume == uninterrupted.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/torch/trainer.hpp"

namespace sparsgd::torch_layer {
namespace {

TrainConfig small_run() {
  TrainConfig c;
  c.workers = 2;
  c.model = "mlp";
  c.exchange.density = 0.05;
  c.batch_size = 32;
  c.lr = 0.05;
  c.exchange.network = "none";
  c.max_iters = 60;
  return c;
}

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("sparsgd-train-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(Trainer, ShortRunLearns) {
  TrainConfig c = small_run();
  c.max_iters = 150;
  const TrainSummary s = train(c);
  EXPECT_EQ(s.iterations, 150u);
  EXPECT_GT(s.final_test_accuracy, 0.65);  // chance is 0.10
  EXPECT_LT(s.final_train_loss, 1.3);      // starts near ln 10 = 2.30
  EXPECT_GT(s.bytes_per_iteration, 0.0);
}

TEST(Trainer, SameSeedSameResultOtherSeedOtherResult) {
  const TrainSummary a = train(small_run());
  const TrainSummary b = train(small_run());
  EXPECT_EQ(a.final_train_loss, b.final_train_loss);
  EXPECT_EQ(a.final_test_loss, b.final_test_loss);
  EXPECT_EQ(a.final_test_accuracy, b.final_test_accuracy);
  TrainConfig other = small_run();
  other.seed = 2;
  EXPECT_NE(train(other).final_train_loss, a.final_train_loss);
}

TEST(Trainer, ResumeEqualsUninterruptedRunBitForBit) {
  const auto dir = temp_dir("resume");
  TrainConfig whole = small_run();
  whole.out_dir = (dir / "whole").string();
  whole.checkpoint_every = 25;  // checkpoints at 25 and 50 of 60
  const TrainSummary uninterrupted = train(whole);
  ASSERT_TRUE(std::filesystem::exists(dir / "whole" / "checkpoints" / "rank-1.ckpt"));

  TrainConfig resumed = small_run();
  resumed.resume_dir = whole.out_dir;  // its latest checkpoint: iteration 50
  resumed.out_dir = (dir / "resumed").string();
  const TrainSummary continued = train(resumed);
  EXPECT_TRUE(continued.resumed);
  EXPECT_EQ(continued.iterations, uninterrupted.iterations);
  EXPECT_EQ(continued.final_train_loss, uninterrupted.final_train_loss);
  EXPECT_EQ(continued.final_test_loss, uninterrupted.final_test_loss);
  EXPECT_EQ(continued.final_test_accuracy, uninterrupted.final_test_accuracy);
  EXPECT_EQ(continued.bytes_per_iteration, uninterrupted.bytes_per_iteration);
  EXPECT_TRUE(std::filesystem::exists(dir / "resumed" / "summary.json"));

  TrainConfig mismatched = resumed;
  mismatched.lr = 0.5;
  EXPECT_THROW(train(mismatched), InvalidArgument);
  std::filesystem::remove_all(dir);
}

// --optimizer adam and adamw: torch::optim on the averaged gradients learns, and its moments and step
// counts survive a checkpoint: a resumed run ends bit for bit where the uninterrupted one does.
TEST(Trainer, AdamAndAdamWLearnAndResumeBitForBit) {
  for (const std::string optimizer : {"adam", "adamw"}) {
    SCOPED_TRACE(optimizer);
    const auto dir = temp_dir("resume-" + optimizer);
    TrainConfig whole = small_run();
    whole.optimizer = optimizer;
    whole.lr = 0.002;
    whole.max_iters = 120;
    whole.out_dir = (dir / "whole").string();
    whole.checkpoint_every = 50;
    const TrainSummary uninterrupted = train(whole);
    EXPECT_GT(uninterrupted.final_test_accuracy, 0.65);  // chance is 0.10
    TrainConfig resumed = whole;
    resumed.resume_dir = whole.out_dir;  // its latest checkpoint: iteration 100
    resumed.out_dir = (dir / "resumed").string();
    const TrainSummary continued = train(resumed);
    EXPECT_TRUE(continued.resumed);
    EXPECT_EQ(continued.final_train_loss, uninterrupted.final_train_loss);
    EXPECT_EQ(continued.final_test_accuracy, uninterrupted.final_test_accuracy);
    // A checkpoint of another optimizer is another run.
    TrainConfig other = resumed;
    other.optimizer = optimizer == "adam" ? "sgd" : "adam";
    EXPECT_THROW(train(other), InvalidArgument);
    std::filesystem::remove_all(dir);
  }
  TrainConfig bad = small_run();
  bad.optimizer = "adam";
  bad.momentum_correction = "on";
  EXPECT_THROW(validate(bad), InvalidArgument);
  bad.optimizer = "rmsprop";
  EXPECT_THROW(validate(bad), InvalidArgument);
}

// --momentum-correction auto is on only where the exchange is sparse: where every entry is sent,
// momentum factor masking would zero the whole velocity every step.
TEST(TrainConfig, MomentumCorrectionAutoIsOnOnlyForASparseExchange) {
  TrainConfig c;
  EXPECT_TRUE(uses_momentum_correction(c));  // topk at density 0.01 with sgd
  TrainConfig dense = c;
  dense.exchange.compressor = "none";
  dense.exchange.aggregator = "dense";
  dense.exchange.density = 1.0;
  EXPECT_FALSE(uses_momentum_correction(dense));
  TrainConfig everything = c;
  everything.exchange.density = 1.0;  // topk of all n entries
  EXPECT_FALSE(uses_momentum_correction(everything));
  TrainConfig adam = c;
  adam.optimizer = "adam";
  EXPECT_FALSE(uses_momentum_correction(adam));
  dense.momentum_correction = "on";  // asked for, it is what is asked
  EXPECT_TRUE(uses_momentum_correction(dense));
  c.momentum_correction = "off";
  EXPECT_FALSE(uses_momentum_correction(c));
}

// Reads the lr and density columns of metrics.csv.
std::vector<std::pair<double, double>> lr_and_density(const std::filesystem::path& csv) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  std::vector<std::pair<double, double>> rows;
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string epoch, step, loss, lr, density;
    std::getline(fields, epoch, ',');
    std::getline(fields, step, ',');
    std::getline(fields, loss, ',');
    std::getline(fields, lr, ',');
    std::getline(fields, density, ',');
    rows.emplace_back(std::stod(lr), std::stod(density));
  }
  return rows;
}

TEST(Trainer, LearningRateWarmupCosineDecayAndDensityWarmup) {
  const auto dir = temp_dir("schedule");
  TrainConfig c = small_run();
  c.max_iters = 0;
  c.batch_size = 1000;  // 30 iterations per epoch on 2 workers
  c.epochs = 2;
  c.lr = 0.1;
  c.warmup_epochs = 1.0;
  c.lr_schedule = "cosine";
  c.exchange.density = 0.01;
  c.warmup_density = 0.05;
  c.out_dir = dir.string();
  train(c);
  const auto rows = lr_and_density(dir / "metrics.csv");
  ASSERT_EQ(rows.size(), 60u);
  const double pi = 3.14159265358979323846;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double position = static_cast<double>(i) / 30.0;  // epochs
    double lr = 0.1 * 0.5 * (1.0 + std::cos(pi * position / 2.0));
    if (position < 1.0) lr = lr / 2.0 + (lr - lr / 2.0) * position;  // from lr/P, P = 2
    EXPECT_NEAR(rows[i].first, lr, 1e-5) << "iteration " << i;
    EXPECT_DOUBLE_EQ(rows[i].second, i < 30 ? 0.05 : 0.01) << "iteration " << i;
  }
  std::filesystem::remove_all(dir);
}

// The paper's density warm-up lasts a fraction of an epoch when asked (the authors' 1 epoch of 141).
TEST(Trainer, DensityWarmupLastsItsFractionOfAnEpoch) {
  const auto dir = temp_dir("density-warmup");
  TrainConfig c = small_run();
  c.max_iters = 40;
  c.epochs = 2;
  c.batch_size = 1000;  // 30 iterations per epoch on 2 workers
  c.exchange.density = 0.01;
  c.warmup_density = 0.004;
  c.warmup_density_epochs = 0.3;  // iterations 0..8 (position 8/30 < 0.3 <= 9/30)
  c.out_dir = dir.string();
  train(c);
  const auto rows = lr_and_density(dir / "metrics.csv");
  ASSERT_EQ(rows.size(), 40u);
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_DOUBLE_EQ(rows[i].second, i < 9 ? 0.004 : 0.01) << i;
  std::filesystem::remove_all(dir);
}

// A resume checks that a checkpoint's position adds up (edited and re-checksummed, it is passed over
// as a damaged one) and that the run's records up to it are there, each once, in order.
TEST(Trainer, ResumeChecksThePositionAndTheRecords) {
  namespace fs = std::filesystem;
  const auto dir = temp_dir("meaning");
  TrainConfig whole = small_run();
  whole.out_dir = (dir / "whole").string();
  whole.checkpoint_every = 25;  // checkpoints at 25 and 50 of 60
  train(whole);
  const auto resume = [&](const std::function<void(const fs::path&)>& edit) -> std::string {
    const fs::path copy = dir / "copy";
    fs::remove_all(copy);
    fs::copy(whole.out_dir, copy, fs::copy_options::recursive);
    edit(copy);
    TrainConfig resumed = small_run();
    resumed.resume_dir = copy.string();
    resumed.out_dir = copy.string();  // continues it, records and all
    try {
      const TrainSummary s = train(resumed);
      return "resumed at " + std::to_string(s.resumed_at);
    } catch (const Error& e) {
      return e.what();
    }
  };
  const auto set = [](const fs::path& file, const std::string& section, std::uint64_t value) {
    Checkpoint c = read_checkpoint(file.string());
    c.integers[section] = {value};
    write_checkpoint(file.string(), c, "");
  };
  const auto on_every_file = [&](const std::string& section, std::uint64_t value) {
    return [=](const fs::path& run) {
      for (const char* f : {"rank-0.ckpt", "rank-0.prev.ckpt", "rank-1.ckpt", "rank-1.prev.ckpt"}) {
        set(run / "checkpoints" / f, section, value);
      }
    };
  };
  EXPECT_EQ(resume([](const fs::path&) {}), "resumed at 50");
  EXPECT_NE(resume(on_every_file("run.epoch", 5)).find("run.epoch is not one of the run's 1 epochs"), std::string::npos);
  EXPECT_NE(resume(on_every_file("run.next_iteration", 99999999)).find("run.next_iteration is beyond the epoch's end"),
            std::string::npos);
  EXPECT_NE(resume(on_every_file("run.step", 7)).find("run.step is not run.epoch x iterations an epoch"),
            std::string::npos);
  // A file longer than this run's checkpoints can be (from its parameters and epochs) is not read.
  EXPECT_NE(resume([](const fs::path& run) {
              for (const char* f : {"rank-0.ckpt", "rank-0.prev.ckpt"}) fs::resize_file(run / "checkpoints" / f, 200u << 20);
            }).find("more than the"),
            std::string::npos);
  // One rank's newest file edited: every rank resumes from the iteration before.
  EXPECT_EQ(resume([&](const fs::path& run) { set(run / "checkpoints" / "rank-1.ckpt", "run.next_iteration", 3); }),
            "resumed at 25");
  const auto metrics = [](const std::function<void(std::vector<std::string>&)>& change) {
    return [=](const fs::path& run) {
      std::ifstream in(run / "metrics.csv");
      std::vector<std::string> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      in.close();
      change(lines);
      std::ofstream out(run / "metrics.csv");
      for (const auto& line : lines) out << line << '\n';
    };
  };
  EXPECT_NE(resume([](const fs::path& run) { fs::remove(run / "metrics.csv"); }).find("metrics.csv is missing"),
            std::string::npos);
  EXPECT_NE(resume(metrics([](auto& l) { l.resize(20); })).find("ends at step 19"), std::string::npos);
  EXPECT_NE(resume(metrics([](auto& l) { std::swap(l[3], l[4]); })).find("has step 4 where step 3 should be"),
            std::string::npos);
  EXPECT_NE(resume(metrics([](auto& l) { l.insert(l.begin() + 6, l[5]); })).find("has step 5 where step 6 should be"),
            std::string::npos);
  // Rows after the checkpoint (a crash before the next one) are dropped, and written again.
  EXPECT_EQ(resume(metrics([](auto& l) { l.resize(56); })), "resumed at 50");
  std::filesystem::remove_all(dir);
}

TEST(Trainer, RejectsBadOptionsAndMissingData) {
  auto bad = [](auto change) {
    TrainConfig c = small_run();
    change(c);
    return c;
  };
  EXPECT_THROW(validate(bad([](TrainConfig& c) { c.model = "vgg"; })), InvalidArgument);
  EXPECT_THROW(validate(bad([](TrainConfig& c) { c.batch_size = 0; })), InvalidArgument);
  EXPECT_THROW(validate(bad([](TrainConfig& c) { c.lr = -0.1; })), InvalidArgument);
  EXPECT_THROW(validate(bad([](TrainConfig& c) { c.epochs = 0; })), InvalidArgument);
  EXPECT_THROW(validate(bad([](TrainConfig& c) { c.exchange.density = 0.0; })), InvalidArgument);
  EXPECT_THROW(validate(bad([](TrainConfig& c) { c.exchange.compressor = "zip"; })), InvalidArgument);
  EXPECT_THROW(validate(bad([](TrainConfig& c) { c.exchange.aggregator = "tree"; })), InvalidArgument);
  EXPECT_THROW(validate(bad([](TrainConfig& c) { c.checkpoint_every = 5; })), InvalidArgument);  // no --out
  EXPECT_THROW(train(bad([](TrainConfig& c) { c.data_dir = "/nonexistent"; })), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd::torch_layer
