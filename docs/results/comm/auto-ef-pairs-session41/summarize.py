"""Per variant and round: median / floor of the counted exchanges (17-26) of simulated aggregation time (ms),
the slowest worker's aggregation CPU (median, ms), auto's choice; and each variant's ratio to BASE (default fix)
round by round."""
import json, pathlib, statistics, sys, collections
d = pathlib.Path(sys.argv[1]); rows = collections.defaultdict(dict)
for f in sorted(d.glob('*.json')):
    r, v = f.stem.split('-', 1)
    j = json.loads(f.read_text())
    t = j['sim_comm_ms_per_iteration'][17:27]; c = j['agg_cpu_ms_per_iteration']['max'][17:27]
    rows[v][int(r)] = (statistics.median(t), min(t), statistics.median(c), (j.get('auto') or {}).get('choice'))
base = sys.argv[2] if len(sys.argv) > 2 else 'fix'
for v, byr in rows.items():
    print(f"{v:10}", "  ".join(f"r{r}: {m:5.2f}/{fl:5.2f} cpu {c:5.2f} {ch or ''}" for r, (m, fl, c, ch) in sorted(byr.items())))
    if v != base:
        rat = [byr[r][0] / rows[base][r][0] for r in byr if r in rows[base]]
        if rat: print(f"{'':10} / {base}: median {statistics.median(rat):.3f} range {min(rat):.3f}-{max(rat):.3f}")
