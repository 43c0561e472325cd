#include "resume.hpp"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "run_state.hpp"
#include "sparsgd/collectives/rank_agreement.hpp"
#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {
namespace {

namespace fs = std::filesystem;

void note_problem(std::string& problems, const char* what) {
  if (!problems.empty()) problems.append("; ");
  problems.append(what);
}

}  // namespace

// What every rank resumes from: the newest iteration for which every rank holds a complete
// checkpoint. A rank keeps its last two (rank-R.ckpt, rank-R.prev.ckpt), so a run killed while
// some ranks had written iteration S and others not yet still resumes, from the iteration before.

// A rank's checkpoint file in DIR/checkpoints, or the one it replaced.
std::string checkpoint_file(int rank, bool previous) {
  return "rank-" + std::to_string(rank) + (previous ? ".prev.ckpt" : ".ckpt");
}

ResumePoint agree_on_resume_point(transport::Transport& base, const TrainConfig& c,
                                  const ResumeExpectations& expected) {
  const int p = base.size();
  const int rank = base.rank();
  const fs::path dir = fs::path(c.resume_dir) / "checkpoints";
  const std::string files[2] = {checkpoint_file(rank, false), checkpoint_file(rank, true)};
  struct Usable {
    RunState state;  // as loaded and checked: its step, and what the ranks compare
    Checkpoint checkpoint;
  };
  std::vector<Usable> usable;
  std::string problems;  // why a file was passed over
  std::string damage;    // the same, for files that are there but damaged, edited or not regular
  for (const auto& file : files) {
    const std::string path = (dir / file).string();
    if (file == files[1] && !fs::exists(path)) continue;  // a run's first checkpoint has no predecessor
    try {
      Checkpoint ckpt = read_checkpoint(path, expected.max_checkpoint_bytes);
      if (ckpt.text_section("config") != expected.fingerprint) {
        throw InvalidArgument("the checkpoint in " + c.resume_dir +
                              " was written with other training options (model, method, schedule, seed or workers): "
                              "resume with the options of the original run");
      }
      if (!ckpt.texts.contains("data")) {
        throw InvalidArgument(path + " does not say which data and model it was trained on (written by an older "
                              "sparsgd): it cannot be resumed safely; start the run again");
      }
      if (ckpt.text_section("data") != expected.data) {
        throw InvalidArgument("the checkpoint in " + c.resume_dir + " was trained on other data or another model: it "
                              "holds [" + ckpt.text_section("data") + "], this run has [" + expected.data +
                              "]; resume with the run's own --data and --model");
      }
      const auto& identity = ckpt.integer_section("identity");
      if (identity.size() != 2 || identity[0] != static_cast<std::uint64_t>(rank) ||
          identity[1] != static_cast<std::uint64_t>(p)) {
        throw InvalidArgument(
            path + " is not rank " + std::to_string(rank) + "'s state" +
            (identity.size() == 2 ? " (it was written by rank " + std::to_string(identity[0]) + " of " +
                                        std::to_string(identity[1]) + ")"
                                  : " (its identity section is malformed)") +
            ": checkpoint files swapped or copied between ranks? Put each rank-R file back where rank R wrote it");
      }
      RunState state;
      state.load(ckpt);
      try {
        state.check_position(expected.per_epoch, c.epochs);
      } catch (const InvalidData& e) {
        throw InvalidData(path + ": " + e.what());
      }
      usable.push_back({std::move(state), std::move(ckpt)});
    } catch (const InvalidData& e) {
      note_problem(problems, e.what());
      note_problem(damage, e.what());
    } catch (const InvalidArgument& e) {
      if (fs::exists(path)) throw;  // options that do not match: no other checkpoint can help
      note_problem(problems, e.what());
    }
  }
  // A damaged or edited file is said now, before the collective below: if the resume fails, the
  // error reported is rank 0's (which names its own reasons), and another rank may be stopped by it
  // before it could speak. Missing files show in that error's list of the iterations each rank holds.
  if (rank != 0 && !damage.empty()) std::fprintf(stderr, "sparsgd: warning: rank %d: %s\n", rank, damage.c_str());
  // Every rank learns every rank's iterations (two slots each, 0 for none, else iteration + 1).
  std::vector<double> slots(2 * static_cast<std::size_t>(p), 0.0);
  for (std::size_t i = 0; i < usable.size(); ++i) {
    slots[2 * static_cast<std::size_t>(rank) + i] = static_cast<double>(usable[i].state.step) + 1.0;
  }
  collectives::allreduce_sum(base, slots);
  const auto slot = [&slots](int r, int i) { return slots[2 * static_cast<std::size_t>(r) + static_cast<std::size_t>(i)]; };
  std::optional<std::uint64_t> common;
  std::ostringstream held;
  for (int r = 0; r < p; ++r) {
    held << (r ? "; " : "") << "rank " << r << ":";
    for (int i = 0; i < 2; ++i) {
      if (slot(r, i) > 0) held << ' ' << static_cast<std::uint64_t>(slot(r, i) - 1);
    }
  }
  for (int i = 0; i < 2; ++i) {
    const double candidate = slot(0, i);
    if (candidate <= 0) continue;
    bool everywhere = true;
    for (int r = 1; r < p && everywhere; ++r) everywhere = slot(r, 0) == candidate || slot(r, 1) == candidate;
    if (everywhere && (!common || static_cast<std::uint64_t>(candidate - 1) > *common)) {
      common = static_cast<std::uint64_t>(candidate - 1);
    }
  }
  if (!common) {
    std::ostringstream message;
    message << "cannot resume from " << c.resume_dir << " with " << p
            << " workers: no iteration has a complete checkpoint on every rank (iterations held: " << held.str() << ")";
    if (!problems.empty()) message << "; rank " << rank << ": " << problems;
    throw InvalidData(message.str());
  }
  ResumePoint point;
  std::string agreed;
  for (auto& u : usable) {
    if (u.state.step != *common) continue;
    point.checkpoint = std::move(u.checkpoint);
    agreed = u.state.summary_for_agreement();
  }
  // Each rank's position and results at that iteration were checked on their own; together they
  // must be one run's (a checkpoint edited on one rank only, or files from two runs mixed).
  collectives::check_ranks_agree(base, {{"resumed run state", agreed}},
                                 "the checkpoints in " + c.resume_dir + " at iteration " + std::to_string(*common));
  if (!problems.empty() || usable.front().state.step != *common) {
    std::ostringstream warning;
    warning << "rank " << rank << " resumes from its previous checkpoint (iteration " << *common << ")";
    if (problems.empty()) {
      warning << ", the newest that every rank holds";
    } else if (rank == 0 || damage.empty()) {
      warning << ": " << problems;
    } else {
      warning << ", passing over what it said above";
    }
    point.warning = warning.str();
  }
  return point;
}

}  // namespace sparsgd::torch_layer
