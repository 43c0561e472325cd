#!/usr/bin/env python3
"""Checks scripts/research/quiet.py, which runs a report's measurement once the machine is quiet and records how
much CPU other processes took meanwhile: the /proc/stat parsing (steal counts as busy, idle and iowait
do not), the threshold, that a busy process beside a run is seen and a quiet run is not, that the
command's exit status comes back, and that bad usage is refused. Usage: quiet_test.py SOURCE_DIR"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

SOURCE = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
SCRIPT = SOURCE / "scripts" / "research" / "quiet.py"
spec = importlib.util.spec_from_file_location("quiet", SCRIPT)
quiet = importlib.util.module_from_spec(spec)
spec.loader.exec_module(quiet)


class Folder(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.folder = pathlib.Path(folder.name)

    def run_quiet(self, *command, max_wait="0"):
        load = self.folder / "run.load"
        run = subprocess.run([sys.executable, str(SCRIPT), "--max-wait", max_wait, str(load), "--", *command],
                             capture_output=True, text=True)
        return run, (json.loads(load.read_text()) if load.exists() else None)


class BusySeconds(Folder):
    def test_busy_counters_only(self):
        stat = self.folder / "stat"
        # user nice system idle iowait irq softirq steal guest guest_nice
        stat.write_text("cpu  100 20 30 5000 700 4 6 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
        self.assertAlmostEqual(quiet.cpu_busy_seconds(str(stat)), 200 / os.sysconf("SC_CLK_TCK"))
        self.assertAlmostEqual(quiet.steal_seconds(str(stat)), 40 / os.sysconf("SC_CLK_TCK"))

    def test_not_a_stat_file(self):
        stat = self.folder / "stat"
        stat.write_text("intr 1 2 3\n")
        with self.assertRaises(RuntimeError):
            quiet.cpu_busy_seconds(str(stat))
        with self.assertRaises(RuntimeError):
            quiet.steal_seconds(str(stat))

    def test_this_machine(self):
        self.assertGreater(quiet.cpu_busy_seconds(), 0.0)


class Threshold(unittest.TestCase):
    def test_fixed_allowance_and_share(self):
        self.assertFalse(quiet.disturbed(0.5, 0.0))
        self.assertTrue(quiet.disturbed(0.51, 0.0))
        self.assertFalse(quiet.disturbed(2.5, 100.0))  # 0.5 + 2% of 100 s
        self.assertTrue(quiet.disturbed(2.6, 100.0))


class Command(Folder):
    def test_status_comes_back_and_the_record_is_written(self):
        run, load = self.run_quiet(sys.executable, "-c", "import sys; print('out'); sys.exit(3)")
        self.assertEqual(run.returncode, 3)
        self.assertEqual(run.stdout, "out\n")
        self.assertEqual(sorted(load), ["disturbed", "others_cpu_s", "own_cpu_s", "steal_s", "uptime_s", "waited_s",
                                        "wall_s"])
        self.assertEqual(load["waited_s"], 0.0)
        self.assertGreaterEqual(load["steal_s"], 0.0)
        self.assertLessEqual(load["steal_s"], load["others_cpu_s"] + load["own_cpu_s"] + 0.1)
        with open("/proc/uptime", encoding="ascii") as uptime:
            self.assertLessEqual(load["uptime_s"], float(uptime.read().split()[0]) + 1)  # recorded to the second
        self.assertGreater(load["uptime_s"], 0)

    def test_own_cpu_is_not_counted_as_others(self):
        # Half a second of this run's own work on one core. Whatever else the machine runs meanwhile,
        # others' time is what all cores were busy (measured here around the whole call, so at least
        # as much as quiet.py saw) less the run's own, to within a few clock ticks.
        busy_before = quiet.cpu_busy_seconds()
        run, load = self.run_quiet(sys.executable, "-c",
                                   "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass")
        busy = quiet.cpu_busy_seconds() - busy_before
        self.assertEqual(run.returncode, 0)
        self.assertGreaterEqual(load["own_cpu_s"], 0.45)
        self.assertLessEqual(load["others_cpu_s"], busy - load["own_cpu_s"] + 0.1)

    def test_a_busy_process_beside_the_run_is_seen(self):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            run, load = self.run_quiet("sleep", "2")
        finally:
            busy.kill()
            busy.wait()
        self.assertEqual(run.returncode, 0)
        self.assertGreater(load["others_cpu_s"], 1.0)
        self.assertTrue(load["disturbed"])

    def test_bad_usage(self):
        for args in (["x.load"], ["x.load", "sleep", "1"], ["--max-wait", "-1", "x.load", "--", "true"],
                     ["--max-wait", "soon", "x.load", "--", "true"]):
            run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                                 cwd=self.folder)
            self.assertNotEqual(run.returncode, 0, args)
            self.assertIn("quiet.py", run.stderr)
        self.assertFalse((self.folder / "x.load").exists())

    def test_a_missing_command(self):
        run, load = self.run_quiet(str(self.folder / "no-such-command"))
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("cannot run", run.stderr)
        self.assertIsNone(load)


if __name__ == "__main__":
    unittest.main()
