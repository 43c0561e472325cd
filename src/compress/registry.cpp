// The list of compressors: one line per compressor, in the order help texts name them. Each
// line names the descriptor function its file defines (NAME_compressor(), src/compress/compressors/).

#include "sparsgd/compress/descriptor.hpp"

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/descriptor_list.hpp"

#define SPARSGD_COMPRESSORS(X) \
  X(topk)                      \
  X(topk_reuse)                \
  X(randk)                     \
  X(randk_unbiased)            \
  X(rtopk)                     \
  X(gaussiank)                 \
  X(dgc)                       \
  X(none)

namespace sparsgd::compress {

#define SPARSGD_DECLARE(id) const CompressorDescriptor& id##_compressor();
SPARSGD_COMPRESSORS(SPARSGD_DECLARE)
#undef SPARSGD_DECLARE

const std::vector<const CompressorDescriptor*>& compressor_descriptors() {
#define SPARSGD_ENTRY(id) &id##_compressor(),
  static const std::vector<const CompressorDescriptor*> all = {SPARSGD_COMPRESSORS(SPARSGD_ENTRY)};
#undef SPARSGD_ENTRY
  return all;
}

const CompressorDescriptor& find_compressor(std::string_view name) {
  if (const CompressorDescriptor* d = find_descriptor(compressor_descriptors(), name)) return *d;
  throw InvalidArgument("unknown compressor '" + std::string(name) + "' (expected " + compressor_choices() + ")");
}

std::string compressor_choices() {
  return compressor_choices([](const CompressorDescriptor&) { return true; });
}

std::string compressor_choices(bool (*accept)(const CompressorDescriptor&)) {
  return descriptor_choices(compressor_descriptors(), accept);
}

std::vector<std::pair<std::string_view, bool>> property_values(const CompressorProperties& p) {
  return {{"exact_count", p.exact_count}, {"draws_indices", p.draws_indices}, {"scales_values", p.scales_values},
          {"dense", p.dense}, {"uses_r_factor", p.uses_r_factor}};
}

std::string compressor_help() { return descriptor_help(compressor_descriptors()); }

}  // namespace sparsgd::compress
