"""Indexing and scatter: index_select, gather, scatter (plain, add, reduce), index_add, index_copy,
index_fill, take_along_dim, take, masked_fill, masked_select (an output size that depends on the mask's
values), advanced indexing, embedding.  Index tensors are constants the spec draws in range (taken at
run time, pinned, at the solver's runtime-constant rate); positions that plain scatters write are
distinct, so that no result depends on the order of duplicate writes."""

from __future__ import annotations

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import BOOL, Choice, Const, In, Int, Maybe
from dlcfuzz.spec.torch.base import ALL, FLOATS, NUMERIC, Draw, TorchOpSpec, hull_iv, same_iv, small_domain
from dlcfuzz.spec.torch.inplace import _ishape, _scatter_index


def _dim(c):
    return Int(-c.r, c.r - 1)


def _idx(c, n: int, k: int) -> np.ndarray:
    return np.array([c.rng.randrange(n) for _ in range(k)], dtype=np.int64)


def _along(c) -> np.ndarray:
    """An index of shape ``c.ishape`` with values in x's dim (gather, take_along_dim)."""
    n = c.s[c.dim % c.r]
    return np.array(c.np.integers(0, n, size=tuple(c.ishape)), dtype=np.int64)


def _grow(k: float):
    return lambda c: [iv.widen((-1, 1), c.n, 1, absolute=iv.amax(c.x) + k * iv.amax(c.ivs[2]) + 1)]


def _mask(c) -> np.ndarray:
    m = c.np.random(c.mshape) < 0.5
    if not m.any():
        m.flat[0] = True
    return m


def _masked_count(c) -> int:
    from dlcfuzz.spec.dsl import broadcast_shapes

    shape = broadcast_shapes(c.s, tuple(c.mshape))
    return int(np.broadcast_to(c._m, shape).sum())


def _mshape(c):
    return Draw(lambda rng: [x if rng.random() < 0.7 else 1 for x in c.s])


def _draw_mask(c):
    c._m = _mask(c)
    return c._m


def _scatter_reduce_iv(c):
    if c.attrs.get("reduce") == "prod":
        m = max(1.0, iv.amax(c.x)) * max(1.0, iv.amax(c.ivs[2])) ** 5
        return [iv.widen((-m, m), c.n, 8, absolute=1)]
    return _grow(6)(c)


