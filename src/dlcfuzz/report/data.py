"""Everything the report shows, read from a campaign folder without writing to it.

The store is opened read-only (``run.store.StoreReader``), so a report can be made while the campaign
runs and never creates or migrates anything in the folder; tables a campaign of an older or other
kind lacks read as empty.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlcfuzz.run.roots import Bug, BugList
from dlcfuzz.run.roots import read as read_bugs
from dlcfuzz.run.store import StoreError, StoreReader


class ReportError(Exception):
    """Bad input for a report (one line)."""


@dataclass
class TestRow:
    __test__ = False  # not a pytest test class

    id: int
    ops: list[str]
    baseline: str
    finite: bool
    valid: bool
    finished: float
    seconds: float


@dataclass
class BugRow:
    signature: str
    oracle: str
    kind: str
    backend: str
    variant: str
    phase: str
    title: str
    category: str  # whose fault: compiler, baseline or exporter (oracle.CATEGORIES)
    first_test: int
    hits: int
    dir: str
    first_seen: float
    known: dict[str, Any] | None = None  # known upstream: known.json's content (or {} from a ``known`` column)
    reduction: dict[str, Any] | None = None  # reduction.json's content
    members: list[BugRow] = field(default_factory=list)  # a root's bugs merged into it (one root cause)


@dataclass
class CampaignData:
    folder: Path
    config: dict[str, Any]
    meta: dict[str, Any]  # every meta key but config
    tests: list[TestRow]  # by id
    bugs: list[BugRow]  # the roots (``run.roots``): compiler bugs first, each category's most different first
    coverage: dict[str, list[int]]  # criterion -> the test ids that covered each key first, sorted
    outcomes: dict[str, Counter]  # backend -> status counts ("unsupported" counted apart from "error")
    known_findings: Counter = field(default_factory=Counter)  # backend -> findings with no bug row
    instances: tuple[int, int] | None = None  # migrations: (instances, operators) harvested
    versions: dict[str, str] = field(default_factory=dict)
    listing: BugList = field(default_factory=lambda: BugList([]))  # the one count (``run.roots.read``)
    declines: int = 0

    @property
    def kind(self) -> str:
        return "migrate" if self.config.get("kind") == "migrate" else "fuzz"

    @property
    def start(self) -> float:
        """The campaign's start: when its first test began."""
        return min((t.finished - t.seconds for t in self.tests), default=0.0)

    @property
    def end(self) -> float:
        return max((t.finished for t in self.tests), default=self.start)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else {"note": str(value)}


def load(folder: Path) -> CampaignData:
    try:
        store = StoreReader(folder)
    except StoreError as e:
        raise ReportError(str(e)) from None
    try:
        return _load(folder, store)
    except sqlite3.Error as e:
        raise ReportError(f"cannot read {folder / 'campaign.sqlite'}: {e}") from None
    finally:
        store.close()


def _load(folder: Path, store: StoreReader) -> CampaignData:
    meta = {k: _json(v) for k, v in store.meta().items()}
    config = meta.pop("config", {})
    if not isinstance(config, dict):
        config = {}
    tests = [TestRow(id_, [o for o in ops.split(",") if o], baseline, bool(finite), bool(valid), finished, seconds)
             for id_, ops, baseline, finite, valid, finished, seconds in store.tests()]
    listing = read_bugs(store, folder)  # the roots and counts ``dlcfuzz bugs`` and the summary line show
    bugs = []
    for root in listing.roots:
        b = _bug_row(folder, root)
        b.members = [_bug_row(folder, m) for m in root.members]
        bugs.append(b)
    coverage: dict[str, list[int]] = {}
    for criterion, test_id in store.first_coverage():
        coverage.setdefault(criterion, []).append(test_id)
    outcomes: dict[str, Counter] = {}
    for backend, status, unsupported, n in store.outcome_counts():
        outcomes.setdefault(backend, Counter())["unsupported" if unsupported else status] += n
    known_findings: Counter = Counter(store.known_upstream_findings_per_backend())
    instances = store.instance_counts()
    data = CampaignData(folder, config, meta, tests, bugs, coverage, outcomes, known_findings, instances)
    data.listing, data.declines = listing, store.declines()
    data.versions = _versions(data)
    return data


def _bug_row(folder: Path, bug: Bug) -> BugRow:
    """What the report shows of one bug: its row, and its bundle's known.json and reduction.json."""
    b = BugRow(bug.signature, bug.oracle, bug.kind, bug.backend, bug.variant, bug.phase, bug.title, bug.category,
               bug.first_test, bug.hits, bug.dir, bug.first_seen)
    bundle = folder / b.dir
    b.known = _read_json(bundle / "known.json")
    stored = bug.row.get("known")
    if b.known is None and stored:
        b.known = _json(stored) if isinstance(stored, str) else {}
        if not isinstance(b.known, dict):
            b.known = {"note": str(b.known)}
    b.reduction = _read_json(bundle / "reduction.json")
    return b


def _versions(data: CampaignData) -> dict[str, str]:
    """Compiler versions: a ``versions`` meta entry if the campaign stored one, else what the bug
    bundles recorded (finding.json's compiler_version)."""
    stored = data.meta.get("versions")
    if isinstance(stored, dict):
        return {str(k): str(v) for k, v in stored.items()}
    found: dict[str, str] = {}
    for b in data.bugs:
        if b.backend in found:
            continue
        info = _read_json(data.folder / b.dir / "finding.json") or {}
        if info.get("compiler_version"):
            found[b.backend] = str(info["compiler_version"])
    return found
