"""The papers' claims, judged from the convergence study's cells (scripts/convergence_study.py writes
them into docs/results/findings.md). One claim at a time, every cell that measures it, each cell's
protocol, and a headline from the cells without confounds: as many iterations as the model's P = 4
cell and every arm's rate tuned at the cell's own P. Where such a cell overturns the verdict of a
confounded cell at the same point, the page says so and why.

Pure functions of the measured spreads: no runs, no files."""

import math

TARGET_TEXT = "85% test accuracy, simulated paper-1gbe"

# (claim, A, B, margin): A is at least as good as B - margin. A margin is in accuracy, so claims with
# one are skipped for perplexity cells.
GTOPK_CLAIMS = [
    ("gTop-k S-SGD reaches about dense S-SGD's accuracy (within 0.5 points)", "topk-gtopk-rd", "dense", 0.005),
    ("gTop-k is at least as accurate as Top-k S-SGD (allgather)", "topk-gtopk-rd", "topk-allgather", 0.0),
    ("the paper's recipe (density 0.001 with warm-ups) does at least as well as without the warm-ups",
     "paper", "topk-gtopk-rd-d0.001", 0.0),
    ("gTop-k at the paper's density 0.001 with its recipe reaches about dense S-SGD's accuracy (within 0.5 points)",
     "paper", "dense", 0.005),
    ("error feedback helps gTop-k", "topk-gtopk-rd", "topk-gtopk-rd-noef", 0.0),
]
GTOPK_TIME_CLAIMS = [
    ("gTop-k reaches the target sooner than dense S-SGD", "topk-gtopk-rd", "dense"),
    ("gTop-k reaches the target sooner than Top-k S-SGD (allgather)", "topk-gtopk-rd", "topk-allgather"),
]
RTOPK_CLAIMS = [
    ("rTop-k (r = 1.5k) beats top-k alone at the same k (allgather, with error feedback)", "rtopk1.5-allgather",
     "topk-allgather", 0.0),
    ("rTop-k (r = 2k) beats top-k alone at the same k (allgather, with error feedback)", "rtopk2-allgather",
     "topk-allgather", 0.0),
    ("rTop-k (r = 4k) beats top-k alone at the same k (allgather, with error feedback)", "rtopk4-allgather",
     "topk-allgather", 0.0),
    ("rTop-k (r = 2k) beats top-k alone without error feedback", "rtopk2-allgather-noef", "topk-allgather-noef", 0.0),
    ("rTop-k (r = 4k) beats top-k alone without error feedback", "rtopk4-allgather-noef", "topk-allgather-noef", 0.0),
    ("rTop-k (r = 2k) beats random-k at the same k (with error feedback)", "rtopk2-allgather", "randk-shared", 0.0),
    ("rTop-k (r = 2k) beats random-k without error feedback", "rtopk2-allgather-noef", "randk-shared-noef", 0.0),
    ("rTop-k (r = 2k) beats unbiased random-k", "rtopk2-allgather-noef", "randk-unbiased", 0.0),
    ("error feedback helps rTop-k (r = 2k)", "rtopk2-allgather", "rtopk2-allgather-noef", 0.0),
    ("error feedback helps rTop-k (r = 4k)", "rtopk4-allgather", "rtopk4-allgather-noef", 0.0),
    ("error feedback helps Top-k (allgather)", "topk-allgather", "topk-allgather-noef", 0.0),
]
OTHER_CLAIMS = [
    ("DGC's momentum correction does at least as well as plain momentum on gTop-k", "topk-gtopk-rd-mc",
     "topk-gtopk-rd", 0.0),
    ("rTop-k + gTop-k aggregation (unpublished) does as well as top-k + gTop-k", "rtopk2-gtopk-rd", "topk-gtopk-rd",
     0.0),
]
OTHER_TIME_CLAIMS = [
    ("rTop-k + gTop-k reaches the target sooner than top-k + gTop-k", "rtopk2-gtopk-rd", "topk-gtopk-rd"),
]


class Measured:
    """One cell's results as the claims read them: the Cell (scripts/convergence_study.py), its
    iterations a run, {method: spread of goodness (higher better)} and {method: spread of seconds to
    the target}. A spread is {"mean", "std", "min", "max", "n"}."""

    def __init__(self, cell, iterations, means, times):
        self.cell, self.iterations, self.means, self.times = cell, iterations, means, times


def verdict(a, b, margin=0.0):
    """(verdict, mean(a) - mean(b), twice the standard error of that difference): whether mean(a) >=
    mean(b) - margin, told apart from seed noise."""
    if a is None or b is None or a["n"] < 2 or b["n"] < 2:
        return "cannot tell (not measured)", None, None
    d = a["mean"] - b["mean"]
    two_se = 2 * math.sqrt(a["std"] ** 2 / a["n"] + b["std"] ** 2 / b["n"])
    if d + margin > two_se:
        return "holds", d, two_se
    if d + margin < -two_se:
        return "does not hold", d, two_se
    return "cannot tell", d, two_se


