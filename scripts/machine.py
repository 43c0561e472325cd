#!/usr/bin/env python3
"""What the report scripts record about where a run came from: the machine's CPU model, as the
kernel names it (/proc/cpuinfo's first "model name"), or "?" where there is none (a non-x86 kernel
may not say), and the build of sparsgd that made it (the "sparsgd" field of every JSON result).
Results that charge measured CPU time depend on the CPU, and every figure on the code, so every
report names both.

  /usr/bin/python3 scripts/machine.py        prints the CPU model (for a run's .machine file)
  from machine import cpu_model, builds      in a report's Python (scripts/ on sys.path)
"""

import sys


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip() or "?"
    except OSError:
        pass
    return "?"


# The commit from which sparsgd's JSON results name their build.
NAMED_SINCE = "98d8f06"


def builds(results) -> str:
    """The builds that made `results` (parsed JSON results), as a report's phrase: "sparsgd 0.1.0
    (3d41750ab12c)", several joined by "and", and how many results came from a build too old to say."""
    named = sorted({r["sparsgd"] for r in results if isinstance(r, dict) and "sparsgd" in r})
    unnamed = sum(1 for r in results if not (isinstance(r, dict) and "sparsgd" in r))
    phrase = "sparsgd " + " and ".join(named) if named else ""
    if unnamed:
        old = f"a build from before {NAMED_SINCE} (which did not name itself)"
        phrase += (f" and, for {unnamed} of {len(results)} results, " + old) if named else old
    return phrase or "no results"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(f"usage: {sys.argv[0]} (no arguments): prints this machine's CPU model")
    print(cpu_model())
