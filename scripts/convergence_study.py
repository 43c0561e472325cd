#!/usr/bin/python3
"""The convergence study: every method over several seeds, its learning rate tuned on a validation
split, the papers' recipes, rTop-k's r/k with and without error feedback, and time to accuracy on
the simulated 1 Gbps cluster. Reruns or continues (runs already recorded are not run again) and
regenerates docs/results/convergence.md, its plots and the claims in docs/results/findings.md.

Usage: scripts/convergence_study.py [--budget-minutes M] [--report-only] [--list]

Each finished run leaves one line in docs/results/convergence/runs.jsonl (its command, summary.json
and epochs.csv, a few KB), which is committed: a later sitting, on this machine or a fresh one,
continues where the last one stopped. A run that fails (diverges, say) is recorded with its error
line under "failed"; that is a result too (a learning rate too large for the method). Any other
failure stops the study instead (it says nothing about the method).
"""

import argparse
import csv
import io
import json
import math
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

# atomic_file.py sits beside this script, whether it runs as one or is loaded from its path (tests).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from atomic_file import write_atomically  # noqa: E402
from convergence_claims import Measured, claims_markdown, pct, verdict  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = ROOT / "build" / "sparsgd"
RUNS = ROOT / "runs" / "convergence"            # whole run directories (not committed)
RESULTS = ROOT / "docs" / "results"
RECORDS = RESULTS / "convergence" / "runs.jsonl"  # committed: one line per finished run
PLOTS = RESULTS / "convergence"
SEEDS = (1, 2, 3)
VALIDATION = 5000                               # Fashion-MNIST training examples held out for tuning
TARGET = 0.85                                   # test accuracy for "time to target"
DEFAULT_GRID = (0.025, 0.05, 0.1)
MAX_EXTENSIONS = 2                              # grid points added beyond an edge that wins

# Methods: name -> (flags, learning-rate grid, what it is). Every arm spells out
# --momentum-correction, so that a change of the CLI's default does not change the study.
PLAIN = ["--momentum-correction", "off"]
METHODS = {
    "dense": (["--compressor", "none", "--aggregator", "dense", "--density", "1"] + PLAIN, DEFAULT_GRID,
              "dense S-SGD (momentum SGD, allreduce)"),
    "topk-gtopk-rd": (["--aggregator", "gtopk-rd"] + PLAIN, DEFAULT_GRID, "gTop-k S-SGD (recursive doubling)"),
    "topk-gtopk-rd-mc": (["--aggregator", "gtopk-rd", "--momentum-correction", "on"], DEFAULT_GRID,
                         "gTop-k with DGC's momentum correction (sparsgd train's default, but recursive doubling)"),
    "topk-allgather": (["--aggregator", "allgather"] + PLAIN, DEFAULT_GRID, "Top-k S-SGD (allgather)"),
    "topk-gtopk-rd-noef": (["--aggregator", "gtopk-rd", "--error-feedback", "off"] + PLAIN, DEFAULT_GRID,
                           "gTop-k without error feedback"),
    "paper": (["--aggregator", "gtopk-rd", "--density", "0.001", "--warmup-density", "0.004", "--warmup-epochs", "1"]
              + PLAIN, DEFAULT_GRID, "the gTop-k paper's recipe: its density 0.001, warmed up from 0.004 in the "
              "first epoch, and lr from lr/P to lr over the first epoch"),
    "topk-gtopk-rd-d0.001": (["--aggregator", "gtopk-rd", "--density", "0.001"] + PLAIN, DEFAULT_GRID,
                             "gTop-k at the paper's density 0.001, no warm-up (what the recipe's warm-ups add)"),
    "rtopk2-gtopk-rd": (["--compressor", "rtopk", "--r-factor", "2", "--aggregator", "gtopk-rd"] + PLAIN,
                        DEFAULT_GRID, "rTop-k (r = 2k) with gTop-k aggregation"),
    "rtopk1.5-allgather": (["--compressor", "rtopk", "--r-factor", "1.5", "--aggregator", "allgather"] + PLAIN,
                           DEFAULT_GRID, "rTop-k, r = 1.5k"),
    "rtopk2-allgather": (["--compressor", "rtopk", "--r-factor", "2", "--aggregator", "allgather"] + PLAIN,
                         DEFAULT_GRID, "rTop-k, r = 2k"),
    "rtopk4-allgather": (["--compressor", "rtopk", "--r-factor", "4", "--aggregator", "allgather"] + PLAIN,
                         DEFAULT_GRID, "rTop-k, r = 4k"),
    "rtopk8-allgather": (["--compressor", "rtopk", "--r-factor", "8", "--aggregator", "allgather"] + PLAIN,
                         DEFAULT_GRID, "rTop-k, r = 8k"),
    "rtopk2-allgather-noef": (["--compressor", "rtopk", "--r-factor", "2", "--aggregator", "allgather",
                               "--error-feedback", "off"] + PLAIN, DEFAULT_GRID, "rTop-k, r = 2k, no error feedback"),
    "rtopk4-allgather-noef": (["--compressor", "rtopk", "--r-factor", "4", "--aggregator", "allgather",
                               "--error-feedback", "off"] + PLAIN, DEFAULT_GRID, "rTop-k, r = 4k, no error feedback"),
    "topk-allgather-noef": (["--aggregator", "allgather", "--error-feedback", "off"] + PLAIN, DEFAULT_GRID,
                            "Top-k S-SGD without error feedback"),
    "randk-shared": (["--compressor", "randk", "--aggregator", "randk-shared"] + PLAIN, (0.0125, 0.025, 0.05),
                     "random-k (shared indices) with error feedback"),
    "randk-shared-noef": (["--compressor", "randk", "--aggregator", "randk-shared", "--error-feedback", "off"] + PLAIN,
                          DEFAULT_GRID, "random-k without error feedback"),
    "randk-unbiased": (["--compressor", "randk-unbiased", "--aggregator", "randk-shared", "--error-feedback", "off"]
                       + PLAIN, (0.0005, 0.001, 0.002), "unbiased random-k (values x n/k, no memory)"),
    "gaussiank-allgather": (["--compressor", "gaussiank", "--aggregator", "allgather"] + PLAIN, DEFAULT_GRID,
                            "Gaussian-k"),
    "rtopk1.5-allgather-noef": (["--compressor", "rtopk", "--r-factor", "1.5", "--aggregator", "allgather",
                                 "--error-feedback", "off"] + PLAIN, DEFAULT_GRID,
                                "rTop-k, r = 1.5k, no error feedback"),
    "rtopk8-allgather-noef": (["--compressor", "rtopk", "--r-factor", "8", "--aggregator", "allgather",
                               "--error-feedback", "off"] + PLAIN, DEFAULT_GRID, "rTop-k, r = 8k, no error feedback"),
}

