"""Neural-network operators: Gemm, MatMul, PRelu, the softmax family, Resize, Dropout, Einsum, LRN, GridSample,
AffineGrid, Attention.

``ort(c)`` (``--target ort``) narrows Resize, LRN, Einsum and GridSample to what ONNX Runtime's CPU kernels implement;
each narrowing is marked ``ORT:`` below.  With it off, the domains cover the ONNX operator.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.dsl import (
    BOOL,
    AnyOf,
    Broadcast,
    Choice,
    Const,
    Dims,
    Dom,
    Float,
    In,
    Int,
    Maybe,
    OneOf,
    OpSpec,
    Seq,
    ShapeDom,
    axis_dom,
    broadcast_shapes,
    divisors,
    i64,
)


def ort(c) -> bool:
    """Whether to narrow to what ONNX Runtime's CPU kernels implement (``--target ort``)."""
    return c.cfg.target == "ort"


# ---------------------------------------------------------------------------------------------
# Local DSL helpers
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Drawn(Dom):
    """A domain given by a sampler whose every draw is valid by construction, and a membership test."""

    draw: Callable[[random.Random], Any]
    test: Callable[[Any], bool] = lambda v: True
    n: int = 8

    def sample(self, rng: random.Random) -> Any:
        return self.draw(rng)

    def __contains__(self, v: Any) -> bool:
        return self.test(v)

    def size(self) -> int:
        return self.n


class Where(ShapeDom):
    """Shapes of the listed ranks that satisfy ``ok``; new shapes come from ``draw``."""

    def __init__(self, ranks: Sequence[int], ok: Callable[[tuple[int, ...]], bool],
                 draw: Callable[[random.Random], tuple[int, ...]]) -> None:
        self.ranks = tuple(ranks)
        self.ok, self.draw = ok, draw

    def accepts(self, shape: tuple[int, ...]) -> bool:
        return len(shape) in self.ranks and self.ok(shape)

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        return self.draw(rng)


def _axes_list(rank: int, universe: Sequence[int], lo: int = 1, negative: bool = True) -> Drawn:
    """Distinct axes from ``universe`` in any order, each written as d or (if ``negative``) d - rank."""
    def draw(rng: random.Random) -> list[int]:
        axes = rng.sample(list(universe), rng.randint(lo, len(universe)))
        return [a - rank if negative and rng.random() < 0.4 else a for a in axes]
    return Drawn(draw, lambda v: _distinct_axes(v, rank), n=2 ** len(universe))


def _distinct_axes(axes: Sequence[int], rank: int) -> bool:
    return all(-rank <= a < rank for a in axes) and len({a % rank for a in axes}) == len(axes)


def _prod(xs) -> int:
    return math.prod(xs)


def same(c) -> list[TensorType]:
    return [c.x]


def _uni(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    """``shape`` broadcasts unidirectionally to ``to``."""
    return len(shape) <= len(to) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(to), strict=False))


def _bidi(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b), strict=False))


# ---------------------------------------------------------------------------------------------
# Gemm, MatMul, PRelu
# ---------------------------------------------------------------------------------------------
def _mk(c) -> tuple[int, int]:
    """(M, K) of Gemm's A after the optional transposition."""
    return (c.s[1], c.s[0]) if c.transA else c.s


