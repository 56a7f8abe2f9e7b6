"""The campaign store: one SQLite database per campaign folder, plus one folder per distinct bug.

Every test is committed in one transaction (its row, its outcomes, its findings, the bug
counters) after its bug bundles are on disk, so a campaign killed at any instant loses at most
the test in flight, and rerunning the same command resumes after the last committed test.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlcfuzz import __version__

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


# the store's layout: 1 is every store written before the version was recorded (``meta`` has no
# "schema"), upgraded in place by ``Store._upgrade``; a store of a later schema than this is refused
SCHEMA_VERSION = 2
STORE_FILE = "campaign.sqlite"
BUNDLE_INDEX = "store.json"  # in each bug bundle: what the store lists about the bug (to rebuild it)
_HEADER = b"SQLite format 3\x00"
_REQUIRED = ("meta", "tests", "bugs", "findings")


class StoreError(Exception):
    pass


class StoreDamaged(StoreError):
    """The store cannot be trusted (damaged, not SQLite, or missing beside bug bundles): one line that
    says what is wrong and names the command that rebuilds it."""

    def __init__(self, folder: Path, what: str) -> None:
        self.folder, self.what = folder, what
        super().__init__(f"the campaign store {folder / STORE_FILE} is damaged ({what}); rebuild it from what is "
                         f"readable and the bug bundles with: dlcfuzz store rebuild {folder}")


def bundle_folders(folder: Path) -> list[Path]:
    """The bug bundles of a campaign folder (``bugs/<signature>/finding.json``)."""
    bugs = folder / "bugs"
    return sorted(p.parent for p in bugs.glob("*/finding.json")) if bugs.is_dir() else []


def _connect_ro(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only (``immutable`` where its folder cannot be written), its schema read."""
    uri = path.resolve().as_uri()
    try:
        return _probe(sqlite3.connect(f"{uri}?mode=ro", uri=True))
    except sqlite3.Error:
        return _probe(sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True))


def _probe(db: sqlite3.Connection) -> sqlite3.Connection:
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        db.close()
        raise
    return db


def store_problem(folder: Path, thorough: bool = False) -> str | None:
    """What is wrong with the store of ``folder`` (None: sound, or a folder with neither a store nor
    bug bundles, where a campaign starts).  ``thorough``: SQLite's ``integrity_check`` rather than its
    ``quick_check`` (which skips the index contents)."""
    path = folder / STORE_FILE
    if not path.exists():
        n = len(bundle_folders(folder))
        return f"there is no {STORE_FILE}, but {n} bug bundle(s) in {folder / 'bugs'}" if n else None
    try:
        with open(path, "rb") as f:
            head = f.read(len(_HEADER))
    except OSError as e:
        return f"cannot read it: {e.strerror or e}"
    if not head:  # SQLite's own new file, nothing written yet
        n = len(bundle_folders(folder))
        return f"it is empty, but there are {n} bug bundle(s)" if n else None
    if head != _HEADER:
        return f"not an SQLite database: it starts with {head[:8]!r}"
    try:
        db = _connect_ro(path)
    except sqlite3.Error as e:
        return str(e)
    try:
        rows = db.execute("PRAGMA integrity_check" if thorough else "PRAGMA quick_check").fetchall()
        if [tuple(r) for r in rows] != [("ok",)]:
            return f"{len(rows)} problem(s), first: {rows[0][0]}"
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return None if not bundle_folders(folder) else "it holds no tables, but there are bug bundles"
        missing = [t for t in _REQUIRED if t not in tables]
        if missing:
            return f"table(s) {', '.join(missing)} missing"
    except sqlite3.Error as e:
        return str(e)
    finally:
        db.close()
    return None


def _too_new(folder: Path, meta: dict[str, str]) -> None:
    """Refuses a store written by a dlcfuzz whose schema is later than this one's."""
    try:
        schema = int(json.loads(meta.get("schema", "1")))
    except (ValueError, TypeError):
        schema = SCHEMA_VERSION + 1
    if schema > SCHEMA_VERSION:
        writer = json.loads(meta["writer"]) if "writer" in meta else "a later version"
        raise StoreError(f"{folder / STORE_FILE} was written by dlcfuzz {writer} (store schema {schema}); this "
                         f"dlcfuzz {__version__} reads schemas up to {SCHEMA_VERSION}: upgrade dlcfuzz to read it")


