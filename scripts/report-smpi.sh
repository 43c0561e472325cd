#!/usr/bin/env bash
# Runs the communication benchmark (`sparsgd bench comm --transport mpi`, the same MPI code as on a
# cluster) under SimGrid SMPI on a simulated cluster of P hosts with the gTop-k paper's network
# (alpha 0.436 ms, 9 ns per byte), for every aggregator at P = 4 ... 256, compares SMPI's simulated
# time with the closed-form alpha-beta model and writes docs/results/scaling/smpi.md.
#
#   scripts/report-smpi.sh [ITERS] [HOST COUNTS]        (defaults: 2 "4 8 16 32 64 128 256")
#
# Installs libsimgrid-dev if missing and builds ./build-smpi with smpicxx (SPARSGD_SMPI=ON).
# Results are kept in runs/smpi/ and a finished point is not run again (delete it to redo).
# The SimGrid settings (and why) are in scripts/smpi-run.sh.
# All P ranks live in one process: about 4 GB of memory at every P (n shrinks as P grows), and
# about 10 minutes of real time for the whole sweep on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/staged.sh
iters=${1:-2}
hosts=${2:-"4 8 16 32 64 128 256"}

# What the SMPI build needs (a subset of scripts/setup.sh's list, plus SimGrid); only missing ones.
packages=(build-essential cmake libhwy-dev libcli11-dev nlohmann-json3-dev libfmt-dev libsimgrid-dev python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
cmake -S . -B build-smpi -DCMAKE_CXX_COMPILER=smpicxx -DSPARSGD_SMPI=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-smpi -j"$(nproc)" >/dev/null

runs=runs/smpi
mkdir -p "$runs/platforms"
export SMPI_PLATFORM_DIR=$runs/platforms

# k = 25,000 at every P (density 0.001 of the paper's 25M); n shrinks from 25M so that the P ranks'
# gradients, residuals and the verifying replay (P x n floats on rank 0) fit in memory: P x n <= 1e8.
n_for() { local n=$((100000000 / $1)); ((n > 25000000)) && n=25000000; echo "$n"; }

run_point() {  # run_point OUT_JSON P N AGGREGATOR [extra smpirun options...]
  local out=$1 p=$2 n=$3 agg=$4
  shift 4
  [ -s "$out" ] || [ -s "${out%.json}.failed" ] && return 0
  local comp=topk verify=()
  [ "$agg" = randk-shared ] && comp=randk
  # The serial reference of gtopk-rd follows every rank and the provenance of every entry through
  # every round: O(k P^2) time and memory per iteration, about 13 GB at P = 256. Not checked there.
  [ "$agg" = gtopk-rd ] && ((p >= 256)) && verify=(--no-verify)
  local density
  density=$(/usr/bin/python3 -c 'import sys; print(repr(25000 / int(sys.argv[1])))' "$n")
  echo "SMPI P=$p $agg n=$n $*" >&2
  local status=0
  SMPI_EXTRA_OPTIONS="$*" scripts/smpi-run.sh "$p" paper-1gbe ./build-smpi/sparsgd bench comm --transport mpi \
    --n "$n" --density "$density" --compressor "$comp" --aggregator "$agg" --model-network paper-1gbe \
    --iters "$iters" "${verify[@]}" --json >"${out%.json}.out" 2>"${out%.json}.log" || status=$?
  if ((status != 0)); then
    # Recorded, not fatal: the table says which point could not run and why.
    local reason="exit status $status: $(tail -c 200 "${out%.json}.log" | tr '\n' ' ')"
    if ((status == 137)) || grep -q Killed "${out%.json}.log"; then
      reason="killed for lack of memory (all $p ranks are threads of one process)"
    fi
    echo "$reason" >"${out%.json}.failed"
    echo "SMPI P=$p $agg failed: $reason" >&2
    return 0
  fi
  local staged_run
  staged_run=$(staged "$out")
  grep '^{' "${out%.json}.out" >"$staged_run"
  publish "$staged_run" "$out"
}

for p in $hosts; do
  n=$(n_for "$p")
  for agg in gtopk-rd allgather gtopk randk-shared dense; do
    run_point "$runs/$p-$agg.json" "$p" "$n" "$agg"
  done
done
# How much the settings above matter: SimGrid's defaults at P = 8, for the two sparse aggregators.
for agg in gtopk-rd allgather; do
  run_point "$runs/sensitivity-default-8-$agg.json" 8 "$(n_for 8)" "$agg" --cfg=network/model:SMPI \
    --cfg=network/crosstraffic:1
  run_point "$runs/sensitivity-crosstraffic-8-$agg.json" 8 "$(n_for 8)" "$agg" --cfg=network/crosstraffic:1
done

mkdir -p docs/results/scaling
table=$(staged docs/results/scaling/smpi.md)
/usr/bin/python3 - "$runs" "$iters" "$hosts" >"$table" <<'PY'
import json, pathlib, sys
sys.path.insert(0, "scripts")  # machine.py
from machine import builds
runs, iters, hosts = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3].split()
aggs = ["gtopk-rd", "allgather", "gtopk", "randk-shared", "dense"]
def load(name):
    return json.load(open(runs / name))
