#include "sparsgd/compress/compressor.hpp"

#include "sparsgd/compress/descriptor.hpp"

namespace sparsgd::compress {

const std::vector<std::string>& compressor_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const CompressorDescriptor* d : compressor_descriptors()) all.emplace_back(d->name);
    return all;
  }();
  return names;
}

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& config) {
  return find_compressor(config.name).make(config);
}

}  // namespace sparsgd::compress
