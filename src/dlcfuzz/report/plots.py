"""The report's figures, drawn with matplotlib's Agg canvas (no pyplot, no global backend) into
PNG bytes.  Each function returns None when it has nothing to draw."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dlcfuzz.report.data import CampaignData

DPI = 100
LABEL = 28  # operator names longer than this are cut on the frequency chart
HIRGEN = ("op_dtype", "op_shape", "edge", "path")
CRITERION_LABELS = {
    "op_dtype": "operator \u00d7 dtype", "op_shape": "operator \u00d7 output shape", "edge": "operator → operator edge",
    "path": "operator path of length 3", "vertex": "vertex (operator, input types, attributes)",
}


def _figure(width: float = 7.5, height: float = 3.6) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def time_unit(seconds: float) -> tuple[float, str]:
    """(divisor, label) for a time axis spanning ``seconds``."""
    if seconds >= 2 * 3600:
        return 3600.0, "hours"
    if seconds >= 120:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _since_start(data: CampaignData) -> tuple[np.ndarray, float, str, float]:
    """Finish times of the tests since the campaign's start, in order; (times, divisor, unit, span)."""
    t = np.sort(np.array([x.finished for x in data.tests], dtype=float)) - data.start
    span = float(t[-1]) if t.size else 0.0
    div, unit = time_unit(span)
    return t, div, unit, span


def bugs_over_time(data: CampaignData) -> bytes | None:
    if not data.bugs or not data.tests:
        return None
    _, div, unit, span = _since_start(data)
    per_backend: dict[str, list[float]] = {}
    for b in data.bugs:
        per_backend.setdefault(b.backend, []).append(max(0.0, b.first_seen - data.start))
    fig = _figure()
    ax = fig.add_subplot()
    end = max(span, *(max(v) for v in per_backend.values()))
    for backend, times in sorted(per_backend.items()):
        times = sorted(times)
        xs = [0.0, *times, end]
        ys = [0, *range(1, len(times) + 1), len(times)]
        ax.step(np.array(xs) / div, ys, where="post", label=f"{backend} ({len(times)})")
    ax.set_xlabel(f"time since the campaign's start ({unit})")
    ax.set_ylabel("distinct bugs")
    ax.set_title("Distinct bugs over time, per backend")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return _png(fig)


