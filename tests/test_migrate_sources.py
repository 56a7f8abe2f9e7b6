"""The sources of operator instances: ONNX node tests, PyTorch OpInfo/ModuleInfo, and recording any
pytest suite's torch calls (real components, each harvest in its child process)."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from dlcfuzz.migrate.instances import Instance, InstanceSet
from dlcfuzz.migrate.record import RecordError, record
from dlcfuzz.migrate.sources import SOURCES, SourceError, harvest, is_random_op

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_OPINFO = HAS_TORCH and importlib.util.find_spec("expecttest") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
SAMPLE = Path(__file__).parent / "migrate_sample" / "test_torch_functional_sample.py"


def instances(path: Path) -> list[Instance]:
    store = InstanceSet(path)
    try:
        return [store.get(i.id) for i in store]
    finally:
        store.close()


def ort_run(inst: Instance) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(inst.model, so, providers=["CPUExecutionProvider"])
    return sess.run(None, inst.inputs)


# -- onnx-node ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def onnx_node(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "node.sqlite"
    stats = harvest("onnx-node", path)
    return path, stats, instances(path)


def test_onnx_node_harvest_counts(onnx_node):
    _, stats, insts = onnx_node
    assert stats["source"] == "onnx-node"
    assert stats["instances"] == len(insts) > 1100
    assert stats["operators"] == len({i.op for i in insts}) > 150
    skipped = stats["skipped"]
    assert skipped["sequence input/output"] > 0 and skipped["needs opset > 26"] > 0 and skipped["invalid"] > 0
    assert skipped["random op"] > 0 and not {"Bernoulli", "RandomNormal", "Dropout"} & {i.op for i in insts}
    assert all(i.library == "onnx" and i.source == "onnx-node" and i.expected for i in insts)
    assert len({i.provenance for i in insts}) == len(insts)  # unique, even for repeated case names
    conv = next(i for i in insts if i.provenance == "test_conv_with_strides_padding")
    assert conv.op == "Conv" and conv.params["strides"] == [2, 2] and conv.params["pads"] == [1, 1, 1, 1]
    assert [t["name"] for t in conv.tensors] == ["x", "W"] and conv.tensors[0]["shape"] == [1, 1, 7, 5]


def test_onnx_node_models_valid_for_the_runtime(onnx_node):
    _, _, insts = onnx_node
    lowered = 0
    for inst in insts:
        model = onnx.load_from_string(inst.model)
        onnx.checker.check_model(model, full_check=True)
        assert model.ir_version <= 13, inst.provenance
        default = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
        assert all(v <= 26 for v in default), inst.provenance
        assert [i.name for i in model.graph.input] == list(inst.inputs) == [t["name"] for t in inst.tensors]
        lowered += model.ir_version == 13 and default == [26]
    assert lowered > 80  # most of them the IR 14 / opset 27-28 cases, down-versioned


def test_onnx_node_small_integer_inputs_are_constants(onnx_node):
    _, _, insts = onnx_node
    reshape = next(i for i in insts if i.provenance == "test_reshape_reordered_all_dims")
    model = onnx.load_from_string(reshape.model)
    assert [i.name for i in model.graph.input] == ["data"]
    assert [t.name for t in model.graph.initializer] == ["shape"]
    assert reshape.params["input.shape"] == [4, 2, 3]


def test_onnx_node_instances_run_in_onnxruntime(onnx_node):
    _, _, insts = onnx_node
    for name in ("test_conv_with_strides_padding", "test_reshape_reordered_all_dims", "test_softmax_axis_0"):
        inst = next(i for i in insts if i.provenance == name)
        got = ort_run(inst)
        assert len(got) == len(inst.expected)
        for g, e in zip(got, inst.expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)
    # an op whose newest version is opset 28 (BitShift), lowered to opset 26 where its types allow it
    bitshift = next(i for i in insts if i.provenance == "test_bitshift_left_uint8")
    np.testing.assert_array_equal(ort_run(bitshift)[0], bitshift.expected[0])


# -- torch-opinfo -------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_OPINFO, reason="torch-opinfo needs torch and expecttest")
def test_torch_opinfo_harvest(tmp_path):
    from dlcfuzz.export.torch_call import build_module, decode_call, run_eager

    path = tmp_path / "opinfo.sqlite"
    stats = harvest("torch-opinfo", path, limit_per_op=1)
    insts = instances(path)
    assert stats["instances"] == len(insts) > 500
    assert stats["operators"] == len({i.op for i in insts})
    assert stats["skipped"]["random op"] > 0
    per_op = Counter((i.op, i.params.get("variant")) for i in insts)
    assert max(per_op.values()) == 1  # limit_per_op (per OpInfo: an operator's variants count separately)
    assert all(i.library == "torch" and i.source == "torch-opinfo" and i.expected is None for i in insts)
    assert not any(is_random_op(i.op.removeprefix("torch.")) for i in insts)
    modules = [i for i in insts if i.provenance.startswith("ModuleInfo:")]
    assert len(modules) > 50 and all(i.op.startswith("torch.nn.") for i in modules)
    by_op = {i.op: i for i in insts}
    for op in ("torch.nn.functional.conv2d", "torch.add", "torch.softmax", "torch.cat",
               "torch.nn.Conv2d", "torch.nn.Linear"):
        inst = by_op[op]
        assert [t["name"] for t in inst.tensors] == list(inst.inputs)
        spec = decode_call(inst.model)
        assert not spec["target"].startswith("opinfo:"), spec["target"]
        module, names = build_module(spec)
        out = run_eager(module, names, inst.inputs)
        assert out and all(isinstance(o, np.ndarray) for o in out), op
    conv = by_op["torch.nn.Conv2d"]
    assert any(k.startswith("init.") for k in conv.params)
    assert decode_call(conv.model)["state"]  # the module's weights travel with the call


# -- record -------------------------------------------------------------------------------------


@needs_torch
def test_record_sample_suite(tmp_path):
    out = tmp_path / "rec.sqlite"
    got = record("torch", out, [str(SAMPLE)])
    assert got["exit"] == 0 and got["tests"] == 6 and got["outcomes"] == {"passed": 6}
    insts = instances(out)
    assert got["instances"] == len(insts) >= 6
    assert all(i.source == "pytest" and i.library == "torch" and i.expected for i in insts)
    pool = [i for i in insts if i.op == "torch.nn.functional.avg_pool2d"]
    assert len(pool) == 1 and pool[0].params["divisor_override"] == 3
    assert pool[0].provenance.endswith("test_torch_functional_sample.py::test_avg_pool2d_divisor_override")
    np.testing.assert_allclose(pool[0].expected[0], np.array([[[[10, 18], [42, 50]]]]) / 3, rtol=1e-6)
    ops = {i.op for i in insts}
    assert {"torch.nn.functional.conv2d", "torch.nn.functional.softmax", "torch.clamp",
            "torch.nn.functional.pad", "torch.nn.functional.layer_norm"} <= ops
    # creation functions and torch.allclose (no tensor result) are not recorded
    assert not ops & {"torch.arange", "torch.ones", "torch.tensor", "torch.full", "torch.allclose"}
    # the recorded call rebuilds and gives the library's own result
    from dlcfuzz.export.torch_call import build_module, decode_call, run_eager

    module, names = build_module(decode_call(pool[0].model))
    np.testing.assert_allclose(run_eager(module, names, pool[0].inputs)[0], pool[0].expected[0])

    # a failing run (no such test file) raises, naming the cause, and keeps what was recorded
    with pytest.raises(RecordError, match=r"exit code 4 \(usage error\).*not found"):
        record("torch", out, [str(tmp_path / "no_such_test.py")])
    assert len(instances(out)) == len(insts)


@needs_torch
def test_record_failing_tests_still_record(tmp_path):
    suite = tmp_path / "test_failing.py"
    suite.write_text("import torch\n\n\ndef test_fails():\n"
                     "    y = torch.nn.functional.relu(torch.tensor([-1.0, 2.0]))\n"
                     "    assert y.tolist() == [1.0, 2.0]\n")
    got = record("torch", tmp_path / "rec.sqlite", [str(suite)])
    assert got["exit"] == 1 and got["outcomes"] == {"failed": 1} and got["instances"] == 1
    (inst,) = instances(tmp_path / "rec.sqlite")
    assert inst.op == "torch.nn.functional.relu" and inst.provenance.endswith("test_failing.py::test_fails")
    assert inst.expected[0].tolist() == [0.0, 2.0]

    broken = tmp_path / "test_broken.py"
    broken.write_text("import no_such_module_here\n")
    with pytest.raises(RecordError, match=r"exit code 2 \(interrupted\): ERROR collecting .*test_broken.py: "
                       r"ModuleNotFoundError: No module named 'no_such_module_here'"):
        record("torch", tmp_path / "rec.sqlite", [str(broken)])
    assert len(instances(tmp_path / "rec.sqlite")) == 1


def test_record_refuses_unsupported_or_missing_libraries(tmp_path, monkeypatch):
    with pytest.raises(RecordError, match=r"unsupported library 'keras' \(supported: torch\)"):
        record("keras", tmp_path / "rec.sqlite", [str(SAMPLE)])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(RecordError, match=r"torch is not installed \(pip install torch\)"):
        record("torch", tmp_path / "rec.sqlite", [str(SAMPLE)])
    assert not (tmp_path / "rec.sqlite").exists()


# -- errors -------------------------------------------------------------------------------------


def test_unknown_source_and_missing_library(tmp_path, monkeypatch):
    assert SOURCES == ("onnx-node", "torch-opinfo")
    with pytest.raises(SourceError, match="unknown source 'tf-ops'"):
        harvest("tf-ops", tmp_path / "x.sqlite")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "expecttest" else object())
    with pytest.raises(SourceError, match=r"needs expecttest.*pip install expecttest"):
        harvest("torch-opinfo", tmp_path / "x.sqlite")
    assert not (tmp_path / "x.sqlite").exists()


def test_stats_line_is_json(tmp_path):
    """The child's protocol: its last stdout line is the stats (``harvest`` parses it)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "dlcfuzz.migrate.sources", "onnx-node", str(tmp_path / "o.sqlite"),
                           "--limit-per-op", "1"], capture_output=True, text=True, check=True)
    stats = json.loads(proc.stdout.splitlines()[-1].split(" ", 1)[1])
    db = sqlite3.connect(tmp_path / "o.sqlite")
    ops = [r[0] for r in db.execute("SELECT op FROM instances")]
    assert stats["instances"] == len(ops) == len(set(ops)) == stats["operators"]
