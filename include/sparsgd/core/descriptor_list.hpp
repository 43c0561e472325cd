#pragma once
// What every registry of named descriptors (compressors, aggregators) answers alike: the names
// joined for a sentence, a lookup that names the known ones when it fails, and help texts.
// A descriptor here is anything with `name` and `summary` (std::string_view).

#include <string>
#include <string_view>
#include <vector>

namespace sparsgd {

// "a", "a or b", "a, b or c".
inline std::string name_list(const std::vector<std::string_view>& names, std::string_view last = " or ") {
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? std::string(last) : std::string(", ");
    list += names[i];
  }
  return list;
}

// The names of the descriptors `accept` takes, joined for a sentence.
template <class Descriptor, class Accept>
std::string descriptor_choices(const std::vector<const Descriptor*>& all, Accept accept) {
  std::vector<std::string_view> names;
  for (const Descriptor* d : all) {
    if (accept(*d)) names.push_back(d->name);
  }
  return name_list(names);
}

// Every name, as strings (for the Python package and the tests).
template <class Descriptor>
std::vector<std::string> descriptor_names(const std::vector<const Descriptor*>& all) {
  std::vector<std::string> names;
  for (const Descriptor* d : all) names.emplace_back(d->name);
  return names;
}

// "one of:\n  name: summary" for each, in registry order; `more` adds to a descriptor's line.
template <class Descriptor>
std::string descriptor_help(const std::vector<const Descriptor*>& all,
                            std::string (*more)(const Descriptor&) = nullptr) {
  std::string help = "one of:";
  for (const Descriptor* d : all) {
    help += "\n  " + std::string(d->name) + ": " + std::string(d->summary) + (more ? more(*d) : std::string());
  }
  return help;
}

// The descriptor called `name` (or `alias`, where a descriptor has one), or null.
template <class Descriptor>
const Descriptor* find_descriptor(const std::vector<const Descriptor*>& all, std::string_view name) {
  for (const Descriptor* d : all) {
    if (d->name == name) return d;
    if constexpr (requires { d->alias; }) {
      if (!d->alias.empty() && d->alias == name) return d;
    }
  }
  return nullptr;
}

}  // namespace sparsgd
