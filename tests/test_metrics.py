"""Isra's metrics and GenCoG's diversity on tiny graphs computed by hand."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from dlcfuzz.metrics import OpInfo, compute, op_nodes


def model(nodes, inputs=("x",), outputs=("c",)):
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])
    g = helper.make_graph(nodes, "t", [vi(i) for i in inputs], [vi(o) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


# x -> Relu -> a;  a -> Neg -> b;  (a, b) -> Add -> c
DIAMOND = model([
    helper.make_node("Relu", ["x"], ["a"]),
    helper.make_node("Neg", ["a"], ["b"]),
    helper.make_node("Add", ["a", "b"], ["c"]),
])
CORPUS = {
    "Relu": OpInfo(frozenset({1}), 4),
    "Neg": OpInfo(frozenset({1}), 4),
    "Add": OpInfo(frozenset({2}), 4),
    "Abs": OpInfo(frozenset({1}), 4),
}


def test_diamond_by_hand() -> None:
    m = compute([op_nodes(DIAMOND)], CORPUS)
    assert m["NOO"] == 3 and m["NOT"] == 3
    assert m["NOP"] == 3  # Relu->Neg, Relu->Add, Neg->Add
    assert m["NTR"] == 1  # Relu->Neg->Add
    assert m["NSA"] == 3
    assert m["OTC"] == pytest.approx(3 / 4)  # Abs never occurs
    assert m["IDC"] == pytest.approx(3 / 4)
    assert m["ODC"] == pytest.approx(3 / 4)  # one outdegree each for Relu (2), Neg (1), Add (0)
    assert m["SEC"] == pytest.approx((2 / 4 + 1 / 4) / 4)
    assert m["DEC"] == pytest.approx((1 / 16) / 4)
    assert m["SAC"] == pytest.approx(3 / 4)
    assert m["vertex_diversity"] == pytest.approx((1 / 4) * 3 / 4)
    assert m["edge_diversity"] == pytest.approx(3 / 16)


def test_test_set_averages_and_counts() -> None:
    chain = model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["c"])])
    m = compute([op_nodes(DIAMOND), op_nodes(chain)], CORPUS)
    assert m["NOO"] == pytest.approx((3 + 2) / 2)
    assert m["NOP"] == pytest.approx((3 + 1) / 2)
    # both Relus of the chain share shapes and attributes: NSA counts one
    assert m["NSA"] == pytest.approx((3 + 1) / 2)
    # Relu was seen with outdegrees 2, 1 and 0
    assert m["ODC"] == pytest.approx((3 + 1 + 1) / 4)
    assert m["SEC"] == pytest.approx((3 / 4 + 1 / 4) / 4)  # Relu->{Neg, Add, Relu}, Neg->{Add}


def test_nsa_is_order_independent_and_attributes_count() -> None:
    a = model([helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.1),
               helper.make_node("LeakyRelu", ["x"], ["b"], alpha=0.2),
               helper.make_node("Add", ["a", "b"], ["c"])])
    b = model([helper.make_node("LeakyRelu", ["x"], ["b"], alpha=0.2),
               helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.1),
               helper.make_node("Add", ["a", "b"], ["c"])])
    corpus = {"LeakyRelu": OpInfo(frozenset({1}), 10), "Add": OpInfo(frozenset({2}), 10)}
    ma, mb = compute([op_nodes(a)], corpus), compute([op_nodes(b)], corpus)
    assert ma["NSA"] == mb["NSA"] == 3
    assert ma["SAC"] == (2 + 1) / 2


def test_nodes_outside_the_corpus_are_ignored() -> None:
    m = compute([op_nodes(DIAMOND)], {"Relu": CORPUS["Relu"], "Add": CORPUS["Add"]})
    assert m["NOO"] == 2 and m["NOP"] == 1 and m["NTR"] == 0


def test_corpus_facts_from_specs_match_generated_graphs() -> None:
    """IDC's denominators (allowed indegrees) contain every indegree the generator produces, and
    every spec has a finite call-space estimate for vertex diversity."""
    from dlcfuzz.export.onnx import to_onnx
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.solve.space import call_space, indegrees
    from dlcfuzz.spec import REGISTRY
    from tests.helpers import ort_generator

    for spec in REGISTRY.values():
        assert 1 <= call_space(spec, GenOptions()) < 10**12, spec.op
    gen = ort_generator(list(REGISTRY.values()), op_range=(20, 30))
    for seed in range(40):
        # Constant nodes and the composite operators' chains (SequenceAt ...) are no specs' operators
        for n in op_nodes(to_onnx(gen.generate(seed))):
            if n.op in REGISTRY:
                assert n.indegree in indegrees(REGISTRY[n.op], 17), (n.op, n.indegree)
