"""A campaign outlives a crash of its own process (cli/supervise.py): ``dlcfuzz fuzz`` run as a program
runs the campaign in a child and starts it again where it dies of a crash signal, within what is left of
its budget; other ends are passed on, not repeated."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlcfuzz.cli import supervise
from tests.test_campaign import OPS, ROOT

# a child that aborts (SIGABRT, as ONNX's failed assertion did) on its first run, then prints its budget
ABORTS_ONCE = """
import os, sys
from dlcfuzz.cli.supervise import remaining
marker = sys.argv[1]
with open(marker, "a") as f:
    f.write("run\\n")
if open(marker).read().count("run") == 1:
    os.abort()
print(remaining(1000.0))
"""


def child(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


def test_a_child_that_aborts_is_started_again_with_what_is_left_of_the_budget(tmp_path: Path, capfd) -> None:
    marker = tmp_path / "runs"
    rc = supervise.supervise(child(ABORTS_ONCE, str(marker)), 60.0, "OUT")
    out, err = capfd.readouterr()
    assert rc == 0 and marker.read_text().count("run") == 2
    assert "died of SIGABRT" in err and "resuming the campaign in OUT (1 of 3 restarts)" in err, err
    assert 50.0 < float(out.strip()) <= 60.0  # the supervisor's deadline, not the child's own 1000 s


def test_a_child_that_keeps_crashing_is_given_up_with_one_line(tmp_path: Path, capfd, monkeypatch) -> None:
    monkeypatch.setattr(supervise, "MAX_RESTARTS", 1)
    marker = tmp_path / "runs"
    always = f"open({str(marker)!r}, 'a').write('run\\n'); import os; os.kill(os.getpid(), 11)"
    rc = supervise.supervise(child(always), None, "OUT")
    err = capfd.readouterr().err
    assert rc == 2 and marker.read_text().count("run") == 2
    assert "error: the campaign process died of SIGSEGV 2 times; what it found is kept in OUT" in err, err


@pytest.mark.parametrize(("script", "want"), [("import sys; sys.exit(3)", 3),
                                               ("import os; os.kill(os.getpid(), 15)", 128 + 15)])
def test_other_ends_are_passed_on_not_repeated(script: str, want: int, tmp_path: Path) -> None:
    marker = tmp_path / "runs"
    rc = supervise.supervise(child(f"open({str(marker)!r}, 'a').write('run\\n'); " + script), 30.0, "OUT")
    assert rc == want and marker.read_text().count("run") == 1


def test_a_campaign_whose_process_aborts_resumes_and_completes(tmp_path: Path) -> None:
    """The real command on ONNX Runtime: its campaign process (the supervisor's child) is sent SIGABRT
    after its first committed tests; it prints its Python stack, the supervisor starts it again, which
    resumes the store and runs the campaign's tests to the end, each once, and exits 0."""
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "dlcfuzz.cli", "fuzz", "--backends", "ort", "--max-tests", "12", "--ops", "1:3",
           "--op-set", ",".join(s.op for s in OPS), "--out", str(out), "--probe-per-op", "0", "--budget", "5m"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))  # this tree's dlcfuzz
    env.pop(supervise.CHILD, None)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = out / "campaign.sqlite"
    deadline = time.monotonic() + 120
    committed = 0
    while time.monotonic() < deadline and committed < 2:
        time.sleep(0.05)
        if db.exists():
            try:
                with sqlite3.connect(db) as con:
                    committed = con.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
            except sqlite3.OperationalError:  # the campaign is still creating its tables
                continue
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert committed >= 2 and len(children) == 1, (committed, children)
    os.kill(int(children[0]), signal.SIGABRT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "died of SIGABRT" in stderr and "resuming" in stdout, (stdout, stderr)
    # the dead child's Python stack says what it was doing (faulthandler: which native call aborted)
    assert "Fatal Python error: Aborted" in stderr and 'File "' in stderr, stderr
    with sqlite3.connect(db) as con:
        assert sorted(r[0] for r in con.execute("SELECT id FROM tests")) == list(range(12))
