"""Disruptive generation: every model is a valid prefix plus one call that breaks one named
constraint, and the ONNX checker or ONNX Runtime (real ones, no mocks) rejects nearly all of them."""

from __future__ import annotations

import ast
import re
from collections import Counter

import onnx
import pytest

from dlcfuzz.backends.ort import full_profile, graph_error
from dlcfuzz.gen.disruptive import KINDS, DisruptiveGenerator, prefix_graph
from dlcfuzz.ir import DTYPES, Graph
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY

SEEDS = range(1000)  # rejection: ~97 % of 1000 models (windows of 300 seeds range from 95 % to 98 %)


def generator(ops=None, op_range=(1, 3), **kw) -> DisruptiveGenerator:
    lim = GenOptions()
    specs = list(REGISTRY.values()) if ops is None else [REGISTRY[o] for o in ops]
    return DisruptiveGenerator(specs, lim, op_range, full_profile(lim.opset, tuple(REGISTRY)), **kw)


@pytest.fixture(scope="module")
def corpus() -> tuple[DisruptiveGenerator, list[Graph]]:
    gen = generator()
    return gen, [gen.generate(s) for s in SEEDS]


def _formal(schema, i: int):
    """The ONNX schema's formal input that actual input ``i`` binds to (variadic ones repeat)."""
    params = schema.inputs
    if i < len(params):
        return params[i]
    variadic = params and params[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic
    return params[-1] if variadic else None


def assert_breaks(g: Graph) -> None:
    """The last node of ``g`` breaks what its violation record says, read off the model itself and
    checked against ONNX's own operator schema where the rule is ONNX's."""
    v, last = g.meta["violation"], g.nodes[-1]
    schema = onnx.defs.get_schema(last.op, g.opset)
    types = [g.values[i].type if i else None for i in last.inputs]
    what = (v, [(t.dtype, t.shape) if t else None for t in types], last.attrs)
    if v["kind"] == "dtype":  # "T excludes int8": an input bound to T is int8, which ONNX's T does not allow
        _, dtype = re.fullmatch(r"(.+) as (\w+)", v["detail"]).groups()
        fixed = re.fullmatch(r"(\w+) is (\w+)", v["constraint"])  # "axes is int64": one fixed dtype
        if fixed:
            assert fixed.group(2) != dtype, what
            param = next(p for p in schema.inputs if p.name == fixed.group(1))
            var = param.type_str
        else:
            var = re.fullmatch(r"(\w+) excludes (\w+)", v["constraint"]).group(1)
        allowed = next((c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == var), [var])
        assert f"tensor({dtype})" not in allowed, what
        assert any(t and t.dtype == dtype and _formal(schema, i).type_str == var for i, t in enumerate(types)), what
    elif v["kind"] == "dtype-mismatch":  # inputs bound to one type variable hold two dtypes
        by_var: dict[str, set[str]] = {}
        for i, t in enumerate(types):
            if t is not None:
                by_var.setdefault(_formal(schema, i).type_str, set()).add(t.dtype)
        assert any(len(d) >= 2 for d in by_var.values()), what
    elif v["kind"] == "arity":
        dropped = re.fullmatch(r"input (\d+) \(\w+\) dropped", v["detail"])
        if dropped:  # a required input left out
            k = int(dropped.group(1))
            assert (k >= len(types) or types[k] is None) and k < schema.min_input, what
        else:  # one input more than ONNX allows
            k = int(re.fullmatch(r"an extra input \S+ at position (\d+)", v["detail"]).group(1))
            assert len(types) == k + 1 and types[k] is not None and k >= schema.max_input, what
    elif v["kind"] in ("rank", "shape"):  # "X (5, 1, 4) -> (5, 1)": some input now has the new shape
        before, after = (ast.literal_eval(x) for x in re.search(r"(\(.*\)) -> (\(.*\))$", v["detail"]).groups())
        assert before != after and any(t and t.shape == after for t in types), what
        if v["kind"] == "rank":
            bounds = re.search(r"rank in \[(\d+), (\d+)\]|rank >= (\d+)", v["constraint"]).groups()
            lo, hi = (int(bounds[0]), int(bounds[1])) if bounds[0] else (int(bounds[2]), 99)
            assert not lo <= len(after) <= hi, what
    else:  # attribute: "to=99 (was 11)": the node carries the new value, as an attribute or a constant input
        name, value, was = re.fullmatch(r"(\w+)=(.*) \(was (.*)\)", v["detail"]).groups()
        new = ast.literal_eval(value)
        assert new != ast.literal_eval(was), what
        consts = [g.values[i].data.tolist() for i in last.inputs if i and g.values[i].data is not None]
        assert last.attrs.get(name) == new or (name not in last.attrs and new in consts), what


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
        assert_breaks(g)
        # everything before the last node is left as the valid prefix it was
        assert [n.name for n in prefix_graph(g).nodes] == [n.name for n in g.nodes[:-1]]
    assert sum(gen.stats.values()) == len(graphs)  # one violation counted per model
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
