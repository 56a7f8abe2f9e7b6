"""Where a divergence starts (oracle/localize.py): every intermediate value exposed as an output, the
first diverging operator in topological order, ties broken by rounding (noise) and integer overflow
(undefined), on tiny graphs: hand-made outputs, and real ONNX Runtime against the reference evaluator
on cases of the labelled triage set (tests/data/triage/, README.md there)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends.base import OK, Outcome, Test
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle import COMPILER, DIFFERENTIAL, NOISE, UNDEFINED, Criteria, Finding, judge, run_baseline
from dlcfuzz.oracle.localize import DISCONTINUOUS, exposed, first_divergence, localize, overflows
from dlcfuzz.run.worker import WorkerPool

TRIAGE = Path(__file__).resolve().parent / "data" / "triage"


def _chain() -> Graph:
    """x + y -> a; a * y -> m; Relu(m) -> r; nodes listed consumers first."""
    g = Graph(opset=17)
    for name, kind in (("x", INPUT_KIND), ("y", INPUT_KIND), ("a", NODE_KIND), ("m", NODE_KIND), ("r", NODE_KIND)):
        g.add_value(Value(name, TensorType((2,), "float32"), kind))
    g.nodes = [Node("Relu", ["m"], ["r"], {}, "n2"), Node("Mul", ["a", "y"], ["m"], {}, "n1"),
               Node("Add", ["x", "y"], ["a"], {}, "n0")]
    g.outputs = ["r"]
    return g


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def test_exposing_makes_every_node_output_an_output_in_topological_order() -> None:
    g = _chain()
    e = exposed(g)
    assert e.outputs == ["a", "m", "r"]
    assert [n.name for n in e.nodes] == ["n0", "n1", "n2"]
    assert g.outputs == ["r"] and [n.name for n in g.nodes] == ["n2", "n1", "n0"]  # the original is untouched


def test_the_first_node_whose_output_differs_beyond_tolerance_is_the_first_diverging() -> None:
    e = exposed(_chain())
    expected = [f32(1, 2), f32(3, 4), f32(3, 4)]
    # a differs by 1e-6 (within float32's rtol 1e-2): not a divergence; m by 1: the Mul
    actual = [f32(1.000001, 2), f32(3, 5), f32(3, 5)]
    first = first_divergence(e, expected, actual, None)
    assert {k: first[k] for k in ("node", "op", "output", "kind", "dtype")} == {
        "node": "n1", "op": "Mul", "output": "m", "kind": "value", "dtype": "float32"}
    assert "tie" not in first  # Mul is continuous: its inputs' rounding does not explain a unit
    assert first_divergence(e, expected, expected, None) is None
    assert first_divergence(e, expected, actual[:2], None) is None  # not every intermediate came back


def test_a_comparison_flipped_by_its_inputs_rounding_is_a_tie() -> None:
    g = Graph(opset=17)
    for name in ("x", "y"):
        g.add_value(Value(name, TensorType((1,), "float32"), INPUT_KIND))
    g.add_value(Value("a", TensorType((1,), "float32"), NODE_KIND))
    g.add_value(Value("b", TensorType((1,), "bool"), NODE_KIND))
    g.add_node(Node("Add", ["x", "y"], ["a"], {}, "n0"))
    g.add_node(Node("Greater", ["a", "y"], ["b"], {}, "n1"))
    g.outputs = ["a", "b"]
    assert "Greater" in DISCONTINUOUS
    nudged = first_divergence(g, [f32(2.0), np.array([False])], [f32(2.0000002), np.array([True])], None)
    assert nudged["op"] == "Greater" and nudged["tie"] == "Greater of a, which differ by rounding only"
    # the same flip on identical inputs is no tie: the comparison itself is wrong
    same = first_divergence(g, [f32(2.0), np.array([False])], [f32(2.0), np.array([True])], None)
    assert same["op"] == "Greater" and "tie" not in same


def test_integer_overflow_is_told_from_a_wrong_product() -> None:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((1,), "int32"), INPUT_KIND))
    g.add_value(Value("p", TensorType((1,), "int32"), NODE_KIND))
    g.add_node(Node("Mul", ["x", "x"], ["p"], {}, "n0"))
    g.outputs = ["p"]
    assert overflows(g, "p", {"x": np.array([70000], np.int32)}, {})  # 4.9e9 > 2**31 - 1
    assert not overflows(g, "p", {"x": np.array([40000], np.int32)}, {})  # 1.6e9 fits


class Refuses:
    """A Runner that must not be asked (one node: nothing to run to locate it)."""

    def run(self, backend: str, test: Test, variants: list[str], fresh: bool = False,
            runs: int = 1) -> dict[str, Outcome]:
        raise AssertionError(f"ran {backend} {variants}")


def test_a_single_node_is_where_its_divergence_starts_without_running_anything() -> None:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((1,), "int32"), INPUT_KIND))
    g.add_value(Value("p", TensorType((1,), "int32"), NODE_KIND))
    g.add_node(Node("Mul", ["x", "x"], ["p"], {}, "n0"))
    g.outputs = ["p"]
    test = Test(to_bytes(g), g.to_json(), {"x": np.array([70000], np.int32)})
    f = Finding(DIFFERENTIAL, "value", "ort", "basic", "run", "1/1 differ", other="reference/default", output=0)
    localize(g, test, [f], Refuses(), ("reference", "default"), Criteria())
    assert f.details["first_diverging"]["node"] == "n0" and f.details["first_diverging"]["op"] == "Mul"
    assert f.category == UNDEFINED and f.details["first_diverging"]["undefined"] == "Mul overflows int32"


# -- real ONNX Runtime against the reference, on labelled cases (``pool``: tests/conftest.py) ------------


def _located(name: str, pool: WorkerPool) -> list[Finding]:
    """The case's ORT findings against its baseline, localized as the campaign localizes them."""
    graph = Graph.from_json((TRIAGE / name / "graph.json").read_text())
    with np.load(TRIAGE / name / "inputs.npz") as z:
        test = Test(to_bytes(graph), graph.to_json(), {k: z[k] for k in z.files})
    base = run_baseline(pool, test, graph)
    assert base.which == ("reference", "default")
    criteria = Criteria().for_graph(graph, base.name)
    outcomes = {"ort": pool.run("ort", test, ["basic", "all"])}
    assert all(o.status == OK for o in outcomes["ort"].values())
    findings = [f for f in judge(outcomes, base.outputs, criteria).findings if f.oracle == DIFFERENTIAL]
    localize(graph, test, findings, pool, base.which, criteria)
    return findings


