#!/usr/bin/env python3
"""CTest: `bench comm --interleave` runs two aggregators in one process as each runs alone.

Usage: interleave_check.py SPARSGD. Each case runs `bench comm --aggregator A --interleave B` and A and B
alone with the same options, and checks that the interleaved run reports both (B's document under
"interleave", with nothing under its own), that each verified against its serial reference (so neither
disturbed the other's residual or sums), and that each one's bytes and messages per worker are those of
its run alone: the transport is shared, so a count that leaked from one into the other would show. Times
are the machine's and are not compared. Also: the text report shows both runs, and auto interleaved
with a fixed aggregator settles while the fixed one reports no decision.
"""
import json
import subprocess
import sys


def fail(message):
    print(f"interleave_check: {message}", file=sys.stderr)
    sys.exit(1)


def bench(cli, *options):
    run = subprocess.run([cli, "bench", "comm", *options], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"bench comm {' '.join(options)} exited {run.returncode}: {run.stderr.strip()}")
    return run.stdout


def verified(doc, label):
    if doc.get("matches_reference") is not True:
        fail(f"{label}: {doc['aggregator']} did not match its reference")
    if not doc.get("conservation_rel_error", 1.0) < 1e-5:
        fail(f"{label}: {doc['aggregator']} did not conserve gradient mass ({doc.get('conservation_rel_error')})")


def check_pair(cli, first, second, options):
    label = f"{first} interleaved with {second} ({' '.join(options)})"
    both = json.loads(bench(cli, *options, "--aggregator", first, "--interleave", second, "--json"))
    partner = both.get("interleave")
    if not isinstance(partner, dict):
        fail(f"{label}: no report under 'interleave'")
    if partner.get("interleave") is not None:
        fail(f"{label}: the interleaved run's report holds another")
    for doc, name in ((both, first), (partner, second)):
        if doc["aggregator"] != name:
            fail(f"{label}: a report names {doc['aggregator']} where {name} was expected")
        verified(doc, label)
        if "--network" in options and len(doc["sim_comm_ms_per_iteration"]) != doc["iters"]:
            fail(f"{label}: {name} has {len(doc['sim_comm_ms_per_iteration'])} timed exchanges, not {doc['iters']}")
        if name == "auto":
            continue  # its trials follow the machine's clock, so its traffic differs from run to run
        alone = json.loads(bench(cli, *options, "--aggregator", name, "--json"))
        verified(alone, f"{name} alone")
        for key in ("bytes_sent_per_worker", "messages_per_worker"):
            if doc[key] != alone[key]:
                fail(f"{label}: {name}'s {key} {doc[key]} differs from its run alone, {alone[key]}")
    return both, partner


def main():
    if len(sys.argv) != 2:
        fail("usage: interleave_check.py SPARSGD")
    cli = sys.argv[1]
    # P = 5 (no power of two), gradients with error feedback, on a simulated network and without one.
    gradients = ["--workers", "5", "--n", "20011", "--density", "0.01", "--iters", "6"]
    check_pair(cli, "oktopk", "allgather", gradients + ["--network", "10gbe"])
    check_pair(cli, "dense", "gtopk-rd", gradients)
    # Drawn selections, where the two draw differently (randk-shared's indices are the same on every worker).
    drawn = ["--selections", "drawn", "--workers", "7", "--n", "30011", "--density", "0.01", "--iters", "3",
             "--network", "10gbe"]
    check_pair(cli, "randk-shared", "oktopk", drawn)
    # auto beside the fixed aggregator it is compared with: it settles, and only it reports a decision.
    both, partner = check_pair(cli, "auto", "gtopk-rd", ["--workers", "4", "--n", "50021", "--density", "0.01",
                                                         "--network", "10gbe", "--iters", "18"])
    if not both["auto"] or not both["auto"]["settled"]:
        fail("auto interleaved with gtopk-rd did not settle in 18 exchanges")
    if partner["auto"] is not None:
        fail("gtopk-rd interleaved with auto reports an auto decision")
    text = bench(cli, *gradients, "--aggregator", "gtopk-rd", "--interleave", "allgather")
    if "interleaved with the run above" not in text or text.count("matches reference: yes") != 2:
        fail(f"the text report does not show both verified runs:\n{text}")
    print("interleave_check: 4 pairs interleaved, each verified and counted as alone")


if __name__ == "__main__":
    main()