# The default run against dense S-SGD: `sparsgd train`'s own settings (1 epoch, lr 0.05, all of
# the training set), only the arm's flags changed. "default" passes nothing: whatever the CLI's
# defaults are.
GAP_CELL = "gap-cnn-P4-d0.01-e1"
GAP_ARMS = {
    "dense": ["--compressor", "none", "--aggregator", "dense", "--density", "1"] + PLAIN,
    "default": [],
    "no-momentum-correction": PLAIN,
    "nesterov": ["--nesterov"] + PLAIN,
    "allgather": ["--aggregator", "allgather"] + PLAIN,
    "lr-warmup": ["--warmup-epochs", "0.25"] + PLAIN,
    # Is momentum correction's gain at one epoch a rate effect? Plain momentum at half the rate
    # (the best dense and Top-k rate over three epochs).
    "no-momentum-correction-lr0.025": ["--lr", "0.025"] + PLAIN,
}


# The authors' schedule (hclhkbu/gtopkssgd: dl_trainer.py, allreducer.py, exp_configs/resnet20.conf),
# as proportions of their 141-epoch ResNet-20 run: the learning rate rises from lr/P to lr over the
# first 10 epochs and the density is 0.004 in the first epoch (their code does so whatever the target
# density: at a target of 0.01 the first epoch is the sparser one). Their decay (x0.1 at epoch 81,
# x0.01 at 122) is `--lr-schedule step` here (x0.1 at 50% of the run, x0.01 at 75%), the same for every arm.
AUTHORS_RUN_EPOCHS = 141
AUTHORS_LR_WARMUP_EPOCHS = 10
AUTHORS_WARMUP_DENSITY = 0.004
AUTHORS_DENSITY_WARMUP_EPOCHS = 1


def schedule_flags(epochs, method_flags):
    """The authors' schedule scaled to a run of `epochs` epochs; the density warm-up only where the
    exchange is sparse (a dense exchange has no density to warm up)."""
    flags = ["--warmup-epochs", f"{epochs * AUTHORS_LR_WARMUP_EPOCHS / AUTHORS_RUN_EPOCHS:.3g}", "--lr-schedule", "step"]
    dense = "none" in method_flags or ("--density" in method_flags and
                                       float(method_flags[method_flags.index("--density") + 1]) >= 1)
    if not dense:
        flags += ["--warmup-density", f"{AUTHORS_WARMUP_DENSITY:g}", "--warmup-density-epochs",
                  f"{epochs * AUTHORS_DENSITY_WARMUP_EPOCHS / AUTHORS_RUN_EPOCHS:.3g}"]
    return flags


class Cell:
    """Model, workers, density and epochs; the methods studied there, most important first. With
    `schedule`, every arm runs the authors' schedule (schedule_flags); such a cell's name ends in -sched."""

    def __init__(self, model, workers, density, epochs, methods, tuned_in=None, task=None, tune_here=(),
                 schedule=False):
        self.model, self.workers, self.density, self.epochs = model, workers, density, epochs
        self.methods = methods
        self.tuned_in = tuned_in  # None: tune here; else the name of the cell whose rates are used
        self.tune_here = tuple(tune_here)  # with tuned_in: the methods tuned here all the same
        self.task = task          # None: Fashion-MNIST; else a Task below
        self.schedule = schedule
        self.name = f"{model}-P{workers}-d{density:g}-e{epochs}" + ("-sched" if schedule else "")

    def flags(self, method_flags):
        """The cell's flags and the method's; the method's density (dense: 1) replaces the cell's."""
        extra = self.task.flags() if self.task else []
        density = [] if "--density" in method_flags else ["--density", f"{self.density:g}"]
        schedule = schedule_flags(self.epochs, method_flags) if self.schedule else []
        return (["--model", self.model, "--workers", str(self.workers)] + density + ["--epochs", str(self.epochs)]
                + extra + method_flags + schedule)

    def rates_from(self, method):
        """The cell whose tuned rate the method runs at here, or None when it is tuned in this cell."""
        return self.tuned_in if self.tuned_in and method not in self.tune_here else None

    def borrowed(self):
        """The methods that run at another cell's rates."""
        return [m for m in self.methods if self.rates_from(m)]

    def tuned(self):
        """The methods tuned in this cell."""
        return [m for m in self.methods if not self.rates_from(m)]

    def grid(self, method):
        return self.task.grid if self.task else METHODS[method][1]

    def validation_flags(self):
        return self.task.validation_flags if self.task else ["--validation", str(VALIDATION)]

    def perplexity(self):
        return self.task is not None

    def score(self, summary):
        """What tuning maximizes: validation accuracy, or minus the validation loss (lm)."""
        return -summary["final_validation_loss"] if self.perplexity() else summary["final_validation_accuracy"]

    def goodness(self, summary):
        """The result, higher better: test accuracy, or minus the test perplexity (lm)."""
        return -summary["final_test_perplexity"] if self.perplexity() else summary["final_test_accuracy"]

    def show(self, goodness):
        return f"{-goodness:.1f}" if self.perplexity() else pct(goodness)


