#!/usr/bin/env bash
# CTest: `bench comm` over MPI with NP ranks, for every registered aggregator (`sparsgd list
# aggregators --json`), each exchange checked against the serial replay. An aggregator whose
# workers must select the same indices gets a compressor that draws its indices; the others topk.
# Usage: mpi_every_aggregator.sh SPARSGD MPIRUN NP
set -euo pipefail
cli=$1 mpirun=$2 np=$3
pairs=$("$cli" list aggregators --json | python3 -c '
import json, sys
for a in json.load(sys.stdin):
    print(a["name"], "randk" if a["properties"]["needs_shared_indices"] else "topk")')
[ -n "$pairs" ] || { echo "no aggregators listed" >&2; exit 1; }
failed=()
while read -r agg comp; do
  out=$("$mpirun" -np "$np" --oversubscribe --bind-to none "$cli" bench comm --transport mpi --n 20011 --density 0.01 \
        --compressor "$comp" --aggregator "$agg" --iters 3 --timeout-ms 20000 --json 2>&1) || true
  if grep -q '"matches_reference":true' <<<"$out"; then
    echo "np $np $agg ($comp): matches the reference"
  else
    echo "np $np $agg ($comp): FAILED" >&2
    echo "$out" | tail -20 >&2
    failed+=("$agg")
  fi
done <<<"$pairs"
[ ${#failed[@]} -eq 0 ] || { echo "failed at np $np: ${failed[*]}" >&2; exit 1; }
echo "every aggregator matches its reference at np $np"
