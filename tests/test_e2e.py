"""Every command and every backend end to end through the CLI (``dlcfuzz.cli.main``), on the real
compilers: a campaign per backend that ``dlcfuzz backends`` lists, checked by what its store holds (tests
that ran on that backend), not by the exit code alone.

Where each command and backend is covered end to end (``COVERED``; a test below checks that the map
names every command and every listed backend):

- ``fuzz``: ort, tvm, openvino, inductor (ONNX graphs, beside ort), inductor alone (torch-native programs, the
  ``inductor-program`` backend), inductor beside ort with the allocation (ONNX graphs and torch-native programs
  in one campaign), tvm-relax here; iree in ``test_backend_iree.py``; torch-native programs on the PyTorch
  frontends (tvm-torch) in ``test_program_frontends.py``;
- ``migrate``: the torch frontends (tvm-torch, openvino-torch, inductor-torch) and the library's own run
  (torch-library) here, with ``migrate apfd``; the export's path to the ONNX frontends in
  ``test_migrate_triage.py``; ``migrate record`` with tvm-torch in ``test_migrate_campaign.py``;
- ``reduce``, ``report``, ``bugs``: on one tvm-relax campaign here (``relax_campaign``);
- ``gen --for``, ``probe``, ``backends`` here (``gen --for inductor``, torch programs, in ``test_torch_programs.py``);
  ``gen`` (every strategy) and ``metrics`` in ``test_cli.py``; ``store check`` and ``store rebuild`` in
  ``test_store_recovery.py``.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import onnx
import pytest

from dlcfuzz.backends import BUILTIN, load_backend
from dlcfuzz.cli import main

# a campaign as short as one can be and still run tests: no reduction, no probing of a compiler without
# a profile (the packaged profiles apply), a bounded number of small tests
SHORT = ["--budget", "120s", "--reduce-budget", "0", "--probe-per-op", "0", "--seed", "1"]
FUZZED = ("ort", "tvm", "openvino", "inductor", "tvm-relax")
# --backends as given -> the backend whose tests the store must show: Inductor alone runs torch-native programs
# (run/torch_campaign.py), so its ONNX backend runs beside ort
FUZZ_RUNS = {"ort": "ort", "tvm": "tvm", "openvino": "openvino", "inductor,ort": "inductor",
             "inductor": "inductor-program"}
MIGRATED = ("tvm-torch", "openvino-torch", "inductor-torch", "torch-library")
COVERED = {
    "fuzz": [*(f"test_e2e.py::test_fuzz_runs_tests_on_the_backend[{b}]" for b in FUZZ_RUNS),
             "test_e2e.py::test_a_campaign_with_inductor_beside_ort_runs_torch_programs_and_onnx_graphs",
             "test_e2e.py::test_fuzz_runs_tests_on_tvm_relax",
             "test_backend_iree.py::test_campaign_draws_only_operators_iree_lowers",
             "test_program_frontends.py::test_fuzz_with_tvm_torch_runs_programs_and_records_ok_outcomes"],
    "migrate": ["test_e2e.py::test_migrate_runs_torch_calls_through_every_frontend"],
    "migrate-record": ["test_migrate_campaign.py::test_cli_migrate_runs_recorded_torch_instances"],
    "migrate-apfd": ["test_e2e.py::test_migrate_runs_torch_calls_through_every_frontend"],
    "reduce": ["test_e2e.py::test_reduce_shrinks_the_bug_and_keeps_its_signature"],
    "retriage": ["test_triggers.py::test_retriage_folds_a_recorded_campaigns_bugs_under_one_root"],
    "report": ["test_e2e.py::test_report_lists_the_bug"],
    "bugs": ["test_e2e.py::test_bugs_lists_the_campaigns_bug"],
    "gen": ["test_e2e.py::test_gen_for_a_backend_writes_valid_models", "test_cli.py::test_gen_every_strategy",
            "test_torch_programs.py::test_gen_for_inductor_writes_programs_that_run_without_dlcfuzz"],
    "metrics": ["test_cli.py::test_metrics_json"],
    "probe": ["test_e2e.py::test_probe_writes_a_profile_of_what_it_ran"],
    "backends": ["test_e2e.py::test_backends_lists_every_backend_and_each_is_covered"],
    "store": ["test_store_recovery.py::test_a_damaged_store_is_said_in_one_line_and_rebuilt_with_every_bug"],
}
BACKEND_COVERED = {**{b: "fuzz" for b in FUZZED}, "iree": "fuzz", "inductor-program": "fuzz",
                   **{b: "migrate" for b in MIGRATED}}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def need(name: str) -> None:
    """Skip, saying why, only where the backend's package is missing."""
    ok, why = load_backend(name).available()
    if not ok:
        pytest.skip(why)


