#include "sparsgd/compress/compressor.hpp"

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/descriptor_list.hpp"

namespace sparsgd::compress {

const std::vector<std::string>& compressor_names() {
  static const std::vector<std::string> names = descriptor_names(compressor_descriptors());
  return names;
}

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& config) {
  return find_compressor(config.name).make(config);
}

}  // namespace sparsgd::compress
