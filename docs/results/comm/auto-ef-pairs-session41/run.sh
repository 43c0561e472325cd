#!/usr/bin/env bash
# Session 41: is auto's settled gtopk-rd slower than fixed gtopk-rd at P = 4, n = 25M, density 0.01,
# 10gbe (1.26x in the third sweep's round 1), and is error feedback (the residuals the trials leave)
# the cause? Rounds of four runs, in an order rotated each round, each with the sweep's options
# (scripts/auto-sweep-rules.sh: 27 exchanges, 17-26 counted) and on a quiet machine (scripts/quiet.py):
# fixed gtopk-rd and auto, each with error feedback on and off.
# Usage: bash docs/results/comm/auto-ef-pairs-session41/run.sh ROUNDS   (from the repository root;
# SPARSGD=path/to/sparsgd, OUT=folder); then /usr/bin/python3 .../summarize.py FOLDER [BASE].
# The runs here: build 6c0c0b7 (build-sweep), 4 rounds. An auto run with --auto-trials 0 was also made
# in rounds 1 and 2 and dropped: there auto takes the closed forms' choice, Ok-Topk, not gtopk-rd.
set -uo pipefail
cd "$(git rev-parse --show-toplevel)"
S=${SPARSGD:-build-sweep/sparsgd}
out=${OUT:-docs/results/comm/auto-ef-pairs-session41}
mkdir -p $out
declare -A V
V[fix]="--aggregator gtopk-rd"
V[auto]="--aggregator auto"
V[fixnoef]="--aggregator gtopk-rd --error-feedback off"
V[autonoef]="--aggregator auto --error-feedback off"
names=(${NAMES:-fix auto fixnoef autonoef})
rounds=${1:-4}
for ((r=1; r<=rounds; r++)); do
  m=${#names[@]}
  for ((j=0; j<m; j++)); do
    v=${names[$(( (j + r - 1) % m ))]}
    f=$out/$r-$v
    [ -s $f.json ] && continue
    for attempt in 1 2 3; do
      /usr/bin/python3 scripts/quiet.py $f.load -- $S bench comm --transport local --workers ${P:-4} --n ${N:-25000000} --density ${D:-0.01} --network ${NET:-10gbe} --compressor topk --json --iters 27 ${V[$v]} > $f.tmp
      /usr/bin/python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["disturbed"])' $f.load && break
    done
    mv $f.tmp $f.json
    echo "$(date +%T) round $r $v done"
  done
done
