"""The campaign store: one SQLite database per campaign folder, plus one folder per distinct bug.

Every test is committed in one transaction (its row, its outcomes, its findings, the bug
counters) after its bug bundles are on disk, so a campaign killed at any instant loses at most
the test in flight, and rerunning the same command resumes after the last committed test.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tests (
    id INTEGER PRIMARY KEY, seed INTEGER NOT NULL, n_ops INTEGER NOT NULL, ops TEXT NOT NULL,
    baseline TEXT NOT NULL, finite INTEGER NOT NULL, input_attempts INTEGER NOT NULL, valid INTEGER NOT NULL,
    finished REAL NOT NULL, seconds REAL NOT NULL, t_generate REAL NOT NULL, t_inputs REAL NOT NULL,
    t_compilers REAL NOT NULL, t_oracle REAL NOT NULL);
CREATE TABLE IF NOT EXISTS outcomes (
    test_id INTEGER NOT NULL, backend TEXT NOT NULL, variant TEXT NOT NULL, status TEXT NOT NULL,
    phase TEXT NOT NULL, error TEXT NOT NULL, unsupported INTEGER NOT NULL, seconds REAL NOT NULL);
CREATE TABLE IF NOT EXISTS bugs (
    signature TEXT PRIMARY KEY, oracle TEXT NOT NULL, kind TEXT NOT NULL, backend TEXT NOT NULL,
    variant TEXT NOT NULL, phase TEXT NOT NULL, title TEXT NOT NULL, category TEXT NOT NULL,
    first_test INTEGER NOT NULL, hits INTEGER NOT NULL, dir TEXT NOT NULL, first_seen REAL NOT NULL,
    root TEXT NOT NULL DEFAULT '', same_as TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS coverage (criterion TEXT NOT NULL, key TEXT NOT NULL, test_id INTEGER NOT NULL,
    PRIMARY KEY (criterion, key));
CREATE TABLE IF NOT EXISTS frontend_coverage (test_id INTEGER NOT NULL, backend TEXT NOT NULL, lines TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS findings (
    test_id INTEGER NOT NULL, signature TEXT NOT NULL, oracle TEXT NOT NULL, kind TEXT NOT NULL,
    backend TEXT NOT NULL, variant TEXT NOT NULL, phase TEXT NOT NULL, message TEXT NOT NULL);
"""


@dataclass
class TestRecord:
    __test__ = False  # not a pytest test class

    id: int
    seed: int
    ops: list[str]
    baseline: str
    finite: bool
    input_attempts: int
    valid: bool
    seconds: float
    t_generate: float
    t_inputs: float
    t_compilers: float
    t_oracle: float


class StoreError(Exception):
    pass