class LicenseTextLm:
    """The LSTM language model on the license-text corpus (scripts/license_corpus.py), Adam as in
    scripts/lm-demo.sh; valid.txt is the validation set."""
    grid = (0.001, 0.002, 0.004)
    validation_flags = []

    def __init__(self):
        self.corpus = RUNS / "license-corpus"

    def flags(self):
        if not (self.corpus / "train.txt").exists():
            subprocess.run(["/usr/bin/python3", str(ROOT / "scripts" / "license_corpus.py"), str(self.corpus)],
                           check=True, stdout=subprocess.DEVNULL)
        return ["--task", "lm", "--data", str(self.corpus), "--batch-size", "10", "--bptt", "35", "--hidden-size",
                "200", "--optimizer", "adam", "--weight-decay", "0", "--clip-norm", "0.25", "--dropout", "0.3"]


# The cells in the order they are run: the most telling comparisons first, so that a study cut short
# by its budget still answers the main questions; a cell may appear twice (its remaining methods later).
P4_FIRST = ["dense", "topk-gtopk-rd", "topk-allgather", "topk-gtopk-rd-noef", "paper", "topk-gtopk-rd-d0.001",
            "topk-gtopk-rd-mc", "rtopk2-gtopk-rd", "rtopk2-allgather", "randk-unbiased", "randk-shared"]
P4_REST = ["rtopk4-allgather", "rtopk2-allgather-noef", "rtopk4-allgather-noef", "topk-allgather-noef",
           "randk-shared-noef", "rtopk1.5-allgather", "rtopk8-allgather", "gaussiank-allgather",
           "rtopk1.5-allgather-noef", "rtopk8-allgather-noef"]
P8_METHODS = ["dense", "topk-gtopk-rd", "topk-allgather", "topk-gtopk-rd-noef", "paper", "topk-gtopk-rd-d0.001",
              "topk-gtopk-rd-mc", "rtopk2-gtopk-rd", "rtopk2-allgather"]
LM_METHODS = ["dense", "topk-gtopk-rd", "topk-allgather", "rtopk2-gtopk-rd", "rtopk2-allgather", "topk-gtopk-rd-noef"]
P32_METHODS = ["dense", "topk-gtopk-rd", "topk-allgather", "paper", "topk-gtopk-rd-mc", "rtopk2-gtopk-rd"]
RESNET_METHODS = ["dense", "topk-gtopk-rd", "topk-allgather", "topk-gtopk-rd-noef", "paper", "topk-gtopk-rd-mc",
                  "rtopk2-gtopk-rd", "rtopk2-allgather"]
RESNET_P8_METHODS = ["dense", "topk-gtopk-rd", "paper", "rtopk2-gtopk-rd", "topk-allgather"]
EQUAL_STEPS_METHODS = ["dense", "topk-gtopk-rd", "topk-allgather"]
# rTop-k where its paper puts it: very sparse (density 0.001), every worker's k kept (allgather),
# r/k 1.5, 2 and 4 with and without error feedback, against top-k and random-k at the same k.
RTOPK_REGIME_METHODS = ["topk-allgather", "rtopk2-allgather", "rtopk4-allgather", "rtopk2-allgather-noef",
                        "rtopk4-allgather-noef", "topk-allgather-noef", "randk-shared", "rtopk1.5-allgather"]
# The LSTM beside the rTop-k arms it lacks (its cell has top-k and rTop-k r = 2k with error feedback).
LM_RTOPK_METHODS = ["rtopk4-allgather", "rtopk2-allgather-noef", "rtopk4-allgather-noef", "topk-allgather-noef",
                    "randk-shared", "rtopk1.5-allgather"]
LATER_STAGES = [
    # The same arms with the authors' schedule (schedule_flags), tuned again: the schedule's effect
    # is the difference between this cell and the one without it.
    Cell("cnn", 8, 0.01, 6, EQUAL_STEPS_METHODS, schedule=True),
    Cell("cnn", 8, 0.001, 6, RTOPK_REGIME_METHODS),
    # P = 32 at the P = 4 cell's 1,290 iterations: 54 an epoch, 24 epochs. A run takes about 16 minutes
    # here, so the main pair comes first with and without the schedule, allgather after.
    Cell("cnn", 32, 0.01, 24, ["dense", "topk-gtopk-rd"]),
    Cell("cnn", 32, 0.01, 24, ["dense", "topk-gtopk-rd"], schedule=True),
    Cell("cnn", 32, 0.01, 24, ["topk-allgather"]),
    Cell("cnn", 32, 0.01, 24, ["topk-allgather"], schedule=True),
    # rTop-k's regime at P = 4 and on the LSTM.
    Cell("cnn", 4, 0.001, 3, RTOPK_REGIME_METHODS),
    Cell("lstm", 4, 0.01, 20, LM_RTOPK_METHODS, task=LicenseTextLm()),
    # resnet20 at P = 8 for the P = 4 cell's 860 iterations.
    Cell("resnet20", 8, 0.01, 4, EQUAL_STEPS_METHODS),
    Cell("cnn", 32, 0.001, 24, RTOPK_REGIME_METHODS[:5]),
]
STAGES = [
    Cell("cnn", 4, 0.01, 3, P4_FIRST),
    Cell("cnn", 8, 0.01, 3, P8_METHODS),
    Cell("cnn", 32, 0.01, 5, P32_METHODS, tuned_in="cnn-P8-d0.01-e3"),
    Cell("lstm", 4, 0.01, 20, LM_METHODS, task=LicenseTextLm()),
    Cell("cnn", 4, 0.01, 3, P4_REST),
    Cell("resnet20", 4, 0.01, 2, RESNET_METHODS),
    # P = 8: what changes with twice the workers, for the methods that answer the papers' main claims.
    # At the P = 4 rates gTop-k fell 5 points behind dense (83.14 against 88.21%), so the main pair is
    # tuned here too (a grid for every method would cost 3x the runs); the others keep the P = 4 rates.
    Cell("resnet20", 8, 0.01, 2, RESNET_P8_METHODS, tuned_in="resnet20-P4-d0.01-e2",
         tune_here=("dense", "topk-gtopk-rd")),
    # Equal updates across P: as many iterations as the P = 4 cell (1,290: 430 a P = 4 epoch on the
    # 55,000 training examples left after validation), so steps x density does not fall as 1/P.
    # Every method tuned at its P.
    Cell("cnn", 8, 0.01, 6, EQUAL_STEPS_METHODS),
] + LATER_STAGES


