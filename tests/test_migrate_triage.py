"""Migrated bug lists a compiler team can act on: exporter defects apart, one key per cause,
explicit declines not listed (issue 13), on real frontends and tiny migrated instances."""

from __future__ import annotations

import importlib.util
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.cli import main
from dlcfuzz.migrate.campaign import EXPORT, Migration, MigrationConfig
from dlcfuzz.migrate.instances import TORCH, Instance, InstanceSet, tensor_info
from dlcfuzz.oracle import BASELINE, CRASH, DIFFERENTIAL, Finding
from dlcfuzz.run.dedup import migrated_signature
from dlcfuzz.run.worker import PhaseLimits

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_OPENVINO = importlib.util.find_spec("openvino") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")


def torch_instance(target: str, args: tuple, kwargs: dict, provenance: str) -> Instance:
    from dlcfuzz.export.torch_call import encode_call

    spec, arrays = encode_call(target, args, kwargs)
    return Instance(TORCH, target, "pytest", provenance, dict(kwargs),
                    [tensor_info(n, a) for n, a in arrays.items()], spec, arrays, None)


def run_migration(tmp_path: Path, instances: list[Instance], backends: list[str], **cfg) -> Path:
    s = InstanceSet(tmp_path / "set.sqlite")
    for inst in instances:
        s.add(inst)
    s.close()
    out = tmp_path / "campaign"
    m = Migration(MigrationConfig(out, [str(tmp_path / "set.sqlite")], backends,
                                  phases=PhaseLimits(compile=120, run=30), **cfg))
    m.harvest()
    m.run()
    return out


