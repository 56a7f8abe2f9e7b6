"""Triage: one listed bug per root cause, and only compiler bugs in the compiler's list.

Real ONNX Runtime and OpenVINO on tiny models; the judge tests feed synthetic outcomes to the pure
oracle (no compiler is claimed there)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, checker, helper, numpy_helper

from dlcfuzz.backends.base import OK, Outcome
from dlcfuzz.oracle import BASELINE, COMPILER, CRASH, DIFFERENTIAL, EXPORTER, METAMORPHIC, Criteria, Finding, judge
from dlcfuzz.oracle.unsupported import is_unsupported
from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.run.dedup import normalize, signature
from dlcfuzz.spec import REGISTRY

# the same OpenVINO plugin failure in its static and its dynamic-shape variant (campaign messages)
STATIC = ("Exception from src/inference/src/cpp/core.cpp:117:\n"
          "Exception from src/core/src/pass/graph_rewrite.cpp:298:\n"
          "[GRUCellDecomposition] END: node: opset3::GRUCell GRUCell_241260 (opset1::Squeeze Squeeze_241253[0]:"
          "f32[4,2], opset1::Parameter Parameter_241251[0]:f32[4,6]) -> (f32[4,6]) CALLBACK HAS THROWN: Exception "
          "from src/common/transformations/src/transformations/utils/utils.cpp:294:\nUnsupported activation function")
DYNAMIC = STATIC.replace("f32[4,2]", "f32[?,?]").replace("f32[4,6]", "f32[?,?]").replace("241", "248")


def test_crash_messages_of_static_and_dynamic_variants_are_one_bug() -> None:
    assert normalize(STATIC) == normalize(DYNAMIC) == "Unsupported activation function"
    a = Finding(CRASH, "exception", "openvino", "f32", "compile", STATIC, "RuntimeError")
    b = Finding(CRASH, "exception", "openvino", "f32-dynamic", "compile", DYNAMIC, "RuntimeError")
    assert signature(a) == signature(b)
    other = Finding(CRASH, "exception", "openvino", "f32", "compile", STATIC.replace("activation", "rank"),
                    "RuntimeError")
    assert signature(other) != signature(a)


def test_dimension_lists_are_normalized_with_unknown_dims() -> None:
    assert normalize("shapes [2,3] and {?,4} and (1, ?, 5) differ") == "shapes [DIMS] and [DIMS] and [DIMS] differ"
    # MLIR types (IREE) carry the shapes too
    assert normalize("cast tensor<?x4xf32> to tensor<1x4xf32>") == normalize("cast tensor<3xi64> to tensor<1xi64>")


@pytest.mark.parametrize("backend, phase, message", [
    ("openvino", "compile", "Unexpected: CPU plug-in doesn't support Broadcast operation with dynamic rank. Op"),
    ("openvino", "compile", "CALLBACK HAS THROWN: Exception from utils.cpp:294:\nUnsupported activation function"),
    ("tvm", "import", "TopK sorted must be 1 for Relax frontend"),
    ("tvm", "import", "Dynamic pads are not supported yet."),
    ("tvm", "run", "Unsupported input dtype: int16"),  # its sort kernel, behind TopK of int16 (campaign)
])
def test_documented_declines_are_not_bugs(backend: str, phase: str, message: str) -> None:
    assert is_unsupported(backend, phase, "ValueError" if backend == "tvm" else "RuntimeError", message)


def test_a_real_failure_is_not_a_decline() -> None:
    assert not is_unsupported("tvm", "import", "IndexError", "Index 1 out of bounds 1")
    assert not is_unsupported("tvm", "import", "ValueError", "Cannot broadcast 3 and 4")
    assert not is_unsupported("tvm", "run", "InternalError", "Check failed: (value >= 0) is false")


def _ok(*values: float) -> Outcome:
    return Outcome(OK, "run", [np.array(values, np.float32)])


def test_compiled_variants_are_judged_against_the_uncompiled_one() -> None:
    base = [np.array([1.0, 2.0], np.float32)]
    outcomes = {"inductor": {"eager": _ok(1, 5), "inductor": _ok(1, 5), "inductor-dynamic": _ok(9, 9)}}
    v = judge(outcomes, base, Criteria(uncompiled={("inductor", "eager")}, baseline_name="reference/default"))
    got = sorted((f.oracle, f.variant, f.category) for f in v.findings)
    # eager against the baseline is the exporter's; compiled code is judged against eager only
    assert got == [(DIFFERENTIAL, "eager", EXPORTER), (METAMORPHIC, "inductor-dynamic", COMPILER)]
    diff = next(f for f in v.findings if f.oracle == DIFFERENTIAL)
    assert diff.other == "reference/default"


def test_two_compilers_agreeing_against_the_baseline_make_a_baseline_issue() -> None:
    base = [np.array([1.0, 2.0], np.float32)]
    outcomes = {"ort": {"basic": _ok(3, 3), "all": _ok(3, 3)}, "openvino": {"f32": _ok(3, 3)}}
    v = judge(outcomes, base, Criteria(baseline_name="reference/default"))
    assert {f.category for f in v.findings} == {BASELINE}
    assert {f.backend for f in v.findings} == {"ort", "openvino"}
    for f in v.findings:  # the first diverging operator located in each
        f.details["first_diverging"] = {"op": "Concat", "kind": "value", "dtype": "float32"}
    # one baseline issue, whichever backends saw it
    assert len({signature(f) for f in v.findings}) == 1
    # a third compiler siding with the baseline splits the vote: two compilers may share one bug
    # (MeanVarianceNormalization of a constant: ORT and TVM divide 0 by 0, OpenVINO and the reference give 0)
    split = judge(outcomes | {"tvm": {"O3": _ok(1, 2)}}, base, Criteria(baseline_name="reference/default"))
    assert {f.category for f in split.findings} == {COMPILER}


def test_one_divergence_under_two_oracles_and_two_int_dtypes_is_one_bug() -> None:
    where = {"op": "Cast", "kind": "value", "dtype": "int32"}
    diff = Finding(DIFFERENTIAL, "value", "tvm", "O3-native", "run", "1/4 differ", other="reference/default",
                   details={"first_diverging": where})
    meta = Finding(METAMORPHIC, "value", "tvm", "O3-native", "run", "1/4 differ", other="O0-generic",
                   details={"first_diverging": where | {"dtype": "uint32"}})
    assert signature(diff) == signature(meta)
    elsewhere = Finding(DIFFERENTIAL, "value", "tvm", "O3-native", "run", "", other="reference/default",
                        details={"first_diverging": where | {"op": "Floor"}})
    assert signature(elsewhere) != signature(diff)


def test_openvino_dropping_an_input_is_a_finding_of_its_own() -> None:
    """OpenVINO's ONNX frontend drops an LSTM's peephole input P (ONNX: "P: The weight tensor for
    peepholes"): the outputs cannot depend on it, so feeding by position would shift every input."""
    pytest.importorskip("openvino", reason="openvino is not installed")
    import openvino as ov

    from dlcfuzz.backends.openvino import DroppedInput, parameter_names

    seq, batch, size, hidden = 2, 1, 3, 2
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("X", f, [seq, batch, size]),
              helper.make_tensor_value_info("W", f, [1, 4 * hidden, size]),
              helper.make_tensor_value_info("R", f, [1, 4 * hidden, hidden]),
              helper.make_tensor_value_info("B", f, [1, 8 * hidden]),
              helper.make_tensor_value_info("P", f, [1, 3 * hidden])]
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "", "", "P"], ["Y"], hidden_size=hidden)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", f, [seq, 1, batch, hidden])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    checker.check_model(model)
    ov_model = ov.Core().read_model(model.SerializeToString())
    with pytest.raises(DroppedInput, match="dropped P"):
        parameter_names(ov_model, ["X", "W", "R", "B", "P"])
    # without the peephole every input is found by its name, whatever the order of the names given
    assert parameter_names(ov_model, ["B", "X", "W", "R"]) == ["X", "W", "R", "B"]


