#!/usr/bin/env python3
"""Checks scripts/research/auto_best_fixed.py, which picks the fixed run that auto runs beside in the auto sweep:
the smallest median over the counted exchanges (not the smallest floor, nor exchanges outside the
window), among the runs that exist with the point's suffix, and nothing where none does.
Usage: auto_best_fixed_test.py SOURCE_DIR"""

import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

SOURCE = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
SCRIPT = SOURCE / "scripts" / "research" / "auto_best_fixed.py"
spec = importlib.util.spec_from_file_location("auto_best_fixed", SCRIPT)
auto_best_fixed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(auto_best_fixed)

FIRST, ITERS = 2, 4  # counted: exchanges 2, 3, 4


class BestFixed(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.prefix = str(pathlib.Path(folder.name) / "4-1000-0.01-10gbe")

    def run_of(self, agg, series, suffix=""):
        pathlib.Path(f"{self.prefix}-{agg}{suffix}.json").write_text(json.dumps({"sim_comm_ms_per_iteration": series}))

    def test_smallest_median_of_the_counted_exchanges(self):
        # oktopk's floor is the smallest and its exchanges before the window are too, but its median is not.
        self.run_of("gtopk-rd", [9, 9, 5, 5, 5, 9])
        self.run_of("oktopk", [1, 1, 0.5, 7, 7, 0])
        self.run_of("allgather", [9, 9, 6, 6, 6, 0])
        self.assertEqual(auto_best_fixed.best_fixed(self.prefix, "", FIRST, ITERS), "gtopk-rd")

    def test_only_runs_with_the_suffix(self):
        self.run_of("gtopk-rd", [1, 1, 1, 1, 1])
        self.run_of("oktopk", [2, 2, 2, 2, 2], ".drawn")
        self.run_of("dense", [3, 3, 3, 3, 3], ".drawn")
        self.assertEqual(auto_best_fixed.best_fixed(self.prefix, ".drawn", FIRST, ITERS), "oktopk")

    def test_refused_and_skipped_runs_do_not_count(self):
        pathlib.Path(f"{self.prefix}-dense.refused").write_text("needs about 40 GiB")
        pathlib.Path(f"{self.prefix}-allgather.skipped").write_text("over 2x")
        self.assertIsNone(auto_best_fixed.best_fixed(self.prefix, "", FIRST, ITERS))
        self.run_of("allgather", [4, 4, 4, 4, 4])
        self.assertEqual(auto_best_fixed.best_fixed(self.prefix, "", FIRST, ITERS), "allgather")

    def test_command_prints_the_name_or_nothing(self):
        command = [sys.executable, str(SCRIPT), self.prefix, "", str(FIRST), str(ITERS)]
        self.assertEqual(subprocess.run(command, capture_output=True, text=True, check=True).stdout, "")
        self.run_of("oktopk", [1, 1, 1, 1, 1])
        self.assertEqual(subprocess.run(command, capture_output=True, text=True, check=True).stdout, "oktopk\n")
        wrong = subprocess.run([sys.executable, str(SCRIPT), self.prefix], capture_output=True, text=True)
        self.assertNotEqual(wrong.returncode, 0)


if __name__ == "__main__":
    unittest.main()
