"""In-place operators: a write into their first input (an input of the program, an intermediate, or a
view of either: the write then reaches the base), whose later readers and, for a program input, the
caller see.  The output aliases the first input.  Writes whose result would depend on the order of
duplicate indices (index_put_ without accumulate, scatter_) write distinct positions."""

from __future__ import annotations

import re

import numpy as np

from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import BOOL, Choice, Const, Float, In, Int
from dlcfuzz.spec.torch.base import (
    ALL,
    FLOATS,
    NUMERIC,
    Emit,
    TorchOpSpec,
    grow_iv,
    hull_iv,
    same_type,
    small_domain,
    uni_shape,
)

WRITE = "an in-place write"  # the mechanism (``TorchOpSpec.mechanism``): Dynamo and AOTAutograd functionalize it
_METHOD = re.compile(r"\.([a-z]\w*)_\(")


def inplace(name, inputs, attrs, emit, types=FLOATS, transfer=None, out=same_type, rank=(0, 5), bound=4.0):
    return TorchOpSpec(name, "inplace", [In("x", T="T", rank=rank), *inputs], out, attrs=attrs, types={"T": types},
                       emit=emit, transfer=transfer or grow_iv(), vdomain=small_domain(bound), mutates=0)


def _unique_index(c) -> np.ndarray:
    """k distinct positions along dim 0 (index_put_ without accumulate, index_copy_)."""
    n = c.s[0]
    return np.array(c.rng.sample(range(n), c.k), dtype=np.int64)


def _any_index(c) -> np.ndarray:
    return np.array([c.rng.randrange(c.s[c.dim % c.r]) for _ in range(c.k)], dtype=np.int64)


def _scatter_index(c, unique: bool) -> np.ndarray:
    """An index of ``c.ishape`` into dim ``c.dim``: along that dim, distinct positions when ``unique``."""
    d = c.dim % c.r
    shape = c.ishape
    out = np.zeros(shape, dtype=np.int64)
    n = c.s[d]
    for pos in np.ndindex(*[x for i, x in enumerate(shape) if i != d]):
        picks = c.rng.sample(range(n), shape[d]) if unique else [c.rng.randrange(n) for _ in range(shape[d])]
        for j, p in enumerate(picks):
            full = list(pos)
            full.insert(d, j)
            out[tuple(full)] = p
    return out


def _ishape(c):
    """The index/src shape of a scatter: at most x's size in every dim."""
    from dlcfuzz.spec.torch.base import Draw

    return Draw(lambda rng: [rng.randint(1, x) for x in c.s])


