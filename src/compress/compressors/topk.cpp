// topk: the exactly k largest |acc|, ties broken by the lower index (select/topk.hpp).

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::compress {

const CompressorDescriptor& topk_compressor();

namespace {

class TopkCompressor final : public DescribedCompressor<topk_compressor> {
 public:
  void compress(std::span<const float> acc, std::size_t k, const CompressContext&, SparseVector& out) override {
    select::topk(acc, k, out, workspace_);
  }

 private:
  select::TopkWorkspace workspace_;
};

}  // namespace

const CompressorDescriptor& topk_compressor() {
  static const CompressorDescriptor descriptor{.name = "topk", .summary = "the exactly k largest |acc|, ties to the lower index",
                                               .properties = {}, .make = construct<TopkCompressor>};
  return descriptor;
}

}  // namespace sparsgd::compress