def pct(x):
    return "-" if x is None or math.isnan(x) else f"{100 * x:.2f}"


def reference_iterations(measured):
    """{(model, perplexity?): iterations of its P = 4 runs}: the run length the other cells of the
    model are held to (the smallest P of the model, if it has no P = 4 cell)."""
    smallest = {}
    for m in measured:
        key = (m.cell.model, m.cell.perplexity())
        if m.iterations is None:
            continue
        best = smallest.get(key)
        if best is None or m.cell.workers < best[0] or (m.cell.workers == best[0] and m.iterations > best[1]):
            smallest[key] = (m.cell.workers, m.iterations)
    return {key: iterations for key, (_, iterations) in smallest.items()}


def confounds(m, a, b, reference):
    """What keeps a cell from testing a claim of A against B on its own terms: too few iterations
    (steps x density falls as 1/P at fixed epochs) or an arm at a rate tuned elsewhere."""
    found = []
    ref = reference.get((m.cell.model, m.cell.perplexity()))
    if ref is not None and m.iterations is not None and m.iterations < 0.99 * ref:
        found.append(f"fixed epochs: {m.iterations:,} iterations, {m.iterations / ref:.2g}x the P = 4 cell's")
    borrowed = [x for x in (a, b) if m.cell.rates_from(x)]
    if borrowed:
        found.append(f"{' and '.join(borrowed)} at rates tuned in {m.cell.tuned_in}")
    return found


def label(m):
    c = m.cell
    text = f"{c.model} P = {c.workers}, d {c.density:g}"
    return text + (", authors' schedule" if c.schedule else "")


def point(m):
    """The point a cell measures, schedule aside: cells at one point differ only in protocol."""
    c = m.cell
    return (c.model, c.perplexity(), c.workers, c.density)


def show(m, spread):
    c = m.cell
    if c.perplexity():
        return f"{-spread['mean']:.1f} ({-spread['max']:.1f}-{-spread['min']:.1f})"
    return f"{pct(spread['mean'])} ({pct(spread['min'])}-{pct(spread['max'])})"


def show_difference(m, d, two_se, times=False):
    if times:  # d is the negated difference of seconds
        return f"{-d:+.1f} s (±{two_se:.1f})"
    if m.cell.perplexity():  # lower perplexity is better: show the perplexity difference
        return f"perplexity {-d:+.1f} (±{two_se:.1f})"
    return f"{100 * d:+.2f} (±{100 * two_se:.2f})"


def rows_for(claim, measured, reference, times=False):
    """[(measured cell, verdict, d, two_se, confounds)] for every cell where both arms are measured."""
    text, a, b = claim[:3]
    margin = claim[3] if len(claim) > 3 else 0.0
    rows = []
    for m in measured:
        source = m.times if times else m.means
        if a not in source or b not in source or (margin and m.cell.perplexity()):
            continue
        if times:  # shorter is better: compare the negated times
            pa, pb = ({**source[x], "mean": -source[x]["mean"]} for x in (a, b))
        else:
            pa, pb = source[a], source[b]
        v, d, two_se = verdict(pa, pb, margin)
        if d is None:
            continue
        rows.append((m, v, d, two_se, confounds(m, a, b, reference)))
    return rows


def headline(rows, times=False):
    """The verdict of the cells without confounds: per verdict, the cells that give it."""
    def where(selected):
        by = {}
        for m, v, d, two_se, _ in selected:
            by.setdefault(v, []).append(f"{label(m)} ({show_difference(m, d, two_se, times)})")
        return "; ".join(f"**{v}** at {', '.join(cells)}" for v, cells in by.items())

    clean = [r for r in rows if not r[4] and not r[0].cell.schedule]
    scheduled = [r for r in rows if not r[4] and r[0].cell.schedule]
    parts = []
    if clean:
        parts.append("Without confounds: " + where(clean) + ".")
    if scheduled:
        parts.append("With the authors' schedule: " + where(scheduled) + ".")
    if not parts:
        parts.append("No cell without confounds measures it yet; the confounded cells below are all there is.")
    return " ".join(parts)


def replaced(rows, times=False):
    """Lines for the confounded cells whose verdict a cell without confounds at the same point, with
    the same schedule, overturns or confirms."""
    out = []
    for m, v, d, two_se, found in rows:
        if not found:
            continue
        for m2, v2, d2, two_se2, found2 in rows:
            if found2 or point(m2) != point(m) or m2.cell.schedule != m.cell.schedule:
                continue
            change = (f"{m2.iterations:,} iterations" if m2.iterations != m.iterations else "the same length")
            change += ", every arm tuned at this P" if any("tuned in" in f for f in found) else ""
            before = (f"- {label(m)}, {m.cell.name} ({'; '.join(found)}): **{v}** "
                      f"({show_difference(m, d, two_se, times)})")
            after = f"**{v2}** ({show_difference(m2, d2, two_se2, times)}) with {change} ({m2.cell.name})"
            out.append(f"{before}; replaced by {after}." if v2 != v else f"{before}; still {after}.")
    return out


