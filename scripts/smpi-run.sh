#!/usr/bin/env bash
# Runs an SMPI program (built with smpicxx, e.g. build-smpi/sparsgd) on a simulated cluster of P hosts,
# one rank each, whose network is the closed form's alpha-beta network and nothing else.
#
#   scripts/smpi-run.sh [--topology flat|switch|tree] [--compute] P NETWORK PROGRAM [ARGS...]
#                                                         NETWORK: paper-1gbe, 1gbe or 10gbe
#
# --topology: the cluster's network (scripts/smpi_platform.py): flat (default: private links, a
#   backbone that never limits, exactly the closed form's network), switch (one switch whose fabric
#   all flows share) or tree (racks with oversubscribed uplinks). switch and tree also turn on
#   SimGrid's cross traffic (each flow's acknowledgments share the reverse direction, as TCP's do).
# --compute: each rank's computation between MPI calls takes the CPU time it took here
#   (smpi/simulate-computation:yes, host and reference speed both 1 Gflop/s), so merges, coding and
#   selection count; without it computation takes no simulated time.
#
# The platform comes from scripts/smpi_platform.py (written to $SMPI_PLATFORM_DIR, default a
# temporary directory). Extra smpirun options (--cfg=...) may be given in $SMPI_EXTRA_OPTIONS; later
# options override earlier ones. SimGrid's log goes to stderr, the program's output to stdout.
#
# Why each setting:
# - smpi/simulate-computation:no (unless --compute): the program's computation (compression,
#   merging, the residual update) takes no simulated time, so what is timed is communication only,
#   like the closed form. With --compute, SMPI charges the CPU time each rank took here between MPI
#   calls (its thread's CPU clock), scaled by smpi/host-speed over the host's speed: both 1 Gflop/s.
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
topology=flat
compute=no
while (($#)); do
  case $1 in
    --topology)
      (($# >= 2)) || { echo "$0: --topology needs a value" >&2; exit 2; }
      topology=$2
      shift 2 ;;
    --compute) compute=yes; shift ;;
    *) break ;;
  esac
done
case $topology in flat | switch | tree) ;; *) echo "$0: unknown topology '$topology' (flat, switch or tree)" >&2; exit 2 ;; esac
if (($# < 3)); then
  echo "usage: $0 [--topology flat|switch|tree] [--compute] P NETWORK PROGRAM [ARGS...]" >&2
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
platform=$(/usr/bin/python3 "$here/smpi_platform.py" --hosts "$hosts" --network "$network" --topology "$topology" --out "$dir")
crosstraffic=0
[ "$topology" = flat ] || crosstraffic=1
# shellcheck disable=SC2086  # SMPI_EXTRA_OPTIONS is a list of words
smpirun -np "$hosts" -platform "$platform" -hostfile "$dir/hostfile-$hosts.txt" \
  --cfg=smpi/simulate-computation:$compute --cfg=smpi/host-speed:1Gf --cfg=network/model:CM02 \
  --cfg=network/crosstraffic:$crosstraffic \
  --cfg=smpi/allreduce:lr --cfg=smpi/privatization:dlopen --log=root.thresh:warning \
  ${SMPI_EXTRA_OPTIONS:-} "$@"
