#!/usr/bin/env python3
"""Checks scripts/machine.py, which names the CPU in every report that charges measured CPU time:
the first "model name" of a cpuinfo file, "?" where the file is missing or names none, and its
command prints that one line; and the phrase naming the builds behind a report's results.
Usage: machine_test.py SOURCE_DIR"""

import importlib.util
import pathlib
import subprocess
import sys
import tempfile
import unittest

SOURCE = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
spec = importlib.util.spec_from_file_location("machine", SOURCE / "scripts" / "machine.py")
machine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(machine)


class CpuModel(unittest.TestCase):
    def cpuinfo(self, text):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        path = pathlib.Path(folder.name) / "cpuinfo"
        path.write_text(text)
        return str(path)

    def test_first_model_name(self):
        text = "processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\nflags\t: a:b\n\nprocessor\t: 1\nmodel name\t: Other\n"
        self.assertEqual(machine.cpu_model(self.cpuinfo(text)), "Some CPU @ 2.0GHz")

    def test_colon_in_the_name_is_kept(self):
        self.assertEqual(machine.cpu_model(self.cpuinfo("model name : A: B\n")), "A: B")

    def test_none_named(self):
        self.assertEqual(machine.cpu_model(self.cpuinfo("processor\t: 0\nCPU part\t: 0xd0c\n")), "?")
        self.assertEqual(machine.cpu_model(self.cpuinfo("model name\t:   \n")), "?")

    def test_missing_file(self):
        self.assertEqual(machine.cpu_model("/nonexistent/cpuinfo"), "?")

    def test_command_prints_one_line(self):
        out = subprocess.run([sys.executable, str(SOURCE / "scripts" / "machine.py")], check=True,
                             capture_output=True, text=True).stdout
        self.assertEqual(out.count("\n"), 1)
        self.assertEqual(out.strip(), machine.cpu_model())

    def test_command_refuses_arguments(self):
        run = subprocess.run([sys.executable, str(SOURCE / "scripts" / "machine.py"), "x"], capture_output=True, text=True)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("usage", run.stderr)


class Builds(unittest.TestCase):
    def test_one_build(self):
        self.assertEqual(machine.builds([{"sparsgd": "0.1.0 (abc)"}, {"sparsgd": "0.1.0 (abc)", "n": 1}]),
                         "sparsgd 0.1.0 (abc)")

    def test_several_builds_sorted(self):
        self.assertEqual(machine.builds([{"sparsgd": "0.1.0 (b)"}, {"sparsgd": "0.1.0 (a)"}]),
                         "sparsgd 0.1.0 (a) and 0.1.0 (b)")

    def test_results_from_before_the_field_are_counted(self):
        self.assertEqual(machine.builds([{"sparsgd": "0.1.0 (a)"}, {"n": 1}, {}]),
                         f"sparsgd 0.1.0 (a) and, for 2 of 3 results, a build from before {machine.NAMED_SINCE} "
                         "(which did not name itself)")
        self.assertEqual(machine.builds([{"n": 1}]), f"a build from before {machine.NAMED_SINCE} (which did not name itself)")

    def test_nothing(self):
        self.assertEqual(machine.builds([]), "no results")


if __name__ == "__main__":
    unittest.main()
