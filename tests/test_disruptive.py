"""Disruptive generation: every model is a valid prefix plus one call that breaks one named
constraint, and the ONNX checker or ONNX Runtime (real ones, no mocks) rejects nearly all of them."""

from __future__ import annotations

from collections import Counter

import pytest

from dlcfuzz.backends.ort import full_profile, graph_error
from dlcfuzz.gen.disruptive import KINDS, DisruptiveGenerator, prefix_graph
from dlcfuzz.ir import DTYPES, Graph
from dlcfuzz.solve import Limits
from dlcfuzz.spec import REGISTRY

SEEDS = range(1000)  # rejection: ~97 % of 1000 models (windows of 300 seeds range from 95 % to 98 %)


def generator(ops=None, op_range=(1, 3), **kw) -> DisruptiveGenerator:
    lim = Limits()
    specs = list(REGISTRY.values()) if ops is None else [REGISTRY[o] for o in ops]
    return DisruptiveGenerator(specs, lim, op_range, full_profile(lim.opset, tuple(REGISTRY)), **kw)


@pytest.fixture(scope="module")
def corpus() -> tuple[DisruptiveGenerator, list[Graph]]:
    gen = generator()
    return gen, [gen.generate(s) for s in SEEDS]


def test_every_model_breaks_its_last_node(corpus):
    gen, graphs = corpus
    for g in graphs:
        g.validate()
        v = g.meta["violation"]
        assert g.meta["strategy"] == "disruptive"
        assert v["kind"] in KINDS and v["constraint"] and v["detail"]
        last = g.nodes[-1]
        assert (v["node"], v["op"]) == (last.name, last.op)
        assert set(last.outputs) <= set(g.outputs)
    assert sum(gen.stats.values()) == len(graphs) == sum(gen.stats[k] for k in gen.stats)
    assert gen.stats.insertions == sum(len(g.nodes) for g in graphs)  # Isra's counters, for `dlcfuzz gen`


def test_every_kind_occurs(corpus):
    _, graphs = corpus
    kinds = Counter(g.meta["violation"]["kind"] for g in graphs)
    assert set(kinds) == set(KINDS), kinds


def test_nearly_all_are_rejected(corpus):
    _, graphs = corpus
    accepted = [g.meta["violation"] for g in graphs if graph_error(g) is None]
    # the rest break rules that ONNX Runtime checks only when it runs the node (or not at all)
    assert len(accepted) <= 0.05 * len(graphs), accepted


def test_same_seed_same_model(corpus):
    _, graphs = corpus
    gen = generator()
    for s in (0, 7, 123, 999):
        assert gen.generate(s).to_json() == graphs[s].to_json()


def test_prefix_is_valid(corpus):
    _, graphs = corpus
    sample = [g for g in graphs if len(g.nodes) >= 2][:40]
    assert len(sample) >= 20
    for g in sample:
        p = prefix_graph(g)
        assert len(p.nodes) == len(g.nodes) - 1 and "violation" not in p.meta
        assert graph_error(p) is None, (g.meta, graph_error(p))


def test_one_kind_at_a_time():
    g = generator(["MatMul"], (1, 1), kinds=["rank"]).generate(0)
    a = g.values[g.nodes[-1].inputs[0]].type
    assert a.rank == 0 and g.meta["violation"]["kind"] == "rank"
    assert graph_error(g) is not None

    g = generator(["Add"], (1, 1), kinds=["dtype"]).generate(1)
    assert {g.values[i].type.dtype for i in g.nodes[-1].inputs} == {"bool"}
    assert g.meta["violation"]["constraint"] == "T excludes bool"

    g = generator(["Relu"], (2, 2), kinds=["arity"]).generate(2)
    assert graph_error(g) is not None and g.meta["violation"]["constraint"].startswith("input")

    g = generator(["Concat"], (1, 1), kinds=["dtype-mismatch"]).generate(3)
    assert len({g.values[i].type.dtype for i in g.nodes[-1].inputs}) == 2
    assert graph_error(g) is not None


def test_attribute_violations_are_onnx_rules():
    # operators whose attribute rules ONNX shape inference checks (Conv's group ONNX Runtime checks at run time)
    gen = generator(["Softmax", "Transpose", "Concat", "ArgMax", "DepthToSpace", "ReduceMean"], (1, 1),
                    kinds=["attribute"])
    for s in range(40):
        g = gen.generate(s)
        assert graph_error(g) is not None, g.meta["violation"]


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown violation kind"):
        generator(kinds=["typo"])
    assert len(DTYPES) == 12  # the dtype universe the dtype violations draw from
