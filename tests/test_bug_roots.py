"""Bugs folded under their roots, the roots most different first, and one count for ``dlcfuzz bugs``,
``bugs --json``, the summary line and the HTML report (``run/roots.py``).  Synthetic stores written
through the Store API: no compiler runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dlcfuzz.cli import main
from dlcfuzz.cli.bugs import bug_summary
from dlcfuzz.run.roots import Bug, fold
from dlcfuzz.run.store import Store, TestRecord


def planted(folder: Path, bugs: list[dict], config: dict | None = None) -> None:
    """One test per bug, in the order given (so the order found): ``sig``, ``backend``, ``kind``,
    ``ops``, ``title``, and optionally ``category``, ``message``."""
    store = Store(folder)
    store.bind(config or {"seed": 0, "backends": sorted({b["backend"] for b in bugs})})
    for i, b in enumerate(bugs):
        (folder / "bugs" / b["sig"]).mkdir(parents=True, exist_ok=True)
        oracle = "crash" if b["kind"] == "exception" else "differential"
        store.commit(TestRecord(i, i, b["ops"], "reference/default", True, 1, True, 0.1, 0.0, 0.0, 0.1, 0.0),
                     [(b["backend"], "default", "error", "run", "boom", 0, 0.1)],
                     [(b["sig"], oracle, b["kind"], b["backend"], "default", "run", b.get("message", "boom happened"))],
                     [(b["sig"], oracle, b["kind"], b["backend"], "default", "run", b["title"],
                       b.get("category", "compiler"), f"bugs/{b['sig']}")])
    store.close()


def bugs_json(folder: Path, capsys, *flags: str) -> list[dict]:
    capsys.readouterr()
    assert main(["bugs", str(folder), "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def listed(folder: Path, capsys, *flags: str) -> tuple[str, list[str]]:
    """``dlcfuzz bugs``'s output and the signatures of its top-level rows, in order."""
    capsys.readouterr()
    assert main(["bugs", str(folder), *flags]) == 0
    out = capsys.readouterr().out
    return out, re.findall(r"^(s\d+)\s", out, re.M)


# -- folding ----------------------------------------------------------------------------------------
@pytest.fixture
def merged(tmp_path: Path) -> Path:
    """s1, s2, s3 compiler bugs on ort; s2 and s4 merged into s1 (one root cause); s4 later moved to
    the baseline's issues; s5 a rounding-noise issue."""
    c = tmp_path / "c"
    planted(c, [dict(sig="s1", backend="ort", kind="exception", ops=["Add"], title="one crash"),
                dict(sig="s2", backend="ort", kind="exception", ops=["Mul"], title="one crash again"),
                dict(sig="s3", backend="ort", kind="value", ops=["Conv"], title="other value"),
                dict(sig="s4", backend="ort", kind="exception", ops=["Sub"], title="outvoted"),
                dict(sig="s5", backend="ort", kind="value", ops=["Sum"], title="a tie", category="noise")])
    store = Store(c)
    for sig in ("s1", "s2", "s4"):
        store.merge_root(sig, "root|ort|compiler|exception|Add")
    store.set_category("s4", "baseline")
    store.close()
    return c


def test_merged_bugs_fold_under_their_root_listed_with_v(merged: Path, capsys) -> None:
    out, rows = listed(merged, capsys)
    assert sorted(rows) == ["s1", "s3"]  # s2 is folded under s1, s4 is a baseline issue, s5 noise
    assert "compiler bugs: 2 (ort 2); merged into a root cause: 1; baseline issues: 1;" in out
    assert "rounding noise: 1;" in out
    assert "same root cause: 1 more (-v lists them)" in out and "s2" not in out
    out, rows = listed(merged, capsys, "-v")
    assert sorted(rows) == ["s1", "s3"]
    member = out.index("+ s2")  # indented under s1, before the next root
    assert out.index("s1 ") < member and (out.index("s3 ") < out.index("s1 ") or member < out.index("s3 "))
    _, rows = listed(merged, capsys, "--baseline")
    assert rows == ["s4"]  # moved to another category: its own root there, not folded under a compiler bug


def test_fold_by_a_shared_root_key_alone_and_by_chains() -> None:
    """Trigger analysis may write ``root`` without ``same_as``; a ``same_as`` may name a merged bug."""
    bugs = [Bug("a", "compiler", "ort", first_seen=1.0, root_key="k"),
            Bug("b", "compiler", "ort", first_seen=2.0),
            Bug("c", "compiler", "ort", first_seen=3.0, root_key="k"),
            Bug("d", "compiler", "ort", first_seen=4.0, same_as="c"),
            Bug("e", "baseline", "ort", first_seen=5.0, root_key="k")]
    roots = fold(bugs)
    assert [r.signature for r in roots] == ["a", "b", "e"]
    assert [m.signature for m in roots[0].members] == ["c", "d"]
    assert {b.signature: b.root for b in bugs} == {"a": "a", "b": "b", "c": "a", "d": "a", "e": "e"}