def test_a_wrong_operator_is_one_bug_named_after_it_whatever_follows(tmp_path: Path) -> None:
    """A backend that computes Sigmoid wrong: every graph with a Sigmoid anywhere diverges at the
    graph outputs of whatever follows it (Tanh, Add, Abs ...), and all of it is one bug, signed and
    titled by Sigmoid; its reduction keeps the Sigmoid and drops what follows."""
    ops = [REGISTRY[o] for o in ("Sigmoid", "Tanh", "Add", "Mul", "Abs", "Neg")]
    out = tmp_path / "c"
    cfg = CampaignConfig(out, ["tests.fake_backends:WrongSigmoid"], ops, budget_seconds=240, max_tests=16,
                         ops=(3, 5), reduce_seconds=30)
    Campaign(cfg).run()
    db = sqlite3.connect(out / "campaign.sqlite")
    bugs = db.execute("SELECT title, dir FROM bugs WHERE kind = 'value'").fetchall()
    downstream = db.execute("SELECT COUNT(*) FROM tests WHERE ops LIKE '%Sigmoid%' AND n_ops > 1").fetchone()[0]
    db.close()
    assert downstream >= 3  # enough graphs with Sigmoid among other operators to have split the bug before
    assert len(bugs) == 1, bugs
    title, folder = bugs[0]
    assert "first at Sigmoid" in title, title
    reduction = json.loads((out / folder / "reduction.json").read_text())
    assert reduction["nodes_after"][-1] == "Sigmoid", reduction
    assert reduction["first_diverging"]["op"] == "Sigmoid"


