"""How well an order finds bugs early: APFD and time-to-bug over an executed migration campaign (OPERA's RQ2).

An executed campaign knows, for every migrated test, how long it ran, which bugs (deduplicated
signatures, one per conversion function) it detected on each backend and, when measured, which
frontend statements it covered.  Replaying the strategies of ``prioritize`` over those facts gives each
strategy's APFD and the time it needs to find the bugs, without running anything again:
``apfd_table(folder)`` -> rows, ``format_table(rows)`` -> OPERA's Table II, ``format_improvements``
-> OPERA's RQ2 improvement of opera over each baseline, ``plot_curves`` -> bugs over time (Fig. 4).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlcfuzz.migrate.instances import Instance
from dlcfuzz.migrate.prioritize import COVERAGE_STRATEGIES, STRATEGIES, prioritize
from dlcfuzz.run.store import StoreReader

ALL = "all"  # the column of every backend's bugs together
REPEATED = ("random", "fast")  # the strategies whose order depends on the seed


def apfd(order: Sequence[int], detects: dict[int, set[str]]) -> float:
    """APFD = 1 - (TF_1 + ... + TF_m) / (n m) + 1 / (2 n): n = len(order), m = the distinct bugs that
    some test of ``order`` detects, TF_i = the 1-based position of the first test detecting bug i.

    NaN when the order detects no bug (m = 0) or is empty: APFD is undefined there (0/0), and NaN
    keeps such a column out of averages instead of passing for a score."""
    n = len(order)
    first: dict[str, int] = {}
    for pos, tid in enumerate(order, 1):
        for bug in detects.get(tid, ()):
            first.setdefault(bug, pos)
    m = len(first)
    if n == 0 or m == 0:
        return math.nan
    return 1.0 - sum(first.values()) / (n * m) + 1.0 / (2 * n)


def time_to_bugs(order: Sequence[int], detects: dict[int, set[str]], seconds: dict[int, float], *,
                 start: float = 0.0) -> list[tuple[float, int]]:
    """(cumulative seconds, bugs found so far) at each bug's first detection, one entry per bug, in the
    order found.  A test's bugs count when it finishes; ``start`` is time spent before the first test
    (e.g. the prioritization itself); tests without a recorded duration count 0 s."""
    t = start
    seen: set[str] = set()
    out: list[tuple[float, int]] = []
    for tid in order:
        t += seconds.get(tid, 0.0)
        for bug in sorted(detects.get(tid, ())):
            if bug not in seen:
                seen.add(bug)
                out.append((t, len(seen)))
    return out


# ----------------------------------------------------------------------------------------------------
# Reading an executed campaign


@dataclass
class Campaign:
    folder: Path
    instances: list[Instance]  # the executed instances (those with a row in ``tests``), by id
    seconds: dict[int, float]  # test id -> wall time of the test
    valid: dict[int, bool]
    backends: list[str]
    detects: dict[str, dict[int, set[str]]]  # backend (or "all") -> test id -> bug signatures
    coverage: dict[int, set[str]] = field(default_factory=dict)  # test id -> "file:line" (union over backends)
    coverage_backends: list[str] = field(default_factory=list)


def load_campaign(folder: Path, library: str | None = None) -> Campaign:
    """Reads ``folder/campaign.sqlite``: tables ``instances`` (as in instances.SCHEMA), ``tests`` (id =
    instance id, seconds, valid), ``findings`` (test_id, signature, backend, ...), ``bugs`` and, if
    measured, ``frontend_coverage`` (test_id, backend, newline-joined "file:line" lines).  Only instances
    with a ``tests`` row take part (and, with ``library``, only that library's instances: OPERA orders each
    frontend's own migrated set).  In the "all" column a bug is (backend, signature)."""
    path = Path(folder) / "campaign.sqlite"
    if not path.is_file():
        raise FileNotFoundError(f"no campaign database at {path}")
    store = StoreReader(Path(folder))
    try:
        missing = {"instances", "tests", "findings"} - store.tables
        if missing:
            raise ValueError(f"{path} is not a migration campaign (missing tables: {', '.join(sorted(missing))})")
        seconds: dict[int, float] = {}
        valids: dict[int, bool] = {}
        for tid, s, v in store.test_times():
            seconds[int(tid)] = float(s or 0.0)
            valids[int(tid)] = bool(v)
        instances = [Instance(r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]), b"", id=int(r[0]))
                     for r in store.executed_instances()]
        backends = store.backends_seen()
        detects: dict[str, dict[int, set[str]]] = {ALL: {}}
        for tid, sig, backend in store.executed_findings():
            backends.add(backend)
            detects.setdefault(backend, {}).setdefault(int(tid), set()).add(sig)
            detects[ALL].setdefault(int(tid), set()).add(f"{backend}/{sig}")
        for b in backends:
            detects.setdefault(b, {})
        coverage: dict[int, set[str]] = {}
        cov_backends: set[str] = set()
        for tid, backend, lines in store.executed_frontend_coverage():
            cov_backends.add(backend)
            coverage.setdefault(int(tid), set()).update(x for x in (lines or "").split("\n") if x)
    finally:
        store.close()
    if library is not None:
        instances = [i for i in instances if i.library == library]
        keep = {i.id for i in instances}
        seconds = {t: v for t, v in seconds.items() if t in keep}
        valids = {t: v for t, v in valids.items() if t in keep}
        detects = {b: {t: v for t, v in d.items() if t in keep} for b, d in detects.items()}
        coverage = {t: v for t, v in coverage.items() if t in keep}
        if not instances:
            raise ValueError(f"{folder} ran no instances of library {library!r}")
    return Campaign(Path(folder), instances, seconds, valids, sorted(backends), detects, coverage,
                    sorted(cov_backends))


