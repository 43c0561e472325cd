#!/usr/bin/env bash
# auto against one fixed aggregator in the same process (bench comm --interleave): the two run on the
# same workers, each with its own compressor and residual, their exchanges alternating. Separate runs
# minutes apart differ by 5-35% at the sweep's 10gbe points (memory layout, the machine's state), more
# than the 5% asked of auto (scripts/research/auto-pairs.sh, docs/results/findings.md); interleaved, both see
# the same process and machine, so their ratio in one run is what a run can tell.
# Usage: scripts/research/auto-interleave.sh RUNS P N DENSITY NETWORK [FIXED] [OUTDIR] [-- bench comm options...]
#   FIXED: the fixed aggregator (default gtopk-rd); OUTDIR: where each run's JSON goes (default
#   runs/auto-interleave/P-N-DENSITY-NETWORK-FIXED); SPARSGD=path/to/sparsgd for another build;
#   SELECTIONS=drawn as in auto-pairs.sh; ITERS: exchanges a run makes (default the sweep's, 27);
#   SWAP=1 makes FIXED the --aggregator and auto the --interleave (the first pipeline is built first, so
#   its buffers come first in memory: swapping tells such an order effect from a cost of auto).
#   Options after -- go to every run (--error-feedback off, --auto-trials 0, ...).
# Each run waits for a quiet machine (scripts/research/quiet.py) and is made again when it was disturbed. Prints,
# per run, auto's and the fixed aggregator's median over the counted exchanges (the sweep's: from 17 on)
# and their ratio, then the median and range of the ratios.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/research/auto-sweep-rules.sh
usage="usage: $0 RUNS P N DENSITY NETWORK [FIXED] [OUTDIR] [-- bench comm options...]"
positional=()
while (($#)) && [ "$1" != -- ]; do positional+=("$1"); shift; done
(($#)) && shift  # the --
((${#positional[@]} >= 5 && ${#positional[@]} <= 7)) || { echo "$usage" >&2; exit 2; }
runs=${positional[0]} p=${positional[1]} n=${positional[2]} d=${positional[3]} net=${positional[4]}
fixed=${positional[5]:-gtopk-rd}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "$0: RUNS must be a positive integer, not '$runs'" >&2; exit 2; }
[[ "$fixed" =~ ^(dense|allgather|gtopk-rd|oktopk)$ ]] || { echo "$0: FIXED must be dense, allgather, gtopk-rd or oktopk, not '$fixed'" >&2; exit 2; }
out=${positional[6]:-runs/auto-interleave/$p-$n-$d-$net-$fixed}
iters=${ITERS:-$((sweep_first_counted + sweep_default_iters - 1))}
[[ "$iters" =~ ^[0-9]+$ ]] && ((iters > sweep_first_counted)) || { echo "$0: ITERS must be an integer above $sweep_first_counted, not '$iters'" >&2; exit 2; }
sparsgd=${SPARSGD:-build/sparsgd}
[ -x "$sparsgd" ] || { bash scripts/setup.sh; sparsgd=build/sparsgd; }
case ${SELECTIONS:-top-k} in
  top-k) inputs=(--compressor topk) ;;
  drawn) inputs=(--selections drawn) ;;
  *) echo "$0: SELECTIONS must be top-k or drawn, not '$SELECTIONS'" >&2; exit 2 ;;
esac
sweep_skips_replay "$p" "$n" "$d" && inputs+=(--no-verify)
if [ "${SWAP:-0}" = 1 ]; then pair=(--aggregator "$fixed" --interleave auto); else pair=(--aggregator auto --interleave "$fixed"); fi
mkdir -p "$out"
for ((i = 1; i <= runs; i++)); do
  [ -s "$out/$i.json" ] && continue  # made by an earlier call
  sweep_quiet_run "$out/$i" "run $i" "$sparsgd" bench comm --transport local --workers "$p" --n "$n" \
    --density "$d" --network "$net" "${inputs[@]}" "${pair[@]}" --json --iters "$iters" "$@"
done
/usr/bin/python3 - "$out" "$runs" "$sweep_first_counted" <<'PY'
import json, pathlib, statistics, sys
out, runs, first = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ratios, floors = [], []
print(f"{'run':>3} {'auto ms':>9} {'settled on':>10} {'fixed':>9} {'fixed ms':>9} {'ratio':>6} {'floors':>6}")
for i in range(1, runs + 1):
    outer = json.loads((out / f"{i}.json").read_text())
    inner = outer["interleave"]
    auto, fixed = (outer, inner) if outer["aggregator"] == "auto" else (inner, outer)
    a = auto["sim_comm_ms_per_iteration"][first:]
    f = fixed["sim_comm_ms_per_iteration"][first:]
    ratios.append(statistics.median(a) / statistics.median(f))
    floors.append(min(a) / min(f))
    print(f"{i:>3} {statistics.median(a):9.4f} {auto['auto']['choice']:>10} {fixed['aggregator']:>9} "
          f"{statistics.median(f):9.4f} {ratios[-1]:6.3f} {floors[-1]:6.3f}")
print(f"auto / {fixed['aggregator']}, exchanges {first}-{first + len(a) - 1}: median {statistics.median(ratios):.3f} "
      f"(range {min(ratios):.3f}-{max(ratios):.3f}, {sum(r > 1 for r in ratios)} of {len(ratios)} above 1); "
      f"floors {statistics.median(floors):.3f} ({min(floors):.3f}-{max(floors):.3f})")
PY
