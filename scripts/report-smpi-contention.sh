#!/usr/bin/env bash
# The SimGrid SMPI sweep that can disagree with the closed form: `sparsgd bench comm
# --transport mpi --selections drawn` (the same MPI code as on a cluster) on simulated clusters of
# P = 4 ... 1024 hosts on the gTop-k paper's network (alpha 0.436 ms, 9 ns per byte), where
#   - each rank's computation takes the CPU time it took here (scripts/smpi-run.sh --compute), and
#   - the network is flat (the closed form's), one switch whose fabric all flows share, or a
#     two-level tree with oversubscribed rack uplinks (scripts/smpi_platform.py --topology),
# for gtopk-rd, oktopk and allgather; writes docs/results/scaling/smpi-contention.md.
#
#   scripts/report-smpi-contention.sh [--report-only] [ITERS] [HOST COUNTS] [TIME LIMIT S]
#                                       (defaults: 2 "4 16 64 256 1024" 900)
#
# k = 25,000 of n = 2.5M (density 0.01) at every P, drawn anew each iteration: the sparse
# aggregators' traffic depends on k and P; n only bounds Ok-Topk's regions. All P ranks are one
# process here, so allgather (every rank holds all P k pairs) stops at P = 64. A finished point's
# result (bench comm's JSON, under 2 KB, or why it failed) is packed into the committed table
# docs/results/scaling/smpi-contention-runs.jsonl (scripts/run_table.py) and not run again, so that the
# sweep continues later or on a fresh machine; SMPI's logs and platforms stay in runs/smpi-contention/. A point that runs past
# TIME LIMIT seconds of real time is recorded as such (and tried again under a larger TIME LIMIT); a
# point stopped from outside (a signal) records nothing. About an hour on 2 cores without Ok-Topk at
# P = 1024 (hours). AGGREGATORS="gtopk-rd oktopk" (say) runs only those, POINTS="flat-nocompute" (say)
# only those of flat-compute, switch-compute, tree-compute and flat-nocompute; the report shows every
# point on record. Two invocations may share the work (one a core): a point being run by one is
# skipped by the other (a lock in runs/smpi-contention/, removed when its run ends).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/staged.sh
report_only=false
if [ "${1:-}" = --report-only ]; then report_only=true; shift; fi
iters=${1:-2}
hosts=${2:-"4 16 64 256 1024"}
limit=${3:-900}
[[ "$iters" =~ ^[1-9][0-9]*$ ]] || { echo "$0: ITERS must be a positive integer, not '$iters'" >&2; exit 2; }
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || { echo "$0: TIME LIMIT must be a positive number of seconds, not '$limit'" >&2; exit 2; }
[ -n "${hosts// /}" ] || { echo "$0: HOST COUNTS must name at least one host count" >&2; exit 2; }
for p in $hosts; do
  [[ "$p" =~ ^[1-9][0-9]*$ ]] || { echo "$0: each of HOST COUNTS must be a positive integer, not '$p'" >&2; exit 2; }
done
aggregators=${AGGREGATORS:-"gtopk-rd oktopk allgather"}
for agg in $aggregators; do
  case $agg in gtopk-rd | oktopk | allgather) ;; *) echo "$0: unknown aggregator '$agg' in AGGREGATORS" >&2; exit 2 ;; esac
done
points=${POINTS:-"flat-compute switch-compute tree-compute flat-nocompute"}
for point in $points; do
  case $point in flat-compute | switch-compute | tree-compute | flat-nocompute) ;;
    *) echo "$0: unknown point '$point' in POINTS (flat-compute, switch-compute, tree-compute, flat-nocompute)" >&2; exit 2 ;;
  esac
done
wanted() { [[ " $points " == *" $1 "* ]]; }
# The points as files while the sweep works (not committed), unpacked from the committed table first
# and packed into it after every point.
runs=runs/smpi-contention-points
table=docs/results/scaling/smpi-contention-runs.jsonl
logs=runs/smpi-contention
mkdir -p "$runs" "$logs/platforms"
/usr/bin/python3 scripts/run_table.py unpack "$table" "$runs"
record() { /usr/bin/python3 scripts/run_table.py pack "$runs" "$table"; }
export SMPI_PLATFORM_DIR=$logs/platforms

if ! $report_only; then
  command -v smpicxx >/dev/null || {
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends libsimgrid-dev
  }
  cmake -S . -B build-smpi -DCMAKE_CXX_COMPILER=smpicxx -DSPARSGD_SMPI=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build-smpi -j"$(nproc)" >/dev/null
fi

n=2500000
density=0.01

