#pragma once
// FUZZ_REQUIRE: an invariant of an accepted input. A violation is a finding, so it must crash the
// fuzzer (abort) rather than throw, naming the check and where it is.

#include <cstdio>
#include <cstdlib>

#define FUZZ_REQUIRE(cond)                                                                              \
  do {                                                                                                  \
    if (!(cond)) {                                                                                      \
      std::fprintf(stderr, "fuzz: invariant violated at %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
      std::abort();                                                                                     \
    }                                                                                                   \
  } while (0)