def _bins(span: float, n: int) -> np.ndarray:
    count = int(min(60, max(5, n // 5)))
    return np.linspace(0.0, max(span, 1e-6), count + 1)


def _secs(s: float) -> str:
    return f"{s:.3g} s" if s < 120 else f"{s / 60:.3g} min"


def throughput(data: CampaignData) -> bytes | None:
    if len(data.tests) < 2:
        return None
    t, div, unit, span = _since_start(data)
    edges = _bins(span, len(t))
    counts, _ = np.histogram(t, bins=edges)
    rate = counts / np.diff(edges)
    fig = _figure()
    ax = fig.add_subplot()
    ax.stairs(rate, edges / div, fill=True, alpha=0.35, label=f"per interval of {_secs(np.diff(edges)[0])}")
    ax.stairs(rate, edges / div)
    ax.axhline(len(t) / max(span, 1e-9), color="C3", linestyle="--", label=f"mean {len(t) / max(span, 1e-9):.2f}")
    ax.set_xlabel(f"time since the campaign's start ({unit})")
    ax.set_ylabel("tests / s")
    ax.set_title("Throughput")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _png(fig)


def rates(data: CampaignData) -> bytes | None:
    if not data.tests:
        return None
    order = sorted(data.tests, key=lambda x: x.finished)
    t = np.array([x.finished for x in order]) - data.start
    span = float(t[-1])
    div, unit = time_unit(span)
    fig = _figure()
    ax = fig.add_subplot()
    edges = _bins(span, len(t))
    which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, len(edges) - 2)
    n = np.arange(1, len(t) + 1)
    series = (("valid", [x.valid for x in order]), ("finite output", [x.finite for x in order]))
    for i, (name, flags) in enumerate(series):
        f = np.array(flags, dtype=float)
        ax.plot(t / div, 100 * np.cumsum(f) / n, color=f"C{i}", label=f"{name}, cumulative ({100 * f.mean():.1f} %)")
        per_bin = np.bincount(which, weights=f, minlength=len(edges) - 1)
        total = np.bincount(which, minlength=len(edges) - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(total > 0, 100 * per_bin / np.maximum(total, 1), np.nan)
        ax.stairs(share, edges / div, baseline=None, color=f"C{i}", alpha=0.5, linestyle=":",
                  label=f"{name}, per interval")
    ax.set_xlabel(f"time since the campaign's start ({unit})")
    ax.set_ylabel("% of tests")
    ax.set_ylim(-2, 102)
    ax.set_title("Valid tests and tests with finite baseline outputs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    return _png(fig)


def operator_frequency(data: CampaignData, corpus: Sequence[str] = ()) -> tuple[bytes, int, int] | None:
    """Isra's Fig. 4: how many tests each operator type occurs in, sorted; the corpus's operators
    that never occurred close the chart at 0.  Returns (png, width in px, operators never seen)."""
    counts = Counter(op for x in data.tests for op in set(x.ops))
    if not counts:
        return None
    unseen = [op for op in corpus if op not in counts]
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) + [(op, 0) for op in sorted(unseen)]
    labels = [o if len(o) <= LABEL else o[:LABEL - 1] + "\u2026" for o, _ in items]
    width = float(np.clip(0.12 * len(items) + 1.5, 7.5, 48))
    fig = _figure(width, 4.2 + 0.04 * max(0, max(map(len, labels)) - 12))
    ax = fig.add_subplot()
    ax.bar(range(len(items)), [c for _, c in items], color="C0", width=0.8)
    ax.set_xticks(range(len(items)), labels, rotation=90, fontsize=7 if len(items) > 40 else 9)
    ax.set_xlim(-0.7, len(items) - 0.3)
    ax.set_ylabel("tests containing it")
    never = f", {len(unseen)} of the corpus never" if unseen else ""
    ax.set_title(f"Operator frequency ({len(counts)} operator types in {len(data.tests)} tests{never})", loc="left")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig), int(width * DPI), len(unseen)


def _cumulative(first_ids: Sequence[int], xs: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(np.asarray(first_ids)), xs, side="right")


def coverage_growth(data: CampaignData) -> bytes | None:
    """HirGen's criteria: cumulative distinct keys per criterion vs test id."""
    criteria = [c for c in HIRGEN if c in data.coverage] + sorted(
        c for c in data.coverage if c not in HIRGEN and c != "vertex")
    if not criteria or not data.tests:
        return None
    xs = np.array(sorted(x.id for x in data.tests))
    fig = _figure()
    ax = fig.add_subplot()
    for c in criteria:
        ys = _cumulative(data.coverage[c], xs)
        ax.step(xs, ys, where="post", label=f"{CRITERION_LABELS.get(c, c)} ({ys[-1]})")
    ax.set_xlabel("test")
    ax.set_ylabel("distinct keys covered")
    ax.set_title("Coverage growth (HirGen's criteria)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return _png(fig)


def operator_type_growth(data: CampaignData) -> bytes | None:
    """The fallback of coverage growth: cumulative distinct operator types vs test id."""
    if not data.tests:
        return None
    seen: set[str] = set()
    xs, ys = [], []
    for x in data.tests:
        seen.update(x.ops)
        xs.append(x.id)
        ys.append(len(seen))
    fig = _figure()
    ax = fig.add_subplot()
    ax.step(xs, ys, where="post", label=f"distinct operator types ({ys[-1]})")
    ax.set_xlabel("test")
    ax.set_ylabel("distinct operator types")
    ax.set_title("Operator types covered")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    return _png(fig)


def diversity_growth(data: CampaignData, corpus_size: int | None) -> bytes | None:
    """GenCoG's vertex and edge diversity as they grew: distinct vertices (the keys are hashed, so
    the per-operator normalization by N_est cannot be redone here) and distinct operator edges
    over |C|² (when the operator corpus is known)."""
    panels = [c for c in ("vertex", "edge") if c in data.coverage]
    if not panels or not data.tests:
        return None
    xs = np.array(sorted(x.id for x in data.tests))
    fig = _figure(7.5 if len(panels) == 1 else 10, 3.6)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, c in zip(axes, panels, strict=True):
        ys = _cumulative(data.coverage[c], xs)
        if c == "vertex":
            ax.step(xs, ys, where="post", color="C4")
            ax.set_ylabel("distinct vertices")
            ax.set_title(f"Vertex diversity: distinct (op, input types, attrs): {ys[-1]}", fontsize="medium")
        elif corpus_size:
            ax.step(xs, 100 * ys / corpus_size**2, where="post", color="C2")
            ax.set_ylabel("edge diversity (%)")
            ax.set_title(f"Edge diversity: {ys[-1]} edges / |C|² = {100 * ys[-1] / corpus_size**2:.2f} %",
                         fontsize="medium")
        else:
            ax.step(xs, ys, where="post", color="C2")
            ax.set_ylabel("distinct operator edges")
            ax.set_title(f"Edge diversity: distinct operator edges: {ys[-1]}", fontsize="medium")
        ax.set_xlabel("test")
        ax.grid(alpha=0.3)
    fig.suptitle("GenCoG's diversity growth")
    return _png(fig)
