"""Migration campaigns (OPERA) end to end on hand-made instance sets and real frontends."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from dlcfuzz.cli import main
from dlcfuzz.migrate.campaign import Migration, MigrationConfig, frontends, summary
from dlcfuzz.migrate.instances import Instance, InstanceSet, tensor_info
from dlcfuzz.run.known import KnownBugs
from dlcfuzz.run.worker import PhaseLimits

HAS_TVM = importlib.util.find_spec("tvm") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_tvm = pytest.mark.skipif(not HAS_TVM, reason="apache-tvm is not installed")


def onnx_instance(op: str, inputs: dict[str, np.ndarray], outputs: list[str], provenance: str,
                  **attrs) -> Instance:
    """A single-node ONNX instance whose expected outputs come from ONNX's reference evaluator."""
    node = helper.make_node(op, list(inputs), outputs, **attrs)
    def typed(arrays: dict[str, np.ndarray]) -> list:
        return [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                for n, a in arrays.items()]

    def make(outs: list) -> onnx.ModelProto:
        graph = helper.make_graph([node], provenance, typed(inputs), outs)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    untyped = make([helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs])
    expected = [np.asarray(o) for o in ReferenceEvaluator(untyped).run(None, inputs)]
    model = make(typed(dict(zip(outputs, expected, strict=True))))
    return Instance("onnx", op, "pytest", provenance, dict(attrs),
                    [tensor_info(n, a) for n, a in inputs.items()], model.SerializeToString(), inputs, expected)


def layer_norm(axis: int, provenance: str) -> Instance:
    rng = np.random.default_rng(axis + 5)
    shape = (2, 3, 4)
    norm = shape[axis:]
    inputs = {"X": rng.standard_normal(shape).astype(np.float32), "W": rng.standard_normal(norm).astype(np.float32),
              "B": rng.standard_normal(norm).astype(np.float32)}
    return onnx_instance("LayerNormalization", inputs, ["Y", "Mean", "InvStd"], provenance, axis=axis, epsilon=1e-5)


