"""Idioms (spec/torch/idiom.py): each one, alone in a tiny program, runs in eager torch with the types its
spec says, compiles under Inductor and matches eager; for the idioms listed in ``FIRES``, the Inductor pass
it aims at fires on that compile (a counter of ``counters["inductor"]``, or the pattern-matcher pattern by
its handler's name), so that an idiom that stops forming its pattern fails here."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from dlcfuzz.export.torch_program import build, to_program_source  # noqa: E402
from dlcfuzz.gen.torch_program import IDIOM, TorchProgramGenerator  # noqa: E402
from dlcfuzz.ir import CONST_KIND, Graph, Node  # noqa: E402
from dlcfuzz.spec.torch import TORCH_REGISTRY, families  # noqa: E402

IDIOMS = families()[IDIOM]
TOL = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 5e-2}


def _float32(g: Graph, n: Node) -> bool:
    return g.values[n.outputs[0]].type.dtype == "float32"


def _params(*slots: int) -> Callable[[Graph, Node], bool]:
    """The call's weights at these slots are parameters (freezing folds only those)."""
    def ok(g: Graph, n: Node) -> bool:
        return _float32(g, n) and all(k < len(n.inputs) and n.inputs[k] and g.values[n.inputs[k]].kind == CONST_KIND
                                      for k in slots)
    return ok


def _rows(g: Graph, n: Node) -> bool:
    """More than one row and column, and a contraction longer than 1: Inductor decomposes a small CPU matmul
    of one row or of an inner dim of 1 into pointwise code (decompose_mm)."""
    shape = g.values[n.inputs[0]].type.shape
    return math.prod(shape[:-1]) > 1 and shape[-1] > 1 and g.values[n.outputs[0]].type.shape[-1] > 1


def _attention(g: Graph, n: Node) -> bool:
    """Attention that stays attention: a batch of several heads (one is an mm, rewritten first), a head dim and
    a key length over 1 (else q @ k^T is an outer product, the softmax trivial)."""
    q = g.values[n.inputs[0]].type.shape
    return (_float32(g, n) and n.attrs["S"] > 1 and q[-1] > 1 and math.prod(q[:-2]) > 1
            and not (n.attrs.get("_has_mask") and (n.attrs["heads"] == "bmm" or n.attrs["op"] == "mul")))


# idiom -> (which program to take: a predicate on its call, freezing?, what must fire)
FIRES: dict[str, tuple[Callable[[Graph, Node], bool], bool, str]] = {
    "torch.idiom_view_pair": (lambda g, n: n.attrs["kind"] in ("flat", "mid"), False, "removed_pointless_view_pair"),
    "torch.idiom_attention": (lambda g, n: _attention(g, n), False, "fuse_attention"),
    "torch.idiom_split_cat": (lambda g, n: not n.attrs["reorder"], False, "post_grad.splitwithsizes_cat_replace"),
    "torch.idiom_cat_slice_cat": (lambda g, n: n.attrs["size"] <= g.values[n.inputs[0]].type.shape[1], False,
                                  "post_grad.cat_slice_cat"),
    "torch.idiom_scaled_softmax": (lambda g, n: n.attrs["fn"] == "softmax", False,
                                   "joint_graph.{op}_softmax_pattern"),
    "torch.idiom_full_cumsum": (lambda g, n: n.attrs["kind"] == "full", False,
                                "post_grad.pointless_cumsum_replacement"),
    "torch.idiom_onehot_scatter": (lambda g, n: n.attrs["bg"] == 0.0, False, "joint_graph.scatter_upon_const_tensor"),
    "torch.idiom_mm_bias": (lambda g, n: n.attrs["act"] == "none" and _float32(g, n) and _rows(g, n), False,
                             "post_grad.addmm"),
    "torch.idiom_numpy_axis": (lambda g, n: True, False, "numpy_compat_normalization"),
    # a batch of one is an mm (joint_graph's bmm_to_mm), not a bmm
    "torch.idiom_batched_dot": (lambda g, n: math.prod(g.values[n.inputs[0]].type.shape[:-1]) > 1, False,
                                "decompose_bmm"),
    "torch.idiom_conv_binary": (_params(1, 3), True, "binary_folding"),
    "torch.idiom_linear_act": (lambda g, n: _params(1)(g, n) and _rows(g, n), True,
                               "mkldnn_linear_weight_pack_matcher_count"),
    "torch.idiom_qlinear": (_params(1), True, "qlinear_weight_prepack_matcher_count"),
    "torch.idiom_qconv": (_params(1), True, "qconv_weight_prepack_matcher_count"),
}


