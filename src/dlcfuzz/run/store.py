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

    def test_ids(self) -> set[int]:
        """The ids of the committed tests (a resumed campaign runs the others)."""
        return {r[0] for r in self.db.execute("SELECT id FROM tests")}

    def valid_tests(self) -> int:
        """Committed tests that were valid (a migration's instance its library's own run kept)."""
        return self.db.execute("SELECT COUNT(*) FROM tests WHERE valid = 1").fetchone()[0]

    def discarded_by_reason(self) -> dict[str, int]:
        """Invalid tests per reason, most frequent first: a migration's discarded instances, whose
        ``baseline`` reads "discarded: REASON"."""
        return dict(self.db.execute("SELECT substr(baseline, 12), COUNT(*) FROM tests WHERE valid = 0 GROUP BY 1 "
                                    "ORDER BY 2 DESC").fetchall())

    def listed_bugs_per_backend(self) -> dict[str, int]:
        """Distinct bugs per backend, every category, those merged into another's root cause not counted."""
        return dict(self.db.execute("SELECT backend, COUNT(*) FROM bugs WHERE same_as = '' GROUP BY backend")
                    .fetchall())

    def declines(self) -> int:
        """Outcomes that were declines (unsupported, not bugs)."""
        return self.db.execute("SELECT COUNT(*) FROM outcomes WHERE unsupported = 1").fetchone()[0]

    def declines_per_backend(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT backend, COUNT(*) FROM outcomes WHERE unsupported = 1 GROUP BY backend"))

    def known_upstream_findings(self) -> int:
        """Findings of bugs known upstream: counted, with no bug row (not re-reported)."""
        return self.db.execute("SELECT COUNT(*) FROM findings WHERE signature NOT IN "
                               "(SELECT signature FROM bugs)").fetchone()[0]

    def unclassified_errors(self) -> list[tuple[str, str, str]]:
        """(backend, phase, error) of every failed outcome that no unsupported rule matched (so it was
        judged as a crash)."""
        return self.db.execute("SELECT backend, phase, error FROM outcomes WHERE status != 'ok' AND "
                               "status != 'skipped' AND unsupported = 0").fetchall()

    def migrated_frontend_coverage(self) -> list[tuple[str, str, str]]:
        """(source, provenance, newline-joined "file:line") of each migrated instance's measured frontend
        coverage (a migration campaign's store also holds its ``instances``)."""
        return self.db.execute("SELECT i.source, i.provenance, c.lines FROM frontend_coverage c "
                               "JOIN instances i ON i.id = c.test_id").fetchall()

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


class StoreReader:
    """A campaign store read without writing to it: opened read-only (``mode=ro``), so a campaign can be
    read while it runs and nothing is created or migrated in its folder; a WAL database in a folder that
    cannot be written (an archived campaign) is read as it is on disk.  The readers return what the
    tables hold; a table that a campaign of an older or other kind lacks reads as empty."""

    def __init__(self, folder: Path) -> None:
        path = folder / "campaign.sqlite"
        if not path.is_file():
            raise StoreError(f"{folder} is not a campaign folder (no campaign.sqlite)")
        uri = path.resolve().as_uri()
        try:
            self.db = self._open(f"{uri}?mode=ro")
        except sqlite3.Error as e:
            try:
                self.db = self._open(f"{uri}?mode=ro&immutable=1")
            except sqlite3.Error:
                raise StoreError(f"cannot read {path}: {e}") from None
        self.path = path
        self.tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    @staticmethod
    def _open(uri: str) -> sqlite3.Connection:
        db = sqlite3.connect(uri, uri=True)
        try:
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            db.close()
            raise
        return db

    def columns(self, table: str) -> set[str]:
        """The columns of ``table`` (none if the campaign has no such table)."""
        if table not in self.tables:
            return set()
        return {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}

    def meta(self) -> dict[str, str]:
        """Every meta entry as stored (JSON text)."""
        return dict(self.db.execute("SELECT key, value FROM meta")) if "meta" in self.tables else {}

    def meta_value(self, key: str) -> str | None:
        """One meta entry as stored (JSON text), or None."""
        if "meta" not in self.tables:
            return None
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def tests(self) -> list[tuple[int, str, str, int, int, float, float]]:
        """(id, ops, baseline, finite, valid, finished, seconds) of every test, by id."""
        if "tests" not in self.tables:
            return []
        return self.db.execute("SELECT id, ops, baseline, finite, valid, finished, seconds FROM tests "
                               "ORDER BY id").fetchall()

    def test_times(self) -> list[tuple[int, float, int]]:
        """(id, seconds, valid) of every test; a campaign that stored no seconds or validity reads as
        0.0 seconds and valid."""
        columns = self.columns("tests")
        if not columns:
            return []
        seconds = "seconds" if "seconds" in columns else "0.0"
        valid = "valid" if "valid" in columns else "1"
        return self.db.execute(f"SELECT id, {seconds}, {valid} FROM tests").fetchall()

    def bug_rows(self) -> list[sqlite3.Row]:
        """Every bug row as stored (whatever columns its campaign's version had), in the order found."""
        if "bugs" not in self.tables:
            return []
        self.db.row_factory = sqlite3.Row
        try:
            return self.db.execute("SELECT * FROM bugs ORDER BY first_seen, signature").fetchall()
        finally:
            self.db.row_factory = None

    def listed_bugs(self, category: str = "compiler") -> list[sqlite3.Row]:
        """The bugs listed in ``category`` (every bug, for a campaign stored before categories), those
        merged into another's root cause left out, in the order found."""
        columns = self.columns("bugs")
        if not columns:
            return []
        where, args = ("category = ?", (category,)) if "category" in columns else ("1", ())
        if "same_as" in columns:
            where += " AND same_as = ''"
        self.db.row_factory = sqlite3.Row
        try:
            return self.db.execute(f"SELECT * FROM bugs WHERE {where} ORDER BY first_seen", args).fetchall()
        finally:
            self.db.row_factory = None

    def time_split(self) -> tuple[int, float, float, float, float, float]:
        """(tests, their seconds, and of those: generation, inputs and baseline, inside the compilers,
        oracle)."""
        n, *sums = self.db.execute("SELECT COUNT(*), SUM(seconds), SUM(t_generate), SUM(t_inputs), "
                                   "SUM(t_compilers), SUM(t_oracle) FROM tests").fetchone()
        return (n, *(s or 0.0 for s in sums))

    def has_test(self, test_id: int) -> bool:
        return self.db.execute("SELECT 1 FROM tests WHERE id = ?", (test_id,)).fetchone() is not None

    def finding_signatures(self, test_id: int, backend: str) -> set[str]:
        """The signatures of one test's findings on one backend."""
        return {r[0] for r in self.db.execute("SELECT signature FROM findings WHERE test_id = ? AND backend = ?",
                                              (test_id, backend))}

    def declines_of(self, test_id: int, backend: str) -> int:
        """How many of one backend's outcomes on one test were declines."""
        return self.db.execute("SELECT COUNT(*) FROM outcomes WHERE test_id = ? AND backend = ? AND "
                               "unsupported = 1", (test_id, backend)).fetchone()[0]

    def outcome_counts_per_variant(self) -> list[tuple[str, str, str, int, int]]:
        """(backend, variant, status, unsupported, count) over every outcome, by backend and variant."""
        return self.db.execute("SELECT backend, variant, status, unsupported, COUNT(*) FROM outcomes GROUP BY "
                               "backend, variant, status, unsupported ORDER BY backend, variant").fetchall()

    def backend_test_totals(self) -> list[tuple[str, int, int, float, int, int]]:
        """Per (backend, test): (backend, test id, whether every variant declined (the least
        ``unsupported``), seconds, declined errors, variants run)."""
        return self.db.execute("SELECT backend, test_id, MIN(unsupported), SUM(seconds), "
                               "SUM(status = 'error' AND unsupported = 1), COUNT(*) FROM outcomes "
                               "GROUP BY backend, test_id").fetchall()

    def first_coverage(self) -> list[tuple[str, int]]:
        """(criterion, test id) of every generation-coverage key, by the test that covered it first."""
        if "coverage" not in self.tables:
            return []
        return self.db.execute("SELECT criterion, test_id FROM coverage ORDER BY test_id").fetchall()

    def outcome_counts(self) -> list[tuple[str, str, int, int]]:
        """(backend, status, unsupported, count) over every outcome."""
        if "outcomes" not in self.tables:
            return []
        return self.db.execute("SELECT backend, status, unsupported, COUNT(*) FROM outcomes "
                               "GROUP BY 1, 2, 3").fetchall()

    def known_upstream_findings_per_backend(self) -> dict[str, int]:
        """Per backend, the findings with no bug row: bugs known upstream, counted, not re-reported."""
        if not {"findings", "bugs"} <= self.tables:
            return {}
        return dict(self.db.execute("SELECT backend, COUNT(*) FROM findings WHERE signature NOT IN "
                                    "(SELECT signature FROM bugs) GROUP BY backend"))

    def backends_seen(self) -> set[str]:
        """The backends named by the bugs and outcomes (of tables that have a backend column)."""
        seen: set[str] = set()
        for table in ("bugs", "outcomes"):
            if "backend" in self.columns(table):
                seen.update(r[0] for r in self.db.execute(f"SELECT DISTINCT backend FROM {table}"))
        return seen

    # -- a migration campaign's instances (instances.SCHEMA in migrate/), joined with its tests ----------
    def instance_counts(self) -> tuple[int, int] | None:
        """(instances, operators) a migration harvested; None for a campaign without instances."""
        if "instances" not in self.tables:
            return None
        try:
            return self.db.execute("SELECT COUNT(*), COUNT(DISTINCT op) FROM instances").fetchone()
        except sqlite3.Error:
            return None

    def executed_instances(self) -> list[tuple[int, str, str, str, str, str, str]]:
        """(id, library, op, source, provenance, params, tensors) of every instance that has a test row
        (params and tensors as JSON text), by id."""
        return self.db.execute("SELECT id, library, op, source, provenance, params, tensors FROM instances "
                               "WHERE id IN (SELECT id FROM tests) ORDER BY id").fetchall()

    def executed_findings(self) -> list[tuple[int, str, str]]:
        """(test id, signature, backend) of every finding of a test that has a test row."""
        return self.db.execute("SELECT test_id, signature, backend FROM findings "
                               "WHERE test_id IN (SELECT id FROM tests)").fetchall()

    def executed_frontend_coverage(self) -> list[tuple[int, str, str]]:
        """(test id, backend, newline-joined "file:line") of the frontend coverage measured per test."""
        if "frontend_coverage" not in self.tables:
            return []
        return self.db.execute("SELECT test_id, backend, lines FROM frontend_coverage "
                               "WHERE test_id IN (SELECT id FROM tests)").fetchall()

    def close(self) -> None:
        self.db.close()