rows, failed = [], []
for p in hosts:
    for agg in aggs:
        if (runs / f"{p}-{agg}.failed").exists():
            failed.append((p, agg, (runs / f"{p}-{agg}.failed").read_text().strip()))
            continue
        d = load(f"{p}-{agg}.json")
        rows.append(d | {"ratio": d["clock_ms"] / d["model_comm_ms"]})
print("## SimGrid SMPI: the MPI benchmark on a simulated cluster vs the closed form\n")
print(f"Generated by `scripts/report-smpi.sh {iters} \"{sys.argv[3]}\"` with {builds(rows)} (SimGrid 3.32, Debian's")
print("libsimgrid-dev).")
print("`sparsgd bench comm --transport mpi`, built with smpicxx (`-DSPARSGD_SMPI=ON`), runs under `smpirun` on a")
print("generated cluster (`scripts/smpi_platform.py`): P hosts, one rank each, a private split-duplex link per host")
print("(111.1 MB/s = 1/9 ns per byte, latency 0.218 ms, so a route costs alpha = 0.436 ms) and a backbone that never")
print("limits a flow. SMPI ms: median over the iterations of the simulated time from the last rank starting the")
print("aggregation (after the benchmark's barriers) to the last rank holding the sum (MPI_Wtime, which is SMPI's")
print("clock); model ms: the closed form of")
print("src/sim/cost_model.cpp on paper-1gbe. Computation takes no simulated time (`smpi/simulate-computation:no`),")
print("so both are communication only. SimGrid runs with `network/model:CM02` (latency + size/bandwidth, no fitted")
print("correction factors), `network/crosstraffic:0` and the ring allreduce (`smpi/allreduce:lr`) for dense;")
print("the script explains each. matches_reference: every rank's sums, consumed entries and residuals equal a")
print("serial replay of the same semantics.\n")
print("k = 25,000 at every P. Memory: all P ranks are threads of one process, each holding its gradient, residual")
print("and buffers, and rank 0 replays all P to verify, so n = min(25M, 1e8 / P) (density = 25,000 / n). The sparse")
print("aggregators' cost depends on k and P only, randk-shared's on k; dense depends on n and is compared with the")
print("model at the n shown, not at the paper's 25M beyond P = 4.\n")
print("| P | aggregator | n | k | SMPI ms | model ms | SMPI / model | matches_reference |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    checked = "not checked" if r["matches_reference"] is None else r["matches_reference"]
    print(f"| {r['workers']} | {r['aggregator']} | {r['n']:,} | {r['k']:,} | {r['clock_ms']:.2f} | "
          f"{r['model_comm_ms']:.2f} | {r['ratio']:.3f} | {checked} |")
for p, agg, reason in failed:
    print(f"| {p} | {agg} | - | - | not run | - | - | {reason} |")
if any(agg == "allgather" for _, agg, _ in failed):
    print("\nallgather gives every rank all P k entries: at P = 256 that is 6.4M pairs per rank, and SMPI holds all")
    print("256 ranks' buffers (and the verifying replay) in one process, beyond this machine's 24 GiB.")
if any(r["matches_reference"] is None for r in rows):
    print("\nnot checked: the serial reference of gtopk-rd follows every rank and the provenance of every entry")
    print("through every round, O(k P^2) time and memory per iteration (about 13 GB at P = 256), so it is skipped")
    print("there; the same code is checked at every smaller P.")
crit = [r for r in rows if r["aggregator"] in ("gtopk-rd", "allgather") and str(r["workers"]) in ("8", "32", "128")]
ok = all(abs(r["ratio"] - 1) <= 0.25 and r["matches_reference"] for r in crit)
print(f"\nCriterion (gtopk-rd and allgather within 25% of the closed form at P = 8, 32, 128, results verified): "
      f"{'met' if ok else 'NOT met'}" + (f" (largest deviation {max(abs(r['ratio'] - 1) for r in crit):.2%})." if crit else "."))
worst = max(rows, key=lambda r: abs(r["ratio"] - 1))
print(f"Largest deviation overall: {worst['aggregator']} at P = {worst['workers']}, {worst['ratio'] - 1:+.1%}.\n")
gaps = [r for r in rows if abs(r["ratio"] - 1) > 0.25]
print("### Gaps larger than 25%\n")
if not gaps:
    print("None: on a network that is exactly alpha-beta, SMPI reproduces the closed form for every aggregator")
    print("and P measured. What remains is small and understood:")
else:
    for r in gaps:
        print(f"- {r['aggregator']} at P = {r['workers']}: {r['ratio']:.2f} x the model (see below).")
    print("\nExplanations of the differences:")
print("- gtopk-rd, allgather, gtopk, randk-shared: the schedules (recursive doubling, Bruck, binomial tree,")
print("  ring) send exactly the messages the closed form counts, one flow per link direction at a time, so")
print("  SMPI agrees to within a few microseconds per exchange (the barrier's last message reaching ranks at")
print("  slightly different times). This holds because k = 25,000 pairs (200 KB) is above SMPI's eager limit")
print("  (smpi/send-is-detached-thresh, 64 KiB): a send completes when received, so a tree parent's sends to")
print("  its children follow one another as the closed form assumes. Smaller messages go eagerly and a parent's")
print("  broadcast sends overlap on its uplink: at P = 4, k = 5,000 (CTest smpi.np4.gtopk) gtopk takes about")
print("  1.1 x the model; on a real eager MPI the same would happen.")
print("- dense: the transport first runs two small allreduces so that all ranks agree on (algorithm, n, k)")
print("  before MPI_Allreduce (mismatched counts are undefined behaviour in MPI); each is a few rounds of")
print("  tiny messages, a few alpha that the closed form leaves out. When P does not divide n, SMPI's ring allreduce")
print("  handles the remainder with one more small allreduce. Both are latency terms, a few percent of the")
print("  ring's 2 (P - 1) messages.\n")
print("### How much SimGrid's defaults would change it (P = 8)\n")
print("| aggregator | setting | SMPI ms | model ms | SMPI / model |")
print("|---|---|---|---|---|")
for agg in ["gtopk-rd", "allgather"]:
    for name, label in [("8-" + agg, "CM02, no cross traffic (used above)"),
                        ("sensitivity-crosstraffic-8-" + agg, "CM02 with cross traffic"),
                        ("sensitivity-default-8-" + agg, "smpirun's default: SMPI model (fitted factors), cross traffic")]:
        d = load(name + ".json")
        print(f"| {agg} | {label} | {d['clock_ms']:.2f} | {d['model_comm_ms']:.2f} | {d['clock_ms'] / d['model_comm_ms']:.2f} |")
print("\nWith its defaults SimGrid simulates a different network: the SMPI model's latency and bandwidth factors")
print("(smpi/lat-factor, smpi/bw-factor, fitted on a real cluster) make each 200 KB message's latency about")
print("12 alpha here (about 5 ms instead of 0.436 ms), and cross traffic takes about 5% of the bandwidth. Those are properties of the network")
print("being modelled, not of the algorithms; the comparison above uses the network the closed form describes.")
print("\nWhat the agreement shows and what it does not: SMPI runs this library's real MPI code (the same binary")
print("logic as on a cluster), so it checks that every aggregator's schedule sends the messages, sizes and")
print("dependencies the closed form counts, at every P up to 256 and for non-powers of two in CTest. With CM02 and")
print("no cross traffic the simulated network is itself alpha-beta, so it cannot reveal what a physical network")
print("adds (TCP, framing, CPU on the critical path): that is the shaped-network measurement's job.")
PY
publish "$table" docs/results/scaling/smpi.md
echo "wrote docs/results/scaling/smpi.md"
