"""``dlcfuzz report``: the HTML page of a real campaign (real ONNX Runtime with planted bugs and a
real SIGSEGV), opened in a real headless Chromium driven by Playwright; synthetic stores for the
migration, no-coverage and empty cases; bad input."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from dlcfuzz.report import ReportError, write_report
from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.run.store import Store, TestRecord
from dlcfuzz.spec import REGISTRY

CHROMIUM = Path("/usr/bin/chromium")
OPS = [REGISTRY[o] for o in ("Relu", "Sigmoid", "Neg", "Add", "Mul", "Abs", "Tanh", "MatMul", "Concat")]
PLANTED, SEGFAULT = "tests.fake_backends:Planted", "tests.fake_backends:Segfault"
NASTY = '<img src=x onerror="alert(1)"></td><b>&amp;'  # a title that must stay text


# -- fixtures ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    """A real guided campaign (so coverage is stored): Planted raises on Relu and shifts outputs
    when Sigmoid occurs, Segfault dies of SIGSEGV on Neg.  About 12 s.  Bounded by its test count,
    not by time, and with every backend on every test: the allocator follows CPU-seconds, which
    under CI's load once left this campaign with two bugs where the test needs three."""
    out = tmp_path_factory.mktemp("report") / "campaign"
    cfg = CampaignConfig(out, [PLANTED, SEGFAULT], OPS, budget_seconds=None, max_tests=30, ops=(1, 5),
                         strategy="guided", allocate=False)
    Campaign(cfg).run()
    return out


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright (its own browser downloads are never used)."""
    if not CHROMIUM.exists():
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright not installed: pip install playwright (part of dlcfuzz[dev])")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield b
        finally:
            b.close()


def open_page(browser, html: Path, screenshot: Path) -> dict:
    """Loads ``html`` from disk with every request intercepted (anything but the page itself is
    recorded and aborted), and returns what a person would see."""
    url = html.resolve().as_uri()
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    console: list[tuple[str, str]] = []
    errors: list[str] = []

    def route(r) -> None:
        requests.append(r.request.url)
        if r.request.url == url:
            r.continue_()
        else:
            r.abort()

    try:
        ctx.route("**/*", route)
        page = ctx.new_page()
        page.on("console", lambda m: console.append((m.type, m.text)))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url, wait_until="load")
        got = {
            "title": page.title(),
            "images": page.eval_on_selector_all(
                "img", "imgs => imgs.map(i => ({complete: i.complete, w: i.naturalWidth, h: i.naturalHeight}))"),
            "bug_rows": page.locator("#bugs tbody tr").count(),
            "links": page.eval_on_selector_all("#bugs a.sig", "as => as.map(a => a.href)"),
            "titles": page.eval_on_selector_all("#bugs td.title", "tds => tds.map(t => t.textContent)"),
            "badges": page.eval_on_selector_all(".badge", "bs => bs.map(b => b.textContent)"),
            "scripts": page.locator("script").count(),
            "text": page.inner_text("body"),
        }
        page.screenshot(path=str(screenshot), full_page=True)
    finally:
        ctx.close()
    got |= {"requests": requests, "console": console, "errors": errors}
    return got


def assert_clean(got: dict, html: Path) -> None:
    assert not got["errors"], got["errors"]
    assert not [m for m in got["console"] if m[0] == "error"], got["console"]
    assert got["requests"] == [html.resolve().as_uri()], got["requests"]  # nothing else was fetched
    assert got["scripts"] == 0
    for img in got["images"]:
        assert img["complete"] and img["w"] > 0 and img["h"] > 0, got["images"]


def assert_screenshot(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000, len(data)


def bug_rows(folder: Path) -> list[tuple]:
    import sqlite3

    db = sqlite3.connect(folder / "campaign.sqlite")
    try:
        return list(db.execute("SELECT signature, backend, oracle, dir FROM bugs ORDER BY first_seen, signature"))
    finally:
        db.close()


# -- the real campaign in a real browser --------------------------------------------------------------
def test_report_of_a_real_campaign_in_chromium(campaign: Path, browser, tmp_path: Path) -> None:
    bugs = bug_rows(campaign)
    backends = {b[1] for b in bugs}
    assert {PLANTED, SEGFAULT} <= backends, bugs  # the planted exception/shift and the real SIGSEGV
    # bundle extras the report shows: a reduction, a bug known upstream, an upstream report
    reduced, known, reported = (campaign / b[3] for b in bugs[:3])
    (reduced / "reduction.json").write_text(json.dumps({"ops_before": 5, "ops_after": 2}))
    (known / "known.json").write_text(json.dumps({"title": "known", "link": "https://example.org/issue/1"}))
    (reduced / "report.md").unlink(missing_ok=True)  # links to its bundle folder instead
    if not (reported / "report.md").exists():
        (reported / "report.md").write_text("# a report\n")

    html = write_report(campaign, tmp_path / "out" / "deeper" / "report.html")  # -o outside the campaign
    text = html.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text, re.I)  # no network asset or link
    got = open_page(browser, html, tmp_path / "report.png")
    assert_clean(got, html)
    assert_screenshot(tmp_path / "report.png")
    print(f"screenshot: {tmp_path / 'report.png'}", file=sys.stderr)

    assert got["bug_rows"] == len(bugs)
    # distinct bugs over time, throughput, validity, operator frequency, HirGen coverage, GenCoG diversity
    assert len(got["images"]) == 6, got["images"]
    assert "guided" in got["text"] and "30" in got["text"]
    assert "no generation coverage" not in got["text"].lower()
    assert "5 → 2 ops" in got["badges"] and "known upstream" in got["badges"]
    # every bug links to its report.md or bundle folder, relative to the page and resolving on disk
    targets = [Path(unquote(urlparse(h).path)) for h in got["links"]]
    assert len(targets) == len(bugs)
    by_sig = {}  # the rows are roots most different first (run/roots.py), not in the order found
    for target in targets:
        assert target.exists(), target
        by_sig[next(s for s, *_ in bugs if s in target.parts)] = target
    assert sorted(by_sig) == sorted(b[0] for b in bugs)
    assert by_sig[bugs[2][0]].name == "report.md" and by_sig[bugs[0][0]].is_dir()
    assert 'href="../../' in text  # relative, not absolute


def test_report_inside_the_campaign_links_relatively(campaign: Path) -> None:
    html = write_report(campaign, campaign)  # a folder: report.html in it
    assert html == campaign / "report.html"
    hrefs = re.findall(r'class="sig" href="([^"]+)"', html.read_text())
    assert hrefs and all(h.startswith("bugs/") for h in hrefs), hrefs
    assert all((campaign / unquote(h)).exists() for h in hrefs)


# -- synthetic stores: migration, no coverage, empty, escaping ------------------------------------------
def _store(folder: Path, config: dict, tests: list[tuple[list[str], str, bool]], bugs: list[tuple]) -> None:
    store = Store(folder)
    store.bind(config)
    for i, (ops, baseline, valid) in enumerate(tests):
        new = [b for b in bugs if b[-1] == i]
        for b in new:
            (folder / "bugs" / b[0]).mkdir(parents=True, exist_ok=True)
        store.commit(TestRecord(i, i, ops, baseline, valid, 1, valid, 0.05, 0.01, 0.01, 0.02, 0.01), [],
                     [(b[0], b[1], b[2], b[3], b[4], b[5], "msg") for b in new],
                     [(*b[:-1], f"bugs/{b[0]}") for b in new])
    store.close()


def test_migration_report_shows_harvest_discards_and_bugs_per_backend(tmp_path: Path, browser) -> None:
    folder = tmp_path / "mig"
    _store(folder, {"kind": "migrate", "sources": ["onnx-node"], "backends": ["ort", "tvm"], "prioritize": "opera",
                    "seed": 0},
           [(["Add"], "onnx-expect", True), (["Relu"], "discarded: NoTensorOutput: the call returns no tensor", False),
            (["torch.add"], "torch-library", True), (["Conv"], "onnx-expect", True)],
           [("aaaa000000000001", "crash", "exception", "tvm", "default", "import", NASTY, "compiler", 0),
            ("aaaa000000000002", "differential", "value", "ort", "disable_all", "run", "ort vs the library", "compiler",
             3)])
    store = Store(folder)
    store.set_meta("harvest", {"onnx-node": {"source": "onnx-node", "instances": 1147, "operators": 182,
                                             "skipped": {"string tensor": 26}, "seconds": 8.8}})
    store.close()
    html = write_report(folder, tmp_path / "mig.html")
    got = open_page(browser, html, tmp_path / "mig.png")
    assert_clean(got, html)  # the nasty title made no request and ran nothing
    assert got["titles"][0] == NASTY
    text = got["text"]
    assert "migration (library tests)" in text and "opera" in text
    assert "1147" in text and "NoTensorOutput: the call returns no tensor" in text
    assert re.search(r"Compiler bugs per backend\s+backend\s+compiler bugs\s+ort\s+1\s+tvm\s+1", text), text
    assert "No generation coverage recorded (migration campaign)" in text
    assert got["bug_rows"] == 2 and len(got["images"]) == 5  # bugs, throughput, rates, frequency, op types


def test_isra_campaign_without_coverage_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "isra"
    _store(folder, {"strategy": "isra", "seed": 3, "backends": ["ort"], "ops": [1, 3], "operators": ["Add", "Neg"]},
           [(["Add"], "reference/default", True), (["Add", "Neg"], "reference/default", True)], [])
    text = write_report(folder, tmp_path / "isra.html").read_text()
    assert "No generation coverage recorded (strategy isra)" in text
    assert "vertex/edge diversity was not recorded" in text
    assert "No bugs found." in text and 'id="bugs"' not in text
    assert text.count("data:image/png;base64,") == 4  # throughput, rates, frequency, operator types


def test_empty_campaign_is_a_valid_page(tmp_path: Path, browser) -> None:
    Store(tmp_path / "empty").close()
    html = write_report(tmp_path / "empty", tmp_path / "empty.html")
    got = open_page(browser, html, tmp_path / "empty.png")
    assert_clean(got, html)
    assert "no tests yet" in got["text"] and got["images"] == [] and got["bug_rows"] == 0


# -- bad input ----------------------------------------------------------------------------------------
def test_bad_input_is_a_one_line_report_error(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "file.txt").write_text("x")
    for bad in (tmp_path / "missing", tmp_path, tmp_path / "file.txt"):
        with pytest.raises(ReportError) as e:
            write_report(bad, tmp_path / "r.html")
        assert str(e.value) == f"{bad} is not a campaign folder (no campaign.sqlite)"
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "campaign.sqlite").write_text("not a database")
    with pytest.raises(ReportError, match=r"campaign\.sqlite is damaged .*dlcfuzz store rebuild") as e:
        write_report(corrupt, tmp_path / "r.html")
    assert "\n" not in str(e.value)
    Store(tmp_path / "ok").close()
    for name in ["matplotlib", *(m for m in sys.modules if m.startswith("matplotlib."))]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "dlcfuzz.report.plots", raising=False)
    with pytest.raises(ReportError, match=re.escape("needs matplotlib (pip install dlcfuzz[report])")):
        write_report(tmp_path / "ok", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()
