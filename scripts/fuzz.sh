#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UndefinedBehaviorSanitizer, in ./build-asan,
# shared with sanitize.sh) and runs each for SECONDS seconds, both at once, from a temporary copy of
# its corpus in tests/fuzz/corpus (so the repository's corpus does not change). Prints per target the
# executions, coverage (libFuzzer's cov: edges, ft: features), corpus size and crashes; any crash,
# leak, timeout or out-of-memory fails (exit status 1), with the saved input and the command that
# reproduces it.
#
#   scripts/fuzz.sh [SECONDS] [--merge] [--write-seeds] [--only wire|checkpoint] [-- LIBFUZZER_FLAGS...]
#     SECONDS        per target, default 30 (what CI runs); a longer run: scripts/fuzz.sh 3600
#     --merge        afterwards, add the inputs that reach new coverage to tests/fuzz/corpus (libFuzzer
#                    -merge=1: only what adds coverage is kept); commit them
#     --write-seeds  (re)write the seed-* inputs in tests/fuzz/corpus from the encoders, then run
#     --only T       run one target
#     --coverage     no fuzzing: source line and branch coverage of the decoders by the repository's
#                    corpus (clang's -fcoverage-mapping and llvm-cov)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitizer-env.sh
export ASAN_OPTIONS=${ASAN_OPTIONS:-$asan_options}

seconds=30
merge=0
write_seeds=0
coverage=0
targets=(wire checkpoint)
extra=()
while (($#)); do
  case "$1" in
    --merge) merge=1 ;;
    --write-seeds) write_seeds=1 ;;
    --coverage) coverage=1 ;;
    --only) targets=("$2"); shift ;;
    --) shift; extra=("$@"); break ;;
    *[!0-9]* | '') echo "usage: $0 [SECONDS] [--merge] [--write-seeds] [--only wire|checkpoint] [--coverage] [-- FLAGS]" >&2; exit 2 ;;
    *) seconds=$1 ;;
  esac
  shift
done

require_clang fuzz

if ((coverage)); then
  # A build apart from CMake's: the coverage counters only make sense without the sanitizers.
  out=$asan_dir/fuzz-coverage
  mkdir -p "$out"
  for t in "${targets[@]}"; do
    clang++ -std=c++20 -O1 -g -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping -Iinclude -Itests/fuzz \
      "tests/fuzz/fuzz_$t.cpp" src/core/wire.cpp src/core/checkpoint.cpp src/core/error.cpp -o "$out/fuzz_$t"
    LLVM_PROFILE_FILE=$out/$t.profraw "$out/fuzz_$t" -runs=0 "tests/fuzz/corpus/$t" >"$out/$t.log" 2>&1
    llvm-profdata-14 merge -o "$out/$t.profdata" "$out/$t.profraw"
    echo "fuzz: coverage of the decoders by tests/fuzz/corpus/$t ($(ls "tests/fuzz/corpus/$t" | wc -l) inputs):"
    source=src/core/$t.cpp
    # Columns: name, regions, missed, %, lines, missed, %, branches, missed, %. The file's TOTAL
    # includes what no fuzzer can reach (the file I/O around the checkpoint decoder).
    llvm-cov-14 report "$out/fuzz_$t" -instr-profile="$out/$t.profdata" -show-functions "$source" | c++filt |
      sed -E 's/\(anonymous namespace\):: ?//g; s/^[a-z_]+\.cpp://; s/\(.*\)//' | awk 'NF >= 10 && ($1 ~ /decode|sparse_message_length|read_header|Reader::take/ || $1 == "TOTAL") {
        printf "  %-50s lines %4d/%-4d (%s)  branches %3d/%-3d (%s)\n", $1, $5 - $6, $5, $7, $8 - $9, $8, $10 }'
  done
  exit 0
fi
start=$SECONDS
configure_asan
cmake --build "$asan_dir" -j"$ncpu" --target fuzz_wire fuzz_checkpoint fuzz_seeds >"$asan_dir/fuzz-build.log" 2>&1 ||
  { tail -n 80 "$asan_dir/fuzz-build.log"; exit 1; }
echo "fuzz: build in $asan_dir: $((SECONDS - start)) s"
corpus=tests/fuzz/corpus
if ((write_seeds)); then
  "$asan_dir/tests/fuzz/fuzz_seeds" "$corpus"
  echo "fuzz: wrote the seeds in $corpus"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts=$PWD/$asan_dir/fuzz-artifacts
mkdir -p "$artifacts"
for t in "${targets[@]}"; do
  [ -d "$corpus/$t" ] || { echo "fuzz: no corpus $corpus/$t (targets: wire, checkpoint)" >&2; exit 2; }
  mkdir -p "$work/$t"
  cp "$corpus/$t"/* "$work/$t"/
  # -timeout: seconds for one input (a slow input is a bug too); -rss_limit_mb also caps single
  # allocations, so a length field that makes the decoder allocate without bound is reported.
  (
    rc=0
    "$asan_dir/tests/fuzz/fuzz_$t" "$work/$t" -dict="tests/fuzz/$t.dict" -max_total_time="$seconds" \
      -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/$t-" \
      "${extra[@]}" >"$work/$t.log" 2>&1 || rc=$?
    echo "$rc" >"$work/$t.rc"
  ) &
done
wait

failed=0
for t in "${targets[@]}"; do
  log=$work/$t.log
  rc=$(cat "$work/$t.rc")
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  # The last status line: "#RUNS DONE cov: EDGES ft: FEATURES corp: INPUTS/SIZE ..."
  status=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  field() { sed -n "s/.* $1: \([^ ]*\).*/\1/p" <<<"$status"; }
  crashes=$(grep -c 'Test unit written to' "$log" || true)
  echo "fuzz: fuzz_$t: $(stat number_of_executed_units) executions ($(stat average_exec_per_sec)/s) in ${seconds} s," \
    "cov $(field cov), ft $(field ft), corpus $(field corp) (started from $(ls "$corpus/$t" | wc -l) inputs," \
    "$(stat new_units_added) new), peak RSS $(stat peak_rss_mb) MB, crashes $crashes"
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz: fuzz_$t FAILED (exit status $rc); the end of its output:"
    tail -n 60 "$log"
    for input in $(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log"); do
      echo "fuzz: the input is $input; reproduce with: $asan_dir/tests/fuzz/fuzz_$t $input"
    done
  elif ((merge)); then
    before=$(ls "$corpus/$t" | wc -l)
    "$asan_dir/tests/fuzz/fuzz_$t" -merge=1 "$corpus/$t" "$work/$t" >"$work/$t.merge.log" 2>&1 ||
      { tail -n 30 "$work/$t.merge.log"; exit 1; }
    echo "fuzz: merged into $corpus/$t: $before -> $(ls "$corpus/$t" | wc -l) inputs, $(du -sk "$corpus/$t" | cut -f1) KB"
  fi
done
if ((failed)); then
  echo "fuzz: FAILED"
  exit 1
fi
echo "fuzz: no crashes ($SECONDS s)"
