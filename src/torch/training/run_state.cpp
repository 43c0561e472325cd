#include "run_state.hpp"

#include <sstream>
#include <string>
#include <type_traits>

#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {
namespace {

// Integers (counts, positions) are kept exactly as uint64, reals as float64.
template <typename T>
void put(Checkpoint& c, const std::string& name, const std::vector<T>& values) {
  if constexpr (std::is_floating_point_v<T>) {
    c.doubles[name] = values;
  } else {
    c.integers[name] = std::vector<std::uint64_t>(values.begin(), values.end());
  }
}

template <typename T>
std::vector<T> get(const Checkpoint& c, const std::string& name) {
  if constexpr (std::is_floating_point_v<T>) {
    return c.double_section(name);
  } else {
    const auto& v = c.integer_section(name);
    return std::vector<T>(v.begin(), v.end());
  }
}

}  // namespace

// History: one section per column of epoch_result_fields, one element per epoch.
void RunState::save(Checkpoint& checkpoint) const {
  fields(*this, [&](const char* name, const auto& value) {
    put(checkpoint, name, std::vector<std::decay_t<decltype(value)>>{value});
  });
  const EpochResult columns;
  epoch_result_fields(columns, [&](const char* name, const auto& value) {
    put(checkpoint, std::string("history.") + name, std::vector<std::decay_t<decltype(value)>>{});
  });
  for (const auto& e : history) {
    epoch_result_fields(e, [&](const char* name, const auto& value) {
      if constexpr (std::is_floating_point_v<std::decay_t<decltype(value)>>) {
        checkpoint.doubles[std::string("history.") + name].push_back(value);
      } else {
        checkpoint.integers[std::string("history.") + name].push_back(static_cast<std::uint64_t>(value));
      }
    });
  }
}

void RunState::load(const Checkpoint& checkpoint) {
  fields(*this, [&](const char* name, auto& value) {
    const auto v = get<std::decay_t<decltype(value)>>(checkpoint, name);
    if (v.size() != 1) throw InvalidData(std::string("checkpoint section ") + name + " is malformed");
    value = v.front();
  });
  history.assign(checkpoint.integer_section("history.epoch").size(), EpochResult{});
  for (std::size_t i = 0; i < history.size(); ++i) {
    epoch_result_fields(history[i], [&](const char* name, auto& field) {
      using T = std::decay_t<decltype(field)>;
      const std::string section = std::string("history.") + name;
      const std::size_t rows = std::is_floating_point_v<T> ? checkpoint.double_section(section).size()
                                                           : checkpoint.integer_section(section).size();
      if (rows != history.size()) throw InvalidData("checkpoint section " + section + " is malformed");
      if constexpr (std::is_floating_point_v<T>) {
        field = checkpoint.double_section(section)[i];
      } else {
        field = static_cast<T>(checkpoint.integer_section(section)[i]);
      }
    });
  }
}

void RunState::check_position(std::uint64_t per_epoch, int epochs) const {
  const auto fail = [&](const std::string& why) {
    throw InvalidData("its run state does not add up (" + why + "; run.epoch " + std::to_string(epoch) +
                      ", run.next_iteration " + std::to_string(next_iteration) + ", run.step " + std::to_string(step) +
                      ", " + std::to_string(history.size()) + " epochs recorded, " + std::to_string(per_epoch) +
                      " iterations an epoch): was it edited?");
  };
  if (epoch < 0 || epoch >= epochs) fail("run.epoch is not one of the run's " + std::to_string(epochs) + " epochs");
  if (next_iteration > per_epoch) fail("run.next_iteration is beyond the epoch's end");
  if (step != static_cast<std::uint64_t>(epoch) * per_epoch + next_iteration) {
    fail("run.step is not run.epoch x iterations an epoch + run.next_iteration");
  }
  if (history.size() != static_cast<std::size_t>(epoch)) fail("the epochs recorded are not the epochs finished");
  for (std::size_t i = 0; i < history.size(); ++i) {
    if (history[i].epoch != static_cast<int>(i) || history[i].iterations != (i + 1) * per_epoch) {
      fail("history row " + std::to_string(i) + " is not epoch " + std::to_string(i) + " ending at iteration " +
           std::to_string((i + 1) * per_epoch));
    }
  }
  if (skipped_steps > step) fail("run.skipped_steps exceeds run.step");
  if (!(epoch_batches >= 0.0 && epoch_batches <= static_cast<double>(next_iteration))) {
    fail("run.epoch_batches is not a count of this epoch's batches");
  }
}

std::string RunState::summary_for_agreement() const {
  std::ostringstream line;
  line.precision(17);
  line << "epoch " << epoch << ", next iteration " << next_iteration << ", step " << step << ", history";
  for (const auto& e : history) line << ' ' << e.iterations << ':' << e.test_loss << ':' << e.test_accuracy;
  return line.str();
}

std::uint64_t RunState::step_of(const Checkpoint& checkpoint) {
  const auto& v = checkpoint.integer_section("run.step");
  if (v.size() != 1) throw InvalidData("checkpoint section run.step is malformed");
  return v.front();
}

}  // namespace sparsgd::torch_layer