SPECS = [
    inplace("add_", [In("y", T="T", shape=uni_shape)], {"alpha": Choice((1, 2, -1))},
            lambda a, k: f"{a[0]}.add_({a[1]}, alpha={k['alpha']})", NUMERIC),
    inplace("sub_", [In("y", T="T", shape=uni_shape)], {}, lambda a, k: f"{a[0]}.sub_({a[1]})", NUMERIC),
    inplace("mul_", [In("y", T="T", shape=uni_shape)], {}, lambda a, k: f"{a[0]}.mul_({a[1]})", NUMERIC,
            transfer=lambda c: [iv.widen(iv.mul(c.ivs[0], c.ivs[1]), c.n, 4.0, absolute=1.0)], bound=2.0),
    inplace("div_", [In("y", T="T", shape=uni_shape)], {}, lambda a, k: f"{a[0]}.div_({a[1]})",
            transfer=lambda c: [iv.widen((-4 * iv.amax(c.x) - 1, 4 * iv.amax(c.x) + 1), c.n, 4.0)]),
    inplace("mul_scalar_", [], {"value": Choice((2, -1, 0.5))}, lambda a, k: f"{a[0]}.mul_({k['value']})",
            transfer=lambda c: [iv.scale(c.x, 2.0)]),
    # a float copied into an unsigned type out of its range is undefined: no uint8 destination
    inplace("copy_", [In("src", T="T1", shape=uni_shape)], {}, lambda a, k: f"{a[0]}.copy_({a[1]})",
            ("float32", "float16", "bfloat16", "int8", "int32", "int64", "bool"), transfer=hull_iv(0, 1)),
    inplace("zero_", [], {}, lambda a, k: f"{a[0]}.zero_()", ALL, transfer=hull_iv(0, zero=True)),
    inplace("fill_", [], {"value": Choice((0, 1, -1, 2))}, lambda a, k: f"{a[0]}.fill_({k['value']})", NUMERIC,
            transfer=lambda c: [iv.hull(c.x, (-1.0, 2.0))]),
    inplace("clamp_", [], {"min": Float(-1.5, 0.0), "max": Float(0.1, 1.5)},
            lambda a, k: f"{a[0]}.clamp_({k['min']}, {k['max']})", transfer=hull_iv(0)),
    inplace("relu_", [], {}, lambda a, k: f"{a[0]}.relu_()", transfer=hull_iv(0, zero=True)),
    inplace("sigmoid_", [], {}, lambda a, k: f"{a[0]}.sigmoid_()", transfer=lambda c: [iv.hull(c.x, (0.0, 1.0))]),
    inplace("masked_fill_", [In("mask", T="Tb", shape=uni_shape)], {"value": Choice((0.0, -1.0, 1.5))},
            lambda a, k: f"{a[0]}.masked_fill_({a[1]}, {k['value']})", transfer=lambda c: [iv.hull(c.x, (-1.0, 1.5))]),
    inplace("addcmul_", [In("t1", T="T", shape=uni_shape), In("t2", T="T", shape=uni_shape)],
            {"value": Float(-4.0, 4.0)},
            lambda a, k: f"{a[0]}.addcmul_({a[1]}, {a[2]}, value={k['value']})",
            transfer=lambda c: [iv.widen((-1, 1), c.n, 1, absolute=iv.amax(c.x) + 4 * iv.amax(c.ivs[1])
                                         * iv.amax(c.ivs[2]) + 1)], bound=2.0),
    inplace("lerp_", [In("end", T="T", shape=uni_shape)], {"weight": Float(0.0, 1.0)},
            lambda a, k: f"{a[0]}.lerp_({a[1]}, {k['weight']})", transfer=hull_iv(0, 1)),
    TorchOpSpec("index_put_", "inplace",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: _unique_index(c) if not c.accumulate
                                                     else _any_index(c)),
                 In("values", T="T", shape=lambda c: c.bcast((c.k, *c.s[1:]), uni=True))],
                same_type, attrs={"accumulate": BOOL, "dim": Choice((0,)), "k": lambda c: Int(1, c.s[0])},
                types={"T": NUMERIC}, mutates=0, vdomain=small_domain(4.0),
                transfer=lambda c: [iv.widen((-1, 1), c.n, 1, absolute=iv.amax(c.x) + 5 * iv.amax(c.ivs[2]) + 1)],
                emit=lambda a, k: f"{a[0]}.index_put_(({a[1]},), {a[2]}, accumulate={bool(k['accumulate'])})"),
    TorchOpSpec("index_copy_", "inplace",
                [In("x", T="T", rank=(1, 4)), Const("index", _unique_index),
                 In("source", T="T", shape=lambda c: (c.k, *c.s[1:]))],
                same_type, attrs={"k": lambda c: Int(1, c.s[0])}, types={"T": ALL}, mutates=0,
                vdomain=small_domain(4.0),
                transfer=hull_iv(0, 2), emit=lambda a, k: f"{a[0]}.index_copy_(0, {a[1]}, {a[2]})"),
    TorchOpSpec("scatter_", "inplace",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: _scatter_index(c, True)),
                 In("src", T="T", shape=lambda c: tuple(c.ishape))],
                same_type, attrs={"dim": lambda c: Int(-c.r, c.r - 1), "ishape": _ishape}, types={"T": ALL}, mutates=0,
                transfer=hull_iv(0, 2), vdomain=small_domain(4.0),
                emit=lambda a, k: f"{a[0]}.scatter_({k['dim']}, {a[1]}, {a[2]})"),
    TorchOpSpec("scatter_add_", "inplace",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: _scatter_index(c, False)),
                 In("src", T="T", shape=lambda c: tuple(c.ishape))],
                same_type, attrs={"dim": lambda c: Int(-c.r, c.r - 1), "ishape": _ishape}, types={"T": NUMERIC},
                mutates=0, vdomain=small_domain(4.0),
                transfer=lambda c: [iv.widen((-1, 1), c.n, 1, absolute=iv.amax(c.x) + 5 * iv.amax(c.ivs[2]) + 1)],
                emit=lambda a, k: f"{a[0]}.scatter_add_({k['dim']}, {a[1]}, {a[2]})"),
    TorchOpSpec("index_add_", "inplace",
                [In("x", T="T", rank=(1, 4)), Const("index", _any_index),
                 In("source", T="T", shape=lambda c: tuple(c.k if i == c.dim % c.r else x for i, x in enumerate(c.s)))],
                same_type, attrs={"dim": lambda c: Int(-c.r, c.r - 1), "k": Int(1, 4), "alpha": Choice((1, 2))},
                types={"T": NUMERIC}, mutates=0, vdomain=small_domain(4.0),
                transfer=lambda c: [iv.widen((-1, 1), c.n, 1, absolute=iv.amax(c.x) + 8 * iv.amax(c.ivs[2]) + 1)],
                emit=lambda a, k: f"{a[0]}.index_add_({k['dim']}, {a[1]}, {a[2]}, alpha={k['alpha']})"),
    TorchOpSpec("index_fill_", "inplace",
                [In("x", T="T", rank=(1, 4)), Const("index", _any_index)], same_type,
                attrs={"dim": lambda c: Int(-c.r, c.r - 1), "k": Int(1, 3), "value": Choice((-1.0, 0.0, 2.0))},
                types={"T": FLOATS}, mutates=0, vdomain=small_domain(), transfer=lambda c: [iv.hull(c.x, (-1.0, 2.0))],
                emit=lambda a, k: f"{a[0]}.index_fill_({k['dim']}, {a[1]}, {k['value']})"),
]