def test_integers_rounded_from_floats_may_move_by_one_unit() -> None:
    from dlcfuzz.ir import Graph, Node, TensorType, Value
    from dlcfuzz.oracle.compare import compare
    from dlcfuzz.oracle.localize import rounded_outputs

    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((3,), "float32"), "input"))
    g.add_value(Value("i", TensorType((3,), "int32"), "input"))
    g.add_value(Value("n", TensorType((), "int64"), "input"))
    g.add_value(Value("c", TensorType((3,), "int32"), "node"))
    g.add_value(Value("s", TensorType((3,), "int32"), "node"))
    g.add_value(Value("w", TensorType((4,), "int32"), "node"))
    g.add_node(Node("Cast", ["x"], ["c"], {"to": 6}))
    g.add_node(Node("Neg", ["i"], ["s"]))
    g.add_node(Node("HannWindow", ["n"], ["w"], {"output_datatype": 6}))
    g.outputs = ["c", "s", "w"]
    # a Cast of a float and a window function round floats; Neg of an int input is exact
    assert rounded_outputs(g) == [0, 2]
    e = [np.array([1, 2, 3], np.int32)]
    assert compare(e, [np.array([2, 2, 3], np.int32)], rounded=[0]) is None
    assert compare(e, [np.array([3, 2, 3], np.int32)], rounded=[0]) is not None
    assert compare(e, [np.array([2, 2, 3], np.int32)]) is not None


def test_integer_overflow_is_undefined_not_a_bug() -> None:
    """ONNX leaves integer overflow undefined: a product out of int32's range (ORT saturates, the
    reference wraps) is told from a wrong product by recomputing the node in float64."""
    from dlcfuzz.ir import Graph, Node, TensorType, Value
    from dlcfuzz.oracle.localize import overflows

    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((3, 1), "int32"), "input"))
    g.add_value(Value("p", TensorType((1, 1), "int32"), "node"))
    g.add_node(Node("ReduceProd", ["x"], ["p"], {"axes": [-2, -1], "keepdims": 1}))
    g.outputs = ["p"]
    big = {"x": np.array([[34830], [34508], [35160]], np.int32)}  # 4.2e13
    small = {"x": np.array([[30], [40], [50]], np.int32)}
    assert overflows(g, "p", big, {})
    assert not overflows(g, "p", small, {})
    # a product beyond float64's range too (220 factors of ~13000, from a 10-minute ORT campaign)
    g.values["x"].type = TensorType((220, 1), "int32")
    assert overflows(g, "p", {"x": np.full((220, 1), 13274, np.int32)}, {})
    # the result fits, an intermediate does not: int32 ReduceL2 squares -52801 (ORT gives 52801, the
    # reference wraps the square)
    g.nodes[0].op = "ReduceL2"
    g.values["x"].type = TensorType((2, 1), "int32")
    assert overflows(g, "p", {"x": np.array([[-39867], [-52801]], np.int32)}, {})
    assert not overflows(g, "p", {"x": np.array([[-398], [-528]], np.int32)}, {})