def _gemm_b(c):
    m, k = _mk(c)
    kax = 1 if c.transB else 0
    cap = c.cfg.max_numel

    def draw(rng):
        n = rng.randint(1, max(1, min(c.cfg.max_dim, cap // m)))
        return (n, k) if c.transB else (k, n)
    return Where((2,), lambda b: b[kax] == k and m * b[1 - kax] <= cap, draw)


def _gemm_n(c) -> int:
    return c.ins[1].shape[0 if c.transB else 1]


def _mm_out(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy.matmul's result shape (1-D operands promoted, then the added dimension removed)."""
    a2 = a if len(a) >= 2 else (1, *a)
    b2 = b if len(b) >= 2 else (*b, 1)
    return (broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2:-1] if len(a) >= 2 else ())
            + (b2[-1:] if len(b) >= 2 else ()))


def _matmul_b(c):
    """B: (K,) or (..., K, N) whose batch dims broadcast with A's, within the element budget."""
    a, cfg = c.s, c.cfg
    k, m, batch = a[-1], (a[-2] if c.r >= 2 else 1), a[:-2]

    def ok(b):
        if len(b) == 1:
            return b[0] == k
        return b[-2] == k and _bidi(batch, b[:-2]) and _prod(_mm_out(a, b)) <= cfg.max_numel

    def draw(rng):
        if rng.random() < 0.2:
            return (k,)
        n = rng.randint(1, max(1, min(cfg.max_dim, cfg.max_numel // (_prod(batch) * m))))
        bb = Broadcast(batch, cfg.max_rank - 2, cfg.max_dim, cfg.max_numel // (m * n)).sample(rng)
        return (*bb, k, n)
    return Where(range(1, cfg.max_rank + 1), ok, draw)


def _k_of_b(b: tuple[int, ...]) -> int:
    return b[0] if len(b) == 1 else b[-2]


# ---------------------------------------------------------------------------------------------
# Softmax family, LRN, Dropout
# ---------------------------------------------------------------------------------------------
def softmax(op: str) -> OpSpec:
    return OpSpec(op, "nn", [In("input", rank=(1, 99))], same,
                  attrs={"axis": lambda c: Maybe(axis_dom(c.r))},  # omitted: -1 since opset 13
                  checks={"axis in [-r, r-1]": lambda c: c.axis is None or -c.r <= c.axis < c.r},
                  since=13)


def _dropout_ratio(c):
    return None if c._ratio is None else np.array(c._ratio, dtype=c._rtype)


def _dropout_out(c) -> list[TensorType]:
    return [c.x, TensorType(c.s, "bool")] if c._mask else [c.x]


# ---------------------------------------------------------------------------------------------
# Einsum
# ---------------------------------------------------------------------------------------------
_LOWER = "abcdefghijklmnopqrstuvwxyz"


def _einsum_plan(c, rng: random.Random) -> tuple[str, tuple[int, ...] | None, tuple[int, ...]]:
    """(equation, shape of the second operand or None, output shape), consistent with the first operand.

    The first operand gets letters (equal dims may repeat one: a diagonal) and perhaps an ellipsis
    over a contiguous block; a second operand shares some letters (contraction, batch, elementwise),
    adds new ones (outer product) and may repeat the ellipsis with the same rank, its dims equal or
    1 (broadcast).  The output is explicit (a subset of letters in any order, sum over the rest) or
    implicit (letters used once, sorted).  New dims take the element budget left by the first operand.
    """
    s, r, cfg = c.s, c.r, c.cfg
    budget = cfg.max_numel // max(1, _prod(s))
    explicit = rng.random() < 0.7
    # ORT: implicit-mode equations with upper-case letters fail ("only subscript labels allowed ...")
    letters = list(_LOWER + (_LOWER.upper() if explicit or not ort(c) else ""))
    rng.shuffle(letters)
    dim: dict[str, int] = {}

    def new_letter(d: int) -> str:
        x = letters.pop()
        dim[x] = d
        return x

    ell = (0, 0)
    if r and rng.random() < 0.3:
        i = rng.randint(0, r)
        ell = (i, rng.randint(i, r))
    ell_a = s[ell[0]:ell[1]]
    term_a: list[str] = []
    for p in range(r):
        if p == ell[0] and ell[1] > ell[0]:
            term_a.append("...")
        if ell[0] <= p < ell[1]:
            continue
        twins = [x for x in dict.fromkeys(term_a) if x != "..." and dim[x] == s[p]]
        term_a.append(rng.choice(twins) if twins and rng.random() < 0.2 else new_letter(s[p]))
    if r and ell[0] == ell[1] and rng.random() < 0.3:  # an ellipsis standing for no dimension
        term_a.insert(ell[0], "...")
    has_ell = "..." in term_a
    terms = [term_a]
    b_shape = None
    ell_out = ell_a
    if c._has_B:
        term_b, b_shape_l = [], []
        if has_ell and rng.random() < 0.7:  # ONNX shape inference wants equal ellipsis ranks
            ell_b = []
            for d in ell_a:
                if d == 1:
                    e = rng.randint(1, max(1, min(cfg.max_dim, budget)))
                    budget //= e
                else:
                    e = d if rng.random() < 0.7 else 1
                ell_b.append(e)
            term_b.append("...")
            b_shape_l.extend(ell_b)
            ell_out = broadcast_shapes(ell_a, tuple(ell_b))
        shared = [x for x in dict.fromkeys(term_a) if x != "..."]
        rng.shuffle(shared)
        nb = rng.randint(0 if term_b else 1, cfg.max_rank - len(b_shape_l))
        lets: list[str] = []
        for _ in range(nb):
            if shared and rng.random() < 0.6:
                lets.append(shared.pop())
            else:
                d = rng.randint(1, max(1, min(cfg.max_dim, budget)))
                budget //= d
                lets.append(new_letter(d))
        if term_b:  # the ellipsis goes anywhere among B's letters
            pos = rng.randint(0, len(lets))
            term_b = [*lets[:pos], "...", *lets[pos:]]
            b_shape_l = [dim[x] for x in lets[:pos]] + b_shape_l + [dim[x] for x in lets[pos:]]
        else:
            term_b, b_shape_l = lets, [dim[x] for x in lets]
        terms.append(term_b)
        b_shape = tuple(b_shape_l)
    used = [x for t in terms for x in t if x != "..."]
    if explicit:
        out = [x for x in dict.fromkeys(used) if rng.random() < 0.6]
        rng.shuffle(out)
        if has_ell:
            out.insert(rng.randint(0, len(out)), "...")
        tail = "->" + "".join(out)
    else:
        out = (["..."] if has_ell else []) + sorted(x for x in set(used) if used.count(x) == 1)
        tail = ""
    shape: list[int] = []
    for x in out:
        shape.extend(ell_out if x == "..." else (dim[x],))
    return ",".join("".join(t) for t in terms) + tail, b_shape, tuple(shape)


def _einsum_ok(eq: str, shapes: Sequence[tuple[int, ...]]) -> bool:
    """One term per input, letters a-zA-Z, each term's letters and ellipsis matching its rank, a
    letter's dims equal everywhere, ellipses of one rank and broadcastable, output letters distinct
    and used by an input, and the ellipsis kept in an explicit output."""
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        return False
    dims: dict[str, int] = {}
    ell: tuple[int, ...] | None = None
    for t, s in zip(terms, shapes, strict=True):
        letters = t.replace("...", "", 1)
        k = len(s) - len(letters)
        if not set(letters) <= set(_LOWER + _LOWER.upper()) or k < 0 or (k and "..." not in t):
            return False
        if "..." in t:
            i = t.index("...")
            e = s[i:i + k]
            if ell is not None and (len(ell) != k or not _bidi(ell, e)):
                return False
            ell = e if ell is None else broadcast_shapes(ell, e)
            s = s[:i] + s[i + k:]
        if any(dims.setdefault(x, d) != d for x, d in zip(letters, s, strict=True)):
            return False
    out = rhs.replace("...", "", 1)
    return not arrow or (len(set(out)) == len(out) and set(out) <= set(dims)
                         and ("..." in rhs or not ell) and ("..." not in rhs or ell is not None))


# ---------------------------------------------------------------------------------------------
# Resize (opset 13+ form: roi, scales, sizes inputs; opset 18 adds axes, antialias, keep_aspect_ratio_policy)
# ---------------------------------------------------------------------------------------------
_SCALES = (0.25, 0.4, 0.5, 0.6, 0.75, 0.8, 1.0, 1.2, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0)
_F32 = np.float32


def _scaled(n: int, scale: float) -> int:
    """floor(scale * n) in float32, as ONNX shape inference and ORT compute it."""
    return int(_F32(scale) * _F32(n))


def _rounded(n: int, scale: np.float32) -> int:
    """roundf(scale * n) in float32 (half away from zero), for keep_aspect_ratio_policy."""
    return math.floor(float(scale * _F32(n)) + 0.5)


def _rmode(c) -> str:
    return c.mode or "nearest"


def _resize_modes(c) -> list[str]:
    if not ort(c):
        return ["nearest", "linear", "cubic"]
    modes = ["nearest"]
    if c.r >= 2:  # ORT: linear only on 2-D to 5-D inputs (bilinear / trilinear)
        modes.append("linear")
    # ORT: cubic only on 2-D or 4-D inputs; its integer kernels need antialias (opset 18+)
    if c.r in (2, 4) and (c.x.dtype.startswith("float") or c.cfg.opset >= 18):
        modes.append("cubic")
    return modes


def _fixed_axes(c) -> tuple[int, ...]:
    """ORT: axes whose scale must be 1 (linear and cubic resize only the inner 2 or 3 axes)."""
    if not ort(c) or _rmode(c) == "nearest" or c.r <= 2 or (c.r == 3 and _rmode(c) == "linear"):
        return ()
    if c.r == 5:
        return (0, 1)
    return (0, 1) if c._layout == "nchw" else (0, 3)


def _growing_axes(c) -> tuple[int, ...]:
    """ORT: cubic on NHWC without antialias needs scales >= 1 on H and W."""
    if ort(c) and _rmode(c) == "cubic" and c._layout == "nhwc" and not c.antialias:
        return (1, 2)
    return ()


def _listed(c) -> list[int]:
    """The axes that roi / scales / sizes refer to, normalized."""
    return [a % c.r for a in c.axes] if c.axes else list(range(c.r))


def _policy(c) -> str:
    return c.keep_aspect_ratio_policy or "stretch"


def _antialias(c):
    if c.cfg.opset < 18:
        return Choice((None,))
    if not ort(c):
        return Maybe(BOOL)
    if _rmode(c) == "nearest":  # ORT: antialias=1 only for linear and cubic
        return Maybe(Choice((0,)))
    if _rmode(c) == "cubic" and not c.x.dtype.startswith("float"):
        return Choice((1,))
    return Maybe(BOOL)


def _axes(c):
    if c.cfg.opset < 18:
        return Choice((None,))
    fixed = _fixed_axes(c)
    # ORT: under a keep_aspect_ratio_policy, negative axes are not normalized (they resize nothing)
    neg = not ort(c) or _policy(c) == "stretch"
    if _policy(c) != "stretch" and fixed:
        # a policy gives every listed axis one common scale: keep the ORT-fixed axes unlisted
        return _axes_list(c.r, [a for a in range(c.r) if a not in fixed], negative=neg)
    return Maybe(_axes_list(c.r, range(c.r), negative=neg), 0.5)


def _pick_scale(rng: random.Random, n: int, lo: int, hi: int) -> float:
    """A scale whose float32 output length floor(scale * n) lies in [lo, hi] (1.0 always does)."""
    def ok(v: float) -> bool:
        return lo <= _scaled(n, v) <= hi
    if rng.random() < 0.3:
        v = round(rng.uniform(0.1, 3.0), 3)
        if ok(v):
            return v
    return rng.choice([v for v in _SCALES if ok(v)])


def _resize_values(c, rng: random.Random) -> list:
    """scales or sizes for the listed axes: each output length keeps the element budget, the
    ORT-fixed axes keep scale 1, and under a policy the common scale comes from one binding axis."""
    s, cap, listed = c.s, c.cfg.max_numel, _listed(c)
    fixed, grow = _fixed_axes(c), _growing_axes(c)
    out = list(s)
    if c._by == "scales" or _policy(c) == "stretch":
        vals: list = []
        for d in listed:
            hi = min(cap // (_prod(out) // out[d]), 3 * s[d] + 2)
            lo = s[d] if d in grow else 1
            if c._by == "scales":
                v = 1.0 if d in fixed else _pick_scale(rng, s[d], lo, hi)
                out[d] = _scaled(s[d], v)
            else:
                v = s[d] if d in fixed else rng.randint(lo, hi)
                out[d] = v
            vals.append(v)
        return vals
    # not_larger: scale = min(sizes / in); not_smaller: scale = max(sizes / in); out = roundf(scale * in)
    k = rng.randrange(len(listed))
    dk = listed[k]
    smaller = _policy(c) == "not_smaller"

    def fits(sk: int) -> bool:
        sc = _F32(sk) / _F32(s[dk])
        if any(d in fixed for d in listed) and sk != s[dk]:
            return False
        if any(d in grow for d in listed) and sc < 1:
            return False
        if smaller and any(_F32(1) / _F32(s[d]) > sc for d in listed):
            return False
        o = [_rounded(s[d], sc) if d in listed else s[d] for d in range(c.r)]
        return min(o) >= 1 and _prod(o) <= cap
    sk = rng.choice([v for v in range(1, 3 * s[dk] + 3) if fits(v)])
    sc = _F32(sk) / _F32(s[dk])
    vals = []
    for i, d in enumerate(listed):
        if i == k:
            vals.append(sk)
            continue
        est = math.ceil(float(sc) * s[d])
        if smaller:  # not binding: ratio <= sc
            cands = [v for v in range(1, est + 1) if _F32(v) / _F32(s[d]) <= sc]
        else:  # not binding: ratio >= sc
            cands = [v for v in range(max(1, est - 1), est + 4) if _F32(v) / _F32(s[d]) >= sc]
        vals.append(rng.choice(cands))
    return vals


def _resize_out(c) -> list[TensorType]:
    s, listed = c.s, _listed(c)
    out = list(s)
    if c._by == "scales":
        for d, v in zip(listed, c._vals, strict=True):
            out[d] = _scaled(s[d], v)
    elif _policy(c) == "stretch":
        for d, v in zip(listed, c._vals, strict=True):
            out[d] = v
    else:
        ratios = [_F32(v) / _F32(s[d]) for d, v in zip(listed, c._vals, strict=True)]
        sc = max(ratios) if _policy(c) == "not_smaller" else min(ratios)
        for d in listed:
            out[d] = _rounded(s[d], sc)
    return [TensorType(tuple(out), c.x.dtype)]


def _roi(c):
    if c.coordinate_transformation_mode != "tf_crop_and_resize":
        return None
    n = len(_listed(c))
    starts = [round(c.rng.uniform(-0.25, 0.75), 3) for _ in range(n)]
    ends = [round(c.rng.uniform(0.25, 1.25), 3) for _ in range(n)]
    # ORT: roi must be float32 (ONNX also allows float16 and double)
    dtype = "float32" if ort(c) else c.rng.choice(("float16", "float32", "float64"))
    return np.array(starts + ends, dtype=dtype)


_CT_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _only(c, modes: Sequence[str], dom: Dom) -> Dom:
    """An attribute that only matters in some modes: usually omitted elsewhere (still valid)."""
    return Maybe(dom, 0.25 if _rmode(c) in modes else 0.85)


def _resize_checks() -> dict[str, Callable]:
    return {
        "exactly one of scales and sizes": lambda c: (c.ins[2] is None) != (c.ins[3] is None),
        "scales > 0": lambda c: c._by != "scales" or all(v > 0 for v in c._vals),
        "sizes > 0": lambda c: c._by != "sizes" or all(v > 0 for v in c._vals),
        "len(scales or sizes) == len(axes) or rank":
            lambda c: (c.ins[2] or c.ins[3]).shape == (len(_listed(c)),),
        "axes distinct in [-r, r-1]": lambda c: c.axes is None or _distinct_axes(c.axes, c.r),
        "keep_aspect_ratio_policy only with sizes": lambda c: c._by == "sizes" or _policy(c) == "stretch",
        "roi has 2 * len(axes) entries": lambda c: c.ins[1] is None or c.ins[1].shape == (2 * len(_listed(c)),),
    }


# ---------------------------------------------------------------------------------------------
# GridSample (opset 16: 4-D, bilinear/nearest/bicubic; opset 20: N-D, linear/nearest/cubic)
# ---------------------------------------------------------------------------------------------
def _gs_ranks(c) -> tuple[int, int]:
    if c.cfg.opset < 20:
        return (4, 4)
    return (4, 5) if ort(c) else (3, 99)  # ORT: 4-D or 5-D only


def _gs_modes(c) -> Dom:
    linear, nearest, cubic = ("bilinear", "nearest", "bicubic") if c.cfg.opset < 20 else ("linear", "nearest", "cubic")
    # ORT: cubic only on 4-D inputs
    return Maybe(Choice((linear, nearest, cubic) if c.r == 4 or not ort(c) else (linear, nearest)))


def _gs_grid(c) -> Dims:
    """(N, *output spatial dims, spatial rank): the output (N, C, *spatial) within the element budget."""
    k = c.r - 2
    budget = max(1, c.cfg.max_numel // (c.s[0] * c.s[1]))
    side = max(1, min(c.cfg.max_dim, int(budget ** (1 / k) + 1e-9)))
    return Dims([c.s[0], *([Int(1, side)] * k), k])


# ---------------------------------------------------------------------------------------------
SPECS: list[OpSpec] = [
    OpSpec("Gemm", "nn",
           [In("A", rank=(2, 2)), In("B", shape=_gemm_b, weight=True),
            In("C", shape=lambda c: c.bcast((_mk(c)[0], _gemm_n(c)), uni=True), optional=True)],
           lambda c: [TensorType((_mk(c)[0], _gemm_n(c)), c.T)],
           attrs={"transA": Maybe(BOOL), "transB": Maybe(BOOL),
                  "alpha": Maybe(Float(-2.0, 2.0)), "beta": Maybe(Float(-2.0, 2.0))},
           checks={"inner dimensions match": lambda c: c.ins[1].shape[1 if c.transB else 0] == _mk(c)[1],
                   "C unidirectionally broadcastable to (M, N)":
                       lambda c: c.ins[2] is None or _uni(c.ins[2].shape, (_mk(c)[0], _gemm_n(c)))},
           since=13),
    OpSpec("MatMul", "nn", [In("A", rank=(1, 99)), In("B", shape=_matmul_b)],
           lambda c: [TensorType(_mm_out(c.s, c.ins[1].shape), c.T)],
           checks={"inner dimensions match": lambda c: _k_of_b(c.ins[1].shape) == c.s[-1],
                   "batch dimensions broadcast": lambda c: _bidi(c.s[:-2], c.ins[1].shape[:-2])},
           since=13),
    OpSpec("PRelu", "nn", [In("X", rank=(0, 99)), In("slope", shape=lambda c: c.bcast(c.s, uni=True), weight=True)],
           same,
           checks={"slope unidirectionally broadcastable to X": lambda c: _uni(c.ins[1].shape, c.s)},
           since=16),
    softmax("Softmax"),
    softmax("LogSoftmax"),
    softmax("Hardmax"),
    OpSpec("Resize", "nn",
           [In("X", rank=(1, 99), room=4), Const("roi", _roi),
            Const("scales", lambda c: np.array(c._vals, dtype=np.float32) if c._by == "scales" else None),
            Const("sizes", lambda c: i64(c._vals) if c._by == "sizes" else None)],
           _resize_out,
           attrs={
               "mode": lambda c: Maybe(Choice(_resize_modes(c)), 0.2),
               # ORT: 4-D linear / cubic resize N, C fixed (NCHW) or N, C last fixed (NHWC)
               "_layout": lambda c: Choice(("nchw", "nhwc") if c.r == 4 and _rmode(c) != "nearest" else (None,)),
               "antialias": _antialias,
               "coordinate_transformation_mode": lambda c: Maybe(Choice(
                   _CT_MODES + (("half_pixel_symmetric",) if c.cfg.opset >= 19 else ()))),
               "nearest_mode": lambda c: _only(c, ("nearest",), Choice(_NEAREST_MODES)),
               "cubic_coeff_a": lambda c: _only(c, ("cubic",), Float(-1.0, -0.25)),
               # ORT: exclude_outside=1 only for cubic, or linear with antialias
               "exclude_outside": lambda c: Maybe(
                   BOOL if not ort(c) or _rmode(c) == "cubic" or (_rmode(c) == "linear" and c.antialias)
                   else Choice((0,))),
               "extrapolation_value": lambda c: Maybe(
                   Float(-2.0, 2.0), 0.25 if c.coordinate_transformation_mode == "tf_crop_and_resize" else 0.85),
               "_by": Choice(("scales", "sizes")),
               "keep_aspect_ratio_policy": lambda c: Choice((None,)) if c.cfg.opset < 18 else Maybe(Choice(
                   ("stretch", "not_larger", "not_smaller") if c._by == "sizes" else ("stretch",)), 0.4),
               "axes": _axes,
               "_vals": lambda c: Drawn(lambda rng: _resize_values(c, rng)),
           },
           checks=_resize_checks(),
           since=13),
    OpSpec("Dropout", "nn",
           [In("data", rank=(0, 99)), Const("ratio", _dropout_ratio),
            Const("training_mode", lambda c: None if c._train is None else np.array(False))],
           _dropout_out,
           attrs={"seed": Maybe(Int(0, 2 ** 31 - 1), 0.6),
                  "_ratio": Maybe(Float(0.0, 0.95), 0.3),
                  # ORT: ratio must be float or double (ONNX also allows float16 and bfloat16)
                  "_rtype": lambda c: Choice(("float32", "float64") if ort(c) else ("float16", "float32", "float64")),
                  "_train": Maybe(Choice((0,)), 0.5),  # inference only: training_mode false or omitted
                  "_mask": BOOL},
           checks={"ratio in [0, 1)": lambda c: c._ratio is None or 0.0 <= c._ratio < 1.0,
                   "ratio is a scalar": lambda c: c.ins[1] is None or c.ins[1].shape == ()},
           since=13),
    OpSpec("Einsum", "nn", [In("Inputs", rank=(0, 99)), In("B", shape=lambda c: c._plan[1], optional=True)],
           lambda c: [TensorType(c._plan[2], c.T)],
           attrs={"_has_B": BOOL,
                  "_plan": lambda c: Drawn(lambda rng: _einsum_plan(c, rng)),
                  "equation": lambda c: Choice((c._plan[0],))},
           checks={"equation agrees with the input shapes":
                       lambda c: _einsum_ok(c.equation, [t.shape for t in c.ins if t is not None])},
           since=12),
    OpSpec("LRN", "nn", [In("X", rank=lambda c: (4, 4) if ort(c) else (2, 99))],  # ORT: 4-D only
           same,
           # ORT: odd sizes only (ONNX sums over [c - floor((size-1)/2), c + ceil((size-1)/2)])
           attrs={"size": lambda c: Choice(range(1, 10, 2) if ort(c) else range(1, 10)),
                  "alpha": lambda c: Maybe(Float(0.001 if ort(c) else 0.0, 1.0)),  # ORT: alpha > 0
                  "beta": Maybe(Float(0.25, 1.5)), "bias": Maybe(Float(0.5, 3.0))},
           checks={"size >= 1": lambda c: c.size >= 1},
           since=13),
    # grid values lie in [-1, 1] (solve/intervals.py's domain; outside, padding_mode applies)
    OpSpec("GridSample", "nn", [In("X", rank=_gs_ranks), In("grid", shape=_gs_grid)],
           lambda c: [TensorType(c.s[:2] + c.ins[1].shape[1:-1], c.x.dtype)],
           attrs={"mode": _gs_modes,
                  "padding_mode": Maybe(Choice(("zeros", "border", "reflection"))),
                  "align_corners": Maybe(BOOL)},
           checks={"grid is (N, *spatial out, spatial rank)": lambda c: c.ins[1].shape[0] == c.s[0]
                   and c.ins[1].rank == c.r and c.ins[1].shape[-1] == c.r - 2,
                   "4-D before opset 20": lambda c: c.cfg.opset >= 20 or c.r == 4},
           since=16),
]


# ---------------------------------------------------------------------------------------------
# AffineGrid (opset 20): theta (N, 2, 3) or (N, 3, 4), size (N, C, H, W) or (N, C, D, H, W)
# ---------------------------------------------------------------------------------------------
def _theta(c) -> AnyOf:
    n = Int(1, c.cfg.max_dim)
    return AnyOf((Dims((n, 2, 3)), Dims((n, 3, 4))))


def _grid_dims(c) -> Seq:
    """Spatial output dims: the grid (N, *dims, k) within the element budget.  A length of 1 only
    without align_corners, which spaces n points by 2 / (n - 1) (ORT, torch and the reference each
    place a lone point elsewhere)."""
    k = c.s[1]
    budget = c.cfg.max_numel // (c.s[0] * k)
    lo = 2 if c.align_corners else 1
    return Seq(k, lambda i, prefix: Int(lo, max(lo, min(c.cfg.max_dim, budget // max(1, _prod(prefix))))))


SPECS.append(OpSpec(
    "AffineGrid", "nn",
    [In("theta", shape=_theta), Const("size", lambda c: i64([c.s[0], c._channels, *c._dims]))],
    lambda c: [TensorType((c.s[0], *c._dims, c.s[1]), c.x.dtype)],
    attrs={"align_corners": Maybe(BOOL), "_dims": _grid_dims, "_channels": Int(1, 5)},
    checks={"theta is (N, 2, 3) or (N, 3, 4)": lambda c: c.s[1:] in ((2, 3), (3, 4)),
            "size is (N, C, *spatial) with as many spatial dims as theta's rows": lambda c:
            c.ins[1].shape == (c.s[1] + 2,),
            "align_corners only with spatial lengths >= 2": lambda c: not c.align_corners or min(c._dims) >= 2,
            "output within the element budget": lambda c: c.s[0] * _prod(c._dims) * c.s[1] <= c.cfg.max_numel},
    since=20,
))


# ---------------------------------------------------------------------------------------------
# Attention (opset 23): Q, K, V of rank 4 (B, heads, S, head size) or 3 (B, S, heads * head size)
# ---------------------------------------------------------------------------------------------
def _heads(c) -> tuple[int, int, int]:
    """(B, Sq, q heads) of Q."""
    return (c.s[0], c.s[2], c.s[1]) if c.r == 4 else (c.s[0], c.s[1], c._qh)


def _head_size(c) -> int:
    return c.s[3] if c.r == 4 else c.s[2] // c._qh


def _kv_shape(c, size: int, seq: int) -> tuple[int, ...]:
    b = c.s[0]
    return (b, c._kvh, seq, size) if c.r == 4 else (b, seq, c._kvh * size)


def _total(c) -> int:
    return c._past + c._skv


def _attn_mask(c) -> np.ndarray | None:
    """Broadcastable to (B, q heads, Sq, total) with the full last dimension (the reference pads a
    shorter one where ONNX broadcasts it); bool (True attends: key 0 always does, so that no row is
    fully masked, whose result ONNX redefined in an errata) or additive in Q's type."""
    if c._mask is None:
        return None
    b, sq, hq = _heads(c)
    full = (b, hq, sq, _total(c))
    # ORT: the mask's q dimension is Sq, not a broadcast 1
    keep = [True, True, ort(c), True][4 - c._mask_rank:]
    shape = tuple(d if k or c.rng.random() < 0.6 else 1 for d, k in zip(full[4 - c._mask_rank:], keep, strict=True))
    if c._mask == "bool":
        m = c.np.random(shape) < 0.6
        m[..., 0] = True
    else:
        m = c.np.uniform(-2, 2, size=shape).astype(c.x.dtype)
    c.set("_mask_data", m)
    return m


def _attn_out(c) -> list[TensorType]:
    b, sq, hq = _heads(c)
    d, dv, dt = _head_size(c), c._dv, c.x.dtype
    y = (b, hq, sq, dv) if c.r == 4 else (b, sq, hq * dv)
    return [TensorType(y, dt), TensorType((b, c._kvh, _total(c), d), dt), TensorType((b, c._kvh, _total(c), dv), dt),
            TensorType((b, hq, sq, _total(c)), dt)][:c._nout]


def _attn_budget(c) -> int:
    """Room for the longest output, (B, q heads, Sq, total): kv sequence lengths keep within it."""
    b, sq, hq = _heads(c)
    return max(1, c.cfg.max_numel // (b * hq * max(sq, c._dv)))


def _attn_skv(c) -> Dom:
    """The new keys' length.  With a cache and the causal mask, as long as Q's half of the time:
    ONNX lets query i attend keys j <= i + past, where ORT (for one query) and OpenVINO (always) align
    the last query with the last key instead, which agrees with ONNX only when the lengths match."""
    top = max(1, min(c.cfg.max_dim, _attn_budget(c) - c._past))
    sq = _heads(c)[1]
    if c.is_causal and c._past and sq <= top:
        return OneOf((Choice((sq,)), Int(1, top)))
    return Int(1, top)


def _qk_mode(c):
    """qk_matmul_output_mode, with the fourth output only.  Mode 2 (scores plus the mask) holds -inf
    where a bool mask or the causal mask disallows a key: only with neither."""
    if c._nout < 4:
        return Choice((None,))
    infinite = c._mask == "bool" or bool(c.is_causal)
    return Maybe(Choice((0, 1, 3) if infinite else (0, 1, 2, 3)))


ATTENTION = OpSpec(
    "Attention", "nn",
    [In("Q", T="T1", rank=(3, 4)),
     In("K", T="T1", shape=lambda c: _kv_shape(c, _head_size(c), c._skv)),
     In("V", T="T1", shape=lambda c: _kv_shape(c, c._dv, c._skv)),  # T2: one type with Q in ORT's kernels
     Const("attn_mask", _attn_mask),
     In("past_key", T="T1", shape=lambda c: (c.s[0], c._kvh, c._past, _head_size(c)), optional=True),
     In("past_value", T="T1", shape=lambda c: (c.s[0], c._kvh, c._past, c._dv), optional=True)],
    _attn_out,
    attrs={
        # 3-D: the hidden size splits into q_num_heads heads; kv heads divide the q heads (GQA, MQA)
        "_qh": lambda c: Choice(divisors(c.s[2]) if c.r == 3 else (c.s[1],)),
        "_kvh": lambda c: Choice(divisors(c._qh)),
        "q_num_heads": lambda c: Choice((c._qh,) if c.r == 3 else (None,)),
        "kv_num_heads": lambda c: Choice((c._kvh,) if c.r == 3 else (None,)),
        "_dv": lambda c: Int(1, c.cfg.max_dim),
        "_has_past_key": Choice((0, 1)),
        "_has_past_value": lambda c: Choice((c._has_past_key,)),  # ONNX: both or neither
        "_past": lambda c: Int(1, 3) if c._has_past_key else Choice((0,)),
        "is_causal": Maybe(BOOL),
        "_skv": _attn_skv,
        "_mask": Maybe(Choice(("bool", "float")), 0.5),
        "_mask_rank": Int(2, 4),
        "scale": Maybe(Float(0.05, 1.0)),
        "softcap": Maybe(Choice((0.0, 1.0, 2.5, 5.0))),  # 0: no softcap
        "softmax_precision": Maybe(Choice((1,))),  # float; ORT has no other
        # outputs Y, present_key, present_value, qk_matmul_output as a prefix.  ONNX: past and present
        # states "shall be used together": the presents exactly with a past (ONNX's shape inference types
        # them only then, ORT raises on a past without them, OpenVINO on a present_key alone); so the
        # QK output (after the presents: the DSL writes outputs as a prefix) only with a past too
        "_nout": lambda c: Choice((3, 4) if c._past else (1,)),
        "qk_matmul_output_mode": _qk_mode,
    },
    checks={
        "K, V of Q's rank, batch and head size": lambda c: c.ins[1].shape == _kv_shape(c, _head_size(c), c._skv)
        and c.ins[2].shape == _kv_shape(c, c._dv, c._skv),
        "kv heads divide q heads": lambda c: c._qh % c._kvh == 0,
        "num_heads attributes with 3-D inputs only": lambda c: (c.q_num_heads is not None) == (c.r == 3),
        "past_key and past_value together": lambda c: (c.ins[4] is None) == (c.ins[5] is None),
        "present outputs exactly with a past": lambda c: (c.ins[4] is not None) == (c._nout >= 3),
        "present_key and present_value together": lambda c: c._nout != 2,
        "the mask's last dimension is the total sequence length": lambda c: c.ins[3] is None
        or c.ins[3].shape[-1] == _total(c),
        "a bool mask lets every row attend key 0": lambda c: c._mask != "bool" or bool(np.all(c._mask_data[..., 0])),
        "mode 2 only without -inf in the mask": lambda c: c.qk_matmul_output_mode != 2
        or (c._mask != "bool" and not c.is_causal),
    },
    since=23,
)
SPECS.append(ATTENTION)