for _s in SPECS:
    if _s.op.endswith("masked_fill_"):
        _s.types["Tb"] = ("bool",)
    if _s.op.endswith("copy_") and "T1" not in _s.types:
        _s.types["T1"] = ALL

# in-place writes into empty tensors (not the indexed ones: no index into a dim of length 0)
EMPTY_OK = frozenset(s.op for s in SPECS if s.op not in {"torch.index_put_", "torch.index_copy_", "torch.scatter_",
                                                            "torch.scatter_add_", "torch.index_add_",
                                                            "torch.index_fill_"})
for _s in SPECS:
    _s.empty = _s.op in EMPTY_OK


def _out_of_place(emit: Emit) -> Emit:
    """The call's out-of-place method (``x.scatter_(...)`` -> ``x.scatter(...)``) in ``x``'s dtype, as the
    write kept it (``x.add_(y)`` keeps x's dtype, ``x.add(y)`` promotes)."""
    def plain(a: list[str], k: dict) -> str:
        call = _METHOD.sub(lambda m: f".{m.group(1)}(", emit(a, k), count=1)
        return f"({call}).to({a[0]}.dtype)"
    return plain


# the out-of-place forms that are not the method without its underscore
_PLAIN: dict[str, Emit] = {
    "torch.zero_": lambda a, k: f"torch.zeros_like({a[0]})",
    "torch.fill_": lambda a, k: f"torch.full_like({a[0]}, {k['value']})",
    "torch.copy_": lambda a, k: f"torch.ops.aten.copy({a[0]}, {a[1]})",
}
for _s in SPECS:
    assert _s.emit is not None
    _s.mechanism, _s.plain = WRITE, _PLAIN.get(_s.op) or _out_of_place(_s.emit)
