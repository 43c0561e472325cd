# Sourced by run.sh. Names and file contents built to run a command if any of them ever reached a
# shell or gnuplot as code: each would create a file under $work/pwned-*. Every case must do its job
# (or refuse with a clear error) and create nothing. Counted as hostile inputs.

# Each payload tries one way out: a shell single quote, a gnuplot quote, a newline followed by
# gnuplot's shell escape (!), gnuplot's backquote substitution, a shell command substitution,
# gnuplot's macro (@) and its system() function.
hostile_payloads() {
  local p=$work/pwned
  printf '%s\0' \
    "q';touch $p-sq;'" \
    "dq\";touch $p-dq;\"" \
    "nl'"$'\n'"!touch $p-nl"$'\n'"set output '$p-out" \
    "bq\`touch $p-bq\`" \
    "cs\$(touch $p-cs)" \
    "at@cmd" \
    "sys'.system('touch $p-sys').'"
}

# no_pwned NAME: fails NAME if any payload ran.
no_pwned() {
  if compgen -G "$work/pwned*" >/dev/null; then
    fail "$1" "a name or file content ran as code: $(ls -d "$work"/pwned* | head -3)"
    rm -rf "$work"/pwned*
    return 1
  fi
  return 0
}

# hostile_case NAME REGEX WANT COMMAND...: WANT is 0 (must work) or nonzero (must refuse cleanly);
# either way nothing may run.
hostile_case() {
  local name=$1 regex=$2 want=$3
  shift 3
  hostile=$((hostile + 1))
  local log="$work/hostile.$hostile.log"
  timeout 120 "$@" >"$log" 2>&1 </dev/null
  local status=$?
  no_pwned "hostile $name" || return
  if [ "$want" = 0 ] && [ "$status" -ne 0 ]; then
    fail "hostile $name" "exit status $status: $(tail -c 300 "$log")"
  elif [ "$want" != 0 ] && { [ "$status" -eq 0 ] || [ "$status" -ge 124 ]; }; then
    fail "hostile $name" "exit status $status, expected a clean refusal: $(tail -c 300 "$log")"
  elif ! grep -Eq -- "$regex" "$log"; then
    fail "hostile $name" "output did not match /$regex/: $(tail -c 300 "$log")"
  else
    pass "hostile $name"
  fi
}

echo "== hostile names and file contents"
i=0
while IFS= read -r -d '' payload; do
  i=$((i + 1))
  dir="$work/sim-$payload"
  hostile_case "simulate.out.$i" 'gtopk-rd' 0 "$cli" simulate --model resnet20 --workers 2,4 --out "$dir"
  if [ ! -s "$dir/scaling.csv" ] || { command -v gnuplot >/dev/null && [ ! -s "$dir/efficiency.png" ]; }; then
    fail "hostile simulate.out.$i" "scaling.csv or efficiency.png missing in the hostile directory"
  fi
done < <(hostile_payloads)

if with_torch; then
  # One real run, then copies of it under hostile names and with hostile summaries and CSVs.
  base="$work/plot-base"
  "$cli" train --model mlp --workers 2 --max-iters 6 --network none --out "$base" >"$work/plot-base.log" 2>&1 ||
    fail "hostile plot setup" "training the base run failed: $(tail -c 300 "$work/plot-base.log")"
  i=0
  while IFS= read -r -d '' payload; do
    i=$((i + 1))
    run="$work/run-$payload"
    rm -rf "$run" && mkdir -p "$run" && cp -r "$base/." "$run/"
    # The summary's label fields are strings a file may set to anything.
    PAYLOAD=$payload /usr/bin/python3 - "$run/summary.json" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
doc["method"] = os.environ["PAYLOAD"]
json.dump(doc, open(sys.argv[1], "w"))
PY
    hostile_case "plot.dir_and_summary.$i" 'loss_vs_simulated_time.png' 0 \
      "$cli" plot "$run" "$base" --out "$work/plots-$payload"
    [ -s "$work/plots-$payload/accuracy_vs_epoch.png" ] ||
      fail "hostile plot.dir_and_summary.$i" "no accuracy_vs_epoch.png in the hostile output directory"
    # A CSV whose contents would end an inline data block and continue as gnuplot commands.
    cp "$base/metrics.csv" "$run/metrics.csv"
    printf 'EOD\n%s\n1,2,3,4,5,6,7,8,9,10,11\n' "$payload" >>"$run/metrics.csv"
    hostile_case "plot.csv_content.$i" 'metrics.csv:[0-9]+: expected at least 10 numeric fields' nonzero \
      "$cli" plot "$run" --out "$work/plots2-$i"
  done < <(hostile_payloads)
  # A training run's own output directory with a hostile name draws its plots safely too.
  hostile_case train.out 'wrote .* and 4 plots' 0 \
    "$cli" train --model mlp --workers 2 --max-iters 4 --network none --out "$work/train-q';touch $work/pwned-train;'"
fi
