#!/usr/bin/env bash
# The sweep of `--aggregator auto` against every fixed aggregator it chooses from: P in
# {4, 32, 256} in-process workers, density {0.001, 0.01}, n {1M, 25M}, networks paper-1gbe and
# 10gbe (24 points), all on the simulated network with each worker's compute charged as measured
# thread CPU time. Writes the block between the auto-sweep markers of docs/results/comm.md.
# Usage: scripts/research/report-auto.sh [--report-only] [ROUNDS] [ITERS] [CHEAP_ROUNDS]   (defaults 5 11 9;
# SPARSGD=path/to/sparsgd to use another build; --report-only: write the table from the runs made so far,
# run nothing)
# The CPU time charged varies from run to run on a shared machine by more than the 5% asked of
# auto (256 threads on 2 cores), so the sweep goes ROUNDS times over all points, each time running
# every fixed aggregator and auto at a point one after the other; a cell is the median over the rounds,
# and auto's ratio to the best fixed aggregator is also given per round (same round, minutes apart at
# most). ROUNDS was 3 up to commit a883eca: the same fixed aggregator's median at the same point moved by
# 1.06x between rounds in the median case and 1.23x at the 90th percentile, so a median of 3 cannot
# tell 5% apart (the one point over 5% then, 1.07x, had auto on the best aggregator in every round);
# 5 is the number fixed before rounds 4-5 were made, and the table reports whatever they give.
# Where a run takes a few seconds the figures are a tenth of a millisecond to a few, and one run's
# figure moves by 5-10% from run to run however many exchanges it counts (P = 4, n = 1M, density 0.001,
# 10gbe, gtopk-rd and auto alternating, 100 exchanges counted: medians 0.090-0.100 ms and 0.091-0.102;
# 10 counted: 0.095-0.106 and 0.098-0.109), so more runs are what narrows the cell. Points whose every
# first-round run took under 20 s (listed in $runs/cheap-points once round 1 is done: P = 4 and 32 at
# n = 1M here) go on to CHEAP_ROUNDS rounds in all, after the ROUNDS rounds of every point.
# Every run, fixed or auto, makes 16 + ITERS exchanges and counts the same ones, the ITERS - 1 from
# exchange 17 on (0-based): auto's trials take at most 16 (4 candidates, 2 warm-ups and 2 timed rounds
# each; fewer candidates spend it on more timed rounds and on contested ones, auto_select.hpp), and with error
# feedback a cost moves with the exchange's index (the residuals change what the workers select: at
# P = 32, n = 25M, density 0.01, Ok-Topk's fastest exchange of ten rose from 10.6 ms in the first ten
# to 16.4-16.8 by the 60th-99th, docs/results/findings.md), so auto's exchanges after
# its trials are compared with the fixed aggregators' same exchanges, not with their first ones. (Up to
# commit 5e5bf50 fixed runs counted their exchanges 1-10: a1ac4b9:docs/results/comm/auto-early-window/. Up to 407868b
# auto timed every candidate exactly twice: that sweep is in a1ac4b9:docs/results/comm/auto-two-timed/. Up to
# commit 6a8424d it timed every candidate twice before its contested rounds however few were plausible, and
# its runs record no timed_rounds: that sweep is in a1ac4b9:docs/results/comm/auto-contested/. The sweep of
# commits 6a8424d-bd8c8bb, under today's rule with build 6a8424d, is in the history (a1ac4b9, docs/results/comm/): at P = 256
# its runs had exchanges 20-60 ms above their floors that a freshly started machine did not show, so from
# commit 5b7a204 the sweep is made again, with a build that draws selections 2.4x faster; findings.md. That
# second sweep, commits 5b7a204-bee14d8 with build 5b7a204, is in the history (a1ac4b9, docs/results/comm/). A third, with
# build 6c0c0b7 (the pooled local transport, faster Ok-Topk region ordering, the beaten-twice tie), was stopped
# after 10 points of round 1 at commit 6418de8, when auto was found to read the clock in every settled exchange
# (e864b92): its runs are in the history (a1ac4b9, docs/results/comm/).)
# From commit 6418de8, auto runs in one process with the round's best fixed run at its point (bench comm
# --interleave; scripts/research/auto_best_fixed.py picks it by the medians of the runs just made): separate
# runs minutes apart move by 5-35% at the 10gbe points, and a 2.5% cost of auto's own path (a clock read
# in every settled exchange) showed only side by side. The table gives that same-process ratio beside
# the ratio of the cells; where the two do not fit in memory together, auto runs alone.
# Every run waits for the machine to be quiet and is made again when other processes took CPU during it
# (scripts/research/quiet.py; OUT.load records it): a test suite beside the sweep made one auto run 14% slower
# than the same run alone, too little for a floor to catch and too much for the 5% bar.
# Every table comes twice, from the same runs: with each run's median over its counted iterations,
# and with its floor (the fastest of them), which bursts of interference from other processes or the
# host cannot raise; the report measures how much each moves between rounds.
# After the first round, a fixed aggregator more than 2x the best fixed run of its point in that round is
# not run again (repeats cannot make it the best; dense at n = 25M costs minutes a run): its cell is
# its first round's figure. gtopk-rd always runs (it also tells whether a point fits in memory).
# A run that bench comm refuses for lack of memory (it says how much it needs) is reported with the
# closed form instead. Each run's result (bench comm's JSON, about 1 KB, or why it did not run) is
# kept as runs/auto-sweep/ROUND/NAME.* and packed into the committed table
# docs/results/comm/auto-runs.jsonl, so that the sweep (4-5 hours) continues later or on a fresh
# machine: a point's runs land there together once the point is done (a point stopped half-way runs
# again whole), a finished point is not run again, and each run records the CPU it ran on (the
# report names every one).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/research/auto-sweep-rules.sh
report_only=false
if [ "${1:-}" = --report-only ]; then report_only=true; shift; fi
rounds=${1:-5}
iters=${2:-$sweep_default_iters}
cheap_rounds=${3:-9}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS must be a positive integer, not '$rounds'" >&2; exit 2; }
[[ "$iters" =~ ^[1-9][0-9]*$ ]] && ((iters >= 2)) || { echo "$0: ITERS must be an integer of at least 2, not '$iters'" >&2; exit 2; }
[[ "$cheap_rounds" =~ ^[0-9]+$ ]] || { echo "$0: CHEAP_ROUNDS must be an integer, not '$cheap_rounds'" >&2; exit 2; }
sparsgd=${SPARSGD:-build/sparsgd}
[ -x "$sparsgd" ] || { bash scripts/setup.sh; sparsgd=build/sparsgd; }
# The runs as files while the sweep works (not committed), and the committed table they are packed
# into once a point is done (scripts/run_table.py); the table is unpacked first, so that a sweep
# continues and the report regenerates from it on any machine.
runs=runs/auto-sweep
table=docs/results/comm/auto-runs.jsonl
mkdir -p "$runs"
/usr/bin/python3 scripts/run_table.py unpack "$table" "$runs"
first=$sweep_first_counted
attempts=3  # a run disturbed by other processes is made at most this many times in all
# The 24 points, one a line: P N DENSITY NETWORK. The loops below and the report read this list.
grid=$(for p in 4 32 256; do for n in 1000000 25000000; do for d in 0.001 0.01; do for net in paper-1gbe 10gbe; do
         echo "$p $n $d $net"
       done; done; done; done)
