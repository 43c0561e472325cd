#include "sparsgd/compress/compressor.hpp"

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/descriptor_list.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::compress {

const std::vector<std::string>& compressor_names() {
  static const std::vector<std::string> names = descriptor_names(compressor_descriptors());
  return names;
}

void Compressor::draw_positions(std::size_t, std::size_t, const CompressContext&, std::span<std::uint32_t>) const {
  throw InvalidArgument("the " + name() + " compressor draws no random positions");
}

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& config) {
  return find_compressor(config.name).make(config);
}

}  // namespace sparsgd::compress