@pytest.fixture
def onnx_set(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    s = InstanceSet(tmp_path / "set.sqlite")
    s.add(onnx_instance("Relu", {"x": rng.standard_normal((2, 3)).astype(np.float32)}, ["y"], "relu"))
    # TVM's LayerNormalization converter returns Mean and InvStd as scalars: two instances, one converter
    s.add(layer_norm(-1, "ln_last_axis"))
    s.add(layer_norm(1, "ln_axis_1"))
    s.close()
    return tmp_path / "set.sqlite"


def test_frontends_expand_compilers():
    assert frontends(["tvm", "ort"]) == ["tvm", "tvm-torch", "ort"]
    assert frontends(["inductor", "tvm-torch"]) == ["inductor-torch", "tvm-torch"]


@needs_tvm
def test_migration_finds_the_layernorm_converter_bug_once(onnx_set: Path, tmp_path: Path):
    out = tmp_path / "campaign"
    cfg = MigrationConfig(out, [str(onnx_set)], ["tvm", "ort"], phases=PhaseLimits(compile=60, run=30),
                          measure_coverage=True)
    m = Migration(cfg)
    stats = m.harvest()
    assert stats[str(onnx_set)]["instances"] == 3
    progress = m.run()
    assert progress.tests == 3
    db = sqlite3.connect(out / "campaign.sqlite")
    bugs = db.execute("SELECT signature, backend, oracle, kind, title, dir FROM bugs").fetchall()
    tvm_bugs = [b for b in bugs if b[1] == "tvm"]
    # both LayerNormalization instances fail in the same converter: one distinct bug, two findings
    assert len(tvm_bugs) == 1, bugs
    sig, _, oracle, kind, title, folder = tvm_bugs[0]
    assert (oracle, kind) == ("differential", "shape")
    assert "LayerNormalization" in title
    assert db.execute("SELECT COUNT(*) FROM findings WHERE signature = ?", (sig,)).fetchone()[0] == 2
    assert not [b for b in bugs if b[1] == "ort"]
    # the bundle replays alone and exits 1 while the bug is present
    bundle = out / folder
    assert json.loads((bundle / "instance.json").read_text())["op"] == "LayerNormalization"
    run = subprocess.run([sys.executable, str(bundle / "repro.py")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    s = summary(out)
    assert s["tests"] == 3 and s["discarded"] == 0
    # the statements of TVM's ONNX frontend each import ran (coverage.py in the worker), for the cov orders
    covered = dict(db.execute("SELECT test_id, lines FROM frontend_coverage WHERE backend = 'tvm'").fetchall())
    assert len(covered) == 3
    assert all(line.startswith("tvm/relax/frontend/onnx/") for lines in covered.values() for line in lines.split())


@needs_tvm
def test_migration_resumes_without_rerunning(onnx_set: Path, tmp_path: Path):
    out = tmp_path / "campaign"
    first = Migration(MigrationConfig(out, [str(onnx_set)], ["ort"], max_tests=1))
    first.harvest()
    first.run()
    again = Migration(MigrationConfig(out, [str(onnx_set)], ["ort"], max_tests=3))
    assert again.resumed
    again.harvest()  # already harvested: nothing copied twice
    progress = again.run()
    assert progress.tests == 2
    db = sqlite3.connect(out / "campaign.sqlite")
    assert db.execute("SELECT COUNT(*) FROM instances").fetchone()[0] == 3
    assert db.execute("SELECT COUNT(*) FROM tests").fetchone()[0] == 3


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, capsys):
    cases = [
        ["migrate", "--source", "no-such-source", "--out", str(tmp_path / "a")],
        ["migrate", "--source", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path / "b")],
        ["migrate", "--source", "onnx-node", "--backends", "tvm,nosuch", "--out", str(tmp_path / "c")],
        ["migrate", "--source", "onnx-node", "--prioritize", "alphabetical", "--out", str(tmp_path / "d")],
        ["migrate", "apfd", str(tmp_path / "not-a-campaign")],
        ["migrate", "--source", "onnx-node", "--prioritize", "total-cov", "--out", str(tmp_path / "e")],
        ["migrate", "record", "--library", "torch", "--out", str(tmp_path / "r.sqlite"), "--", "make", "test"],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("dlcfuzz: error:") and "\n" not in err, (argv, err)


@pytest.mark.skipif(not (HAS_TVM and HAS_TORCH), reason="needs apache-tvm and torch")
def test_cli_migrate_runs_recorded_torch_instances(tmp_path: Path, capsys):
    """`migrate record` on a small pytest file of torch functional calls, then `migrate` on what it recorded:
    TVM's torch frontend ignores avg_pool2d's divisor_override, a distinct bug of its converter."""
    sample = Path(__file__).parent / "migrate_sample" / "test_torch_functional_sample.py"
    rec = tmp_path / "rec.sqlite"
    assert main(["migrate", "record", "--library", "torch", "--out", str(rec), "--", "pytest", str(sample)]) == 0
    recorded = len(InstanceSet(rec))
    assert recorded >= 4
    # a run that fails to collect, or a library that is not supported: one line, exit 2, nothing lost
    for argv in (["--library", "torch", "--out", str(rec), "--", "pytest", str(tmp_path / "no_such_test.py")],
                 ["--library", "keras-nonexistent", "--out", str(rec), "--", "pytest", str(sample)]):
        capsys.readouterr()
        assert main(["migrate", "record", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("dlcfuzz: error:") and "\n" not in err, err
        assert len(InstanceSet(rec)) == recorded
    out = tmp_path / "campaign"
    assert main(["migrate", "--source", str(rec), "--backends", "tvm-torch", "--out", str(out),
                 "--no-onnx-export"]) == 0
    db = sqlite3.connect(out / "campaign.sqlite")
    # the bug is known upstream (apache/tvm#14795, in dlcfuzz's known_bugs.toml): counted, not re-reported
    known = KnownBugs.load().by_signature
    avg_pool = [s for s, b in known.items() if b.backend == "tvm-torch" and "divisor_override" in b.title]
    hits = db.execute("SELECT COUNT(*) FROM findings WHERE signature = ?", (avg_pool[0],)).fetchone()[0]
    assert hits >= 1
    assert not db.execute("SELECT COUNT(*) FROM bugs WHERE signature = ?", (avg_pool[0],)).fetchone()[0]


def test_instance_set_keeps_values(tmp_path: Path):
    rng = np.random.default_rng(1)
    inst = onnx_instance("Relu", {"x": rng.standard_normal((3,)).astype(np.float32)}, ["y"], "relu")
    s = InstanceSet(tmp_path / "s.sqlite")
    iid = s.add(inst)
    got = s.get(iid)
    assert got.op == "Relu" and got.provenance == "relu"
    np.testing.assert_array_equal(got.inputs["x"], inst.inputs["x"])
    np.testing.assert_array_equal(got.expected[0], inst.expected[0])
    onnx.checker.check_model(onnx.load_model_from_string(got.model))
    assert [i.id for i in s] == [iid]


def test_chebyshev_bound_scales_with_magnitude_and_integers_are_exact():
    from dlcfuzz.oracle.compare import chebyshev

    e = np.array([0.5, 1000.0], dtype=np.float32)
    assert chebyshev([e], [e + np.float32(5e-4)]) is None  # within 1e-3 * max(1, 1000) = 1
    assert chebyshev([np.array([0.5], np.float32)], [np.array([0.502], np.float32)]).max_abs > 1e-3
    assert chebyshev([np.array([np.nan], np.float32)], [np.array([np.nan], np.float32)]) is None
    assert chebyshev([np.array([np.nan], np.float32)], [np.array([1.0], np.float32)]) is not None
    assert chebyshev([np.array([3], np.int64)], [np.array([4], np.int64)]).kind == "value"
    assert chebyshev([np.array([3], np.int64)], [np.array([3], np.int32)]).kind == "dtype"


def test_migrated_signature_is_the_conversion_function():
    from dlcfuzz.oracle import Finding
    from dlcfuzz.run.dedup import migrated_signature

    def crash(message: str, tb: str = "") -> Finding:
        return Finding("crash", "exception", "tvm", "unfused-generic", "import", message, "KeyError", tb)

    # names, numbers and messages differ; the converter is the same: one bug
    a = migrated_signature(crash("'num_heads' in node attention_1"), "Attention", "onnx:Attention")
    b = migrated_signature(crash("'kv_num_heads' in node n7"), "Attention", "onnx:Attention")
    assert a == b
    # MaxPool and AveragePool handled by one converter: one bug (OPERA's example)
    assert (migrated_signature(crash("x"), "MaxPool", "onnx:Pool")
            == migrated_signature(crash("y"), "AveragePool", "onnx:Pool"))
    assert a != migrated_signature(crash("x"), "Conv", "onnx:Conv")
    # several converters reported: the innermost traceback frame among them decides
    tb = 'File "/x/tvm/relax/frontend/torch/base.py", line 3, in _conv2d\n'
    two = "ep:_conv2d,ep:_binary_op(add)"
    assert migrated_signature(crash("m", tb), "conv2d", two) == migrated_signature(crash("m"), "conv2d", "ep:_conv2d")
    # without a converter (OpenVINO): the operator type and the normalized message
    ov = Finding("crash", "exception", "openvino", "f32", "import", "Check failed at node n12: rank 3", "RuntimeError")
    ov2 = Finding("crash", "exception", "openvino", "f32", "import", "Check failed at node n99: rank 4", "RuntimeError")
    assert migrated_signature(ov, "Col2Im") == migrated_signature(ov2, "Col2Im")
    assert migrated_signature(ov, "Col2Im") != migrated_signature(ov, "Im2Col")


def test_signatures_ignore_the_names_a_test_gives_its_values():
    """Two reports of one bug that differ only in node and value names (which need not contain digits)."""
    from dlcfuzz.oracle import Finding
    from dlcfuzz.run.dedup import signature

    tb = 'File "/site-packages/tvm/relax/frontend/onnx/onnx_frontend.py", line 9, in _impl_v13\n'

    def crash(name: str, value: str) -> Finding:
        message = f"Node '{name}': input '{value}' has rank 3 at 0x7f3a12, see /tmp/tmpa1b2/x.py"
        return Finding("crash", "exception", "tvm", "unfused-generic", "import", message, "ValueError", tb)

    one = signature(crash("conv_block", "data"), names=["conv_block", "data", "weights"])
    two = signature(crash("node_7", "X"), names=["node_7", "X", "W"])
    assert one == two
    # a different message is a different bug
    other = Finding("crash", "exception", "tvm", "unfused-generic", "import", "Node 'X': bad dtype", "ValueError", tb)
    assert signature(other, names=["X"]) != one