def test_a_float_cast_out_of_an_integer_range_is_undefined_not_a_bug() -> None:
    """ONNX's Cast: "floating point to fixed point: undefined if OOR" (-1.42 to uint8, from a default
    campaign's OpenVINO entry); in range it is defined, and between integer types the bits wrap, defined."""
    from dlcfuzz.ir import Graph, Node, TensorType, Value
    from dlcfuzz.oracle.localize import overflows

    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2,), "float64"), "input"))
    g.add_value(Value("y", TensorType((2,), "uint8"), "node"))
    g.add_node(Node("Cast", ["x"], ["y"], {"to": 2}))
    g.outputs = ["y"]
    assert overflows(g, "y", {"x": np.array([-1.42, 3.0])}, {})
    assert overflows(g, "y", {"x": np.array([np.nan, 3.0])}, {})
    assert overflows(g, "y", {"x": np.array([256.5, 3.0])}, {})
    assert not overflows(g, "y", {"x": np.array([-0.9, 255.9])}, {})  # truncated: 0 and 255
    g.values["x"].type = TensorType((2,), "int16")
    assert not overflows(g, "y", {"x": np.array([-1, 300], np.int16)}, {})


def test_float64_computed_through_float32_gets_float32_tolerance() -> None:
    """ONNX's LayerNormalization computes its statistics in stash_type (float by default), and window
    functions compute in float: float64 outputs downstream of them carry float32 rounding."""
    from dlcfuzz.ir import INPUT_KIND, Graph, Node, TensorType, Value
    from dlcfuzz.oracle.compare import compare
    from dlcfuzz.oracle.localize import single_outputs

    g = Graph(opset=17)
    for name in ("x", "s", "b"):
        g.add_value(Value(name, TensorType((2, 3), "float64"), INPUT_KIND))
    for name in ("y", "z", "w", "u"):
        g.add_value(Value(name, TensorType((2, 3), "float64"), "node"))
    g.add_node(Node("LayerNormalization", ["x", "s", "b"], ["y"], {"axis": -1}, "n0"))
    g.add_node(Node("Neg", ["y"], ["z"], {}, "n1"))  # downstream: still float32's rounding
    g.add_node(Node("LayerNormalization", ["x", "s", "b"], ["w"], {"axis": -1, "stash_type": 0}, "n2"))
    g.add_node(Node("Abs", ["x"], ["u"], {}, "n3"))
    g.outputs = ["y", "z", "w", "u"]
    assert single_outputs(g) == {0: "float32", 1: "float32"}
    e = [np.array([1.0, 2.0])]
    a = [np.array([1.0 + 3e-4, 2.0])]
    assert compare(e, a) is not None  # float64's tolerance: a divergence
    assert compare(e, a, single=[0]) is None  # float32's: rounding


def test_a_group_normalization_stashed_in_float16_gets_float16_tolerance() -> None:
    """GroupNormalization-21 computes its mean and variance in stash_type: with float16 (10) a float64
    output carries float16's rounding (a 30-minute campaign listed it twice as an ORT and an OpenVINO
    bug: 1.7e-4 and 1.4e-3 from the reference, under one float16 step)."""
    from dlcfuzz.ir import INPUT_KIND, Graph, Node, TensorType, Value
    from dlcfuzz.oracle.compare import compare
    from dlcfuzz.oracle.localize import single_outputs

    g = Graph(opset=21)
    for name in ("x", "s", "b"):
        g.add_value(Value(name, TensorType((1, 4, 3), "float64"), INPUT_KIND))
    for name in ("y", "z", "w"):
        g.add_value(Value(name, TensorType((1, 4, 3), "float64"), "node"))
    g.add_node(Node("GroupNormalization", ["x", "s", "b"], ["y"], {"num_groups": 2, "stash_type": 10}, "n0"))
    g.add_node(Node("Mul", ["y", "x"], ["z"], {}, "n1"))  # downstream: still float16's rounding
    g.add_node(Node("GroupNormalization", ["x", "s", "b"], ["w"], {"num_groups": 2, "stash_type": 11}, "n2"))
    g.outputs = ["y", "z", "w"]
    assert single_outputs(g) == {0: "float16", 1: "float16"}
    e = [np.array([1.0, 2.0])]
    a = [np.array([1.0 + 1.4e-3, 2.0])]
    assert compare(e, a) is not None  # float64's tolerance (as before): a divergence
    assert compare(e, a, single={0: "float16"}) is None  # float16's: rounding


