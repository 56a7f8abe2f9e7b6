"""Reductions (with keepdim, and a ``dtype`` argument where torch takes one), cumulative operators,
sorting and top-k.  Outputs that are indices chosen among ties (max/min/sort/topk/cummax's indices,
argmax) are marked ``ties``: never compared, and never read by later operators."""

from __future__ import annotations

import math

from dlcfuzz.ir import TensorType
from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import BOOL, Choice, In, Int, Maybe
from dlcfuzz.spec.torch.base import (
    ALL,
    FLOATS,
    NUMERIC,
    Draw,
    TorchOpSpec,
    bool_iv,
    hull_iv,
    index_iv,
    is_float,
    same_iv,
    small_domain,
)


def _dims(c) -> Draw:
    """None (every dim), one dim, or a list of distinct dims."""
    def fn(rng):
        u = rng.random()
        if u < 0.2 or c.r == 0:
            return None
        if u < 0.6:
            return rng.randrange(-c.r, c.r)
        return sorted(rng.sample(range(c.r), rng.randint(1, c.r)))
    return Draw(fn)


def _reduced(c, dims, keepdim, all_scalar: bool = False) -> tuple[int, ...]:
    """The reduced shape; ``all_scalar``: no dim given reduces to a scalar whatever keepdim says (the
    call then takes no keepdim)."""
    if (dims is None and all_scalar) or c.r == 0:
        return ()
    red = set(range(c.r)) if dims is None else {d % c.r for d in (dims if isinstance(dims, list) else [dims])}
    return tuple(1 if i in red else x for i, x in enumerate(c.s) if keepdim or i not in red)


def _reduced_count(c) -> int:
    """How many elements each output element of a reduction over ``c.dim`` reads."""
    return max(1, math.prod(c.s)) // max(1, math.prod(_reduced(c, c.dim, True)))


def _count(c) -> float:
    return max(1, c.types[0].numel) / max(1, c.outs[0].numel) if c.types and c.types[0] is not None else 1.0


def _sum_iv(c: iv.Call) -> list[iv.Iv]:
    m = _count(c) * iv.amax(c.x)
    return [iv.widen((-m, m), c.n, 8.0, absolute=1.0)]


def _dtype_choice(c, ints_ok: bool = True):
    """A ``dtype=`` for a reduction: a float input keeps float dtypes, an integer one may also go to int64."""
    if is_float(c.T):
        return Maybe(Choice((*FLOATS, "float64")), 0.5)
    return Maybe(Choice(("int64", "float32", "float64") if ints_ok else ("float32", "float64")), 0.5)


def _sum_out(c) -> list[TensorType]:
    dt = c.dtype or (c.T if is_float(c.T) else "int64")
    return [TensorType(_reduced(c, c.dim, c.keepdim, True), dt)]


def _dim_kw(k) -> str:
    return f"dim={k['dim']!r}, " if k.get("dim") is not None else ""


def _dt_kw(k) -> str:
    return f", dtype=torch.{k['dtype']}" if k.get("dtype") else ""


def red(name, out, attrs, emit, types, transfer, bound=8.0, **kw) -> TorchOpSpec:
    return TorchOpSpec(name, "reduce", [In("x", T="T", rank=(0, 5))], out, attrs=attrs, types={"T": types},
                       emit=emit, transfer=transfer, vdomain=small_domain(bound), **kw)


def _one_dim(c):
    """One dim; a 0-d tensor takes 0 and -1 (torch treats it as one of length 1)."""
    return Int(-c.r, c.r - 1) if c.r else Choice((0, -1))


def _val_idx(c) -> list[TensorType]:
    s = _reduced(c, c.dim, c.keepdim)
    return [TensorType(s, c.T), TensorType(s, "int64")]


def _idx_iv(c: iv.Call) -> list[iv.Iv]:
    return [c.x, index_iv(c.types[0])] if len(c.outs) == 2 else [index_iv(c.types[0])]


def _topk_shape(c) -> tuple[int, ...]:
    return tuple(c.k if i == c.dim % c.r else x for i, x in enumerate(c.s))


def _val_idx_k(c) -> list[TensorType]:
    s = _reduced(c, c.dim, c.keepdim)
    return [TensorType(s, c.T), TensorType(s, "int64")]