class Store:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "bugs").mkdir(exist_ok=True)
            self.db = sqlite3.connect(folder / "campaign.sqlite", isolation_level=None, check_same_thread=False)
            self.db.executescript(SCHEMA)
            self._upgrade()
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot use campaign folder {folder}: {e}") from None

    def _upgrade(self) -> None:
        """Campaigns stored before bugs had a category flagged baseline suspects as reference_suspect."""
        columns = {r[1] for r in self.db.execute("PRAGMA table_info(bugs)")}
        if "category" not in columns:
            self.db.execute("ALTER TABLE bugs ADD COLUMN category TEXT NOT NULL DEFAULT 'compiler'")
            self.db.execute("UPDATE bugs SET category = 'baseline' WHERE reference_suspect = 1")
        for column in ("root", "same_as"):  # campaigns stored before reductions merged root causes
            if column not in columns:
                self.db.execute(f"ALTER TABLE bugs ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")

    # -- campaign identity ------------------------------------------------------------------------
    def bind(self, config: dict[str, Any]) -> bool:
        """Records the campaign's configuration, or checks it against the stored one.  Returns
        whether this is a resumption; raises StoreError when the folder holds another campaign."""
        row = self.db.execute("SELECT value FROM meta WHERE key='config'").fetchone()
        text = json.dumps(config, sort_keys=True)
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('config', ?)", (text,))
            return False
        if row[0] != text:
            old = json.loads(row[0])
            diff = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
            raise StoreError(f"{self.folder} holds a campaign with other settings ({', '.join(diff)}); "
                             "use another --out folder")
        return True

    def get_meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def next_test_id(self) -> int:
        last = self.db.execute("SELECT MAX(id) FROM tests").fetchone()[0]
        return 0 if last is None else last + 1  # not `last or -1`: test 0 is a committed test

    def bug_signatures(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT signature FROM bugs")}

    # -- one test, atomically -----------------------------------------------------------------------
    def commit(self, t: TestRecord, outcomes: list[tuple], findings: list[tuple], new_bugs: list[tuple],
               coverage: list[tuple[str, str]] = (), frontend_coverage: list[tuple[str, str]] = ()) -> None:
        """outcomes: (backend, variant, status, phase, error, unsupported, seconds);
        findings: (signature, oracle, kind, backend, variant, phase, message);
        new_bugs: (signature, oracle, kind, backend, variant, phase, title, category, dir), category being
        whose fault the bug is (``oracle.CATEGORIES``);
        coverage: (criterion, key) the test's graph covered first;
        frontend_coverage: (backend, newline-joined "file:line") the statements a frontend ran to import the test."""
        now = time.time()
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("INSERT INTO tests VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       (t.id, t.seed, len(t.ops), ",".join(t.ops), t.baseline, int(t.finite), t.input_attempts,
                        int(t.valid), now, t.seconds, t.t_generate, t.t_inputs, t.t_compilers, t.t_oracle))
            db.executemany("INSERT INTO outcomes VALUES (?,?,?,?,?,?,?,?)", [(t.id, *o) for o in outcomes])
            db.executemany("INSERT OR IGNORE INTO coverage VALUES (?,?,?)", [(*c, t.id) for c in coverage])
            db.executemany("INSERT INTO frontend_coverage VALUES (?,?,?)", [(t.id, *c) for c in frontend_coverage])
            for b in new_bugs:
                db.execute("INSERT OR IGNORE INTO bugs (signature, oracle, kind, backend, variant, phase, title, "
                           "category, first_test, hits, dir, first_seen) VALUES (?,?,?,?,?,?,?,?,?,0,?,?)",
                           (*b[:8], t.id, b[8], now))
            for f in findings:
                db.execute("INSERT INTO findings VALUES (?,?,?,?,?,?,?,?)", (t.id, *f))
                db.execute("UPDATE bugs SET hits = hits + 1 WHERE signature = ?", (f[0],))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def merge_root(self, signature: str, root: str, title: str = "") -> None:
        """Records a bug's root cause (``dedup.root_cause`` of its reduced case, or the signature its
        reduction found it under): of the bugs with one root, the first found is listed and the others
        point to it (``same_as``). ``title``: the bug's title under that root, where it changed."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("UPDATE bugs SET root = ? WHERE signature = ?", (root, signature))
            if title:
                db.execute("UPDATE bugs SET title = ? WHERE signature = ?", (title, signature))
            first = db.execute("SELECT signature FROM bugs WHERE root = ? ORDER BY first_seen LIMIT 1",
                               (root,)).fetchone()[0]
            db.execute("UPDATE bugs SET same_as = CASE WHEN signature = ? THEN '' ELSE ? END WHERE root = ?",
                       (first, first, root))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def set_category(self, signature: str, category: str) -> None:
        """Moves a bug to another category (a reduced case that the other compilers outvote is the
        baseline's issue, counted apart)."""
        self.db.execute("UPDATE bugs SET category = ? WHERE signature = ?", (category, signature))

    # -- reading ----------------------------------------------------------------------------------------
    def coverage(self) -> list[tuple[str, str]]:
        """The generation coverage of every committed test: (criterion, key)."""
        return list(self.db.execute("SELECT criterion, key FROM coverage"))

    def bugs(self, category: str | None = None, merged: bool = False) -> list[sqlite3.Row]:
        """The distinct bugs in the order found (of one category, if given), each with ``variants``:
        every variant of its backend it was seen in, and ``same_root``: the signatures merged into it.
        ``merged``: the bugs merged into another's root cause instead."""
        self.db.row_factory = sqlite3.Row
        try:
            where, args = ("AND category = ?", (category,)) if category else ("", ())
            return list(self.db.execute(
                "SELECT bugs.*, (SELECT GROUP_CONCAT(DISTINCT variant) FROM findings f "
                "WHERE f.signature = bugs.signature) AS variants, (SELECT GROUP_CONCAT(d.signature) FROM bugs d "
                f"WHERE d.same_as = bugs.signature) AS same_root FROM bugs WHERE (same_as != '') = ? {where} "
                "ORDER BY first_seen", (int(merged), *args)))
        finally:
            self.db.row_factory = None

    def categories(self) -> dict[str, int]:
        """Distinct bugs per category (those merged into another's root cause not counted)."""
        return dict(self.db.execute("SELECT category, COUNT(*) FROM bugs WHERE same_as = '' GROUP BY category"))

    def merged(self) -> int:
        """Bugs merged into another's root cause."""
        return self.db.execute("SELECT COUNT(*) FROM bugs WHERE same_as != ''").fetchone()[0]

    def summary(self) -> dict[str, Any]:
        q = self.db.execute
        n, valid, finite, secs = q("SELECT COUNT(*), SUM(valid), SUM(finite), SUM(seconds) FROM tests").fetchone()
        return {
            "tests": n or 0, "valid": valid or 0, "finite": finite or 0, "test_seconds": secs or 0.0,
            "bugs": q("SELECT COUNT(*) FROM bugs").fetchone()[0],
            "findings": q("SELECT COUNT(*) FROM findings").fetchone()[0],
        }

    def close(self) -> None:
        self.db.close()