@pytest.fixture(scope="module")
def ort_openvino(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    """One migration on ORT and OpenVINO, shared by the tests of its instances (each test reads its own
    test's rows): (campaign folder, provenance -> test id).  Each instance alone had its own migration,
    and its own workers to start."""
    if not HAS_OPENVINO:
        pytest.skip("openvino is not installed")
    instances = []
    if HAS_TORCH:
        import torch

        instances.append(torch_instance("torch.nn.functional.softplus", (torch.tensor([[-1.0, 0.5, 2.0, 3.0]]),),
                                        {"threshold": 1.0}, "softplus_threshold"))
        lce = (torch.tensor([0.5, -1.0, 2.0]), torch.arange(12, dtype=torch.float32).reshape(4, 3) / 10,
               torch.tensor(2))
        instances.append(torch_instance("torch.nn.functional.linear_cross_entropy", lce, {}, "lce"))
    x = np.array([[-1.0, 2.0, 3.0]], np.float32)
    relu = onnx_instance("Relu", {"x": x}, 17, "relu_wrong_expect")
    relu.expected = [-np.maximum(x, 0)]
    instances.append(relu)
    out = run_migration(tmp_path_factory.mktemp("ort_openvino"), instances, ["ort", "openvino"])
    db = sqlite3.connect(out / "campaign.sqlite")
    ids = dict(db.execute("SELECT i.provenance, t.id FROM tests t JOIN instances i ON i.id = t.id").fetchall())
    db.close()
    return out, ids


@needs_torch
def test_a_wrong_export_is_one_exporter_finding_not_a_bug_of_each_onnx_frontend(ort_openvino, capsys):
    """softplus(x, threshold=1) returns x where x > 1; torch.onnx.export drops the threshold (ONNX
    Softplus has none), so every ONNX frontend computes log(1 + exp(x)) there.  Judged against torch,
    that was one bug per ONNX frontend; it is one exporter finding, and the frontends, judged against
    the reference run of the export, have none."""
    out, ids = ort_openvino
    test = ids["softplus_threshold"]
    db = sqlite3.connect(out / "campaign.sqlite")
    findings = db.execute("SELECT backend, oracle, kind FROM findings WHERE test_id = ?", (test,)).fetchall()
    assert findings == [(EXPORT, DIFFERENTIAL, "value")], findings
    bugs = db.execute("SELECT backend, category, dir FROM bugs WHERE first_test = ?", (test,)).fetchall()
    assert [b[:2] for b in bugs] == [(EXPORT, "exporter")]
    exporter = db.execute("SELECT COUNT(*) FROM bugs WHERE category = 'exporter'").fetchone()[0]
    assert exporter == 2  # this one and linear_cross_entropy's, the other torch instance of the migration
    bundle = out / bugs[0][2]
    # torch's own outputs, by softplus' definition: x where x > threshold, log1p(exp(x)) elsewhere
    xs = np.array([[-1.0, 0.5, 2.0, 3.0]], np.float32)
    want = np.where(xs > 1.0, xs, np.log1p(np.exp(xs)))
    np.testing.assert_allclose(np.load(bundle / "expected.npz")["o0"], want, rtol=1e-5)
    # the repro runs the exported model on the ONNX reference evaluator: it exits 1 while the export is wrong
    run = subprocess.run([sys.executable, str(bundle / "repro.py")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    # listed apart: not a compiler bug
    capsys.readouterr()
    assert main(["bugs", str(out)]) == 0
    listed = capsys.readouterr().out
    assert "compiler bugs: 0" in listed and f"exporter issues: {exporter}" in listed
    assert main(["bugs", str(out), "--exporter"]) == 0
    assert EXPORT in capsys.readouterr().out


@needs_torch
def test_an_export_no_onnx_baseline_runs_is_one_exporter_finding(ort_openvino):
    """Unbatched linear_cross_entropy exports to a Reshape that neither the reference evaluator nor ORT
    can run (and OpenVINO rejects): one exporter finding, not a crash of each ONNX frontend."""
    out, ids = ort_openvino
    test = ids["lce"]
    db = sqlite3.connect(out / "campaign.sqlite")
    failed = db.execute("SELECT backend FROM outcomes WHERE status != 'ok' AND test_id = ?", (test,)).fetchall()
    assert sorted(failed) == [("openvino",), ("ort",)], failed  # both frontends did reject the export
    findings = db.execute("SELECT backend, oracle, phase, message FROM findings WHERE test_id = ?",
                          (test,)).fetchall()
    assert [f[:3] for f in findings] == [(EXPORT, CRASH, "export")], findings
    assert "reference: " in findings[0][3] and "ort:" in findings[0][3]
    assert db.execute("SELECT backend, category FROM bugs WHERE first_test = ?", (test,)).fetchall() == \
        [(EXPORT, "exporter")]


@needs_torch
def test_an_export_the_onnx_checker_rejects_is_one_exporter_finding(tmp_path: Path):
    """torch.onnx.export writes a 0-d repeat as a Tile whose repeats are float (the checker: "'Repeats'
    input must be 1D tensor of type int64"); ORT rightly rejects it, TVM reads it leniently: one exporter
    finding, no bug of either (a 30-minute migration listed ORT's refusal as an ORT bug)."""
    import torch

    out = run_migration(tmp_path, [torch_instance("torch.Tensor.repeat", (torch.tensor(1.5), []), {}, "rep")],
                        ["ort", "tvm"])
    db = sqlite3.connect(out / "campaign.sqlite")
    findings = db.execute("SELECT backend, oracle, phase, message FROM findings").fetchall()
    assert [f[:3] for f in findings] == [(EXPORT, CRASH, "export")], findings
    assert "the ONNX checker" in findings[0][3] and "Repeats" in findings[0][3]
    assert db.execute("SELECT backend, category FROM bugs").fetchall() == [(EXPORT, "exporter")]


@needs_torch
@pytest.mark.skipif(not HAS_OPENVINO, reason="openvino is not installed")
def test_complex_output_in_openvinos_torch_frontend_is_a_decline(tmp_path: Path):
    """OpenVINO's torch frontend cannot return a complex tensor (ComplexTypeMark reaches the Result):
    counted as unsupported, not listed as a bug."""
    import torch

    x = torch.tensor([[1.0, 2.0], [3.0, -4.0]])
    out = run_migration(tmp_path, [torch_instance("torch.view_as_complex", (x,), {}, "view_as_complex"),
                                   # its translator's own check: "[PyTorch Frontend] Unsupported ord nuc"
                                   torch_instance("torch.norm", (x,), {"p": "nuc"}, "nuclear_norm")],
                        ["openvino-torch"], via_onnx=False)
    db = sqlite3.connect(out / "campaign.sqlite")
    rows = db.execute("SELECT status, unsupported, error FROM outcomes WHERE backend = 'openvino-torch' "
                      "ORDER BY test_id").fetchall()
    assert [r[0] for r in rows] == ["error", "error"], rows
    assert "ComplexTypeMark" in rows[0][2], rows
    assert [r[1] for r in rows] == [1, 1]
    assert db.execute("SELECT COUNT(*) FROM bugs").fetchone()[0] == 0


def onnx_instance(op: str, inputs: dict[str, np.ndarray], opset: int, provenance: str, **attrs) -> Instance:
    """A single-node ONNX instance, expected outputs by ONNX's reference evaluator."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node(op, list(inputs), ["y"], **attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in inputs.items()]
    untyped_out = [helper.make_value_info("y", onnx.TypeProto())]
    untyped = helper.make_model(helper.make_graph([node], provenance, ins, untyped_out),
                                opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    expected = [np.asarray(o) for o in ReferenceEvaluator(untyped).run(None, inputs)]
    out = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(expected[0].dtype), expected[0].shape)
    model = helper.make_model(helper.make_graph([node], provenance, ins, [out]),
                              opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return Instance("onnx", op, "pytest", provenance, dict(attrs), [tensor_info(n, a) for n, a in inputs.items()],
                    model.SerializeToString(), inputs, expected)


@pytest.mark.skipif(not (HAS_OPENVINO and importlib.util.find_spec("tvm")), reason="needs openvino and tvm")
def test_a_frontend_that_says_what_it_supports_only_declines(tmp_path: Path):
    """ONNX allows a 5-D GridSample (opset 20) and a OneHot depth computed at run time; OpenVINO says
    "GridSample is only supported for 4D input tensors", TVM "Only constant depth currently supported":
    their own declines, counted as unsupported, not listed."""
    rng = np.random.default_rng(0)
    grid5 = onnx_instance("GridSample", {"X": rng.standard_normal((1, 1, 2, 2, 2)).astype(np.float32),
                                         "grid": rng.uniform(-1, 1, (1, 2, 2, 2, 3)).astype(np.float32)},
                          20, "gridsample_5d")
    one_hot = onnx_instance("OneHot", {"indices": np.array([0, 2], np.int64), "depth": np.array(3, np.int64),
                                       "values": np.array([0.0, 1.0], np.float32)}, 11, "onehot_runtime_depth")
    out = run_migration(tmp_path, [grid5, one_hot], ["openvino", "tvm"])
    db = sqlite3.connect(out / "campaign.sqlite")
    declined = db.execute("SELECT o.backend, i.op, o.error FROM outcomes o JOIN instances i ON i.id = o.test_id "
                          "WHERE o.unsupported = 1").fetchall()
    pairs = {(b, op) for b, op, _ in declined}
    assert {("openvino", "GridSample"), ("tvm", "OneHot")} <= pairs, declined
    assert db.execute("SELECT backend, title FROM bugs WHERE category = 'compiler'").fetchall() == []


@needs_torch
def test_a_message_that_opens_with_unsupported_is_a_decline(tmp_path: Path):
    """TVM's exported-program importer: "ValueError: Unsupported transposed convolution dimensionality: 5"
    for conv_transpose3d (listed as a TVM bug by a 30-minute migration)."""
    import torch

    call = torch_instance("torch.nn.functional.conv_transpose3d",
                          (torch.ones(1, 2, 2, 2, 2), torch.ones(2, 1, 1, 1, 1)), {}, "ct3d")
    out = run_migration(tmp_path, [call], ["tvm-torch"])
    db = sqlite3.connect(out / "campaign.sqlite")
    assert db.execute("SELECT unsupported, error FROM outcomes WHERE backend = 'tvm-torch'").fetchall()[0][0] == 1
    assert db.execute("SELECT COUNT(*) FROM bugs").fetchone()[0] == 0


@needs_torch
def test_a_call_dynamo_cannot_capture_even_for_eager_torch_is_a_capture_decline(tmp_path: Path):
    """torch.compile(backend="eager") fails on the same call: Dynamo's, not Inductor's."""
    import torch

    from dlcfuzz.backends.base import Test
    from dlcfuzz.export.torch_call import encode_call
    from dlcfuzz.oracle.unsupported import is_unsupported
    from dlcfuzz.run.worker import WorkerPool

    spec, arrays = encode_call("torch.Tensor.to_sparse", (torch.tensor([[0.0, 1.5], [2.0, 0.0]]),), {})
    pool = WorkerPool(PhaseLimits(compile=120, run=30), 10, tmp_path / "logs")
    try:
        o = pool.run("inductor-torch", Test(spec, "", arrays), ["inductor"])["inductor"]
    finally:
        pool.close()
    assert (o.status, o.phase, o.error_type) == ("error", "compile", "TorchExportError"), (o.error_type, o.message)
    assert o.message.startswith("torch.compile failed with backend='eager' too: ")
    assert is_unsupported("inductor-torch", o.phase, o.error_type, o.message)


def crash(backend: str, phase: str, message: str, tb: str = "", error_type: str = "RuntimeError") -> Finding:
    return Finding(CRASH, "exception", backend, "v", phase, message, error_type, tb)


def test_a_compile_crash_is_the_compilers_whichever_frontend_led_there():
    tb = ('File "/site-packages/openvino/_ov_api.py", line 9, in compile_model\n'
          'File "/site-packages/openvino/_ov_api.py", line 3, in __init__\n')
    onnx_path = crash("openvino", "compile", "Exception from src/x.cpp:1: CALLBACK HAS THROWN: bad rank 3", tb)
    torch_path = crash("openvino-torch", "compile", "Exception from src/y.cpp:2: CALLBACK HAS THROWN: bad rank 4", tb)
    assert migrated_signature(onnx_path, "Col2Im") == migrated_signature(torch_path, "torch.nn.functional.fold")
    other = crash("openvino-torch", "compile", "CALLBACK HAS THROWN: dtype mismatch", tb)
    assert migrated_signature(other, "x") != migrated_signature(torch_path, "x")
    # the import is each frontend's own: not merged across frontends
    assert (migrated_signature(crash("openvino", "import", "bad rank 3"), "Col2Im")
            != migrated_signature(crash("openvino-torch", "import", "bad rank 3"), "Col2Im"))


def test_a_crash_in_shared_frontend_code_is_keyed_on_that_frame_not_on_the_graphs_converters():
    fe = "/site-packages/tvm/relax/frontend/torch"
    shared = (f'File "{fe}/exported_program_translator.py", line 5, in from_exported_program\n'
              f'File "{fe}/base_fx_graph_translator.py", line 8, in _conv2d\n'
              f'File "{fe}/base_fx_graph_translator.py", line 9, in _retrieve_args\n')
    a = crash("tvm-torch", "import", "unsupported arg kind <class 'slice'>", shared, "TypeError")
    b = crash("tvm-torch", "import", "unsupported arg kind <class 'list'>", shared.replace("_conv2d", "_interpolate"),
              "TypeError")
    sig_a = migrated_signature(a, "torch.nn.functional.conv2d", "ep:_conv2d,ep:_binary_op(add)")
    sig_b = migrated_signature(b, "torch.nn.functional.interpolate", "ep:_interpolate,ep:_reshape,ep:_clamp")
    assert sig_a == sig_b
    # the innermost frontend frame is a converter: the converter, as OPERA keys it
    in_conv = crash("tvm-torch", "import", "m", shared.rsplit("File", 1)[0], "TypeError")
    assert (migrated_signature(in_conv, "conv2d", "ep:_conv2d,ep:_binary_op(add)")
            == migrated_signature(crash("tvm-torch", "import", "other"), "conv2d", "ep:_conv2d"))
    assert migrated_signature(in_conv, "conv2d", "ep:_conv2d,ep:_binary_op(add)") != sig_a


def test_a_decline_keyed_without_converter_ignores_the_types_it_names():
    """OpenVINO names no converter: the operator and the innermost clause, dtype and schema text stripped."""
    def ov(msg: str) -> Finding:
        return crash("openvino-torch", "import", f"Check 'false' failed at src/frontends/a.cpp:3:\n"
                                                 f"FrontEnd API failed with OpConversionFailure:\n{msg}",
                     error_type="OpConversionFailure")

    one = ov("aten::mul.Tensor(Tensor self, Tensor other) -> Tensor: input type f32 and i64 differ")
    two = ov("aten::mul.Scalar(Tensor self, Scalar other) -> Tensor: input type bf16 and i32 differ")
    assert migrated_signature(one, "torch.mul") == migrated_signature(two, "torch.mul")
    assert migrated_signature(one, "torch.mul") != migrated_signature(one, "torch.add")
    assert migrated_signature(one, "torch.mul") != migrated_signature(ov("input ranks 2 and 3 differ"), "torch.mul")


def test_a_baseline_issue_is_keyed_on_the_baseline_whichever_frontends_saw_it():
    def wrong_baseline(backend: str) -> Finding:
        f = Finding(DIFFERENTIAL, "value", backend, "v", "run", "max abs 1", other="reference")
        f.category = BASELINE
        return f

    assert (migrated_signature(wrong_baseline("tvm"), "Softplus", "onnx:Softplus")
            == migrated_signature(wrong_baseline("openvino"), "Softplus"))


def test_bundle_titles_name_the_baseline_used():
    from dlcfuzz.migrate.campaign import migrated_title

    f = Finding(DIFFERENTIAL, "value", "ort", "disable_all", "run", "max abs 1", other="reference")
    assert "ort vs reference on Softplus" in migrated_title(f, "Softplus", "")


def test_two_frontends_against_the_expected_outputs_is_a_baseline_issue_listed_apart(ort_openvino, capsys):
    """A node test whose expected outputs are wrong (here: Relu's, negated on purpose): ORT and
    OpenVINO agree with each other against it, so it is one baseline issue, not two compiler bugs."""
    out, ids = ort_openvino
    test = ids["relu_wrong_expect"]
    db = sqlite3.connect(out / "campaign.sqlite")
    assert db.execute("SELECT COUNT(*) FROM findings WHERE test_id = ?", (test,)).fetchone()[0] == 2
    bugs = db.execute("SELECT category, title FROM bugs WHERE first_test = ?", (test,)).fetchall()
    assert len(bugs) == 1 and bugs[0][0] == "baseline", bugs
    assert bugs[0][1].startswith("onnx-expect disagrees with"), bugs
    capsys.readouterr()
    assert main(["bugs", str(out)]) == 0
    assert "compiler bugs: 0" in capsys.readouterr().out
    assert main(["bugs", str(out), "--baseline"]) == 0
    assert "Relu" in capsys.readouterr().out


def _reduce_over_an_empty_axis(op: str, identity: float) -> Instance:
    """ONNX's onnx-node *_empty_set tests, rebuilt: a reduction over a zero-length axis gives the
    operation's identity (the spec: "reduction over an empty set of values yields" it)."""
    from onnx import TensorProto, helper, numpy_helper

    from dlcfuzz.migrate.instances import ONNX

    x = np.zeros((2, 0, 4), np.float32)
    node = helper.make_node(op, ["data", "axes"], ["reduced"], keepdims=1)
    g = helper.make_graph([node], op, [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 0, 4])],
                          [helper.make_tensor_value_info("reduced", TensorProto.FLOAT, [2, 1, 4])],
                          [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    return Instance(ONNX, op, "pytest", f"{op}_empty_set", {"keepdims": 1}, [tensor_info("data", x)],
                    model.SerializeToString(), {"data": x}, [np.full((2, 1, 4), identity, np.float32)])


@pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="tvm is not installed")
def test_one_trigger_across_operators_of_one_schema_is_one_migrated_bug(tmp_path: Path):
    """TVM 0.27 gives no identity for a reduction over an empty axis (ReduceMax: not -inf, ReduceMin: not
    +inf, ReduceProd: not 1; measured).  Each operator's converter signs its own finding; the shared
    trigger (an empty input, at operators of one schema) lists one bug and merges the others into it."""
    out = run_migration(tmp_path, [_reduce_over_an_empty_axis(op, v) for op, v in
                                   (("ReduceMax", -np.inf), ("ReduceMin", np.inf), ("ReduceProd", 1.0))], ["tvm"])
    db = sqlite3.connect(out / "campaign.sqlite")
    bugs = db.execute("SELECT signature, same_as FROM bugs WHERE category = 'compiler'").fetchall()
    assert len(bugs) == 3, bugs  # three findings, one per converter
    listed = [s for s, same in bugs if not same]
    assert len(listed) == 1 and all(same == listed[0] for s, same in bugs if s != listed[0]), bugs


def test_a_case_ort_says_it_does_not_define_is_a_decline(tmp_path: Path):
    """ONNX Runtime 1.31 runs ReduceMax-20 on bool data, but over an empty axis it refuses: "ReduceMax
    is not defined for empty set with bool type" (measured).  The spec defines it (the minimum of the
    type, false); ORT says it leaves it out, which is a decline, not a crash to report."""
    from onnx import TensorProto, helper, numpy_helper

    from dlcfuzz.backends.base import Test
    from dlcfuzz.oracle.unsupported import is_unsupported
    from dlcfuzz.run.worker import WorkerPool

    node = helper.make_node("ReduceMax", ["data", "axes"], ["reduced"], keepdims=1)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("data", TensorProto.BOOL, [2, 0, 4])],
                          [helper.make_tensor_value_info("reduced", TensorProto.BOOL, [2, 1, 4])],
                          [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9).SerializeToString()
    pool = WorkerPool(PhaseLimits(compile=60, run=30), 10, tmp_path / "logs")
    try:
        got = pool.run("ort", Test(model, "", {"data": np.zeros((2, 0, 4), bool)}), ["disable_all"])["disable_all"]
    finally:
        pool.close()
    assert got.status == "error" and "not defined for empty set" in got.message, got.message
    assert is_unsupported("ort", got.phase, got.error_type, got.message)