SPECS = [
    red("sum", _sum_out, {"dim": _dims, "keepdim": BOOL, "dtype": _dtype_choice},
        lambda a, k: f"torch.sum({a[0]}, {_dim_kw(k)}keepdim={bool(k['keepdim'])}{_dt_kw(k)})" if k.get("dim")
        is not None else f"torch.sum({a[0]}{_dt_kw(k)})", (*NUMERIC, "bool"), _sum_iv),
    red("mean", lambda c: [TensorType(_reduced(c, c.dim, c.keepdim, True), c.dtype or c.T)],
        {"dim": _dims, "keepdim": BOOL, "dtype": lambda c: Maybe(Choice(("float32", "float64")), 0.6)},
        lambda a, k: f"torch.mean({a[0]}, {_dim_kw(k)}keepdim={bool(k['keepdim'])}{_dt_kw(k)})" if k.get("dim")
        is not None else f"torch.mean({a[0]}{_dt_kw(k)})", FLOATS, hull_iv(0)),
    red("prod", lambda c: [TensorType(_reduced(c, c.dim, c.keepdim, True),
                                      c.dtype or (c.T if is_float(c.T) else "int64"))],
        {"dim": lambda c: Maybe(_one_dim(c), 0.3) if c.r else Choice((None,)), "keepdim": BOOL,
         "dtype": _dtype_choice},
        lambda a, k: f"torch.prod({a[0]}, {k['dim']}, keepdim={bool(k['keepdim'])}{_dt_kw(k)})"
        if k.get("dim") is not None else f"torch.prod({a[0]}{_dt_kw(k)})",
        (*FLOATS, "int32", "int64"), lambda c: [iv.widen((-(1.5 ** 64), 1.5 ** 64), c.n, 8)] if iv.amax(c.x) > 1
        else [iv.widen((-1.0, 1.0), c.n, 8, absolute=1)], bound=1.2),
    *(red(name, lambda c: [TensorType(_reduced(c, c.dim, c.keepdim, True), c.T)], {"dim": _dims, "keepdim": BOOL},
          (lambda a, k, name=name: f"torch.{name}({a[0]}, {_dim_kw(k)}keepdim={bool(k['keepdim'])})" if k.get("dim")
           is not None else f"torch.{name}({a[0]})"), NUMERIC, same_iv, 1e4) for name in ("amax", "amin")),
    *(red(name, _val_idx, {"dim": _one_dim, "keepdim": BOOL},
          lambda a, k, name=name: f"torch.{name}({a[0]}, {k['dim']}, keepdim={bool(k['keepdim'])})",
          NUMERIC, _idx_iv, 1e4, ties=(1,)) for name in ("max", "min")),
    *(red(name, lambda c: [TensorType(_reduced(c, c.dim, c.keepdim), "int64")], {"dim": _one_dim, "keepdim": BOOL},
          lambda a, k, name=name: f"torch.{name}({a[0]}, {k['dim']}, keepdim={bool(k['keepdim'])})",
          NUMERIC, _idx_iv, 1e4, ties=(0,), grad=False) for name in ("argmax", "argmin")),
    *(red(name, lambda c: [TensorType(_reduced(c, c.dim, c.keepdim), c.T)],
          {"dim": _dims, "correction": lambda c: Choice((0, 1)) if _reduced_count(c) > 1 else Choice((0,)),
           "keepdim": BOOL},
          lambda a, k, name=name: f"torch.{name}({a[0]}, {k.get('dim')!r}, correction={k['correction']}, "
                                  f"keepdim={bool(k['keepdim'])})",
          ("float32", "float16", "bfloat16"), lambda c: [iv.widen((0.0, 4 * iv.amax(c.x) ** 2 + 1), c.n, 8)], 16.0)
      for name in ("var", "std")),
    red("norm", lambda c: [TensorType(_reduced(c, c.dim, c.keepdim), c.T)],
        {"dim": _dims, "p": Choice((1, 2, 3, float("inf"))), "keepdim": BOOL},
        lambda a, k: f"torch.norm({a[0]}, p={k['p']!r}, dim={k.get('dim')!r}, keepdim={bool(k['keepdim'])})"
        .replace("inf", "float('inf')"),
        FLOATS, lambda c: [iv.widen((0.0, _count(c) * iv.amax(c.x) + 1), c.n, 8)], 16.0),
    TorchOpSpec("logsumexp", "reduce", [In("x", T="T", rank=(1, 5))],
                lambda c: [TensorType(_reduced(c, [c.dim], c.keepdim), c.T)], attrs={"dim": _one_dim, "keepdim": BOOL},
                types={"T": FLOATS}, vdomain=small_domain(16.0),
                emit=lambda a, k: f"torch.logsumexp({a[0]}, {k['dim']}, keepdim={bool(k['keepdim'])})",
                transfer=lambda c: [iv.widen((c.x[0] - 1, c.x[1] + math.log(max(2.0, _count(c))) + 1), c.n, 8)]),
    # uint8 in, uint8 out (torch.all/any's documented exception)
    *(red(name, lambda c: [TensorType(_reduced(c, c.dim, c.keepdim, True), "uint8" if c.T == "uint8" else "bool")],
          {"dim": lambda c: Maybe(_one_dim(c), 0.3), "keepdim": BOOL},
          lambda a, k, name=name: f"torch.{name}({a[0]}, {k['dim']}, keepdim={bool(k['keepdim'])})" if k.get("dim")
          is not None else f"torch.{name}({a[0]})", ALL, bool_iv, 1e4, grad=False) for name in ("all", "any")),
    red("count_nonzero", lambda c: [TensorType(_reduced(c, c.dim, False), "int64")], {"dim": _dims},
        lambda a, k: f"torch.count_nonzero({a[0]}, {k.get('dim')!r})", ALL,
        lambda c: [(0.0, float(max(1, c.types[0].numel)))], 1e4, grad=False),
    TorchOpSpec("cumsum", "reduce", [In("x", T="T", rank=(0, 5))],
                lambda c: [TensorType(c.s, c.dtype or (c.T if is_float(c.T) else "int64"))],
                attrs={"dim": _one_dim, "dtype": _dtype_choice}, types={"T": (*NUMERIC, "bool")},
                transfer=lambda c: [iv.widen((-1, 1), c.n, 8,
                                             absolute=max(c.types[0].shape, default=1) * iv.amax(c.x) + 1)],
                vdomain=small_domain(8.0),
                emit=lambda a, k: f"torch.cumsum({a[0]}, {k['dim']}{_dt_kw(k)})"),
    TorchOpSpec("cumprod", "reduce", [In("x", T="T", rank=(0, 5))], lambda c: [c.x],
                attrs={"dim": _one_dim}, types={"T": FLOATS},
                transfer=lambda c: [iv.widen((-1.3 ** 5, 1.3 ** 5), c.n, 8, absolute=1)],
                vdomain=small_domain(1.25), emit=lambda a, k: f"torch.cumprod({a[0]}, {k['dim']})"),
    TorchOpSpec("cummax", "reduce", [In("x", T="T", rank=(0, 5))], lambda c: [c.x, TensorType(c.s, "int64")],
                attrs={"dim": _one_dim}, types={"T": NUMERIC}, ties=(1,),
                transfer=_idx_iv, vdomain=small_domain(1e4), emit=lambda a, k: f"torch.cummax({a[0]}, {k['dim']})"),
    TorchOpSpec("logcumsumexp", "reduce", [In("x", T="T", rank=(0, 5))], lambda c: [c.x],
                attrs={"dim": _one_dim}, types={"T": ("float32",)},
                transfer=lambda c: [iv.widen((c.x[0] - 1, c.x[1] + 3), c.n, 8)], vdomain=small_domain(16.0),
                emit=lambda a, k: f"torch.logcumsumexp({a[0]}, {k['dim']})"),
    TorchOpSpec("sort", "reduce", [In("x", T="T", rank=(1, 5))], lambda c: [c.x, TensorType(c.s, "int64")],
                attrs={"dim": lambda c: Int(-c.r, c.r - 1), "descending": BOOL, "stable": BOOL},
                types={"T": NUMERIC}, ties=(1,), transfer=_idx_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.sort({a[0]}, dim={k['dim']}, descending={bool(k['descending'])}, "
                                  f"stable={bool(k['stable'])})"),
    TorchOpSpec("argsort", "reduce", [In("x", T="T", rank=(1, 5))], lambda c: [TensorType(c.s, "int64")],
                attrs={"dim": lambda c: Int(-c.r, c.r - 1), "descending": BOOL},
                types={"T": NUMERIC}, ties=(0,), transfer=_idx_iv, vdomain=small_domain(1e4), grad=False,
                emit=lambda a, k: f"torch.argsort({a[0]}, dim={k['dim']}, descending={bool(k['descending'])})"),
    TorchOpSpec("topk", "reduce", [In("x", T="T", rank=(1, 5))],
                lambda c: [TensorType(_topk_shape(c), c.T), TensorType(_topk_shape(c), "int64")],
                attrs={"dim": lambda c: Int(-c.r, c.r - 1), "k": lambda c: Int(1, c.s[c.dim]), "largest": BOOL},
                types={"T": NUMERIC}, ties=(1,), transfer=_idx_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.topk({a[0]}, {k['k']}, dim={k['dim']}, largest={bool(k['largest'])})"),
    TorchOpSpec("kthvalue", "reduce", [In("x", T="T", rank=(1, 5))], _val_idx_k,
                attrs={"dim": lambda c: Int(-c.r, c.r - 1), "k": lambda c: Int(1, c.s[c.dim]), "keepdim": BOOL},
                types={"T": ("float32", "int32", "int64")}, ties=(1,), transfer=_idx_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.kthvalue({a[0]}, {k['k']}, {k['dim']}, keepdim={bool(k['keepdim'])})"),
]

# reductions of empty tensors that eager defines and keep finite (not amax/amin/max/min/argmax/argmin: eager
# refuses a dim of length 0; not mean/var/std/logsumexp: NaN or -inf; not norm: inf-norm refused)
EMPTY_OK = frozenset(f"torch.{n}" for n in (
    "sum", "prod", "all", "any", "count_nonzero", "cumsum", "cummax", "logcumsumexp", "sort", "argsort", "topk",
    "kthvalue"))
for _s in SPECS:
    _s.empty = _s.op in EMPTY_OK
