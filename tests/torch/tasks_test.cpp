// The tasks behind `sparsgd train --task`: the CIFAR-10 and text-corpus loaders on files generated
// here in the official layouts (no network can download the real ones), and real training runs on
// them: the loss or perplexity must fall below thresholds that can fail, and a resumed run must end
// bit for bit where the uninterrupted one does, for every task.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/torch/cifar10.hpp"
#include "sparsgd/torch/task.hpp"
#include "sparsgd/torch/text_corpus.hpp"
#include "sparsgd/torch/trainer.hpp"

namespace sparsgd::torch_layer {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("sparsgd-tasks-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// CIFAR-format records whose class is visible in the colour: class c's pixels scatter around its
// own RGB colour (a task a network learns in a few dozen steps, but not one it knows at the start).
std::string cifar_records(int count, std::uint32_t seed) {
  static const int colours[10][3] = {{230, 30, 30},  {30, 230, 30},  {30, 30, 230},  {230, 230, 30}, {230, 30, 230},
                                     {30, 230, 230}, {128, 128, 128}, {250, 250, 250}, {10, 10, 10},  {200, 120, 40}};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-40, 40);
  std::string bytes;
  for (int r = 0; r < count; ++r) {
    const int label = r % 10;
    bytes.push_back(static_cast<char>(label));
    for (int channel = 0; channel < 3; ++channel) {
      for (int pixel = 0; pixel < 1024; ++pixel) {
        bytes.push_back(static_cast<char>(std::clamp(colours[label][channel] + noise(rng), 0, 255)));
      }
    }
  }
  return bytes;
}

fs::path make_cifar_dir(const std::string& name, int per_file) {
  const fs::path dir = temp_dir(name);
  for (int i = 1; i <= 5; ++i) {
    write_bytes(dir / ("data_batch_" + std::to_string(i) + ".bin"), cifar_records(per_file, static_cast<std::uint32_t>(i)));
  }
  write_bytes(dir / "test_batch.bin", cifar_records(per_file, 99));
  return dir;
}

TEST(Cifar10, ReadsTheBinaryFormat) {
  const fs::path dir = make_cifar_dir("format", 20);
  const Cifar10Images train = load_cifar10(dir.string(), true);
  EXPECT_EQ(train.images.sizes(), (std::vector<std::int64_t>{100, 3, 32, 32}));
  EXPECT_EQ(train.images.scalar_type(), torch::kUInt8);
  EXPECT_EQ(train.labels.sizes(), (std::vector<std::int64_t>{100}));
  // Record r of file 1 is example r; its label byte, then the red, green and blue planes.
  const std::string first = cifar_records(20, 1);
  EXPECT_EQ(train.labels[3].item<std::int64_t>(), 3);
  const auto* pixels = train.images.data_ptr<std::uint8_t>();
  for (const int at : {0, 1023, 1024, 3071}) {
    EXPECT_EQ(pixels[3 * 3072 + at], static_cast<std::uint8_t>(first[3 * 3073 + 1 + at])) << at;
  }
  // File 2's first record follows file 1's last.
  EXPECT_EQ(pixels[20 * 3072], static_cast<std::uint8_t>(cifar_records(20, 2)[1]));
  EXPECT_EQ(load_cifar10(dir.string(), false).size(), 20);

  // The official archive unpacks to cifar-10-batches-bin inside the directory given.
  const fs::path outer = temp_dir("outer");
  fs::rename(dir, outer / "cifar-10-batches-bin");
  EXPECT_EQ(load_cifar10(outer.string(), true).size(), 100);
  fs::remove_all(outer);
}

// What a bad file gets: an error naming the file and what is wrong with it.
TEST(Cifar10, BadFilesAreNamed) {
  const fs::path dir = make_cifar_dir("bad", 10);
  const auto message = [&](bool train) {
    try {
      load_cifar10(dir.string(), train);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  fs::remove(dir / "data_batch_4.bin");
  EXPECT_THROW(load_cifar10(dir.string(), true), InvalidArgument);
  EXPECT_NE(message(true).find("data_batch_4.bin not found"), std::string::npos) << message(true);
  EXPECT_NE(message(true).find("cifar-10-binary.tar.gz"), std::string::npos) << message(true);

  write_bytes(dir / "data_batch_4.bin", cifar_records(10, 4).substr(0, 3073 * 10 - 100));  // truncated
  EXPECT_THROW(load_cifar10(dir.string(), true), InvalidData);
  EXPECT_NE(message(true).find("data_batch_4.bin holds 30630 bytes, not a whole number of 3073-byte records"),
            std::string::npos)
      << message(true);

  write_bytes(dir / "data_batch_4.bin", "");
  EXPECT_NE(message(true).find("data_batch_4.bin is empty"), std::string::npos) << message(true);

  std::string bad_label = cifar_records(10, 4);
  bad_label[3073 * 7] = 10;  // record 7
  write_bytes(dir / "data_batch_4.bin", bad_label);
  EXPECT_THROW(load_cifar10(dir.string(), true), InvalidData);
  EXPECT_NE(message(true).find("record 7 has label 10"), std::string::npos) << message(true);
  fs::remove_all(dir);
}

TEST(TextCorpus, VocabularyEndOfSentenceAndUnknownWords) {
  const fs::path dir = temp_dir("corpus");
  write_bytes(dir / "train.txt", " the cat sat\n the dog\n");
  write_bytes(dir / "valid.txt", " the cat\n");
  write_bytes(dir / "test.txt", " a dog sat\n\n");
  const TextCorpus corpus = load_text_corpus(dir.string());
  EXPECT_EQ(corpus.vocabulary, (std::vector<std::string>{"<eos>", "the", "cat", "sat", "dog", "<unk>"}));
  EXPECT_EQ(corpus.train, (std::vector<std::int64_t>{1, 2, 3, 0, 1, 4, 0}));
  EXPECT_EQ(corpus.valid, (std::vector<std::int64_t>{1, 2, 0}));
  EXPECT_EQ(corpus.test, (std::vector<std::int64_t>{5, 4, 3, 0, 0}));  // an empty line is one <eos>

  fs::remove(dir / "valid.txt");
  EXPECT_THROW(load_text_corpus(dir.string()), InvalidArgument);
  write_bytes(dir / "valid.txt", std::string("the\0cat\n", 8));
  try {
    load_text_corpus(dir.string());
    ADD_FAILURE() << "a NUL byte was accepted";
  } catch (const InvalidData& e) {
    EXPECT_NE(std::string(e.what()).find("valid.txt is not text (a NUL byte at offset 3)"), std::string::npos) << e.what();
  }
  write_bytes(dir / "valid.txt", "the\n");
  write_bytes(dir / "train.txt", "");
  EXPECT_THROW(load_text_corpus(dir.string()), InvalidData);
  fs::remove_all(dir);
}

// A corpus with structure to learn: sentences walk a fixed cycle of 12 words from a random start for
// a random length, so the next word is nearly certain given the last (perplexity near 1.3 is
// reachable; a model that knows nothing scores the vocabulary size, 13).
fs::path make_corpus_dir(const std::string& name) {
  const fs::path dir = temp_dir(name);
  const auto text = [](int lines, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::string out;
    for (int l = 0; l < lines; ++l) {
      int word = static_cast<int>(rng() % 12);
      const int length = 3 + static_cast<int>(rng() % 6);
      for (int i = 0; i < length; ++i) {
        out += " w" + std::to_string(word);
        word = (word + 1) % 12;
      }
      out += "\n";
    }
    return out;
  };
  write_bytes(dir / "train.txt", text(800, 1));
  write_bytes(dir / "valid.txt", text(50, 2));
  write_bytes(dir / "test.txt", text(100, 3));
  return dir;
}

TrainConfig cifar_run(const fs::path& data, const std::string& model) {
  TrainConfig c;
  c.task = "cifar10";
  c.data_dir = data.string();
  c.model = model;
  c.workers = 2;
  c.batch_size = 8;
  c.lr = 0.05;
  c.exchange.density = 0.05;
  c.exchange.network = "none";
  return c;
}

TrainConfig lm_run(const fs::path& data) {
  TrainConfig c;
  c.task = "lm";
  c.data_dir = data.string();
  c.workers = 2;
  c.batch_size = 8;
  c.bptt = 10;
  c.hidden_size = 32;
  c.optimizer = "adam";  // plain SGD needs thousands of steps before an LSTM gets past the word frequencies
  c.lr = 0.01;
  c.weight_decay = 0.0;
  c.clip_norm = 0.5;
  c.exchange.density = 0.1;
  c.exchange.network = "none";
  c.epochs = 3;
  return c;
}

// The gTop-k paper's CIFAR-10 networks learn the generated task: the loss falls from ln 10 = 2.30.
TEST(Tasks, Cifar10ResNet20AndVgg16Learn) {
  const fs::path data = make_cifar_dir("learn", 40);  // 200 training images
  for (const std::string model : {"resnet20", "vgg16"}) {
    SCOPED_TRACE(model);
    TrainConfig c = cifar_run(data, model);
    c.epochs = 2;  // 13 iterations an epoch on 2 workers
    c.lr = model == "vgg16" ? 0.002 : 0.01;
    const TrainSummary s = train(c);
    EXPECT_EQ(s.task, "cifar10");
    EXPECT_EQ(s.parameters, model == "vgg16" ? 14728266 : 269722);
    EXPECT_LT(s.final_train_loss, 1.6);
    EXPECT_GT(s.final_test_accuracy, 0.5);  // chance is 0.1
  }
  fs::remove_all(data);
}

TEST(Tasks, LanguageModelPerplexityFalls) {
  const fs::path data = make_corpus_dir("lm-learn");
  const TrainSummary s = train(lm_run(data));
  EXPECT_EQ(s.metric, "perplexity");
  ASSERT_EQ(s.history.size(), 3u);
  EXPECT_NEAR(s.final_test_perplexity, std::exp(s.final_test_loss), 1e-9);
  // 13 words: uniform guessing scores 13, the word frequencies alone about 12.6.
  EXPECT_LT(s.final_test_perplexity, 3.5);
  EXPECT_LT(s.history[2].test_perplexity, s.history[0].test_perplexity);
  fs::remove_all(data);
}

// --validation N holds the last N training examples out of training and evaluates on them every
// epoch; lm evaluates on valid.txt. Without a validation set the columns are NaN.
TEST(Tasks, ValidationSetIsHeldOutOfTraining) {
  const fs::path data = make_cifar_dir("validation", 40);  // 200 training images
  TrainConfig c = cifar_run(data, "cnn");
  const TrainSummary without = train(c);
  EXPECT_EQ(without.iterations, 13u);  // 100 examples a worker, batch 8
  EXPECT_TRUE(std::isnan(without.final_validation_accuracy));
  EXPECT_TRUE(std::isnan(without.history[0].validation_loss));
  c.validation = 40;
  const TrainSummary with = train(c);
  EXPECT_EQ(with.iterations, 10u);  // 160 left: 80 a worker
  EXPECT_GE(with.final_validation_accuracy, 0.0);
  EXPECT_LE(with.final_validation_accuracy, 1.0);
  EXPECT_GT(with.final_validation_loss, 0.0);
  EXPECT_EQ(with.history[0].validation_accuracy, with.final_validation_accuracy);
  const auto option = std::find(with.options.begin(), with.options.end(), std::make_pair(std::string("--validation"), std::string("40")));
  EXPECT_NE(option, with.options.end()) << "the summary names every option";
  c.validation = 200;
  EXPECT_THROW(train(c), InvalidArgument);  // nothing left to train on
  fs::remove_all(data);

  const fs::path corpus = make_corpus_dir("validation-lm");
  TrainConfig text = lm_run(corpus);
  text.epochs = 1;
  const TrainSummary lm = train(text);
  EXPECT_TRUE(std::isfinite(lm.final_validation_loss));
  EXPECT_NE(lm.final_validation_loss, lm.final_test_loss);  // valid.txt, not test.txt
  text.validation = 5;
  EXPECT_THROW(validate(text), InvalidArgument);
  fs::remove_all(corpus);
}

// Error feedback off, and the unbiased random-k that needs it off, through the trainer.
TEST(Tasks, ErrorFeedbackOffAndUnbiasedRandomK) {
  const fs::path data = make_cifar_dir("no-feedback", 20);
  TrainConfig c = cifar_run(data, "cnn");
  const TrainSummary with = train(c);
  EXPECT_TRUE(with.error_feedback);
  c.exchange.error_feedback = false;
  const TrainSummary without = train(c);
  EXPECT_FALSE(without.error_feedback);
  EXPECT_NE(without.final_train_loss, with.final_train_loss);  // the dropped residuals change the run
  c.exchange.compressor = "randk-unbiased";
  c.exchange.aggregator = "randk-shared";
  c.lr = 0.005;
  const TrainSummary unbiased = train(c);
  EXPECT_TRUE(std::isfinite(unbiased.final_train_loss));
  c.exchange.error_feedback = true;
  EXPECT_THROW(validate(c), InvalidArgument);
  fs::remove_all(data);
}

// Resume == uninterrupted, bit for bit, for the tasks with state the Fashion-MNIST test does not
// have: CIFAR-10's augmentation draws and the LSTM's hidden state carried across segments (the
// checkpoint falls mid-epoch), with dropout.
TEST(Tasks, ResumeEqualsUninterruptedForEveryTask) {
  const fs::path cifar = make_cifar_dir("resume-data", 20);
  const fs::path corpus = make_corpus_dir("resume-corpus");
  TrainConfig image = cifar_run(cifar, "cnn");
  image.epochs = 2;  // 7 iterations an epoch on 2 workers: checkpoints at 5 and 10
  image.checkpoint_every = 5;
  image.validation = 8;  // 92 training examples left: still 6 iterations an epoch
  TrainConfig text = lm_run(corpus);
  text.dropout = 0.2;
  text.checkpoint_every = 7;
  for (TrainConfig whole : {image, text}) {
    SCOPED_TRACE(whole.task);
    const fs::path dir = temp_dir("resume-" + whole.task);
    whole.out_dir = (dir / "whole").string();
    const TrainSummary uninterrupted = train(whole);
    TrainConfig resumed = whole;
    resumed.resume_dir = whole.out_dir;
    resumed.out_dir = (dir / "resumed").string();
    const TrainSummary continued = train(resumed);
    ASSERT_TRUE(continued.resumed);
    EXPECT_GT(continued.resumed_at, 0u);
    EXPECT_EQ(continued.iterations, uninterrupted.iterations);
    ASSERT_EQ(continued.history.size(), uninterrupted.history.size());
    for (std::size_t e = 0; e < continued.history.size(); ++e) {
      EXPECT_EQ(continued.history[e].train_loss, uninterrupted.history[e].train_loss) << "epoch " << e;
      EXPECT_EQ(continued.history[e].test_loss, uninterrupted.history[e].test_loss) << "epoch " << e;
      EXPECT_EQ(continued.history[e].test_accuracy, uninterrupted.history[e].test_accuracy) << "epoch " << e;
      EXPECT_EQ(continued.history[e].validation_loss, uninterrupted.history[e].validation_loss) << "epoch " << e;
    }
    fs::remove_all(dir);
  }
  fs::remove_all(cifar);
  fs::remove_all(corpus);
}

// A checkpoint says what it was trained on: a resume with other data (one record changed) is refused
// naming both; the same data under another path resumes (the identity is the content, not the path).
TEST(Tasks, ResumeRefusesOtherDataAndTakesTheSameDataElsewhere) {
  const fs::path cifar = make_cifar_dir("identity-data", 20);
  const fs::path corpus = make_corpus_dir("identity-corpus");
  TrainConfig image = cifar_run(cifar, "cnn");
  image.epochs = 2;
  image.checkpoint_every = 5;
  TrainConfig text = lm_run(corpus);
  text.checkpoint_every = 7;
  for (const TrainConfig& original : {image, text}) {
    SCOPED_TRACE(original.task);
    const fs::path data(original.data_dir);
    const fs::path dir = temp_dir("identity-" + original.task);
    TrainConfig whole = original;
    whole.out_dir = (dir / "whole").string();
    train(whole);
    const std::string first_identity = load_task(whole)->identity();

    const fs::path copy = temp_dir("identity-copy-" + original.task);
    for (const auto& entry : fs::directory_iterator(data)) fs::copy_file(entry.path(), copy / entry.path().filename());
    TrainConfig same = whole;
    same.data_dir = copy.string();
    EXPECT_EQ(load_task(same)->identity(), first_identity);
    same.resume_dir = whole.out_dir;
    same.out_dir = (dir / "same").string();
    EXPECT_TRUE(train(same).resumed);

    // One byte of the test set: CIFAR's last pixel, the corpus's last word.
    const fs::path changed_file = copy / (original.task == "lm" ? "test.txt" : "test_batch.bin");
    std::string bytes = read_file_bytes(changed_file);
    bytes[bytes.size() - 2] = bytes[bytes.size() - 2] == '1' ? '2' : '1';
    write_bytes(changed_file, bytes);
    TrainConfig other = same;
    other.out_dir = (dir / "other").string();
    EXPECT_NE(load_task(other)->identity(), first_identity);
    try {
      train(other);
      ADD_FAILURE() << "resumed on other data";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("trained on other data or another model"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(first_identity), std::string::npos) << e.what();
    }
    fs::remove_all(copy);
    fs::remove_all(dir);
  }
  fs::remove_all(cifar);
  fs::remove_all(corpus);
}

TEST(Tasks, ModelsMustFitTheTaskAndTheData) {
  const fs::path cifar = make_cifar_dir("fit", 4);  // 20 training images
  const fs::path corpus = make_corpus_dir("fit-corpus");
  const auto refused = [](TrainConfig c, const std::string& expected) {
    try {
      train(c);
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  TrainConfig c = cifar_run(cifar, "lstm");
  refused(c, "--model lstm is not a model of --task cifar10");
  c = lm_run(corpus);
  c.model = "resnet20";
  refused(c, "--model resnet20 is not a model of --task lm");
  c = cifar_run(cifar, "cnn");
  c.batch_size = 11;
  refused(c, "--batch-size 11 is more than a worker's shard (10 of the 20");
  c = lm_run(corpus);
  c.bptt = 5000;
  refused(c, "--bptt 5000 is longer than a worker's streams");
  c = lm_run(corpus);
  c.batch_size = 100000;
  refused(c, "leave fewer than 2 tokens a stream");
  c = cifar_run(cifar, "cnn");
  c.data_dir.clear();
  refused(c, "--task cifar10 needs --data DIR");
  c.data_dir = "/nonexistent";
  refused(c, "data_batch_1.bin not found");
  c = cifar_run(cifar, "no-such-file.pt");
  refused(c, "TorchScript model no-such-file.pt not found");
  fs::remove_all(cifar);
  fs::remove_all(corpus);
}

}  // namespace
}  // namespace sparsgd::torch_layer
