#!/usr/bin/env python3
"""Writes a SimGrid platform (XML) and an SMPI hostfile for a cluster of P hosts whose network is the
alpha-beta model of sparsgd's cost model (src/sim/cost_model.cpp): a message of b bytes between
any two hosts takes alpha + b * beta, and every host can send and receive at full rate at once.

  scripts/smpi_platform.py --hosts P [--alpha SECONDS --beta SECONDS_PER_BYTE | --network paper-1gbe]
                           --out DIR          -> DIR/platform-P.xml, DIR/hostfile-P.txt

How the XML gets there (SimGrid 3.32 <cluster>):
- Each host has one private link, SPLITDUPLEX: SimGrid makes it two links (UP and DOWN) with the
  given bandwidth each, so a host sending and receiving at the same time (the pairwise exchanges of
  gtopk-rd, the rings) gets the full rate both ways, as full-duplex Ethernet does.
- A route from host a to host b is a's UP link, the backbone, b's DOWN link. Latencies add along it,
  so each private link gets alpha / 2 and the backbone none. The backbone is FATPIPE (every flow gets
  its whole bandwidth, no sharing) at 1000 times the host bandwidth: it never limits a flow.
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


def platform_xml(hosts, alpha, beta):
    """The platform document for `hosts` hosts, alpha seconds and beta seconds per byte."""
    if hosts < 1:
        raise ValueError("--hosts must be at least 1")
    if not (alpha >= 0.0) or not (beta > 0.0):
        raise ValueError("alpha must be >= 0 and beta > 0")
    bandwidth = 1.0 / beta  # bytes per second
    attributes = {
        "id": "sparsgd-cluster",
        "prefix": HOST_PREFIX,
        "suffix": HOST_SUFFIX,
        "radical": f"0-{hosts - 1}",
        "speed": "1Gf",  # unused: the runs do not simulate computation
        "bw": f"{bandwidth!r}Bps",
        "lat": f"{alpha / 2.0!r}s",
        "sharing_policy": "SPLITDUPLEX",
        "bb_bw": f"{1000.0 * bandwidth!r}Bps",
        "bb_lat": "0s",
        "bb_sharing_policy": "FATPIPE",
        "loopback_bw": f"{1000.0 * bandwidth!r}Bps",
        "loopback_lat": "0s",
    }
    cluster = " ".join(f"{key}={quoteattr(value)}" for key, value in attributes.items())
    return (
        "<?xml version='1.0'?>\n"
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        f"<!-- {hosts} hosts; alpha {alpha!r} s, beta {beta!r} s/byte (written by scripts/smpi_platform.py) -->\n"
        '<platform version="4.1">\n'
        f"  <cluster {cluster}/>\n"
        "</platform>\n"
    )


def hostfile(hosts):
    return "".join(name + "\n" for name in host_names(hosts))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, required=True, help="number of hosts P (one MPI rank each)")
    parser.add_argument("--network", choices=sorted(NETWORKS), help="a named network of the cost model")
    parser.add_argument("--alpha", type=float, help="latency per message, seconds")
    parser.add_argument("--beta", type=float, help="seconds per byte (1 / bandwidth)")
    parser.add_argument("--out", required=True, help="directory for platform-P.xml and hostfile-P.txt")
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
        xml = platform_xml(args.hosts, alpha, beta)
    except ValueError as e:
        parser.error(str(e))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"platform-{args.hosts}.xml").write_text(xml)
    (out / f"hostfile-{args.hosts}.txt").write_text(hostfile(args.hosts))
    print(out / f"platform-{args.hosts}.xml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
