"""solve/instantiate.py: Isra's backtrack-free instantiation of one operator call into a graph, and the
tensor pool new inputs reuse from (picking rate, value domains, the GenCoG use penalty)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dlcfuzz.ir import INPUT_KIND, Graph, TensorType, Value
from dlcfuzz.solve.instantiate import GenOptions, Instantiator, Pool
from dlcfuzz.spec import REGISTRY


def instantiator(seed: int = 0, **options) -> Instantiator:
    return Instantiator(Graph(opset=17), GenOptions(dtypes=("float32",), **options), random.Random(seed),
                        np.random.default_rng(seed))


def value(name: str, shape: tuple[int, ...], dtype: str = "float32") -> Value:
    return Value(name, TensorType(shape, dtype), INPUT_KIND)


def test_a_committed_call_adds_its_node_outputs_and_their_intervals() -> None:
    inst = instantiator()
    node = inst.instantiate(REGISTRY["Relu"])
    g = inst.g
    assert [n.op for n in g.nodes] == ["Relu"]
    (x,), (y,) = node.inputs, node.outputs
    assert g.values[x].kind == INPUT_KIND and g.values[y].type == g.values[x].type  # Relu keeps the type
    lo, hi = inst.iv[x]
    assert inst.iv[y] == (max(lo, 0.0), max(hi, 0.0))  # relu of [lo, hi]
    assert {v.name for v in inst.pool.values} == {x, y}  # both may feed later calls


def test_a_dropped_proposal_leaves_graph_and_pool_as_they_were() -> None:
    inst = instantiator(picking_rate=0.0)
    inst.instantiate(REGISTRY["Relu"])
    before = (dict(inst.g.values), list(inst.g.nodes), list(inst.pool.values))
    p = inst.propose(REGISTRY["MatMul"])
    assert p.node.op == "MatMul" and p.staged  # new inputs, staged only
    assert (dict(inst.g.values), list(inst.g.nodes), list(inst.pool.values)) == before
    inst.commit(p)
    assert len(inst.g.nodes) == 2 and all(v.name in inst.g.values for v, _ in p.staged)


def test_an_input_with_a_value_domain_reuses_only_tensors_inside_it() -> None:
    """Acosh is defined for x >= 1: with every input picked from the pool where one fits, the tensors
    of [-2, 2] and [0, 2] never feed it, and a new input's hint keeps it at 1 or above."""
    for seed in range(20):
        inst = instantiator(seed, picking_rate=1.0)
        inst.instantiate(REGISTRY["Relu"])
        outside = {v.name for v in inst.pool.values if inst.iv[v.name][0] < 1.0}
        assert outside
        node = inst.instantiate(REGISTRY["Acosh"])
        (x,) = node.inputs
        assert x not in outside
        assert inst.iv[x][0] >= 1.0


def test_picking_rate_one_reuses_the_fitting_tensor_and_zero_never_does() -> None:
    for seed in range(10):
        reuse = instantiator(seed, picking_rate=1.0, max_rank=0)  # scalars: every float32 tensor fits Neg
        first = reuse.instantiate(REGISTRY["Neg"])
        second = reuse.instantiate(REGISTRY["Neg"])
        assert second.inputs[0] in {first.inputs[0], first.outputs[0]}
        fresh = instantiator(seed, picking_rate=0.0, max_rank=0)
        first = fresh.instantiate(REGISTRY["Neg"])
        second = fresh.instantiate(REGISTRY["Neg"])
        assert second.inputs[0] not in {first.inputs[0], first.outputs[0]}
        assert fresh.g.values[second.inputs[0]].kind == INPUT_KIND


def test_limits_bound_every_new_tensor() -> None:
    for seed in range(10):
        inst = instantiator(seed, max_rank=2, max_dim=3, picking_rate=0.0)
        for op in ("Add", "MatMul", "Relu", "Concat"):
            inst.instantiate(REGISTRY[op])
        for v in inst.g.values.values():
            assert v.type.rank <= 2 or v.kind != INPUT_KIND, v
            assert v.type.dtype == "float32" or v.kind != INPUT_KIND, v
            if v.kind == INPUT_KIND:
                assert all(d <= 3 for d in v.type.shape), v


def test_the_pool_picks_by_dtype_rank_and_acceptance_and_skips_empty_tensors() -> None:
    pool = Pool()
    a, b, c, empty = value("a", (2, 3)), value("b", (4,)), value("c", (2, 3), "int64"), value("e", (0, 3))
    for v in (a, b, c, empty):
        pool.add(v)
    assert pool.values == [a, b, c]  # the empty one is only for the input that wants it
    rng = random.Random(0)
    assert {pool.pick(rng, ["float32"], [2], None).name for _ in range(50)} == {"a"}
    assert {pool.pick(rng, ["float32", "int64"], [2], None).name for _ in range(200)} == {"a", "c"}
    assert pool.pick(rng, ["float32"], [2], lambda v: v.name != "a") is None
    assert pool.pick(rng, ["float16"], [2], None) is None
    assert pool.choose(rng, []) is None


def test_the_use_penalty_spreads_picks_over_less_used_tensors() -> None:
    pool = Pool(use_penalty=True)
    a, b = value("a", (2,)), value("b", (2,))
    pool.add(a)
    pool.add(b)
    for _ in range(9):
        pool.used("a")
    assert pool.weight(a) == pytest.approx(0.1) and pool.weight(b) == 1.0
    rng = random.Random(1)
    picks = [pool.pick(rng, ["float32"], [1], None).name for _ in range(2000)]
    assert 0.06 < picks.count("a") / len(picks) < 0.14  # weight 1/10 against 1: about 1/11
    plain = Pool()
    plain.add(a)
    plain.add(b)
    picks = [plain.pick(rng, ["float32"], [1], None).name for _ in range(2000)]
    assert 0.4 < picks.count("a") / len(picks) < 0.6
