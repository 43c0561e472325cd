#pragma once
// One descriptor per compressor, beside the aggregators' (collectives/descriptor.hpp): its name,
// one line of help, what its selection guarantees and its factory, in the file that implements it
// (src/compress/compressors/). Help texts, validation, the Python package and the tests read the
// descriptors, so adding a compressor means one new file and one line in the registry
// (src/compress/registry.cpp).

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sparsgd/compress/compressor.hpp"

namespace sparsgd::compress {

// What a compressor's design means for the code around it.
struct CompressorProperties {
  // Exactly k entries (otherwise within [ceil(0.8k), floor(1.25k)], select/threshold.hpp).
  bool exact_count = true;
  // It draws its indices at random from (seed, iteration, rank); with a shared seed every worker
  // draws the same ones, which an aggregator that sums k values in place needs (randk-shared).
  bool draws_indices = false;
  // The values it sends are acc's scaled (an unbiased estimator): error feedback cannot account
  // for them, so it runs without.
  bool scales_values = false;
  // It selects all n entries (the dense S-SGD baseline): only an aggregator with a dense result
  // takes it.
  bool dense = false;
  // It reads CompressorConfig::r_factor (a run reports its r_factor only then).
  bool uses_r_factor = false;
};

// Its properties by name, for the front ends that print or return them all.
std::vector<std::pair<std::string_view, bool>> property_values(const CompressorProperties& properties);

struct CompressorDescriptor {
  std::string_view name;
  std::string_view summary;  // one line for help texts
  CompressorProperties properties;
  // Validates the options it reads (CompressorConfig) and throws InvalidArgument naming them.
  std::unique_ptr<Compressor> (*make)(const CompressorConfig& config) = nullptr;
  std::string_view alias = {};  // another name it answers to ("dense" for none), never listed
};

// The factory of a compressor class: constructed from the configuration where it takes it.
template <class T>
std::unique_ptr<Compressor> construct(const CompressorConfig& config) {
  if constexpr (std::is_constructible_v<T, const CompressorConfig&>) {
    return std::make_unique<T>(config);
  } else {
    return std::make_unique<T>();
  }
}

// The base of a compressor class that reports the name of its descriptor (Describe: the function
// its file defines), so that the name is written once.
template <const CompressorDescriptor& (*Describe)()>
class DescribedCompressor : public Compressor {
 public:
  std::string name() const final { return std::string(Describe().name); }
};

// Every compressor, in the order help texts list them.
const std::vector<const CompressorDescriptor*>& compressor_descriptors();

// Throws InvalidArgument naming the known compressors.
const CompressorDescriptor& find_compressor(std::string_view name);

// "topk, topk-reuse, ... or none", for help texts and errors; with a predicate, only those it
// accepts ("randk or randk-unbiased").
std::string compressor_choices();
std::string compressor_choices(bool (*accept)(const CompressorDescriptor&));

// --compressor's help: each name with its summary.
std::string compressor_help();

}  // namespace sparsgd::compress
