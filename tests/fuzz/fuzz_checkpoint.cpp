// libFuzzer target for the checkpoint loader (core/checkpoint.hpp): `--resume` reads files that
// may be truncated, corrupted or not checkpoints at all, so decode_checkpoint must refuse them with
// InvalidData and never read out of bounds or allocate more than the file justifies.
//
// Each input is decoded twice: as it is (the header, length and checksum checks), and repaired
// (length and checksum recomputed, checkpoint_input.hpp) so that mutations reach the section parser.
// Only InvalidData is caught: anything else escapes and counts as a crash. A checkpoint that decodes
// must survive encode -> decode unchanged (bit for bit: NaN payloads included), encode to a file of
// the same size (the sections may come in another order, but each is parsed exactly once), and
// encode -> decode -> encode must be a fixed point.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "checkpoint_input.hpp"
#include "invariant.hpp"
#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::fuzz {
namespace {

// Bitwise equality of two maps of vectors (operator== would call NaN != NaN).
template <typename Map>
bool same_sections(const Map& a, const Map& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
    if (i->first != j->first || i->second.size() != j->second.size()) return false;
    const std::size_t bytes = i->second.size() * sizeof(i->second[0]);
    if (bytes != 0 && std::memcmp(i->second.data(), j->second.data(), bytes) != 0) return false;
  }
  return true;
}

bool same(const Checkpoint& a, const Checkpoint& b) {
  return same_sections(a.floats, b.floats) && same_sections(a.doubles, b.doubles) &&
         same_sections(a.integers, b.integers) && same_sections(a.texts, b.texts);
}

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

void decode(std::span<const std::byte> file) {
  Checkpoint c;
  try {
    c = decode_checkpoint(file, "fuzz-input");
  } catch (const InvalidData&) {
    return;
  }
  const std::string encoded = encode_checkpoint(c);
  FUZZ_REQUIRE(encoded.size() == file.size());
  const Checkpoint again = decode_checkpoint(bytes_of(encoded), "re-encoded");  // must not throw
  FUZZ_REQUIRE(same(c, again));
  FUZZ_REQUIRE(encode_checkpoint(again) == encoded);
}

}  // namespace
}  // namespace sparsgd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparsgd::fuzz;
  const auto file = std::as_bytes(std::span(data, size));
  decode(file);
  const std::vector<std::byte> repaired = repair_checkpoint(file);
  if (!repaired.empty()) decode(repaired);
  return 0;
}
