"""The campaign store: one transaction per test (all of it or nothing), bug counters, coverage kept
from the first test that reached it, the campaign's identity, and reopening (resumption)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dlcfuzz.run.store import Store, StoreError, TestRecord


def record(i: int, ops=("Add", "Relu"), finite: bool = True, valid: bool = True) -> TestRecord:
    return TestRecord(i, 100 + i, list(ops), "reference", finite, 1 + i % 3, valid, 0.5 + i, 0.1, 0.2, 0.3, 0.4)


def bug(sig: str, title: str = "t") -> tuple:
    return (sig, "crash", "exception", "tvm", "fused", "compile", title, "compiler", f"bugs/{sig}")


def finding(sig: str, message: str = "m") -> tuple:
    return (sig, "crash", "exception", "tvm", "fused", "compile", message)


def rows(folder: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(folder / "campaign.sqlite") as db:
        return list(db.execute(sql))


def test_commit_writes_one_test_with_everything(tmp_path: Path) -> None:
    s = Store(tmp_path)
    assert (tmp_path / "bugs").is_dir()
    assert s.next_test_id() == 0 and s.bug_signatures() == set()
    s.commit(record(0), [("tvm", "fused", "error", "compile", "boom", False, 1.5),
                         ("ort", "all", "ok", "run", "", True, 0.25)],
             [finding("s1"), finding("s1", "again")], [bug("s1", "a title")],
             coverage=[("op", "Add"), ("op", "Relu")], frontend_coverage=[("tvm", "a.py:1\na.py:2")])
    assert s.next_test_id() == 1 and s.bug_signatures() == {"s1"}
    t = rows(tmp_path, "SELECT id, seed, n_ops, ops, baseline, finite, input_attempts, valid, seconds, "
                       "t_generate, t_inputs, t_compilers, t_oracle FROM tests")
    assert t == [(0, 100, 2, "Add,Relu", "reference", 1, 1, 1, 0.5, 0.1, 0.2, 0.3, 0.4)]
    assert rows(tmp_path, "SELECT * FROM outcomes") == [(0, "tvm", "fused", "error", "compile", "boom", 0, 1.5),
                                                       (0, "ort", "all", "ok", "run", "", 1, 0.25)]
    assert rows(tmp_path, "SELECT test_id, signature, message FROM findings") == [(0, "s1", "m"), (0, "s1", "again")]
    b = s.bugs()
    assert len(b) == 1 and (b[0]["signature"], b[0]["title"], b[0]["hits"], b[0]["first_test"], b[0]["dir"]) == (
        "s1", "a title", 2, 0, "bugs/s1")
    assert (b[0]["oracle"], b[0]["kind"], b[0]["backend"], b[0]["variant"], b[0]["phase"]) == (
        "crash", "exception", "tvm", "fused", "compile")
    assert b[0]["category"] == "compiler" and b[0]["first_seen"] > 0
    assert s.coverage() == [("op", "Add"), ("op", "Relu")]
    assert rows(tmp_path, "SELECT * FROM frontend_coverage") == [(0, "tvm", "a.py:1\na.py:2")]
    # plain tuples come back once the Row view is done
    assert s.db.execute("SELECT id FROM tests").fetchone() == (0,)
    s.close()


def test_bug_counters_and_first_coverage_across_tests(tmp_path: Path) -> None:
    s = Store(tmp_path)
    s.commit(record(0), [], [finding("s1")], [bug("s1", "first")], coverage=[("op", "Add")])
    # a later test: its finding counts as a hit, its "new" bug row does not replace the first one
    s.commit(record(1, finite=False, valid=False), [], [finding("s1"), finding("s2")],
             [bug("s1", "second"), bug("s2")], coverage=[("op", "Add"), ("op", "Neg")])
    s.commit(record(5), [], [], [])
    hits = {r["signature"]: (r["hits"], r["title"], r["first_test"]) for r in s.bugs()}
    assert hits == {"s1": (2, "first", 0), "s2": (1, "t", 1)}
    assert [r["signature"] for r in s.bugs()] == ["s1", "s2"]  # in the order first seen
    assert rows(tmp_path, "SELECT criterion, key, test_id FROM coverage ORDER BY key") == [
        ("op", "Add", 0), ("op", "Neg", 1)]
    assert s.next_test_id() == 6
    assert s.summary() == {"tests": 3, "valid": 2, "finite": 2, "test_seconds": pytest.approx(0.5 + 1.5 + 5.5),
                           "bugs": 2, "findings": 3}


def test_a_failed_commit_leaves_nothing(tmp_path: Path) -> None:
    s = Store(tmp_path)
    s.commit(record(0), [("tvm", "fused", "ok", "run", "", False, 1.0)], [finding("s1")], [bug("s1")])
    before = {t: rows(tmp_path, f"SELECT * FROM {t}") for t in ("tests", "outcomes", "findings", "coverage")}
    # a finding tuple that is one field short fails after the test, outcome and bug rows went in
    with pytest.raises(sqlite3.Error):
        s.commit(record(1), [("tvm", "fused", "ok", "run", "", False, 1.0)], [("s1", "crash")], [bug("s9")],
                 coverage=[("op", "Mul")])
    after = {t: rows(tmp_path, f"SELECT * FROM {t}") for t in before}
    assert after == before
    assert s.bug_signatures() == {"s1"} and [r["hits"] for r in s.bugs()] == [1]
    # an interrupt (not an Exception) rolls back too, and the store stays usable
    class Boom(BaseException):
        pass

    class Exploding(tuple):
        def __getitem__(self, i):
            raise Boom

    with pytest.raises(Boom):
        s.commit(record(1), [], [], [Exploding(bug("s9"))])
    assert rows(tmp_path, "SELECT id FROM tests") == [(0,)]
    s.commit(record(1), [], [], [])
    assert s.next_test_id() == 2


def test_reopening_resumes_and_checks_the_campaign(tmp_path: Path) -> None:
    config = {"backends": ["tvm"], "seed": 1, "ops": [1, 4]}
    s = Store(tmp_path)
    assert s.bind(config) is False  # a new campaign
    s.set_meta("progress", {"done": 3})
    s.commit(record(0), [], [finding("s1")], [bug("s1")])
    s.close()
    again = Store(tmp_path)
    assert again.bind(dict(reversed(config.items()))) is True  # the same settings, in any key order
    assert again.get_meta("progress") == {"done": 3} and again.get_meta("missing") is None
    assert again.next_test_id() == 1 and again.bug_signatures() == {"s1"}
    with pytest.raises(StoreError, match=r"other settings \(ops, seed\)") as e:
        again.bind({"backends": ["tvm"], "seed": 2, "ops": [1, 5]})
    assert str(e.value) == f"{tmp_path} holds a campaign with other settings (ops, seed); use another --out folder"
    with pytest.raises(StoreError, match=r"other settings \(extra\)"):
        again.bind(config | {"extra": True})
    again.set_meta("progress", {"done": 4})
    assert again.get_meta("progress") == {"done": 4}
    again.close()


def test_unusable_folder_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot use campaign folder"):
        Store(blocker / "sub")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "campaign.sqlite").write_text("not a database" * 100)
    with pytest.raises(StoreError, match=r"damaged \(not an SQLite database.*dlcfuzz store rebuild"):
        Store(tmp_path / "c")


def test_empty_store_summary(tmp_path: Path) -> None:
    s = Store(tmp_path)
    assert s.summary() == {"tests": 0, "valid": 0, "finite": 0, "test_seconds": 0.0, "bugs": 0, "findings": 0}
    assert s.bugs() == [] and s.coverage() == []
    # the journal is durable: WAL mode, full sync
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s.db.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_nested_folder_and_other_threads(tmp_path: Path) -> None:
    import threading

    s = Store(tmp_path / "a" / "b" / "c")  # made with its parents
    assert (tmp_path / "a" / "b" / "c" / "bugs").is_dir()
    errors: list[BaseException] = []

    def commit() -> None:  # campaigns commit from their worker threads
        try:
            s.commit(record(0), [], [finding("s1")], [bug("s1")])
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=commit)
    t.start()
    t.join()
    assert errors == [] and s.next_test_id() == 1
    s.close()


def test_bugs_with_one_root_cause_are_listed_once_under_the_first_found(tmp_path: Path) -> None:
    s = Store(tmp_path)
    for i, sig in enumerate(("conv", "relu", "convinteger")):
        s.commit(record(i), [], [finding(sig)], [bug(sig, f"at {sig}")])
    s.merge_root("convinteger", "same-upper")  # reduced before the first one: nothing to merge into yet
    assert [b["signature"] for b in s.bugs("compiler")] == ["conv", "relu", "convinteger"]
    s.merge_root("conv", "same-upper")
    listed = s.bugs("compiler")
    assert [(b["signature"], b["same_root"]) for b in listed] == [("conv", "convinteger"), ("relu", None)]
    assert [b["signature"] for b in s.bugs("compiler", merged=True)] == ["convinteger"]
    assert s.categories() == {"compiler": 2} and s.merged() == 1
    s.close()
    s = Store(tmp_path)  # reopened: the merge is stored
    assert [b["signature"] for b in s.bugs()] == ["conv", "relu"]
