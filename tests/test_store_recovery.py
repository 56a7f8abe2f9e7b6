"""Nothing found is lost, whatever breaks around a campaign (issue 30), on real files through the CLI:
a damaged store, a store that is not SQLite and bug bundles without a store each get one line and exit 2,
and ``store rebuild`` lists the same bugs as before the damage; two writers on one folder; a full file
system; a store written by an older or a later dlcfuzz.  The bugs expected are read from the campaign's
store with plain SQL before the damage, never through the code under test."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlcfuzz.cli import main

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ["fuzz", "--backends", "ort,tests.fake_backends:Planted", "--ops", "1:4", "--seed", "0",
        "--op-set", "Relu,Sigmoid,Neg,Add,Mul,Abs,Tanh", "--reduce-budget", "0", "--budget", "120"]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))


def listed(folder: Path) -> set[tuple[str, str]]:
    """(signature, category) of every bug the store lists (not merged into another), by plain SQL."""
    db = sqlite3.connect(f"{(folder / 'campaign.sqlite').as_uri()}?mode=ro", uri=True)
    try:
        return set(db.execute("SELECT signature, category FROM bugs WHERE same_as = ''"))
    finally:
        db.close()


def committed_tests(folder: Path) -> int:
    try:
        db = sqlite3.connect(f"{(folder / 'campaign.sqlite').as_uri()}?mode=ro", uri=True)
        try:
            return db.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlcfuzz.cli", *args], capture_output=True, text=True,
                          timeout=300, env=ENV)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, set[tuple[str, str]]]:
    """A small real campaign (ONNX Runtime and a backend with planted bugs) and its listed bugs."""
    out = tmp_path_factory.mktemp("store") / "c"
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = ENV["PYTHONPATH"]  # the workers load tests.fake_backends
    try:
        assert main([*FUZZ, "--max-tests", "20", "--out", str(out)]) == 0
    finally:
        os.environ.pop("PYTHONPATH") if old is None else os.environ.__setitem__("PYTHONPATH", old)
    bugs = listed(out)
    assert len({s for s, c in bugs if c == "compiler"}) >= 2, bugs
    return out, bugs


def _damage_page(c: Path) -> None:
    path = c / "campaign.sqlite"
    db = sqlite3.connect(path)  # every committed page into the database file itself, the WAL gone
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert not (c / "campaign.sqlite-wal").exists()
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size // 2 // 4096 * 4096)
        f.write(b"\0" * 4096)


def _not_sqlite(c: Path) -> None:
    (c / "campaign.sqlite").write_bytes(b"<html>a bad copy</html>\n" * 200)


def _no_store(c: Path) -> None:
    (c / "campaign.sqlite").unlink()


def _no_store_old_bundles(c: Path) -> None:
    """Bundles as dlcfuzz wrote them before store.json: finding.json alone says category and variant."""
    (c / "campaign.sqlite").unlink()
    for index in c.glob("bugs/*/store.json"):
        index.unlink()


@pytest.mark.parametrize("damage", [_damage_page, _not_sqlite, _no_store, _no_store_old_bundles])
def test_a_damaged_store_is_said_in_one_line_and_rebuilt_with_every_bug(pristine, tmp_path, capsys,
                                                                         damage) -> None:
    src, expected = pristine
    c = tmp_path / "c"
    shutil.copytree(src, c)
    damage(c)
    capsys.readouterr()
    assert main(["bugs", str(c)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"dlcfuzz store rebuild {c}" in err and "damaged" in err, err
    assert main(["report", str(c)]) == 2  # every command that opens the store says the same
    assert f"dlcfuzz store rebuild {c}" in capsys.readouterr().err
    assert main(["store", "check", str(c)]) == 1
    assert "damaged" in capsys.readouterr().out

    assert main(["store", "rebuild", str(c)]) == 0
    capsys.readouterr()
    assert listed(c) == expected
    assert main(["bugs", str(c)]) == 0
    out = capsys.readouterr().out
    for sig, category in expected:
        assert (sig in out) == (category == "compiler"), (sig, out)
    assert main(["store", "check", str(c)]) == 0
    if damage is not _no_store and damage is not _no_store_old_bundles:  # the old file is kept, renamed
        kept = list(c.glob("campaign.sqlite.damaged-*"))
        assert kept and any(k.name.count("-") == 2 for k in kept), kept


def test_rebuild_keeps_hits_variants_and_merged_roots_from_the_bundles(tmp_path: Path, capsys) -> None:
    from dlcfuzz.run.store import Store, TestRecord

    c = tmp_path / "c"
    store = Store(c)
    for sig in ("aaaa", "bbbb", "cccc"):
        (c / "bugs" / sig).mkdir(parents=True)
        (c / "bugs" / sig / "finding.json").write_text(json.dumps(
            {"signature": sig, "oracle": "crash", "kind": "exception", "backend": "tvm", "variant": "O0",
             "phase": "compile", "message": "boom", "category": "compiler", "title": f"bug {sig}"}))
    rec = TestRecord(0, 0, ["Relu"], "reference", True, 1, True, 0.1, 0, 0, 0, 0)
    found = [(s, "crash", "exception", "tvm", v, "compile", "boom") for s in ("aaaa", "bbbb", "cccc")
             for v in ("O0", "O3")]
    store.commit(rec, [], found, [(s, "crash", "exception", "tvm", "O0", "compile", f"bug {s}", "compiler",
                                   f"bugs/{s}") for s in ("aaaa", "bbbb", "cccc")])
    store.merge_root("bbbb", "root-1")
    store.merge_root("cccc", "root-1")  # cccc is bbbb's: not listed
    store.set_category("aaaa", "baseline")
    before = sorted((b["signature"], b["category"], b["hits"], b["variants"], b["same_root"])
                    for cat in ("compiler", "baseline") for b in store.bugs(cat))
    store.close()
    (c / "campaign.sqlite").unlink()
    assert main(["store", "rebuild", str(c)]) == 0
    store = Store(c)
    after = sorted((b["signature"], b["category"], b["hits"], b["variants"], b["same_root"])
                   for cat in ("compiler", "baseline") for b in store.bugs(cat))
    store.close()
    assert before == after == [("aaaa", "baseline", 2, "O0,O3", None), ("bbbb", "compiler", 2, "O0,O3", "cccc")]


def test_a_second_writer_is_refused_with_the_first_ones_pid_and_a_killed_one_is_taken_over(tmp_path: Path,
                                                                                          capsys) -> None:
    c = tmp_path / "c"
    cmd = [sys.executable, "-m", "dlcfuzz.cli", *FUZZ, "--max-tests", "100000", "--out", str(c)]
    first = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while committed_tests(c) < 3:
            assert first.poll() is None and time.monotonic() < deadline, "the first campaign did not start"
            time.sleep(0.2)
        # the writer is the campaign process: the child the command supervises (cli/supervise.py)
        writer = int(Path(f"/proc/{first.pid}/task/{first.pid}/children").read_text().split()[0])
        second = cli(*FUZZ, "--max-tests", "100000", "--out", str(c))
        assert second.returncode == 2, second.stderr
        assert second.stderr.count("\n") == 1 and f"process {writer} " in second.stderr, second.stderr
        # readers work while it runs
        assert main(["bugs", str(c)]) == 0
        assert "compiler bugs:" in capsys.readouterr().out
        assert main(["store", "check", str(c)]) == 0
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the campaign and its workers, at once: the lock stays on disk
        first.wait()
    assert (c / "writer.lock").read_text().strip() == str(writer)
    done = committed_tests(c)
    third = cli(*FUZZ, "--max-tests", str(done + 3), "--out", str(c))
    assert third.returncode == 0, third.stderr
    assert "(resuming)" in third.stdout
    assert committed_tests(c) == done + 3


def _mount_small_fs(where: Path) -> None:
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here: {r.stderr.strip() or r.returncode}")


def test_a_full_file_system_stops_the_campaign_in_one_line_keeps_every_bug_and_resumes(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    _mount_small_fs(fs)
    try:
        c = fs / "c"
        filler = fs / "filler"
        filler.write_bytes(b"\0" * (shutil.disk_usage(fs).free - 200 * 1024))  # room for a few bundles
        cmd = [*FUZZ, "--max-tests", "400", "--out", str(c)]
        full = cli(*cmd)
        assert full.returncode == 2, (full.stdout[-2000:], full.stderr)
        assert full.stderr.count("\n") == 1, full.stderr
        assert "is full" in full.stderr and str(c) in full.stderr and "campaign.sqlite" in full.stderr
        assert "rerun the same command" in full.stderr
        before = listed(c)
        assert before, "the campaign found nothing before the disk filled"
        for sig, _ in before:  # every committed bug's bundle is whole
            bundle = c / "bugs" / sig
            assert json.loads((bundle / "finding.json").read_text())["signature"] == sig
            assert (bundle / "repro.py").stat().st_size > 0
        tests = committed_tests(c)
        assert 0 < tests < 400
        filler.unlink()
        again = cli(*cmd)
        assert again.returncode == 0, again.stderr
        assert "(resuming)" in again.stdout
        assert before <= listed(c) and committed_tests(c) == 400
    finally:
        subprocess.run(["umount", "-l", str(fs)], capture_output=True)


def test_a_store_of_an_older_dlcfuzz_is_upgraded_and_a_later_ones_refused(tmp_path: Path, capsys) -> None:
    old = tmp_path / "old"
    old.mkdir()
    db = sqlite3.connect(old / "campaign.sqlite")  # as the first stores were: no schema, no category
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE tests (id INTEGER PRIMARY KEY, seed INTEGER NOT NULL, n_ops INTEGER NOT NULL, ops TEXT NOT NULL,
            baseline TEXT NOT NULL, finite INTEGER NOT NULL, input_attempts INTEGER NOT NULL, valid INTEGER NOT NULL,
            finished REAL NOT NULL, seconds REAL NOT NULL, t_generate REAL NOT NULL, t_inputs REAL NOT NULL,
            t_compilers REAL NOT NULL, t_oracle REAL NOT NULL);
        CREATE TABLE outcomes (test_id INTEGER NOT NULL, backend TEXT NOT NULL, variant TEXT NOT NULL,
            status TEXT NOT NULL, phase TEXT NOT NULL, error TEXT NOT NULL, unsupported INTEGER NOT NULL,
            seconds REAL NOT NULL);
        CREATE TABLE bugs (signature TEXT PRIMARY KEY, oracle TEXT NOT NULL, kind TEXT NOT NULL, backend TEXT NOT NULL,
            variant TEXT NOT NULL, phase TEXT NOT NULL, title TEXT NOT NULL, reference_suspect INTEGER NOT NULL,
            first_test INTEGER NOT NULL, hits INTEGER NOT NULL, dir TEXT NOT NULL, first_seen REAL NOT NULL);
        CREATE TABLE findings (test_id INTEGER NOT NULL, signature TEXT NOT NULL, oracle TEXT NOT NULL,
            kind TEXT NOT NULL, backend TEXT NOT NULL, variant TEXT NOT NULL, phase TEXT NOT NULL,
            message TEXT NOT NULL);
        INSERT INTO bugs VALUES ('s1', 'crash', 'exception', 'tvm', 'O3', 'compile', 'a crash', 0, 0, 1, 'bugs/s1',
                                 1.0);
        INSERT INTO bugs VALUES ('s2', 'differential', 'value', 'tvm', 'O3', 'run', 'the baseline', 1, 0, 1,
                                 'bugs/s2', 2.0);
    """)
    db.close()
    assert main(["bugs", str(old)]) == 0
    out = capsys.readouterr().out
    assert "s1" in out and "s2" not in out and "baseline issues: 1" in out
    db = sqlite3.connect(old / "campaign.sqlite")
    assert json.loads(dict(db.execute("SELECT key, value FROM meta"))["schema"]) >= 2
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', '99'), ('writer', '\"9.0.0\"')")
    db.commit()
    db.close()
    for args in (["bugs", str(old)], ["report", str(old)], ["store", "check", str(old)],
                 [*FUZZ, "--max-tests", "1", "--out", str(old)]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "dlcfuzz 9.0.0" in err and "schema 99" in err, (args, err)


def test_the_installed_compilers_are_tested_versions_that_the_dependency_ranges_admit() -> None:
    import tomllib

    import onnx
    import onnxruntime
    from packaging.requirements import Requirement

    from dlcfuzz.cli.backends import _tested, tested_versions

    tested = tested_versions()
    assert onnxruntime.__version__ in tested["ort"] and onnx.__version__ in tested["reference"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = {r.name: r for r in map(Requirement, project["dependencies"])}
    for name, backend in (("onnxruntime", "ort"), ("onnx", "reference")):
        assert len(deps[name].specifier) >= 1 and not any(s.operator == "==" for s in deps[name].specifier)
        assert all(deps[name].specifier.contains(v) for v in tested[backend]), (name, tested[backend])
    extras = {r.name: r for extra in project["optional-dependencies"].values() for r in map(Requirement, extra)}
    assert str(extras["torch"].specifier) == "==2.13.0"  # unpinned, pip pulls the CUDA build
    assert extras["apache-tvm"].specifier.contains(tested["tvm"][0])
    assert "tested: 1.31.1" in _tested("ort", "1.31.1", tested)
    assert "probed on first use" in _tested("ort", "1.33.0", tested)
    # the test suite runs on the tested versions: the dev extra pins each backend's first tested version
    dev = {r.name: r for r in map(Requirement, project["optional-dependencies"]["dev"])}
    for name, backend in (("onnxruntime", "ort"), ("onnx", "reference"), ("apache-tvm", "tvm"),
                          ("openvino", "openvino"), ("iree-base-compiler", "iree"), ("iree-base-runtime", "iree")):
        assert str(dev[name].specifier) == f"=={tested[backend][0]}", (name, dev[name].specifier)


def test_a_migration_on_a_folder_in_use_is_refused_with_the_writers_pid(tmp_path: Path, capsys) -> None:
    from dlcfuzz.run.guard import CampaignLock

    lock = CampaignLock(tmp_path / "c").acquire()  # as a live campaign holds it
    try:
        assert main(["migrate", "--source", "onnx-node", "--backends", "ort", "--max-tests", "1",
                     "--out", str(tmp_path / "c")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"process {os.getpid()} " in err, err
        assert not (tmp_path / "c" / "campaign.sqlite").exists()  # nothing harvested into it
    finally:
        lock.release()


def test_a_read_only_folder_stops_the_campaign_in_one_line_and_it_resumes_once_writable(pristine, tmp_path,
                                                                                         capsys) -> None:
    src, expected = pristine
    fs = tmp_path / "fs"
    _mount_small_fs(fs)
    try:
        c = fs / "c"
        shutil.copytree(src, c)
        assert subprocess.run(["mount", "-o", "remount,ro", str(fs)], capture_output=True).returncode == 0
        cmd = [*FUZZ, "--max-tests", "25", "--out", str(c)]
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is read-only" in err and "make it writable" in err, err
        assert "rerun the same command" in err
        assert main(["bugs", str(c)]) == 0  # an archived campaign is read as it is
        out = capsys.readouterr().out
        assert all((sig in out) == (category == "compiler") for sig, category in expected), out
        assert subprocess.run(["mount", "-o", "remount,rw", str(fs)], capture_output=True).returncode == 0
        again = cli(*cmd)
        assert again.returncode == 0 and "(resuming)" in again.stdout, again.stderr
        assert expected <= listed(c) and committed_tests(c) == 25
    finally:
        subprocess.run(["umount", "-l", str(fs)], capture_output=True)