# ----------------------------------------------------------------------------------------------------
# Replaying the strategies


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.fmean(xs) if xs else math.nan


def replay(campaign: Campaign, strategy: str, *, seed: int = 0,
           counts: dict[str, dict[str, int]] | None = None) -> tuple[list[int], float]:
    """(order, seconds spent prioritizing) of one strategy over the campaign's executed instances."""
    t0 = time.perf_counter()
    order = prioritize(strategy, campaign.instances, seed=seed, coverage=campaign.coverage or None, counts=counts)
    return order, time.perf_counter() - t0


def apfd_table(folder: Path, runs: int = 5, seed: int = 0,
               counts: dict[str, dict[str, int]] | None = None, library: str | None = None) -> list[dict]:
    """One row per (strategy, column) with column = each backend and "all".

    Row keys: strategy, backend, runs, tests, bugs, apfd (mean over runs), std (population std over runs;
    None for the deterministic strategies), time_all / time_half (mean seconds until every / half of the
    bugs (rounded up) are found, the strategy's own prioritization time included, as OPERA counts it;
    NaN without bugs), prioritize_seconds, note.  random and fast run ``runs`` times with seeds
    seed .. seed + runs - 1, the others once; the coverage strategies use the campaign's frontend coverage
    (union over the backends that measured it) and are skipped with a note when it has none."""
    camp = load_campaign(folder, library)
    columns = [b for b in camp.backends if camp.detects.get(b) or library is None] + [ALL]
    rows: list[dict] = []
    for strategy in STRATEGIES:
        base = {"strategy": strategy, "tests": len(camp.instances)}
        if strategy in COVERAGE_STRATEGIES and not camp.coverage:
            for col in columns:
                rows.append({**base, "backend": col, "runs": 0, "bugs": _bug_count(camp, col), "apfd": math.nan,
                             "std": None, "time_all": math.nan, "time_half": math.nan,
                             "prioritize_seconds": math.nan,
                             "note": "skipped: the campaign has no frontend coverage (run with --measure-coverage)"})
            continue
        seeds = range(seed, seed + runs) if strategy in REPEATED else [seed]
        replays = [replay(camp, strategy, seed=s, counts=counts) for s in seeds]
        for col in columns:
            det = camp.detects.get(col, {})
            values = [apfd(order, det) for order, _ in replays]
            curves = [time_to_bugs(order, det, camp.seconds, start=secs) for order, secs in replays]
            m = len(curves[0]) if curves else 0
            rows.append({**base, "backend": col, "runs": len(replays), "bugs": m, "apfd": _mean(values),
                         "std": statistics.pstdev(values) if len(values) > 1 and m else None,
                         "time_all": _mean([c[-1][0] for c in curves]) if m else math.nan,
                         "time_half": _mean([c[math.ceil(m / 2) - 1][0] for c in curves]) if m else math.nan,
                         "prioritize_seconds": _mean([secs for _, secs in replays]),
                         "note": "" if m else "no bugs: APFD undefined"})
    return rows


def _bug_count(camp: Campaign, col: str) -> int:
    return len({b for bugs in camp.detects.get(col, {}).values() for b in bugs})


# ----------------------------------------------------------------------------------------------------
# Reporting


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.2f}h"


def _grid(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in body)])


def _pivot(rows: list[dict]) -> tuple[list[str], list[str], dict[tuple[str, str], dict]]:
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    columns = list(dict.fromkeys(r["backend"] for r in rows))
    return strategies, columns, {(r["strategy"], r["backend"]): r for r in rows}


def format_table(rows: list[dict]) -> str:
    """APFD per strategy (rows) and backend (columns), as OPERA's Table II, then the time each strategy
    needs to find all (and half of the) bugs, then notes."""
    strategies, columns, cell = _pivot(rows)
    bugs = {c: next((r["bugs"] for r in rows if r["backend"] == c), 0) for c in columns}
    header = ["strategy", *(f"{c} ({bugs[c]} bugs)" for c in columns)]

    def fmt_apfd(r: dict) -> str:
        if r is None or math.isnan(r["apfd"]):
            return "-"
        return f"{r['apfd']:.3f}" + (f" ±{r['std']:.3f}" if r.get("std") is not None else "")

    apfd_body = [[s, *(fmt_apfd(cell.get((s, c))) for c in columns)] for s in strategies]

    def fmt_time(r: dict) -> str:
        if r is None or math.isnan(r["time_all"]):
            return "-"
        return f"{_duration(r['time_all'])} (50%: {_duration(r['time_half'])})"

    time_body = [[s, *(fmt_time(cell.get((s, c))) for c in columns)] for s in strategies]
    n_tests = rows[0]["tests"] if rows else 0
    runs = {r["strategy"]: r["runs"] for r in rows}
    out = [f"APFD over {n_tests} executed tests (random, fast: mean ± std over "
           f"{max((runs[s] for s in runs if s in REPEATED), default=0)} seeds)",
           _grid(header, apfd_body), "",
           "time to find all bugs (50%: half of them), prioritization time included",
           _grid(header, time_body)]
    notes = sorted({f"{r['strategy']}: {r['note']}" for r in rows if r["note"] and r["note"].startswith("skipped")})
    if notes:
        out += ["", *notes]
    return "\n".join(out)