# -- ordering ---------------------------------------------------------------------------------------
def test_roots_are_listed_furthest_point_first(tmp_path: Path, capsys) -> None:
    """Planted so that the order follows from the distance's priorities alone (backend > kind >
    operators > message tokens), and differs from the order found (s1 ... s6):
    s1 first (the first found); s6 next: the only other backend (8 from everything); then s5: another
    kind and other operators (6.4 from s1); then s4 (another kind: 4 from s1, 2.4 from s5); then s3
    (other operators: 2 from s1); s2 last (only other title words: 0.4 from s1)."""
    c = tmp_path / "c"
    planted(c, [dict(sig="s1", backend="ort", kind="exception", ops=["Add"], title="alpha crash"),
                dict(sig="s2", backend="ort", kind="exception", ops=["Add"], title="gamma crash"),
                dict(sig="s3", backend="ort", kind="exception", ops=["Conv"], title="alpha crash"),
                dict(sig="s4", backend="ort", kind="value", ops=["Add"], title="alpha crash"),
                dict(sig="s5", backend="ort", kind="value", ops=["Conv"], title="zeta crash"),
                dict(sig="s6", backend="tvm", kind="exception", ops=["Add"], title="alpha crash")])
    expected = ["s1", "s6", "s5", "s4", "s3", "s2"]
    assert [b["signature"] for b in bugs_json(c, capsys)] == expected
    assert listed(c, capsys)[1] == expected


# -- JSON ---------------------------------------------------------------------------------------------
def test_json_lists_every_bug_listed_or_merged_with_its_root_and_bundle(merged: Path, capsys) -> None:
    got = bugs_json(merged, capsys)
    assert sorted(b["signature"] for b in got) == ["s1", "s2", "s3", "s4", "s5"]
    by = {b["signature"]: b for b in got}
    for b in got:
        assert {"signature", "root", "category", "backend", "title", "bundle"} <= set(b), b
        assert Path(b["bundle"]) == merged / "bugs" / b["signature"] and Path(b["bundle"]).is_dir()
    assert {s: b["root"] for s, b in by.items()} == {"s1": "s1", "s2": "s1", "s3": "s3", "s4": "s4", "s5": "s5"}
    assert {s: b["category"] for s, b in by.items()} == {"s1": "compiler", "s2": "compiler", "s3": "compiler",
                                                         "s4": "baseline", "s5": "noise"}
    assert by["s1"]["members"] == ["s2"] and by["s2"]["title"] == "one crash again"
    assert [b["signature"] for b in bugs_json(merged, capsys, "--baseline")] == ["s4"]


# -- one count everywhere ---------------------------------------------------------------------------
def test_report_bugs_json_and_summary_line_count_the_same_roots(merged: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    from dlcfuzz.report import write_report

    line = bug_summary(merged)  # what ``fuzz`` prints at its end
    out, rows = listed(merged, capsys)
    assert out.splitlines()[0] == line
    got = bugs_json(merged, capsys)
    roots = [b for b in got if b["root"] == b["signature"]]
    compiler = [b["signature"] for b in roots if b["category"] == "compiler"]
    assert sorted(rows) == sorted(compiler)
    m = re.match(r"compiler bugs: (\d+) \(ort (\d+)\); merged into a root cause: (\d+); baseline issues: (\d+);",
                 line)
    assert m and [int(x) for x in m.groups()] == [len(compiler), len(compiler), len(got) - len(roots),
                                                  sum(b["category"] == "baseline" for b in roots)]

    text = write_report(merged, tmp_path / "r.html").read_text()
    cards = dict((label, int(n)) for n, label in re.findall(r'<div class="card"><b>(\d+)</b><span>([^<]+)', text))
    assert cards["compiler bugs"] == len(compiler) == 2
    assert cards["other issues (not compiler bugs)"] == len(roots) - len(compiler) == 2
    assert cards["merged into a root cause"] == 1
    assert f"<p>{line}</p>" in text  # the very same line
    table = text[text.index('<table id="bugs">'):]
    table = table[:table.index("</table>")]
    assert re.findall(r'class="sig" href="[^"]*">(s\d+)<', table) == [b["signature"] for b in roots]
    assert re.search(r'class="member" href="[^"]*">s2<', table)  # named under its root


def test_report_shows_the_opsets_the_campaign_drew_from(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from dlcfuzz.report import write_report

    bug = dict(sig="s1", backend="ort", kind="exception", ops=["Add"], title="t")
    planted(tmp_path / "mix", [bug], {"seed": 0, "limits": {"opset": 13}, "opsets": list(range(13, 24))})
    planted(tmp_path / "one", [bug], {"seed": 0, "limits": {"opset": 17}, "opsets": []})
    mix = write_report(tmp_path / "mix", tmp_path / "mix.html").read_text()
    one = write_report(tmp_path / "one", tmp_path / "one.html").read_text()
    assert "<tr><th>opsets</th><td>13\u201323" in mix and "<th>opset</th><td>13<" not in mix
    assert "<tr><th>opset</th><td>17</td>" in one