scratch=runs/auto-scratch  # a run's output until it is finished
mkdir -p "$scratch"
# run_one P N DENSITY NETWORK AGGREGATOR OUT [extra bench comm options]: one cached run; a run that
# bench comm refuses for memory leaves OUT.refused (its message says how much it needs).
run_one() {
  local p=$1 n=$2 d=$3 net=$4 agg=$5 out=$6
  shift 6
  [ -s "$out.json" ] || [ -s "$out.refused" ] && return 0
  local args=(bench comm --transport local --workers "$p" --n "$n" --density "$d" --aggregator "$agg"
              --network "$net" --json "$@")
  args+=(--iters $((first + iters - 1)))
  sweep_skips_replay "$p" "$n" "$d" && args+=(--no-verify)
  echo "$(date +%H:%M:%S) P=$p n=$n d=$d $net $agg $* -> $out" >&2
  local tmp attempt
  tmp=$scratch/$(basename "$out")
  # Each run starts once the machine is quiet and is made again (up to $attempts times in all) if other
  # processes took more CPU meanwhile than it can absorb (scripts/research/quiet.py); OUT.load records the
  # run kept, and the report names every run kept although disturbed.
  for ((attempt = 1; attempt <= attempts; attempt++)); do
    if /usr/bin/python3 scripts/research/quiet.py "$tmp.load" -- "$sparsgd" "${args[@]}" >"$tmp.tmp" 2>"$tmp.err"; then
      if ((attempt < attempts)) && /usr/bin/python3 -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1]))["disturbed"])' "$tmp.load"; then
        echo "$(date +%H:%M:%S)   other processes were busy during it ($(cat "$tmp.load")): again" >&2
        continue
      fi
      /usr/bin/python3 scripts/machine.py >"$out.machine"
      mv "$tmp.load" "$out.load"
      mv "$tmp.tmp" "$out.json"
    elif grep -q "needs about" "$tmp.err"; then
      mv "$tmp.err" "$out.refused"
    else
      cat "$tmp.err" >&2
      exit 1
    fi
    break
  done
  rm -f "$tmp.tmp" "$tmp.err" "$tmp.load"
}
# out_of_contention ROUND POINT SUFFIX AGGREGATOR: true, after the first round, for a fixed aggregator
# other than gtopk-rd whose first-round run at POINT (the name under $runs/1) took more than 2x that
# round's best fixed run there, or did not run there. By floors (the fastest counted iteration of each
# run): interference can raise a median past 2x, not a floor.
out_of_contention() {
  (($1 > 1)) && [ "$4" != auto ] && [ "$4" != gtopk-rd ] || return 1
  /usr/bin/python3 - "$runs/1" "$2" "$3" "$4" "$iters" "$first" <<'PY'
import json, pathlib, sys
folder, point, suffix, agg, iters, first = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
def floor(name):
    f = folder / f"{point}-{name}{suffix}.json"
    return min(json.loads(f.read_text())["sim_comm_ms_per_iteration"][first:first + iters - 1]) if f.exists() else None
times = {a: floor(a) for a in ("gtopk-rd", "oktopk", "allgather", "dense")}
known = [t for t in times.values() if t is not None]
sys.exit(0 if times[agg] is None or not known or times[agg] > 2 * min(known) else 1)
PY
}
# skip_or_run ROUND P N DENSITY NETWORK AGGREGATOR OUT SUFFIX [options]: run_one, unless the aggregator
# is out of contention; then OUT.skipped says so, for the report.
skip_or_run() {
  local round=$1 p=$2 n=$3 d=$4 net=$5 agg=$6 out=$7 suffix=$8
  shift 8
  if out_of_contention "$round" "$p-$n-$d-$net" "$suffix" "$agg"; then
    echo "over 2x the best fixed run of round 1" >"$out.skipped"
  else
    run_one "$p" "$n" "$d" "$net" "$agg" "$out" "$@"
  fi
}
# run_point ROUND P N DENSITY NETWORK: every aggregator at one point in one round, unless done.
run_point() {
  local round=$1 p=$2 n=$3 d=$4 net=$5 agg
  # A point goes to the committed folder whole, once auto (always last) has run: its runs are
  # compared with each other, so all of them come from one machine and one sitting.
  local name=$p-$n-$d-$net
  compgen -G "$runs/$round/$name-auto*" >/dev/null && return 0
  mkdir -p "$runs/$round" "$scratch/$round"
  rm -f "$scratch/$round/$name"-*
  local point="$scratch/$round/$name"
  # Where not even gtopk-rd fits beside every worker's gradient and residual, the whole point
  # runs on drawn selections (bench comm --selections drawn: memory O(P k), not O(P n)), so
  # that its aggregators still compare on the same inputs.
  run_one "$p" "$n" "$d" "$net" gtopk-rd "$point-gtopk-rd" --compressor topk
  local suffix="" inputs=(--compressor topk) fixed_aggs=(oktopk allgather dense)
  if [ -s "$point-gtopk-rd.refused" ]; then
    suffix=.drawn inputs=(--selections drawn) fixed_aggs=(gtopk-rd oktopk allgather dense)
  fi
  for agg in "${fixed_aggs[@]}"; do
    skip_or_run "$round" "$p" "$n" "$d" "$net" "$agg" "$point-$agg$suffix" "$suffix" "${inputs[@]}"
  done
  # auto runs in one process with this round's best fixed run at the point (bench comm --interleave),
  # so that their ratio compares exchanges made side by side; where the two do not fit together,
  # auto runs alone (its .interleave-refused says why).
  local best
  best=$(/usr/bin/python3 scripts/research/auto_best_fixed.py "$point" "$suffix" "$first" "$iters")
  skip_or_run "$round" "$p" "$n" "$d" "$net" auto "$point-auto$suffix" "$suffix" "${inputs[@]}" ${best:+--interleave "$best"}
  if [ -n "$best" ] && [ -s "$point-auto$suffix.refused" ]; then
    mv "$point-auto$suffix.refused" "$point-auto$suffix.interleave-refused"
    run_one "$p" "$n" "$d" "$net" auto "$point-auto$suffix" "${inputs[@]}"
  fi
  mv "$scratch/$round/$name"-* "$runs/$round/"
  /usr/bin/python3 scripts/run_table.py pack "$runs" "$table"
}
# The lists are read on descriptor 3, so that nothing a run starts can take them from standard input.
for ((round = 1; round <= rounds; round++)); do
  $report_only && break
  while read -r p n d net <&3; do
    run_point "$round" "$p" "$n" "$d" "$net"
  done 3<<<"$grid"
