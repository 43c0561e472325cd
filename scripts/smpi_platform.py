#!/usr/bin/env python3
"""Writes a SimGrid platform (XML) and an SMPI hostfile for a cluster of P hosts whose network is the
alpha-beta model of sparsgd's cost model (src/sim/cost_model.cpp): a message of b bytes between
any two hosts takes alpha + b * beta, and every host can send and receive at full rate at once.

  scripts/smpi_platform.py --hosts P [--alpha SECONDS --beta SECONDS_PER_BYTE | --network paper-1gbe]
                           [--topology flat|switch|tree] --out DIR
                           -> DIR/platform-P.xml (flat) or DIR/platform-TOPOLOGY-P.xml, DIR/hostfile-P.txt

Topologies (every route costs the same latency alpha, so that only bandwidth sharing departs from
the closed form):
- flat (default): what the closed form assumes; described below.
- switch: every host hangs off one switch whose fabric is shared by every flow crossing it (SimGrid
  SHARED backbone) and carries at most FABRIC_PORTS (default 64) hosts' line rate in total: a
  non-blocking switch up to that many hosts sending at once, oversubscribed beyond.
- tree: two levels. Racks of RACK_SIZE hosts (default 32) on a non-blocking top-of-rack switch, each
  rack with one uplink (split-duplex, UPLINK_RATIO (default 10) hosts' line rate: a 10 Gbit/s uplink
  for 32 hosts at 1 Gbit/s, 3.2:1 oversubscribed) to a core that never limits a flow. Traffic between
  racks shares the two racks' uplinks; within a rack it is as flat.

How the XML gets there (SimGrid 3.32 <cluster>):
- Each host has one private link, SPLITDUPLEX: SimGrid makes it two links (UP and DOWN) with the
  given bandwidth each, so a host sending and receiving at the same time (the pairwise exchanges of
  gtopk-rd, the rings) gets the full rate both ways, as full-duplex Ethernet does.
- A route from host a to host b is a's UP link, then b's DOWN link (flat, and within a rack of tree),
  or a's UP link, the switch fabric, b's DOWN link (switch). Latencies add along it, so each private
  link gets alpha / 2 and the fabric none. There is no backbone where none limits: a backbone that
  never limits (a FATPIPE at 1000x the host rate, as this script wrote before) changes no result
  (Ok-Topk at P = 64 and 128 without compute: the same times to 1e-6), but it is a constraint that
  every flow shares, so SimGrid's max-min solver re-solved every flow in flight at every flow's start
  and end: 118 s against 11 s of real time at P = 128 (findings.md).
- A loopback link (fast, no latency) carries a rank's messages to itself (SMPI's ring allreduce
  begins with one), which on a real machine are memory copies, not network traffic.
- The bandwidth is exactly 1/beta bytes per second. SimGrid's own corrections (latency and bandwidth
  factors of its TCP models, SMPI's piecewise factors, cross traffic) are switched off on the smpirun
  command line, not here: see scripts/report-smpi.sh.
Python standard library only.
"""

import argparse
import pathlib
import sys
from xml.sax.saxutils import quoteattr

from atomic_file import write_atomically

# The cost model's named networks (src/transport/network_model.cpp): alpha in s, beta in s/byte.
NETWORKS = {
    "paper-1gbe": (0.436e-3, 9e-9),  # the gTop-k authors' fit of their 1 Gbps cluster
    "1gbe": (50e-6, 8.0 / 1e9),
    "10gbe": (20e-6, 8.0 / 10e9),
}

HOST_PREFIX = "node-"
HOST_SUFFIX = ".sparsgd"


def host_names(hosts):
    return [f"{HOST_PREFIX}{i}{HOST_SUFFIX}" for i in range(hosts)]


def cluster_attributes(cluster_id, first, last, alpha, bandwidth, fabric_bw=None):
    """A <cluster>'s attributes; fabric_bw: a SHARED backbone of that many bytes per second that every
    flow between two of its hosts crosses (the switch), or None for none (private links only)."""
    attributes = {
        "id": cluster_id,
        "prefix": HOST_PREFIX,
        "suffix": HOST_SUFFIX,
        "radical": f"{first}-{last}",
        # With smpi/host-speed 1Gf (scripts/smpi-run.sh --compute), a second of the CPU time a rank
        # measured between two MPI calls is a second on this host; unused otherwise.
        "speed": "1Gf",
        "bw": f"{bandwidth!r}Bps",
        "lat": f"{alpha / 2.0!r}s",
        "sharing_policy": "SPLITDUPLEX",
        "loopback_bw": f"{1000.0 * bandwidth!r}Bps",
        "loopback_lat": "0s",
    }
    if fabric_bw is not None:
        attributes.update({"bb_bw": f"{fabric_bw!r}Bps", "bb_lat": "0s", "bb_sharing_policy": "SHARED"})
    return attributes


def element(name, attributes, children=None, indent="  "):
    text = " ".join(f"{key}={quoteattr(value)}" for key, value in attributes.items())
    if not children:
        return f"{indent}<{name} {text}/>\n"
    return f"{indent}<{name} {text}>\n" + "".join(children) + f"{indent}</{name}>\n"


