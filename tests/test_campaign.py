"""Campaigns end to end with real ONNX Runtime and planted failures: findings, dedup, bundles,
standalone repro scripts, resumption after SIGKILL, and bad input."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.run.worker import PhaseLimits
from dlcfuzz.spec import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
OPS = [REGISTRY[o] for o in ("Relu", "Sigmoid", "Neg", "Add", "Mul", "Abs", "Tanh")]


def campaign(out: Path, backends: list[str], tests: int, specs=None, **kw) -> Campaign:
    cfg = CampaignConfig(out, backends, specs or OPS, budget_seconds=120, max_tests=tests, ops=(1, 4), **kw)
    c = Campaign(cfg)
    c.run()
    return c


def bugs(out: Path) -> list[tuple]:
    db = sqlite3.connect(out / "campaign.sqlite")
    try:
        return list(db.execute("SELECT signature, oracle, kind, backend, hits, dir FROM bugs ORDER BY signature"))
    finally:
        db.close()


def run_repro(folder: Path) -> subprocess.CompletedProcess:
    # alone: a fresh interpreter in the bug folder, with no dlcfuzz on the path
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-I", "repro.py"], cwd=folder, capture_output=True, text=True,
                          timeout=120, env=env)


def test_planted_bugs_are_found_deduplicated_and_reproduced(tmp_path: Path) -> None:
    out = tmp_path / "c"
    c = campaign(out, ["ort", "tests.fake_backends:Planted"], 25)
    assert c.progress.tests == 25
    found = bugs(out)
    planted = [b for b in found if b[3] == "tests.fake_backends:Planted"]
    by_oracle = {(b[1], b[2]) for b in planted}
    assert ("crash", "exception") in by_oracle  # the Relu exception...
    assert ("differential", "value") in by_oracle  # ...and the Sigmoid shift
    # many graphs hit the exception in both variants, with different node names and addresses: one bug
    crash = [b for b in planted if b[1] == "crash"]
    assert len(crash) == 1 and crash[0][4] >= 4, crash
    # ORT itself agrees with the reference on these graphs
    assert not [b for b in found if b[3] == "ort"], found
    for b in planted:
        folder = out / b[5]
        for name in ("model.onnx", "graph.json", "inputs.npz", "finding.json", "repro.py"):
            assert (folder / name).exists(), (folder, name)
        r = run_repro(folder)
        assert r.returncode == 1, (b, r.stdout, r.stderr)
        assert "reproduced" in r.stdout


def test_segfaulting_worker_is_a_finding_and_the_campaign_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "c"
    c = campaign(out, ["tests.fake_backends:SegfaultRepro"], 12)
    assert c.progress.tests == 12
    crashes = [b for b in bugs(out) if b[2] == "signal"]
    assert crashes, bugs(out)
    r = run_repro(out / crashes[0][5])
    assert r.returncode != 0  # dies of SIGSEGV, as the compiler did
    assert c.pool.deaths >= 1


def test_hanging_compile_is_a_timeout_finding(tmp_path: Path) -> None:
    out = tmp_path / "c"
    c = campaign(out, ["tests.fake_backends:Hang"], 2, phases=PhaseLimits(compile=1.0))
    kinds = {b[2] for b in bugs(out)}
    assert kinds == {"timeout"}
    assert c.progress.tests == 2


def test_a_reduced_hang_is_not_run_again(tmp_path: Path) -> None:
    """Once a hang is listed and reduced, its backend's profile holds the reduced case's form, and a later
    graph holding it is not run on that backend: each hit would cost the limit and find nothing new."""
    from dlcfuzz.run.profile import SupportProfile
    from dlcfuzz.solve import GenOptions

    out = tmp_path / "c"
    backend = "tests.fake_backends:HangOnNeg"  # ORT, except that a graph with a Neg never compiles
    c = campaign(out, [backend], 30, phases=PhaseLimits(compile=2.0, pace=0), reduce_seconds=30,
                 limits=GenOptions(max_rank=1, dtypes=("float32",)),
                 specs=[REGISTRY[o] for o in ("Neg", "Relu", "Abs")])
    hangs = [b for b in bugs(out) if b[2] == "timeout"]
    assert len(hangs) == 1
    assert [op for op, _ in c.profiles[backend].hangs[0]] == ["Neg"]  # the reduced case: one Neg
    # kept with the profile, for the next campaign on this version
    assert SupportProfile.from_json(c.profiles[backend].to_json()).hangs == c.profiles[backend].hangs
    db = sqlite3.connect(out / "campaign.sqlite")
    with_neg = db.execute("SELECT COUNT(*) FROM tests WHERE ops LIKE '%Neg%'").fetchone()[0]
    ran = db.execute("SELECT COUNT(DISTINCT o.test_id) FROM outcomes o JOIN tests t ON t.id = o.test_id "
                     "WHERE t.ops LIKE '%Neg%'").fetchone()[0]
    timeouts = db.execute("SELECT COUNT(*) FROM outcomes WHERE status = 'timeout'").fetchone()[0]
    db.close()
    assert with_neg >= 5 and ran == timeouts == 1  # the first hang, and no Neg graph after it


def test_sigkill_then_rerun_loses_no_committed_finding(tmp_path: Path) -> None:
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "dlcfuzz.cli", "fuzz", "--backends", "ort,tests.fake_backends:Planted",
           "--max-tests", "60", "--ops", "1:4", "--op-set", ",".join(s.op for s in OPS), "--out", str(out),
           "--probe-per-op", "0"]  # resuming, not probing the planted backend
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    db = out / "campaign.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if db.exists():
            try:
                with sqlite3.connect(db) as con:
                    if con.execute("SELECT COUNT(*) FROM tests").fetchone()[0] >= 4:
                        break
            except sqlite3.OperationalError:  # the campaign is still creating its tables
                continue
    os.killpg(proc.pid, signal.SIGKILL)  # the campaign and its workers, at once
    proc.wait()
    with sqlite3.connect(db) as con:
        before_tests = con.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
        before = set(con.execute("SELECT test_id, signature FROM findings"))
        before_bugs = {r[0] for r in con.execute("SELECT signature FROM bugs")}
    assert 4 <= before_tests < 60 and before_bugs
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stdout
    with sqlite3.connect(db) as con:
        assert sorted(r[0] for r in con.execute("SELECT id FROM tests")) == list(range(60))
        after = set(con.execute("SELECT test_id, signature FROM findings"))
        after_bugs = {r[0] for r in con.execute("SELECT signature FROM bugs")}
    assert before <= after and before_bugs <= after_bugs


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"  # a folder cannot be made under a file (root ignores permissions)
    blocker.write_text("x")
    cases = [
        ["fuzz", "--backends", "ort,nosuch", "--out", str(tmp_path / "a")],
        ["fuzz", "--budget", "ten minutes", "--out", str(tmp_path / "b")],
        ["fuzz", "--backends", "ort", "--max-tests", "1", "--out", str(blocker / "sub")],
        ["bugs", str(tmp_path / "nothing")],
    ]
    for args in cases:
        r = subprocess.run([sys.executable, "-m", "dlcfuzz.cli", *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1, (args, r.stderr)


def test_bugs_known_upstream_are_counted_not_reported(tmp_path: Path) -> None:
    first = tmp_path / "first"
    campaign(first, ["tests.fake_backends:Planted"], 12)
    found = bugs(first)
    crash = next(b for b in found if b[1] == "crash")
    known = tmp_path / "known.toml"
    known.write_text(f'[[bug]]\nsignature = "{crash[0]}"\nbackend = "tests.fake_backends:Planted"\n'
                     'title = "planted Relu exception"\nlink = "https://example.org/issue/1"\n')
    again = tmp_path / "again"
    c = campaign(again, ["tests.fake_backends:Planted"], 12, known_bugs=[known])
    assert crash[0] not in [b[0] for b in bugs(again)]  # no bug row, no bundle
    assert not (again / "bugs" / crash[0]).exists()
    assert c.progress.known["tests.fake_backends:Planted"] >= 1  # ...but counted
    db = sqlite3.connect(again / "campaign.sqlite")
    assert db.execute("SELECT COUNT(*) FROM findings WHERE signature = ?", (crash[0],)).fetchone()[0] >= 1
    # the other planted bug is still reported
    assert [b for b in bugs(again) if b[1] == "differential"]


def same_model(model) -> tuple:
    """What a model computes, comparable with ==: opset, nodes (operator, inputs, outputs, attribute
    values), typed inputs and outputs, and initializers with their exact dtypes, shapes and (small
    ones) values."""
    import numpy as np
    from onnx import helper, numpy_helper

    from dlcfuzz.run.bugreport import INLINE_VALUES

    def attr(a):
        v = helper.get_attribute_value(a)
        return ("tensor", *array(numpy_helper.to_array(v))) if a.type == a.TENSOR else v

    def array(a: np.ndarray) -> tuple:  # large tensors are rebuilt as random values of their dtype and shape
        return a.dtype.str, a.shape, a.tobytes() if a.size <= INLINE_VALUES else None

    def typed(v) -> tuple:
        t = v.type.tensor_type
        return v.name, t.elem_type, tuple(d.dim_value for d in t.shape.dim)

    g = model.graph
    return (sorted((o.domain, o.version) for o in model.opset_import),
            [(n.op_type, n.domain, list(n.input), list(n.output), sorted((a.name, attr(a)) for a in n.attribute))
             for n in g.node],
            [typed(v) for v in g.input], [typed(v) for v in g.output],
            sorted((t.name, *array(numpy_helper.to_array(t))) for t in g.initializer))


def test_every_bug_gets_an_upstream_ready_report(tmp_path: Path) -> None:
    import re

    import onnx

    out = tmp_path / "c"
    campaign(out, ["tests.fake_backends:Planted"], 12)
    found = bugs(out)
    assert found
    for b in found:
        folder = out / b[5]
        text = (folder / "report.md").read_text()
        for section in ("## The model", "## Reproduce", "## Expected vs actual", "## Environment"):
            assert section in text, (folder, section)
        # the script in the report rebuilds the model alone
        script = re.search(r"```python\n(.*?)```", text, re.S).group(1)
        work = tmp_path / f"rebuild-{b[0]}"
        work.mkdir()
        (work / "build.py").write_text(script)
        r = subprocess.run([sys.executable, "-I", "build.py"], cwd=work, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        rebuilt, original = onnx.load(str(work / "model.onnx")), onnx.load(str(folder / "model.onnx"))
        assert same_model(rebuilt) == same_model(original), folder


def test_new_bugs_are_reduced_automatically(tmp_path: Path) -> None:
    import json

    import onnx

    out = tmp_path / "c"
    c = campaign(out, ["tests.fake_backends:Planted"], 10, reduce_seconds=15)
    found = bugs(out)
    assert found and c.progress.reduced >= 1
    # the backend's arm pays its tests (inside it, and each test's own overhead: it is the only one) and
    # the reductions of its bugs, which are no tests
    db = sqlite3.connect(out / "campaign.sqlite")
    inside = db.execute("SELECT SUM(seconds) FROM outcomes").fetchone()[0]
    overhead = db.execute("SELECT SUM(MAX(0, seconds - t_compilers)) FROM tests").fetchone()[0]
    tests = db.execute("SELECT COUNT(DISTINCT test_id) FROM outcomes").fetchone()[0]
    db.close()
    arm = c.allocator.arms["tests.fake_backends:Planted"]
    assert arm.seconds == pytest.approx(inside + overhead + c.progress.reduce_seconds, rel=1e-3)
    assert arm.pulls == tests
    # what each planted bug needs (see fake_backends.Planted): a Relu to crash, a Sigmoid to shift outputs
    # (a value bug's signature may also name the operator that computes the differing output: one more)
    minimal = {"crash": (["Relu"], 1), "differential": (["Sigmoid"], 2)}
    reduced = 0
    for b in found:
        folder = out / b[5]
        assert (folder / "reduction.json").exists() or (folder / "reduction-failed.txt").exists()
        if (folder / "reduction.json").exists():
            r = json.loads((folder / "reduction.json").read_text())
            before = [n.op_type for n in onnx.load(str(folder / "model.onnx")).graph.node]
            after = [n.op_type for n in onnx.load(str(folder / "reduced" / "model.onnx")).graph.node]
            assert r["reproduced"] and (r["ops_before"], r["ops_after"]) == (len(before), len(after))
            # down to the operator the bug needs, whatever else the graph held
            need, most = minimal[b[1]]
            assert set(need) <= set(after) and len(after) <= most, (b, before, after)
            reduced += len(after) < len(before)
            assert (run_repro(folder / "reduced")).returncode == 1
    assert reduced >= 1  # at least one reduction removed something


def test_reduce_refuses_a_folder_that_is_not_a_bundle(tmp_path: Path, capsys) -> None:
    from dlcfuzz.cli import main

    (tmp_path / "x.txt").write_text("not a bundle")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["reduce", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dlcfuzz: error:") and "not a bug bundle" in err and "\n" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_planted_program_bug_is_listed_beside_the_onnx_bugs(tmp_path: Path, capsys) -> None:
    """A campaign with ONNX compilers and torch-native programs (what the default campaign does with
    Inductor, issue 28): the program backend is one more arm of the allocation, so in one store and one
    bug list stand the ONNX compiler's planted bugs and the program compiler's (a Dynamo backend that reads
    non-contiguous inputs as contiguous, tests/torch_fakes.py), whose bundle is a program reduced by the
    program reducer, not an ONNX model."""
    import json

    from dlcfuzz.cli import main
    from dlcfuzz.gen.torch_program import ProgramOptions
    from dlcfuzz.spec.torch import TORCH_REGISTRY

    pytest.importorskip("torch")
    out = tmp_path / "c"
    program_backend = "tests.torch_fakes:StridesAsContiguous"
    c = campaign(out, ["tests.fake_backends:Planted"], 8, reduce_seconds=10, seed=3,
                 program_specs=[TORCH_REGISTRY[o] for o in ("torch.sin", "torch.add", "torch.neg", "torch.relu")],
                 program_backend=program_backend,
                 program_options=ProgramOptions(layout_rate=1.0, backward_rate=0.0, dynamic_rate=0.0))
    assert c.progress.tests == 8
    assert program_backend in c.allocator.arms  # an arm of the allocation like the ONNX compiler
    found = bugs(out)
    assert {b[3] for b in found} == {"tests.fake_backends:Planted", program_backend}, found
    program = [b for b in found if b[3] == program_backend]
    assert all(b[1] == "metamorphic" for b in program), program
    for b in program:
        folder = out / b[5]
        assert (folder / "program.py").exists() and (folder / "repro.py").exists()
        assert not (folder / "model.onnx").exists() and not (folder / "reduced").exists()  # no ONNX reducer
        assert json.loads((folder / "finding.json").read_text())["details"]["layer"] == "inductor"
    # the program reducer ran on them: fewer calls than the program that found the bug
    reduced = [out / b[5] for b in program if (out / b[5] / "original_program.py").exists()]
    assert reduced, "no program bug was reduced"
    for folder in reduced:
        assert (folder / "program.py").read_text().count("# torch.") < \
            (folder / "original_program.py").read_text().count("# torch.")
    # one bug list: `dlcfuzz bugs` lists both compilers' bugs
    capsys.readouterr()
    assert main(["bugs", str(out)]) == 0
    listed = capsys.readouterr().out
    assert program_backend in listed and "tests.fake_backends:Planted" in listed, listed
    # `dlcfuzz reduce` of a program bug runs the program reducer (an ONNX bundle's reducer needs model.onnx)
    assert main(["reduce", str(out / program[0][5]), "--budget", "20"]) == 0
    assert "torch calls; program in" in capsys.readouterr().out
    assert not (out / program[0][5] / "reduced").exists()
