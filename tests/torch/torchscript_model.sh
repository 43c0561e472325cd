#!/usr/bin/env bash
# Usage: torchscript_model.sh SPARSGD PYTHON EXPORT_SCRIPT. A model exported by
# examples/export_torchscript.py trains through `sparsgd train --model FILE.pt` (its accuracy must
# rise well above chance), resumes bit for bit from a checkpoint, and a language model does too;
# models that do not fit the task, files that are not TorchScript, a forward that returns a
# detached tensor and a resume with another model file under the run's path are refused by name.
set -euo pipefail
sparsgd=$1
python=$2
export_script=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { grep -o "\"$1\":[^,}]*" "$2" | head -1 | cut -d: -f2; }

"$python" "$export_script" --task fashion-mnist --out "$work/convnet.pt"
args=(train --model "$work/convnet.pt" --workers 2 --max-iters 150 --density 0.1 --network none --json)
"$sparsgd" "${args[@]}" --out "$work/whole" --checkpoint-every 100 >"$work/whole.json"
accuracy=$(field final_test_accuracy "$work/whole.json")
echo "TorchScript convnet: test accuracy $accuracy after 150 iterations"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.4) }' || fail "accuracy $accuracy is not above 0.4 (chance is 0.1)"
"$sparsgd" "${args[@]}" --resume "$work/whole" --out "$work/resumed" >"$work/resumed.json"
for f in final_train_loss final_test_loss final_test_accuracy; do
  [ "$(field $f "$work/whole.json")" = "$(field $f "$work/resumed.json")" ] ||
    fail "resumed $f $(field $f "$work/resumed.json") differs from $(field $f "$work/whole.json")"
done
echo "resumed from iteration 100: the same final loss and accuracy"

# A language model on a generated corpus: 12 words walked in a cycle, plus <eos>: vocabulary 13.
mkdir "$work/corpus"
"$python" - "$work/corpus" <<'PY'
import random, sys
for name, lines, seed in (("train", 600, 1), ("valid", 40, 2), ("test", 80, 3)):
    r = random.Random(seed)
    with open(f"{sys.argv[1]}/{name}.txt", "w") as f:
        for _ in range(lines):
            w = r.randrange(12)
            words = []
            for _ in range(3 + r.randrange(6)):
                words.append(f"w{w}")
                w = (w + 1) % 12
            f.write(" " + " ".join(words) + "\n")
PY
"$python" "$export_script" --task lm --vocabulary 13 --width 32 --out "$work/gru.pt"
"$sparsgd" train --task lm --data "$work/corpus" --model "$work/gru.pt" --workers 2 --batch-size 8 --bptt 10 \
  --optimizer adam --lr 0.01 --weight-decay 0 --density 0.1 --epochs 3 --network none --json --out "$work/lm" >"$work/lm.json"
perplexity=$(field final_test_perplexity "$work/lm.json")
echo "TorchScript GRU language model: test perplexity $perplexity after 3 epochs (13 words)"
awk -v p="$perplexity" 'BEGIN { exit !(p < 4.0) }' || fail "perplexity $perplexity is not below 4"

refused() {  # refused EXPECTED_TEXT ARGS...: exit status 2 and the text on stderr
  local expected=$1
  shift
  local status=0
  "$sparsgd" train --workers 2 --max-iters 5 --network none --out "$work/refused" "$@" 2>"$work/err" >/dev/null || status=$?
  [ "$status" = 2 ] || fail "exit status $status (expected 2) for $*: $(cat "$work/err")"
  grep -qF -- "$expected" "$work/err" || fail "for $*: expected '$expected' in: $(cat "$work/err")"
  echo "refused: $(cat "$work/err")"
}
"$python" "$export_script" --task fashion-mnist --classes 7 --out "$work/seven.pt"
refused "to [2, 7] Float; --task fashion-mnist needs float32 logits [2, 10]" --model "$work/seven.pt"
"$python" "$export_script" --task cifar10 --out "$work/rgb.pt"
refused "expected input[2, 1, 28, 28] to have 3 channels" --model "$work/rgb.pt"
refused "forward failed on the task's input" --task lm --data "$work/corpus" --model "$work/convnet.pt"
"$python" "$export_script" --task lm --vocabulary 20 --width 8 --out "$work/other-vocabulary.pt"
refused "to [2, 3, 20] Float; --task lm needs float32 logits [2, 3, 13]" --task lm --data "$work/corpus" \
  --model "$work/other-vocabulary.pt"
head -c 4096 /dev/urandom >"$work/noise.pt"
refused "is not a TorchScript module" --model "$work/noise.pt"
: >"$work/empty.pt"
refused "is not a TorchScript module" --model "$work/empty.pt"
refused "not found" --model "$work/missing.pt"

# A forward that does not reach the parameters (a detached result) is refused by name, in one line.
# (torch.jit.script reads the classes' source: they go into a file.)
cat >"$work/models.py" <<'PY'
import sys
import torch


class Detached(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(784, 10)

    def forward(self, x):
        return self.fc(x.flatten(1)).detach()


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(784, 10)

    def forward(self, x):
        return self.fc(x.flatten(1))


class Squashed(Plain):  # the same parameters, another function of them
    def forward(self, x):
        return torch.tanh(self.fc(x.flatten(1)))


torch.manual_seed(1)
torch.jit.script(Detached()).save(f"{sys.argv[1]}/detached.pt")
torch.jit.script(Plain()).save(f"{sys.argv[1]}/swapped.pt")
torch.jit.script(Squashed()).save(f"{sys.argv[1]}/squashed.pt")
PY
"$python" "$work/models.py" "$work"
refused "the loss does not depend on the model's parameters" --model "$work/detached.pt"
[ "$(grep -c '^sparsgd: error:' "$work/err")" = 1 ] && ! grep -q 'frame #' "$work/err" ||
  fail "more than one error line for a detached forward: $(head -c 400 "$work/err")"
# Another model under the run's model path (the same parameter count): a resume is refused.
"$sparsgd" train --model "$work/swapped.pt" --workers 2 --max-iters 6 --checkpoint-every 3 --network none \
  --out "$work/swap-run" >/dev/null 2>&1
cp "$work/squashed.pt" "$work/swapped.pt"
status=0
"$sparsgd" train --model "$work/swapped.pt" --workers 2 --max-iters 6 --checkpoint-every 3 --network none \
  --resume "$work/swap-run" 2>"$work/err" >/dev/null || status=$?
[ "$status" = 2 ] && grep -q "trained on other data or another model" "$work/err" ||
  fail "a resume with another model file was not refused (status $status): $(head -c 400 "$work/err")"
echo "refused: $(head -c 200 "$work/err")..."
