"""Indexing and scatter: index_select, gather, scatter (plain, add, reduce), index_add, index_copy,
index_fill, take_along_dim, take, masked_fill, advanced indexing, embedding; and the operators whose
output size depends on values: masked_select (the mask's), nonzero, unique and unique_consecutive (their
input's: the spec draws those data, ``In.value``, so that it knows the output shape; the generator takes
them at run time, pinned, half the time).  Index tensors are constants the spec draws in range (taken at
run time, pinned, at the solver's runtime-constant rate); positions that plain scatters write are
distinct, so that no result depends on the order of duplicate writes."""

from __future__ import annotations

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.ir.dtypes import np_dtype
from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import BOOL, Choice, Const, EmptyDomain, In, Int, Maybe
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
    return _data_size(int(np.broadcast_to(c._m, shape).sum()))


def _data_size(n: int) -> int:
    """A data-dependent size, never 0 or 1: Dynamo and Inductor take an unbacked size to be neither (a
    size of 1 that broadcasts fails their runtime assert, by design), so such a size is refused."""
    if n < 2:
        raise EmptyDomain(f"a data-dependent size of {n}")
    return n


def _mshape(c):
    return Draw(lambda rng: [x if rng.random() < 0.7 else 1 for x in c.s])


def _draw_mask(c):
    c._m = _mask(c)
    return c._m


def _nonzero_data(c) -> np.ndarray:
    """Nonzero values (small integers, exact in every dtype) at a drawn density, two at least (see
    ``_data_size``)."""
    shape, dtype = tuple(c.s), c.T
    if c.x.numel < 2:
        raise EmptyDomain("nonzero: fewer than two elements")
    keep = c.np.random(shape) >= c._density
    for k in c.rng.sample(range(c.x.numel), 2):
        keep.flat[k] = True
    if dtype == "bool":
        data = keep
    else:
        vals = c.np.integers(1, 4, size=shape)
        if dtype != "uint8":
            vals = vals * np.where(c.np.random(shape) < 0.5, -1, 1)
        data = np.where(keep, vals, 0)
    c._nnz = _data_size(int(keep.sum()))
    return np.asarray(data).astype(np_dtype(dtype)).reshape(shape)


def _nonzero_out(c) -> list[TensorType]:
    if c.as_tuple:
        return [TensorType((c._nnz,), "int64") for _ in range(max(1, c.r))]
    return [TensorType((c._nnz, c.r), "int64")]


def _positions_iv(c: iv.Call) -> list[iv.Iv]:
    return [(0.0, float(max(1, max(c.types[0].shape, default=1)) - 1)) for _ in c.outs]


def _unique_data(c) -> np.ndarray:
    """Values from a few atoms (quarters of small integers for floats, exact in every dtype; no -0.0), so
    that equal values are exactly equal and the output size is the atoms drawn."""
    shape, dtype = tuple(c.s), c.T
    span = 2 if dtype == "bool" else c._atoms
    codes = c.np.integers(0, span, size=shape)
    if dtype == "bool":
        data = codes.astype(bool)
    elif dtype in FLOATS:
        data = (codes - span // 2) / 4.0
        data = np.where(data == 0, 0.0, data)  # never -0.0
    else:
        data = codes if dtype == "uint8" else codes - span // 2
    data = np.asarray(data).astype(np_dtype(dtype)).reshape(shape)
    flat = data.reshape(-1)
    if c._consecutive:
        c._k = _data_size(int(1 + np.count_nonzero(flat[1:] != flat[:-1])) if flat.size else 0)
    else:
        c._k = _data_size(int(np.unique(flat).size))
    return data


def _unique_out(c) -> list[TensorType]:
    outs = [TensorType((c._k,), c.T)]
    if c.return_inverse:
        outs.append(TensorType(tuple(c.s), "int64"))
    if c.return_counts:
        outs.append(TensorType((c._k,), "int64"))
    return outs


def _unique_iv(c: iv.Call) -> list[iv.Iv]:
    out = [c.x]
    n = float(max(1, c.types[0].numel))
    if c.attrs.get("return_inverse"):
        out.append((0.0, n - 1))
    if c.attrs.get("return_counts"):
        out.append((1.0, n))
    return out


def _unique_emit(name: str):
    def emit(a: list[str], k: dict) -> str:
        # unique's values take no gradient (no derivative is defined): read through detach()
        sort = "sorted=True, " if name == "unique" else ""
        return (f"torch.{name}({a[0]}.detach(), {sort}return_inverse={bool(k['return_inverse'])}, "
                f"return_counts={bool(k['return_counts'])})")
    return emit


def unique(name: str) -> TorchOpSpec:
    return TorchOpSpec(name, "index", [In("x", T="T", rank=(1, 4), value=_unique_data)],
                       _unique_out,
                       attrs={"return_inverse": BOOL, "return_counts": BOOL, "_atoms": Int(2, 6),
                              "_consecutive": Choice((name == "unique_consecutive",))},
                       types={"T": ALL}, transfer=_unique_iv, grad=False, dynamic_output=True,
                       emit=_unique_emit(name))


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
    TorchOpSpec("nonzero", "index", [In("x", T="T", rank=(1, 4), value=_nonzero_data)], _nonzero_out,
                attrs={"as_tuple": BOOL, "_density": Choice((0.0, 0.3, 0.6, 0.9))}, types={"T": ALL},
                transfer=_positions_iv, grad=False, dynamic_output=True,
                emit=lambda a, k: f"torch.nonzero({a[0]}, as_tuple=True)" if k.get("as_tuple")
                else f"torch.nonzero({a[0]})"),
    unique("unique"), unique("unique_consecutive"),
    TorchOpSpec("embedding", "index",
                [In("weight", T="T", rank=(2, 2)),
                 Const("indices", lambda c: np.array(c.np.integers(0, c.s[0], size=tuple(c.ishape)), dtype=np.int64))],
                lambda c: [TensorType((*c.ishape, c.s[1]), c.T)],
                attrs={"ishape": Draw(lambda rng: [rng.randint(1, 4) for _ in range(rng.randint(1, 2))]),
                       "padding_idx": lambda c: Maybe(Int(0, c.s[0] - 1), 0.6)},
                types={"T": FLOATS}, transfer=same_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"F.embedding({a[1]}, {a[0]}, padding_idx={k.get('padding_idx')})"),
]

# no index into a dim of length 0: only the calls that index nothing there
EMPTY_OK = frozenset({"torch.index_copy", "torch.masked_fill"})
for _s in SPECS:
    _s.empty = _s.op in EMPTY_OK