# The lock of the point this invocation is running, if any: released however the invocation ends.
held_lock=
release_lock() {
  [ -z "$held_lock" ] || rm -rf "$held_lock"
  held_lock=
}
# take_lock DIR: true once this invocation holds DIR; false while a live process holds it. A lock whose
# process is gone (killed outright) is taken over.
take_lock() {
  if ! mkdir "$1" 2>/dev/null; then
    local holder
    holder=$(cat "$1/pid" 2>/dev/null || true)
    [ -n "$holder" ] && kill -0 "$holder" 2>/dev/null && return 1
    # Gone, or between its mkdir and writing its pid: look again a moment later before taking over.
    sleep 1
    holder=$(cat "$1/pid" 2>/dev/null || true)
    [ -n "$holder" ] && kill -0 "$holder" 2>/dev/null && return 1
    rm -rf "$1"
    mkdir "$1" 2>/dev/null || return 1
  fi
  held_lock=$1
  # Checked here: set -e does not reach into a function called as a condition.
  echo $$ >"$1/pid" || { echo "$0: cannot write $1/pid" >&2; exit 1; }
}
trap release_lock EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_point OUT P AGGREGATOR TOPOLOGY COMPUTE(yes|no)
run_point() {
  local out=$1 p=$2 agg=$3 topology=$4 compute=$5
  [ -s "$out.json" ] && return 0
  # A failure is final, except running out of time: a larger TIME LIMIT tries that point again.
  if [ -s "$out.failed" ]; then
    local before
    before=$(sed -n 's/^did not finish within \([0-9]*\) s of real time$/\1/p' "$out.failed")
    [ -n "$before" ] && ((limit > before)) || return 0
    rm -f "$out.failed"
  fi
  local log
  log=$logs/$(basename "$out")
  if ! take_lock "$log.lock"; then
    echo "SMPI P=$p $agg $topology compute=$compute: another sweep (process $(cat "$log.lock/pid" 2>/dev/null)) is running it; skipped" >&2
    return 0
  fi
  # Another invocation may have finished it between the check above and the lock.
  [ -s "$out.json" ] && { release_lock; return 0; }
  local verify=()
  # The serial references follow every rank (gtopk-rd: O(k P log P) entries, all P selections held):
  # checked up to P = 64 here; the tests check every aggregator at every size they reach.
  ((p > 64)) && verify=(--no-verify)
  local flags=(--topology "$topology")
  [ "$compute" = yes ] && flags+=(--compute)
  echo "SMPI P=$p $agg $topology compute=$compute" >&2
  local status=0
  timeout "$limit" scripts/smpi-run.sh "${flags[@]}" "$p" paper-1gbe ./build-smpi/sparsgd bench comm --transport mpi \
    --selections drawn --n "$n" --density "$density" --aggregator "$agg" --model-network paper-1gbe \
    --iters "$iters" "${verify[@]}" --json >"$log.out" 2>"$log.log" || status=$?
  if ((status == 129 || status == 130 || status == 143)); then
    echo "SMPI P=$p $agg $topology: stopped by a signal (exit status $status); nothing recorded" >&2
    exit "$status"
  fi
  if ((status != 0)); then
    local reason
    reason="exit status $status: $(tail -c 200 "$log.log" | tr '\n' ' ')"
    ((status == 124)) && reason="did not finish within $limit s of real time"
    if ((status == 137)) || grep -q Killed "$log.log"; then reason="killed for lack of memory"; fi
    echo "$reason" >"$out.failed"
    echo "SMPI P=$p $agg $topology: $reason" >&2
    record
    release_lock
    return 0
  fi
  staged_run=$(staged "$out.json")
  grep '^{' "$log.out" >"$staged_run"
  # The compute charged is this machine's CPU time: the report says which machines the points ran on.
  /usr/bin/python3 scripts/machine.py >"$out.machine"
  publish "$staged_run" "$out.json"
  record
  release_lock
}

if ! $report_only; then
  for p in $hosts; do
    for topology in flat switch tree; do
      for agg in $aggregators; do
        [ "$agg" = allgather ] && ((p > 64)) && continue
        wanted "$topology-compute" || continue
        run_point "$runs/$p-$agg-$topology-compute" "$p" "$agg" "$topology" yes
      done
    done
    # The closed form's own network without compute: SMPI should reproduce the model there (Ok-Topk's
    # traffic depends on where the drawn entries fall; the model's is the balanced case).
    for agg in $aggregators; do
      [ "$agg" = allgather ] || ! wanted flat-nocompute || run_point "$runs/$p-$agg-flat-nocompute" "$p" "$agg" flat no
    done
  done
fi

