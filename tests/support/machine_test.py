#!/usr/bin/env python3
"""Checks scripts/machine.py, which names the CPU in every report that charges measured CPU time:
the first "model name" of a cpuinfo file, "?" where the file is missing or names none, and its
command prints that one line. Usage: machine_test.py SOURCE_DIR"""

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


if __name__ == "__main__":
    unittest.main()