@pytest.mark.parametrize(("case", "node", "op", "category"), [
    # BatchNormalization equals Less's other input to one ulp: the comparison flips on rounding
    ("ort-batchnorm-less-tie", "n4", "Less", NOISE),
    # BlackmanWindow's first element 0 against 1.5e-8 (within tolerance); Sign makes it 0 against 1
    ("ort-window-sign-tie", "n5", "Sign", NOISE),
    # MeanVarianceNormalization over size-1 axes: ORT NaN/inf, the reference 0 (after a Squeeze and a Log)
    ("ort-mvn-a", "n2", "MeanVarianceNormalization", COMPILER),
])
def test_a_real_divergence_is_located_at_its_operator(pool: WorkerPool, case: str, node: str, op: str,
                                                      category: str) -> None:
    findings = _located(case, pool)
    assert findings, case
    for f in findings:
        first = f.details["first_diverging"]
        assert (first["node"], first["op"], f.category) == (node, op, category), (f.variant, first)


def test_a_product_of_an_integer_rounded_from_floats_within_its_unit_is_a_tie() -> None:
    """Shrink of an int32 subtracts a float bias: ONNX's function body casts the bias to int32 first (2 - 1),
    ONNX Runtime subtracts in float (1.3, to 1).  Both are within the rounded integer's unit; the Mul that
    reads it makes it 126 apart, which that unit explains.  Integers not computed from floats get no slack."""
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((1,), "int32"), INPUT_KIND))
    g.add_value(Value("w", TensorType((1,), "int32"), INPUT_KIND))
    g.add_value(Value("s", TensorType((1,), "int32"), NODE_KIND))
    g.add_value(Value("m", TensorType((1,), "int32"), NODE_KIND))
    g.add_node(Node("Shrink", ["x"], ["s"], {"bias": 1.7}, "n0"))
    g.add_node(Node("Mul", ["s", "w"], ["m"], {}, "n1"))
    g.outputs = ["s", "m"]
    i32 = lambda v: np.array([v], np.int32)
    feeds = {"x": i32(3), "w": i32(126)}
    first = first_divergence(g, [i32(1), i32(126)], [i32(2), i32(252)], None, feeds)
    assert first["op"] == "Mul" and first["tie"] == "Mul of s, which differ by rounding only", first
    g.nodes[0] = Node("Abs", ["x"], ["s"], {}, "n0")  # an integer not computed from floats: exact
    first = first_divergence(g, [i32(1), i32(126)], [i32(2), i32(252)], None, feeds)
    assert first["op"] == "Abs" and "tie" not in first, first


