"""torch-native programs on the PyTorch frontends of TVM and OpenVINO (``tvm-torch``, ``openvino-torch``:
``backends/program_frontend.py``, ``oracle/program_frontend.py``, ``run/program_frontends.py``), on the real
compilers: a program runs and matches eager, a frontend's refusal is a decline, a torch.export failure is
the exporter's decline, and ``dlcfuzz fuzz --backends tvm-torch`` runs programs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dlcfuzz.backends import load_backend  # noqa: E402
from dlcfuzz.backends.base import ERROR, Outcome, Test  # noqa: E402
from dlcfuzz.export.torch_program import build, to_program_source  # noqa: E402
from dlcfuzz.gen.torch_program import ProgramOptions, TorchProgramGenerator  # noqa: E402
from dlcfuzz.run.torch_campaign import judge_program  # noqa: E402
from dlcfuzz.spec.torch import TORCH_REGISTRY  # noqa: E402

FRONTENDS = ("tvm-torch", "openvino-torch")


def need(name: str) -> None:
    ok, why = load_backend(name).available()
    if not ok:
        pytest.skip(why)


def _program(ops: tuple[str, ...], seed: int, op_range: tuple[int, int] = (3, 4)):
    gen = TorchProgramGenerator([TORCH_REGISTRY[o] for o in ops], op_range,
                                options=ProgramOptions(layout_rate=1.0, backward_rate=0.0, dynamic_rate=0.0))
    return gen.generate(seed)


def _in_process(name: str, graph) -> tuple[list[np.ndarray] | Exception, dict[str, str]]:
    """load, compile and run a program on the first variant of ``name``, in this process: (the outputs or
    the error raised, the artifacts handed over)."""
    b = load_backend(name)
    artifacts: dict[str, str] = {}
    b.artifact = artifacts.__setitem__  # type: ignore[method-assign]
    variant = b.variants()[0]
    try:
        return b.run(b.compile(b.load(Test(b"", graph.to_json(), {})), variant), {}), artifacts
    except Exception as e:
        return e, artifacts


def _outcomes(name: str, error: Exception, phase: str = "import") -> dict[str, Outcome]:
    """What the worker reports for a program that raised ``error`` in ``phase``, on every variant."""
    return {v.name: Outcome(ERROR, phase, error_type=type(error).__name__, message=str(error))
            for v in load_backend(name).variants()}


@pytest.mark.parametrize("name", FRONTENDS)
def test_a_tiny_program_runs_through_the_frontend_and_matches_eager(name: str) -> None:
    """A real program (inputs in non-contiguous layouts: the frontend runs on contiguous copies) exported,
    converted, compiled and run: its outputs are eager torch's, and the worker's verdict has no divergence."""
    need(name)
    g = _program(("torch.relu", "torch.neg", "torch.abs", "torch.transpose", "torch.exp", "torch.mul"), 14, (3, 5))
    ns = build(to_program_source(g))
    args = ns["make_inputs"]()
    assert any(not a.is_contiguous() for a in args), "the program should take a non-contiguous input"
    assert len(g.outputs) >= 2  # their order matters
    with torch.no_grad():
        eager = [o.float().numpy() for o in ns["Model"]()(*args)]
    got, artifacts = _in_process(name, g)
    assert not isinstance(got, Exception), got
    assert json.loads(artifacts[f"verdict-{load_backend(name).variants()[0].name}.json"])["divergence"] is None
    assert len(got) == len(eager) == len(g.outputs)
    for a, b in zip(eager, got, strict=True):
        np.testing.assert_allclose(b.astype(np.float32), a, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", FRONTENDS)
def test_a_conversion_the_frontend_declines_is_a_decline(name: str) -> None:
    """logcumsumexp has no converter in either frontend ("Unsupported function types", "No conversion rule
    found"): the judge counts a decline on every variant and lists no bug."""
    need(name)
    g = _program(("torch.logcumsumexp",), 0, (1, 1))
    got, _ = _in_process(name, g)
    assert isinstance(got, Exception)
    verdict = judge_program(g, _outcomes(name, got), name)
    assert not verdict.findings, verdict.findings
    assert len(verdict.unsupported) == len(load_backend(name).variants())


def test_a_torch_export_failure_is_the_exporters_decline_not_the_compilers_bug(monkeypatch) -> None:
    """torch.export refusing the program (planted in torch.export itself; no generated program made it
    fail) is a TorchExportError: a decline of the exporter, apart from the frontend's, never a bug."""
    need("tvm-torch")

    def refuse(*args, **kwargs):
        raise RuntimeError("Could not guard on data-dependent expression u0 > 0")

    monkeypatch.setattr(torch.export, "export", refuse)
    g = _program(("torch.relu", "torch.neg"), 0, (1, 2))
    got, _ = _in_process("tvm-torch", g)
    assert type(got).__name__ == "TorchExportError" and str(got).startswith("torch.export failed"), got
    for name in FRONTENDS:
        verdict = judge_program(g, _outcomes(name, got), name)
        assert not verdict.findings, verdict.findings
        assert verdict.unsupported and all(u[2].startswith("TorchExportError: ") for u in verdict.unsupported)


def test_a_frontend_crash_is_the_compilers_bug_named_by_its_frontend() -> None:
    """An error that says no decline (TVM's frontend refusing a float16 + float32 add that torch promotes) is a
    crash finding, named for TVM's frontend, not Inductor."""
    err = TypeError("Binary operators must have the same datatype for both operands.")
    g = _program(("torch.relu", "torch.neg"), 0, (1, 2))
    verdict = judge_program(g, _outcomes("tvm-torch", err), "tvm-torch")
    assert verdict.findings and not verdict.unsupported
    assert {f.details["layer"] for f in verdict.findings} == {"tvm frontend"}


def test_fuzz_with_tvm_torch_runs_programs_and_records_ok_outcomes(tmp_path: Path, capsys) -> None:
    """``dlcfuzz fuzz --backends tvm-torch``: a campaign of torch-native programs on TVM's PyTorch frontend,
    each variant run to the end and judged (ok outcomes in the store, programs' torch operators in its tests)."""
    need("tvm-torch")
    from dlcfuzz.cli import main

    out = tmp_path / "c"
    rc = main(["fuzz", "--backends", "tvm-torch", "--max-tests", "2", "--jobs", "1", "--out", str(out),
               "--op-set", "relu,neg,abs,transpose", "--ops", "2:3", "--reduce-budget", "0", "--seed", "3"])
    stdout = capsys.readouterr().out
    assert rc == 0
    assert "torch-native programs" in stdout and "tvm-torch" in stdout
    with sqlite3.connect(out / "campaign.sqlite") as db:
        tests = db.execute("SELECT ops FROM tests").fetchall()
        ok = db.execute("SELECT DISTINCT test_id FROM outcomes WHERE backend = 'tvm-torch' AND status = 'ok'")
        ok = ok.fetchall()
    assert len(tests) == 2 and all("torch." in ops for (ops,) in tests)
    assert len(ok) == 2, ok