def test_a_variant_that_computes_float64_in_float32_is_judged_with_float32_tolerance() -> None:
    """OpenVINO's CPU plugin runs float64 models in float32 (measured: Log of 1.0000001234 gives float32's
    1.19209282e-07): that rounding is not a bug of it, a large error still is."""
    from dlcfuzz.backends.base import OK, Outcome
    from dlcfuzz.oracle import judge

    f32 = Criteria(in_float32={("openvino", "f32")})
    x = np.array([1.0000012345, 3.14159265358979], np.float64)  # float32 moves log(x) by ~4e-8 > atol 1e-8
    exact = [np.log(x)]
    in_f32 = [np.log(x.astype(np.float32)).astype(np.float64)]
    outcomes = {"openvino": {"f32": Outcome(OK, outputs=in_f32)}}
    assert judge(outcomes, exact).findings  # with float64's tolerance: a divergence
    assert not judge(outcomes, exact, f32).findings
    wrong = {"openvino": {"f32": Outcome(OK, outputs=[in_f32[0] + 0.5])}}
    assert judge(wrong, exact, f32).findings


def test_an_output_computed_in_float16_keeps_float16s_tolerance_on_a_variant_that_computes_in_float32() -> None:
    """c45 (a7506812): GroupNormalization with stash_type float16, then a Tan, in float32 tensors: the spec's
    result carries float16's rounding (1.2 % at -906), whichever variant computes it; OpenVINO's f32 variant
    computes float64 in float32, which must not tighten a float16-computed output to float32's tolerance."""
    from dlcfuzz.backends.base import OK, Outcome
    from dlcfuzz.oracle import judge

    spec = np.array([-906.25, 0.074], np.float32)
    ov = np.array([-895.13, 0.0724], np.float32)
    outcomes = {"openvino": {"f32": Outcome(OK, outputs=[ov])}}
    narrow = Criteria(in_float32={("openvino", "f32")}, single={0: "float16"})
    assert not judge(outcomes, [spec], narrow).findings
    assert judge(outcomes, [spec], Criteria(in_float32={("openvino", "f32")})).findings  # float32's: beyond
    wrong = {"openvino": {"f32": Outcome(OK, outputs=[-ov])}}
    assert judge(wrong, [spec], narrow).findings


def test_openvino_variants_say_they_compute_float64_in_float32() -> None:
    import importlib.util

    if importlib.util.find_spec("openvino") is None:
        pytest.skip("openvino is not installed (pip install openvino)")
    from dlcfuzz.backends.openvino import OpenVinoBackend

    assert all(v.options["float64_in_float32"] for v in OpenVinoBackend().variants())


def test_an_operator_that_amplifies_tolerated_rounding_is_noise() -> None:
    """Sin of a float32 Pow near 1e7: one ulp of the Pow (within tolerance) is a different sine.
    Recomputed on the accused side's own inputs, Sin gives what the accused gave, so the divergence is
    noise; a Sin that is wrong on its own inputs stays a divergence (10-minute ORT campaign)."""
    from dlcfuzz.ir import INPUT_KIND, Graph, Node, TensorType, Value
    from dlcfuzz.oracle.localize import exposed, first_divergence

    g = Graph(opset=17)
    for name, kind in (("x", INPUT_KIND), ("p", "node"), ("s", "node")):
        g.add_value(Value(name, TensorType((1,), "float32"), kind))
    g.add_node(Node("Pow", ["x", "x"], ["p"], {}, "n0"))
    g.add_node(Node("Sin", ["p"], ["s"], {}, "n1"))
    g.set_leaf_outputs()
    e = exposed(g)
    x = np.array([7.6], np.float32)
    p = np.power(x, x)
    p_ulp = np.nextafter(p, np.float32(np.inf))  # one ulp up: within any float32 tolerance
    expected = [p, np.sin(p)]
    actual = [p_ulp, np.sin(p_ulp)]
    assert abs(float(np.sin(p_ulp)[0] - np.sin(p)[0])) > 0.01  # the sine moved visibly
    first = first_divergence(e, expected, actual, None, {"x": x})
    assert first["op"] == "Sin" and "tie" in first
    wrong = [p_ulp, np.sin(p_ulp) + np.float32(0.5)]
    assert "tie" not in first_divergence(e, expected, wrong, None, {"x": x})


