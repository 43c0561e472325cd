#pragma once
// Names joined for a sentence: "a", "a or b", "a, b or c" (help texts and errors).

#include <string>
#include <string_view>
#include <vector>

namespace sparsgd {

inline std::string name_list(const std::vector<std::string_view>& names, std::string_view last = " or ") {
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? std::string(last) : std::string(", ");
    list += names[i];
  }
  return list;
}

}  // namespace sparsgd
