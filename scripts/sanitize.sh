#!/usr/bin/env bash
# Runs the unit tests under the sanitizers; any finding fails (exit status 1).
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (clang, ./build-asan, shared with fuzz.sh):
#      core, select, compress, transport and collectives tests.
#   2. ThreadSanitizer (GCC, ./build-tsan): the tests that run workers as threads over the local
#      transport, transport_tests and collectives_tests.
# torch_tests is left out: LibTorch itself is not instrumented, and its build is the slowest part.
# Usage: scripts/sanitize.sh [asan|tsan]   (both by default)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitizer-env.sh
export ASAN_OPTIONS=${ASAN_OPTIONS:-$asan_options:detect_stack_use_after_return=1}

which=${1:-all}
case "$which" in all | asan | tsan) ;; *) echo "usage: $0 [asan|tsan]" >&2; exit 2 ;; esac
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=0

# Runs test binaries, as many at once as there are cores (counting a build running beside them), the
# longest first, and reports each; on failure shows the end of its output, where the report is.
run_tests() {
  local label=$1 dir=$2
  shift 2
  local pids=()
  for t in "$@"; do
    (
      start=$SECONDS
      rc=0
      "${runner[@]}" "$dir/tests/$t" --gtest_brief=1 >"$logs/$label-$t.log" 2>&1 || rc=$?
      echo "$rc $((SECONDS - start))" >"$logs/$label-$t.rc"
    ) &
    pids+=($!)
    while (($(jobs -rp | wc -l) >= ncpu)); do wait -n || true; done
  done
  wait "${pids[@]}"
  for t in "$@"; do
    read -r rc secs <"$logs/$label-$t.rc"
    if [ "$rc" -eq 0 ]; then
      echo "sanitize: $label $t clean ($(grep -Eo '[0-9]+ tests? from [0-9]+ test suites? ran' "$logs/$label-$t.log" | head -1), ${secs} s)"
    else
      echo "sanitize: $label $t FAILED (exit status $rc); the end of its output:"
      tail -n 60 "$logs/$label-$t.log"
      failed=1
    fi
  done
}

asan_tests=(select_tests collectives_tests compress_tests core_tests transport_tests)
tsan_tests=(collectives_tests transport_tests)

build_asan() {
  local start=$SECONDS
  configure_asan
  cmake --build "$asan_dir" -j"$ncpu" --target "${asan_tests[@]}" >"$logs/asan-build.log" 2>&1 ||
    { tail -n 80 "$logs/asan-build.log"; exit 1; }
  echo "sanitize: address;undefined build in $asan_dir: $((SECONDS - start)) s"
}

# GCC for ThreadSanitizer: its TSan build of the library is quicker than clang's, and it checks the
# code with a second compiler's instrumentation. Writes its status and time to $logs/tsan-build.rc.
build_tsan() {
  local start=$SECONDS rc=0
  mkdir -p "$tsan_dir"
  { cmake -S . -B "$tsan_dir" -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DSPARSGD_SANITIZE=thread \
      -DSPARSGD_WITH_TORCH=OFF -DSPARSGD_WITH_MPI=OFF -DSPARSGD_BUILD_CLI=OFF -DSPARSGD_CUDA=OFF &&
    cmake --build "$tsan_dir" -j"$ncpu" --target "${tsan_tests[@]}"; } >"$logs/tsan-build.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - start))" >"$logs/tsan-build.rc"
}

if [ "$which" != tsan ]; then
  require_clang sanitize
  build_asan
fi
# The thread build goes on beside the address tests: those leave a core idle most of the time.
tsan_build=
if [ "$which" != asan ]; then
  build_tsan &
  tsan_build=$!
fi
if [ "$which" != tsan ]; then
  runner=()
  run_tests "address;undefined" "$asan_dir" "${asan_tests[@]}"
fi
if [ "$which" != asan ]; then
  wait "$tsan_build"
  read -r rc secs <"$logs/tsan-build.rc"
  if [ "$rc" -ne 0 ]; then
    tail -n 80 "$logs/tsan-build.log"
    exit 1
  fi
  echo "sanitize: thread build in $tsan_dir: $secs s (beside the address tests)"
  # TSan needs a fixed memory layout, which address-space randomization with many bits (newer
  # kernels' vm.mmap_rnd_bits = 32) breaks ("unexpected memory mapping"): run without it where
  # the kernel lets us.
  runner=()
  if setarch "$(uname -m)" -R true 2>/dev/null; then runner=(setarch "$(uname -m)" -R); fi
  run_tests thread "$tsan_dir" "${tsan_tests[@]}"
fi

if ((failed)); then
  echo "sanitize: FAILED"
  exit 1
fi
echo "sanitize: all clean ($SECONDS s)"
