# Sourced by run.sh (needs LibTorch: every case trains or resumes). Four families, each counted:
#   links    no result, log, script or checkpoint is written through a symbolic link planted at its
#            name or at a name beside it: the file linked to stays as it was
#   reads    a file the program reads (checkpoint, run record, data, model) that is a FIFO, a device
#            or a directory is refused by name at once: never waited on, never read without end
#   rundirs  a run directory that holds a run is not replaced, joined or spliced without being asked
#   meaning  a checkpoint edited and re-checksummed, a run's records edited, other data or another
#            model: a resume checks what the state means, not only its bytes

edit_checkpoint=(/usr/bin/python3 "$here/edit_checkpoint.py")
small=(train --model mlp --workers 2 --network none)
any_model=(train --workers 2 --network none)

# victim_untouched NAME: the file every planted link points at must still hold what it held.
victim="$work/victim.txt"
victim_untouched() {
  if [ "$(cat "$victim")" != "do not overwrite" ]; then
    fail "$1" "a write went through a link: $victim now holds $(head -c 80 "$victim" | tr '\n' ' ')"
    printf 'do not overwrite' >"$victim"
    return 1
  fi
  pass "$1"
}

# plant DIR NAME...: symbolic links at DIR/NAME to the victim.
plant() {
  local dir=$1 name
  shift
  for name in "$@"; do
    mkdir -p "$(dirname "$dir/$name")"
    ln -sfn "$victim" "$dir/$name"
  done
}

# linked_writes CASE_PREFIX DIR NAME... -- COMMAND...: plants the links, runs the command (which must
# succeed), and counts one case per link: the victim unchanged.
linked_writes() {
  local prefix=$1 dir=$2 name
  shift 2
  local names=()
  while [ "$1" != -- ]; do names+=("$1"); shift; done
  shift
  plant "$dir" "${names[@]}"
  if ! timeout 120 "$@" >"$work/$prefix.log" 2>&1 </dev/null; then
    links=$((links + 1))
    fail "links.$prefix" "the command failed: $(tail -c 300 "$work/$prefix.log")"
    return
  fi
  for name in "${names[@]}"; do
    links=$((links + 1))
    victim_untouched "links.$prefix:$name"
  done
}

section_files_and_state() {
if ! with_torch; then return; fi
local kind record f how holder every name edit regex
echo "== writes never through a link"
printf 'do not overwrite' >"$victim"
# Every name a run writes, a temporary one beside each (the names writes used to go through), and
# the checkpoint's.
linked_writes train_out "$work/links" summary.json.tmp epochs.csv.tmp metrics.csv.tmp plots.gnuplot.tmp plots.log.tmp \
  -- "$cli" "${small[@]}" --max-iters 12 --checkpoint-every 5 --out "$work/links"
# A finished run's own files replaced by links: plot and resume replace them, never write through.
linked_writes plot "$work/links" plots.log plots.gnuplot accuracy_vs_epoch.png loss_vs_simulated_time.png \
  plots.gnuplot.tmp -- "$cli" plot "$work/links"
linked_writes plot_elsewhere "$work/plots-elsewhere" plots.log plots.gnuplot loss_vs_epoch.png -- \
  "$cli" plot "$work/links" --out "$work/plots-elsewhere"
linked_writes resume "$work/links" summary.json epochs.csv plots.log checkpoints/rank-0.ckpt.tmp \
  checkpoints/rank-1.ckpt.tmp checkpoints/rank-0.prev.ckpt.tmp -- \
  "$cli" "${small[@]}" --max-iters 20 --checkpoint-every 5 --resume "$work/links"
linked_writes resume_into_new "$work/links-next" summary.json.tmp metrics.csv.tmp epochs.csv.tmp -- \
  "$cli" "${small[@]}" --max-iters 25 --checkpoint-every 5 --resume "$work/links" --out "$work/links-next"
linked_writes overwrite "$work/links" metrics.csv summary.json checkpoints/rank-0.ckpt -- \
  "$cli" "${small[@]}" --max-iters 6 --checkpoint-every 5 --out "$work/links" --overwrite
linked_writes simulate "$work/sim-links" scaling.csv efficiency.png efficiency.gnuplot efficiency.log scaling.csv.tmp \
  efficiency.gnuplot.tmp -- "$cli" simulate --model resnet20 --out "$work/sim-links"
# metrics.csv appends: a link there is refused, not appended through (the run must not start).
links=$((links + 1))
mkdir -p "$work/append-link"
plant "$work/append-link" .lock
expect_run links.lock_file_link nonzero 'cannot lock the run directory .*append-link' 30 \
  "$cli" "${small[@]}" --max-iters 2 --out "$work/append-link"
victim_untouched links.lock_file_link_victim >/dev/null || true

echo "== reads that cannot hang or grow without bound"
"$cli" "${small[@]}" --max-iters 12 --checkpoint-every 5 --out "$work/reads" >/dev/null 2>&1 </dev/null
# not_a_file NAME REGEX COMMAND...: must end at once (20 s), non-zero, naming what it found.
not_a_file() {
  local name=$1 regex=$2
  shift 2
  reads=$((reads + 1))
  expect_run "reads.$name" nonzero "$regex" 20 "$@"
}
# each_kind_as TARGET...: replaces the files with a FIFO, a link to /dev/zero and a directory in
# turn, runs the check (the function named by $check) after each, and puts the originals back.
replace_with() {  # replace_with KIND FILE...
  local kind=$1 f
  shift
  for f in "$@"; do
    mv "$f" "$f.orig"
    case $kind in
      fifo) mkfifo "$f" ;;
      zero) ln -s /dev/zero "$f" ;;
      dir) mkdir "$f" ;;
    esac
  done
}
restore() {
  local f
  for f in "$@"; do rm -rf "$f"; mv "$f.orig" "$f"; done
}
declare -A kind_says=([fifo]='is a FIFO, not a regular file' [zero]='is a device, not a regular file'
                      [dir]='is a directory, not a regular file')