def report_cells():
    """One cell per name, with the methods of all its stages."""
    cells = {}
    for stage in STAGES:
        if stage.name in cells:
            cells[stage.name].methods += [m for m in stage.methods if m not in cells[stage.name].methods]
        else:
            cells[stage.name] = Cell(stage.model, stage.workers, stage.density, stage.epochs, list(stage.methods),
                                     stage.tuned_in, stage.task, stage.tune_here, stage.schedule)
    return list(cells.values())


# --- records ---------------------------------------------------------------------------------------

_records = None  # name -> record, read from RECORDS once


def records():
    """The committed run records: {name: {"name", "command", "summary", "epochs_csv"} or, for a run
    that failed, {"name", "command", "failed"}}."""
    global _records
    if _records is None:
        lines = RECORDS.read_text().splitlines() if RECORDS.exists() else []
        _records = {r["name"]: r for r in map(json.loads, lines)}
    return _records


def save_records():
    """Rewrites RECORDS, sorted by name, atomically (a study stopped half-way leaves the old table or
    the new one, never half of one)."""
    RECORDS.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(RECORDS, "".join(json.dumps(records()[name], separators=(",", ":")) + "\n"
                                      for name in sorted(records())))


IGNORED = set()  # record names taken as not run (stale records, for --list)


def load_record(name):
    """(status, summary, epochs): status 'ok', 'failed' or None (not run)."""
    record = None if name in IGNORED else records().get(name)
    if record is None:
        return None, None, []
    if "failed" in record:
        return "failed", {"error": record["failed"]}, []
    epochs = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(record["epochs_csv"]))]
    return "ok", record["summary"], epochs


def command_text(name, flags):
    """The command of a run as recorded in command.txt (paths relative to the repository)."""
    command = ["sparsgd", "train", "--network", "paper-1gbe", "--out", str(RUNS / name)] + flags
    return " ".join(command).replace(str(ROOT) + "/", "")


def expected_flags(name):
    """The flags the study now gives the run of this record's name, or None if it plans no such run."""
    for seed in SEEDS:
        for arm, flags in GAP_ARMS.items():
            if name == f"{GAP_CELL}-{arm}-s{seed}":
                return ["--epochs", "1", "--seed", str(seed)] + flags
    for cell in STAGES:
        for method in cell.methods:
            prefix = f"{cell.name}-{method}-lr"
            if not name.startswith(prefix) or "-s" not in name[len(prefix):]:
                continue
            lr, seed = name[len(prefix):].rsplit("-s", 1)
            extra = [] if cell.rates_from(method) else cell.validation_flags()
            return cell.flags(METHODS[method][0]) + ["--lr", lr, "--seed", seed] + extra
    return None


def stale_records():
    """Records made with other flags than the study now gives them (a method's definition changed):
    [(name, the command it was made with)]. Records the study no longer plans are not stale."""
    stale = []
    for name, record in sorted(records().items()):
        flags = expected_flags(name)
        if flags is not None and record.get("command") != command_text(name, flags):
            stale.append((name, record.get("command")))
    return stale


def drop_stale_records():
    """Stale records are removed, so that they are run again."""
    stale = stale_records()
    for name, recorded in stale:
        print(f"stale (made as: {recorded}): {name}; it will run again", file=sys.stderr)
        del records()[name]
    if stale:
        save_records()


def run(name, flags, epochs, budget):
    """Runs `sparsgd train` for one record unless it exists; False when the budget is spent (no run
    is started that would end after the deadline, by the slowest epoch seen so far)."""
    if load_record(name)[0] is not None:
        return True
    if time.monotonic() + budget["epoch_seconds"] * epochs > budget["deadline"]:
        return False
    out = RUNS / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    command = [str(CLI), "train", "--network", "paper-1gbe", "--out", str(out)] + flags
    print(f"== {name}", file=sys.stderr, flush=True)
    start = time.monotonic()
    with open(out / "stderr.log", "w") as err:
        status = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=err).returncode
    seconds = time.monotonic() - start
    budget["epoch_seconds"] = max(budget["epoch_seconds"], 1.1 * seconds / epochs)
    record = {"name": name, "command": command_text(name, flags)}
    if status != 0:
        log = (out / "stderr.log").read_text()
        if "non-finite gradient" not in log:
            # Only divergence is a result of the method; a command this script got wrong, a crash, a
            # binary being rebuilt or memory running out is not: stop and say why.
            raise SystemExit(f"{name}: sparsgd train exited {status} without its own error line:\n{log[-2000:]}")
        lines = [line for line in log.splitlines() if "error" in line]
        record["failed"] = lines[-1] if lines else f"exit status {status}"
        records()[name] = record
        save_records()
        print(f"   failed: {record['failed']}", file=sys.stderr)
        return True
    record["summary"] = json.loads((out / "summary.json").read_text())
    record["epochs_csv"] = (out / "epochs.csv").read_text()
    records()[name] = record
    save_records()
    status, summary, _ = load_record(name)
    print(f"   test accuracy {summary['final_test_accuracy']:.4f} ({seconds:.0f} s)", file=sys.stderr)
    return True


