#!/usr/bin/env python3
"""Checks scripts/smpi_platform.py: the SimGrid platform it writes is a cluster of exactly P hosts
whose routes cost alpha + bytes * beta (latency alpha/2 on each of the two private links a route
crosses, bandwidth 1/beta, SPLITDUPLEX), with a backbone and loopback that never limit a flow, and
a hostfile naming the same P hosts. Usage: smpi_platform_test.py SOURCE_DIR"""

import pathlib
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

SOURCE = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
SCRIPT = SOURCE / "scripts" / "smpi_platform.py"


def seconds(text):
    assert text.endswith("s"), text
    return float(text[:-1])


def bytes_per_second(text):
    assert text.endswith("Bps"), text  # bytes (Bps), not bits (bps)
    return float(text[:-3])


def expand_radical(radical):
    hosts = []
    for part in radical.split(","):
        low, _, high = part.partition("-")
        hosts.extend(range(int(low), int(high or low) + 1))
    return hosts


class PlatformTest(unittest.TestCase):
    def generate(self, *args):
        directory = tempfile.TemporaryDirectory(prefix="smpi-platform-test-")
        self.addCleanup(directory.cleanup)
        out = directory.name
        result = subprocess.run([sys.executable, str(SCRIPT), *args, "--out", out], capture_output=True, text=True)
        return result, pathlib.Path(out)

    def check(self, hosts, alpha, beta, args):
        result, out = self.generate("--hosts", str(hosts), *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        root = ET.parse(out / f"platform-{hosts}.xml").getroot()
        self.assertEqual(root.tag, "platform")
        self.assertEqual(root.get("version"), "4.1")
        clusters = root.findall("cluster")
        self.assertEqual(len(clusters), 1)
        c = clusters[0].attrib
        indices = expand_radical(c["radical"])
        self.assertEqual(indices, list(range(hosts)))
        names = [f"{c['prefix']}{i}{c['suffix']}" for i in indices]
        self.assertEqual((out / f"hostfile-{hosts}.txt").read_text().split(), names)
        self.assertEqual(c["sharing_policy"], "SPLITDUPLEX")
        # A route crosses the source's and the destination's private links and the backbone.
        self.assertAlmostEqual(2 * seconds(c["lat"]) + seconds(c["bb_lat"]), alpha, delta=1e-12)
        self.assertAlmostEqual(bytes_per_second(c["bw"]), 1.0 / beta, delta=1e-3)
        self.assertEqual(c["bb_sharing_policy"], "FATPIPE")
        self.assertGreaterEqual(bytes_per_second(c["bb_bw"]), 100.0 / beta)
        self.assertEqual(seconds(c["loopback_lat"]), 0.0)
        self.assertGreaterEqual(bytes_per_second(c["loopback_bw"]), 100.0 / beta)

    def test_paper_network_at_several_sizes(self):
        for hosts in (1, 4, 8, 32, 128, 256, 1000):
            with self.subTest(hosts=hosts):
                self.check(hosts, 0.436e-3, 9e-9, ["--network", "paper-1gbe"])

    def test_explicit_alpha_beta(self):
        self.check(7, 50e-6, 8e-9, ["--alpha", "50e-6", "--beta", "8e-9"])

    def test_rejects_bad_input(self):
        for args in (["--hosts", "0", "--network", "paper-1gbe"], ["--hosts", "4"],
                     ["--hosts", "4", "--alpha", "1e-3"], ["--hosts", "4", "--alpha", "1e-3", "--beta", "0"],
                     ["--hosts", "4", "--network", "paper-1gbe", "--alpha", "1e-3", "--beta", "1e-9"]):
            with self.subTest(args=args):
                result, _ = self.generate(*args)
                self.assertEqual(result.returncode, 2, result.stdout)
                self.assertIn("error", result.stderr)


if __name__ == "__main__":
    unittest.main()
