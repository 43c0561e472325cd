"""auto's settlement over recorded trials, as src/collectives/auto_select.cpp's settled_choice makes it:
the fastest trial, except that a candidate earlier in the closed forms' order (the order the trials are
recorded in) whose fastest is within `tie` of the fastest's wins the tie, unless (`unless_beaten_twice`,
the rule since session 40) the fastest's second-fastest run is at or under that candidate's fastest.
A run's choice is a function of its trials alone, so scripts/report-auto.sh and
scripts/auto-tie-replay.py settle recorded runs again with it."""


def settled_choice(trials, tie, unless_beaten_twice=True):
    timed = [t for t in trials if t["measured_ms"] is not None]
    leader = min(timed, key=lambda t: t["measured_ms"])  # the first of equals
    beaten_twice = lambda t: leader["second_ms"] is not None and leader["second_ms"] <= t["measured_ms"]
    return next(t["aggregator"] for t in timed
                if t is leader or (t["measured_ms"] <= leader["measured_ms"] * (1 + tie)
                                   and not (unless_beaten_twice and beaten_twice(t))))