def run_name(cell, method, lr, seed):
    return f"{cell}-{method}-lr{lr:g}-s{seed}"


def grid_values(grid, extended_low, extended_high):
    low, high = grid[0], grid[-1]
    return sorted([low / 2 ** i for i in range(1, extended_low + 1)] + list(grid)
                  + [high * 2 ** i for i in range(1, extended_high + 1)])


def tuning(cell, method):
    """(rates tried with their seed-1 validation accuracy or None if failed, chosen rate or None,
    the next rate to try or None). The grid grows past an edge that wins, at most MAX_EXTENSIONS."""
    grid = cell.grid(method)
    low = high = 0
    while True:
        tried, missing = {}, None
        for lr in grid_values(grid, low, high):
            status, summary, _ = load_record(run_name(cell.name, method, lr, 1))
            if status is None:
                if missing is None:
                    missing = lr
                continue
            tried[lr] = cell.score(summary) if status == "ok" else None
        if missing is not None:  # every tried rate counts in the listing, not only those below it
            return tried, None, missing
        scored = {lr: acc for lr, acc in tried.items() if acc is not None and not math.isnan(acc)}
        if not scored:
            return tried, None, None
        best = min(scored, key=lambda lr: (-scored[lr], lr))  # ties: the smaller rate
        rates = sorted(tried)
        if best == rates[0] and low < MAX_EXTENSIONS:
            low += 1
        elif best == rates[-1] and high < MAX_EXTENSIONS and tried.get(rates[-1]) is not None:
            high += 1
        else:
            return tried, best, None


def chosen_rate(cell, method):
    if cell.rates_from(method):
        source = next(c for c in STAGES if c.name == cell.rates_from(method))
        return tuning(source, method)[1]
    return tuning(cell, method)[1]


def run_gap(budget):
    for seed in SEEDS:
        for arm, flags in GAP_ARMS.items():
            if not run(f"{GAP_CELL}-{arm}-s{seed}", ["--epochs", "1", "--seed", str(seed)] + flags, 1, budget):
                return False
    return True


def run_cell(cell, budget):
    for method in cell.methods:
        flags = cell.flags(METHODS[method][0])
        borrowed = cell.rates_from(method) is not None
        if not borrowed:
            while True:
                _, best, next_lr = tuning(cell, method)
                if next_lr is None:
                    break
                if not run(run_name(cell.name, method, next_lr, 1),
                           flags + ["--lr", f"{next_lr:g}", "--seed", "1"] + cell.validation_flags(),
                           cell.epochs, budget):
                    return False
        lr = chosen_rate(cell, method)
        if lr is None:
            continue  # every rate failed, or the source cell is not tuned yet
        for seed in SEEDS:
            if not borrowed and seed == 1:
                continue  # the tuning run is seed 1
            extra = [] if borrowed else cell.validation_flags()
            if not run(run_name(cell.name, method, lr, seed),
                       flags + ["--lr", f"{lr:g}", "--seed", str(seed)] + extra, cell.epochs, budget):
                return False
    return True


# --- report ----------------------------------------------------------------------------------------

def spread(values):
    if not values:
        return None
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else float("nan")
    return {"mean": mean, "std": std, "min": min(values), "max": max(values), "n": len(values)}


def time_to_target(epochs, target):
    """Simulated seconds at which test accuracy first reaches the target, by linear interpolation
    between the ends of epochs (from 0 at the start); None if it never does."""
    t0, a0 = 0.0, 0.1
    for row in epochs:
        t1, a1 = row["simulated_s"], row["test_accuracy"]
        if a1 >= target:
            return t0 + (t1 - t0) * (target - a0) / (a1 - a0) if a1 > a0 else t1
        t0, a0 = t1, a1
    return None


def method_results(cell, method):
    lr = chosen_rate(cell, method)
    runs = []
    if lr is not None:
        for seed in SEEDS:
            status, summary, epochs = load_record(run_name(cell.name, method, lr, seed))
            if status is not None:
                runs.append((status, summary, epochs))
    ok = [(s, e) for status, s, e in runs if status == "ok"]
    return lr, runs, ok


def cell_iterations(cell):
    """Iterations a run in the cell (its first finished run's), or None before any."""
    return next((s["iterations"] for m in cell.methods for s, _ in method_results(cell, m)[2]), None)


