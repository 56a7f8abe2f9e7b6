"""The pass behind an optimization bug (oracle/blame.py), on the real ONNX Runtime: its basic level's
QDQPropagationTransformer moves a DequantizeLinear without zero point past a data-movement operator
and loses the sign of int8 values (ORT 1.31.1, found by a 10-minute ORT campaign: -2 * 0.25 gives 0)."""

from __future__ import annotations

import numpy as np
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import OK, Test, Variant, resolve_variant, without
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle import METAMORPHIC, Criteria, judge
from dlcfuzz.oracle.blame import blame
from dlcfuzz.run.dedup import graph_signature, title
from dlcfuzz.run.worker import PhaseLimits, WorkerPool

pytest.importorskip("onnxruntime")


def dequantize_then(op: str, attrs: dict, out_shape: tuple[int, ...], extra: np.ndarray | None = None) -> Graph:
    g = Graph(opset=17)
    g.add_value(Value("q", TensorType((1, 2, 1), "int8"), INPUT_KIND))
    g.add_value(Value("scale", TensorType((), "float32"), CONST_KIND, np.array(0.25, np.float32)))
    g.add_value(Value("x", TensorType((1, 2, 1), "float32"), "node"))
    g.add_node(Node("DequantizeLinear", ["q", "scale"], ["x"], {}, "n0"))
    inputs = ["x"]
    if extra is not None:
        g.add_value(Value("shape", TensorType(extra.shape, "int64"), CONST_KIND, extra))
        inputs.append("shape")
    g.add_value(Value("y", TensorType(out_shape, "float32"), "node"))
    g.add_node(Node(op, inputs, ["y"], attrs, "n1"))
    g.set_leaf_outputs()
    return g


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(PhaseLimits())
    yield p
    p.close()


def _blamed(g: Graph, pool: WorkerPool):
    test = Test(to_bytes(g), g.to_json(), {"q": np.array([1, -2], np.int8).reshape(1, 2, 1)})
    outcomes = {"ort": pool.run("ort", test, ["disable_all", "basic"])}
    assert outcomes["ort"]["basic"].status == OK
    # the bug itself, measured: the basic level zeroes the negative value
    assert outcomes["ort"]["disable_all"].outputs[0].ravel().tolist() == [0.25, -0.5]
    assert outcomes["ort"]["basic"].outputs[0].ravel().tolist() == [0.25, 0.0]
    watched = pool.run("ort", test, [without("basic", [])])[without("basic", [])]
    assert watched.fired == ["ort:transformer:QDQPropagationTransformer"]
    findings = [f for f in judge(outcomes, None).findings if f.oracle == METAMORPHIC]
    assert len(findings) == 1
    blame(g, test, findings, outcomes, {"ort": load_backend("ort")}, pool)
    return findings[0]


def test_one_pass_defect_at_two_operators_is_one_bug(pool: WorkerPool) -> None:
    reshape = _blamed(dequantize_then("Reshape", {}, (2,), np.array([2], np.int64)), pool)
    transpose = _blamed(dequantize_then("Transpose", {"perm": [2, 1, 0]}, (1, 2, 1)), pool)
    assert reshape.details["blamed_pass"] == transpose.details["blamed_pass"] == "QDQPropagationTransformer"
    g1 = dequantize_then("Reshape", {}, (2,), np.array([2], np.int64))
    g2 = dequantize_then("Transpose", {"perm": [2, 1, 0]}, (1, 2, 1))
    assert graph_signature(reshape, g1) == graph_signature(transpose, g2)
    assert "caused by pass QDQPropagationTransformer" in title(reshape)


def test_a_divergence_no_pass_explains_keeps_its_operator_signature(pool: WorkerPool) -> None:
    """The divergence remains with the one fired pass turned off: no pass is blamed."""
    g = dequantize_then("Reshape", {}, (2,), np.array([2], np.int64))
    test = Test(to_bytes(g), g.to_json(), {"q": np.array([1, -2], np.int8).reshape(1, 2, 1)})
    outcomes = {"ort": pool.run("ort", test, ["disable_all", "basic"])}
    f = next(f for f in judge(outcomes, None).findings if f.oracle == METAMORPHIC)
    outcomes["ort"]["basic"].fired = ["ort:transformer:ConstantFolding"]  # a pass that did not cause it
    blame(g, test, [f], outcomes, {"ort": load_backend("ort")}, pool)
    assert "blamed_pass" not in f.details


def test_variants_without_passes_resolve_only_where_the_backend_turns_passes_off() -> None:
    ort, tvm = load_backend("ort"), load_backend("tvm")
    basic = Variant("basic", {"level": "ORT_ENABLE_BASIC"})
    got = resolve_variant(ort, {"basic": basic}, without("basic", ["ort:transformer:ConstantFolding"]))
    assert got.options == {"level": "ORT_ENABLE_BASIC", "disabled": ["ConstantFolding"]}
    assert ort.disabling(basic, ["tvm:pass:FoldConstant"]) is None
    with pytest.raises(KeyError):
        resolve_variant(tvm, {"O3": Variant("O3")}, without("O3", ["tvm:pass:FoldConstant"]))


def test_a_divergence_from_its_own_unoptimized_baseline_is_blamed_too(pool: WorkerPool) -> None:
    """Where the reference is not trusted, ORT's disable_all is the baseline: ORT basic against it is
    an optimization bug like a metamorphic one, and gets the same signature."""
    from dlcfuzz.oracle import DIFFERENTIAL

    g = dequantize_then("Transpose", {"perm": [2, 1, 0]}, (1, 2, 1))
    test = Test(to_bytes(g), g.to_json(), {"q": np.array([1, -2], np.int8).reshape(1, 2, 1)})
    baseline = pool.run("ort", test, ["disable_all"])["disable_all"].outputs
    outcomes = {"ort": pool.run("ort", test, ["basic"])}
    f = next(f for f in judge(outcomes, baseline, Criteria(baseline_name="ort/disable_all")).findings)
    assert f.oracle == DIFFERENTIAL and f.other == "ort/disable_all"
    blame(g, test, [f], outcomes, {"ort": load_backend("ort")}, pool)
    assert f.details["blamed_pass"] == "QDQPropagationTransformer"
    assert graph_signature(f, g) == graph_signature(_blamed(g, pool), g)