def _bug_entries(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every bug row as a dict, listed or merged, in the order found, whatever columns its campaign's
    version had (``category`` from ``reference_suspect``, ``root`` and ``same_as`` empty, ``dir``
    ``bugs/SIGNATURE`` where absent), with ``variants`` (the variants of its backend it was seen in),
    ``message`` (its first finding's) and ``ops`` (its first test's operators, comma-joined): what
    ``run.roots`` folds, orders and counts for every command that lists bugs."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "bugs" not in tables:
        return []
    columns = {r[1] for r in db.execute("PRAGMA table_info(bugs)")}
    has_findings = "findings" in tables and {"signature", "variant", "message"} <= {
        r[1] for r in db.execute("PRAGMA table_info(findings)")}
    has_tests = "tests" in tables and "first_test" in columns
    variants = ("(SELECT GROUP_CONCAT(DISTINCT variant) FROM findings f WHERE f.signature = bugs.signature)"
                if has_findings else "NULL")
    message = ("(SELECT message FROM findings f WHERE f.signature = bugs.signature ORDER BY f.test_id LIMIT 1)"
               if has_findings else "NULL")
    ops = "(SELECT ops FROM tests t WHERE t.id = bugs.first_test)" if has_tests else "NULL"
    order = "first_seen, signature" if "first_seen" in columns else "signature"
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute(f"SELECT bugs.*, {variants} AS found_variants, {message} AS found_message, "
                          f"{ops} AS found_ops FROM bugs ORDER BY {order}").fetchall()
    finally:
        db.row_factory = None
    entries = []
    for r in rows:
        e = {k: r[k] for k in r.keys() if not k.startswith("found_")}  # noqa: SIM118 (a Row)
        if "category" not in e:
            e["category"] = "baseline" if e.get("reference_suspect") else "compiler"
        for key in ("oracle", "kind", "backend", "variant", "phase", "title", "root", "same_as"):
            e[key] = str(e.get(key) or "")
        e.setdefault("first_test", 0)
        e.setdefault("hits", 0)
        e.setdefault("first_seen", 0.0)
        e["dir"] = e.get("dir") or f"bugs/{e['signature']}"
        found = r["found_variants"] or e["variant"]
        e["variants"] = sorted(set(found.split(","))) if found else []
        e["message"] = r["found_message"] or ""
        e["ops"] = [o for o in (r["found_ops"] or "").split(",") if o]
        entries.append(e)
    return entries


class Store:
    """A campaign's store, opened for writing.  ``lock``: take the folder's writer lock first (a
    campaign or a migration: one writer per folder, ``guard.CampaignLock``).  ``read_only``: its
    readers only, on a folder that cannot be written (an archived campaign; nothing upgraded)."""

    def __init__(self, folder: Path, lock: bool = False, check: bool = True, read_only: bool = False) -> None:
        self.folder = folder
        self._lock = None
        if read_only:
            problem = store_problem(folder) if check else None
            if problem is not None:
                raise StoreDamaged(folder, problem)
            try:
                self.db = _connect_ro(folder / STORE_FILE)
            except sqlite3.Error as e:
                raise StoreError(f"cannot read {folder / STORE_FILE}: {e}") from None
            try:
                _too_new(folder, dict(self.db.execute("SELECT key, value FROM meta")) if self._has_meta() else {})
            except StoreError:
                self.db.close()
                raise
            return
        if lock:
            from dlcfuzz.run.guard import CampaignBusy, CampaignLock

            try:
                self._lock = CampaignLock(folder).acquire()
            except CampaignBusy as e:
                raise StoreError(str(e)) from None
        try:
            problem = store_problem(folder) if check else None
            if problem is not None:
                raise StoreDamaged(folder, problem)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "bugs").mkdir(exist_ok=True)
            self.db = sqlite3.connect(folder / STORE_FILE, isolation_level=None, check_same_thread=False)
            _too_new(folder, dict(self.db.execute("SELECT key, value FROM meta")) if self._has_meta() else {})
            self.db.executescript(SCHEMA)
            self._upgrade()
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            # the WAL folded into the database every 1 MiB and cut back to that size (SQLite's default lets
            # it grow to 4 MiB and keeps it there: more than a small file system can hold beside the rest)
            self.db.execute("PRAGMA wal_autocheckpoint=256")
            self.db.execute("PRAGMA journal_size_limit=1048576")
        except StoreError:
            self._abandon()
            raise
        except (OSError, sqlite3.Error) as e:
            self._abandon()
            raise StoreError(f"cannot use campaign folder {folder}: {e}") from None

    def _abandon(self) -> None:
        """A store that could not be opened: its connection closed, its lock released."""
        if hasattr(self, "db"):
            self.db.close()
        self._unlock()

    def _has_meta(self) -> bool:
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is not None

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _upgrade(self) -> None:
        """Brings a store of an older schema forward (schema 1: every store before the version was
        recorded), and records the schema and the dlcfuzz that wrote it."""
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is not None and int(json.loads(row[0])) >= SCHEMA_VERSION:
            return
        columns = {r[1] for r in self.db.execute("PRAGMA table_info(bugs)")}
        # campaigns stored before bugs had a category flagged baseline suspects as reference_suspect
        if "category" not in columns:
            self.db.execute("ALTER TABLE bugs ADD COLUMN category TEXT NOT NULL DEFAULT 'compiler'")
            self.db.execute("UPDATE bugs SET category = 'baseline' WHERE reference_suspect = 1")
        for column in ("root", "same_as"):  # campaigns stored before reductions merged root causes
            if column not in columns:
                self.db.execute(f"ALTER TABLE bugs ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
        self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                            [("schema", json.dumps(SCHEMA_VERSION)), ("writer", json.dumps(__version__))])

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
            if db.in_transaction:  # SQLite rolls a failed COMMIT (a full disk) back by itself
                db.execute("ROLLBACK")
            raise
        self.export_bugs({b[0] for b in new_bugs} | {f[0] for f in findings})

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
            if db.in_transaction:  # SQLite rolls a failed COMMIT (a full disk) back by itself
                db.execute("ROLLBACK")
            raise
        self.export_bugs({r[0] for r in db.execute("SELECT signature FROM bugs WHERE root = ?", (root,))})

    def has_root(self, key: str) -> bool:
        """Whether any bug is merged under root key ``key``."""
        return self.db.execute("SELECT 1 FROM bugs WHERE root = ? LIMIT 1", (key,)).fetchone() is not None

    def rename_root(self, old: str, new: str) -> None:
        """Moves every bug merged under root key ``old`` to ``new`` (``dedup.join_roots``: two keys found
        to name one root)."""
        for (signature,) in self.db.execute("SELECT signature FROM bugs WHERE root = ?", (old,)).fetchall():
            self.merge_root(signature, new)

    def set_category(self, signature: str, category: str) -> None:
        """Moves a bug to another category (a reduced case that the other compilers outvote is the
        baseline's issue, counted apart)."""
        self.db.execute("UPDATE bugs SET category = ? WHERE signature = ?", (category, signature))
        self.export_bugs({signature})

    def export_bugs(self, signatures: set[str]) -> None:
        """Writes what the store lists about each bug (its row and the variants it was seen in) into its
        bundle as ``store.json``, after the store committed it: the bundles alone rebuild the listing
        (``rebuild_store``).  Written whole or not at all (a full disk leaves the previous one)."""
        if not signatures:
            return
        marks = ",".join("?" * len(signatures))
        self.db.row_factory = sqlite3.Row
        try:
            rows = self.db.execute(
                "SELECT bugs.*, (SELECT GROUP_CONCAT(DISTINCT variant) FROM findings f WHERE f.signature = "
                f"bugs.signature) AS variants FROM bugs WHERE signature IN ({marks})", sorted(signatures)).fetchall()
        finally:
            self.db.row_factory = None
        for r in rows:
            folder = self.folder / r["dir"]
            if not folder.is_dir():
                continue
            entry = {k: r[k] for k in r.keys() if k != "variants"}  # noqa: SIM118 (a Row)
            entry["variants"] = sorted(set((r["variants"] or r["variant"]).split(",")))
            tmp = folder / f"{BUNDLE_INDEX}.tmp"
            tmp.write_text(json.dumps(entry, indent=1))
            os.replace(tmp, folder / BUNDLE_INDEX)

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

    def bug_entries(self) -> list[dict[str, Any]]:
        """Every bug, listed or merged, as ``run.roots`` reads it (``_bug_entries``)."""
        return _bug_entries(self.db)

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
        self._unlock()


