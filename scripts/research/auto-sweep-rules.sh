# The auto sweep's per-run rules, sourced by scripts/research/report-auto.sh and scripts/research/auto-pairs.sh so
# that paired runs are made exactly as the sweep's are.
# sweep_skips_replay P N DENSITY: true where bench comm's serial replay is left to the tests. It
# holds every worker and follows every entry through every round (gtopk-rd: over 10 minutes a run
# at P = 32, n = 25M, density 0.01, before its reference became O(k P log P); not measured since):
# past 2M pairs in all (P k), correctness is the tests' job.
sweep_skips_replay() {
  awk -v p="$1" -v n="$2" -v d="$3" 'BEGIN { exit !(p * int(n * d) > 2000000) }'
}
# The first counted exchange (0-based), the same for every run, fixed or auto: auto's trials take at
# most 16 exchanges (report-auto.sh's header says why the fixed runs skip the same ones).
sweep_first_counted=17
# Counted exchanges are ITERS - 1 from sweep_first_counted on, ITERS being report-auto.sh's second
# argument; the sweeps so far used 11.
sweep_default_iters=11
# sweep_quiet_run OUT LABEL COMMAND...: COMMAND's standard output into OUT.json, made once the machine
# is quiet (scripts/research/quiet.py, which writes OUT.load) and made again, up to 3 times in all, when other
# processes took CPU during it (the last try is kept); LABEL names the run in that message.
sweep_quiet_run() {
  local out=$1 label=$2 attempt
  shift 2
  for attempt in 1 2 3; do
    /usr/bin/python3 scripts/research/quiet.py "$out.load" -- "$@" >"$out.tmp"
    /usr/bin/python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["disturbed"])' "$out.load" && break
    echo "$(date +%H:%M:%S) other processes were busy during $label ($(cat "$out.load")): again" >&2
  done
  mv "$out.tmp" "$out.json"
}
