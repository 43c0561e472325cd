#!/usr/bin/env bash
# The reliability suite: bad input to every command, faults injected into running jobs (in-process
# and under mpirun), damaged checkpoints, and the library's own fault tests. Ends with one line:
#   reliability: F faults injected, B bad inputs tried, H hostile inputs tried, X failures
# and exits non-zero if X > 0.
#
# Usage: run.sh --cli PATH [--tests DIR] [--mpirun PATH] [--torch]
#   --tests DIR   the directory of the gtest binaries (core_tests, ...): their fault tests count too
#   --mpirun PATH run the multi-process faults (a killed rank, a hung rank) under Open MPI
#   --torch       the CLI was built with LibTorch: run the training faults
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cli="" tests_dir="" mpirun="" torch=0
while (($#)); do
  case $1 in
    --cli) cli=$2; shift 2 ;;
    --tests) tests_dir=$2; shift 2 ;;
    --mpirun) mpirun=$2; shift 2 ;;
    --torch) torch=1; shift ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$cli" ] || { echo "run.sh: --cli must name the sparsgd executable" >&2; exit 2; }

faults=0 bad_inputs=0 hostile=0 failures=0
work=$(mktemp -d /tmp/sparsgd-reliability.XXXXXX)
cleanup() {
  # A failed scenario must not leave ranks behind.
  pkill -KILL -f "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi_flags=(--oversubscribe --bind-to none)

with_torch() { [ "$torch" = 1 ]; }
with_mpi() { [ -n "$mpirun" ]; }
pass() { printf '  ok    %s\n' "$1"; }
fail() {
  printf '  FAIL  %s: %s\n' "$1" "$2"
  failures=$((failures + 1))
}

# reject NAME REGEX ARGS...: bad input, one clear line, a non-zero exit, no crash, no hang.
reject() {
  local name=$1 regex=$2
  shift 2
  bad_inputs=$((bad_inputs + 1))
  local err="$work/$name.err"
  timeout 120 "$cli" "$@" >/dev/null 2>"$err" </dev/null
  local status=$?
  if [ "$status" -eq 0 ]; then
    fail "bad input $name" "accepted: sparsgd $*"
  elif [ "$status" -ge 124 ]; then
    fail "bad input $name" "crashed, hung or was killed (status $status): sparsgd $* :: $(tail -c 300 "$err")"
  elif ! grep -Eq -- "$regex" "$err"; then
    fail "bad input $name" "stderr did not match /$regex/: $(tail -c 300 "$err")"
  elif [ "$(grep -c . "$err")" -gt 3 ] || grep -q "terminate called\|Segmentation\|Aborted" "$err"; then
    fail "bad input $name" "more than a clear line: $(head -c 300 "$err")"
  else
    pass "bad input $name"
  fi
}

# expect_run NAME STATUS REGEX SECONDS COMMAND...: the run must end with exit status STATUS
# ("nonzero" for any failure), stderr+stdout matching REGEX, within SECONDS.
expect_run() {
  local name=$1 want=$2 regex=$3 limit=$4
  shift 4
  local log="$work/$name.log" start=$SECONDS
  timeout $((limit + 30)) "$@" >"$log" 2>&1 </dev/null
  local status=$? took=$((SECONDS - start))
  if [ "$want" = nonzero ] && { [ "$status" -eq 0 ] || [ "$status" -ge 124 ]; }; then
    fail "$name" "exit status $status, expected a clean failure: $(tail -c 400 "$log")"
  elif [ "$want" != nonzero ] && [ "$status" -ne "$want" ]; then
    fail "$name" "exit status $status, expected $want: $(tail -c 400 "$log")"
  elif ! grep -Eq -- "$regex" "$log"; then
    fail "$name" "output did not match /$regex/: $(tail -c 400 "$log")"
  elif [ "$took" -gt "$limit" ]; then
    fail "$name" "took ${took}s, more than ${limit}s"
  else
    pass "$name (${took}s)"
  fi
}

# expect_fault ...: expect_run for a run with a fault injected into it (counted as one).
expect_fault() {
  faults=$((faults + 1))
  expect_run "$@"
}

# json_field FILE FIELD: a top-level number or boolean of a one-line JSON summary.
json_field() { grep -o "\"$2\":[^,}]*" "$1" | head -1 | cut -d: -f2; }

echo "== bad input"
source "$here/bad_inputs.sh"
source "$here/hostile_names.sh"

if with_torch; then
  echo "== faults in in-process training"
  train=("$cli" train --model mlp --max-iters 40 --network none)
  expect_fault local.worker_throws nonzero 'worker 2 failed: injected fault' 60 \
    "${train[@]}" --workers 3 --inject-fault throw:2:5 --out "$work/throw"
  expect_fault local.worker_hangs nonzero 'timed out after 2000 ms .*rank 1, which is not waiting' 60 \
    "${train[@]}" --workers 3 --inject-fault hang:1:5 --timeout-ms 2000 --out "$work/hang"
  expect_fault local.nan_stops nonzero "non-finite gradient \(nan\) in parameter 'fc1.weight' at element 0, iteration 5 on rank 1" 60 \
    "${train[@]}" --workers 2 --inject-fault nan:1:5 --out "$work/nan"
  expect_fault local.inf_skipped 0 'skipped iteration 5: non-finite gradient \(inf\)' 60 \
    "${train[@]}" --workers 2 --inject-fault inf:1:5 --on-nonfinite skip --json --out "$work/skip"
  if [ "$(json_field "$work/local.inf_skipped.log" skipped_steps)" != 1 ]; then
    fail local.inf_skipped "summary does not report exactly one skipped step"
  fi
  expect_fault local.nan_every_step_gives_up nonzero 'non-finite for 10 iterations in a row' 60 \
    "${train[@]}" --workers 2 --inject-fault nan:0:3+ --on-nonfinite skip --out "$work/diverge"

  echo "== checkpoints"
  ckpt=("$cli" train --model mlp --workers 2 --max-iters 30 --network none --checkpoint-every 5)
  expect_fault checkpoint.killed_while_writing 75 'dying while writing' 60 \
    "${ckpt[@]}" --inject-fault crash-checkpoint:1:12 --out "$work/torn"
  if ! ls "$work"/torn/checkpoints/rank-1.ckpt.tmp >/dev/null 2>&1; then
    fail checkpoint.killed_while_writing "no torn temporary file was left to prove the point"
  fi
  expect_fault checkpoint.resume_after_torn_write 0 '"resumed":true,"resumed_at":10' 120 \
    "${ckpt[@]}" --resume "$work/torn" --json
  # A finished run with checkpoints at 5, 10, ..., 25; then rank 1's newest one is corrupted.
  expect_run checkpoint.complete_run 0 '"iterations":30' 120 "${ckpt[@]}" --json --out "$work/flip"
  printf '\x55' | dd of="$work/flip/checkpoints/rank-1.ckpt" bs=1 seek=100 conv=notrunc status=none
  expect_fault checkpoint.corrupt_newest_falls_back 0 'checksum mismatch.*|resumes from its previous checkpoint \(iteration 20\)' 120 \
    "${ckpt[@]}" --resume "$work/flip" --json
  grep -q '"resumed_at":20' "$work/checkpoint.corrupt_newest_falls_back.log" ||
    fail checkpoint.corrupt_newest_falls_back "did not resume from iteration 20"
  printf '\x55' | dd of="$work/flip/checkpoints/rank-0.ckpt" bs=1 seek=100 conv=notrunc status=none
  printf '\x55' | dd of="$work/flip/checkpoints/rank-0.prev.ckpt" bs=1 seek=100 conv=notrunc status=none
  expect_fault checkpoint.every_copy_corrupt_refused nonzero 'no iteration has a complete checkpoint on every rank.*checksum mismatch' 60 \
    "${ckpt[@]}" --resume "$work/flip"
  : >"$work/flip/checkpoints/rank-1.ckpt"
  expect_fault checkpoint.truncated_refused nonzero 'truncated|no iteration has a complete checkpoint' 60 \
    "${ckpt[@]}" --resume "$work/flip"
  expect_fault checkpoint.other_options_refused nonzero 'written with other training options' 60 \
    "${ckpt[@]}" --resume "$work/torn" --lr 0.2
fi

if with_torch && with_mpi; then
  echo "== faults under mpirun"
  run_dir="$work/mpi-kill"
  mpi_train=("$mpirun" -np 4 "${mpi_flags[@]}" "$cli" train --model mlp --network none --checkpoint-every 20
             --max-iters 400 --timeout-ms 20000)
  # Kill rank 2 once every rank has written a checkpoint at iteration 40 or later.
  faults=$((faults + 1))
  "${mpi_train[@]}" --out "$run_dir" >"$work/mpi-kill.log" 2>&1 </dev/null &
  job=$!
  victim="" waited=0
  while kill -0 "$job" 2>/dev/null && [ -z "$victim" ] && [ "$waited" -lt 600 ]; do
    sleep 0.2
    waited=$((waited + 1))
    [ -f "$run_dir/metrics.csv" ] && [ "$(tail -n 1 "$run_dir/metrics.csv" | cut -d, -f2)" -ge 60 ] 2>/dev/null || continue
    for pid in $(pgrep -f -- "--out $run_dir"); do
      [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$cli")" ] || continue
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=2 && victim=$pid
    done
  done
  if [ -z "$victim" ]; then
    wait "$job"
    fail mpi.rank_killed "never found rank 2 mid-training: $(tail -c 400 "$work/mpi-kill.log")"
  else
    kill -KILL "$victim"
    start=$SECONDS
    while kill -0 "$job" 2>/dev/null && [ $((SECONDS - start)) -lt 90 ]; do sleep 0.2; done
    took=$((SECONDS - start))
    if kill -0 "$job" 2>/dev/null; then
      kill -KILL "$job"
      fail mpi.rank_killed "the job was still running 90 s after rank 2 died"
    else
      wait "$job"
      status=$?
      if [ "$status" -eq 0 ]; then
        fail mpi.rank_killed "the job exited 0 after rank 2 died"
      elif ! grep -Eq 'rank 2' "$work/mpi-kill.log"; then
        fail mpi.rank_killed "no message names rank 2: $(tail -c 400 "$work/mpi-kill.log")"
      elif [ "$took" -gt 60 ]; then
        fail mpi.rank_killed "the job took ${took}s to end"
      else
        pass "mpi.rank_killed (ended ${took}s after the kill, status $status)"
      fi
    fi
    expect_fault mpi.resume_after_kill 0 '"resumed":true' 300 "${mpi_train[@]}" --resume "$run_dir" --json
    grep -q '"iterations":400' "$work/mpi.resume_after_kill.log" || fail mpi.resume_after_kill "did not finish 400 iterations"
  fi
  expect_fault mpi.rank_throws nonzero 'rank 1: .*injected fault' 60 \
    "$mpirun" -np 3 "${mpi_flags[@]}" "$cli" train --model mlp --network none --max-iters 30 \
    --inject-fault throw:1:5 --out "$work/mpi-throw"
  expect_fault mpi.rank_hangs nonzero 'timed out after 3000 ms .*rank 1' 60 \
    "$mpirun" -np 2 "${mpi_flags[@]}" "$cli" train --model mlp --network none --max-iters 30 --timeout-ms 3000 \
    --inject-fault hang:1:5 --out "$work/mpi-hang"
fi

# The library's own fault tests: each injects one fault or one bad input into a component.
run_gtests() {  # run_gtests KIND BINARY FILTER
  local kind=$1 binary=$tests_dir/$2 filter=$3
  [ -x "$binary" ] || return 0
  local json="$work/$2.json"
  if "$binary" --gtest_filter="$filter" --gtest_output="json:$json" >"$work/$2.log" 2>&1; then
    pass "$2 [$filter]"
  else
    fail "$2" "$(grep -E '^\[  FAILED' "$work/$2.log" | head -5)"
  fi
  local n
  n=$(grep -o '"tests": [0-9]*' "$json" 2>/dev/null | head -1 | grep -o '[0-9]*$')
  if [ "$kind" = fault ]; then faults=$((faults + ${n:-0})); else bad_inputs=$((bad_inputs + ${n:-0})); fi
}
if [ -n "$tests_dir" ]; then
  echo "== library fault and bad-input tests"
  run_gtests fault collectives_tests '*DisagreeingRanks*:AggregatorErrors.*'
  run_gtests fault transport_tests 'LocalTransport.*Timeout*:LocalTransport.*Fail*:LocalTransport.Barrier*'
  run_gtests bad core_tests 'Wire.Rejects*:Wire.Dense*:CheckpointFile.Refuses*:CheckpointBytes.*:FaultPlan.Refuses*'
  with_torch && run_gtests bad torch_tests 'FashionMnistFiles.*'
  with_torch && run_gtests fault torch_tests 'DistributedOptimizer.NonFinite*:DistributedOptimizer.SkipNonFinite*'
fi

echo "reliability: $faults faults injected, $bad_inputs bad inputs tried, $hostile hostile inputs tried, $failures failures"
[ "$failures" -eq 0 ]
