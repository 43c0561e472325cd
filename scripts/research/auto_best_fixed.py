#!/usr/bin/env python3
"""The fixed aggregator with the smallest median over the counted exchanges among the runs made so far
at one point of a round of the auto sweep (scripts/research/report-auto.sh: auto then runs beside it, with
bench comm --interleave). Prints its name, or nothing where no fixed run has a result.

  /usr/bin/python3 scripts/research/auto_best_fixed.py RUN_PREFIX SUFFIX FIRST ITERS
      RUN_PREFIX: the point's runs without the aggregator (runs/auto-scratch/ROUND/P-N-DENSITY-NETWORK);
      SUFFIX: "" or ".drawn"; FIRST, ITERS: the counted exchanges, ITERS - 1 from FIRST on.
"""
import json
import pathlib
import statistics
import sys

FIXED = ("gtopk-rd", "oktopk", "allgather", "dense")


def best_fixed(prefix: str, suffix: str, first: int, iters: int):
    medians = {}
    for agg in FIXED:
        f = pathlib.Path(f"{prefix}-{agg}{suffix}.json")
        if f.exists():
            counted = json.loads(f.read_text())["sim_comm_ms_per_iteration"][first:first + iters - 1]
            if counted:
                medians[agg] = statistics.median(counted)
    return min(medians, key=medians.get) if medians else None


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    best = best_fixed(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    if best:
        print(best)
