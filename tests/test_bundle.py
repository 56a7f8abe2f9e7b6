"""run/bundle.py: a bug's folder holds everything to see and replay it, and its repro.py, run alone on
the real compiler (ONNX Runtime here), exits 1 while the bug is present and 0 once it is gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from dlcfuzz.backends.base import Test
from dlcfuzz.backends.ort import OrtBackend
from dlcfuzz.oracle import CRASH, DIFFERENTIAL, Finding
from dlcfuzz.run.bundle import write_bundle
from tests.helpers import make_model

X = np.array([[-1.0, 0.5, 2.0]], np.float32)
RELU = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [1, 3])],
                  [("y", TensorProto.FLOAT, [1, 3])])
# Reshape to 4 elements of a 3-element input: ONNX Runtime fails at run time
BAD_RESHAPE = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", TensorProto.FLOAT, [1, 3])],
                         [("y", TensorProto.FLOAT, [2, 2])], inits=[("s", np.array([2, 2], np.int64))])


def bundle(folder: Path, model: bytes, f: Finding, baseline, actual=None, **kw) -> Path:
    be = OrtBackend()
    write_bundle(folder, "0123456789abcdef", f"ort {f.oracle}: a title", f, Test(model, '{"nodes": []}', {"x": X}),
                 be, be.version(), {v.name: v for v in be.variants()}, baseline, actual, 30, **kw)
    return folder


def repro(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "repro.py"], cwd=folder, capture_output=True, text=True,
                          timeout=120)


def test_a_differential_bundle_replays_while_the_outputs_differ(tmp_path: Path) -> None:
    relu = np.maximum(X, 0)
    f = Finding(DIFFERENTIAL, "value", "ort", "all", "run", "outputs differ", other="reference/default", output=0)
    said = np.array([[0.0, 0.5, 3.0]], np.float32)  # the baseline's outputs: its last element differs
    wrong = bundle(tmp_path / "wrong", RELU, f, [said], [relu])
    files = {p.name for p in wrong.iterdir()}
    assert {"model.onnx", "graph.json", "inputs.npz", "expected.npz", "actual.npz", "finding.json", "repro.py",
            "report.md"} <= files
    assert "error.log" not in files  # a value bug, no traceback
    info = json.loads((wrong / "finding.json").read_text())
    assert info["signature"] == "0123456789abcdef" and info["compiler_version"] == OrtBackend().version()
    assert info["oracle"] == DIFFERENTIAL and info["other"] == "reference/default"
    with np.load(wrong / "inputs.npz") as z:
        np.testing.assert_array_equal(z["x"], X)
    r = repro(wrong)
    assert r.returncode == 1 and r.stdout.startswith("reproduced: output 0: 1/3 elements differ"), r.stdout + r.stderr
    fixed = bundle(tmp_path / "fixed", RELU, f, [relu], [relu])  # the compiler computes what was expected
    r = repro(fixed)
    assert r.returncode == 0 and "not reproduced" in r.stdout, r.stdout + r.stderr


def test_a_crash_bundle_replays_the_same_exception_type(tmp_path: Path) -> None:
    import onnxruntime as ort

    with pytest.raises(Exception) as raised:  # what ONNX Runtime itself raises on the model
        ort.InferenceSession(BAD_RESHAPE, providers=["CPUExecutionProvider"]).run(None, {"x": X})
    error_type = type(raised.value).__name__
    f = Finding(CRASH, "exception", "ort", "basic", "run", str(raised.value), error_type)  # no traceback
    folder = bundle(tmp_path / "crash", BAD_RESHAPE, f, None)
    assert (folder / "error.log").read_text().startswith(f"{error_type}: ")
    assert not (folder / "expected.npz").exists() and not (folder / "actual.npz").exists()
    r = repro(folder)
    assert r.returncode == 1 and r.stdout.startswith(f"reproduced: {error_type}"), r.stdout + r.stderr
    other = Finding(CRASH, "exception", "ort", "basic", "run", "m", "SomeOtherError")
    r = repro(bundle(tmp_path / "other", BAD_RESHAPE, other, None))
    assert r.returncode == 0 and r.stdout.startswith("different error"), r.stdout + r.stderr
    r = repro(bundle(tmp_path / "gone", RELU, f, None))  # a model that runs: the crash is gone
    assert r.returncode == 0 and r.stdout.startswith("not reproduced: the model runs"), r.stdout + r.stderr


def test_artifacts_stay_inside_the_bundle(tmp_path: Path) -> None:
    f = Finding(CRASH, "exception", "ort", "basic", "compile", "m", "RuntimeError")
    folder = bundle(tmp_path / "b" / "sig", RELU, f, None,
                    artifacts={"../../escaped.txt": "text", "sub/module.mlir": b"\x00bytes"})
    assert (folder / "escaped.txt").read_text() == "text" and not (tmp_path / "escaped.txt").exists()
    assert (folder / "module.mlir").read_bytes() == b"\x00bytes"
    assert (folder / "model.onnx").read_bytes() == RELU
    assert "a title" in (folder / "report.md").read_text()
