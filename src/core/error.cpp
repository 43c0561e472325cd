#include "sparsgd/core/error.hpp"

namespace sparsgd::detail {

void throw_enforce(const char* kind, const char* expr, const std::string& operands,
                   const std::string& message) {
  std::string text = message;
  text += " (check failed: ";
  text += expr;
  if (!operands.empty()) {
    text += ", got ";
    text += operands;
  }
  text += ")";
  if (std::string(kind) == "data") throw InvalidData(text);
  throw InvalidArgument(text);
}

}  // namespace sparsgd::detail
