#!/usr/bin/python3
"""Makes a word-level corpus in PTB's layout from the license texts of base-files, the real English
that every Debian system ships (/usr/share/common-licenses: GPL, LGPL, Apache, MPL, Artistic, BSD,
CC0, GFDL; about 40,000 words once symlinked duplicates are dropped): one sentence a line, lower
case, punctuation as words; every 10th sentence to valid.txt, the next to test.txt, the rest to
train.txt. Prints the corpus's size and the test perplexity of a unigram model of the same split
(word frequencies, add-one smoothed), the baseline a language model must beat.

Usage: scripts/license_corpus.py DIR
"""
import math
import os
import re
import sys
from collections import Counter

from atomic_file import write_atomically


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: license_corpus.py DIR")
    corpus = sys.argv[1]
    os.makedirs(corpus, exist_ok=True)
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
        write_atomically(os.path.join(corpus, f"{name}.txt"), "".join(" " + " ".join(s) + "\n" for s in rows))
    # The baseline on the test split, with the trainer's tokens: each line's words then <eos>; words
    # unseen in train.txt are <unk>.
    train = [w for s in splits["train"] for w in s + ["<eos>"]]
    counts = Counter(train)
    vocabulary = set(counts) | {"<eos>", "<unk>"}
    test = [w if w in counts else "<unk>" for s in splits["test"] for w in s + ["<eos>"]]
    total = len(train) + len(vocabulary)
    unigram = math.exp(-sum(math.log((counts[w] + 1) / total) for w in test) / len(test))
    print(f"corpus: {len(files)} license texts, {len(train)} training tokens, {len(test)} test tokens, "
          f"vocabulary {len(vocabulary)}; test perplexity of a unigram model: {unigram:.1f}")


if __name__ == "__main__":
    main()
