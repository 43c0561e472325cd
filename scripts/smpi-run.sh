#!/usr/bin/env bash
# Runs an SMPI program (built with smpicxx, e.g. build-smpi/sparsgd) on a simulated cluster of P hosts,
# one rank each, whose network is the closed form's alpha-beta network and nothing else.
#
#   scripts/smpi-run.sh P NETWORK PROGRAM [ARGS...]      NETWORK: paper-1gbe, 1gbe or 10gbe
#
# The platform comes from scripts/smpi_platform.py (written to $SMPI_PLATFORM_DIR, default a
# temporary directory). Extra smpirun options (--cfg=...) may be given in $SMPI_EXTRA_OPTIONS; later
# options override earlier ones. SimGrid's log goes to stderr, the program's output to stdout.
#
# Why each setting:
# - smpi/simulate-computation:no: the program's computation (compression, merging, the residual
#   update) takes no simulated time, so what is timed is communication only, like the closed form.
#   (With it on, SMPI injects the CPU time this machine took, scaled by smpi/host-speed.)
# - network/model:CM02: plain max-min sharing; a message takes latency + size / bandwidth. smpirun's
#   default (network/model:SMPI) multiplies latency and bandwidth by piecewise factors fitted to a
#   real cluster's TCP stack (latency x11.6 for messages over 64 KiB): a different network.
# - network/crosstraffic:0: otherwise every flow adds acknowledgment traffic (5% of its size) in the
#   reverse direction, which shares the links with the other direction's data in pairwise exchanges.
# - smpi/allreduce:lr: the logical-ring allreduce (reduce-scatter then allgather), which is what the
#   dense closed form assumes (src/sim/cost_model.cpp); the default selector picks other algorithms.
# - smpi/privatization:dlopen: every rank gets its own copy of the program's globals and statics (the
#   current default; stated so that another default cannot silently share them between ranks).
set -euo pipefail
if (($# < 3)); then
  echo "usage: $0 P NETWORK PROGRAM [ARGS...]" >&2
  exit 2
fi
hosts=$1 network=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
command -v smpirun >/dev/null || { echo "$0: smpirun not found (apt-get install libsimgrid-dev)" >&2; exit 2; }
dir=${SMPI_PLATFORM_DIR:-}
if [ -z "$dir" ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
fi
python3 "$here/smpi_platform.py" --hosts "$hosts" --network "$network" --out "$dir" >/dev/null
# shellcheck disable=SC2086  # SMPI_EXTRA_OPTIONS is a list of words
smpirun -np "$hosts" -platform "$dir/platform-$hosts.xml" -hostfile "$dir/hostfile-$hosts.txt" \
  --cfg=smpi/simulate-computation:no --cfg=network/model:CM02 --cfg=network/crosstraffic:0 \
  --cfg=smpi/allreduce:lr --cfg=smpi/privatization:dlopen --log=root.thresh:warning \
  ${SMPI_EXTRA_OPTIONS:-} "$@"
