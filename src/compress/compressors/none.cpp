// none: every entry, for the dense S-SGD baseline (an aggregator with a dense result takes it).

#include <algorithm>
#include <numeric>

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/select/magnitude.hpp"

namespace sparsgd::compress {

const CompressorDescriptor& none_compressor();

namespace {

class DenseCompressor final : public DescribedCompressor<none_compressor> {
 public:
  bool dense() const override { return true; }
  void compress(std::span<const float> acc, std::size_t k, const CompressContext&, SparseVector& out) override {
    validate_k(acc.size(), k);
    select::check_finite(acc, "input to the dense compressor");
    out.dim = acc.size();
    out.resize(acc.size());
    std::iota(out.indices.begin(), out.indices.end(), std::uint32_t{0});
    std::copy(acc.begin(), acc.end(), out.values.begin());
  }
};

}  // namespace

const CompressorDescriptor& none_compressor() {
  static const CompressorDescriptor descriptor{.name = "none", .summary = "all n entries (dense S-SGD; with --aggregator dense)",
                                               .properties = {.dense = true}, .make = construct<DenseCompressor>,
                                               .alias = "dense"};
  return descriptor;
}

}  // namespace sparsgd::compress
