#include "run_state.hpp"

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

void RunState::save(Checkpoint& checkpoint) const {
  fields(*this, [&](const char* name, const auto& value) {
    put(checkpoint, name, std::vector<std::decay_t<decltype(value)>>{value});
  });
  const EpochResult example;
  epoch_result_fields(example, [&](const char* name, const auto& column) {
    using T = std::decay_t<decltype(column)>;
    std::vector<T> values;
    for (const auto& e : history) {
      epoch_result_fields(e, [&](const char* other, const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, T>) {
          if (std::string(other) == name) values.push_back(value);
        }
      });
    }
    put(checkpoint, std::string("history.") + name, values);
  });
}

void RunState::load(const Checkpoint& checkpoint) {
  fields(*this, [&](const char* name, auto& value) {
    using T = std::decay_t<decltype(value)>;
    const auto v = get<T>(checkpoint, name);
    if (v.size() != 1) throw InvalidData(std::string("checkpoint section ") + name + " is malformed");
    value = v.front();
  });
  history.clear();
  std::size_t epochs = 0;
  bool first = true;
  EpochResult probe;
  epoch_result_fields(probe, [&](const char* name, auto& column) {
    using T = std::decay_t<decltype(column)>;
    const auto values = get<T>(checkpoint, std::string("history.") + name);
    if (first) {
      epochs = values.size();
      history.resize(epochs);
      first = false;
    }
    if (values.size() != epochs) throw InvalidData(std::string("checkpoint section history.") + name + " is malformed");
    for (std::size_t i = 0; i < epochs; ++i) {
      epoch_result_fields(history[i], [&](const char* other, auto& field) {
        if constexpr (std::is_same_v<std::decay_t<decltype(field)>, T>) {
          if (std::string(other) == name) field = values[i];
        }
      });
    }
  });
}

std::uint64_t RunState::step_of(const Checkpoint& checkpoint) {
  const auto& v = checkpoint.integer_section("run.step");
  if (v.size() != 1) throw InvalidData("checkpoint section run.step is malformed");
  return v.front();
}

}  // namespace sparsgd::torch_layer
