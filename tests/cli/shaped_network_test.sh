#!/usr/bin/env bash
# CTest: scripts/shaped-network.sh at P = 2 on a small gradient. Passes when the runs match the
# serial reference (the script fails otherwise) and no namespace of the run is left behind, both
# after a good run and after one that fails on purpose. Exits 77 (skipped) where the script cannot
# run (not root, no network namespaces, no tbf, no mpirun).
# Usage: shaped_network_test.sh SCRIPT SPARSGD
set -uo pipefail
script=$1
sparsgd=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

leftovers() {  # namespaces of the run whose log is $1
  local prefix
  prefix=$(grep -o 'namespaces sgdsh[0-9]*' "$1" | head -1 | cut -d' ' -f2)
  [ -n "$prefix" ] || return 0
  ip netns list | awk '{print $1}' | grep "^${prefix}[bhw]" || true
}

"$script" --workers 2 --aggregators "dense gtopk-rd" --n 100003 --density 0.01 --iters 2 --sparse-iters 3 \
  --sparsgd "$sparsgd" --runs "$work/runs" --no-report --no-rate-check --timeout 120 >"$work/good.log" 2>&1
status=$?
cat "$work/good.log"
[ "$status" = 77 ] && exit 77
if [ "$status" != 0 ]; then echo "FAIL: the shaped run failed (exit $status)"; exit 1; fi
for f in 2-dense 2-gtopk-rd; do
  grep -q '"matches_reference": *true' "$work/runs/$f.json" || { echo "FAIL: $f does not match the reference"; exit 1; }
  grep -q '"tbf_sent_bytes": *\[[1-9]' "$work/runs/$f.json" || { echo "FAIL: $f sent nothing through the shaper"; exit 1; }
done
left=$(leftovers "$work/good.log")
[ -z "$left" ] || { echo "FAIL: left behind after a good run: $left"; exit 1; }

# A run that fails (an aggregator the benchmark refuses) must fail and still clean up.
"$script" --workers 2 --aggregators bogus --n 1000 --sparsgd "$sparsgd" --runs "$work/bad" --no-report \
  --no-rate-check --timeout 60 >"$work/bad.log" 2>&1
status=$?
cat "$work/bad.log"
[ "$status" != 0 ] || { echo "FAIL: a bad run exited 0"; exit 1; }
left=$(leftovers "$work/bad.log")
[ -z "$left" ] || { echo "FAIL: left behind after a failed run: $left"; exit 1; }
echo "PASS"
