#!/usr/bin/env python3
"""Checks the learning-rate rule of scripts/convergence_study.py on fake run records: the rate with the
best seed-1 validation accuracy wins (ties: the smaller), an edge that wins extends the grid by factors
of 2 at most MAX_EXTENSIONS times, failed runs never win, and the listing counts every rate tried, not
only those below the first one missing; in a cell that borrows another's rates, the methods named as
tuned there tune on their own validation runs and the others take the source's rate. Usage: convergence_tuning_test.py SOURCE_DIR"""

import importlib.util
import pathlib
import sys
import tempfile
import unittest

SOURCE = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
spec = importlib.util.spec_from_file_location("convergence_study", SOURCE / "scripts" / "convergence_study.py")
study = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study)

CELL = study.Cell("cnn", 4, 0.01, 3, ["topk-gtopk-rd"])
METHOD = "topk-gtopk-rd"


class Records(unittest.TestCase):
    """Fake run records in a temporary table."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.saved = study.RECORDS, study._records
        study.RECORDS = pathlib.Path(self.dir.name) / "runs.jsonl"
        study._records = None

    def tearDown(self):
        study.RECORDS, study._records = self.saved
        self.dir.cleanup()

    def record(self, lr, validation_accuracy=None, cell=CELL, method=METHOD):
        """A finished seed-1 run at lr, or a FAILED one when validation_accuracy is None."""
        name = study.run_name(cell.name, method, lr, 1)
        record = {"name": name, "command": ""}
        if validation_accuracy is None:
            record["failed"] = "diverged"
        else:
            record["summary"] = {"final_validation_accuracy": validation_accuracy}
            record["epochs_csv"] = "epoch,validation_accuracy\n0,%r\n" % validation_accuracy
        study.records()[name] = record
        study.save_records()


class Tuning(Records):
    def test_nothing_run_asks_for_the_smallest_rate(self):
        tried, best, next_lr = study.tuning(CELL, METHOD)
        self.assertEqual((tried, best, next_lr), ({}, None, min(CELL.grid(METHOD))))

    def test_an_inner_rate_wins_without_extension(self):
        grid = CELL.grid(METHOD)
        for lr, acc in zip(grid, (0.80, 0.90, 0.85)):
            self.record(lr, acc)
        tried, best, next_lr = study.tuning(CELL, METHOD)
        self.assertEqual(best, grid[1])
        self.assertIsNone(next_lr)
        self.assertEqual(sorted(tried), sorted(grid))

    def test_a_winning_low_edge_extends_down_and_every_tried_rate_is_listed(self):
        grid = CELL.grid(METHOD)
        for lr, acc in zip(grid, (0.90, 0.85, 0.80)):
            self.record(lr, acc)
        tried, best, next_lr = study.tuning(CELL, METHOD)
        self.assertIsNone(best)
        self.assertEqual(next_lr, grid[0] / 2)
        self.assertEqual(sorted(tried), sorted(grid))  # all three, though the missing rate is below them

    def test_extensions_stop_after_the_limit(self):
        grid = CELL.grid(METHOD)
        rates = [grid[0] / 2 ** i for i in range(study.MAX_EXTENSIONS, 0, -1)] + list(grid)
        for i, lr in enumerate(rates):
            self.record(lr, 0.90 - 0.01 * i)  # the smallest rate always best
        tried, best, next_lr = study.tuning(CELL, METHOD)
        self.assertEqual(best, rates[0])
        self.assertIsNone(next_lr)

    def test_failures_never_win(self):
        grid = CELL.grid(METHOD)
        self.record(grid[0], 0.88)
        self.record(grid[1], 0.90)
        self.record(grid[2], None)  # diverged: a winning-looking high edge must not extend the grid
        tried, best, next_lr = study.tuning(CELL, METHOD)
        self.assertEqual((best, next_lr), (grid[1], None))
        self.assertIsNone(tried[grid[2]])

    def test_ties_go_to_the_smaller_rate(self):
        grid = CELL.grid(METHOD)
        self.record(grid[0], 0.85)
        self.record(grid[1], 0.90)
        self.record(grid[2], 0.90)
        self.assertEqual(study.tuning(CELL, METHOD)[1], grid[1])

    def test_every_rate_failing_chooses_none(self):
        for lr in CELL.grid(METHOD):
            self.record(lr, None)
        self.assertEqual(study.tuning(CELL, METHOD)[1:], (None, None))


class MixedCell(Records):
    """A cell at P = 8 that takes the P = 4 cell's rates except for the one method it tunes itself."""

    def setUp(self):
        super().setUp()
        self.saved_stages = study.STAGES
        self.source = study.Cell("cnn", 4, 0.01, 3, ["dense", METHOD])
        self.mixed = study.Cell("cnn", 8, 0.01, 3, ["dense", METHOD], tuned_in=self.source.name, tune_here=[METHOD])
        study.STAGES = [self.source, self.mixed]

    def tearDown(self):
        study.STAGES = self.saved_stages
        super().tearDown()

    def test_the_tuned_method_uses_its_own_runs_and_the_other_the_source_rate(self):
        grid = self.source.grid("dense")
        for lr, acc in zip(grid, (0.80, 0.90, 0.85)):
            self.record(lr, acc, self.source, "dense")
            self.record(lr, acc, self.source, METHOD)
        for lr, acc in zip(grid, (0.80, 0.85, 0.90)):  # the high edge wins here: one more rate
            self.record(lr, acc, self.mixed, METHOD)
        self.assertEqual(study.chosen_rate(self.mixed, "dense"), grid[1])
        self.assertIsNone(study.chosen_rate(self.mixed, METHOD))  # 2 x the top rate not run yet
        self.record(grid[-1] * 2, 0.88, self.mixed, METHOD)
        self.assertEqual(study.chosen_rate(self.mixed, METHOD), grid[-1])
        self.assertEqual(self.mixed.borrowed(), ["dense"])

    def test_only_the_tuned_method_holds_out_the_validation_split(self):
        def flags(method):
            return study.expected_flags(study.run_name(self.mixed.name, method, 0.05, 2))
        self.assertIn("--validation", flags(METHOD))
        self.assertNotIn("--validation", flags("dense"))


if __name__ == "__main__":
    unittest.main()
