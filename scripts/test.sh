#!/usr/bin/env bash
# Sets everything up and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
(cd build && ctest --output-on-failure -j"$(nproc)" "$@")
# Then the unit tests under AddressSanitizer + UBSan and ThreadSanitizer, and each fuzz target for
# SPARSGD_FUZZ_SECONDS (30). Any finding fails. SPARSGD_SKIP_SANITIZERS=1 skips both (a quick local
# run; CI never sets it).
if [ "${SPARSGD_SKIP_SANITIZERS:-0}" != 1 ]; then
  bash scripts/sanitize.sh
  bash scripts/fuzz.sh "${SPARSGD_FUZZ_SECONDS:-30}"
fi