TOPOLOGIES = ("flat", "switch", "tree")


def platform_xml(hosts, alpha, beta, topology="flat", fabric_ports=64, rack_size=32, uplink_ratio=10.0):
    """The platform document for `hosts` hosts, alpha seconds and beta seconds per byte."""
    if hosts < 1:
        raise ValueError("--hosts must be at least 1")
    if not (alpha >= 0.0) or not (beta > 0.0):
        raise ValueError("alpha must be >= 0 and beta > 0")
    if topology not in TOPOLOGIES:
        raise ValueError(f"unknown topology {topology!r} (expected one of {', '.join(TOPOLOGIES)})")
    if fabric_ports < 1 or rack_size < 1 or not (uplink_ratio > 0.0):
        raise ValueError("--fabric-ports and --rack-size must be at least 1 and --uplink-ratio above 0")
    bandwidth = 1.0 / beta  # bytes per second
    head = (
        "<?xml version='1.0'?>\n"
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        f"<!-- {hosts} hosts, {topology}; alpha {alpha!r} s, beta {beta!r} s/byte (written by scripts/smpi_platform.py) -->\n"
        '<platform version="4.1">\n'
    )
    if topology in ("flat", "switch"):
        fabric = None if topology == "flat" else fabric_ports * bandwidth
        cluster = cluster_attributes("sparsgd-cluster", 0, hosts - 1, alpha, bandwidth, fabric)
        return head + element("cluster", cluster) + "</platform>\n"
    # tree: one cluster per rack inside a zone whose routes between racks cross both uplinks.
    racks = (hosts + rack_size - 1) // rack_size
    children = []
    for r in range(racks):
        first, last = r * rack_size, min(hosts, (r + 1) * rack_size) - 1
        attributes = cluster_attributes(f"rack-{r}", first, last, alpha, bandwidth)
        attributes["router_id"] = f"rack-{r}-router"
        children.append(element("cluster", attributes, indent="    "))
    for r in range(racks):
        children.append(element("link", {"id": f"uplink-{r}", "bandwidth": f"{uplink_ratio * bandwidth!r}Bps",
                                         "latency": "0s", "sharing_policy": "SPLITDUPLEX"}, indent="    "))
    for a in range(racks):
        for b in range(racks):
            if a == b:
                continue
            links = [element("link_ctn", {"id": f"uplink-{a}", "direction": "UP"}, indent="      "),
                     element("link_ctn", {"id": f"uplink-{b}", "direction": "DOWN"}, indent="      ")]
            children.append(element("zoneRoute", {"src": f"rack-{a}", "dst": f"rack-{b}", "gw_src": f"rack-{a}-router",
                                                  "gw_dst": f"rack-{b}-router", "symmetrical": "NO"}, links,
                                    indent="    "))
    return head + element("zone", {"id": "sparsgd-tree", "routing": "Full"}, children) + "</platform>\n"


def platform_name(hosts, topology):
    return f"platform-{hosts}.xml" if topology == "flat" else f"platform-{topology}-{hosts}.xml"


def hostfile(hosts):
    return "".join(name + "\n" for name in host_names(hosts))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, required=True, help="number of hosts P (one MPI rank each)")
    parser.add_argument("--network", choices=sorted(NETWORKS), help="a named network of the cost model")
    parser.add_argument("--alpha", type=float, help="latency per message, seconds")
    parser.add_argument("--beta", type=float, help="seconds per byte (1 / bandwidth)")
    parser.add_argument("--topology", choices=TOPOLOGIES, default="flat", help="see the module's help")
    parser.add_argument("--fabric-ports", type=int, default=64, help="switch: the fabric's capacity in host line rates")
    parser.add_argument("--rack-size", type=int, default=32, help="tree: hosts per rack")
    parser.add_argument("--uplink-ratio", type=float, default=10.0, help="tree: a rack uplink's rate in host line rates")
    parser.add_argument("--out", required=True, help="directory for the platform and hostfile-P.txt")
    args = parser.parse_args(argv)
    if args.network:
        if args.alpha is not None or args.beta is not None:
            parser.error("give --network or --alpha/--beta, not both")
        alpha, beta = NETWORKS[args.network]
    elif args.alpha is not None and args.beta is not None:
        alpha, beta = args.alpha, args.beta
    else:
        parser.error("give --network NAME or both --alpha and --beta")
    try:
        xml = platform_xml(args.hosts, alpha, beta, args.topology, args.fabric_ports, args.rack_size, args.uplink_ratio)
    except ValueError as e:
        parser.error(str(e))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # Whole files only, swapped in by a rename: another sweep may be starting smpirun on the same ones.
    for name, text in ((platform_name(args.hosts, args.topology), xml), (f"hostfile-{args.hosts}.txt", hostfile(args.hosts))):
        write_atomically(out / name, text)
    print(out / platform_name(args.hosts, args.topology))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
