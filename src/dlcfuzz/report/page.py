"""One self-contained static HTML page about a campaign: inline CSS, figures as base64 PNG, no
script and no external asset, so it opens offline and can be mailed or archived as one file.
Links to the bug bundles are relative to where the page is written."""

from __future__ import annotations

import base64
import datetime as dt
import importlib
import json
import os
import time
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dlcfuzz.report.data import BugRow, CampaignData, ReportError, load
from dlcfuzz.run.roots import COMPILER, summary_line

NA = "\u2013"  # an en dash: no value

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #1d232a;
       background: #f6f7f9; }
main { max-width: 1180px; margin: 0 auto; padding: 1.2em 1.6em 3em; }
h1 { font-size: 1.6em; margin: .2em 0 .1em; }
h2 { font-size: 1.2em; margin: 1.8em 0 .5em; border-bottom: 1px solid #d5dae0; padding-bottom: .2em; }
h3 { font-size: 1em; margin: 1.2em 0 .4em; }
.sub { color: #5b6570; margin: 0 0 1em; word-break: break-all; }
.cards { display: flex; flex-wrap: wrap; gap: .6em; margin: .8em 0; }
.card { background: #fff; border: 1px solid #d5dae0; border-radius: 6px; padding: .5em .9em; min-width: 7.5em; }
.card b { display: block; font-size: 1.35em; }
.card span { color: #5b6570; font-size: .85em; }
table { border-collapse: collapse; background: #fff; margin: .4em 0; }
th, td { border: 1px solid #d5dae0; padding: .3em .55em; text-align: left; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th { width: 11em; }
#bugs td.title { max-width: 36em; word-break: break-word; }
code, .sig { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .92em; }
.badge { display: inline-block; font-size: .75em; padding: .05em .45em; border-radius: 3px; margin-left: .3em;
         white-space: nowrap; }
.known { background: #e3f1e3; color: #1f6b1f; border: 1px solid #a9d3a9; }
.suspect { background: #fdf1dc; color: #8a5300; border: 1px solid #efcf95; }
.reduced { background: #e6eefb; color: #2a4f8f; border: 1px solid #b3c8ee; }
nav { margin: .8em 0; }
nav a { margin-right: 1em; }
td.nw { white-space: nowrap; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 0 1.2em; }
figure { margin: .6em 0 1.4em; }
figure .scroll { overflow-x: auto; }
figure img { display: block; background: #fff; border: 1px solid #d5dae0; max-width: 100%; height: auto; }
figure img.wide { max-width: none; }
figcaption { color: #5b6570; font-size: .9em; margin-top: .3em; }
.note { background: #fff8e1; border-left: 4px solid #e7c14a; padding: .45em .8em; margin: .6em 0; }
details pre { background: #fff; border: 1px solid #d5dae0; padding: .6em; overflow-x: auto; }
footer { margin-top: 3em; color: #8a939c; font-size: .85em; }
"""


def write_report(folder: Path, out: Path) -> Path:
    """Writes the HTML report of the campaign in ``folder`` to ``out`` (a file, or a folder to
    hold ``report.html``); returns the file written.  Reads the campaign without changing it."""
    folder, out = Path(folder), Path(out)
    data = load(folder)
    try:
        plots = importlib.import_module("dlcfuzz.report.plots")
    except ImportError:
        raise ReportError("the HTML report needs matplotlib (pip install dlcfuzz[report])") from None
    if out.is_dir():
        out = out / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = render(data, out, plots)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out


# -- helpers ----------------------------------------------------------------------------------------
def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else NA


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ts else NA


def _href(target: Path, out: Path, is_dir: bool) -> str:
    rel = os.path.relpath(target.resolve(), out.resolve().parent).replace(os.sep, "/")
    if is_dir and not rel.endswith("/"):
        rel += "/"
    return escape(quote(rel))


def _img(png: bytes, alt: str, wide_px: int | None = None) -> str:
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    cls = ' class="wide"' if wide_px and wide_px > 1150 else ""
    return f'<img{cls} src="{src}" alt="{escape(alt)}">'


def _figure(png: bytes | None, alt: str, caption: str, wide_px: int | None = None) -> str:
    if png is None:
        return ""
    return (f'<figure><div class="scroll">{_img(png, alt, wide_px)}</div>'
            f"<figcaption>{caption}</figcaption></figure>")


def _note(text: str) -> str:
    return f'<p class="note">{text}</p>'


def _table(head: list[str], rows: list[list[Any]], numeric: set[int] = frozenset(), attrs: str = "") -> str:
    ths = "".join(f'<th{" class=num" if i in numeric else ""}>{escape(h)}</th>' for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in numeric else ""}>{escape(str(c))}</td>'
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table{attrs}><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>"


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{escape(value)}</b><span>{escape(label)}</span></div>'


def _strategy(data: CampaignData) -> str:
    return str(data.config.get("prioritize" if data.kind == "migrate" else "strategy", NA))


# -- sections ---------------------------------------------------------------------------------------
def _header(data: CampaignData) -> str:
    cfg = data.config
    n = len(data.tests)
    span = data.end - data.start
    valid = sum(t.valid for t in data.tests)
    finite = sum(t.finite for t in data.tests)
    kind = "migration (library tests)" if data.kind == "migrate" else "fuzzing (generated graphs)"
    cards = [_card(str(n), "tests"), _card(duration(span) if n else NA, "duration"),
             _card(f"{n / span:.2f}" if n and span > 0 else NA, "tests / s"),
             _card(_pct(valid, n), "valid"), _card(_pct(finite, n), "finite outputs"),
             _card(str(len(data.listing.of(COMPILER))), "compiler bugs")]
    others = len(data.listing.roots) - len(data.listing.of(COMPILER))
    if others:
        cards.append(_card(str(others), "other issues (not compiler bugs)"))
    if data.listing.members():
        cards.append(_card(str(data.listing.members()), "merged into a root cause"))
    if data.known_findings:
        cards.append(_card(str(sum(data.known_findings.values())), "findings of known bugs"))
    rows = [("folder", str(data.folder.resolve())), ("kind", kind),
            ("prioritization" if data.kind == "migrate" else "strategy", _strategy(data))]
    if cfg.get("strategy_options"):
        rows.append(("strategy options", json.dumps(cfg["strategy_options"], sort_keys=True)))
    rows.append(("backends", ", ".join(cfg.get("backends", [])) or NA))
    if data.kind == "migrate":
        rows.append(("sources", ", ".join(cfg.get("sources", [])) or NA))
    else:
        if "ops" in cfg:
            rows.append(("operators per graph", NA.join(str(x) for x in cfg["ops"])))
        if "operators" in cfg:
            rows.append(("operator corpus", f"{len(cfg['operators'])} operators"))
        opsets = _opsets(cfg)
        if opsets:
            rows.append(opsets)
    rows.append(("seed", str(cfg.get("seed", NA))))
    if data.versions:
        rows.append(("compiler versions", ", ".join(f"{b} {v}" for b, v in sorted(data.versions.items()))))
    if n:
        rows.append(("tests ran", f"{_when(data.start)} {NA} {_when(data.end)} (ids {data.tests[0].id}{NA}"
                                  f"{data.tests[-1].id})"))
    kv = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    out = [f'<h1>dlcfuzz campaign report</h1><p class="sub">{escape(str(data.folder))}</p>',
           f'<div class="cards">{"".join(cards)}</div>', f'<table class="kv">{kv}</table>']
    if not n:
        out.append(_note("This campaign has no tests yet: nothing to plot."))
    return "".join(out)


def _opsets(cfg: dict[str, Any]) -> tuple[str, str] | None:
    """The opsets the campaign drew its graphs' opsets from (its recorded ``opsets``), or the one opset
    of its limits where it recorded none."""
    drawn = sorted({o for o in cfg.get("opsets") or [] if isinstance(o, int)})
    if len(drawn) > 1:
        contiguous = drawn == list(range(drawn[0], drawn[-1] + 1))
        text = f"{drawn[0]}{NA}{drawn[-1]}" if contiguous else ", ".join(map(str, drawn))
        return ("opsets", f"{text} (each graph's opset drawn from these)")
    if drawn:
        return ("opset", str(drawn[0]))
    if isinstance(cfg.get("limits"), dict) and "opset" in cfg["limits"]:
        return ("opset", str(cfg["limits"]["opset"]))
    return None


def _badges(b: BugRow) -> str:
    out = []
    if b.known is not None:
        what = " · ".join(str(b.known[k]) for k in ("title", "link", "note") if b.known.get(k))
        out.append(f'<span class="badge known" title="{escape(what)}">known upstream</span>')
    why = {"baseline": "other compilers agree against the baseline", "exporter": "dlcfuzz's own exporter",
           "noise": "rounding: a tie broken the other way", "undefined": "ONNX leaves the result undefined",
           "unconfirmed": "a fresh process running the model alone did not repeat the crash"}
    if b.category in why:
        out.append(f'<span class="badge suspect" title="{escape(why[b.category])}">{escape(b.category)} issue</span>')
    return "".join(out)


def _reduction(b: BugRow) -> str:
    r = b.reduction or {}
    if "ops_before" in r and "ops_after" in r:
        return f'<span class="badge reduced">{escape(str(r["ops_before"]))} → {escape(str(r["ops_after"]))} ops</span>'
    return ""


def _bugs(data: CampaignData, out: Path) -> str:
    html = ['<h2 id="bugs-section">Distinct bugs</h2>']
    if not data.bugs:
        html.append("<p>No bugs found.</p>")
        return "".join(html)
    # the line ``dlcfuzz bugs`` and the end of a campaign print: the same roots, counted by one function
    html.append(f"<p>{escape(summary_line(data.listing, data.declines))}</p>")
    per = Counter((b.backend, b.oracle) for b in data.bugs if b.category == COMPILER)
    if per:
        html.append("<p>Compiler bugs per backend / oracle: "
                    + escape(", ".join(f"{b} / {o}: {c}" for (b, o), c in sorted(per.items()))) + "</p>")
    rows = []
    for b in data.bugs:
        href = _bundle_href(data, b, out)
        merged = ""
        if b.members:
            links = ", ".join(f'<a class="member" href="{_bundle_href(data, m, out)}">{escape(m.signature)}</a>'
                              for m in b.members)
            merged = f'<br><span class="sub">same root cause ({len(b.members)} merged): {links}</span>'
        since = f"test {b.first_test}" + (f"<br>+{escape(duration(b.first_seen - data.start))}" if data.tests else "")
        cells = [f'<a class="sig" href="{href}">{escape(b.signature)}</a>', escape(b.backend),
                 escape(b.variant), escape(b.oracle), escape(b.kind), escape(b.phase), str(b.hits),
                 f'<span title="{escape(_when(b.first_seen))}">{since}</span>',
                 f"{escape(b.title)}{_badges(b)}{_reduction(b)}{merged}"]
        classes = ["", *[' class="nw"'] * 5, ' class="num"', ' class="nw"', ' class="title"']
        rows.append("<tr>" + "".join(f"<td{c}>{v}</td>" for c, v in zip(classes, cells, strict=True)) + "</tr>")
    head = "".join(f"<th{c}>{h}</th>" for h, c in (
        ("signature", ""), ("backend", ""), ("variant", ""), ("oracle", ""), ("kind", ""), ("phase", ""),
        ("hits", ' class="num"'), ("first seen", ""), ("title", "")))
    html.append(f'<table id="bugs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    html.append("<p class=sub>One row per root cause: compiler bugs first, then the other issues, each "
                "most different first (furthest-point-first, as <code>dlcfuzz bugs</code> lists them); the bugs "
                "merged into a root are named under its title. Each signature links to the bug's report.md (or its "
                "bundle folder): the model, inputs, expected and actual outputs, and a standalone repro.py.</p>")
    return "".join(html)


def _bundle_href(data: CampaignData, b: BugRow, out: Path) -> str:
    bundle = data.folder / b.dir
    report = bundle / "report.md"
    return _href(report, out, False) if report.is_file() else _href(bundle, out, True)


def _known(data: CampaignData) -> str:
    if not data.known_findings:
        return ""
    rows = [[b, n] for b, n in sorted(data.known_findings.items())]
    return ("<h3>Findings of bugs known upstream</h3><p>Counted, not re-reported (no bundle):</p>"
            + _table(["backend", "findings"], rows, {1}))


def _outcomes(data: CampaignData) -> str:
    if not data.outcomes:
        return ""
    statuses = sorted({s for c in data.outcomes.values() for s in c}, key=lambda s: (s != "ok", s))
    rows = [[b, *(c.get(s, 0) for s in statuses), sum(c.values())] for b, c in sorted(data.outcomes.items())]
    return ('<h2 id="outcomes">Outcomes per backend</h2><p>One outcome per test, backend and variant '
            "(unsupported: an error the backend documents as a missing feature).</p>"
            + _table(["backend", *statuses, "total"], rows, set(range(1, len(statuses) + 2))))


def _grid(figures: list[str]) -> str:
    figures = [f for f in figures if f]
    return f'<div class="grid">{"".join(figures)}</div>' if figures else ""


def _plots(data: CampaignData, plots) -> str:
    if not data.tests:
        return ""
    html = ['<h2 id="plots">Plots</h2>']
    notes = []
    bugs = plots.bugs_over_time(data)
    if bugs is None:
        notes.append(_note("No bugs: no bug-discovery curve."))
    disruptive = " Disruptive tests are invalid by design." if _strategy(data) == "disruptive" else ""
    html.append(_grid([
        _figure(bugs, "distinct bugs over time per backend",
                "Cumulative distinct bugs (by first finding) per backend, since the first test began."),
        _figure(plots.throughput(data), "tests per second over time",
                "Tests finished per second, per time interval; the dashed line is the mean."),
        _figure(plots.rates(data), "validity and finite-output rates over time",
                "Share of valid tests (a baseline produced outputs) and of tests whose baseline outputs are all "
                f"finite: cumulative (solid) and per time interval (dotted).{disruptive}"),
    ]))
    html += notes
    corpus = data.config.get("operators") if isinstance(data.config.get("operators"), list) else []
    freq = plots.operator_frequency(data, [str(o) for o in corpus])
    if freq:
        unseen = f" The {freq[2]} operators of the corpus that never occurred close the chart at 0." if freq[2] else ""
        html.append(_figure(freq[0], "operator frequency", "How many tests each operator type occurs in, sorted "
                            f"(Isra's Fig. 4).{unseen}", freq[1]))

    html.append('<h3 id="coverage">Coverage</h3>')
    figures, notes = [], []
    cov = plots.coverage_growth(data)
    if cov:
        figures.append(_figure(cov, "coverage growth", "Distinct keys of each HirGen criterion covered so far, by "
                               "test (the campaign's coverage table)."))
    else:
        why = "migration campaign" if data.kind == "migrate" else f"strategy {_strategy(data)}"
        notes.append(_note(f"No generation coverage recorded ({escape(why)}): showing distinct operator types "
                           "instead."))
        figures.append(_figure(plots.operator_type_growth(data), "distinct operator types over tests",
                               "Distinct operator types seen so far, by test."))
    div = plots.diversity_growth(data, len(corpus) or None)
    html += [*notes, _grid(figures)]
    if div:
        html.append(_figure(div, "GenCoG vertex and edge diversity growth",
                            "GenCoG's diversity as the campaign went. Vertex keys are stored hashed, so the "
                            "per-operator normalization by N_est is not redone here: the count of distinct vertices "
                            "is shown (<code>dlcfuzz metrics</code> on a folder of models gives the normalized "
                            "figure)."))
    elif data.kind == "fuzz":
        html.append(_note("GenCoG's vertex/edge diversity was not recorded: only the hirgen, gencog and guided "
                          "strategies store coverage (vertex: gencog, guided; edge: hirgen, guided)."))
    return "".join(html)


def _migration(data: CampaignData) -> str:
    if data.kind != "migrate":
        return ""
    html = ['<h2 id="migration">Migration</h2>']
    if data.instances:
        html.append(f"<p>{data.instances[0]} instances of {data.instances[1]} operators in the instance set.</p>")
    harvest = data.meta.get("harvest")
    if isinstance(harvest, dict) and harvest:
        rows, skipped_rows = [], []
        for name, st in harvest.items():
            st = st if isinstance(st, dict) else {}
            skipped = st.get("skipped") or {}
            rows.append([name, st.get("instances", NA), st.get("operators", NA), sum(skipped.values()),
                         f"{st['seconds']:.1f} s" if isinstance(st.get("seconds"), int | float) else NA])
            skipped_rows += [[name, why, n] for why, n in skipped.items()]
        html.append("<h3>Harvested</h3>" + _table(["source", "instances", "operators", "skipped", "harvest time"],
                                                   rows, {1, 2, 3, 4}))
        if skipped_rows:
            reasons = f"{len(skipped_rows)} reason{'s' if len(skipped_rows) != 1 else ''}"
            html.append(f"<details><summary>Skipped while harvesting: {reasons}</summary>"
                        + _table(["source", "reason", "count"], skipped_rows, {2}) + "</details>")
    else:
        html.append("<p>No harvest statistics stored.</p>")
    discarded = Counter(t.baseline.removeprefix("discarded:").strip() for t in data.tests
                        if not t.valid and t.baseline.startswith("discarded:"))
    html.append("<h3>Discarded by the library's own run</h3>")
    if discarded:
        html.append(_table(["reason", "instances"], [[r, n] for r, n in discarded.most_common()], {1}))
    else:
        html.append("<p>None.</p>")
    per_backend = data.listing.per_backend(COMPILER)
    html.append("<h3>Compiler bugs per backend</h3>")
    html.append(_table(["backend", "compiler bugs"], [[b, n] for b, n in per_backend.items()], {1})
                if per_backend else "<p>None.</p>")
    return "".join(html)


def render(data: CampaignData, out: Path, plots) -> str:
    config = escape(json.dumps(data.config, indent=1, sort_keys=True))
    sections = [("bugs-section", "Bugs", _bugs(data, out) + _known(data)), ("migration", "Migration", _migration(data)),
                ("plots", "Plots", _plots(data, plots)), ("outcomes", "Outcomes", _outcomes(data)),
                ("configuration", "Configuration",
                 '<h2 id="configuration">Configuration</h2><details><summary>campaign configuration (JSON)</summary>'
                 f"<pre>{config}</pre></details>")]
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t, html in sections if html)
    body = "".join([_header(data), f"<nav>{nav}</nav>", *(html for _, _, html in sections),
                    f"<footer>written by dlcfuzz report at {escape(_when(time.time()))}</footer>"])
    title = escape(f"dlcfuzz report: {data.folder.resolve().name}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{CSS}</style></head><body><main>{body}</main></body></html>\n")
