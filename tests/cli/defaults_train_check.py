#!/usr/bin/env python3
"""Defaults that train (CTest cli.defaults_train): `sparsgd train --task lm` with nothing but its data
learns a corpus with strong bigram structure well below the unigram perplexity (the task's recipe:
with SGD's defaults it ended at the unigram level), and a dense run with the default
--momentum-correction auto is the run with it off, bit for bit (momentum factor masking would zero
the whole velocity of a dense exchange every step).

Usage: defaults_train_check.py SPARSGD"""

import collections
import json
import math
import pathlib
import random
import subprocess
import sys
import tempfile


def corpus(directory):
    """13 words in runs of 3-8, each followed by the next: the next word is nearly certain."""
    def text(lines, seed):
        rng = random.Random(seed)
        out = []
        for _ in range(lines):
            word, length = rng.randrange(13), 3 + rng.randrange(6)
            out.append(" ".join(f"w{(word + i) % 13}" for i in range(length)))
        return "\n".join(out) + "\n"
    for name, lines, seed in (("train.txt", 4000, 1), ("valid.txt", 200, 2), ("test.txt", 400, 3)):
        (directory / name).write_text(text(lines, seed))


def unigram_perplexity(directory):
    """The test perplexity of the training set's word frequencies (with the end of line as a word)."""
    def tokens(name):
        return [w for line in (directory / name).read_text().splitlines() for w in line.split() + ["<eos>"]]
    counts = collections.Counter(tokens("train.txt"))
    total = sum(counts.values())
    test = tokens("test.txt")
    return math.exp(-sum(math.log(counts[w] / total) for w in test) / len(test))


def train(sparsgd, out, *flags):
    done = subprocess.run([sparsgd, "train", "--network", "none", "--out", str(out), "--json", *flags],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"sparsgd train {' '.join(flags)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main():
    sparsgd = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        data = work / "corpus"
        data.mkdir()
        corpus(data)
        unigram = unigram_perplexity(data)
        lm = train(sparsgd, work / "lm", "--task", "lm", "--data", str(data), "--epochs", "4")
        perplexity = lm["final_test_perplexity"]
        print(f"lm with its defaults ({lm['optimizer']}): test perplexity {perplexity:.2f} after 4 epochs, "
              f"unigram {unigram:.2f}")
        if not perplexity < 0.5 * unigram:
            sys.exit(f"the lm task's defaults did not learn: perplexity {perplexity:.2f}, unigram {unigram:.2f}")
        dense = ["--compressor", "none", "--aggregator", "dense", "--density", "1", "--max-iters", "20", "--seed", "1"]
        auto = train(sparsgd, work / "auto", *dense)
        off = train(sparsgd, work / "off", *dense, "--momentum-correction", "off")
        print(f"dense: momentum correction auto -> {auto['options']['momentum-correction']}, final train loss "
              f"{auto['final_train_loss']!r} (off: {off['final_train_loss']!r})")
        if auto["options"]["momentum-correction"] != "off" or auto["final_train_loss"] != off["final_train_loss"]:
            sys.exit("a dense run with --momentum-correction auto is not the run with it off")
    print("defaults train: ok")


if __name__ == "__main__":
    main()