class StoreReader:
    """A campaign store read without writing to it: opened read-only (``mode=ro``), so a campaign can be
    read while it runs and nothing is created or migrated in its folder; a WAL database in a folder that
    cannot be written (an archived campaign) is read as it is on disk.  The readers return what the
    tables hold; a table that a campaign of an older or other kind lacks reads as empty."""

    def __init__(self, folder: Path) -> None:
        path = folder / STORE_FILE
        problem = store_problem(folder)
        if problem is not None:
            raise StoreDamaged(folder, problem)
        if not path.is_file():
            raise StoreError(f"{folder} is not a campaign folder (no {STORE_FILE})")
        try:
            self.db = _connect_ro(path)
        except sqlite3.Error as e:
            raise StoreError(f"cannot read {path}: {e}") from None
        self.path = path
        self.tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        try:
            _too_new(folder, self.meta())
        except StoreError:
            self.db.close()
            raise

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

    def bug_entries(self) -> list[dict[str, Any]]:
        """Every bug, listed or merged, as ``run.roots`` reads it (``_bug_entries``)."""
        return _bug_entries(self.db)

    def declines(self) -> int:
        """Outcomes that were declines (unsupported, not bugs); 0 for a campaign without outcomes."""
        if "unsupported" not in self.columns("outcomes"):
            return 0
        return self.db.execute("SELECT COUNT(*) FROM outcomes WHERE unsupported = 1").fetchone()[0]

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