done
# The cheap points, chosen once from round 1's records (every run under 20 s of wall time; a run
# with no record does not count as cheap), then their further rounds.
if ! $report_only && ((cheap_rounds > rounds)); then
  if [ ! -e "$runs/cheap-points" ]; then
    /usr/bin/python3 - "$runs/1" "$grid" >"$runs/cheap-points.tmp" <<'PY'
import json, pathlib, sys
folder = pathlib.Path(sys.argv[1])
for line in sys.argv[2].splitlines():
    point = "-".join(line.split())
    results = [f for f in folder.glob(f"{point}-*") if f.suffix in (".json", ".refused")]
    loads = [folder / f"{f.stem}.load" for f in results]
    if results and all(l.exists() and json.loads(l.read_text())["wall_s"] < 20 for l in loads):
        print(point)
PY
    mv "$runs/cheap-points.tmp" "$runs/cheap-points"
    /usr/bin/python3 scripts/run_table.py pack "$runs" "$table"
  fi
  for ((round = rounds + 1; round <= cheap_rounds; round++)); do
    # The last field takes the rest of the name: paper-1gbe.
    while IFS=- read -r p n d net <&3; do
      run_point "$round" "$p" "$n" "$d" "$net"
    done 3<"$runs/cheap-points"
  done
fi
/usr/bin/python3 - "$runs" "$rounds" "$iters" "$sparsgd" "$first" "$cheap_rounds" "$grid" "$attempts" <<'PY'
import functools, json, pathlib, re, statistics, subprocess, sys
sys.path[:0] = ["scripts", "scripts/research"]  # machine.py, quiet.py
from machine import builds, cpu_model
import quiet
runs, rounds, iters, sparsgd, first = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
cheap_rounds, attempts = int(sys.argv[6]), int(sys.argv[8])
grid = [(int(p), int(n), d, net) for p, n, d, net in (line.split() for line in sys.argv[7].splitlines())]
cheap_file = runs / "cheap-points"
cheap = cheap_file.read_text().split() if cheap_file.exists() and cheap_rounds > rounds else []
here = cpu_model()
cpu = " and ".join(sorted({f.read_text().strip() for f in runs.glob("*/*.machine")}) or [here])
fixed = ["gtopk-rd", "oktopk", "allgather", "dense"]
# How the auto runs on record were made (a table made by an earlier version says what that one did).
@functools.cache  # the header, the tables and the trial check all read the same runs: parse each once
def result(path):
    return json.loads(path.read_text())