def _program(op: str) -> tuple[Graph, Node]:
    """The first program (seed 0, 1, ...) of the idiom alone whose call FIRES' predicate takes."""
    want = FIRES.get(op, (lambda g, n: True, False, ""))[0]
    gen = TorchProgramGenerator([TORCH_REGISTRY[op]], (1, 1))
    for seed in range(200):
        g = gen.generate(seed)
        if g.nodes and want(g, g.nodes[0]):
            return g, g.nodes[0]
    raise AssertionError(f"{op}: no program of the wanted form in 200 seeds")


@pytest.fixture
def named_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor counts pattern matches by name (under TORCHINDUCTOR_PATTERN_MATCH_DEBUG); its graph and
    lowering patterns have no name: name them by their handler, as benchmarks/inductor_reach.py does."""
    from torch._inductor import pattern_matcher as pm

    def name(entry: Any) -> str | None:
        fn = getattr(entry.handler, "func", entry.handler)
        qual = getattr(fn, "__qualname__", None)
        return f"{fn.__module__.rsplit('.', 1)[-1]}.{qual}" if qual else None

    for cls in (pm.GraphPatternEntry, pm.LoweringPatternEntry):
        monkeypatch.setattr(cls, "pattern_name", property(name), raising=False)
    monkeypatch.setenv("TORCHINDUCTOR_PATTERN_MATCH_DEBUG", "dlcfuzz-no-such-node")


def _fired() -> set[str]:
    from torch._dynamo.utils import counters

    return {k for k, v in counters["inductor"].items() if v} | {
        k for k, v in counters["inductor_pattern_matcher_per_pattern"].items() if v}


def _close(got: Any, exp: Any, op: str) -> None:
    for a, b in zip(got, exp, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (op, a.shape, b.shape, a.dtype, b.dtype)
        if a.dtype.is_floating_point:
            tol = TOL.get(a.dtype, 1e-3)
            torch.testing.assert_close(a.double(), b.double(), rtol=tol, atol=tol, msg=lambda m: f"{op}: {m}")
        else:
            assert torch.equal(a, b), op


def test_the_family_is_registered_with_enough_idioms():
    assert 15 <= len(IDIOMS) <= 25
    assert set(FIRES) <= set(IDIOMS) and len(FIRES) >= 5
    for op in IDIOMS:
        spec = TORCH_REGISTRY[op]
        assert spec.family == IDIOM and spec.emit is not None and spec.transfer is not None


def test_idioms_are_drawn_at_the_idiom_rate():
    gen = TorchProgramGenerator(op_range=(10, 10))
    counts = [sum(n.op in IDIOMS for n in gen.generate(seed).nodes) for seed in range(40)]
    assert sum(1 <= c <= 4 for c in counts) >= 28, counts


def test_each_idiom_runs_eagerly_with_its_spec_types():
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in IDIOMS:
            gen = TorchProgramGenerator([TORCH_REGISTRY[op]], (1, 1))
            for seed in range(4):
                g = gen.generate(seed)
                assert g.nodes, f"{op}: no call in 20 tries ({gen.stats.failures})"
                ns = build(to_program_source(g))
                outs = ns["Model"]()(*ns["make_inputs"]())
                for o, name in zip(outs, g.outputs, strict=True):
                    t = g.values[name].type
                    if tuple(o.shape) != t.shape or str(o.dtype) != f"torch.{t.dtype}":
                        failures.append(f"{op}#{seed}: {tuple(o.shape)} {o.dtype}, spec says {t}")
                    elif o.dtype.is_floating_point and not torch.isfinite(o).all():
                        failures.append(f"{op}#{seed}: not finite")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("op", IDIOMS)
def test_idiom_compiles_matches_eager_and_fires_its_pass(op: str, named_patterns: None) -> None:
    from torch._dynamo.utils import counters
    from torch._inductor import config

    g, node = _program(op)
    if op in FIRES:  # inputs in other layouts (a channels_last q: matmul copies it) may keep a pattern from matching
        g.meta["layouts"] = {}
    ns = build(to_program_source(g))
    model = ns["Model"]()
    args = ns["make_inputs"]()
    _, freezing, target = FIRES.get(op, (None, False, ""))
    target = target.format(op="div" if node.attrs.get("op") == "div" else "mul")
    torch._dynamo.reset()
    counters.clear()
    assert os.environ.get("TORCHINDUCTOR_PATTERN_MATCH_DEBUG")
    with warnings.catch_warnings(), torch.no_grad(), config.patch(freezing=freezing, fx_graph_cache=False,
                                                                  compile_threads=1):
        warnings.simplefilter("ignore")
        exp = model(*args)
        got = torch.compile(model, backend="inductor", fullgraph=True)(*args)
    torch._dynamo.reset()
    _close(got, exp, op)
    if target:
        assert target in _fired(), f"{op}: {target} did not fire ({sorted(_fired())})"