def checkpoint(folder: Path) -> None:
    """Folds the store's WAL into the database file and empties it (a store no process writes to)."""
    db = sqlite3.connect(folder / STORE_FILE)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


# -- rebuilding a damaged store -------------------------------------------------------------------------
@dataclass
class Rebuilt:
    """What ``rebuild_store`` did: where the old file went, the rows it read back per table, and the
    bugs it restored from bundles (those the old file had lost)."""

    kept: Path | None = None
    rows: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # table -> what stopped reading it
    from_bundles: int = 0
    bad_bundles: list[str] = field(default_factory=list)
    bugs: int = 0


def _readable_rows(db: sqlite3.Connection, table: str, gap_limit: int = 200_000) -> tuple[list[str], list, str]:
    """The rows of ``table`` that can still be read: forwards until the first damaged page, backwards
    from the end until the same, then the rows in between one by one (a damaged leaf loses only its own
    rows).  Returns (columns, rows, what stopped a scan or "")."""
    columns = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
    got: dict[int, tuple] = {}
    error = ""
    for order in ("", " ORDER BY rowid DESC"):
        try:
            for row in db.execute(f'SELECT rowid, * FROM "{table}"{order}'):
                got[row[0]] = row[1:]
        except sqlite3.DatabaseError as e:
            error = str(e)
    if error and got:
        try:
            lo, hi = db.execute(f'SELECT MIN(rowid), MAX(rowid) FROM "{table}"').fetchone()
        except sqlite3.DatabaseError:
            lo, hi = min(got), max(got)
        missing = [i for i in range(lo, hi + 1) if i not in got][:gap_limit]
        for i in missing:
            try:
                row = db.execute(f'SELECT rowid, * FROM "{table}" WHERE rowid = ?', (i,)).fetchone()
            except sqlite3.DatabaseError:
                continue
            if row is not None:
                got[row[0]] = row[1:]
    return columns, [got[k] for k in sorted(got)], error


