"""Every spec, against the real ONNX checker, ONNX shape inference and ONNX Runtime."""

from __future__ import annotations

import random

import pytest

from dlcfuzz.spec import REGISTRY
from tests.helpers import check_graph, ort_generator

SPEC_NAMES = sorted(REGISTRY)
FILLERS = [REGISTRY[n] for n in ("Relu", "Add", "Identity", "Cast", "Neg")]


@pytest.mark.parametrize("op", SPEC_NAMES)
def test_single_op(op: str) -> None:
    spec = REGISTRY[op]
    try:
        gen = ort_generator([spec], opset=max(17, spec.since))
    except ValueError:
        pytest.skip(f"{op}: ONNX Runtime has no kernel for any allowed dtype")
    for seed in range(12):
        g = gen.generate(seed)
        assert [n.op for n in g.nodes] == [op]
        check_graph(g, seed=seed)
        ctx = gen.last_ctx
        for name, check in spec.checks.items():
            assert check(ctx), f"{op}: check {name!r} fails for {g.nodes[0].attrs}"
    assert gen.stats.retries == 0, gen.stats


@pytest.mark.parametrize("op", SPEC_NAMES)
def test_in_graphs(op: str) -> None:
    """The operator inside small graphs, reusing tensors produced by other operators."""
    spec = REGISTRY[op]
    gen = ort_generator([spec, *random.Random(op).sample(FILLERS, 2)], op_range=(4, 8), opset=max(17, spec.since))
    if op in gen.unavailable:  # the generator would silently leave it out: the graphs would test only fillers
        pytest.skip(f"{op}: ONNX Runtime has no kernel for any allowed dtype")
    count = 0
    for seed in range(4):
        g = gen.generate(seed)
        count += sum(n.op == op for n in g.nodes)
        check_graph(g, seed=seed)
    assert count > 0, f"no {op} node in the graphs"


def test_ort_profile_follows_kernel_versions() -> None:
    """ORT runs a node by its schema's since-version: RoiAlign's "16 and later" kernel does not run
    RoiAlign-22 (opsets 22 and up), so a generator for ORT leaves it out there, and NonMaxSuppression
    (a kernel without type constraints) stays in."""
    from dlcfuzz.backends.ort import full_profile

    ops = ("RoiAlign", "NonMaxSuppression", "Relu")
    assert ort_generator([REGISTRY[o] for o in ops], opset=21).unavailable == []
    assert ort_generator([REGISTRY[o] for o in ops], opset=22).unavailable == ["RoiAlign"]
    assert full_profile(22, ops)[("RoiAlign", "T1")] == frozenset()
