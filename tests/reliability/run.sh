#!/usr/bin/env bash
# The reliability suite: bad input to every command, faults injected into running jobs (in-process
# and under mpirun), damaged checkpoints, and the library's own fault tests. Ends with one line:
#   reliability: F faults injected, B bad inputs tried, H hostile inputs tried, M memory checks,
#   L links planted, R reads of non-files, D run-directory cases, S resume-meaning cases, X failures
# and exits non-zero if X > 0. The last four are files_and_state.sh's families.
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

faults=0 bad_inputs=0 hostile=0 memory_checks=0 links=0 reads=0 rundirs=0 meaning=0 failures=0
counters=(faults bad_inputs hostile memory_checks links reads rundirs meaning failures)
work=$(mktemp -d /tmp/sparsgd-reliability.XXXXXX)
cleanup() {
  # A failed scenario must not leave ranks behind.
  pkill -KILL -f "$work" 2>/dev/null || true
  umount "$work/full" 2>/dev/null || true
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

# expect_refused ...: expect_run for a launch or an input that must be refused (counted as bad input).
expect_refused() {
  bad_inputs=$((bad_inputs + 1))
  expect_run "$@"
}

# json_field FILE FIELD: a top-level number or boolean of a one-line JSON summary.
json_field() { grep -o "\"$2\":[^,}]*" "$1" | head -1 | cut -d: -f2; }

source "$here/files_and_state.sh"

# The sections run in two parts at once (most of their time is spent waiting: for timeouts, for
# ranks, for processes to start), each part into its own log, shown one after the other.
section_bad_input() {
echo "== bad input"
source "$here/bad_inputs.sh"
# `train` runs sparsgd-torch from sparsgd's own directory: without it, a clear error, not a crash.
if with_torch; then
  mkdir -p "$work/lonely" && cp "$cli" "$work/lonely/sparsgd"
  expect_refused cli.train_without_torch_executable 2 "^sparsgd: error: cannot run .*/lonely/sparsgd-torch, which holds the commands that need LibTorch: No such file" 30 \
    "$work/lonely/sparsgd" train --max-iters 1
fi
# A preset's published efficiencies are not shown beside a run whose settings differ from it.
bad_inputs=$((bad_inputs + 1))
expect_run cli.simulate_override_drops_paper_column 0 '"paper_figures_omitted_for":\["--params"\].*"paper_efficiency":null' 30 \
  "$cli" simulate --model resnet50 --workers 32 --params 1000000 --json
# Leading zeros are decimal, not octal: 010 is ten.
bad_inputs=$((bad_inputs + 1))
expect_run cli.leading_zeros_are_decimal 0 '"n":10,' 60 "$cli" bench comm --transport local --workers 2 --n 010 --iters 1 --json
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
  if ! ls "$work"/torn/checkpoints/.rank-1.ckpt.?????? >/dev/null 2>&1; then
    fail checkpoint.killed_while_writing "no torn temporary file was left to prove the point"
  fi
  expect_fault checkpoint.resume_after_torn_write 0 '"resumed":true,"resumed_at":10' 120 \
    "${ckpt[@]}" --resume "$work/torn" --json
  # A finished run with checkpoints at 5, 10, ..., 25; then rank 1's newest one is corrupted.
  expect_run checkpoint.complete_run 0 '"iterations":30' 120 "${ckpt[@]}" --json --out "$work/flip"
  # A finished run is not replaced by accident, and a directory in use is not shared.
  reject run_directory.holds_a_run "holds a run already \(metrics.csv, \.\.\.\): pass --resume .* --overwrite" \
    train --model mlp --workers 2 --max-iters 1 --network none --out "$work/flip"
  "$cli" train --model mlp --workers 2 --max-iters 100000 --network none --out "$work/locked" >/dev/null 2>&1 &
  holder=$!
  for _ in $(seq 100); do [ -s "$work/locked/.lock" ] && break; sleep 0.1; done
  reject run_directory.in_use "the run directory .*locked is in use by process $holder" \
    train --model mlp --workers 2 --max-iters 1 --network none --out "$work/locked"
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
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
  # Rank files swapped between ranks: each checkpoint knows whose state it holds.
  expect_run checkpoint.swap_source 0 '"iterations":30' 120 "${ckpt[@]}" --json --out "$work/swap"
  for f in ckpt prev.ckpt; do
    mv "$work/swap/checkpoints/rank-0.$f" "$work/swap/checkpoints/swap.tmp"
    mv "$work/swap/checkpoints/rank-1.$f" "$work/swap/checkpoints/rank-0.$f"
    mv "$work/swap/checkpoints/swap.tmp" "$work/swap/checkpoints/rank-1.$f"
  done
  expect_fault checkpoint.swapped_ranks_refused nonzero "rank-[01].ckpt is not rank [01]'s state \(it was written by rank [01] of 2\)" 60 \
    "${ckpt[@]}" --resume "$work/swap"
fi

}

section_faults_under_mpirun() {
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
      # sparsgd runs train as sparsgd-torch, its sibling (exec: same process).
      [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(dirname "$(readlink -f "$cli")")/sparsgd-torch" ] || continue
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
  # A rank silent inside MPI's own allreduce: the timeout is ours (a collective request is never
  # cancelled, which would make Open MPI abort the job with its own message instead).
  # MPI cannot say who never came to a collective: the census names the rank that did not answer.
  expect_fault mpi.rank_hangs_in_collective nonzero 'rank 0: timed out after 3000 ms .*allreduce.*; rank 1 does not answer within [0-9]+ ms \(busy, stuck or dead\): it has not reached it; rank 2 waits in it too' 60 \
    "$mpirun" -np 3 "${mpi_flags[@]}" "$cli" train --model mlp --network none --max-iters 30 --timeout-ms 3000 \
    --compressor none --aggregator dense --density 1 --inject-fault hang:1:5 --out "$work/mpi-hang-dense"
  grep -q 'MPI_Cancel\|MPI_ERR_' "$work/mpi.rank_hangs_in_collective.log" &&
    fail mpi.rank_hangs_in_collective "MPI itself reported an error: $(grep -m1 'MPI_Cancel\|MPI_ERR_' "$work/mpi.rank_hangs_in_collective.log")"
  # Each message names its rank once.
  grep -h 'rank [0-9]*: rank [0-9]*:' "$work"/mpi.*.log >/dev/null &&
    fail mpi.rank_named_once "$(grep -h -m1 'rank [0-9]*: rank [0-9]*:' "$work"/mpi.*.log)"
fi

}

section_results_written() {
echo "== results are written or the command fails"
# A full disk: a tiny tmpfs filled to the brim (or, where mounting is not allowed, a file size
# limit of 0 with SIGXFSZ ignored, so that writes fail with EFBIG instead of killing).
full="$work/full"
mkdir -p "$full"
if mount -t tmpfs -o size=64k sparsgd-full "$full" 2>/dev/null; then
  mounted_full=1
  dd if=/dev/zero of="$full/filler" bs=1k 2>/dev/null
  on_full_disk=()
  full_disk_regex='No space left on device'
else
  mounted_full=0
  on_full_disk=(sh -c 'trap "" XFSZ; ulimit -f 0; exec "$@"' sh)
  full_disk_regex='File too large|No space left on device'
fi
bad_inputs=$((bad_inputs + 1))
expect_run io.json_to_full_stdout nonzero 'cannot write to standard output: No space left on device' 60 \
  sh -c '"$1" bench comm --workers 2 --n 1000 --iters 1 --json >/dev/full' sh "$cli"
bad_inputs=$((bad_inputs + 1))
expect_run io.simulate_out_on_full_disk nonzero "cannot (create|write) .*($full_disk_regex)" 60 \
  "${on_full_disk[@]}" "$cli" simulate --model resnet20 --out "$full/sim"
if with_torch; then
  bad_inputs=$((bad_inputs + 1))
  expect_run io.train_on_full_disk nonzero "cannot (create|write|open) .*($full_disk_regex)" 120 \
    "${on_full_disk[@]}" "$cli" train --model mlp --workers 2 --max-iters 20 --network none --out "$full/run"
  grep -q '^wrote ' "$work/io.train_on_full_disk.log" && fail io.train_on_full_disk "it claims to have written files"
fi
if [ "$mounted_full" = 1 ]; then umount "$full"; fi

}

section_crashes_signals_and_agreement() {
if with_torch; then
  echo "== metrics across a SIGKILL, and resumes that would destroy results"
  kill_run="$work/killed"
  resume_train=("$cli" train --model mlp --workers 2 --network none --checkpoint-every 10 --max-iters 200)
  faults=$((faults + 1))
  "${resume_train[@]}" --out "$kill_run" >"$work/killed.log" 2>&1 </dev/null &
  job=$!
  waited=0
  while kill -0 "$job" 2>/dev/null && [ "$waited" -lt 600 ]; do
    [ "$(ls "$kill_run/checkpoints" 2>/dev/null | grep -c '^rank-.\.prev\.ckpt$')" = 2 ] &&
      [ "$(tail -n 1 "$kill_run/metrics.csv" 2>/dev/null | cut -d, -f2)" -ge 35 ] 2>/dev/null && break
    sleep 0.1
    waited=$((waited + 1))
  done
  kill -KILL "$job" 2>/dev/null
  wait "$job" 2>/dev/null
  if [ -f "$kill_run/summary.json" ]; then
    fail metrics.sigkill_then_resume "the run finished before it could be killed"
  else
    printf '0,77,0.5' >>"$kill_run/metrics.csv"  # the torn half row a SIGKILL mid-write leaves
    expect_run metrics.sigkill_then_resume 0 '"resumed":true' 120 "${resume_train[@]}" --resume "$kill_run" --json
    steps=$(tail -n +2 "$kill_run/metrics.csv" | cut -d, -f2 | tr '\n' ' ')
    expected=$(seq 1 200 | tr '\n' ' ')
    [ "$steps" = "$expected" ] ||
      fail metrics.sigkill_then_resume "metrics.csv does not hold each of the steps 1..200 once: $(echo "$steps" | head -c 300)"
  fi
  if [ -f "$kill_run/summary.json" ]; then
    before=$(cksum <"$kill_run/summary.json")$(cksum <"$kill_run/metrics.csv")
    expect_refused resume.shorter_run_refused nonzero 'beyond the 100 iterations of this run' 60 \
      "$cli" train --model mlp --workers 2 --network none --checkpoint-every 10 --max-iters 100 --resume "$kill_run"
    [ "$before" = "$(cksum <"$kill_run/summary.json")$(cksum <"$kill_run/metrics.csv")" ] ||
      fail resume.shorter_run_refused "the finished run's summary.json or metrics.csv changed"
  fi
fi

if with_torch; then
  echo "== SIGTERM and SIGINT"
  # stop_run NAME SIGNAL STATUS REGEX ARGS...: starts a long run, signals it once it has written a
  # checkpoint (or, without checkpoints, once it trains), and expects STATUS and REGEX within 30 s.
  stop_run() {
    local name=$1 signal=$2 want=$3 regex=$4
    shift 4
    faults=$((faults + 1))
    local log="$work/$name.log" dir="$work/$name"
    "$cli" train --model mlp --workers 2 --network none --epochs 50 --out "$dir" "$@" >"$log" 2>&1 </dev/null &
    local job=$! waited=0 ready="$dir/metrics.csv"
    grep -q -- --checkpoint-every <<<"$*" && ready="$dir/checkpoints/rank-1.ckpt"
    while kill -0 "$job" 2>/dev/null && [ ! -f "$ready" ] && [ "$waited" -lt 600 ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    sleep 0.5
    kill -"$signal" "$job" 2>/dev/null
    local start=$SECONDS
    while kill -0 "$job" 2>/dev/null && [ $((SECONDS - start)) -lt 30 ]; do sleep 0.1; done
    if kill -0 "$job" 2>/dev/null; then
      kill -KILL "$job"
      fail "$name" "still running 30 s after $signal"
      return
    fi
    wait "$job"
    local status=$?
    if [ "$status" -ne "$want" ]; then
      fail "$name" "exit status $status, expected $want: $(tail -c 400 "$log")"
    elif ! grep -Eq -- "$regex" "$log"; then
      fail "$name" "output did not match /$regex/: $(tail -c 400 "$log")"
    else
      pass "$name ($(grep -o 'interrupted.*' "$log" | head -c 160))"
    fi
  }
  stop_run signal.term_with_checkpoints TERM 143 \
    "sparsgd: interrupted by SIGTERM after iteration [0-9]+; rank [01]'s newest checkpoint is at iteration [0-9]+ in .*/checkpoints: continue with the same options and --resume " \
    --checkpoint-every 5
  saved=$(grep -o 'newest checkpoint is at iteration [0-9]*' "$work/signal.term_with_checkpoints.log" | grep -o '[0-9]*$')
  if [ -n "$saved" ]; then
    expect_run signal.resume_after_term 0 '"resumed":true,"resumed_at":[1-9]' 120 \
      "$cli" train --model mlp --workers 2 --network none --epochs 50 --checkpoint-every 5 --max-iters $((saved + 5)) \
      --resume "$work/signal.term_with_checkpoints" --json
  fi
  stop_run signal.int_without_checkpoints INT 130 \
    "sparsgd: interrupted by SIGINT after iteration [0-9]+; no checkpoints \(--checkpoint-every 0\): nothing to resume from"
fi

if with_mpi; then
  echo "== ranks that must agree, and what mpirun decides"
  # Each rank its own options, from its rank: sh -c SCRIPT with $1 = the CLI.
  expect_refused mpi.comm_ranks_disagree nonzero "ranks disagree on the bench comm options: '--n': 1000 on rank 0, 1001 on rank 1" 30 \
    "$mpirun" -np 2 "${mpi_flags[@]}" sh -c 'exec "$1" bench comm --n $((1000 + OMPI_COMM_WORLD_RANK))' sparsgd-rank "$cli"
  expect_refused mpi.comm_ranks_disagree_flag nonzero "ranks disagree on the bench comm options: '--verify': on on rank 0, off on ranks 2, 3" 30 \
    "$mpirun" -np 4 "${mpi_flags[@]}" sh -c 'if [ "$OMPI_COMM_WORLD_RANK" -ge 2 ]; then exec "$1" bench comm --n 1000 --no-verify; else exec "$1" bench comm --n 1000; fi' sparsgd-rank "$cli"
  expect_run mpi.comm_defaults_to_mpi_under_mpirun 0 'under mpirun \(OMPI_COMM_WORLD_SIZE=3 is set\): one worker per rank, 3 workers' 60 \
    "$mpirun" -np 3 "${mpi_flags[@]}" "$cli" bench comm --n 1000 --iters 1
  expect_refused mpi.comm_local_under_mpirun nonzero '--transport local under a launch of 2 ranks' 30 \
    "$mpirun" -np 2 "${mpi_flags[@]}" "$cli" bench comm --n 1000 --transport local
  expect_refused mpi.comm_workers_contradict nonzero '--workers 3 contradicts this MPI launch of 2 ranks' 30 \
    "$mpirun" -np 2 "${mpi_flags[@]}" "$cli" bench comm --n 1000 --workers 3
  expect_refused mpi.leftover_launcher_variable nonzero 'OMPI_COMM_WORLD_SIZE=4 announces a launch of 4 ranks, but MPI started this process in a job of 1' 30 \
    env OMPI_COMM_WORLD_SIZE=4 "$cli" bench comm --n 1000
  if with_torch; then
    mpi_short=(train --model mlp --network none --max-iters 4)
    expect_refused mpi.train_ranks_disagree nonzero "ranks disagree on the training options: '--seed': 1 on rank 0, 2 on rank 2" 30 \
      "$mpirun" -np 3 "${mpi_flags[@]}" sh -c 'exec "$1" train --model mlp --network none --max-iters 4 --out "'"$work/disagree"'" --seed $((1 + (OMPI_COMM_WORLD_RANK == 2)))' sparsgd-rank "$cli"
    expect_refused mpi.train_checkpoint_settings_disagree nonzero "ranks disagree on the training options: '--checkpoint-every': 0 on rank 0, 2 on rank 1" 30 \
      "$mpirun" -np 2 "${mpi_flags[@]}" sh -c 'exec "$1" train --model mlp --network none --max-iters 4 --out "'"$work/disagree"'" --checkpoint-every $((2 * OMPI_COMM_WORLD_RANK))' sparsgd-rank "$cli"
    expect_refused mpi.train_workers_contradict nonzero '--workers 4 contradicts this MPI launch of 2 ranks' 30 \
      "$mpirun" -np 2 "${mpi_flags[@]}" "$cli" "${mpi_short[@]}" --workers 4 --out "$work/contradict"
    expect_refused mpi.train_leftover_launcher_variable nonzero 'PMI_SIZE=3 announces a launch of 3 ranks' 30 \
      env PMI_SIZE=3 "$cli" "${mpi_short[@]}" --out "$work/leftover"
    # Without --out, every rank uses rank 0's default directory (named after its clock).
    mkdir -p "$work/default-out"
    expect_run mpi.train_default_out_dir_shared 0 '"iterations":4' 120 \
      sh -c 'cd "$1" && shift && exec "$@"' sh "$work/default-out" "$mpirun" -np 2 "${mpi_flags[@]}" "$cli" "${mpi_short[@]}" --json
    runs_made=$(find "$work/default-out/runs" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l)
    [ "$runs_made" = 1 ] || fail mpi.train_default_out_dir_shared "expected one run directory, found $runs_made"
  fi
fi

}

section_memory_and_library() {
echo "== memory checked up front"
# Under an address-space limit (as batch systems set one), a request that cannot fit is refused at
# once with the estimate and the limit, before anything is allocated; one that fits still runs.
limited=(bash -c 'ulimit -v 3000000 && exec "$0" "$@"')
memory_refused() {  # memory_refused NAME COMMAND_WORDS...
  local name=$1
  shift
  memory_checks=$((memory_checks + 1))
  expect_run "memory.$name" nonzero "^sparsgd: error: .* needs about [0-9.]+ [KMGT]iB \\(.*\\), but only [0-9.]+ [KMGT]iB is available \\(the address-space limit \\(ulimit -v 3000000\\)" 20 \
    "${limited[@]}" "$cli" "$@"
}
memory_refused comm_in_process bench comm --workers 2 --n 4000000000
memory_refused comm_dense_many_workers bench comm --workers 64 --n 20000000 --aggregator dense --no-verify
memory_refused comm_verification bench comm --workers 16 --n 30000000 --iters 1
memory_refused select bench select --n 4000000000
memory_refused simulate_measured simulate --model custom --params 4e9 --compute-ms 1 --compress-ms measured
memory_checks=$((memory_checks + 1))
expect_run memory.comm_fits_under_limit 0 'matches reference: yes' 120 \
  "${limited[@]}" "$cli" bench comm --workers 2 --n 20000000 --iters 2
if with_torch; then
  memory_refused train_activations train --workers 4 --model resnet20 --batch-size 4096 --max-iters 1 --network none \
    --out "$work/memory-train"
fi
if with_mpi; then
  # Every rank counts the ranks that share its machine (OMPI_COMM_WORLD_LOCAL_SIZE).
  memory_checks=$((memory_checks + 1))
  expect_run memory.comm_under_mpirun nonzero 'rank [0-9]: bench comm needs about .*3 workers x' 60 \
    "${limited[@]}" "$mpirun" -np 3 "${mpi_flags[@]}" "$cli" bench comm --n 150000000 --no-verify
fi

# The estimates themselves: at least what a run used beyond what it held when it estimated
# (else a run that does not fit would start), at most twice that plus 64 MiB (else runs that fit
# would be refused). From the "memory" object of each command's JSON.
estimate_checked() {  # estimate_checked NAME JSON_FILE
  local name=$1 file=$2
  memory_checks=$((memory_checks + 1))
  local estimate before peak
  # The first of each: bench comm --interleave repeats its process's figures in the second run's report.
  estimate=$(grep -o '"estimate_bytes":[0-9.e+]*' "$file" | head -n 1 | cut -d: -f2)
  before=$(grep -o '"resident_before_bytes":[0-9.e+]*' "$file" | head -n 1 | cut -d: -f2)
  peak=$(grep -o '"peak_resident_bytes":[0-9.e+]*' "$file" | head -n 1 | cut -d: -f2)
  if [ -z "$estimate" ] || [ -z "$before" ] || [ -z "$peak" ]; then
    fail "memory.estimate.$name" "no memory object in $(head -c 300 "$file")"
  elif awk -v e="$estimate" -v b="$before" -v p="$peak" 'BEGIN { u = p - b; exit !(e >= u && e <= 2 * u + 67108864) }'; then
    pass "memory.estimate.$name ($(awk -v e="$estimate" -v b="$before" -v p="$peak" 'BEGIN { printf "estimate %.0f MiB, used %.0f MiB", e / 1048576, (p - b) / 1048576 }'))"
  else
    fail "memory.estimate.$name" "estimate $estimate bytes against $before resident before and a peak of $peak"
  fi
}
estimate_run() {  # estimate_run NAME COMMAND_WORDS... (prints JSON on stdout)
  local name=$1
  shift
  if timeout 300 "$cli" "$@" >"$work/estimate-$name.json" 2>"$work/estimate-$name.err" </dev/null; then
    estimate_checked "$name" "$work/estimate-$name.json"
  else
    memory_checks=$((memory_checks + 1))
    fail "memory.estimate.$name" "$(tail -c 300 "$work/estimate-$name.err")"
  fi
}
estimate_run comm_gtopk bench comm --json --workers 3 --n 8000000 --iters 2 --density 0.1
estimate_run comm_gtopk_rd_no_verify bench comm --json --workers 4 --n 8000000 --iters 2 --aggregator gtopk-rd --density 0.1 --no-verify
estimate_run comm_allgather bench comm --json --workers 4 --n 8000000 --iters 2 --aggregator allgather --density 0.1
estimate_run comm_dense bench comm --json --workers 3 --n 8000000 --iters 2 --aggregator dense
estimate_run comm_oktopk bench comm --json --workers 4 --n 8000000 --iters 2 --aggregator oktopk --density 0.1
# Drawn selections: no gradients, so Ok-Topk's regions (n shared out among the 8, not n each) are
# most of it.
estimate_run comm_oktopk_drawn bench comm --json --selections drawn --workers 8 --n 16000000 --iters 2 --aggregator oktopk --density 0.01 --no-verify
estimate_run comm_gtopk_rd_drawn bench comm --json --selections drawn --workers 8 --n 16000000 --iters 2 --aggregator gtopk-rd --density 0.01 --no-verify
# auto holds every candidate it tries (no verification: replaying them all takes minutes).
estimate_run comm_auto bench comm --json --workers 4 --n 8000000 --iters 10 --aggregator auto --network 10gbe --density 0.1 --no-verify
# Verified, on a network where dense is not a candidate: the results kept for the replay are the
# candidates' (pairs), not dense arrays. Drawn: the candidates' pairs are all of it (P = 256, n = 25M
# in the auto sweep).
estimate_run comm_auto_verified bench comm --json --workers 4 --n 4000000 --iters 24 --aggregator auto --network paper-1gbe --density 0.01
estimate_run comm_auto_drawn bench comm --json --selections drawn --workers 16 --n 16000000 --iters 20 --aggregator auto --network 10gbe --density 0.01 --no-verify
# --interleave: both runs' workers at once, then their replays one after the other.
estimate_run comm_interleave bench comm --json --workers 3 --n 8000000 --iters 2 --density 0.1 --interleave gtopk-rd
estimate_run comm_interleave_drawn bench comm --json --selections drawn --workers 8 --n 16000000 --iters 2 --aggregator gtopk-rd --interleave oktopk --density 0.01 --no-verify
estimate_run comm_randk_shared bench comm --json --workers 3 --n 8000000 --iters 2 --aggregator randk-shared --compressor randk --density 0.1
estimate_run select bench select --json --n 8000000 --density 0.1 --repeat 1
estimate_run simulate_measured simulate --json --model custom --params 8000000 --compute-ms 1 --compress-ms measured --density 0.1
if with_torch; then
  estimate_run train_cnn train --json --workers 2 --model cnn --batch-size 512 --max-iters 2 --network none --out "$work/estimate-cnn"
  # The other tasks, on data in their formats: CIFAR-10 records (random pixels) and a text corpus
  # of a few thousand words.
  /usr/bin/python3 - "$work/cifar" "$work/corpus" <<'PY'
import os, random, sys
cifar, corpus = sys.argv[1], sys.argv[2]
os.makedirs(cifar)
os.makedirs(corpus)
r = random.Random(1)
def records(n):
    return b"".join(bytes([i % 10]) + r.randbytes(3072) for i in range(n))
for i in range(1, 6):
    open(f"{cifar}/data_batch_{i}.bin", "wb").write(records(100))
open(f"{cifar}/test_batch.bin", "wb").write(records(500))
for name, lines in (("train", 8000), ("valid", 100), ("test", 400)):
    with open(f"{corpus}/{name}.txt", "w") as f:
        for _ in range(lines):
            f.write(" " + " ".join(f"w{r.randrange(5000)}" for _ in range(r.randrange(5, 25))) + "\n")
PY
  estimate_run train_cifar10_resnet20 train --json --task cifar10 --data "$work/cifar" --model resnet20 --workers 1 \
    --batch-size 128 --max-iters 2 --network none --out "$work/estimate-cifar"
  estimate_run train_lm train --json --task lm --data "$work/corpus" --workers 1 --batch-size 40 --max-iters 2 \
    --network none --out "$work/estimate-lm"
  # Many workers in one process: each thread's stack and arena counted as what they hold, not as
  # what they reserve.
  estimate_run train_mlp_256_workers train --json --model mlp --workers 256 --batch-size 4 --max-iters 2 --network none \
    --out "$work/estimate-many"
  # A model far too large is refused from its shape, before LibTorch is asked for it.
  memory_checks=$((memory_checks + 1))
  expect_run memory.lm_refused_before_building nonzero '^sparsgd: error: train needs about [0-9.]+ TiB' 60 \
    "$cli" train --task lm --data "$work/corpus" --hidden-size 65536 --workers 1 --max-iters 1 --network none
  if grep -q 'frame #' "$work/memory.lm_refused_before_building.log"; then
    fail memory.lm_refused_before_building "a stack trace instead of one line"
  fi
fi
estimate_run comm_1024_workers bench comm --json --workers 1024 --n 100000 --iters 2

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
  with_torch && run_gtests fault torch_tests 'MomentumSgd.NonFinite*:MomentumSgd.SkipNonFinite*'
fi

}

# run_part NAME SECTION...: the sections in a subshell, output to part-NAME.log, counts to counts.NAME.
run_part() {
  local name=$1
  shift
  (
    # Each section's seconds, so that a slow one is found without rerunning the suite.
    for section in "$@"; do
      local started=$SECONDS
      "$section"
      echo "-- ${section#section_}: $((SECONDS - started)) s"
    done
    for counter in "${counters[@]}"; do echo "$counter ${!counter}"; done >"$work/counts.$name"
  ) >"$work/part-$name.log" 2>&1 </dev/null
}
run_part a section_bad_input section_results_written section_memory_and_library &
part_a=$!
run_part b section_faults_under_mpirun section_crashes_signals_and_agreement section_files_and_state
wait "$part_a"
cat "$work/part-a.log" "$work/part-b.log"
for part in a b; do
  if [ ! -f "$work/counts.$part" ]; then
    fail "part $part" "ended before its last section: $(tail -c 300 "$work/part-$part.log")"
    continue
  fi
  while read -r counter value; do
    printf -v "$counter" '%d' $((${!counter} + value))
  done <"$work/counts.$part"
done

echo "reliability: $faults faults injected, $bad_inputs bad inputs tried, $hostile hostile inputs tried," \
  "$memory_checks memory checks, $links links planted, $reads reads of non-files, $rundirs run-directory cases," \
  "$meaning resume-meaning cases, $failures failures"
[ "$failures" -eq 0 ]