def improvements(rows: list[dict], reference: str = "opera") -> list[dict]:
    """Per baseline and column: the APFD of ``reference`` relative to the baseline's, as OPERA's RQ2
    reports it: ratio = ref / base, percent = (ref - base) / base x 100; plus time_ratio = base's time to
    find all bugs / ref's (> 1: the reference is faster)."""
    strategies, columns, cell = _pivot(rows)
    out = []
    for base in strategies:
        if base == reference:
            continue
        for col in columns:
            ref, other = cell.get((reference, col)), cell.get((base, col))
            if ref is None or other is None:
                continue
            a, b = ref["apfd"], other["apfd"]
            ok = not (math.isnan(a) or math.isnan(b)) and b > 0
            ta, tb = ref["time_all"], other["time_all"]
            out.append({"baseline": base, "backend": col, "ratio": a / b if ok else math.nan,
                        "percent": (a - b) / b * 100 if ok else math.nan,
                        "time_ratio": tb / ta if not (math.isnan(ta) or math.isnan(tb)) and ta > 0 else math.nan})
    return out


def format_improvements(rows: list[dict], reference: str = "opera") -> str:
    """The improvement table of ``reference`` over each baseline (APFD %, and speed-up to all bugs)."""
    imp = improvements(rows, reference)
    if not imp:
        return f"(no baseline to compare {reference} with)"
    baselines = list(dict.fromkeys(i["baseline"] for i in imp))
    columns = list(dict.fromkeys(i["backend"] for i in imp))
    cell = {(i["baseline"], i["backend"]): i for i in imp}

    def fmt(i: dict | None) -> str:
        if i is None or math.isnan(i["percent"]):
            return "-"
        speed = "" if math.isnan(i["time_ratio"]) else f" (x{i['time_ratio']:.2f})"
        return f"{i['percent']:+.1f}%{speed}"

    body = [[f"vs {b}", *(fmt(cell.get((b, c))) for c in columns)] for b in baselines]
    return (f"{reference} over each baseline: APFD improvement (speed-up: the baseline's time to all bugs "
            f"/ {reference}'s)\n"
            + _grid(["", *columns], body))


def plot_curves(folder: Path, out_png: Path, seed: int = 0,
                counts: dict[str, dict[str, int]] | None = None, library: str | None = None) -> Path | None:
    """Bugs found over time per strategy (one panel per backend and "all"; random and fast with
    ``seed``), as OPERA's Fig. 4.  Needs matplotlib, which is not a dependency: returns None (and draws
    nothing) when it is missing, else the written path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    camp = load_campaign(folder, library)
    columns = [b for b in camp.backends if camp.detects.get(b) or library is None] + [ALL]
    fig, axes = plt.subplots(1, len(columns), figsize=(4.5 * len(columns), 3.5), squeeze=False)
    total = sum(camp.seconds.get(i.id, 0.0) for i in camp.instances)
    for strategy in STRATEGIES:
        if strategy in COVERAGE_STRATEGIES and not camp.coverage:
            continue
        order, secs = replay(camp, strategy, seed=seed, counts=counts)
        for ax, col in zip(axes[0], columns, strict=True):
            curve = time_to_bugs(order, camp.detects.get(col, {}), camp.seconds, start=secs)
            xs = [0.0] + [t / 3600 for t, _ in curve] + [(total + secs) / 3600]
            ys = [0] + [k for _, k in curve] + [len(curve)]
            ax.step(xs, ys, where="post", label=strategy)
    for ax, col in zip(axes[0], columns, strict=True):
        ax.set_title(col)
        ax.set_xlabel("time (h)")
        ax.set_ylabel("bugs")
    axes[0][-1].legend(loc="lower right")
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return out_png


def report(folder: Path, runs: int = 5, seed: int = 0, counts: dict[str, dict[str, int]] | None = None,
           library: str | None = None) -> str:
    """The whole RQ2 report of one campaign: the APFD table, the times to find the bugs, the improvement
    of opera over each baseline, and how long each strategy took to prioritize."""
    rows = apfd_table(folder, runs=runs, seed=seed, counts=counts, library=library)
    prio = {r["strategy"]: r["prioritize_seconds"] for r in rows}
    times = ", ".join(f"{s} {_duration(t)}" for s, t in prio.items() if not math.isnan(t))
    return "\n\n".join([format_table(rows), format_improvements(rows), f"prioritization time: {times}"])