ckpts=("$work/reads/checkpoints/rank-0.ckpt" "$work/reads/checkpoints/rank-0.prev.ckpt")
for kind in fifo zero dir; do
  replace_with "$kind" "${ckpts[@]}"
  not_a_file "checkpoint_$kind" "${kind_says[$kind]}" "$cli" "${small[@]}" --max-iters 20 --resume "$work/reads"
  restore "${ckpts[@]}"
  replace_with "$kind" "$work/reads/metrics.csv"
  not_a_file "metrics_on_resume_$kind" "${kind_says[$kind]}" "$cli" "${small[@]}" --max-iters 20 --resume "$work/reads" \
    --out "$work/reads-next-$kind"
  restore "$work/reads/metrics.csv"
  for record in epochs.csv metrics.csv; do
    replace_with "$kind" "$work/reads/$record"
    not_a_file "plot_${record%.csv}_$kind" "${kind_says[$kind]}" "$cli" plot "$work/reads" --out "$work/reads-plots"
    restore "$work/reads/$record"
  done
done
# The data and the model a run reads.
mkdir -p "$work/fifo-data"
for f in /usr/share/datasets/fashion-mnist/*.gz; do ln -s "$f" "$work/fifo-data/"; done
rm "$work/fifo-data/train-labels-idx1-ubyte.gz" && mkfifo "$work/fifo-data/train-labels-idx1-ubyte.gz"
not_a_file data_fashion_mnist_fifo 'train-labels-idx1-ubyte.gz is a FIFO, not a regular file' \
  "$cli" "${small[@]}" --max-iters 1 --data "$work/fifo-data"
mkdir -p "$work/fifo-corpus" && printf 'a b c\n' >"$work/fifo-corpus/valid.txt" && printf 'a b\n' >"$work/fifo-corpus/test.txt"
mkfifo "$work/fifo-corpus/train.txt"
not_a_file data_corpus_fifo 'train.txt is a FIFO, not a regular file' \
  "$cli" train --task lm --data "$work/fifo-corpus" --workers 1 --max-iters 1 --network none
mkfifo "$work/model-fifo.pt"
not_a_file torchscript_model_fifo 'model-fifo.pt is a FIFO, not a regular file' \
  "$cli" "${any_model[@]}" --model "$work/model-fifo.pt" --max-iters 1
ln -s /dev/zero "$work/model-zero.pt"
not_a_file torchscript_model_device 'model-zero.pt is a device, not a regular file' \
  "$cli" "${any_model[@]}" --model "$work/model-zero.pt" --max-iters 1

echo "== run directories"
"$cli" "${small[@]}" --max-iters 12 --checkpoint-every 5 --out "$work/dirs" >/dev/null 2>&1 </dev/null
rundirs=$((rundirs + 1))
expect_run rundirs.finished_run_not_replaced nonzero 'holds a run already' 30 \
  "$cli" "${small[@]}" --max-iters 3 --out "$work/dirs"
rundirs=$((rundirs + 1))
"$cli" "${small[@]}" --max-iters 12 --checkpoint-every 5 --out "$work/dirs-other" >/dev/null 2>&1 </dev/null
expect_run rundirs.resume_into_another_run nonzero 'dirs-other holds a run already' 30 \
  "$cli" "${small[@]}" --max-iters 20 --resume "$work/dirs" --out "$work/dirs-other"
rundirs=$((rundirs + 1))
expect_run rundirs.overwrite_leaves_no_old_checkpoint 0 'wrote' 60 \
  "$cli" "${small[@]}" --max-iters 3 --out "$work/dirs-other" --overwrite
if [ -e "$work/dirs-other/checkpoints" ]; then
  fail rundirs.overwrite_leaves_no_old_checkpoint "the replaced run's checkpoints are still there"
fi
rundirs=$((rundirs + 1))
expect_run rundirs.overwritten_run_not_resumable nonzero 'no iteration has a complete checkpoint|cannot open checkpoint' 30 \
  "$cli" "${small[@]}" --max-iters 20 --resume "$work/dirs-other"
# A directory in use: a second run on it, a resume of it, a plot into it... the runs fail at once.
"$cli" "${small[@]}" --max-iters 100000 --out "$work/dirs-busy" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do [ -s "$work/dirs-busy/.lock" ] && break; sleep 0.1; done
for how in "--overwrite" "--resume $work/dirs-busy"; do
  rundirs=$((rundirs + 1))
  # shellcheck disable=SC2086
  expect_run "rundirs.in_use_${how%% *}" nonzero "dirs-busy is in use by process $holder" 30 \
    "$cli" "${small[@]}" --max-iters 3 --out "$work/dirs-busy" $how
done
rundirs=$((rundirs + 1))
expect_run rundirs.resume_into_a_busy_directory nonzero "dirs-busy is in use by process $holder" 30 \
  "$cli" "${small[@]}" --max-iters 3 --out "$work/dirs-busy" --resume "$work/dirs"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
rundirs=$((rundirs + 1))
: >"$work/a-file"
expect_run rundirs.out_is_a_file nonzero 'cannot create the run directory .*a-file' 30 \
  "$cli" "${small[@]}" --max-iters 3 --out "$work/a-file"

echo "== a resume checks what the state means"
# A run of 3 epochs of 10 iterations (mlp, batch 3000 on 2 workers), checkpoints every 5.
meaning_run=("$cli" train --model mlp --workers 2 --network none --batch-size 3000 --epochs 3 --checkpoint-every 5)
"${meaning_run[@]}" --max-iters 27 --out "$work/meaning" >/dev/null 2>&1 </dev/null
snapshot() { rm -rf "$work/meaning-edit" && cp -r "$work/meaning" "$work/meaning-edit"; }
# edited NAME REGEX STATUS FILE=EDITS...: edits a copy of the run's checkpoints and resumes it.
edited() {
  local name=$1 regex=$2 status=$3 edit
  shift 3
  snapshot
  for edit in "$@"; do
    "${edit_checkpoint[@]}" "$work/meaning-edit/checkpoints/${edit%%:*}" "${edit#*:}"
  done
  meaning=$((meaning + 1))
  expect_run "meaning.$name" "$status" "$regex" 60 "${meaning_run[@]}" --resume "$work/meaning-edit" --json
}
all_files() {  # all_files EDIT: the edit on every rank's newest and previous checkpoint
  printf '%s\n' "rank-0.ckpt:$1" "rank-0.prev.ckpt:$1" "rank-1.ckpt:$1" "rank-1.prev.ckpt:$1"
}
# NAME|EDIT on every file|what the refusal says
while IFS='|' read -r -u 3 name edit regex; do
  mapfile -t every <<<"$(all_files "$edit")"
  edited "$name" "$regex" nonzero "${every[@]}"
done 3<<'CASES'
epoch_past_the_run|run.epoch=5|run.epoch is not one of the run.s 3 epochs
next_iteration_past_the_epoch|run.next_iteration=99999999|run.next_iteration is beyond the epoch.s end
step_against_position|run.step=7|run.step is not run.epoch x iterations an epoch
history_rows_edited|history.epoch=0,0|history row 1 is not epoch 1 ending at iteration 20
history_iterations_edited|history.iterations=10,10|history row 1 is not epoch 1 ending at iteration 20
more_skips_than_steps|run.skipped_steps=1000|run.skipped_steps exceeds run.step
CASES
# One rank's newest file edited: that rank passes over it, and all resume from the one before.
edited one_rank_newest_edited '"resumed_at":20' 0 "rank-1.ckpt:run.next_iteration=3"
edited one_rank_all_edited 'rank 1: .*its run state does not add up' nonzero \
  "rank-1.ckpt:run.next_iteration=3" "rank-1.prev.ckpt:run.next_iteration=9"
# Positions that add up on each rank, results that differ between them.
edited ranks_disagree_on_results "ranks disagree on the checkpoints in .* at iteration 25: 'resumed run state'" nonzero \
  "rank-1.ckpt:history.test_accuracy=0.5,0.5" "rank-1.prev.ckpt:history.test_accuracy=0.5,0.5"
edited data_identity_edited 'trained on other data or another model' nonzero \
  "rank-0.ckpt:data=fashion-mnist: something else" "rank-0.prev.ckpt:data=fashion-mnist: something else"
# The run's records.
records_edited() {  # records_edited NAME REGEX COMMAND_ON_METRICS
  local name=$1 regex=$2
  shift 2
  snapshot
  "$@" "$work/meaning-edit/metrics.csv"
  meaning=$((meaning + 1))
  expect_run "meaning.metrics_$name" nonzero "$regex" 60 "${meaning_run[@]}" --resume "$work/meaning-edit"
}
records_edited deleted 'metrics.csv is missing' rm
records_edited cut_short 'ends at step 1[0-9]' sed -i '12,$d'
records_edited shuffled 'has step [0-9]+ where step 3 should be' sed -i '4{h;d};6G'
records_edited duplicated 'has step 5 where step 6 should be' sed -i '6p'
records_edited damaged_row 'has a damaged row where step 4 should be' sed -i '5s/,/;/g'
records_edited header_replaced 'does not start with the metrics header' sed -i '1s/.*/a,b,c/'
# Other data and another model than the run's.
mkdir -p "$work/other-data"
for f in /usr/share/datasets/fashion-mnist/*.gz; do ln -s "$f" "$work/other-data/"; done
rm "$work/other-data/t10k-labels-idx1-ubyte.gz"
/usr/bin/python3 - "$work/other-data/t10k-labels-idx1-ubyte.gz" <<'PY'
import gzip, sys
data = bytearray(gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz").read())
data[8] = (data[8] + 1) % 10  # one test label changed
gzip.open(sys.argv[1], "wb").write(bytes(data))
PY
snapshot
meaning=$((meaning + 1))
expect_run meaning.other_data nonzero 'trained on other data or another model.*test set 10000 x 1x28x28' 60 \
  "${meaning_run[@]}" --resume "$work/meaning-edit" --data "$work/other-data"
# The same data under another path: what counts is the content.
mkdir -p "$work/same-data"
for f in /usr/share/datasets/fashion-mnist/*.gz; do ln -s "$f" "$work/same-data/"; done
snapshot
meaning=$((meaning + 1))
expect_run meaning.same_data_elsewhere 0 '"resumed":true' 120 \
  "${meaning_run[@]}" --resume "$work/meaning-edit" --data "$work/same-data" --json
}
