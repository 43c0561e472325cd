#!/usr/bin/env bash
# A real shaped network on one machine: P network namespaces, each joined by a veth pair to a bridge
# that lives in its own namespace (the host's networking is not touched), every link direction
# shaped with tc tbf (1 Gbit/s by default), and `sparsgd bench comm --transport mpi` run under
# Open MPI across them: one rank per namespace, TCP only. Writes docs/results/scaling/shaped.md
# comparing the measured aggregation time with the closed-form alpha-beta model.
#
# Usage (as root):
#   scripts/shaped-network.sh [options]
#     --workers "2 3 4"           worker counts P to run (default 2 3 4; at most 16)
#     --aggregators "dense gtopk-rd allgather gtopk"
#     --n 25000000 --density 0.001 --compressor topk
#     --iters 5                   iterations per run (the dense runs), --sparse-iters 15 (the others)
#     --rate 1gbit --burst 48kb --latency 20ms     tbf parameters of every link direction
#     --gso-max-size 32768        largest segmentation-offload packet on the links (see below)
#     --sparsgd build/sparsgd     the binary (default: build/sparsgd, built with scripts/setup.sh if absent)
#     --runs runs/shaped          where the JSON of each run goes (kept; a finished run is not redone)
#     --fresh                     delete the earlier runs there first
#     --report FILE | --no-report where the Markdown fragment goes (default docs/results/scaling/shaped.md)
#     --no-rate-check             skip the check that the time follows the rate (dense, P = 2, half rate)
#     --timeout S                 longest time one mpirun may take (default 900 s)
#     --nice N                    the ranks' nice, for the task and for its autogroup (default 0;
#                                 negative gives the benchmark the cores on a shared machine; the
#                                 reported run used -19)
#     --mpirun-args "..."         more mpirun arguments (e.g. "--mca btl_tcp_progress_thread 1")
#     --eager-limit BYTES         Open MPI's TCP eager limit and fragment size (default 262144, so
#                                 that the sparse aggregators' messages go without a rendezvous;
#                                 0 keeps Open MPI's own, 64 KB; see below)
#   scripts/shaped-network.sh --cleanup-only
#       removes what earlier runs left behind (namespaces named sgdsh<PID>..., whose script is gone).
#
# Exit status: 0 on success; 77 when this machine cannot do it (not root, no `ip netns`, no tbf, no
# mpirun): one line on stderr says why (CTest treats 77 as skipped); 1 on any other failure. On
# every exit, error or signal, everything the script created is removed.
#
# Layout (names carry this script's PID, so concurrent runs and other users cannot collide):
#   sgdsh<PID>b       the bridge namespace: bridge br0, the bridge-side veth ends vw0..vw(P-1) and vhead
#   sgdsh<PID>w<i>    worker i: eth0 = 10.77.0.<i+1>/24, the other end of vw<i>; rank i runs here
#   sgdsh<PID>h       the head: eth0 = 10.77.0.254/24 (unshaped); mpirun runs here, so that the
#                     ranks' Open MPI daemons reach it over the bridge
# tbf sits on the egress of both ends of each worker's veth pair (eth0 in the worker, vw<i> in the
# bridge namespace), so a worker's sends and receives are each limited to the rate.
#
# Shaper parameters. The bucket (burst) is what a message can send at once after the link was idle:
# a real NIC has none, so it should be small; but the kernel hands tbf whole segmentation-offload
# packets (up to 64 KB on veth), tbf cuts any packet larger than its bucket into MTU-sized pieces
# in software, and on two shared cores that per-packet work alone held four 1 Gbit/s flows to
# about a quarter of the rate. So the links' offload packets are capped at 32 KB (gso_max_size)
# and the bucket is 48 KB: one such packet plus headroom for the shaper's timer firing late on a
# busy machine (48 KB is 0.39 ms at 1 Gbit/s). Cost: a message that finds the bucket full gets its
# first 48 KB through without delay, so a transfer can look up to 0.39 ms shorter than
# bytes / rate (a quarter of gtopk-rd's 1.6 ms messages at n = 25M, density 0.001; nothing for
# dense). latency 20 ms bounds the queue (about 2.5 MB at 1 Gbit/s): deep enough that the TCP
# senders never see a drop at these rates (the run records the shapers' drop counters).
#
# bench comm runs with --ring-allreduce (dense: the library's ring over point-to-point messages, the
# algorithm the closed form describes, not MPI_Iallreduce) and --model-network (the closed form is
# reported beside the measurement; nothing in the path is simulated).
# alpha for the model: the median of 200 one-entry gtopk-rd exchanges at P = 2 (runs/.../alpha.json).
#
# Open MPI: the hostfile lists the worker namespaces; --mca plm_rsh_agent is a small launcher that
# runs the daemon as `ip netns exec NS unshare --uts` with the hostname set to NS (distinct nodes,
# distinct session directories); pml ob1, btl tcp,self (no shared memory between ranks), and both
# btl_tcp_if_include and oob_tcp_if_include set to the bridge subnet. A message above Open MPI's TCP
# eager limit (64 KB) goes by rendezvous: its first fragment, the receiver's acknowledgement (sent
# when the receiver next polls), then the rest; on these links that cost gtopk-rd's 200 KB messages
# about 1.5 ms each (P = 2: 3.5 ms where the wire takes 1.6). The eager limit and the fragment size
# are raised to 256 KB, so that such a message goes in one piece (its receive is always posted
# first, so nothing is buffered); dense's 25 MB chunks still go by rendezvous.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/staged.sh"
workers="2 3 4"
aggregators="dense gtopk-rd allgather gtopk"
n=25000000
density=0.001
compressor=topk
iters=5
sparse_iters=15
rate=1gbit
burst=48kb
latency=20ms
gso_max_size=32768
sparsgd=""
runs="$here/runs/shaped"
report="$here/docs/results/scaling/shaped.md"
rate_check=1
fresh=0
mpi_timeout=900
cleanup_only=0
nice_level=0
mpirun_args=""
eager_limit=262144
subnet=10.77.0
command_line="scripts/shaped-network.sh${*:+ $*}"

