#include "sparsgd/collectives/rank_agreement.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/error.hpp"
#include "collectives/blocks/tags.hpp"

namespace sparsgd::collectives {
namespace {

const int kGatherTag = tag_block(TagUser::rank_agreement)[tag_offsets::kAgreementGather];
const int kVerdictTag = tag_block(TagUser::rank_agreement)[tag_offsets::kAgreementVerdict];
const int kTextTag = tag_block(TagUser::rank_agreement)[tag_offsets::kAgreementText];
constexpr std::size_t kMaxBytes = 1 << 20;

// name '\0' value '\0' ... : names and values may hold any other byte.
std::string encode(const ConfigFields& fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    out += name;
    out += '\0';
    out += value;
    out += '\0';
  }
  return out;
}

ConfigFields decode(const std::string& text, int from) {
  ConfigFields fields;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto name_end = text.find('\0', at);
    const auto value_end = name_end == std::string::npos ? name_end : text.find('\0', name_end + 1);
    if (value_end == std::string::npos) {
      throw transport::TransportError("rank " + std::to_string(from) + " sent a malformed configuration");
    }
    fields.emplace_back(text.substr(at, name_end - at), text.substr(name_end + 1, value_end - name_end - 1));
    at = value_end + 1;
  }
  return fields;
}

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

// Empty if `all` agree with rank 0, else what the first difference is.
std::string compare(const std::vector<ConfigFields>& all) {
  const ConfigFields& mine = all[0];
  for (std::size_t f = 0;; ++f) {
    // Group the ranks by the value they hold for field f (or by a missing or renamed field).
    std::map<std::string, std::vector<int>> by_value;
    // The field's name: rank 0's, or the first rank's that has one.
    const auto holder = std::find_if(all.begin(), all.end(), [f](const ConfigFields& c) { return f < c.size(); });
    if (holder == all.end()) return {};
    const std::string& name = (*holder)[f].first;
    for (std::size_t r = 0; r < all.size(); ++r) {
      std::string value = "(missing)";
      if (f < all[r].size()) {
        value = all[r][f].first == name ? all[r][f].second : "(a field named '" + all[r][f].first + "')";
      }
      by_value[value].push_back(static_cast<int>(r));
    }
    if (by_value.size() == 1) continue;
    const std::string reference = f < mine.size() ? mine[f].second : "(missing)";
    std::string message = "'" + name + "': " + reference + " on rank 0";
    for (const auto& [value, ranks] : by_value) {
      if (ranks[0] == 0) continue;
      message += ", " + value + " on rank" + (ranks.size() > 1 ? "s " : " ");
      for (std::size_t i = 0; i < ranks.size(); ++i) message += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return message;
  }
}

}  // namespace

std::string field_value(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

void check_ranks_agree(transport::Transport& t, const ConfigFields& given, const std::string& what) {
  // The build comes first: two builds may read each other's messages or options differently, so
  // a job that mixes them (a node left on an older install) stops here, naming both.
  ConfigFields fields = {{"sparsgd build", build_identity()}};
  fields.insert(fields.end(), given.begin(), given.end());
  const std::string mine = encode(fields);
  SPARSGD_ENFORCE_LE(mine.size(), kMaxBytes, "configuration too long to compare");
  std::string verdict;
  std::vector<std::byte> buffer;
  if (t.rank() == 0) {
    std::vector<ConfigFields> all = {fields};
    for (int r = 1; r < t.size(); ++r) {
      const std::size_t n = t.recv(r, kGatherTag, buffer, kMaxBytes);
      all.push_back(decode(std::string(reinterpret_cast<const char*>(buffer.data()), n), r));
    }
    verdict = compare(all);
    for (int r = 1; r < t.size(); ++r) t.send(r, kVerdictTag, bytes_of(verdict));
  } else {
    t.send(0, kGatherTag, bytes_of(mine));
    const std::size_t n = t.recv(0, kVerdictTag, buffer, kMaxBytes);
    verdict.assign(reinterpret_cast<const char*>(buffer.data()), n);
  }
  if (!verdict.empty()) throw InvalidArgument("ranks disagree on " + what + ": " + verdict);
}

std::string broadcast_text(transport::Transport& t, const std::string& text) {
  if (t.rank() == 0) {
    SPARSGD_ENFORCE_LE(text.size(), kMaxBytes, "text too long to broadcast");
    for (int r = 1; r < t.size(); ++r) t.send(r, kTextTag, bytes_of(text));
    return text;
  }
  std::vector<std::byte> buffer;
  const std::size_t n = t.recv(0, kTextTag, buffer, kMaxBytes);
  return std::string(reinterpret_cast<const char*>(buffer.data()), n);
}

}  // namespace sparsgd::collectives
