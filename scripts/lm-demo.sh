#!/usr/bin/env bash
# A language model on real English that every Debian system ships: the license texts of
# base-files, made into a corpus in PTB's layout by scripts/license_corpus.py (which prints the
# unigram baseline's test perplexity), then `sparsgd train --task lm` with topk + gtopk on 4
# in-process workers. Extra arguments go to `sparsgd train`. Needs the build (scripts/setup.sh).
#
#   bash scripts/lm-demo.sh [--epochs 30] [--density 0.01] ...
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/lm-demo
corpus=$out/corpus
mkdir -p "$corpus"
/usr/bin/python3 scripts/license_corpus.py "$corpus"
./build/sparsgd train --task lm --data "$corpus" --workers 4 --batch-size 10 --bptt 35 --hidden-size 200 \
  --optimizer adam --lr 0.002 --weight-decay 0 --clip-norm 0.25 --dropout 0.3 --epochs 30 --density 0.01 \
  --out "$out/run" --overwrite "$@"