def _salvage(old: Path, new: sqlite3.Connection, done: Rebuilt) -> None:
    """Copies every row of ``old`` that can be read into ``new``, table by table (tables ``new`` lacks,
    e.g. a migration's instances, created as ``old`` defined them)."""
    try:
        db = _connect_ro(old)
    except sqlite3.Error as e:
        done.unreadable["*"] = str(e)
        return
    try:
        try:
            defined = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL"))
        except sqlite3.DatabaseError as e:
            done.unreadable["sqlite_master"] = str(e)
            defined = {}
        tables = {r[0] for r in new.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for name in [*SCHEMA_TABLES, *sorted(set(defined) - set(SCHEMA_TABLES))]:
            if name.startswith("sqlite_"):
                continue
            if name not in tables:
                if name not in defined:
                    continue
                new.execute(defined[name].replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
            try:
                columns, rows, error = _readable_rows(db, name)
            except sqlite3.DatabaseError as e:
                done.unreadable[name] = str(e)
                continue
            if error:
                done.unreadable[name] = error
            keep = [c for c in columns if c in {r[1] for r in new.execute(f'PRAGMA table_info("{name}")')}]
            if not keep or not rows:
                continue
            at = [columns.index(c) for c in keep]
            new.execute("BEGIN")
            new.executemany(f'INSERT OR IGNORE INTO "{name}" ({", ".join(keep)}) VALUES ({",".join("?" * len(keep))})',
                            [tuple(r[i] for i in at) for r in rows])
            new.execute("COMMIT")
            done.rows[name] = len(rows)
    finally:
        db.close()


def _from_bundle(folder: Path, bundle: Path) -> tuple[dict[str, Any], list[str]]:
    """A bugs row and the variants the bug was seen in, from its bundle: ``store.json`` (what the store
    listed), or for a bundle written before it, ``finding.json`` with what it lacks defaulted."""
    finding = json.loads((bundle / "finding.json").read_text())
    index = bundle / BUNDLE_INDEX
    listed = json.loads(index.read_text()) if index.is_file() else {}
    row = {
        "signature": finding.get("signature", bundle.name), "oracle": finding["oracle"], "kind": finding["kind"],
        "backend": finding["backend"], "variant": finding["variant"], "phase": finding.get("phase", ""),
        "title": finding.get("title", ""), "category": finding.get("category", "compiler"), "first_test": 0,
        "hits": 1, "dir": bundle.relative_to(folder).as_posix(),
        "first_seen": (bundle / "finding.json").stat().st_mtime, "root": "", "same_as": "",
    }
    row.update({k: v for k, v in listed.items() if k in row})
    variants = listed.get("variants") or [row["variant"]]
    return row | {"message": finding.get("message", "")[:2000]}, variants


def rebuild_store(folder: Path) -> Rebuilt:
    """Rebuilds the store of ``folder``: the old file (and its WAL) renamed aside, never deleted; every
    row SQLite can still read copied into a new store; then every bug bundle whose bug the copy lacks
    listed again from the bundle (its category, root, variants and hits).  Takes the writer lock."""
    from dlcfuzz.run.guard import CampaignBusy, CampaignLock

    try:
        lock = CampaignLock(folder).acquire()
    except CampaignBusy as e:
        raise StoreError(str(e)) from None
    try:
        done = Rebuilt()
        path = folder / STORE_FILE
        if path.exists():
            stamp = time.strftime("%Y%m%d-%H%M%S")
            kept = path.with_name(f"{STORE_FILE}.damaged-{stamp}")
            n = 1
            while kept.exists():  # rebuilt twice within a second
                kept, n = path.with_name(f"{STORE_FILE}.damaged-{stamp}-{n}"), n + 1
            for suffix in ("-wal", "-shm", ""):  # the WAL goes with its database: it holds committed pages
                side = path.with_name(path.name + suffix)
                if side.exists():
                    side.rename(kept.with_name(kept.name + suffix))
            done.kept = kept
        store = Store(folder, check=False)  # a new, empty store (beside bundles: what it is rebuilt from)
        try:
            if done.kept is not None:
                _salvage(done.kept, store.db, done)
            have = store.bug_signatures()
            restored = []
            for bundle in bundle_folders(folder):
                try:
                    row, variants = _from_bundle(folder, bundle)
                except (OSError, ValueError, KeyError, TypeError) as e:
                    done.bad_bundles.append(f"{bundle.name}: {e}")
                    continue
                if row["signature"] in have:
                    continue
                restored.append(row["signature"])
                store.db.execute("BEGIN IMMEDIATE")
                store.db.execute(f"INSERT OR IGNORE INTO bugs ({', '.join(_BUG_COLUMNS)}) VALUES "
                                 f"({','.join('?' * len(_BUG_COLUMNS))})", [row[c] for c in _BUG_COLUMNS])
                store.db.executemany("INSERT INTO findings VALUES (?,?,?,?,?,?,?,?)",
                                     [(row["first_test"], row["signature"], row["oracle"], row["kind"],
                                       row["backend"], v, row["phase"], row["message"]) for v in variants])
                store.db.execute("COMMIT")
            done.from_bundles = len(restored)
            store.export_bugs(set(restored))
            done.bugs = len(store.bug_signatures())
        finally:
            store.close()
        return done
    finally:
        lock.release()


SCHEMA_TABLES = ("meta", "tests", "outcomes", "bugs", "coverage", "frontend_coverage", "findings")
_BUG_COLUMNS = ("signature", "oracle", "kind", "backend", "variant", "phase", "title", "category", "first_test",
                "hits", "dir", "first_seen", "root", "same_as")