def rows(campaign: Path, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(campaign / "campaign.sqlite") as db:
        return db.execute(sql, args).fetchall()


def ran_on(campaign: Path, backend: str) -> set[int]:
    """The tests on which some variant of ``backend`` ran to the end."""
    return {t for (t,) in rows(campaign, "SELECT test_id FROM outcomes WHERE backend = ? AND status = 'ok'",
                               backend)}


# -- the operators a campaign generates from ------------------------------------------------------------------

def test_supports_without_a_graph_follows_from_supports_with_one() -> None:
    """The CLI keeps the operators some backend under test supports without a graph: a backend that takes
    a graph must take its operators alone (tvm-relax answered False without a graph, and
    ``fuzz --backends tvm-relax`` stopped before its first test)."""
    from dlcfuzz.gen.isra import IsraGenerator
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.spec import REGISTRY

    gen = IsraGenerator(list(REGISTRY.values()), GenOptions(), (1, 3))
    graphs = [gen.generate(seed) for seed in range(40)]
    for name in (*FUZZED, "iree"):
        if not load_backend(name).available()[0]:
            continue
        b = load_backend(name)
        taken = [g for g in graphs if b.supports({n.op for n in g.nodes}, g)]
        assert taken, f"{name} takes none of 40 generated graphs"
        for g in taken:
            ops = {n.op for n in g.nodes}
            assert b.supports(ops), (name, sorted(ops))
            assert all(b.supports({op}) for op in ops), (name, sorted(ops))


# -- fuzz ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backends", list(FUZZ_RUNS))
def test_fuzz_runs_tests_on_the_backend(backends: str, tmp_path: Path, capsys) -> None:
    backend = FUZZ_RUNS[backends]
    for name in backends.split(","):
        need(name)
    tests = 1 if "inductor" in backends else 2  # Inductor compiles for seconds: one test
    out = tmp_path / "c"
    rc, stdout, err = cli(capsys, "fuzz", "--backends", backends, "--max-tests", str(tests), "--ops", "2:3",
                          "--no-allocation", *SHORT, "--out", str(out))  # every backend on every test
    assert rc == 0, err[-3000:]
    assert len(rows(out, "SELECT id FROM tests")) == tests
    assert len(ran_on(out, backend)) == tests, rows(out, "SELECT * FROM outcomes")
    assert {b for (b,) in rows(out, "SELECT DISTINCT backend FROM outcomes")} == {backend, *backends.split(",")[1:]}
    assert re.search(rf"{re.escape(backend)}\s+\d+ tests", stdout), stdout  # its line of the summary


def test_a_campaign_with_inductor_beside_ort_runs_torch_programs_and_onnx_graphs(tmp_path: Path, capsys) -> None:
    """The default campaign's way with Inductor (issue 28): with other backends beside it, Inductor runs
    torch-native programs (backend ``inductor-program``) as well as ONNX graphs written as modules, in one
    store, the program backend one more arm of the allocation (below its floor of CPU it is the target:
    two tests hold a program and an ONNX graph, whichever comes first)."""
    need("ort")
    need("inductor")
    out = tmp_path / "c"
    rc, stdout, err = cli(capsys, "fuzz", "--backends", "ort,inductor", "--max-tests", "2", "--ops", "2:3",
                          *SHORT, "--out", str(out))
    assert rc == 0, err[-3000:]
    programs = ran_on(out, "inductor-program")
    assert len(programs) == 1, rows(out, "SELECT * FROM outcomes")
    onnx = {t for (t,) in rows(out, "SELECT test_id FROM outcomes WHERE backend IN ('ort', 'inductor')")}
    assert len(onnx) == 1 and not onnx & programs
    # the program test is a torch program: its operators are torch's, and it ran on the program variants
    (ops,), = rows(out, "SELECT ops FROM tests WHERE id = ?", *programs)
    assert ops and all(op.startswith("torch.") for op in ops.split(",")), ops
    variants = {v for (v,) in rows(out, "SELECT variant FROM outcomes WHERE backend = 'inductor-program'")}
    assert variants & {"inductor", "inductor-backward"}, variants
    assert re.search(r"inductor-program\s+1 tests \(1 targeted\)", stdout), stdout  # its line of the summary
    assert "torch-native programs of" in stdout


# one tvm-relax campaign, shared by the fuzz, bugs, report and reduce tests: operators whose modules TVM
# compiles, laid out in functions that the plan rewrites (a closure makes TVM's VMShapeLower fail)
RELAX_OPS = "Abs,Add,Relu,Sigmoid,MatMul,Transpose,Concat,Exp,Neg,Tanh,Mul,ReduceMean"


@pytest.fixture(scope="module")
def relax_campaign(tmp_path_factory) -> tuple[Path, str, str]:
    """(campaign folder, stdout, stderr) of ``fuzz --backends tvm-relax``."""
    need("tvm-relax")
    out = tmp_path_factory.mktemp("relax") / "c"
    import contextlib
    import io

    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        rc = main(["fuzz", "--backends", "tvm-relax", "--op-set", RELAX_OPS, "--ops", "6:8", "--max-tests", "3",
                   *SHORT, "--out", str(out)])
    assert rc == 0, se.getvalue()[-3000:]
    return out, so.getvalue(), se.getvalue()


def test_fuzz_runs_tests_on_tvm_relax(relax_campaign) -> None:
    out, stdout, _ = relax_campaign
    assert len(rows(out, "SELECT id FROM tests")) == 3
    assert len(ran_on(out, "tvm-relax")) == 3
    variants = {v for (v,) in rows(out, "SELECT DISTINCT variant FROM outcomes WHERE backend = 'tvm-relax'")}
    assert {"original-generic", "rewritten-generic"} <= variants
    assert re.search(r"^\s+tvm-relax\s+3 tests", stdout, re.M), stdout


def _the_bug(out: Path) -> tuple[str, str, Path]:
    bugs = rows(out, "SELECT signature, title, dir FROM bugs WHERE backend = 'tvm-relax'")
    assert bugs, "the campaign found no tvm-relax bug to list, reduce and report"
    signature, title, folder = bugs[0]
    return signature, title, out / folder


def test_bugs_lists_the_campaigns_bug(relax_campaign, capsys) -> None:
    out, _, _ = relax_campaign
    signature, title, folder = _the_bug(out)
    rc, stdout, _ = cli(capsys, "bugs", str(out))
    assert rc == 0
    assert signature in stdout and "tvm-relax" in stdout and title[:60] in stdout
    assert str(folder / "repro.py") in stdout


def test_report_lists_the_bug(relax_campaign, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib", reason="the report needs dlcfuzz[report] (pip install matplotlib)")
    out, _, _ = relax_campaign
    signature, _, _ = _the_bug(out)
    html = tmp_path / "r.html"
    rc, _, err = cli(capsys, "report", str(out), "-o", str(html))
    assert rc == 0, err
    text = html.read_text()
    assert text.startswith("<!DOCTYPE html>") or text.lstrip().lower().startswith("<!doctype html>")
    assert signature in text and "tvm-relax" in text


def test_reduce_shrinks_the_bug_and_keeps_its_signature(relax_campaign, capsys) -> None:
    out, _, _ = relax_campaign
    signature, _, folder = _the_bug(out)
    before = len(json.loads((folder / "graph.json").read_text())["nodes"])
    rc, stdout, err = cli(capsys, "reduce", "--budget", "60s", str(folder))
    assert rc == 0, err[-3000:]
    reduced = folder / "reduced"
    after = json.loads((reduced / "graph.json").read_text())["nodes"]
    assert 0 < len(after) < before, (before, len(after))
    assert f"{before} -> {len(after)} operators" in stdout
    summary = json.loads((folder / "reduction.json").read_text())
    assert summary["signature"] == signature and summary["reproduced"]
    assert summary["nodes_after"] == [n["op"] for n in after]
    onnx.checker.check_model(onnx.load(reduced / "model.onnx"))


# -- migrate ------------------------------------------------------------------------------------------------------

def test_migrate_runs_torch_calls_through_every_frontend(tmp_path: Path, capsys) -> None:
    """A torch call through every torch frontend, with the library's own run named too: it stays the
    pre-check and reference, never fed the ONNX export (it was, and raised a false crash bug).  The
    export's path to the ONNX frontends is test_migrate_triage.py's."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    for name in MIGRATED:
        need(name)
    from dlcfuzz.migrate.instances import InstanceSet
    from tests.test_migrate_triage import torch_instance

    g = torch.Generator().manual_seed(0)
    s = InstanceSet(tmp_path / "set.sqlite")
    s.add(torch_instance("torch.add", (torch.randn(3, 2, generator=g), torch.randn(3, 2, generator=g)), {}, "add"))
    s.close()
    out = tmp_path / "c"
    rc, stdout, err = cli(capsys, "migrate", "--source", str(tmp_path / "set.sqlite"), "--backends",
                          ",".join(MIGRATED), "--out", str(out))
    assert rc == 0, err[-3000:]
    tests = rows(out, "SELECT id, baseline FROM tests")
    assert len(tests) == 1 and tests[0][1] == "torch-library", tests  # the library's run is the reference
    for name in ("tvm-torch", "openvino-torch", "inductor-torch"):
        assert len(ran_on(out, name)) == 1, (name, rows(out, "SELECT * FROM outcomes"))
    assert not rows(out, "SELECT * FROM outcomes WHERE backend = 'torch-library'")
    assert not rows(out, "SELECT * FROM bugs"), rows(out, "SELECT backend, title FROM bugs")
    assert "1 tests run, 0 instances discarded" in stdout
    rc, stdout, err = cli(capsys, "migrate", "apfd", str(out))
    assert rc == 0, err
    assert "opera" in stdout and "prioritization time: " in stdout, stdout  # RQ2's table, of no bug here


# -- gen --for, probe, backends -----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["ort", "tvm", "openvino", "iree", "tvm-relax"])
def test_gen_for_a_backend_writes_valid_models(backend: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """Every backend with a packaged support profile; tvm-relax has none (it runs what its campaign
    generates): asked for, it says how to build one, in one line (with no profile cached: the suite's
    campaigns on tvm-relax probe it and cache theirs)."""
    need(backend)
    if backend == "tvm-relax":
        monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path / "cache"))
        rc, _, err = cli(capsys, "gen", "-n", "3", "--for", backend, "--out", str(tmp_path))
        assert rc == 2 and err.count("\n") == 1 and "dlcfuzz probe --backends tvm-relax" in err, err
        return
    rc, _, err = cli(capsys, "gen", "-n", "3", "--ops", "2:4", "--seed", "3", "--for", backend, "--out",
                     str(tmp_path))
    assert rc == 0, err
    models = sorted(tmp_path.glob("*.onnx"))
    assert len(models) == 3
    for m in models:
        onnx.checker.check_model(onnx.load(m), full_check=True)


def test_probe_writes_a_profile_of_what_it_ran(tmp_path: Path, capsys, monkeypatch) -> None:
    from dlcfuzz.run.profile import load_profile

    monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path / "cache"))
    rc, _, err = cli(capsys, "probe", "--backends", "ort", "--per-op", "2", "--op-set", "Relu,Add",
                          "--out", str(tmp_path / "p"))
    assert rc == 0, err[-3000:]
    profile = load_profile("ort", load_backend("ort").version())
    assert profile is not None
    assert profile.admits_op("Relu") and profile.admits_op("Add")
    assert sum(profile.counts["Relu"]["*"]) >= 2  # the tests it ran, counted
    campaigns = [p for p in (tmp_path / "p").rglob("campaign.sqlite")]
    assert campaigns and sum(len(rows(c.parent, "SELECT id FROM tests")) for c in campaigns) >= 4


def test_backends_lists_every_backend_and_each_is_covered(capsys) -> None:
    rc, stdout, _ = cli(capsys, "backends", "--no-variants")
    assert rc == 0
    listed = {line.split()[0] for line in stdout.splitlines() if line and not line[0].isspace()}
    assert set(BUILTIN) <= listed
    assert listed - {"reference"} <= BACKEND_COVERED.keys(), "a backend without an end-to-end test"
    with pytest.raises(SystemExit):
        main(["--help"])
    commands = re.search(r"\{([a-z,-]+)\}", capsys.readouterr().out).group(1).split(",")
    assert set(commands) == COVERED.keys(), "a command without an end-to-end test"
