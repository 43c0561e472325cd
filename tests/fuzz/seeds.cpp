// Writes the seed corpora of the fuzz targets from real encoder output:
//   fuzz_seeds DIR   ->  DIR/wire/seed-*  and  DIR/checkpoint/seed-*
// The seeds in tests/fuzz/corpus were made with it (scripts/fuzz.sh --write-seeds); the fuzzer
// starts from valid messages and files and mutates them, instead of discovering the format.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "checkpoint_input.hpp"
#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/core/wire.hpp"
#include "wire_input.hpp"

namespace sparsgd::fuzz {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// One fuzz_wire input: control bytes for (mode, expectation), then the message.
void wire_seed(const fs::path& dir, const std::string& name, Mode mode, const wire::Expectation& e,
               std::size_t expected, const std::vector<std::byte>& message) {
  std::vector<std::byte> input(kControlBytes);
  write_control(mode, e, expected, reinterpret_cast<std::uint8_t*>(input.data()));
  input.insert(input.end(), message.begin(), message.end());
  write_file(dir / ("seed-" + name), input);
}

void write_wire_seeds(const fs::path& dir) {
  constexpr std::uint32_t kAlgorithm = 3;
  const auto expect = [](std::uint32_t n, std::uint32_t k, std::size_t capacity) {
    return wire::Expectation{kAlgorithm, n, k, capacity, 1, "seed"};
  };
  std::vector<std::byte> m;
  // Sparse, as the gtopk reduce and allgather send them (no mask), and as the broadcasts (mask).
  wire::encode_sparse(kAlgorithm, 100, 4, std::vector<std::uint32_t>{}, std::vector<float>{}, {}, m);
  wire_seed(dir, "sparse-empty", Mode::kSparse, expect(100, 4, 4), 0, m);
  wire::encode_sparse(kAlgorithm, 100, 4, std::vector<std::uint32_t>{1, 5, 99}, std::vector<float>{1.5f, -2.0f, 0.0f},
                      {}, m);
  wire_seed(dir, "sparse-3", Mode::kSparse, expect(100, 4, 4), 0, m);
  const std::vector<std::byte> three = m;
  const std::vector<float> odd = {-0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                                  -std::numeric_limits<float>::max(), 1e-30f};
  wire::encode_sparse(kAlgorithm, 60000, 5, std::vector<std::uint32_t>{0, 1, 2, 30000, 59999}, odd, {}, m);
  wire_seed(dir, "sparse-extreme-values", Mode::kSparse, expect(60000, 5, 8), 0, m);
  wire::encode_sparse(kAlgorithm, 100, 4, std::vector<std::uint32_t>{1, 5, 99}, std::vector<float>{1.5f, -2.0f, 0.0f},
                      std::vector<std::uint8_t>{1, 0, 1}, m);
  wire_seed(dir, "sparse-mask3", Mode::kSparseMask, expect(100, 4, 4), 3, m);
  wire::encode_sparse(kAlgorithm, 1000, 9, std::vector<std::uint32_t>{3, 4, 8, 9, 100, 200, 300, 400, 999},
                      std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, std::vector<std::uint8_t>{1, 1, 0, 0, 1, 0, 1, 1, 1},
                      m);
  wire_seed(dir, "sparse-mask9", Mode::kSparseMask, expect(1000, 9, 9), 9, m);
  // Three messages back to back, as allgather concatenates the blocks it forwards.
  std::vector<std::byte> stream = three;
  wire::encode_sparse(kAlgorithm, 100, 4, std::vector<std::uint32_t>{0, 2, 4, 6}, std::vector<float>{1, 2, 3, 4}, {},
                      m);
  stream.insert(stream.end(), m.begin(), m.end());
  wire::encode_sparse(kAlgorithm, 100, 4, std::vector<std::uint32_t>{}, std::vector<float>{}, {}, m);
  stream.insert(stream.end(), m.begin(), m.end());
  wire_seed(dir, "stream-3", Mode::kStream, expect(100, 4, 4), 0, stream);
  // Dense chunks of the ring allreduce; `extra` carries a checksum there.
  wire::encode_dense(kAlgorithm, 100, 4, std::vector<float>{0.5f, -1.0f, 2.0f, 0.0f, 3.25f}, 0xDEADBEEFu, m);
  wire_seed(dir, "dense-5", Mode::kDense, expect(100, 4, 5), 5, m);
  wire::encode_dense(kAlgorithm, 100, 4, std::vector<float>{}, 0, m);
  wire_seed(dir, "dense-empty", Mode::kDense, expect(100, 4, 5), 0, m);
  // Compressed indices: packed gaps (sparse: a short block; and two full blocks of 512 and a tail),
  // a bitmap (dense), raw (tiny), with and without a mask.
  const auto coded = [&](std::uint32_t n, std::uint32_t k, std::size_t capacity) {
    wire::Expectation e = expect(n, k, capacity);
    e.index_coding = wire::IndexCoding::compressed;
    return e;
  };
  constexpr auto kCoded = wire::IndexCoding::compressed;
  std::vector<std::uint32_t> spread;
  std::vector<float> spread_values;
  for (std::uint32_t i = 0; i < 40; ++i) {
    spread.push_back(i * 1000 + (i * 37) % 1000);
    spread_values.push_back(static_cast<float>(i) - 20.5f);
  }
  wire::encode_sparse(kAlgorithm, 40000, 40, spread, spread_values, {}, m, kCoded);
  wire_seed(dir, "coded-packed-40", Mode::kSparse, coded(40000, 40, 40), 0, m);
  const std::vector<std::byte> packed = m;
  std::vector<std::uint32_t> blocks;
  std::vector<float> block_values;
  for (std::uint32_t i = 0; i < 1100; ++i) {
    blocks.push_back(i * 1800 + (i * 7919) % 1800);
    block_values.push_back(static_cast<float>(i % 13) - 6.0f);
  }
  wire::encode_sparse(kAlgorithm, 2000000, 1100, blocks, block_values, {}, m, kCoded);
  wire_seed(dir, "coded-packed-blocks", Mode::kSparse, coded(2000000, 1100, 1100), 0, m);
  std::vector<std::uint8_t> every_other(spread.size());
  for (std::size_t i = 0; i < every_other.size(); i += 2) every_other[i] = 1;
  wire::encode_sparse(kAlgorithm, 40000, 40, spread, spread_values, every_other, m, kCoded);
  wire_seed(dir, "coded-packed-mask", Mode::kSparseMask, coded(40000, 40, 40), spread.size(), m);
  wire::encode_sparse(kAlgorithm, 16, 9, std::vector<std::uint32_t>{0, 1, 2, 3, 5, 8, 13, 14, 15},
                      std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {}, m, kCoded);
  wire_seed(dir, "coded-bitmap", Mode::kSparse, coded(16, 9, 9), 0, m);
  wire::encode_sparse(kAlgorithm, 4000000, 1, std::vector<std::uint32_t>{3999999}, std::vector<float>{-1.0f}, {}, m,
                      kCoded);
  wire_seed(dir, "coded-raw", Mode::kSparse, coded(4000000, 1, 1), 0, m);
  std::vector<std::byte> coded_stream = packed;
  wire::encode_sparse(kAlgorithm, 40000, 40, std::vector<std::uint32_t>{}, std::vector<float>{}, {}, m, kCoded);
  coded_stream.insert(coded_stream.end(), m.begin(), m.end());
  coded_stream.insert(coded_stream.end(), packed.begin(), packed.end());
  wire_seed(dir, "coded-stream-3", Mode::kStream, coded(40000, 40, 40), 0, coded_stream);
}

void checkpoint_seed(const fs::path& dir, const std::string& name, const Checkpoint& c) {
  const std::string file = encode_checkpoint(c);
  write_file(dir / ("seed-" + name), std::as_bytes(std::span(file.data(), file.size())));
}

void write_checkpoint_seeds(const fs::path& dir) {
  checkpoint_seed(dir, "empty", Checkpoint{});
  Checkpoint each;  // one section of each type
  each.floats["p"] = {1.0f, -2.5f, 3.0f};
  each.doubles["h"] = {0.25, 1e300};
  each.integers["pos"] = {1, 2, 3};
  each.texts["config"] = "cnn|topk";
  checkpoint_seed(dir, "each-type", each);
  Checkpoint edge;  // empty names and sections
  edge.floats[""] = {};
  edge.texts["t"] = "";
  edge.doubles["nan"] = {std::numeric_limits<double>::quiet_NaN(), -0.0};
  checkpoint_seed(dir, "empty-sections", edge);
  // Shaped like the trainer's (torch/trainer.cpp), scaled down.
  Checkpoint trainer;
  trainer.texts["config"] = "model=mlp workers=2 compressor=topk aggregator=gtopk density=0.01 seed=1";
  std::vector<float> parameters(64);
  for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i] = 0.01f * static_cast<float>(i) - 0.3f;
  trainer.floats["parameters"] = parameters;
  trainer.floats["buffers"] = {0.0f, 1.0f};
  trainer.floats["velocity"] = std::vector<float>(16, 0.125f);
  trainer.floats["local_velocity"] = std::vector<float>(16, -0.125f);
  trainer.floats["residual-0"] = std::vector<float>(16, 1e-3f);
  trainer.floats["residual-1"] = std::vector<float>(16, -1e-3f);
  trainer.integers["position"] = {0, 30, 30, 123456};
  trainer.doubles["totals"] = {12.5, 0.75, 3.0};
  trainer.doubles["history"] = {0.0, 1.0, 0.5, 0.8};
  checkpoint_seed(dir, "trainer", trainer);
}

}  // namespace
}  // namespace sparsgd::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR   (writes DIR/wire/seed-* and DIR/checkpoint/seed-*)\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir / "wire");
  std::filesystem::create_directories(dir / "checkpoint");
  sparsgd::fuzz::write_wire_seeds(dir / "wire");
  sparsgd::fuzz::write_checkpoint_seeds(dir / "checkpoint");
  return 0;
}
