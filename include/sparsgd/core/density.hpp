#pragma once
// How many entries a density keeps. One definition for the whole library, so that every worker,
// compressor and aggregator agrees on k.

#include <cstddef>

namespace sparsgd {

// Throws InvalidArgument unless density is a finite number in (0, 1].
void validate_density(double density);

// k = round(density * n), at least 1 and at most n (0 when n == 0). Throws on a bad density.
std::size_t k_from_density(std::size_t n, double density);

// Throws InvalidArgument unless 1 <= k <= n (k == 0 is allowed only for n == 0).
void validate_k(std::size_t n, std::size_t k);

// Indices are uint32 on the wire and in every kernel: n must fit.
void validate_length(std::size_t n);

}  // namespace sparsgd
