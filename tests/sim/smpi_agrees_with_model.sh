#!/usr/bin/env bash
# One short run of `sparsgd bench comm` under SimGrid SMPI on P simulated hosts (paper-1gbe): the
# results must match the serial reference and the simulated time must be within 25% of the closed form.
# Usage: smpi_agrees_with_model.sh SOURCE_DIR SMPI_SPARSGD P AGGREGATOR
set -euo pipefail
source_dir=$1 program=$2 hosts=$3 aggregator=$4
compressor=topk
[ "$aggregator" = randk-shared ] && compressor=randk
out=$("$source_dir/scripts/smpi-run.sh" "$hosts" paper-1gbe "$program" bench comm --transport mpi --n 1000000 \
  --density 0.005 --compressor "$compressor" --aggregator "$aggregator" --model-network paper-1gbe --iters 2 --json)
echo "$out"
echo "$out" | grep '^{' | /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
ratio = d["clock_ms"] / d["model_comm_ms"]
print("SMPI %.3f ms, closed form %.3f ms, ratio %.3f" % (d["clock_ms"], d["model_comm_ms"], ratio))
sys.exit(0 if d["matches_reference"] and abs(ratio - 1) <= 0.25 else 1)
'
