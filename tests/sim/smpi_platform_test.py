#!/usr/bin/env python3
"""Checks scripts/smpi_platform.py: the SimGrid platform it writes is a cluster of exactly P hosts
whose routes cost alpha + bytes * beta (latency alpha/2 on each of the two private links a route
crosses, bandwidth 1/beta, SPLITDUPLEX), no backbone and a loopback that never limits a flow, and
a hostfile naming the same P hosts; the switch topology adds one SHARED fabric of FABRIC_PORTS host
rates, the tree racks of RACK_SIZE hosts joined by uplinks of UPLINK_RATIO host rates, a route (up
and down) for every ordered pair of racks. Usage: smpi_platform_test.py SOURCE_DIR"""

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
        # A route crosses the source's and the destination's private links and nothing else: no
        # backbone (one that never limits would only slow SimGrid's solver down).
        self.assertAlmostEqual(2 * seconds(c["lat"]), alpha, delta=1e-12)
        self.assertAlmostEqual(bytes_per_second(c["bw"]), 1.0 / beta, delta=1e-3)
        self.assertFalse({"bb_bw", "bb_lat", "bb_sharing_policy"} & c.keys(), c)
        self.assertEqual(seconds(c["loopback_lat"]), 0.0)
        self.assertGreaterEqual(bytes_per_second(c["loopback_bw"]), 100.0 / beta)

    def test_paper_network_at_several_sizes(self):
        for hosts in (1, 4, 8, 32, 128, 256, 1000):
            with self.subTest(hosts=hosts):
                self.check(hosts, 0.436e-3, 9e-9, ["--network", "paper-1gbe"])

    def test_explicit_alpha_beta(self):
        self.check(7, 50e-6, 8e-9, ["--alpha", "50e-6", "--beta", "8e-9"])

    def test_switch_shares_one_fabric(self):
        for hosts, ports in ((4, 64), (256, 64), (100, 8)):
            with self.subTest(hosts=hosts, ports=ports):
                result, out = self.generate("--hosts", str(hosts), "--network", "paper-1gbe", "--topology", "switch",
                                            "--fabric-ports", str(ports))
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout.strip(), str(out / f"platform-switch-{hosts}.xml"))
                c = ET.parse(out / f"platform-switch-{hosts}.xml").getroot().find("cluster").attrib
                self.assertEqual(expand_radical(c["radical"]), list(range(hosts)))
                self.assertEqual(c["bb_sharing_policy"], "SHARED")
                self.assertAlmostEqual(bytes_per_second(c["bb_bw"]), ports / 9e-9, delta=1e-3 * ports / 9e-9)
                self.assertEqual(seconds(c["bb_lat"]), 0.0)
                self.assertAlmostEqual(2 * seconds(c["lat"]), 0.436e-3, delta=1e-12)

    def test_tree_racks_and_uplinks(self):
        for hosts, rack, ratio in ((64, 32, 10.0), (70, 32, 10.0), (9, 4, 2.5), (3, 32, 10.0)):
            with self.subTest(hosts=hosts, rack=rack):
                result, out = self.generate("--hosts", str(hosts), "--network", "paper-1gbe", "--topology", "tree",
                                            "--rack-size", str(rack), "--uplink-ratio", str(ratio))
                self.assertEqual(result.returncode, 0, result.stderr)
                zone = ET.parse(out / f"platform-tree-{hosts}.xml").getroot().find("zone")
                racks = zone.findall("cluster")
                self.assertEqual(len(racks), -(-hosts // rack))
                covered = []
                for r, c in enumerate(racks):
                    covered += expand_radical(c.get("radical"))
                    self.assertLessEqual(len(expand_radical(c.get("radical"))), rack)
                    self.assertFalse({"bb_bw", "bb_lat", "bb_sharing_policy"} & c.attrib.keys(), c.attrib)
                    self.assertEqual(c.get("router_id"), f"rack-{r}-router")
                self.assertEqual(covered, list(range(hosts)))
                self.assertEqual((out / f"hostfile-{hosts}.txt").read_text().split(),
                                 [f"node-{i}.sparsgd" for i in range(hosts)])
                uplinks = {l.get("id"): l for l in zone.findall("link")}
                self.assertEqual(set(uplinks), {f"uplink-{r}" for r in range(len(racks))})
                for link in uplinks.values():
                    self.assertAlmostEqual(bytes_per_second(link.get("bandwidth")), ratio / 9e-9, delta=1e-3 * ratio / 9e-9)
                    self.assertEqual(seconds(link.get("latency")), 0.0)
                routes = {(z.get("src"), z.get("dst")): [(l.get("id"), l.get("direction")) for l in z.findall("link_ctn")]
                          for z in zone.findall("zoneRoute")}
                expected = {(f"rack-{a}", f"rack-{b}"): [(f"uplink-{a}", "UP"), (f"uplink-{b}", "DOWN")]
                            for a in range(len(racks)) for b in range(len(racks)) if a != b}
                self.assertEqual(routes, expected)

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
