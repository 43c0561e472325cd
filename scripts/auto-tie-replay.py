#!/usr/bin/env python3
"""Replays auto's settlement rules over recorded sweep runs (issue 17; findings.md, session 40).

  /usr/bin/python3 scripts/auto-tie-replay.py SWEEP_DIR [SWEEP_DIR ...]
      e.g. docs/results/comm/auto-sessions31-34 docs/results/comm/auto-sessions35-38

An auto run's choice is a function of its recorded trial times alone, so each settled auto run
(ROUND/POINT-auto[.drawn].json) is settled again under three rules:
  tie      within the tie tolerance (10%) the cheaper closed form wins (the rule up to session 39);
  twice    the same, unless the fastest candidate beat it twice (its second-fastest at or under the
           other's fastest: the rule from session 40);
  clock    the fastest trial, no tie.
Each choice is scored by the fixed run of that aggregator at the same point and round (median of the
counted exchanges, 17-26) over the best fixed run among auto's candidates there. Prints the runs where
the rules disagree and, for each rule, the summed excess and how many choices were over 1.05x.
Runs whose candidates did not all run alone in that round are left out.
"""
import collections
import json
import pathlib
import statistics
import sys

from auto_settle import settled_choice

FIRST, LAST = 17, 27
TIE = 0.10


def choices(trials):
    return {"tie": settled_choice(trials, TIE, unless_beaten_twice=False),
            "twice": settled_choice(trials, TIE),
            "clock": settled_choice(trials, 0.0, unless_beaten_twice=False)}


def main(folders):
    totals = collections.Counter()
    for folder in map(pathlib.Path, folders):
        for run in sorted(folder.glob("*/*-auto*.json")):
            auto = json.loads(run.read_text()).get("auto")
            if not auto or not auto.get("settled") or len(auto.get("trials", [])) < 2:
                continue
            suffix = ".drawn" if run.name.endswith(".drawn.json") else ""
            stem = run.name[: -len(f"-auto{suffix}.json")]
            fixed = {}
            for t in auto["trials"]:
                alone = run.with_name(f"{stem}-{t['aggregator']}{suffix}.json")
                if alone.exists():
                    spans = json.loads(alone.read_text())["sim_comm_ms_per_iteration"][FIRST:LAST]
                    fixed[t["aggregator"]] = statistics.median(spans)
            if len(fixed) < len(auto["trials"]):
                continue
            best = min(fixed.values())
            picked = choices(auto["trials"])
            excess = {rule: fixed[name] / best for rule, name in picked.items()}
            if len(set(picked.values())) > 1:
                print(f"{folder.name}/{run.parent.name}/{run.name}: "
                      + ", ".join(f"{rule} {picked[rule]} {excess[rule]:.2f}x" for rule in picked))
            totals["runs"] += 1
            for rule, x in excess.items():
                totals[f"{rule} summed excess"] += x - 1
                totals[f"{rule} over 1.05x"] += x > 1.05
    print(f"{totals['runs']} settled auto runs replayed")
    for rule in ("tie", "twice", "clock"):
        print(f"  {rule}: summed excess {totals[f'{rule} summed excess']:.3f}, over 1.05x: {totals[f'{rule} over 1.05x']}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
