#!/usr/bin/env bash
# Usage: mpi_matches_local.sh SPARSGD MPIRUN. Trains the same short run in-process and under
# mpirun with 2 ranks and checks that the results are identical.
set -euo pipefail
sparsgd=$1
mpirun=$2
args=(train --model mlp --workers 2 --max-iters 40 --density 0.05 --aggregator gtopk --network none --json)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$sparsgd" "${args[@]}" --out "$work/local" >"$work/local.json" 2>"$work/local.err"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  "$mpirun" -np 2 --oversubscribe --bind-to none "$sparsgd" "${args[@]}" --out "$work/mpi" >"$work/mpi.json" 2>"$work/mpi.err"
field() { grep -o "\"$1\":[^,}]*" "$2"; }
for f in final_train_loss final_test_loss final_test_accuracy bytes_per_worker_per_iteration iterations; do
  local_value=$(field "$f" "$work/local.json")
  mpi_value=$(field "$f" "$work/mpi.json")
  if [ -z "$local_value" ] || [ "$local_value" != "$mpi_value" ]; then
    echo "mismatch: local $local_value, mpi $mpi_value" >&2
    exit 1
  fi
  echo "$local_value (both)"
done
