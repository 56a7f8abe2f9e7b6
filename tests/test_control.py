"""If as a composite operator (spec/control.py): its graphs are valid ONNX whose If branches read values of
the outer graph; ORT computes what the node says (checked against numpy, not against the exporter); the
reference evaluator agrees with ORT; the interval analysis covers both branches; TVM and OpenVINO import
the branches and agree with ORT."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test
from dlcfuzz.backends.ort import model_error
from dlcfuzz.export.onnx import to_bytes, to_onnx
from dlcfuzz.ir import INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle.compare import compare
from dlcfuzz.solve.intervals import analyze
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import synthesize
from tests.helpers import SESSION_OPTIONS, ort_generator

NUMPY = {  # each branch operator as numpy computes it
    "Identity": lambda v: v,
    "Neg": np.negative,
    "Abs": np.abs,
    "Relu": lambda v: np.maximum(v, 0).astype(v.dtype),
    "Sigmoid": lambda v: (1 / (1 + np.exp(-v.astype(np.float64)))).astype(v.dtype),
    "Tanh": lambda v: np.tanh(v.astype(np.float64)).astype(v.dtype),
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Not": np.logical_not,
}


def ort_run(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(to_bytes(g), SESSION_OPTIONS, providers=["CPUExecutionProvider"]).run(None, feeds)


def graphs(opset: int, n: int):
    gen = ort_generator([REGISTRY["If"]], opset=opset, runtime_consts=0)
    for seed in range(n):
        g = gen.generate(seed)
        yield seed, g, synthesize(g, np.random.default_rng(seed))


def test_if_graphs_are_valid_and_their_branches_read_the_outer_graph():
    dtypes, both, nests, biased = set(), 0, 0, 0
    for opset in (13, 17, 21):
        for seed, g, _ in graphs(opset, 12):
            assert model_error(g, seed=seed) is None
            node = g.nodes[0]
            [if_node] = to_onnx(g).graph.node
            assert if_node.op_type == "If" and list(if_node.input) == [node.inputs[1]]
            branches = {a.name: a.g for a in if_node.attribute}
            assert sorted(branches) == ["else_branch", "then_branch"]
            then, other = branches["then_branch"], branches["else_branch"]
            assert not then.input and not other.input  # outer-scope reads only
            nested = node.attrs.get("nested")
            if nested:  # that branch is an If on the same condition, whose branches apply its operator
                [inner] = (then if nested == "then" else other).node
                assert inner.op_type == "If" and list(inner.input) == [node.inputs[1]]
                deep = [a.g for a in inner.attribute]
                assert all(b.node[0].op_type == node.attrs[f"{nested}_op"] for b in deep)
                then, other = (deep[0], other) if nested == "then" else (then, deep[0])
                nests += 1
            assert then.node[0].op_type == node.attrs["then_op"] and then.node[0].input == [node.inputs[0]]
            if node.attrs.get("then_bias") is not None:
                assert then.node[1].op_type == "Add" and then.initializer[0].name == then.node[1].input[1]
                biased += 1
            y = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else node.inputs[0]
            assert other.node[0].op_type == node.attrs["else_op"] and other.node[0].input == [y]
            dtypes.add(g.values[node.inputs[0]].type.dtype)
            both += y != node.inputs[0]
    assert len(dtypes) >= 4 and both > 0 and nests > 0 and biased > 0


def test_ort_computes_the_branch_the_condition_picks():
    """Against numpy: cond ? then_op(x) + then_bias : else_op(y) (a nested If changes nothing)."""
    taken, forms = set(), set()
    for seed, g, feeds in graphs(17, 40):
        node = g.nodes[0]
        x, cond = feeds[node.inputs[0]], bool(feeds[node.inputs[1]].reshape(()))
        y = feeds[node.inputs[2]] if len(node.inputs) > 2 and node.inputs[2] else x
        bias = node.attrs.get("then_bias")
        then = NUMPY[node.attrs["then_op"]](x) + (np.array(bias, x.dtype) if bias is not None else 0)
        want = [then, y] if cond else [NUMPY[node.attrs["else_op"]](y), x]  # the second output: a swap
        forms.update(k for k in ("then_bias", "nested") if node.attrs.get(k) is not None)
        got = ort_run(g, feeds)
        forms.add(f"{len(got)} outputs")
        for a, b in zip(got, want[:len(node.outputs)], strict=True):
            assert a.dtype == x.dtype and a.shape == x.shape
            np.testing.assert_allclose(a.astype(np.float64), np.asarray(b, np.float64), rtol=1e-3,
                                       err_msg=f"seed {seed} {node.attrs} cond={cond}")
        taken.add(cond)
    assert taken == {True, False} and forms == {"then_bias", "nested", "1 outputs", "2 outputs"}


def test_the_reference_evaluator_agrees_with_ort():
    from onnx.reference import ReferenceEvaluator

    for opset in (13, 21):
        for seed, g, feeds in graphs(opset, 10):
            got = [np.asarray(o) for o in ReferenceEvaluator(to_onnx(g)).run(None, feeds)]
            assert compare(ort_run(g, feeds), got) is None, (opset, seed, g.nodes[0].attrs)


def test_the_interval_covers_both_branches():
    g = Graph(opset=17)
    x = TensorType((3,), "float32")
    for name, t in (("x", x), ("c", TensorType((), "bool")), ("y", x)):
        g.add_value(Value(name, t, INPUT_KIND))
    g.add_value(Value("out", x, NODE_KIND))
    g.add_node(Node("If", ["x", "c", "y"], ["out"], {"then_op": "Neg", "else_op": "Sigmoid", "then_bias": -1.5},
                    "n0"))
    g.outputs = ["out"]
    lo, hi = analyze(g, {"x": (1.0, 4.0), "c": (0.0, 1.0), "y": (-100.0, 100.0)})["out"]
    # then: -x - 1.5 in [-5.5, -2.5]; else: sigmoid(y) in (0, 1)
    assert -5.6 <= lo <= -5.5 and 0.99 <= hi <= 1.01  # both branches, widened for rounding only
    # a second output is x or y as they are
    g.add_value(Value("swap", x, NODE_KIND))
    g.nodes[0].outputs.append("swap")
    g.outputs.append("swap")
    assert analyze(g, {"x": (1.0, 4.0), "c": (0.0, 1.0), "y": (-100.0, 100.0)})["swap"] == (-100.0, 100.0)


@pytest.mark.parametrize("backend", ["tvm", "openvino"])
def test_compilers_import_the_branches_and_agree_with_ort(backend: str):
    module = {"tvm": "tvm", "openvino": "openvino"}[backend]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    be = load_backend(backend)
    variant = be.variants()[0]
    checked = 0
    for seed, g, feeds in graphs(17, 12):
        if g.values[g.nodes[0].inputs[0]].type.dtype not in ("float32", "int32", "int64", "bool"):
            continue  # the types every variant of both compilers runs
        got = be.run(be.compile(be.load(Test(to_bytes(g), g.to_json(), feeds)), variant), feeds)
        assert compare(ort_run(g, feeds), got) is None, (seed, g.nodes[0].attrs)
        checked += 1
    assert checked >= 3
