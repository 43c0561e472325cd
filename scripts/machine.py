#!/usr/bin/env python3
"""What the report scripts record about the machine a run came from: its CPU model, as the kernel
names it (/proc/cpuinfo's first "model name"), or "?" where there is none (a non-x86 kernel may
not say). Results that charge measured CPU time depend on it, so every report names it.

  /usr/bin/python3 scripts/machine.py        prints the CPU model (for a run's .machine file)
  from machine import cpu_model              in a report's Python (scripts/ on sys.path)
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


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(f"usage: {sys.argv[0]} (no arguments): prints this machine's CPU model")
    print(cpu_model())
