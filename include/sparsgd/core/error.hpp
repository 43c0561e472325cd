#pragma once
// Errors of the library. Everything that comes from outside (options, data, messages from peers)
// is checked, and a failed check throws one of these with a message that names the operands.

#include <sstream>
#include <stdexcept>
#include <string>

namespace sparsgd {

// Base of every exception the library throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed a value outside the documented domain (density, k, sizes, names...).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// Data that the library was asked to process is unusable (NaN or Inf in a gradient, ...).
class InvalidData : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_enforce(const char* kind, const char* expr, const std::string& operands,
                                const std::string& message);

template <typename A, typename B>
std::string describe_operands(const A& a, const B& b) {
  std::ostringstream os;
  os << a << " vs " << b;
  return os.str();
}
}  // namespace detail

}  // namespace sparsgd

// Enforce-style checks in the manner of gloo: on failure they throw InvalidArgument (or the given
// type) with the expression, both operand values and a message.
#define SPARSGD_ENFORCE_OP(kind, a, op, b, msg)                                                \
  do {                                                                                         \
    const auto& sparsgd_a_ = (a);                                                              \
    const auto& sparsgd_b_ = (b);                                                              \
    if (!(sparsgd_a_ op sparsgd_b_)) {                                                         \
      std::ostringstream sparsgd_msg_;                                                         \
      sparsgd_msg_ << msg;                                                                     \
      ::sparsgd::detail::throw_enforce(kind, #a " " #op " " #b,                                \
                                       ::sparsgd::detail::describe_operands(sparsgd_a_, sparsgd_b_), \
                                       sparsgd_msg_.str());                                    \
    }                                                                                          \
  } while (0)

#define SPARSGD_ENFORCE_LE(a, b, msg) SPARSGD_ENFORCE_OP("argument", a, <=, b, msg)
#define SPARSGD_ENFORCE_LT(a, b, msg) SPARSGD_ENFORCE_OP("argument", a, <, b, msg)
#define SPARSGD_ENFORCE_GE(a, b, msg) SPARSGD_ENFORCE_OP("argument", a, >=, b, msg)
#define SPARSGD_ENFORCE_GT(a, b, msg) SPARSGD_ENFORCE_OP("argument", a, >, b, msg)
#define SPARSGD_ENFORCE_EQ(a, b, msg) SPARSGD_ENFORCE_OP("argument", a, ==, b, msg)

#define SPARSGD_ENFORCE(cond, msg)                                        \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::ostringstream sparsgd_msg_;                                    \
      sparsgd_msg_ << msg;                                                \
      ::sparsgd::detail::throw_enforce("argument", #cond, "", sparsgd_msg_.str()); \
    }                                                                     \
  } while (0)