mkdir -p docs/results/scaling
table=$(staged docs/results/scaling/smpi-contention.md)
/usr/bin/python3 - "$runs" "$iters" "$hosts" "$limit" >"$table" <<'PY'
import json, pathlib, sys
sys.path.insert(0, "scripts")  # machine.py
from machine import builds, cpu_model
runs, iters, hosts, limit = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(), sys.argv[4]
# Every point on record is shown, not only those of the host counts this call was given (a rerun of a
# few points must not drop the others' rows); the command named is the one that makes the whole table.
hosts = sorted(set(hosts) | {f.name.split("-", 1)[0] for f in runs.iterdir() if f.suffix in (".json", ".failed")}, key=int)
here = cpu_model()
# Points made before the machine was recorded (commit c8041e4 and earlier) ran on the machine named then.
machines = sorted({f.read_text().strip() for f in runs.glob("*.machine")}) or [here]
cpu = " and ".join(machines)

def cell(p, agg, topology, compute):
    base = runs / f"{p}-{agg}-{topology}-{compute}"
    if (base.with_name(base.name + ".json")).exists():
        d = json.loads(base.with_name(base.name + ".json").read_text())
        return d
    failed = base.with_name(base.name + ".failed")
    return failed.read_text().strip() if failed.exists() else None

print("## SimGrid SMPI with computation and contention, P = 4 to 1024\n")
aggs = ["gtopk-rd", "oktopk", "allgather"]
columns = [("flat", "nocompute"), ("flat", "compute"), ("switch", "compute"), ("tree", "compute")]
made = [d for p in hosts for agg in aggs for topology, compute in columns if isinstance(d := cell(p, agg, topology, compute), dict)]
print(f"Generated by `scripts/report-smpi-contention.sh {iters} \"{' '.join(hosts)}\" {limit}` with {builds(made)} on {cpu}")
print("(SimGrid 3.32).")
print("`sparsgd bench comm --transport mpi --selections drawn` (every rank draws k = 25,000 of n = 2.5M entries anew")
print("each iteration; only the aggregation runs) under `smpirun` on P simulated hosts of the paper's network")
print("(alpha 0.436 ms, 9 ns per byte), in three ways the closed form does not see:")
print("- **compute**: each rank's computation between MPI calls takes the CPU time it took on this machine")
print("  (`smpi/simulate-computation:yes`, SMPI's per-thread CPU timer, host speed = reference speed): merges,")
print("  message checks, coding, Ok-Topk's histograms. All ranks run one at a time on one core, so each is timed")
print("  alone, but not undisturbed: it is the least reproducible part of a cell (the same point has differed by")
print("  1.7x between sessions; this VM charges a thread more CPU time while other work runs, and SimGrid's own")
print("  solver runs between the ranks' blocks: docs/results/findings.md).")
print("- **switch**: one switch whose fabric every flow crosses and shares (SimGrid SHARED backbone) with the")
print("  capacity of 64 host links: non-blocking up to 64 hosts sending at once, oversubscribed P/64 beyond.")
print("- **tree**: racks of 32 hosts on non-blocking top-of-rack switches, each rack one uplink of 10 host links")
print("  (10 Gbit/s for 32 x 1 Gbit/s: 3.2:1), a core that never limits. Traffic between racks shares uplinks.")
print("  switch and tree also carry SimGrid's TCP cross traffic (acknowledgments share the reverse direction).")
print("Every route costs alpha; flat is private links only (scripts/smpi_platform.py), so it differs from the")
print("closed form by compute alone. Cells: SMPI ms, the median")
print("over the iterations of the simulated time from the last rank starting the aggregation to the last")
print("holding the sum, then the ratio to the closed form (src/sim/cost_model.cpp on paper-1gbe, which counts")
print("latencies and bytes only). Results are verified against the serial reference up to P = 64 (larger P: the")
print("tests' job); allgather stops at P = 64 because every rank holds all P k pairs and all ranks share this")
print("machine's 24 GiB.\n")
print("| P | aggregator | model ms | no compute, flat | flat | switch | tree | verified |")
print("|---|---|---|---|---|---|---|---|")
rows = []
for p in hosts:
    for agg in aggs:
        cells, model, verified = [], None, "-"
        for topology, compute in columns:
            d = cell(p, agg, topology, compute)
            if d is None:
                cells.append("-" if (agg == "allgather" and compute == "nocompute") or (agg == "allgather" and int(p) > 64) else "not run yet")
            elif isinstance(d, str):
                cells.append(d)
            else:
                model = d["model_comm_ms"]
                cells.append(f"{d['clock_ms']:.2f} ({d['clock_ms'] / model:.2f}x)")
                if d["matches_reference"] is not None:
                    verified = "yes" if d["matches_reference"] and verified in ("-", "yes") else "NO"
                rows.append((int(p), agg, topology, compute, d["clock_ms"], model))
        if all(c == "-" for c in cells):
            continue
        print(f"| {p} | {agg} | {model:.2f} | " if model is not None else f"| {p} | {agg} | - | ", end="")
        print(" | ".join(cells) + f" | {verified} |")
print()
PY
publish "$table" docs/results/scaling/smpi-contention.md
echo "wrote docs/results/scaling/smpi-contention.md" >&2