def cell_table(cell, lines, dense):
    """The cell's table; returns {method: spread of goodness}, {method: spread of time to target}."""
    what = "the LSTM on the license-text corpus" if cell.perplexity() else cell.model
    schedule = ", the authors' schedule" if cell.schedule else ""
    lines.append(f"\n### {what}, P = {cell.workers}, density {cell.density:g}, {cell.epochs} epochs{schedule}\n")
    if cell.tuned_in and not cell.tune_here:
        lines.append(f"Learning rates as tuned in {cell.tuned_in} (no tuning at this P); all 60,000 training "
                     f"examples.\n")
    elif cell.tuned_in:
        lines.append(f"Tuned at this P (rates tried shown, training on all but the {VALIDATION:,} validation "
                     f"examples): {', '.join(cell.tuned())}. The others at the rates tuned in {cell.tuned_in}, on all "
                     f"60,000 training examples: {', '.join(cell.borrowed())}.\n")
    iterations = cell_iterations(cell)
    if iterations is not None:
        lines.append(f"{iterations:,} iterations a run; iterations x density {iterations * cell.density:.1f} (how often "
                     f"each parameter can be sent).\n")
    if cell.schedule:
        lines.append("Every arm with the authors' schedule: " + " ".join(schedule_flags(cell.epochs, [])) +
                     " (the density warm-up on the sparse arms only).\n")
    if cell.perplexity():
        lines.append("Test perplexity (lower is better); rates tuned on valid.txt's perplexity (shown). Adam, "
                     "batch 10 streams x 35 tokens a worker, dropout 0.3, clip 0.25, as `scripts/lm-demo.sh`.\n")
        head = "| method | lr tried (validation perplexity, seed 1) | lr | test perplexity mean | min-max | std | "
    else:
        head = "| method | lr tried (validation acc. %, seed 1) | lr | test acc. % mean | min-max | std | "
    lines.append(head + "vs dense | train loss | bytes/worker/iter | simulated s/epoch | time to "
                 f"{100 * TARGET:.0f}% (s) |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    means, times = {}, {}
    for method in cell.methods:
        tried = tuning(cell, method)[0] if not cell.rates_from(method) else {}
        lr, runs, ok = method_results(cell, method)
        tried_text = ", ".join(f"{lr_:g}: {'failed' if v is None else cell.show(v) if not cell.perplexity() else f'{math.exp(-v):.1f}'}"
                               for lr_, v in sorted(tried.items()))
        if not runs:
            if tried:
                lines.append(f"| {method} | {tried_text} | {'-' if lr is None else f'{lr:g}'} | not run yet |"
                             " | | | | | | |")
            continue
        failed = [s["error"] for status, s, _ in runs if status == "failed"]
        good = spread([cell.goodness(s) for s, _ in ok])
        if good is None:
            lines.append(f"| {method} | {tried_text} | {lr:g} | failed: {failed[0]} | | | | | | | |")
            continue
        means[method] = good
        loss = statistics.fmean(s["final_train_loss"] for s, _ in ok)
        bytes_ = statistics.fmean(s["bytes_per_worker_per_iteration"] for s, _ in ok)
        sim = statistics.fmean(s["simulated_seconds"] / s["epochs"] for s, _ in ok)
        reach_text = "-"
        if not cell.perplexity():
            reach = [time_to_target(e, TARGET) for _, e in ok]
            if all(r is not None for r in reach):
                times[method] = spread(reach)
                reach_text = f"{statistics.fmean(reach):.1f}"
            elif any(r is not None for r in reach):
                reach_text = f"{sum(r is not None for r in reach)}/{len(reach)} seeds"
        versus = "-"
        if dense is not None and method != "dense":
            d = good["mean"] - dense["mean"]
            inside = abs(d) <= max(dense["max"] - dense["min"], good["max"] - good["min"])
            shown = f"{-d:+.1f}" if cell.perplexity() else f"{100 * d:+.2f}"
            versus = f"{shown}{' (inside spread)' if inside else ''}"
        low, high = (good["max"], good["min"]) if cell.perplexity() else (good["min"], good["max"])
        seeds_text = f"{cell.show(low)}-{cell.show(high)}" + ("" if good["n"] == 3 else f" ({good['n']} seeds)")
        if failed:
            seeds_text += f"; {len(failed)} failed"
        std = f"{good['std']:.1f}" if cell.perplexity() else f"{100 * good['std']:.2f}"
        lines.append(f"| {method} | {tried_text} | {lr:g} | {cell.show(good['mean'])} | {seeds_text} | "
                     f"{std} | {versus} | {loss:.4f} | {bytes_:,.0f} | {sim:.2f} | {reach_text} |")
    return means, times


def curves(cell, path_prefix):
    """Mean test accuracy over the seeds against epoch and against simulated time, one line per
    method, as a gnuplot data file and two PNGs. The titles are this script's own method names."""
    blocks, titles = [], []
    for method in cell.methods:
        _, _, ok = method_results(cell, method)
        if not ok:
            continue
        epochs = min(len(e) for _, e in ok)
        rows = []
        for i in range(epochs):
            value = "test_perplexity" if cell.perplexity() else "test_accuracy"
            rows.append((i + 1, statistics.fmean(e[i]["simulated_s"] for _, e in ok),
                         (1 if cell.perplexity() else 100) * statistics.fmean(e[i][value] for _, e in ok)))
        blocks.append(rows)
        titles.append(method)
    if not blocks:
        return []
    data = path_prefix.parent / f"{path_prefix.name}.dat"  # not with_suffix: the name holds "d0.01"
    text = ""
    for title, rows in zip(titles, blocks):
        text += f"# {title}\n" + "".join(" ".join(f"{v:.6g}" for v in row) + "\n" for row in rows) + "\n\n"
    write_atomically(data, text)
    made = []
    for x, column, label in (("epoch", 1, "epoch"), ("time", 2, "simulated seconds on paper-1gbe")):
        png = path_prefix.parent / f"{path_prefix.name}-{x}.png"
        plot = ", ".join(f"'{data.name}' index {i} using {column}:3 with linespoints title '{t}'"
                         for i, t in enumerate(titles))
        ylabel = "test perplexity, mean of seeds" if cell.perplexity() else "test accuracy (%), mean of seeds"
        script = (f"set terminal pngcairo size 1000,650\nset output '{png.name}'\nset key outside right\n"
                  f"set xlabel '{label}'\nset ylabel '{ylabel}'\nset grid\nplot {plot}\n")
        result = subprocess.run(["gnuplot"], input=script, text=True, cwd=png.parent, capture_output=True)
        if result.returncode != 0 or not png.exists():
            raise SystemExit(f"gnuplot failed for {png}: {result.stderr.strip()}")
        made.append(png)
    return made


def gap_lines(gap):
    """The default `sparsgd train` run against dense S-SGD, for the claims section."""
    if not (gap.get("default") and gap.get("dense")):
        return []
    v, d, _ = verdict(gap["default"], gap["dense"], 0.005)
    within = "yes" if d >= -0.005 else "no"
    out = [f"- **The default `sparsgd train` run ends within 0.5 points of dense S-SGD (1 epoch, mean of seeds "
           f"1-3): {within}** ({pct(gap['default']['mean'])}% vs {pct(gap['dense']['mean'])}%, difference "
           f"{100 * d:+.2f}; against seed noise by the rule above: {v}; with plain momentum instead of "
           f"momentum correction: "
           f"{pct(gap['no-momentum-correction']['mean']) if gap.get('no-momentum-correction') else '-'}%)."]
    slower = gap.get("no-momentum-correction-lr0.025")
    if slower:
        v, d, _ = verdict(gap["default"], slower)
        out.append(f"- Momentum correction against plain momentum at lr 0.025 (is its gain a rate effect?): "
                   f"{pct(gap['default']['mean'])}% vs {pct(slower['mean'])}%, difference {100 * d:+.2f}; "
                   f"momentum correction at least as accurate: {v}.")
    return out + [""]


def report():
    lines = ["# Convergence study", "",
             "Generated by `scripts/convergence-study.sh` (which runs `scripts/convergence_study.py`); every "
             "number below comes from the run records in `docs/results/convergence/runs.jsonl` (summary.json, "
             "epochs.csv and the exact command of each run). Rerunning the command continues an unfinished "
             "study and regenerates this page.", "",
             "## Protocol", "",
             f"- Fashion-MNIST, batch 32 per worker, momentum 0.9, weight decay 1e-4, no schedule, simulated network "
             f"paper-1gbe (alpha 0.436 ms, 9 ns/byte; compute charged as measured thread CPU time on this 2-core "
             f"machine). Seeds {', '.join(map(str, SEEDS))} per cell.",
             f"- Learning rate tuned per method on the seed-1 run: the last {VALIDATION:,} training examples are held "
             f"out as a validation set (`--validation {VALIDATION}`), never the test set; the rate with the best final "
             f"validation accuracy is chosen (ties: the smaller), and when an end of the grid wins the grid is "
             f"extended past it by factors of 2, up to {MAX_EXTENSIONS} times. Seeds 2 and 3 then run at that rate "
             f"on the same split. Default grid {', '.join(f'{x:g}' for x in DEFAULT_GRID)}; random-k's grids are "
             f"lower (see the tables).",
             "- Every arm but `topk-gtopk-rd-mc` and the default run uses plain momentum SGD (`--momentum-correction "
             "off`), as the papers do. `dense` is dense S-SGD (allreduce of all gradients).",
             f"- `vs dense`: difference of mean test accuracy in points; *inside spread* when it is smaller than the "
             f"min-max range of either method's seeds. Time to {100 * TARGET:.0f}%: simulated seconds at which the "
             f"test accuracy, linearly interpolated between ends of epochs, first reaches it (mean over seeds).",
             "- Within one epoch all methods see the same examples in the same order for a given seed.",
             "- Equal updates across P: the cells cnn-P8-d0.01-e6, cnn-P32-d0.01-e24 (and their d0.001 and -sched "
             "siblings) and resnet20-P8-d0.01-e4 run as many iterations as the P = 4 cell of their model (1,290 for "
             "cnn, 860 for resnet20), so that iterations x density does not fall as 1/P; every method is tuned at "
             "its own P. The earlier cells at P = 8 and 32 (fixed epochs) stay as they were measured.",
             f"- Cells whose name ends in -sched: every arm runs the gTop-k authors' schedule (hclhkbu/gtopkssgd) "
             f"scaled to the run: the learning rate from lr/P to lr over the first {AUTHORS_LR_WARMUP_EPOCHS}/"
             f"{AUTHORS_RUN_EPOCHS} of it, the step decay (x0.1 at 50%, x0.01 at 75%), and on the sparse arms the "
             f"density {AUTHORS_WARMUP_DENSITY:g} over the first {AUTHORS_DENSITY_WARMUP_EPOCHS}/{AUTHORS_RUN_EPOCHS} "
             f"(their code does so whatever the target density). Tuned again: the schedule's effect is the "
             f"difference from the same cell without it.",
             "- Cells, in the order they run (the most telling comparisons first; a cell's remaining methods come "
             "later): " + "; ".join(f"{c.name} ({len(c.methods)} methods{rate_source(c)})" for c in STAGES) + ". The lstm cell is the 2-layer LSTM language model on the "
             "license texts every Debian system ships (scripts/license_corpus.py: 36,595 training tokens, vocabulary "
             "2,076; not the Penn Treebank, which cannot be downloaded here, and neither can CIFAR-10).",
             "- A cell whose table is empty or short has not been run yet: the study runs in chunks.", ""]
    # The default run against dense.
    lines.append("## The default `sparsgd train` run against dense S-SGD\n")
    lines.append("`sparsgd train` (cnn, 4 workers, topk + gtopk, density 0.01, lr 0.05, one epoch, all 60,000 "
                 "training examples) with only the arm's flags changed; seeds 1-3.\n")
    lines.append("| arm | flags | test accuracy % per seed | mean | min-max | vs dense |")
    lines.append("|---|---|---|---|---|---|")
    gap, per_seed = {}, {}
    for arm in GAP_ARMS:
        values, per_seed[arm] = [], []
        for seed in SEEDS:
            status, summary, _ = load_record(f"{GAP_CELL}-{arm}-s{seed}")
            if status == "ok":
                values.append(summary["final_test_accuracy"])
            per_seed[arm].append(pct(summary["final_test_accuracy"]) if status == "ok" else
                                 "failed" if status == "failed" else "-")
        gap[arm] = spread(values)
    for arm, flags in GAP_ARMS.items():
        s = gap[arm]
        if s is None:
            continue
        versus = "-" if arm == "dense" or gap.get("dense") is None else f"{100 * (s['mean'] - gap['dense']['mean']):+.2f}"
        lines.append(f"| {arm} | `{' '.join(flags) or '(none)'}` | {', '.join(per_seed[arm])} | {pct(s['mean'])} | "
                     f"{pct(s['min'])}-{pct(s['max'])} | {versus} |")
    lines.append("\n## Methods, rates tuned on the validation split\n")
    measured = []
    for cell in report_cells():
        dense = spread([cell.goodness(s) for s, _ in method_results(cell, "dense")[2]])
        means, times = cell_table(cell, lines, dense)
        if means:
            measured.append(Measured(cell, cell_iterations(cell), means, times))
            made = curves(cell, PLOTS / cell.name)
            if made:
                lines.append("\nPlots: " + ", ".join(f"`{p.relative_to(RESULTS)}`" for p in made) + ".")
    lines.append("\n## Methods\n")
    for name, (flags, grid, what) in METHODS.items():
        lines.append(f"- `{name}`: {what}; `{' '.join(flags)}`.")
    write_atomically(RESULTS / "convergence.md", "\n".join(lines) + "\n")
    claims = claims_markdown(measured, gap_lines(gap))
    path = RESULTS / "findings.md"
    text = path.read_text() if path.exists() else "# What the measurements say\n"
    start = text.find("<!-- convergence claims:")
    end_marker = "<!-- end of generated convergence claims -->"
    if start >= 0 and end_marker in text:
        text = text[:start] + claims + text[text.find(end_marker) + len(end_marker):]
    else:
        text = text.rstrip("\n") + "\n\n" + claims + "\n"
    write_atomically(path, text)
    print(f"wrote {RESULTS / 'convergence.md'} and the claims in {path}", file=sys.stderr)


def rate_source(cell):
    """How the cell list names where a cell's rates come from."""
    if not cell.borrowed():
        return ""
    if len(cell.borrowed()) == len(cell.methods):
        return f", rates from {cell.tuned_in}"
    return f", {', '.join(cell.tuned())} tuned here, the others' rates from {cell.tuned_in}"


def list_progress():
    """Where the study stands, in the order it runs: each method of each cell, tuning or seeds. Stale
    records count as not run (the next run of the study removes them), but nothing is removed here."""
    recorded = len(records())
    stale = stale_records()
    print(f"{recorded} runs recorded under {RECORDS.relative_to(ROOT)}, {len(stale)} of them stale (made with "
          f"other flags than the study now gives them: they will run again)")
    IGNORED.update(name for name, _ in stale)
    gap = [load_record(f"{GAP_CELL}-{arm}-s{seed}")[0] for seed in SEEDS for arm in GAP_ARMS]
    print(f"{GAP_CELL + ' (default run vs dense)':<32} {sum(s is not None for s in gap)}/{len(gap)} runs")
    left = 0
    for cell in STAGES:
        for method in cell.methods:
            if cell.rates_from(method):
                lr, next_lr, tried = chosen_rate(cell, method), None, {}
            else:
                tried, lr, next_lr = tuning(cell, method)
            if lr is not None:
                done = sum(load_record(run_name(cell.name, method, lr, seed))[0] is not None for seed in SEEDS)
                state = f"lr {lr:g}: {done}/{len(SEEDS)} seeds"
                left += len(SEEDS) - done
            elif next_lr is not None:
                state = f"tuning: {len(tried)} rates tried, next {next_lr:g}"
                left += max(1, len(cell.grid(method)) - len(tried)) + len(SEEDS) - 1
            elif cell.rates_from(method):
                state = f"waits for its rate from {cell.rates_from(method)}"
                left += len(SEEDS)
            else:
                state = "every rate tried failed"
            print(f"{cell.name:<24} {method:<30} {state}")
    print(f"at least {left} runs left")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-minutes", type=float, default=55.0,
                        help="start no run that would end after this many minutes (default 55)")
    parser.add_argument("--report-only", action="store_true", help="only regenerate the report")
    parser.add_argument("--list", action="store_true", help="print what is recorded and what is left")
    args = parser.parse_args()
    if args.list:
        list_progress()
        return
    drop_stale_records()  # a report must not show them either
    if not args.report_only:
        if not CLI.exists():
            raise SystemExit(f"{CLI} is missing: run scripts/setup.sh first")
        budget = {"deadline": time.monotonic() + 60 * args.budget_minutes, "epoch_seconds": 45.0}
        finished = run_gap(budget) and all(run_cell(stage, budget) for stage in STAGES)
        print("the study is complete" if finished else "budget spent: run the command again to continue",
              file=sys.stderr)
    report()


if __name__ == "__main__":
    main()
