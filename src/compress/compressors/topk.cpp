// topk: the exactly k largest |acc|, ties broken by the lower index (select/topk.hpp).

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::compress {
namespace {

class TopkCompressor final : public Compressor {
 public:
  std::string name() const override { return "topk"; }
  void compress(std::span<const float> acc, std::size_t k, const CompressContext&, SparseVector& out) override {
    select::topk(acc, k, out, workspace_);
  }

 private:
  select::TopkWorkspace workspace_;
};

}  // namespace

const CompressorDescriptor& topk_compressor() {
  static const CompressorDescriptor descriptor{
      .name = "topk",
      .summary = "the exactly k largest |acc|, ties to the lower index",
      .properties = {},
      .make = [](const CompressorConfig&) -> std::unique_ptr<Compressor> { return std::make_unique<TopkCompressor>(); },
  };
  return descriptor;
}

}  // namespace sparsgd::compress