die() { echo "shaped-network: $*" >&2; exit 1; }
cannot() { echo "shaped-network: cannot run here: $*" >&2; exit 77; }

while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers=$2; shift 2 ;;
    --aggregators) aggregators=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    --density) density=$2; shift 2 ;;
    --compressor) compressor=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --sparse-iters) sparse_iters=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --latency) latency=$2; shift 2 ;;
    --gso-max-size) gso_max_size=$2; shift 2 ;;
    --sparsgd) sparsgd=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    --no-report) report=""; shift ;;
    --no-rate-check) rate_check=0; shift ;;
    --fresh) fresh=1; shift ;;
    --timeout) mpi_timeout=$2; shift 2 ;;
    --nice) nice_level=$2; shift 2 ;;
    --mpirun-args) mpirun_args=$2; shift 2 ;;
    --eager-limit) eager_limit=$2; shift 2 ;;
    --cleanup-only) cleanup_only=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
workers=${workers//,/ }
aggregators=${aggregators//,/ }

# --- what this machine must offer -------------------------------------------------------------
[ "$(id -u)" = 0 ] || cannot "needs root (network namespaces, veth, tc)"
command -v ip >/dev/null || cannot "iproute2 (ip) is not installed"
command -v tc >/dev/null || cannot "tc (iproute2) is not installed"
ip netns list >/dev/null 2>&1 || cannot "'ip netns' does not work"
unshare --net true 2>/dev/null || cannot "network namespaces are not available (unshare --net failed)"

# --- cleanup ------------------------------------------------------------------------------------
# Kills what still runs inside a namespace (only our own namespaces are ever passed), then deletes
# it; the veth ends and the bridge inside go with it.
remove_namespace() {
  local ns=$1 pid
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
}

if [ "$cleanup_only" = 1 ]; then
  removed=0
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^sgdsh[0-9]+(b|h|w[0-9]+)$' || true); do
    owner=${ns#sgdsh}; owner=${owner%%[bhw]*}
    if [ -r "/proc/$owner/cmdline" ] && tr '\0' ' ' <"/proc/$owner/cmdline" | grep -q shaped-network; then
      echo "shaped-network: keeping $ns (its run, PID $owner, is still going)" >&2
      continue
    fi
    remove_namespace "$ns"
    echo "shaped-network: removed $ns" >&2
    removed=$((removed + 1))
  done
  echo "shaped-network: cleanup done ($removed namespaces removed)" >&2
  exit 0
fi

prefix="sgdsh$$"
bridge_ns="${prefix}b"
head_ns="${prefix}h"
created=()
tmp=""
mpirun_pid=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ -n "$mpirun_pid" ]; then
    kill -TERM "$mpirun_pid" 2>/dev/null || true
    sleep 1
    kill -KILL "$mpirun_pid" 2>/dev/null || true
  fi
  local ns
  for ns in "${created[@]}"; do remove_namespace "$ns"; done
  [ -n "$tmp" ] && rm -rf "$tmp"
  local left
  left=$(ip netns list | awk '{print $1}' | grep "^${prefix}[bhw]" || true)
  if [ -n "$left" ]; then
    echo "shaped-network: could not remove: $left" >&2
    status=1
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the program and its launcher -----------------------------------------------------------------
command -v mpirun >/dev/null || cannot "mpirun (Open MPI) is not installed"
if [ -z "$sparsgd" ]; then
  sparsgd="$here/build/sparsgd"
  [ -x "$sparsgd" ] || bash "$here/scripts/setup.sh"
fi
[ -x "$sparsgd" ] || die "no sparsgd binary at $sparsgd"
sparsgd=$(cd "$(dirname "$sparsgd")" && pwd)/$(basename "$sparsgd")
if [ -n "$report" ] && ! [ -x /usr/bin/python3 ]; then
  apt-get update -q && apt-get install -y -q python3
fi
max_p=0
for p in $workers; do
  [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 16 ] || die "--workers: $p is not in 1..16"
  [ "$p" -gt "$max_p" ] && max_p=$p
done
if [ "$rate_check" = 1 ] && [ "$max_p" -lt 2 ]; then rate_check=0; fi
[[ "$eager_limit" =~ ^[0-9]+$ ]] || die "--eager-limit: $eager_limit is not a number of bytes"
eager_args=""
if [ "$eager_limit" -gt 0 ]; then
  eager_args="--mca btl_tcp_eager_limit $eager_limit --mca btl_tcp_max_send_size $eager_limit"
fi
tmp=$(mktemp -d /tmp/shaped-network.XXXXXX)

# Open MPI calls `AGENT [options] HOST COMMAND...` as it would call ssh; HOST is a namespace.
cat >"$tmp/agent" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$1"; shift; eval "$*"' sh "$host" "$@"
EOF
chmod +x "$tmp/agent"

# Each rank: `rank NICE PROGRAM...`. With autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled)
# a task's nice only weighs within its session's group and groups share the cores equally, so a
# nice other than 0 is also given to the rank's group (its Open MPI daemon's session: ours, never
# the caller's). The kernel takes one such change a second, hence the retries.
cat >"$tmp/rank" <<'EOF'
#!/bin/sh
n=$1
shift
if [ "$n" != 0 ] && [ -w /proc/self/autogroup ]; then
  i=0
  while [ $i -lt 40 ] && ! echo "$n" 2>/dev/null >/proc/self/autogroup; do sleep 0.25; i=$((i + 1)); done
fi
exec nice -n "$n" "$@"
EOF
chmod +x "$tmp/rank"

# --- the network ----------------------------------------------------------------------------------
new_namespace() {
  ip netns add "$1"
  created+=("$1")
  ip -n "$1" link set lo up
}
shape() {  # namespace device
  tc -n "$1" qdisc add dev "$2" root tbf rate "$rate" burst "$burst" latency "$latency"
}
new_namespace "$bridge_ns"
ip -n "$bridge_ns" link add br0 type bridge
ip -n "$bridge_ns" link set br0 up
new_namespace "$head_ns"
ip -n "$bridge_ns" link add vhead type veth peer name eth0 netns "$head_ns"
ip -n "$bridge_ns" link set vhead master br0 up
ip -n "$head_ns" addr add "$subnet.254/24" dev eth0
ip -n "$head_ns" link set eth0 up
for ((i = 0; i < max_p; i++)); do
  ns="${prefix}w$i"
  new_namespace "$ns"
  ip -n "$bridge_ns" link add "vw$i" type veth peer name eth0 netns "$ns"
  ip -n "$bridge_ns" link set "vw$i" master br0 up
  ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
  if [ -n "$gso_max_size" ]; then
    ip -n "$ns" link set eth0 gso_max_size "$gso_max_size"
    ip -n "$bridge_ns" link set "vw$i" gso_max_size "$gso_max_size"
  fi
  ip -n "$ns" link set eth0 up
  if ! shape "$ns" eth0 || ! shape "$bridge_ns" "vw$i"; then
    cannot "tc tbf is not available on this kernel"
  fi
done
echo "shaped-network: $max_p workers in namespaces ${prefix}w*, every link direction shaped to $rate (burst $burst, latency $latency)" >&2

set_rate() {  # new rate on every shaped link
  local r=$1 i
  for ((i = 0; i < max_p; i++)); do
    tc -n "${prefix}w$i" qdisc change dev eth0 root tbf rate "$r" burst "$burst" latency "$latency"
    tc -n "$bridge_ns" qdisc change dev "vw$i" root tbf rate "$r" burst "$burst" latency "$latency"
  done
}

# What the two tbf of worker i have done so far: "bytes-sent dropped" of its own egress (eth0), then
# of the bridge side's egress towards it (vw<i>).
tbf_stats() {
  { tc -n "${prefix}w$1" -s qdisc show dev eth0; tc -n "$bridge_ns" -s qdisc show dev "vw$1"; } |
    awk '/Sent/ {gsub(",", ""); printf "%s %s ", $2, $7} END {print ""}'
}

# Runs `sparsgd bench comm` on P ranks (rank i in worker namespace i); the JSON goes to $2.
# Extra arguments are passed to bench comm.
run_bench() {
  local p=$1 out=$2 i
  shift 2
  : >"$tmp/hosts"
  for ((i = 0; i < p; i++)); do echo "${prefix}w$i slots=1" >>"$tmp/hosts"; done
  local before=()
  for ((i = 0; i < p; i++)); do before+=("$(tbf_stats "$i")"); done
  local raw err
  raw=$(staged "$out")
  err=$(staged "$out")
  # mpirun in a session of its own: whatever the ranks' wrapper does to its scheduling group
  # (see $tmp/rank) can then never reach the caller's.
  setsid -w ip netns exec "$head_ns" unshare --uts sh -c 'hostname "$1"; shift; exec "$@"' sh "$head_ns" \
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout "$mpi_timeout" mpirun --hostfile "$tmp/hosts" -np "$p" --map-by node --bind-to none \
      --mca plm_rsh_agent "$tmp/agent" --mca plm_rsh_no_tree_spawn 1 \
      --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" $eager_args $mpirun_args \
      "$tmp/rank" "$nice_level" "$sparsgd" bench comm --transport mpi --json "$@" >"$raw" 2>"$err" &
  mpirun_pid=$!
  local status=0
  wait "$mpirun_pid" || status=$?
  mpirun_pid=""
  if [ "$status" != 0 ] || ! grep -q '"matches_reference":true' "$raw"; then
    cat "$err" "$raw" >&2
    die "the run at P = $p failed (exit $status): $*"
  fi
  # What crossed each worker's shaped links during the run (frames, with their headers), and what
  # the shapers dropped.
  local after=()
  for ((i = 0; i < p; i++)); do after+=("$(tbf_stats "$i")"); done
  local staged_run
  staged_run=$(staged "$out")
  /usr/bin/python3 - "$raw" "$p" "${before[@]}" "${after[@]}" >"$staged_run" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
p = int(sys.argv[2])
before = [list(map(int, s.split())) for s in sys.argv[3:3 + p]]
after = [list(map(int, s.split())) for s in sys.argv[3 + p:3 + 2 * p]]
delta = [[a - b for a, b in zip(x, y)] for x, y in zip(after, before)]
d["tbf_sent_bytes"] = [x[0] for x in delta]       # worker -> bridge
d["tbf_received_bytes"] = [x[2] for x in delta]   # bridge -> worker
d["tbf_dropped"] = [x[1] + x[3] for x in delta]
print(json.dumps(d))
PY
  publish "$staged_run" "$out"
  rm -f "$raw" "$err"
}

mkdir -p "$runs"
[ "$fresh" = 1 ] && rm -f "$runs"/*.json "$runs"/env.txt
# What the report says about the machine and the run (appended to by every invocation).
{
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "kernel=$(uname -r)"
  echo "cpu=$(/usr/bin/python3 "$here/scripts/machine.py")"
  echo "cores=$(nproc)"
  echo "open_mpi=$(mpirun --version 2>/dev/null | awk 'NR == 1 {print $NF}')"
  echo "autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo '?')"
  echo "rate=$rate"
  echo "burst=$burst"
  echo "latency=$latency"
  echo "gso_max_size=$gso_max_size"
  echo "nice=$nice_level"
  echo "eager_limit=$eager_limit"
  echo "mpirun_args=$mpirun_args"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command=$command_line"
} >>"$runs/env.txt"

# alpha: one exchange of a one-entry message between two namespaces (gtopk-rd, P = 2, k = 1), as
# the MPI transport sees it; the median over many iterations.
if [ ! -s "$runs/alpha.json" ] && [ "$max_p" -ge 2 ]; then
  echo "shaped-network: measuring alpha" >&2
  run_bench 2 "$runs/alpha.json" --n 1000 --density 0.001 --compressor topk --aggregator gtopk-rd --iters 200
fi
# Values from files reach Python as arguments, never as code.
alpha_ms=$(/usr/bin/python3 -c 'import json,sys; print(float(json.load(open(sys.argv[1]))["agg_median_ms"]))' "$runs/alpha.json" 2>/dev/null || echo 0.05)
alpha_s=$(/usr/bin/python3 -c 'import sys; print(float(sys.argv[1]) / 1e3)' "$alpha_ms")
bw_bits=$(/usr/bin/python3 -c '
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[1].lower())
if not m: sys.exit("--rate must look like 1gbit, 500mbit or 100kbit")
print(int(float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]))' "$rate")
network="alpha=$alpha_s,bw=$bw_bits"
echo "shaped-network: model network $network (alpha measured: $alpha_ms ms)" >&2

for p in $workers; do
  for agg in $aggregators; do
    out="$runs/$p-$agg.json"
    [ -s "$out" ] && continue
    it=$sparse_iters
    [ "$agg" = dense ] && it=$iters
    comp=$compressor
    [ "$agg" = randk-shared ] && comp=randk
    echo "shaped-network: P=$p $agg" >&2
    run_bench "$p" "$out" --n "$n" --density "$density" --compressor "$comp" --aggregator "$agg" \
      --iters "$it" --ring-allreduce --model-network "$network" --timeout-ms 600000
  done
done

# Does the time follow the rate? dense at P = 2 with every link at half the rate.
if [ "$rate_check" = 1 ] && [ ! -s "$runs/rate-check.json" ]; then
  half=$((bw_bits / 2))
  echo "shaped-network: rate check, dense at P = 2 with links at ${half} bit/s" >&2
  set_rate "${half}bit"
  run_bench 2 "$runs/rate-check.json" --n "$n" --density "$density" --compressor "$compressor" --aggregator dense \
    --iters "$iters" --ring-allreduce --model-network "alpha=$alpha_s,bw=$half" --timeout-ms 600000
  set_rate "$rate"
fi

echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$runs/env.txt"

if [ -n "$report" ]; then
  mkdir -p "$(dirname "$report")"
  report_staged=$(staged "$report")
  /usr/bin/python3 "$here/scripts/shaped-report.py" --runs "$runs" --workers "$workers" --aggregators "$aggregators" \
    --sparsgd "$sparsgd" --n "$n" --density "$density" >"$report_staged"
  publish "$report_staged" "$report"
  echo "shaped-network: wrote $report" >&2
fi
echo "shaped-network: done; removing the namespaces" >&2