def test_an_operator_version_newer_than_orts_schemas_is_a_decline() -> None:
    """ORT 1.31 calls a valid Attention-25 (left_window_size) model invalid: it lacks that version, which
    is a decline, not a bug (three such 'bugs' in a 30-minute migration)."""
    import onnx
    from onnx import TensorProto, helper

    from dlcfuzz.backends.ort import make_session
    from dlcfuzz.oracle.unsupported import is_unsupported

    q = helper.make_tensor_value_info("Q", TensorProto.FLOAT, [1, 2, 3, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 2, 3, 4])
    node = helper.make_node("Attention", ["Q", "Q", "Q"], ["Y"], left_window_size=1)
    model = helper.make_model(helper.make_graph([node], "g", [q], [y]), opset_imports=[helper.make_opsetid("", 25)],
                              ir_version=10)
    onnx.checker.check_model(model, full_check=True)  # valid ONNX
    with pytest.raises(Exception) as e:
        make_session(model.SerializeToString(), "ORT_DISABLE_ALL", ["CPUExecutionProvider"])
    assert is_unsupported("ort", "compile", type(e.value).__name__, str(e.value)), str(e.value)



def test_localizing_on_a_variant_that_computes_float64_in_float32_uses_float32_tolerance() -> None:
    """Real OpenVINO on float64 (x - 1) * 1e5 with x = 1.000001234: the Sub's float32 rounding (4e-8, within
    float32's tolerance) grows to 4e-3 through the Mul. The divergence starts at the Mul, which only
    amplified its input's rounding: noise, not a Sub bug of OpenVINO's."""
    pytest.importorskip("openvino", reason="openvino is not installed (pip install openvino)")
    from dlcfuzz.backends.base import Test
    from dlcfuzz.export.onnx import to_bytes
    from dlcfuzz.ir import INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
    from dlcfuzz.oracle import NOISE
    from dlcfuzz.oracle.localize import localize
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    g = Graph()
    t = TensorType((2,), "float64")
    for name, kind in (("x", INPUT_KIND), ("c", INPUT_KIND), ("k", INPUT_KIND), ("d", NODE_KIND), ("y", NODE_KIND)):
        g.add_value(Value(name, t, kind))
    g.add_node(Node("Sub", ["x", "c"], ["d"], {}, "n0"))
    g.add_node(Node("Mul", ["d", "k"], ["y"], {}, "n1"))
    g.outputs = ["y"]
    feeds = {"x": np.array([1.000001234, 2.0]), "c": np.array([1.0, 1.0]), "k": np.array([1e5, 1.0])}
    test = Test(to_bytes(g), g.to_json(), feeds)
    in_float32 = {("openvino", "f32")}
    pool = WorkerPool(PhaseLimits())
    try:
        baseline = pool.run("reference", test, ["default"])["default"].outputs
        outcomes = {"openvino": pool.run("openvino", test, ["f32"])}
        for where, category, trusted in (("Mul", NOISE, in_float32), ("Sub", COMPILER, set())):
            judged_by = Criteria(baseline_name="reference/default", in_float32=in_float32)
            f, = judge(outcomes, baseline, judged_by).findings
            localize(g, test, [f], pool, ("reference", "default"), Criteria(in_float32=trusted))
            assert f.details["first_diverging"]["op"] == where and f.category == category, f.details
    finally:
        pool.close()


def test_a_limit_ort_states_is_a_decline() -> None:
    """ONNX's test_lstm_batchwise (LSTM with layout=1), as a migration listed it: ORT 1.31 says
    "Batchwise recurrent operations (layout == 1) are not supported. If you need support create a github
    issue": a stated limit, not a bug."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y", "Y_h"], hidden_size=7, layout=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 1, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(rng.standard_normal((1, 28, 2)).astype(np.float32), "W"),
                           numpy_helper.from_array(rng.standard_normal((1, 28, 7)).astype(np.float32), "R")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)], ir_version=9)
    with pytest.raises(Exception) as info:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert "layout == 1) are not supported" in str(info.value)
    assert is_unsupported("ort", "compile", type(info.value).__name__, str(info.value))
    assert not is_unsupported("ort", "compile", "Fail", "Exception during initialization: lstm_base.h:53 layout_ == 0 "
                              "was false.")
