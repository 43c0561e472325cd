#!/usr/bin/env python3
"""CTest: `bench comm --aggregator auto --json` with timed trials settles by auto's rule.

Usage: auto_trials_check.py SPARSGD [bench comm options...]. Runs `SPARSGD bench comm OPTIONS`, reads its
JSON and checks what the trials did against the rule in include/sparsgd/collectives/auto_select.hpp:
two warm-ups a candidate, at least two timed runs each (more where fewer than four are plausible: as
many as the 16 exchanges four candidates would take hold with one round to spare), contested rounds
only within those 16 exchanges, each candidate's fastest no slower than its second-fastest, the choice
the cheapest closed form among those within the 10% tie of the fastest, and every exchange matching the
reference of the aggregator that made it. The times themselves are the machine's; only the rule is
checked, so the test holds however many contested rounds a run needs.
"""
import json
import subprocess
import sys

WARMUP_ROUNDS = 2
TIMED_ROUNDS = 2  # bench comm's default --auto-trials
CANDIDATES = 4


def fail(message):
    print(f"auto_trials_check: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) < 2:
        fail("usage: auto_trials_check.py SPARSGD [bench comm options...]")
    run = subprocess.run([sys.argv[1], "bench", "comm", *sys.argv[2:]], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"bench comm exited {run.returncode}: {run.stderr.strip()}")
    result = json.loads(run.stdout)
    print(run.stdout.strip())
    auto = result.get("auto")
    if not auto:
        fail("no auto decision in the JSON")
    if result.get("matches_reference") is not True:
        fail("an exchange did not match the reference of its aggregator")
    if not auto["settled"]:
        fail("auto did not settle (more --iters?)")
    trials = auto["trials"]
    count = len(trials)
    if count < 2:
        fail(f"{count} candidate: nothing was timed, so this run does not test the trials")
    if auto["trial_exchanges"] - auto["timed_exchanges"] != WARMUP_ROUNDS * count:
        fail(f"{auto['trial_exchanges'] - auto['timed_exchanges']} untimed exchanges, not {WARMUP_ROUNDS} per candidate")
    budget = CANDIDATES * (WARMUP_ROUNDS + TIMED_ROUNDS)
    rounds = max(TIMED_ROUNDS, budget // count - 1 - WARMUP_ROUNDS)
    if auto.get("timed_rounds") != rounds:
        fail(f"timed rounds {auto.get('timed_rounds')}, but {count} candidates within a budget of {budget} get {rounds}")
    if not rounds * count <= auto["timed_exchanges"]:
        fail(f"{auto['timed_exchanges']} timed exchanges: fewer than {rounds} per candidate")
    if auto["trial_exchanges"] > budget:
        fail(f"{auto['trial_exchanges']} trial exchanges: over the budget of {budget}")
    if sum(t["runs"] for t in trials) != auto["timed_exchanges"]:
        fail("the candidates' runs do not add up to the timed exchanges")
    if auto["first_settled_after"] != auto["trial_exchanges"]:
        fail(f"settled after {auto['first_settled_after']} exchanges, but the trials took {auto['trial_exchanges']}")
    for t in trials:
        if t["runs"] < rounds or t["second_ms"] is None or t["second_ms"] < t["measured_ms"]:
            fail(f"{t['aggregator']}: {t['runs']} runs, fastest {t['measured_ms']}, second {t['second_ms']}")
    leader = min(trials, key=lambda t: t["measured_ms"])  # the first of equals
    # Within the tie tolerance the cheaper closed form wins, unless the leader beat it twice.
    want = next(t["aggregator"] for t in trials
                if t is leader or (t["measured_ms"] <= leader["measured_ms"] * (1 + auto["tie_tolerance"])
                                   and not leader["second_ms"] <= t["measured_ms"]))
    if auto["choice"] != want:
        fail(f"settled on {auto['choice']}, but the rule gives {want}")
    # The rounds past the timed ones ran only the contested; they are over when none is left or the
    # budget would not hold another round of them: the leader's second-fastest is then under every
    # other candidate's fastest, or the exchanges left are fewer than the contested.
    contested = [t for t in trials if t is leader or t["measured_ms"] < leader["second_ms"]]
    left = budget - auto["trial_exchanges"]
    if len(contested) >= 2 and len(contested) <= left:
        fail(f"settled with {len(contested)} candidates contested and {left} trial exchanges left")
    print(f"auto_trials_check: {count} candidates, {auto['timed_exchanges']} timed exchanges, settled on {auto['choice']}")


if __name__ == "__main__":
    main()