def claim_section(claim, measured, reference, times=False):
    text, a, b = claim[:3]
    rows = rows_for(claim, measured, reference, times)
    out = [f"#### {text}" + (f" ({TARGET_TEXT})" if times else ""), ""]
    if not rows:
        return out + [f"Not measured: no cell runs both {a} and {b}.", ""]
    out += [headline(rows, times), ""]
    what = "seconds to the target, mean (min-max)" if times else "mean (min-max)"
    out += [f"| cell | iterations | confounds | {a}: {what} | {b} | difference (±2 se) | verdict |",
            "|---|---|---|---|---|---|---|"]
    for m, v, d, two_se, found in rows:
        if times:
            ta, tb = m.times[a], m.times[b]
            shown_a = f"{ta['mean']:.1f} ({ta['min']:.1f}-{ta['max']:.1f})"
            shown_b = f"{tb['mean']:.1f} ({tb['min']:.1f}-{tb['max']:.1f})"
        else:
            shown_a, shown_b = show(m, m.means[a]), show(m, m.means[b])
        diff = show_difference(m, d, two_se, times)
        iterations = "-" if m.iterations is None else f"{m.iterations:,}"
        out.append(f"| {m.cell.name} | {iterations} | {'; '.join(found) or 'none'} | {shown_a} | {shown_b} | "
                   f"{diff} | {v} |")
    notes = replaced(rows, times)
    if notes:
        out += ["", "What the cells without confounds did to the earlier verdicts:", ""] + notes
    return out + [""]


def schedule_section(measured):
    """Each arm with the authors' schedule against the same cell without it."""
    plain = {(point(m), m.iterations): m for m in measured if not m.cell.schedule}
    rows = []
    for m in measured:
        twin = plain.get((point(m), m.iterations)) if m.cell.schedule else None
        if twin is None:
            continue
        for method in m.means:
            if method not in twin.means:
                continue
            v, d, two_se = verdict(m.means[method], twin.means[method])
            if d is not None:
                rows.append(f"| {m.cell.name} | {method} | {show(twin, twin.means[method])} | "
                            f"{show(m, m.means[method])} | {show_difference(m, d, two_se)} | {v} |")
    out = ["#### The authors' schedule does at least as well as none, arm by arm", ""]
    if not rows:
        return out + ["Not measured yet: no cell with the schedule has a finished arm beside its twin.", ""]
    return out + ["| cell | arm | without: mean (min-max) | with | difference (±2 se) | verdict |",
                  "|---|---|---|---|---|---|"] + rows + [""]


def claims_markdown(measured, gap_lines):
    """The generated section of findings.md: the verdict rule, the default run (gap_lines), then each
    paper's claims."""
    reference = reference_iterations(measured)
    out = ["<!-- convergence claims: generated by scripts/convergence_study.py; do not edit by hand -->", "",
           "## The papers' claims, from docs/results/convergence.md", "",
           "Verdict rule: a claim that A is at least as good as B *holds* when A's mean test accuracy minus B's is "
           "more than twice the standard error of that difference over the seeds (sqrt(sA²/nA + sB²/nB), shown "
           "as ±2 se), *does not hold* when it is less than minus twice that, and *cannot tell* otherwise. A claim "
           "that A is close to dense is read as A >= dense - 0.5 points, by the same rule. A claim that A reaches "
           "the target sooner compares the simulated times the same way (shorter is better). Perplexity cells "
           "compare perplexities (lower is better).", "",
           "Protocols: a cell is *without confounds* for a claim when it runs at least as many iterations as its "
           "model's P = 4 cell (so iterations x density does not fall as 1/P) and both arms' learning rates were "
           "tuned at its own P. The earlier cells at P = 8 and 32 ran a fixed number of epochs and some borrowed "
           "rates from a smaller P; they are kept, marked with what confounds them, and each headline reads only "
           "the cells without confounds. Cells with the authors' schedule (warm-up from lr/P, step decay, density "
           "warm-up) are headlined apart.", ""]
    out += gap_lines
    out += ["### The gTop-k paper (Shi et al., ICDCS 2019)", ""]
    for claim in GTOPK_CLAIMS:
        out += claim_section(claim, measured, reference)
    for claim in GTOPK_TIME_CLAIMS:
        out += claim_section(claim, measured, reference, times=True)
    out += schedule_section(measured)
    out += ["### The rTop-k paper (Barnes et al., IEEE JSAIT 2020)", "",
            "Its regime is very sparse exchanges with every worker's k kept (allgather): density 0.001 cells are "
            "the test; density 0.01 cells are kept for what they show.", ""]
    for claim in RTOPK_CLAIMS:
        out += claim_section(claim, measured, reference)
    out += ["### Beyond the papers", ""]
    for claim in OTHER_CLAIMS:
        out += claim_section(claim, measured, reference)
    for claim in OTHER_TIME_CLAIMS:
        out += claim_section(claim, measured, reference, times=True)
    out.append("<!-- end of generated convergence claims -->")
    return "\n".join(out)