# The settled auto runs that timed more than one candidate, each file read once: {path: its JSON}.
tried_by_file = {f: r for f in sorted(runs.glob("*/*-auto*.json"))
                 if (a := (r := result(f)).get("auto")) and len(a["trials"]) > 1 and a["settled"]}
tried = list(tried_by_file.values())
# Every run on record must come from today's trials, which record the timed rounds each candidate got
# (timed_rounds: more where fewer candidates are plausible). The runs of the rules before are in
# a1ac4b9:docs/results/comm/auto-two-timed/ (two timed exchanges a candidate) and auto-contested/ (two, then
# contested rounds), and the table must not mix them.
older_rule = [f"{f.parent.name}/{f.name}" for f, r in tried_by_file.items() if "timed_rounds" not in r["auto"]]
if older_rule:
    raise SystemExit("auto runs made before its timed rounds grew with fewer candidates: " + ", ".join(older_rule)
                     + "; move them away (a1ac4b9:docs/results/comm/auto-contested/ holds that sweep) and make those points again")
warmups = sorted({(r["auto"]["trial_exchanges"] - r["auto"]["timed_exchanges"]) // len(r["auto"]["trials"]) for r in tried})
# The timed rounds every candidate ran, by how many were plausible; the contested ones ran more.
timed = sorted({(len(r["auto"]["trials"]), r["auto"]["timed_rounds"]) for r in tried})
went_on = sum(r["auto"]["timed_exchanges"] > r["auto"]["timed_rounds"] * len(r["auto"]["trials"]) for r in tried)
said = lambda values: " or ".join(str(v) for v in values) if values else "?"
# The tie rule: trials within this of the fastest are a tie, which the cheaper closed form wins
# unless the fastest beat it twice (its second-fastest at or under the other's fastest; runs record
# that part as tie_unless_beaten_twice). Runs record the tolerance since b8db23a (10%); builds
# before that field used 3%. Every run must come from one rule, or the table would mix two: runs
# made under another are refused (auto's settlement is src/collectives/auto_select.cpp's alone; this
# script does not settle recorded trials again).
tolerances = sorted({r["auto"].get("tie_tolerance", 0.03) for r in tried})
tie = tolerances[-1] if tolerances else 0.03
under_older = [f"{f.parent.name}/{f.name}" for f, r in tried_by_file.items()
               if r["auto"].get("tie_tolerance", 0.03) != tie or not r["auto"].get("tie_unless_beaten_twice", False)]
if under_older:
    raise SystemExit(f"auto runs made under another tie rule than today's ({tie:g}, unless beaten twice): "
                     + ", ".join(under_older) + "; make those points' rounds again (remove their runs)")

@functools.cache  # each table asks for it (a subprocess): once a point is enough
def model_ms(p, n, d, net, agg):
    # The closed form (sparsgd simulate, which charges the same descriptors' costs as bench comm).
    out = subprocess.run([sparsgd, "simulate", "--model", "custom", "--params", str(n), "--workers", str(p),
                          "--density", d, "--network", net, "--compute-ms", "1", "--compress-ms", "0", "--json"],
                         capture_output=True, text=True, check=True)
    return next(r["comm_ms"] for r in json.loads(out.stdout)["rows"] if r["method"] == agg)

def counted_ms(run):
    # The ITERS - 1 counted exchanges, from exchange `first` on, the same for every run; auto must have
    # settled before them (first_settled_after: its exchanges before it first settled).
    per = run["sim_comm_ms_per_iteration"]
    if run.get("auto") and run["auto"]["first_settled_after"] > first:
        raise SystemExit(f"an auto run settled after {run['auto']['first_settled_after']} exchanges, later than the "
                         f"first counted one ({first})")
    counted = per[first:first + iters - 1]
    if len(counted) < iters - 1:
        raise SystemExit(f"a run has {len(per)} iterations: fewer than the {first} before the counted ones and "
                         f"the {iters - 1} to count (was it made with other ITERS?)")
    return counted

# Two figures per run: the median of its counted iterations, and its floor (the fastest of them).
# Another process or the host taking the CPU can only add to a worker's charged CPU time, never take
# from it, so the floor is what the exchange costs undisturbed by bursts and varies far less between runs
# (the spread table below measures both on these runs); load that lasts a whole run raises the floor too,
# which is what scripts/research/quiet.py is for.
STATISTICS = {"median": statistics.median, "floor": min}

def fmt_range(values):
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"

lines = ["<!-- auto sweep begin: generated by scripts/research/report-auto.sh -->",
         f"## `--aggregator auto` against the fixed aggregators ({len(grid)} points)", "",
         f"Generated by `scripts/research/report-auto.sh {rounds} {iters} {cheap_rounds}` on {cpu} (2 cores; P workers as threads),"
         f" with {builds([result(f) for f in sorted(runs.glob('*/*.json'))])}; the commits that added"
         " the runs say which binary made them.",
         "Each run's figure is bench comm's simulated aggregation (the span from the last worker's selection being",
         "ready to the last worker holding the sum) on the named network, each worker's compute charged as",
         "measured thread CPU time, so merges, selections and Ok-Topk's histograms count: the median over the",
         "counted iterations, and (second table) their floor, the fastest of them.",
         f"The sweep went {rounds} times over the {len(grid)} points (rounds); in each, every fixed aggregator and auto",
         "ran at a point one after the other, and a cell is the median over the rounds (after the first round, a",
         "fixed aggregator over 2x the best fixed run of its point in that round is not run again: its cell is its",
         f"first round's figure)."
         + (f" The {len(cheap)} points whose every first-round run took under 20 s ({', '.join(cheap)})"
            f" went on to {cheap_rounds} rounds: there a run's figure moves by 5-10% between runs however many exchanges it"
            " counts (the script's header), so more runs narrow their cells." if cheap else "")
         + f" Every run, fixed or auto, makes {first + iters - 1} exchanges and counts the same {iters - 1},",
         f"from exchange {first} on (0-based): auto's trials take at most 16, and with error feedback a cost moves with",
         "the exchange's index (findings.md), so auto's settled exchanges are compared with the fixed aggregators'",
         "same exchanges. auto's closed forms propose the cheapest candidate, the candidates within 3x of it are each run",
         f"{said(warmups)} times untimed (warm-ups) and then timed "
         + (", ".join(f"{rounds_} times where {count} were plausible" for count, rounds_ in timed) if timed else "?")
         + " (the trial exchanges, real exchanges whose results are",
         "exact: the 16 trial exchanges of four candidates pay for more timed rounds where fewer are plausible); candidates whose fastest is under the fastest candidate's second-fastest run again, timed, within 16",
         f"trial exchanges in all ({went_on} of the {len(tried)} settled runs that timed two candidates or more did), and it",
         f"keeps the fastest (within {100 * tie:g}%: the cheaper closed form, unless the fastest beat it twice"
         + "). `selections`: `top-k`, each",
         "worker's top-k of its synthetic gradient with error feedback (the trainer's exchange); `drawn`, where",
         "the gradients do not fit (P = 256 workers of n = 25M floats, a gradient and a residual each: 51 GB),",
         "each worker draws k uniformly random entries anew each iteration and only the aggregation runs",
         "(`--selections drawn`), so the workers' selections overlap less than top-k sets do. `model:` marks an",
         "aggregator that this machine cannot run at that size even so (bench comm's memory estimate exceeds",
         "24 GiB: dense holds n floats per worker, allgather every worker's pairs); its cell is the closed form,",
         "which leaves CPU time out and so flatters it: the best fixed time is then a lower bound and auto's",
         "ratio to it an upper bound. `best` is the smallest cell. `auto / best`: auto's cell against the best",
         "cell; `per round`: the same ratio within each round (auto against the best fixed run of its own",
         "round), min-max, which shows the run-to-run spread that a single pair of runs carries. `choice /",
         "best`: the cell of the aggregator auto settled on against the best cell (did auto pick the right",
         "one? the largest over the rounds where it settled differently). `same process`: auto ran in one process",
         "with its round's best fixed run at the point (bench comm --interleave: the same workers, each with its",
         "own compressor and residual, their exchanges alternating), and this is auto over that fixed aggregator",
         "there, round by round (min-max) and their median, which the state of the machine and of the process,",
         "minutes apart between separate runs, does not move (findings.md, commit 6418de8); where the two did not fit",
         "together auto ran alone and the cell is `-`. The bar set for it is 1.05. Runs of",
         "more than 2M pairs in all (P k: P = 256 at n = 25M, P = 32 at n = 25M and density 0.01) skip the",
         "serial replay (the tests verify every aggregator and auto)."]
header = ("| P | n | density | network | selections | gtopk-rd | oktopk | allgather | dense | best fixed | "
          "auto proposes -> settles (rounds) | auto (ms) | auto range (ms) | auto / best | per round | choice / best | "
          "same process |")
mark = lambda x: f"**{x:.2f}**" if x > 1.05 else f"{x:.2f}"

# Every run on record: point -> agg -> round -> counted iterations; auto's decisions; refusals.
points = []
missing = 0
for p, n, d, net in grid:
    point = f"{p}-{n}-{d}-{net}"
    point_rounds = cheap_rounds if point in cheap else rounds
    drawn = any((runs / str(r) / f"{point}-gtopk-rd.refused").exists() for r in range(1, point_rounds + 1))
    suffix = ".drawn" if drawn else ""
    counted = {agg: {} for agg in fixed + ["auto"]}
    # round -> (the fixed aggregator auto ran beside in its process, its counted iterations there)
    beside = {}
    autos, refusals = {}, {}
    for r in range(1, point_rounds + 1):
        for agg in fixed + ["auto"]:
            f = runs / str(r) / f"{point}-{agg}{suffix}.json"
            if f.exists():
                run = result(f)
                counted[agg][r] = counted_ms(run)
                if agg == "auto":
                    autos[r] = run["auto"]
                    if run.get("interleave"):
                        beside[r] = (run["interleave"]["aggregator"], counted_ms(run["interleave"]))
            elif (runs / str(r) / f"{point}-{agg}{suffix}.refused").exists():
                refusals[agg] = runs / str(r) / f"{point}-{agg}{suffix}.refused"
            elif not (runs / str(r) / f"{point}-{agg}{suffix}.skipped").exists():
                missing += 1
    points.append((p, n, d, net, drawn, counted, autos, refusals, beside))

verdicts = {}
for name, statistic in STATISTICS.items():
    rows, misses, round_ratios, side_misses = [], [], [], []
    met = total = picked = side_met = side_total = 0
    for p, n, d, net, drawn, counted, autos, refusals, beside in points:
        per_round = {agg: {r: statistic(c) for r, c in by_round.items()} for agg, by_round in counted.items()}
        cells, cell_ms = [], {}
        for agg in fixed:
            if per_round[agg]:
                cell_ms[agg] = statistics.median(per_round[agg].values())
                cells.append(f"{cell_ms[agg]:.2f}")
            elif agg in refusals:
                cell_ms[agg] = model_ms(p, n, d, net, agg)
                cells.append(f"model: {cell_ms[agg]:.2f}")
            else:
                cells.append("not run yet")
        best_name = min(cell_ms, key=cell_ms.get) if cell_ms else None
        best = cell_ms[best_name] if best_name else float("nan")
        if per_round["auto"] and best_name:
            auto_ms = statistics.median(per_round["auto"].values())
            ratio = auto_ms / best
            decided = [f"{a['model_choice']} -> {a['choice']}" for a in autos.values()]
            counts = ", ".join(f"{c} x{decided.count(c)}" for c in sorted(set(decided)))
            ratios = []
            for r, ms in per_round["auto"].items():
                # A fixed aggregator not rerun in this round (refused, or out of contention) counts with its cell.
                fixed_r = {agg: per_round[agg].get(r, cell_ms[agg]) for agg in fixed if agg in cell_ms}
                if fixed_r:
                    ratios.append(ms / min(fixed_r.values()))
            round_ratios += ratios
            choices = [cell_ms[a["choice"]] / best for a in autos.values() if a["choice"] in cell_ms]
            total += 1
            met += ratio <= 1.05
            if ratio > 1.05:
                misses.append(f"P = {p}, n = {n:,}, d = {d}, {net} ({ratio:.2f}x)")
            if choices:
                picked += max(choices) <= 1.05
            # auto against the fixed run beside it in its own process, round by round, and their median.
            side = [per_round["auto"][r] / statistic(c) for r, (_, c) in beside.items() if r in per_round["auto"]]
            if side:
                side_ratio = statistics.median(side)
                partners = sorted({a for a, _ in beside.values()})
                side_total += 1
                side_met += side_ratio <= 1.05
                if side_ratio > 1.05:
                    side_misses.append(f"P = {p}, n = {n:,}, d = {d}, {net} ({side_ratio:.2f}x)")
                side_cell = (f"{mark(side_ratio)} ({fmt_range(side)}; {', '.join(partners)}, {len(side)} round"
                             + ("s)" if len(side) > 1 else ")"))
            else:
                side_cell = "-"
            auto_cells = [counts, f"{auto_ms:.2f}", fmt_range(list(per_round["auto"].values())), mark(ratio),
                          fmt_range(ratios) if ratios else "-", mark(max(choices)) if choices else "-", side_cell]
        else:
            refusal = refusals.get("auto")
            why = re.search(r"needs about ([0-9.]+ GiB)", refusal.read_text()) if refusal else None
            auto_cells = [("not run here" + (f" (needs {why.group(1)})" if why else "")) if refusal
                          else "not run yet"] + ["-"] * 6
        best_cell = f"{best:.2f} ({best_name})" if best_name else "-"
        rows.append(f"| {p} | {n:,} | {d} | {net} | {'drawn' if drawn else 'top-k'} | " + " | ".join(cells)
                    + f" | {best_cell} | " + " | ".join(auto_cells) + " |")
    verdicts[name] = (met, total, picked, side_met, side_total)
    title = ("Medians: each run's figure is the median of its counted iterations." if name == "median" else
             "Floors: each run's figure is the fastest of its counted iterations (the same runs).")
    lines += ["", f"### {title}", "", header, "|---" * 17 + "|"] + rows
    lines += ["", f"Points auto ran: {total}. auto's cell within 5% of the best cell: {met} of {total}"
              + (f" (not: {'; '.join(misses)})" if misses else "") + f". The cell of the aggregator it settled on within 5% of",
              f"the best: {picked} of {total}. Per-round ratios (auto against its round's best fixed run), over all"
              f" {len(round_ratios)}: median {statistics.median(round_ratios) if round_ratios else float('nan'):.2f}, "
              f"range {fmt_range(round_ratios) if round_ratios else '-'}."
              + (f" auto against the best fixed run beside it in the same process (`same process`), the median over"
                 f" the rounds within 5%: {side_met} of {side_total}"
                 + (f" (not: {'; '.join(side_misses)})" if side_misses else "") + "." if side_total else "")]

# How much each statistic moves between runs of the same thing: for every fixed aggregator run in
# two rounds or more at a point, its largest over its smallest figure across the rounds.
spreads = {name: [] for name in STATISTICS}
for *_, counted, _, _, _ in points:
    for agg in fixed:
        if len(counted[agg]) > 1:
            for name, statistic in STATISTICS.items():
                figures = [statistic(c) for c in counted[agg].values()]
                spreads[name].append(max(figures) / min(figures))
if spreads["median"]:
    def quantiles(values):
        values = sorted(values)
        return (f"median {statistics.median(values):.3f}, 90th percentile "
                f"{values[min(len(values) - 1, int(0.9 * len(values)))]:.3f}, largest {values[-1]:.3f}")
    lines += ["", f"Run-to-run spread of the same fixed aggregator at the same point across the rounds"
              f" ({len(spreads['median'])} cases; largest over smallest figure): medians {quantiles(spreads['median'])};",
              f"floors {quantiles(spreads['floor'])}."]
# Whether auto's trials time a candidate as it runs on its own: each candidate's trial time (the
# fastest of its timed exchanges, by auto's own clock, so without its timing reduction) over the same
# round's fixed run of that aggregator at the same exchange indices (the fastest of them). The trials
# take the candidates in turn, round after round: warm-up rounds first, then timed ones, then, where
# trials were contested, rounds of some of them; which candidates those ran is not recorded, so for
# such a run the window is every exchange auto timed.
trial_ratios = []
for f in sorted(runs.glob("*/*-auto*.json")):
    decision = result(f)["auto"]
    trials = decision["trials"] if decision else []
    if len(trials) < 2 or decision["retrials"]:
        continue
    count = len(trials)
    warmup_rounds = (decision["trial_exchanges"] - decision["timed_exchanges"]) // count
    timed_rounds = decision["timed_rounds"]
    contested = decision["timed_exchanges"] > timed_rounds * count
    for i, trial in enumerate(trials):
        own = f.with_name(f.name.replace("-auto", "-" + trial["aggregator"], 1))
        if not own.exists() or trial["measured_ms"] is None:
            continue
        series = result(own)["sim_comm_ms_per_iteration"]
        if contested:
            same = min(series[warmup_rounds * count:decision["trial_exchanges"]])
        else:
            same = min(series[(warmup_rounds + j) * count + i] for j in range(timed_rounds))
        trial_ratios.append((trial["measured_ms"] / same, f"{f.parent.name}/{f.name.split('-auto')[0]} {trial['aggregator']}"))
if trial_ratios:
    values = sorted(r for r, _ in trial_ratios)
    worst = max(trial_ratios)
    lines += ["", f"auto's trials against the fixed runs ({len(values)} cases: a candidate's trial time over its own run's",
              "fastest of the same exchanges in the same round, or of every exchange auto timed where its trials were"
              f" contested, both on the simulated clock): median "
              f"{statistics.median(values):.2f}, range {values[0]:.2f}-{values[-1]:.2f}, over 1.1 in {sum(v > 1.1 for v in values)};"
              f" largest at {worst[1]}."]
# How quiet the machine was (scripts/research/quiet.py): each run started once it was, and was made again
# when other processes took more CPU during it than it can absorb.
loads = {f: json.loads(f.read_text()) for f in sorted(runs.glob("*/*.load"))}
unrecorded = len(list(runs.glob("*/*.json"))) - len(loads)
if loads:
    most = max(loads.values(), key=lambda l: l["others_cpu_s"])
    # A run of a second shows a tenth of a second of others' CPU (the clock ticks of two cores) as a share.
    shares = [l["others_cpu_s"] / l["wall_s"] for l in loads.values() if l["wall_s"] >= 10]
    kept = [f"{f.parent.name}/{f.stem} ({l['others_cpu_s']:.1f} s of others' CPU in {l['wall_s']:.0f} s)"
            for f, l in loads.items() if l["disturbed"]]
    lines += ["", f"Quiet: {len(loads)} runs recorded how much CPU other processes took while they ran (all cores' busy",
              f"time less the run's own; a run starts only after {quiet.QUIET_SAMPLE_S:g} s in which others took under "
              f"{100 * quiet.QUIET_SHARE:g}% of a core, and is made",
              f"again, up to {attempts} times, when others took over {quiet.ALLOWED_FIXED_S:g} s + {100 * quiet.ALLOWED_SHARE:g}% of "
              "its wall time): the most any kept run saw others "
              f"take was {most['others_cpu_s']:.2f} s (in {most['wall_s']:.0f} s)"
              + (f"; as a share of one core, over runs of 10 s or more, at most {100 * max(shares):.1f}%" if shares else "")
              + (f"; kept although disturbed: {'; '.join(kept)}." if kept else
                                                      "; none kept although disturbed.")
              + (f" {unrecorded} runs, made before the record was kept, have none." if unrecorded > 0 else "")]
    # Recorded since commit 5b7a204: the hypervisor's share of others' time, and how long the machine had run.
    hosted = [l for l in loads.values() if "steal_s" in l]
    if hosted:
        uptimes = [l["uptime_s"] / 3600 for l in hosted]
        lines += [f"Of {len(hosted)} runs that record it: steal (the host's other guests taking this machine's cores) at"
                  f" most {max(l['steal_s'] for l in hosted):.2f} s in a run, {sum(l['steal_s'] for l in hosted):.1f} s"
                  f" in all; the machine had run {min(uptimes):.1f}-{max(uptimes):.1f} h when they started."]
if missing:
    lines += ["", f"Incomplete: {missing} runs not made yet (rerun the script; finished runs are kept)."]
lines += ["<!-- auto sweep end -->"]
doc = pathlib.Path("docs/results/comm.md")
text = doc.read_text()
block = "\n".join(lines) + "\n"
if "<!-- auto sweep begin" in text:
    text = re.sub(r"<!-- auto sweep begin.*?<!-- auto sweep end -->\n", lambda m: block, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n" + block
staged = doc.with_name(doc.name + ".tmp")  # never a half-written comm.md
staged.write_text(text)
staged.replace(doc)
print(f"wrote the auto sweep into {doc}: " + "; ".join(
    f"by {name}s {met} of {total} points within 5% ({picked} by the choice's cell; {side_met} of {side_total} in the same process)"
    for name, (met, total, picked, side_met, side_total) in verdicts.items()))
PY
