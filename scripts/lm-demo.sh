#!/usr/bin/env bash
# A language model on real English that every Debian system ships: the license texts of
# base-files (/usr/share/common-licenses: GPL, LGPL, Apache, MPL, Artistic, BSD, CC0, GFDL; about
# 40,000 words once symlinked duplicates are dropped). Makes a corpus in PTB's layout (one sentence
# a line, lower case, punctuation as words; every 10th sentence to valid.txt, the next to test.txt),
# then trains `sparsgd train --task lm` with topk + gtopk on 4 in-process workers and prints the test
# perplexity beside two baselines computed here on the same split: the vocabulary size (knowing
# nothing) and a unigram model (word frequencies, add-one smoothed). Extra arguments go to
# `sparsgd train`. Needs the build (scripts/setup.sh).
#
#   bash scripts/lm-demo.sh [--epochs 30] [--density 0.01] ...
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/lm-demo
corpus=$out/corpus
mkdir -p "$corpus"
/usr/bin/python3 - "$corpus" <<'PY'
import math, os, re, sys
from collections import Counter
corpus = sys.argv[1]
root = "/usr/share/common-licenses"
files = sorted({os.path.realpath(os.path.join(root, f)) for f in os.listdir(root)})
text = " ".join(open(f, encoding="utf-8", errors="replace").read() for f in files)
sentences = []
for raw in re.split(r"(?<=[.;:!?])\s+", text):
    words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]", raw.lower())
    if len(words) >= 3:
        sentences.append(words)
splits = {"train": [], "valid": [], "test": []}
for i, s in enumerate(sentences):
    splits["valid" if i % 10 == 0 else "test" if i % 10 == 1 else "train"].append(s)
for name, rows in splits.items():
    with open(os.path.join(corpus, f"{name}.txt"), "w") as f:
        f.writelines(" " + " ".join(s) + "\n" for s in rows)
# Baselines on the test split, with the trainer's tokens: each line's words then <eos>; words
# unseen in train.txt are <unk>.
train = [w for s in splits["train"] for w in s + ["<eos>"]]
counts = Counter(train)
vocabulary = set(counts) | {"<eos>", "<unk>"}
test = [w if w in counts else "<unk>" for s in splits["test"] for w in s + ["<eos>"]]
total = len(train) + len(vocabulary)
unigram = math.exp(-sum(math.log((counts[w] + 1) / total) for w in test) / len(test))
print(f"corpus: {len(files)} license texts, {len(train)} training tokens, {len(test)} test tokens, "
      f"vocabulary {len(vocabulary)}; test perplexity of a unigram model: {unigram:.1f}")
PY
./build/sparsgd train --task lm --data "$corpus" --workers 4 --batch-size 10 --bptt 35 --hidden-size 200 \
  --optimizer adam --lr 0.002 --weight-decay 0 --clip-norm 0.25 --dropout 0.3 --epochs 30 --density 0.01 \
  --out "$out/run" "$@"
