#include "sparsgd/core/density.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include "sparsgd/core/error.hpp"

namespace sparsgd {

void validate_density(double density) {
  SPARSGD_ENFORCE(std::isfinite(density), "density must be a finite number, got " << density);
  SPARSGD_ENFORCE(density > 0.0 && density <= 1.0,
                  "density must lie in (0, 1], got " << density);
}

std::size_t k_from_density(std::size_t n, double density) {
  validate_density(density);
  if (n == 0) return 0;
  const double exact = density * static_cast<double>(n);
  auto k = static_cast<std::size_t>(std::llround(exact));
  if (k < 1) k = 1;
  if (k > n) k = n;
  return k;
}

void validate_k(std::size_t n, std::size_t k) {
  validate_length(n);
  SPARSGD_ENFORCE_LE(k, n, "k must not exceed the number of entries n");
  if (n > 0) SPARSGD_ENFORCE_GE(k, std::size_t{1}, "k must be at least 1");
}

void validate_length(std::size_t n) {
  SPARSGD_ENFORCE_LE(n, static_cast<std::size_t>(std::numeric_limits<std::uint32_t>::max()),
                     "gradient length must fit in 32-bit indices");
}

}  // namespace sparsgd