def _mvn() -> Graph:
    g = Graph(opset=18)
    g.add_value(Value("x", TensorType((1, 2), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType((1, 2), "float32"), NODE_KIND))
    g.add_node(Node("MeanVarianceNormalization", ["x"], ["y"], {"axes": [0, 1]}, "n0"))
    g.outputs = ["y"]
    return g


@pytest.mark.parametrize(("x", "category"), [
    # two close values: the spec's E[X^2] - E[X]^2 in float32 cancels, the expected values are rounding
    # (the reference gives +-5e6 here, float64 +-1)
    (f32(1000.0, 1000.01), NOISE),
    # spread values: a few ulps move nothing, a wrong answer is the compiler's
    (f32(-1.5, 2.25), COMPILER),
])
def test_a_divergence_at_an_operator_unstable_at_its_inputs_is_noise(x: np.ndarray, category: str) -> None:
    g = _mvn()
    test = Test(to_bytes(g), g.to_json(), {"x": x[None]})
    f = Finding(DIFFERENTIAL, "value", "openvino", "basic", "run", "2/2 differ", other="reference/default", output=0)
    localize(g, test, [f], Refuses(), ("reference", "default"), Criteria())
    assert f.details["first_diverging"]["op"] == "MeanVarianceNormalization"
    assert f.category == category, f.details["first_diverging"]


def _group_norm(stash_type: int) -> Graph:
    g = Graph(opset=21)
    g.add_value(Value("x", TensorType((1, 4), "float32"), INPUT_KIND))
    g.add_value(Value("s", TensorType((4,), "float32"), INPUT_KIND))
    g.add_value(Value("b", TensorType((4,), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType((1, 4), "float32"), NODE_KIND))
    g.add_node(Node("GroupNormalization", ["x", "s", "b"], ["y"],
                    {"num_groups": 2, "epsilon": 0.011, "stash_type": stash_type}, "n0"))
    g.outputs = ["y"]
    return g


@pytest.mark.parametrize(("stash_type", "category"), [
    # c45 (aea76bf0): statistics in float16 over groups of two close values: E[X^2] - E[X]^2 cancels in
    # float16's ulps, though the tensor is float32 (Inductor rightly computed them wider)
    (10, NOISE),
    # the same values with float statistics: a few float32 ulps move nothing, a wrong answer is the compiler's
    (1, COMPILER),
])
def test_an_operator_is_nudged_in_the_ulps_of_the_type_it_computes_in(stash_type: int, category: str) -> None:
    g = _group_norm(stash_type)
    feeds = {"x": f32(5.0, 5.25, 4.5, 4.375)[None], "s": f32(1, 1, 1, 1), "b": f32(0, 0, 0, 0)}
    test = Test(to_bytes(g), g.to_json(), feeds)
    f = Finding(DIFFERENTIAL, "value", "openvino", "f32", "run", "1/4 differ", other="reference/default", output=0)
    localize(g, test, [f], Refuses(), ("reference", "default"), Criteria())
    assert f.category == category, f.details["first_diverging"]


def test_a_node_the_reference_cannot_compute_is_recomputed_by_ort_in_a_worker(pool: WorkerPool) -> None:
    """c45 (8b64597e): BlackmanWindow(2) cast to int8 is [0, 1] on ORT, [0, 0] on OpenVINO (the peak is
    0.99999994 in float32), within the rounded integer's unit; the DequantizeLinear after it makes it 0.57
    apart.  The reference evaluator has no DequantizeLinear at opset 17: ORT, in a worker, recomputes it on
    OpenVINO's inputs and gives OpenVINO's result: a tie.  Without a runner there is no verdict."""
    g = Graph(opset=17)
    g.add_value(Value("n", TensorType((), "int32"), INPUT_KIND))
    g.add_value(Value("w", TensorType((2,), "int8"), NODE_KIND))
    g.add_value(Value("scale", TensorType((), "float32"), CONST_KIND, np.array(0.5689, np.float32)))
    g.add_value(Value("y", TensorType((2,), "float32"), NODE_KIND))
    g.add_node(Node("BlackmanWindow", ["n"], ["w"], {"output_datatype": 3}, "n0"))
    g.add_node(Node("DequantizeLinear", ["w", "scale"], ["y"], {"axis": -1}, "n1"))
    g.outputs = ["w", "y"]
    expected = [np.array([0, 1], np.int8), f32(0, 0.5689)]
    actual = [np.array([0, 0], np.int8), f32(0, 0)]
    feeds = {"n": np.array(2, np.int32)}
    first = first_divergence(g, expected, actual, None, feeds, pool)
    assert first["op"] == "DequantizeLinear" and first["tie"] == "DequantizeLinear of w, which differ by rounding only"
    assert "tie" not in first_divergence(g, expected, actual, None, feeds)


@pytest.mark.parametrize("constant", [False, True])
@pytest.mark.parametrize(("variant", "category"), [("low", NOISE), ("low-plus-one", COMPILER)])
def test_a_low_precision_variant_whose_inputs_rounding_explains_it_is_noise(pool: WorkerPool, variant: str,
                                                                           category: str, constant: bool) -> None:
    """c49: OpenVINO's bfloat16 default rounds a MaxRoiPool's ROI edge 2.497 to 2.5, into another bin.  Here a
    planted backend rounds its float32 inputs to bfloat16: Floor of 0.9995 is 0, of its bfloat16 rounding 1.
    ORT on the rounded inputs gives the variant's outputs: noise.  A variant wrong besides stays a bug.  So for
    a constant of the model, which the variant rounds alike (c51: a MaxRoiPool of constant ROIs): Floor of 0.9995
    plus a constant 0 read as an initializer."""
    backend = "tests.fake_backends:RoundsToBfloat16"
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2,), "float32"), CONST_KIND if constant else INPUT_KIND,
                      f32(0.9995, 2.25) if constant else None))
    g.add_value(Value("y", TensorType((2,), "float32"), NODE_KIND))
    g.add_node(Node("Floor", ["x"], ["y"], {}, "n0"))
    g.outputs = ["y"]
    test = Test(to_bytes(g), g.to_json(), {} if constant else {"x": f32(0.9995, 2.25)})
    base = run_baseline(pool, test, g)
    criteria = Criteria(low_precision={(backend, "low"), (backend, "low-plus-one")}).for_graph(g, base.name)
    outcomes = {backend: pool.run(backend, test, [variant])}
    findings = [f for f in judge(outcomes, base.outputs, criteria).findings if f.oracle == DIFFERENTIAL]
    assert findings, outcomes
    localize(g, test, findings, pool, base.which, criteria)
    assert [f.category for f in findings] == [category], [f.details for f in findings]
