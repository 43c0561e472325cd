# Sourced by scripts/sanitize.sh and scripts/fuzz.sh (not run on its own).
#
# One clang build with AddressSanitizer + UndefinedBehaviorSanitizer serves both the unit tests and
# the libFuzzer targets (SPARSGD_FUZZ=ON), so the library is compiled once for both: it is the
# largest part of either build. -O1 is what the sanitizers' documentation recommends (fast enough,
# and accurate stacks); -g1 keeps line numbers in reports at a fraction of -g's cost. No LibTorch,
# MPI or CLI: the checked code is the core library.

asan_dir=${SPARSGD_ASAN_BUILD_DIR:-build-asan}
tsan_dir=${SPARSGD_TSAN_BUILD_DIR:-build-tsan}
ncpu=$(nproc)

require_clang() {
  if ! command -v clang++ >/dev/null; then
    echo "$1: clang++ not found; scripts/setup.sh installs it (Debian: clang libclang-rt-14-dev)" >&2
    exit 1
  fi
}

configure_asan() {
  mkdir -p "$asan_dir"
  cmake -S . -B "$asan_dir" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DSPARSGD_SANITIZE="address;undefined" -DSPARSGD_FUZZ=ON \
    -DSPARSGD_WITH_TORCH=OFF -DSPARSGD_WITH_MPI=OFF -DSPARSGD_BUILD_CLI=OFF -DSPARSGD_CUDA=OFF >"$asan_dir/configure.log" 2>&1 ||
    { cat "$asan_dir/configure.log" >&2; exit 1; }
}

# Readable stacks: clang's runtimes look for llvm-symbolizer, which Debian installs with a suffix.
for s in llvm-symbolizer /usr/lib/llvm-14/bin/llvm-symbolizer llvm-symbolizer-14; do
  if command -v "$s" >/dev/null; then
    export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v "$s")}
    break
  fi
done
# Any finding fails the run: ASan and UBSan stop at the first report (the build also has
# -fno-sanitize-recover=all), leaks are reported at exit, TSan stops at the first race. The unit
# tests also check use of stack memory after return (sanitize.sh adds it): it makes the fuzzers four
# times slower, so they go without.
asan_options=detect_leaks=1:halt_on_error=1:check_initialization_order=1:strict_init_order=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