SPECS = [
    TorchOpSpec("index_select", "index", [In("x", T="T", rank=(1, 5)), Const("index", lambda c: _idx(c, c.s[c.dim],
                                                                                                     c.k))],
                lambda c: [TensorType(tuple(c.k if i == c.dim % c.r else x for i, x in enumerate(c.s)), c.T)],
                attrs={"dim": _dim, "k": Int(1, 5)}, types={"T": ALL}, transfer=same_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.index_select({a[0]}, {k['dim']}, {a[1]})"),
    TorchOpSpec("gather", "index", [In("x", T="T", rank=(1, 5)), Const("index", _along)],
                lambda c: [TensorType(tuple(c.ishape), c.T)], attrs={"dim": _dim, "ishape": _ishape},
                types={"T": ALL}, transfer=same_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.gather({a[0]}, {k['dim']}, {a[1]})"),
    TorchOpSpec("take_along_dim", "index", [In("x", T="T", rank=(1, 5)), Const("index", _along)],
                lambda c: [TensorType(tuple(c.ishape), c.T)],
                attrs={"dim": _dim, "ishape": lambda c: Draw(lambda rng: [rng.randint(1, 4) if i == c.dim % c.r else x
                                                                         for i, x in enumerate(c.s)])},
                types={"T": ALL}, transfer=same_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.take_along_dim({a[0]}, {a[1]}, {k['dim']})"),
    TorchOpSpec("take", "index", [In("x", T="T", rank=(0, 5)),
                                  Const("index", lambda c: np.array(c.np.integers(0, max(1, c.x.numel),
                                                                                  size=tuple(c.ishape)),
                                                                    dtype=np.int64))],
                lambda c: [TensorType(tuple(c.ishape), c.T)],
                attrs={"ishape": Draw(lambda rng: [rng.randint(1, 4) for _ in range(rng.randint(1, 3))])},
                types={"T": ALL}, transfer=same_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.take({a[0]}, {a[1]})"),
    TorchOpSpec("getitem", "index", [In("x", T="T", rank=(1, 5)), Const("index", lambda c: _idx(c, c.s[0], c.k))],
                lambda c: [TensorType((c.k, *c.s[1:]), c.T)], attrs={"k": Int(1, 5)},
                types={"T": ALL}, transfer=same_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"{a[0]}[{a[1]}]"),
    TorchOpSpec("scatter", "index",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: _scatter_index(c, True)),
                 In("src", T="T", shape=lambda c: tuple(c.ishape))],
                lambda c: [c.x], attrs={"dim": _dim, "ishape": _ishape}, types={"T": ALL},
                transfer=hull_iv(0, 2), vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.scatter({a[0]}, {k['dim']}, {a[1]}, {a[2]})"),
    TorchOpSpec("scatter_add", "index",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: _scatter_index(c, False)),
                 In("src", T="T", shape=lambda c: tuple(c.ishape))],
                lambda c: [c.x], attrs={"dim": _dim, "ishape": _ishape}, types={"T": NUMERIC},
                transfer=_grow(5), vdomain=small_domain(8.0),
                emit=lambda a, k: f"torch.scatter_add({a[0]}, {k['dim']}, {a[1]}, {a[2]})"),
    TorchOpSpec("scatter_reduce", "index",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: _scatter_index(c, False)),
                 In("src", T="T", shape=lambda c: tuple(c.ishape))],
                lambda c: [c.x],
                attrs={"dim": _dim, "ishape": _ishape, "reduce": Choice(("sum", "prod", "mean", "amax", "amin")),
                       "include_self": BOOL},
                types={"T": NUMERIC}, transfer=_scatter_reduce_iv, vdomain=small_domain(2.0),
                emit=lambda a, k: f"torch.scatter_reduce({a[0]}, {k['dim']}, {a[1]}, {a[2]}, {k['reduce']!r}, "
                                  f"include_self={bool(k['include_self'])})"),
    TorchOpSpec("index_add", "index",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: _idx(c, c.s[c.dim], c.k)),
                 In("source", T="T", shape=lambda c: tuple(c.k if i == c.dim % c.r else x for i, x in enumerate(c.s)))],
                lambda c: [c.x], attrs={"dim": _dim, "k": Int(1, 4), "alpha": Choice((1, 2))}, types={"T": NUMERIC},
                transfer=_grow(8), vdomain=small_domain(8.0),
                emit=lambda a, k: f"torch.index_add({a[0]}, {k['dim']}, {a[1]}, {a[2]}, alpha={k['alpha']})"),
    TorchOpSpec("index_copy", "index",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: np.array(c.rng.sample(range(c.s[c.dim]), c.k),
                                                                                dtype=np.int64)),
                 In("source", T="T", shape=lambda c: tuple(c.k if i == c.dim % c.r else x for i, x in enumerate(c.s)))],
                lambda c: [c.x], attrs={"dim": _dim, "k": lambda c: Int(1, c.s[c.dim])}, types={"T": ALL},
                transfer=hull_iv(0, 2), vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.index_copy({a[0]}, {k['dim']}, {a[1]}, {a[2]})"),
    TorchOpSpec("index_fill", "index",
                [In("x", T="T", rank=(1, 4)), Const("index", lambda c: _idx(c, c.s[c.dim], c.k))],
                lambda c: [c.x], attrs={"dim": _dim, "k": Int(1, 3), "value": Choice((-1.0, 0.0, 2.0))},
                types={"T": FLOATS}, transfer=lambda c: [iv.hull(c.x, (-1.0, 2.0))], vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.index_fill({a[0]}, {k['dim']}, {a[1]}, {k['value']})"),
    TorchOpSpec("masked_fill", "index",
                [In("x", T="T", rank=(0, 5)), In("mask", T="Tb", shape=lambda c: c.bcast(c.s, uni=True))],
                lambda c: [c.x], attrs={"value": Choice((0.0, -1.0, 2.0))}, types={"T": FLOATS, "Tb": ("bool",)},
                transfer=lambda c: [iv.hull(c.x, (-1.0, 2.0))], vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.masked_fill({a[0]}, {a[1]}, {k['value']})"),
    TorchOpSpec("masked_select", "index",
                [In("x", T="T", rank=(1, 4)), Const("mask", _draw_mask)],
                lambda c: [TensorType((_masked_count(c),), c.T)], attrs={"mshape": _mshape}, types={"T": ALL},
                transfer=same_iv, vdomain=small_domain(1e4), dynamic_output=True,
                emit=lambda a, k: f"torch.masked_select({a[0]}, {a[1]})"),
    TorchOpSpec("embedding", "index",
                [In("weight", T="T", rank=(2, 2)),
                 Const("indices", lambda c: np.array(c.np.integers(0, c.s[0], size=tuple(c.ishape)), dtype=np.int64))],
                lambda c: [TensorType((*c.ishape, c.s[1]), c.T)],
                attrs={"ishape": Draw(lambda rng: [rng.randint(1, 4) for _ in range(rng.randint(1, 2))]),
                       "padding_idx": lambda c: Maybe(Int(0, c.s[0] - 1), 0.6)},
                types={"T": FLOATS}, transfer=same_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"F.embedding({a[1]}, {a[0]}, padding_idx={k.get('padding_idx')})"),
]
