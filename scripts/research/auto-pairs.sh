#!/usr/bin/env bash
# Paired runs of `--aggregator auto` and one fixed aggregator at one point of the auto sweep
# (scripts/research/report-auto.sh), to tell a cost of auto itself from the order the sweep runs them in:
# the sweep always runs auto last at a point, so a machine that drifts within a point would bias it.
# Here the two alternate, the fixed one first in odd pairs and auto first in even ones, each run with
# the sweep's options and counted exchanges (17 on), each waiting for a quiet machine (scripts/research/quiet.py).
# Usage: scripts/research/auto-pairs.sh PAIRS P N DENSITY NETWORK [FIXED] [OUTDIR]
#   FIXED: the fixed aggregator (default gtopk-rd); OUTDIR: where each run's JSON goes
#   (default runs/auto-pairs/P-N-DENSITY-NETWORK); SPARSGD=path/to/sparsgd for another build;
#   SELECTIONS=drawn for the sweep's points where the gradients do not fit (bench comm --selections drawn).
# Prints, per pair, each run's median and floor (fastest) over the counted exchanges and auto's ratio,
# then the median ratio over all pairs and over each order apart.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/research/auto-sweep-rules.sh
usage="usage: $0 PAIRS P N DENSITY NETWORK [FIXED] [OUTDIR]"
(($# >= 5 && $# <= 7)) || { echo "$usage" >&2; exit 2; }
pairs=$1 p=$2 n=$3 d=$4 net=$5 fixed=${6:-gtopk-rd}
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || { echo "$0: PAIRS must be a positive integer, not '$pairs'" >&2; exit 2; }
[[ "$fixed" =~ ^(dense|allgather|gtopk-rd|oktopk)$ ]] || { echo "$0: FIXED must be dense, allgather, gtopk-rd or oktopk, not '$fixed'" >&2; exit 2; }
out=${7:-runs/auto-pairs/$p-$n-$d-$net}
sparsgd=${SPARSGD:-build/sparsgd}
[ -x "$sparsgd" ] || { bash scripts/setup.sh; sparsgd=build/sparsgd; }
first=$sweep_first_counted iters=$sweep_default_iters
case ${SELECTIONS:-top-k} in
  top-k) inputs=(--compressor topk) ;;
  drawn) inputs=(--selections drawn) ;;
  *) echo "$0: SELECTIONS must be top-k or drawn, not '$SELECTIONS'" >&2; exit 2 ;;
esac
sweep_skips_replay "$p" "$n" "$d" && inputs+=(--no-verify)
mkdir -p "$out"
run() {  # run AGGREGATOR FILE: bench comm validates P, N, DENSITY and NETWORK and says what is wrong
  sweep_quiet_run "$2" "$1" "$sparsgd" bench comm --transport local --workers "$p" --n "$n" --density "$d" \
    --aggregator "$1" --network "$net" "${inputs[@]}" --json --iters $((first + iters - 1))
}
for ((i = 1; i <= pairs; i++)); do
  [ -s "$out/$i-auto.json" ] && [ -s "$out/$i-$fixed.json" ] && continue  # made by an earlier call
  if ((i % 2)); then order=("$fixed" auto); else order=(auto "$fixed"); fi
  for agg in "${order[@]}"; do run "$agg" "$out/$i-$agg"; done
done
/usr/bin/python3 - "$out" "$pairs" "$fixed" "$first" "$iters" <<'PY'
import json, pathlib, statistics, sys
out, pairs, fixed, first, iters = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def counted(i, agg):
    record = json.loads((out / f"{i}-{agg}.json").read_text())
    if agg == "auto" and record["auto"]["choice"] != fixed:
        print(f"pair {i}: auto settled on {record['auto']['choice']}, not {fixed}")
    times = record["sim_comm_ms_per_iteration"][first:first + iters - 1]
    return statistics.median(times), min(times)
ratios = {"median": {True: [], False: []}, "floor": {True: [], False: []}}
print(f"{'pair':>4} {'first':>9} {fixed + ' med/floor ms':>24} {'auto med/floor ms':>20} {'ratio med':>9} {'floor':>6}")
for i in range(1, pairs + 1):
    f, a = counted(i, fixed), counted(i, "auto")
    auto_last = i % 2 == 1
    ratios["median"][auto_last].append(a[0] / f[0])
    ratios["floor"][auto_last].append(a[1] / f[1])
    print(f"{i:>4} {fixed if auto_last else 'auto':>9} {f[0]:>12.4f} {f[1]:>11.4f} {a[0]:>10.4f} {a[1]:>9.4f} "
          f"{a[0] / f[0]:>9.3f} {a[1] / f[1]:>6.3f}")
for kind, by_order in ratios.items():
    both = by_order[True] + by_order[False]
    line = f"auto / {fixed} by {kind}s: median {statistics.median(both):.3f} (range {min(both):.3f}-{max(both):.3f}, {len(both)} pairs)"
    for last, label in ((True, "auto second"), (False, "auto first")):
        if by_order[last]:
            line += f"; {label} {statistics.median(by_order[last]):.3f} ({len(by_order[last])})"
    print(line)
PY
