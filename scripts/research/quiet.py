#!/usr/bin/env python3
"""Runs one measurement when nothing else on the machine is busy, and says afterwards whether anything was.

Results that charge measured CPU time (bench comm on the simulated network) rise when other processes
share the cores, their caches and memory bandwidth: at P = 32, n = 25M, density 0.001, 10gbe, an auto
run made beside a test suite took 1.63 ms an exchange where the same run alone took 1.40-1.43
(docs/results/findings.md). A floor (the fastest iteration) does not protect a run from load that lasts
all of it. So a report's run waits until the machine has been quiet, and records how much CPU time other
processes took while it ran (all cores' busy time from /proc/stat, less the run's own from its
rusage); the caller runs it again when that was more than the run can absorb.

  /usr/bin/python3 scripts/research/quiet.py LOADFILE -- COMMAND [ARGS...]
      waits for quiet (up to --max-wait seconds, default 1800), runs COMMAND with this process's
      standard streams, writes LOADFILE (JSON: wall_s, own_cpu_s, others_cpu_s, waited_s, disturbed,
      steal_s: the hypervisor's share of others_cpu_s, uptime_s: the machine's at the start)
      and exits with COMMAND's status.
  import quiet   in a report's Python (scripts/ on sys.path): its thresholds, to state them
"""

import json
import os
import resource
import subprocess
import sys
import time

# Idle, this machine's other processes take about 0.4% of a core. A run may absorb a fixed half
# second (the report's own scripts between runs, a commit) and 2% of a core on top.
ALLOWED_FIXED_S = 0.5
ALLOWED_SHARE = 0.02
QUIET_SAMPLE_S = 2.0
QUIET_SHARE = 0.05  # the most of one core other processes may take in a sample before a run starts


def cpu_counters(stat: str = "/proc/stat") -> list[int]:
    """The all-cores line of /proc/stat: user, nice, system, idle, iowait, irq, softirq, steal (clock ticks)."""
    with open(stat, encoding="ascii") as lines:
        fields = lines.readline().split()
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        raise RuntimeError(f"{stat} does not start with a 'cpu' line of at least 8 counters")
    return [int(v) for v in fields[1:9]]


def cpu_busy_seconds(stat: str = "/proc/stat") -> float:
    """All cores' busy time so far: user, nice, system, irq, softirq and steal (a hypervisor's other
    guests take the core as surely as a process here does)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = cpu_counters(stat)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def steal_seconds(stat: str = "/proc/stat") -> float:
    """All cores' steal time so far: what the hypervisor gave this VM's cores to its other guests. Counted
    in cpu_busy_seconds too; recorded apart, so that a run's record says how much of the disturbance was
    the host's."""
    return cpu_counters(stat)[7] / os.sysconf("SC_CLK_TCK")


def uptime_seconds(path: str = "/proc/uptime") -> float:
    """How long this machine has run: a slow regime may come with hours of runs, or with a fresh one."""
    with open(path, encoding="ascii") as text:
        return float(text.read().split()[0])


def disturbed(others_cpu_s: float, wall_s: float) -> bool:
    return others_cpu_s > ALLOWED_FIXED_S + ALLOWED_SHARE * wall_s


def wait_for_quiet(max_wait_s: float) -> float:
    """Waits until one sample of QUIET_SAMPLE_S shows other processes under QUIET_SHARE of a core, or
    max_wait_s has passed (then the run goes ahead and its record shows the load; 0: no wait, no
    sample). Returns the wait."""
    start = time.monotonic()
    if max_wait_s == 0:
        return 0.0
    while True:
        before = cpu_busy_seconds()
        time.sleep(QUIET_SAMPLE_S)
        if cpu_busy_seconds() - before <= QUIET_SHARE * QUIET_SAMPLE_S or time.monotonic() - start >= max_wait_s:
            return time.monotonic() - start


def main(argv: list[str]) -> int:
    max_wait_s = 1800.0
    if len(argv) >= 2 and argv[0] == "--max-wait":
        try:
            max_wait_s = float(argv[1])
        except ValueError:
            max_wait_s = -1.0
        if not max_wait_s >= 0.0:
            sys.exit(f"quiet.py: --max-wait needs a number of seconds of at least 0, not '{argv[1]}'")
        argv = argv[2:]
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: quiet.py [--max-wait SECONDS] LOADFILE -- COMMAND [ARGS...]")
    load_file, command = argv[0], argv[2:]
    waited_s = wait_for_quiet(max_wait_s)
    own_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy_before = cpu_busy_seconds()
    steal_before = steal_seconds()
    uptime_s = uptime_seconds()
    start = time.monotonic()
    try:
        status = subprocess.run(command, check=False).returncode
    except OSError as error:
        sys.exit(f"quiet.py: cannot run {command[0]}: {error.strerror}")
    wall_s = time.monotonic() - start
    busy_s = cpu_busy_seconds() - busy_before
    steal_s = steal_seconds() - steal_before
    own_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_cpu_s = (own_after.ru_utime - own_before.ru_utime) + (own_after.ru_stime - own_before.ru_stime)
    # Jiffies and rusage round differently: a quiet run can come out a little below zero.
    others_cpu_s = max(0.0, busy_s - own_cpu_s)
    record = {"wall_s": round(wall_s, 3), "own_cpu_s": round(own_cpu_s, 3), "others_cpu_s": round(others_cpu_s, 3),
              "waited_s": round(waited_s, 1), "disturbed": disturbed(others_cpu_s, wall_s),
              "steal_s": round(steal_s, 3), "uptime_s": round(uptime_s)}
    tmp = load_file + ".tmp"
    try:
        with open(tmp, "w", encoding="ascii") as out:
            out.write(json.dumps(record, sort_keys=True) + "\n")
        os.replace(tmp, load_file)
    except OSError as error:
        sys.exit(f"quiet.py: cannot write {load_file}: {error.strerror}")
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
