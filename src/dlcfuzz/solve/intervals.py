"""Conservative value intervals, computed while a graph is generated, so that every operator call
only reads tensors whose values keep its output finite and defined.

Two tables, keyed by ONNX operator type:

* ``TRANSFER``: input intervals, node attributes and types -> one interval per output.
* ``DOMAINS``: per input slot, the interval (``Domain``) the input's values must lie in for the
  output to be finite (Acosh >= 1, a divisor away from 0, an exponent that cannot overflow, a
  matrix whose products stay within the type's range ...).  The generator reuses a tensor for a
  slot only if its interval lies in the slot's domain; otherwise it makes a new runtime input
  whose hint confines it to the domain (within the default input range).

An interval ``(lo, hi)`` is a pair of floats in *value* space.  For a float type it means: every
element is a finite number in [lo, hi]; a bound of +-inf means "may be non-finite" (or unknown).
Integer intervals always lie in the type's range (a possible wrap-around gives the whole range);
bool is [0, 1].  Every float slot's domain lies within the finite range (except for the
NaN-safe operators in ``NAN_SAFE``), and the float domains of amplifying operators (Add, Mul,
MatMul, Conv, reductions, Exp, Pow, normalizations ...) are chosen from the intervals of the
inputs drawn before, so that the output's bound stays below the type's largest value.  Under the
assumptions below, a graph built this way has finite values everywhere.

Soundness assumptions (documented caveats, not checked):

* Runtime inputs hold values in ``value_range(type, hint)`` (``dlcfuzz.values.synthesize`` only
  draws there) and initializers/constants, and pinned runtime inputs (fed their own data), are
  what the graph stores.
* Float results are within a few ulps (``8 * eps`` relative, plus an absolute ``8 * eps`` for
  functions with absolute error such as Sigmoid/Tanh/Sin) of the exact result; sums and
  contractions are widened by their term count times ``eps``.  Sin, Cos, Erf, HardSigmoid and
  Softmax saturate within their mathematical range (checked on ONNX Runtime: Tanh, Sigmoid,
  Softsign and Atan do *not*, so their outputs are only widened).  Subnormals may flush to zero.
* Normalizations compute the variance with an error below epsilon/2 (else the normalized value
  is not bounded by sqrt(n)); MeanVarianceNormalization's function body (E[x^2] - E[x]^2, no
  epsilon under the square root) is NaN on constant slices, which no interval can exclude.
* Pools never see a window that lies wholly in the padding (the pool specs ensure it).
* Integer division truncates towards zero; INT_MIN / -1 is excluded by the divisor's domain.
* Tan of a finite float is finite (no float is an odd multiple of pi/2), but bounded only by
  the type's largest value when the interval crosses a pole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from dlcfuzz.ir import CONST_KIND, INPUT_KIND, Graph, TensorType, np_dtype
from dlcfuzz.ir.hints import value_range

INF = math.inf
Iv = tuple[float, float]
TOP: Iv = (-INF, INF)
BOOL_IV: Iv = (0.0, 1.0)
PI, HALF_PI = math.pi, math.pi / 2
FRESH_MARGIN = 0.25  # new inputs keep at least this far from a domain's open boundary at 0


# ---------------------------------------------------------------------------------------------
# Per-dtype numeric facts
# ---------------------------------------------------------------------------------------------
class Num:
    """Numeric facts of one element type, used by transfer functions and domains."""

    __slots__ = (
        "ath",
        "away",
        "budget",
        "dtype",
        "eps",
        "expmax",
        "fmax",
        "hi",
        "kind",
        "lo",
        "pos",
        "qroot",
        "sroot",
        "tiny",
    )

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        dt = np_dtype(dtype)
        self.kind = "b" if dtype == "bool" else "f" if dtype == "bfloat16" else dt.kind
        if self.kind == "f":
            fi = np.finfo(dt) if dt.kind == "f" else _bfloat16_info()
            self.fmax = float(fi.max)
            self.lo, self.hi = -self.fmax, self.fmax
            self.eps = float(fi.eps)
            self.tiny = float(fi.smallest_normal)
            self.budget = self.fmax / 16  # bound on sums and contractions
            self.expmax = math.log(self.fmax) - 1  # exp(x) stays finite (float16: ~10.1)
            self.pos = 4 * self.tiny  # "positive": Log's domain starts here
            self.away = 4 / math.sqrt(self.fmax)  # divisors away from 0: quotients <= sqrt(max) / 4
            self.qroot = self.fmax ** 0.25 / 4  # BatchNormalization's parameters
            self.sroot = math.sqrt(self.fmax) / 4  # Asinh/Acosh (an x*x inside may overflow)
            self.ath = {"float16": 1e-2, "float32": 1e-4}.get(dtype, 1e-8)  # Atanh keeps |x| <= 1 - ath
        elif self.kind in "iu":
            ii = np.iinfo(dt)
            self.lo = float(ii.min)
            self.hi = float(ii.max)  # rounds up for 64 bits: still a bound
            # int64/uint64: floats round near 2**63/2**64; a margin keeps "in range" exact
            self.fmax = self.hi if ii.bits < 53 else float(ii.max) - 2.0 ** (ii.bits - 52)
            self.eps = self.tiny = 0.0
        else:
            self.lo, self.hi, self.fmax, self.eps, self.tiny = 0.0, 1.0, 1.0, 0.0, 0.0

    @property
    def full(self) -> Iv:
        """The unknown interval: anything for floats, the whole range for integers."""
        return TOP if self.kind == "f" else (self.lo, self.hi)

    def fits(self, lo: float, hi: float) -> bool:
        """Whether integer results in [lo, hi] are representable (no wrap-around)."""
        return self.lo <= lo and hi <= self.fmax


def _bfloat16_info():
    """bfloat16's float facts (torch-native programs, spec/torch): numpy's finfo does not know it."""
    import ml_dtypes

    return ml_dtypes.finfo(ml_dtypes.bfloat16)


_NUM: dict[str, Num] = {}


def num(dtype: str) -> Num:
    n = _NUM.get(dtype)
    if n is None:
        n = _NUM[dtype] = Num(dtype)
    return n


def finite(iv: Iv) -> bool:
    return iv[0] > -INF and iv[1] < INF


def default_interval(t: TensorType, hint: dict[str, Any] | None = None) -> Iv:
    """The interval of a runtime input: what input synthesis draws for it."""
    return value_range(t, hint)


def data_interval(a: np.ndarray) -> Iv:
    """The interval of stored data (an initializer or a constant input)."""
    if a.size == 0:
        return (0.0, 0.0)
    lo, hi = float(a.min()), float(a.max())
    if lo != lo or hi != hi:  # NaN
        return TOP
    return lo, hi


# ---------------------------------------------------------------------------------------------
# Domains
# ---------------------------------------------------------------------------------------------
class Domain(NamedTuple):
    """Values an input slot accepts: [lo, hi], and with ``away`` > 0 also |x| >= away with the
    whole interval on one side of 0.  ``fresh`` optionally narrows where new inputs draw.

    ``spread`` > 0 asks for a non-degenerate value range: the range of the tensor's values,
    extended to include 0, must be at least ``spread`` wide (max(0, max x) - min(0, min x)), i.e.
    not all elements (near) zero.  An interval is an over-approximation, so it proves that only
    when it lies wholly on one side of 0, at least ``spread`` from it; any other tensor is refused,
    and the slot takes a new input instead, drawn over a range that reaches that far (uniform draws
    of a non-degenerate range are not all 0)."""

    lo: float = -INF
    hi: float = INF
    away: float = 0.0
    fresh: Iv | None = None
    spread: float = 0.0

    def accepts(self, iv: Iv) -> bool:
        lo, hi = iv
        if lo < self.lo or hi > self.hi:
            return False
        if self.spread and max(lo, -hi) < self.spread:
            return False
        a = self.away
        return not a or lo >= a or hi <= -a

    def meet(self, other: Domain | None) -> Domain:
        if other is None:
            return self
        fresh = self.fresh or other.fresh
        if self.fresh and other.fresh:
            fresh = (max(self.fresh[0], other.fresh[0]), min(self.fresh[1], other.fresh[1]))
        return Domain(max(self.lo, other.lo), min(self.hi, other.hi), max(self.away, other.away), fresh,
                      max(self.spread, other.spread))


REJECT = Domain(INF, -INF)  # accepts nothing: the slot cannot take this dtype


def mag(r: float) -> Domain:
    return Domain(-r, r)


def hint_domain(hint: dict[str, Any] | None, dtype: str) -> Domain | None:
    """A spec's value hint as a domain (``nonzero``: away from 0)."""
    if not hint:
        return None
    away = (1.0 if num(dtype).kind in "iu" else 0.1) if hint.get("nonzero") else 0.0
    return Domain(hint.get("min", -INF), hint.get("max", INF), away)


def fresh_range(dom: Domain, t: TensorType, rng) -> Iv:
    """Where a new runtime input for a slot with domain ``dom`` draws: dom and the default range
    (and, for a one-sided or ``away`` domain, at least FRESH_MARGIN from 0), with bounds
    representable in the dtype (rounding is monotone, so drawn values stay inside)."""
    dlo, dhi = value_range(t)
    n = num(t.dtype)
    lo, hi = dom.fresh if dom.fresh else (max(dom.lo, dlo), min(dom.hi, dhi))
    lo, hi = max(lo, dom.lo), min(hi, dom.hi)
    margin = 1.0 if n.kind in "iu" else FRESH_MARGIN
    if dom.away:
        a = max(dom.away, margin) if max(dom.away, margin) <= dhi else dom.away
        sides = [s for s in ((max(lo, a), hi), (lo, min(hi, -a))) if s[0] <= s[1]]
        if not sides:  # the default range misses the domain: go just past the gap
            sides = [(a, min(dom.hi, 2 * a))] if a <= dom.hi else [(max(dom.lo, -2 * a), -a)]
        lo, hi = sides[rng.randrange(len(sides))] if len(sides) > 1 else sides[0]
    else:
        if 0 < dom.lo < margin <= hi:
            lo = max(lo, margin)
        if -margin >= lo and -margin < dom.hi < 0:
            hi = min(hi, -margin)
    if dom.spread and max(hi, -lo) < dom.spread:  # reach |x| >= spread, on a side the domain allows
        if dom.hi >= dom.spread:
            hi = max(hi, dom.spread)
        elif dom.lo <= -dom.spread:
            lo = min(lo, -dom.spread)
    if lo > hi:  # the domain misses the default range: take a piece of the domain next to it
        if dom.lo > dhi:
            lo, hi = dom.lo, min(dom.hi, dom.lo + (dhi - dlo))
        else:
            lo, hi = max(dom.lo, dom.hi - (dhi - dlo)), dom.hi
    return _inward(lo, hi, t.dtype)


def _inward(lo: float, hi: float, dtype: str) -> Iv:
    n = num(dtype)
    if n.kind in "iu":
        return float(math.ceil(lo)), float(max(math.ceil(lo), math.floor(hi)))
    if n.kind != "f":
        return 0.0, 1.0
    t = np_dtype(dtype).type
    a, b = t(lo), t(hi)
    if float(a) < lo:
        a = np.nextafter(a, t(INF))
    if float(b) > hi:
        b = np.nextafter(b, t(-INF))
    return (float(a), float(b)) if a <= b else (float(a), float(a))


# ---------------------------------------------------------------------------------------------
# Interval helpers
# ---------------------------------------------------------------------------------------------
def hull(*ivs: Iv) -> Iv:
    return min(i[0] for i in ivs), max(i[1] for i in ivs)


def amax(iv: Iv) -> float:
    """max |x| over the interval."""
    return max(-iv[0], iv[1])


def amin(iv: Iv) -> float:
    """min |x| over the interval."""
    lo, hi = iv
    return 0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))


def mul(a: Iv, b: Iv) -> Iv:
    p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(p), max(p)


def add(a: Iv, b: Iv) -> Iv:
    return a[0] + b[0], a[1] + b[1]


def scale(a: Iv, k: float) -> Iv:
    return (a[0] * k, a[1] * k) if k >= 0 else (a[1] * k, a[0] * k)


def widen(iv: Iv, n: Num, k: float = 8.0, absolute: float = 0.0, keep_sign: bool | None = None) -> Iv:
    """Outward by ``k`` eps relative, plus ``absolute`` (in eps units) and the smallest normal.

    ``keep_sign`` (default: when the error is relative only) keeps a bound at 0 from crossing
    it: rounding is monotone, so a correctly rounded operation, or a sum of terms of one sign,
    keeps the sign of its exact result (a flushed subnormal becomes a zero of that sign)."""
    if n.kind != "f":
        return iv
    e = n.eps * k
    a = n.eps * absolute + n.tiny
    lo, hi = iv
    wlo, whi = lo - abs(lo) * e - a, hi + abs(hi) * e + a
    if keep_sign if keep_sign is not None else not absolute:
        if lo >= 0:
            wlo = max(wlo, 0.0)
        if hi <= 0:
            whi = min(whi, 0.0)
    return wlo, whi


def _mono(f: Callable[[float], float], iv: Iv) -> Iv:
    try:
        return f(iv[0]), f(iv[1])
    except (OverflowError, ValueError):
        return TOP


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _exp(x: float) -> float:
    return math.exp(x) if x < 709 else INF


def _sin_range(iv: Iv, shift: float = 0.0) -> Iv:
    """Range of sin(x + shift) over iv."""
    lo, hi = iv[0] + shift, iv[1] + shift
    if hi - lo >= 2 * PI or max(abs(lo), abs(hi)) > 1e4:
        return (-1.0, 1.0)
    a, b = math.sin(lo), math.sin(hi)
    ylo, yhi = min(a, b), max(a, b)
    if HALF_PI + 2 * PI * math.ceil((lo - HALF_PI) / (2 * PI)) <= hi:
        yhi = 1.0
    if -HALF_PI + 2 * PI * math.ceil((lo + HALF_PI) / (2 * PI)) <= hi:
        ylo = -1.0
    return ylo, yhi


def _numel(t: TensorType | None) -> int:
    return t.numel if t is not None else 1


# ---------------------------------------------------------------------------------------------
# Transfer functions
# ---------------------------------------------------------------------------------------------
class Call:
    """What a transfer function sees: input intervals (None: omitted), input and output types,
    ONNX attributes; ``n`` is the first output's numeric facts."""

    __slots__ = ("attrs", "ivs", "n", "outs", "types")

    def __init__(self, ivs: Sequence[Iv | None], types: Sequence[TensorType | None], attrs: dict[str, Any],
                 outs: Sequence[TensorType]) -> None:
        self.ivs, self.types, self.attrs, self.outs = ivs, types, attrs, outs
        self.n = num(outs[0].dtype)

    @property
    def x(self) -> Iv:
        return self.ivs[0]  # type: ignore[return-value]

    def a(self, name: str, default: Any) -> Any:
        v = self.attrs.get(name)
        return default if v is None else v


Transfer = Callable[[Call], list[Iv]]
TRANSFER: dict[str, Transfer] = {}


def _reg(*ops: str):
    def deco(fn: Transfer) -> Transfer:
        for op in ops:
            TRANSFER[op] = fn
        return fn
    return deco


def _unary(fn: Callable[[Iv, Call], Iv]) -> Transfer:
    return lambda c: [fn(c.x, c)]


def _elementwise(op: str, f: Callable[[float], float], k: float = 8.0, absolute: float = 0.0,
                 decreasing: bool = False, nonneg: bool = False) -> None:
    """A monotone function; ``nonneg``: its results are never negative (a bound at 0 stays)."""
    def t(c: Call) -> list[Iv]:
        lo, hi = _mono(f, c.x)
        if decreasing:
            lo, hi = hi, lo
        lo, hi = widen((lo, hi), c.n, k, absolute)
        return [(max(lo, 0.0), hi) if nonneg else (lo, hi)]
    TRANSFER[op] = t


# exact (no rounding) elementwise operators
_reg("Identity", "Dropout")(lambda c: [c.x, BOOL_IV][:len(c.outs)])
_reg("Abs")(_unary(lambda x, c: (amin(x), amax(x))))
_reg("Neg")(_unary(lambda x, c: (-x[1], -x[0])))
_reg("Relu")(_unary(lambda x, c: (max(x[0], 0.0), max(x[1], 0.0))))
_reg("Ceil")(_unary(lambda x, c: (math.ceil(x[0]), math.ceil(x[1]))))
_reg("Floor")(_unary(lambda x, c: (math.floor(x[0]), math.floor(x[1]))))
_reg("Round")(_unary(lambda x, c: (math.floor(x[0]), math.ceil(x[1]))))
_reg("Sign")(_unary(lambda x, c: (float(np.sign(x[0])), float(np.sign(x[1])))))
_reg("Not", "IsNaN", "IsInf", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or",
     "Xor", "Hardmax")(lambda c: [BOOL_IV])

# monotone functions (relative error) and bounded ones (absolute error)
_elementwise("Exp", _exp)
_elementwise("Log", math.log)
_elementwise("Sqrt", math.sqrt)
_elementwise("Sinh", math.sinh)
_elementwise("Asinh", math.asinh)
_elementwise("Acosh", math.acosh)
_elementwise("Atanh", math.atanh, absolute=8)
_elementwise("Asin", math.asin, absolute=8)
_elementwise("Acos", math.acos, absolute=8, decreasing=True, nonneg=True)
_elementwise("Atan", math.atan, absolute=8)
_elementwise("Sigmoid", _sigmoid, absolute=8)
_elementwise("Tanh", math.tanh, absolute=8)
_elementwise("Softsign", lambda x: x / (1 + abs(x)), absolute=8)
_elementwise("Softplus", lambda x: x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x)), absolute=8,
             nonneg=True)


@_reg("Reciprocal")
def _reciprocal(c: Call) -> list[Iv]:
    lo, hi = c.x
    if lo <= 0 <= hi:
        return [TOP]
    return [widen((1 / hi, 1 / lo), c.n)]


@_reg("Cosh")
def _cosh(c: Call) -> list[Iv]:
    return [widen(_mono(math.cosh, (amin(c.x), amax(c.x))), c.n)]


def _trig(shift: float) -> Transfer:
    def t(c: Call) -> list[Iv]:
        lo, hi = widen(_sin_range(c.x, shift), c.n, absolute=8)
        return [(max(lo, -1.0), min(hi, 1.0))]
    return t


TRANSFER["Sin"] = _trig(0.0)
TRANSFER["Cos"] = _trig(HALF_PI)  # cos(x) = sin(x + pi/2)


@_reg("Erf")
def _erf(c: Call) -> list[Iv]:
    lo, hi = widen(_mono(math.erf, c.x), c.n, absolute=8)
    return [(max(lo, -1.0), min(hi, 1.0))]


@_reg("Tan")
def _tan(c: Call) -> list[Iv]:
    lo, hi = c.x
    if max(abs(lo), abs(hi)) < 1e4:
        k = round((lo + hi) / 2 / PI)
        if k * PI - HALF_PI + 1e-3 < lo and hi < k * PI + HALF_PI - 1e-3:
            return [widen((math.tan(lo), math.tan(hi)), c.n, absolute=8)]
    return [(-c.n.fmax, c.n.fmax)]  # finite (no float is a pole), but unbounded


@_reg("HardSwish")
def _hardswish(c: Call) -> list[Iv]:
    def f(x: float) -> float:
        return x * min(1.0, max(0.0, x / 6 + 0.5))
    lo, hi = c.x
    vals = [f(lo), f(hi)] + ([f(-1.5)] if lo <= -1.5 <= hi else [])
    return [widen((min(vals), max(vals)), c.n, absolute=8)]


@_reg("HardSigmoid")
def _hardsigmoid(c: Call) -> list[Iv]:
    alpha, beta = c.a("alpha", 0.2), c.a("beta", 0.5)
    lo, hi = widen(add(scale(c.x, alpha), (beta, beta)), c.n, absolute=8)
    return [(min(max(lo, 0.0), 1.0), max(min(hi, 1.0), 0.0))]


def _piecewise(f: Callable[[float, Call], float]) -> Transfer:
    """A monotone non-decreasing elementwise function with attributes."""
    def t(c: Call) -> list[Iv]:
        return [widen((f(c.x[0], c), f(c.x[1], c)), c.n, absolute=8)]
    return t


TRANSFER["Elu"] = _piecewise(lambda x, c: x if x >= 0 else c.a("alpha", 1.0) * math.expm1(x))
TRANSFER["Selu"] = _piecewise(lambda x, c: c.a("gamma", 1.0507010221481323) * (
    x if x > 0 else c.a("alpha", 1.6732631921768188) * math.expm1(x)))
TRANSFER["LeakyRelu"] = _piecewise(lambda x, c: x if x >= 0 else c.a("alpha", 0.01) * x)
TRANSFER["Celu"] = _piecewise(lambda x, c: x if x >= 0 else c.a("alpha", 1.0) * math.expm1(x / c.a("alpha", 1.0)))


@_reg("ThresholdedRelu")
def _thresholded(c: Call) -> list[Iv]:
    alpha = c.a("alpha", 1.0)
    lo, hi = c.x
    parts = [(0.0, 0.0)] if lo <= alpha else []
    if hi > alpha:
        parts.append((max(lo, alpha), hi))
    return [hull(*parts)]


@_reg("Shrink")
def _shrink(c: Call) -> list[Iv]:
    b = c.a("bias", 0.0)
    lo, hi = c.x
    return [widen((min(0.0, lo - b), max(0.0, hi + b)), c.n)]


@_reg("Clip")
def _clip(c: Call) -> list[Iv]:
    lo, hi = c.x
    mn = c.ivs[1] if len(c.ivs) > 1 else None
    mx = c.ivs[2] if len(c.ivs) > 2 else None
    if mn is not None:
        lo, hi = max(lo, mn[0]), max(hi, mn[1])
    if mx is not None:
        lo, hi = min(lo, mx[0]), min(hi, mx[1])
    return [(lo, hi)]


@_reg("Cast")
def _cast(c: Call) -> list[Iv]:
    src, dst = num(c.types[0].dtype), c.n  # type: ignore[union-attr]
    lo, hi = c.x
    if dst.kind == "b":
        if lo == hi == 0:
            return [(0.0, 0.0)]
        return [(1.0, 1.0) if lo > 0 or hi < 0 else BOOL_IV]
    if dst.kind == "f":
        return [widen((lo, hi), dst, 1) if src.kind != "f" or dst.fmax < src.fmax else (lo, hi)]
    if src.kind == "f":  # truncation towards zero; out of range is undefined (the finisher's full range)
        return [(math.trunc(lo), math.trunc(hi))] if finite(c.x) else [dst.full]
    return [(lo, hi)]


# -- broadcasting arithmetic ------------------------------------------------------------------
@_reg("Add")
def _add(c: Call) -> list[Iv]:
    a, b = c.ivs[0], c.ivs[1]
    return [widen(add(a, b), c.n, 1, absolute=amax(a) + amax(b), keep_sign=True)]  # type: ignore[arg-type]


@_reg("Sub")
def _sub(c: Call) -> list[Iv]:
    a, b = c.ivs[0], c.ivs[1]
    return [widen(add(a, (-b[1], -b[0])), c.n, 1, absolute=amax(a) + amax(b), keep_sign=True)]  # type: ignore


@_reg("Mul")
def _mul(c: Call) -> list[Iv]:
    return [widen(mul(c.ivs[0], c.ivs[1]), c.n, 2)]  # type: ignore[arg-type]


@_reg("Div")
def _div(c: Call) -> list[Iv]:
    a, b = c.ivs[0], c.ivs[1]
    if b[0] <= 0 <= b[1]:  # type: ignore[index]
        return [c.n.full]
    q = (a[0] / b[0], a[0] / b[1], a[1] / b[0], a[1] / b[1])  # type: ignore[index]
    lo, hi = min(q), max(q)
    if c.n.kind in "iu":  # truncation towards zero (exact below 2**52; else one more for rounding)
        d = 1 if amax(a) >= 2.0 ** 52 else 0  # type: ignore[arg-type]
        return [(math.trunc(lo) - d, math.trunc(hi) + d)]
    return [widen((lo, hi), c.n, 2)]


@_reg("Mod")
def _mod(c: Call) -> list[Iv]:
    a, b = c.ivs[0], c.ivs[1]
    if c.n.kind == "f" or c.attrs.get("fmod") == 1:  # the sign of the dividend, |r| < |b|
        m = min(amax(a), amax(b))  # type: ignore[arg-type]
        return [(-m if a[0] < 0 else 0.0, m if a[1] > 0 else 0.0)]  # type: ignore[index]
    m = amax(b) - 1  # type: ignore[arg-type]  # integer Python-style: the sign of the divisor
    return [(-m if b[0] < 0 else 0.0, m if b[1] > 0 else 0.0)]  # type: ignore[index]


@_reg("Pow")
def _pow(c: Call) -> list[Iv]:
    x, y = c.ivs[0], c.ivs[1]
    n = c.n
    ykind = num(c.types[1].dtype).kind  # type: ignore[union-attr]
    try:
        if n.kind == "f" and x[0] > 0:  # type: ignore[index]
            e = mul((math.log(x[0]), math.log(x[1])), y)  # type: ignore[arg-type,index]
            return [widen((_exp(e[0]), _exp(e[1])), n, 8 + 4 * amax(e))]
        if y[0] >= 0 and (x[0] >= 0 or ykind in "iu"):  # type: ignore[index]
            m = amax(x)  # type: ignore[arg-type]
            top = max(1.0, m ** y[1]) if m > 1 else 1.0  # type: ignore[index]
            bound = widen((0.0, top), n, 8 + 4 * y[1])[1]  # type: ignore[index]
            return [(0.0 if x[0] >= 0 else -bound, bound)]  # type: ignore[index]
    except OverflowError:
        pass
    return [n.full]


@_reg("Where")
def _where(c: Call) -> list[Iv]:
    return [hull(c.ivs[1], c.ivs[2])]  # type: ignore[arg-type]


@_reg("Max")
def _max(c: Call) -> list[Iv]:
    ivs = [i for i in c.ivs if i is not None]
    return [(max(i[0] for i in ivs), max(i[1] for i in ivs))]


@_reg("Min")
def _min(c: Call) -> list[Iv]:
    ivs = [i for i in c.ivs if i is not None]
    return [(min(i[0] for i in ivs), min(i[1] for i in ivs))]


@_reg("Sum")
def _sum(c: Call) -> list[Iv]:
    ivs = [i for i in c.ivs if i is not None]
    s = (sum(i[0] for i in ivs), sum(i[1] for i in ivs))
    one_sign = all(i[0] >= 0 for i in ivs) or all(i[1] <= 0 for i in ivs)
    return [widen(s, c.n, 2 * len(ivs), absolute=sum(amax(i) for i in ivs) * len(ivs), keep_sign=one_sign)]


@_reg("Mean")
def _mean(c: Call) -> list[Iv]:
    ivs = [i for i in c.ivs if i is not None]
    one_sign = all(i[0] >= 0 for i in ivs) or all(i[1] <= 0 for i in ivs)
    return [widen(hull(*ivs), c.n, 2 * len(ivs), absolute=max(amax(i) for i in ivs) * len(ivs), keep_sign=one_sign)]


# -- reductions -------------------------------------------------------------------------------
def _count(c: Call) -> int:
    """Elements reduced into one output element."""
    return max(1, _numel(c.types[0]) // max(1, c.outs[0].numel))


def _sum_of(iv: Iv, k: int, n: Num) -> Iv:
    lo, hi = iv
    return widen((k * lo, k * hi), n, 2 + 2 * k, absolute=k * amax(iv), keep_sign=True)  # terms of one sign


@_reg("ReduceSum")
def _reduce_sum(c: Call) -> list[Iv]:
    return [_sum_of(c.x, _count(c), c.n)]


@_reg("ReduceMean")
def _reduce_mean(c: Call) -> list[Iv]:
    k = _count(c)
    if c.n.kind in "iu":
        s = (k * c.x[0], k * c.x[1])
        return [c.x if c.n.fits(*s) else c.n.full]
    return [widen(c.x, c.n, 2 + 2 * k, absolute=k * amax(c.x), keep_sign=True)]


def _pad_only_windows(c: Call) -> bool:
    """A dilated kernel over padding may have a window with no input element (the pool specs
    keep pads < kernel, which only rules that out without dilation)."""
    return any(d > 1 for d in c.attrs.get("dilations") or ()) and _has_pads(c)


@_reg("ReduceMax", "ReduceMin", "MaxPool", "GlobalMaxPool")
def _reduce_max(c: Call) -> list[Iv]:
    out = [(c.n.lo, c.x[1]) if _pad_only_windows(c) else c.x]  # ORT: the lowest value for such a window
    if len(c.outs) > 1:  # MaxPool's Indices
        out.append(num("int64").full if _pad_only_windows(c) else (0.0, float(_numel(c.types[0]) - 1)))
    return out


@_reg("ReduceL1")
def _reduce_l1(c: Call) -> list[Iv]:
    return [_sum_of((amin(c.x), amax(c.x)), _count(c), c.n)]


@_reg("ReduceSumSquare")
def _reduce_sumsq(c: Call) -> list[Iv]:
    return [_sum_of((amin(c.x) ** 2, amax(c.x) ** 2), _count(c), c.n)]


@_reg("ReduceL2")
def _reduce_l2(c: Call) -> list[Iv]:
    k = _count(c)
    if c.n.kind in "iu":
        top = k * amax(c.x) ** 2
        return [(0.0, math.ceil(math.sqrt(top)) + 1)] if c.n.fits(0.0, top) else [c.n.full]
    r = math.sqrt(k)
    return [widen((r * amin(c.x), r * amax(c.x)), c.n, 4 + 2 * k)]


@_reg("ReduceProd")
def _reduce_prod(c: Call) -> list[Iv]:
    k = _count(c)
    lo, hi = c.x
    try:
        if lo >= 0:
            r = (lo ** k, hi ** k)
        else:
            m = amax(c.x) ** k
            r = (-m, m)
    except OverflowError:
        return [c.n.full]
    return [widen(r, c.n, 2 + 2 * k)]


@_reg("ReduceLogSumExp")
def _reduce_lse(c: Call) -> list[Iv]:
    if c.n.kind != "f":
        return [c.n.full]
    lk = math.log(_count(c))
    return [widen((c.x[0] + lk, c.x[1] + lk), c.n, 16, absolute=16)]


@_reg("ArgMax", "ArgMin")
def _argmax(c: Call) -> list[Iv]:
    t = c.types[0]
    axis = c.a("axis", 0) % t.rank  # type: ignore[union-attr]
    return [(0.0, float(t.shape[axis] - 1))]  # type: ignore[union-attr]


@_reg("CumSum")
def _cumsum(c: Call) -> list[Iv]:
    t = c.types[0]
    ax = c.ivs[1]
    k = t.shape[int(ax[0]) % t.rank] if ax is not None and finite(ax) else t.numel  # type: ignore[union-attr]
    lo, hi = c.x
    r = (min(lo, k * lo), max(hi, k * hi))
    if c.attrs.get("exclusive"):
        r = hull(r, (0.0, 0.0))
    return [widen(r, c.n, 2 + 2 * k, absolute=k * amax(c.x), keep_sign=c.x[0] >= 0 or c.x[1] <= 0)]


# -- data movement: values are copied (plus padding / filling values) --------------------------
_reg("Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
     "Slice", "Gather", "GatherElements", "GatherND", "ReverseSequence")(lambda c: [c.x])
_reg("Split")(lambda c: [c.x] * len(c.outs))
# the sequence and optional patterns (spec/sequence.py) move tensors unchanged: a hull of the tensors the
# result may come from (never the positions and split lengths)
_reg("SplitToSequence+ConcatFromSequence", "Optional+OptionalGetElement",
     "SequenceEmpty+SequenceInsert+SequenceAt")(lambda c: [c.x])
_reg("SequenceConstruct+SequenceAt")(lambda c: [hull(*c.ivs[:len(c.types) - 1])])
_reg("SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence")(lambda c: [hull(c.ivs[0], *c.ivs[3:])])
_reg("SequenceConstruct+SequenceLength")(lambda c: [(float(len(c.types)),) * 2])
_reg("SplitToSequence+SequenceLength")(lambda c: [(1.0, float(c.types[0].shape[c.attrs["axis"]]))])
_reg("Optional+OptionalHasElement")(lambda c: [(1.0, 1.0)])


@_reg("If")
def _if(c: Call) -> list[Iv]:
    """Either branch's result (spec/control.py): then_op of x plus then_bias, else_op of y (x when
    absent); a nested If computes its branch's operator."""
    x, t = c.ivs[0], c.types[0]
    y, ty = (c.ivs[2], c.types[2]) if len(c.ivs) > 2 and c.ivs[2] is not None else (x, t)
    then = output_intervals(c.attrs["then_op"], [x], [t], {}, c.outs[:1])[0]
    bias = c.attrs.get("then_bias") or 0.0
    then = (then[0] + bias, then[1] + bias)
    other = output_intervals(c.attrs["else_op"], [y], [ty], {}, c.outs[:1])[0]
    return [hull(then, other), hull(x, y)][:len(c.outs)]
_reg("Concat")(lambda c: [hull(*(i for i in c.ivs if i is not None))])
_reg("Trilu")(lambda c: [hull(c.x, (0.0, 0.0))])
_reg("Shape")(lambda c: [(float(min(c.types[0].shape)), float(max(c.types[0].shape)))])  # type: ignore[union-attr]
_reg("Size")(lambda c: [(float(_numel(c.types[0])),) * 2])


@_reg("Pad")
def _pad(c: Call) -> list[Iv]:
    if c.a("mode", "constant") != "constant":
        return [c.x]
    cv = c.ivs[2] if len(c.ivs) > 2 and c.ivs[2] is not None else (0.0, 0.0)
    return [hull(c.x, cv)]


@_reg("Resize")
def _resize(c: Call) -> list[Iv]:
    mode = c.a("mode", "nearest")
    lo, hi = c.x
    if mode == "cubic":  # weights sum to 1 but may be negative: at most 4x the radius per resized axis
        mid, rad = (lo + hi) / 2, (hi - lo) / 2
        lo, hi = widen((mid - 16 * rad, mid + 16 * rad), c.n, 64)
    elif mode == "linear":
        lo, hi = widen((lo, hi), c.n, 16)
    if c.a("coordinate_transformation_mode", "") == "tf_crop_and_resize":
        ev = widen((c.a("extrapolation_value", 0.0),) * 2, num("float32"), 1)  # a float32 attribute
        lo, hi = min(lo, ev[0]), max(hi, ev[1])
    if c.n.kind in "iu":
        lo, hi = math.floor(lo), math.ceil(hi)
    return [(lo, hi)]


# -- contractions -----------------------------------------------------------------------------
def _contract(a: Iv, b: Iv, k: int, n: Num, padded: bool = False) -> Iv:
    """A sum of at most ``k`` products a*b (``padded``: fewer terms possible)."""
    p = mul(a, b)
    if padded:
        p = hull(p, (0.0, 0.0))
    return widen((k * p[0], k * p[1]), n, 2 + 2 * k, absolute=k * amax(p), keep_sign=True)


@_reg("MatMul")
def _matmul(c: Call) -> list[Iv]:
    k = c.types[0].shape[-1]  # type: ignore[union-attr]
    return [_contract(c.ivs[0], c.ivs[1], k, c.n)]  # type: ignore[arg-type]


@_reg("Gemm")
def _gemm(c: Call) -> list[Iv]:
    k = c.types[0].shape[0 if c.a("transA", 0) else 1]  # type: ignore[union-attr]
    # alpha and beta are float attributes: ONNX stores them in float32, which is what compilers multiply by
    alpha, beta = float(np.float32(c.a("alpha", 1.0))), float(np.float32(c.a("beta", 1.0)))
    r = widen(scale(_contract(c.ivs[0], c.ivs[1], k, c.n), alpha), c.n, 4)  # type: ignore[arg-type]
    if len(c.ivs) > 2 and c.ivs[2] is not None:
        cc = widen(scale(c.ivs[2], beta), c.n, 4)
        r = widen(add(r, cc), c.n, 4, absolute=4 * (amax(r) + amax(cc)), keep_sign=False)
    return [r]


def _conv_count(c: Call, transpose: bool) -> int:
    w = c.types[1].shape  # type: ignore[union-attr]
    per = math.prod(w[2:])
    return (w[0] // c.a("group", 1) if transpose else w[1]) * per


def _conv(transpose: bool) -> Transfer:
    def t(c: Call) -> list[Iv]:
        r = _contract(c.ivs[0], c.ivs[1], _conv_count(c, transpose), c.n, padded=True)  # type: ignore[arg-type]
        if len(c.ivs) > 2 and c.ivs[2] is not None:
            r = widen(add(r, c.ivs[2]), c.n, 2)
        return [r]
    return t


TRANSFER["Conv"] = _conv(False)
TRANSFER["ConvTranspose"] = _conv(True)


def einsum_count(equation: str, shapes: Sequence[tuple[int, ...]]) -> int:
    """Products summed into one output element: the product of the summed-out letters' dims."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    dims: dict[str, int] = {}
    seen: list[str] = []
    for term, s in zip(lhs.split(","), shapes, strict=False):
        letters = term.replace("...", "")
        if "..." in term:
            i = term.index("...")
            k = len(s) - len(letters)
            s = s[:i] + s[i + k:]
        for x, d in zip(letters, s, strict=False):
            dims[x] = d
            seen.append(x)
    out = set(rhs) if arrow else {x for x in seen if seen.count(x) == 1}
    return math.prod(d for x, d in dims.items() if x not in out)


@_reg("Einsum")
def _einsum(c: Call) -> list[Iv]:
    ivs = [i for i in c.ivs if i is not None]
    shapes = [t.shape for t in c.types if t is not None]
    k = einsum_count(c.attrs.get("equation", ""), shapes)
    if len(ivs) == 1:
        return [_sum_of(ivs[0], k, c.n)]
    return [_contract(ivs[0], ivs[1], k, c.n)]


@_reg("PRelu")
def _prelu(c: Call) -> list[Iv]:
    lo, hi = c.x
    pos = (max(lo, 0.0), max(hi, 0.0))
    neg = mul((min(lo, 0.0), min(hi, 0.0)), c.ivs[1])  # type: ignore[arg-type]
    return [widen(hull(pos, neg), c.n, 2)]


# -- pools --------------------------------------------------------------------------------------
def _has_pads(c: Call) -> bool:
    return any(c.attrs.get("pads") or ()) or c.a("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER")


@_reg("AveragePool", "GlobalAveragePool")
def _avgpool(c: Call) -> list[Iv]:
    x = c.x
    if c.attrs.get("count_include_pad") and _has_pads(c):
        x = hull(x, (0.0, 0.0))
    elif _pad_only_windows(c):
        return [TOP]  # 0 / 0
    k = math.prod(c.attrs["kernel_shape"]) if "kernel_shape" in c.attrs else math.prod(c.types[0].shape[2:])
    return [widen(x, c.n, 2 + 2 * k, absolute=k * amax(x), keep_sign=True)]


@_reg("LpPool", "GlobalLpPool")
def _lppool(c: Call) -> list[Iv]:
    k = math.prod(c.attrs["kernel_shape"]) if "kernel_shape" in c.attrs else math.prod(c.types[0].shape[2:])
    p = c.a("p", 2)
    return [widen((0.0, k ** (1 / p) * amax(c.x)), c.n, 8 + 4 * k)]


@_reg("LRN")
def _lrn(c: Call) -> list[Iv]:
    f = c.a("bias", 1.0) ** -c.a("beta", 0.75)  # y = x * g, 0 < g <= bias ** -beta
    return [widen(mul(c.x, (0.0, f)), c.n, 64, absolute=64)]


# -- normalization, softmax -------------------------------------------------------------------
@_reg("Softmax")
def _softmax(c: Call) -> list[Iv]:
    return [(0.0, 1.0)]


@_reg("LogSoftmax")
def _logsoftmax(c: Call) -> list[Iv]:
    t = c.types[0]
    k = t.shape[c.a("axis", -1) % t.rank]  # type: ignore[union-attr]
    lo, hi = c.x
    return [widen((lo - hi - math.log(k), 0.0), c.n, 16, absolute=16 + 4 * amax(c.x))]


def _normalized(c: Call, count: int) -> Iv:
    """(x - mean) / sqrt(var + eps) is within sqrt(n - 1) of 0 (population variance)."""
    r = math.sqrt(max(count - 1, 0)) * (1 + 1e-3) + 1e-3
    return (-r, r)


def _affine(x: Iv, s: Iv | None, b: Iv | None, n: Num) -> Iv:
    y = mul(x, s) if s is not None else x
    if b is not None:
        y = add(y, b)
    return widen(y, n, 64, absolute=64 * (amax(y) + 1))


@_reg("BatchNormalization")
def _batchnorm(c: Call) -> list[Iv]:
    x, s, b, mean, var = c.ivs[:5]
    eps = c.a("epsilon", 1e-5)
    inv = (1 / math.sqrt(var[1] + eps), 1 / math.sqrt(max(var[0], 0.0) + eps))  # type: ignore[index]
    centered = add(x, (-mean[1], -mean[0]))  # type: ignore[arg-type,index]
    return [_affine(mul(centered, inv), s, b, c.n)]


@_reg("InstanceNormalization")
def _instancenorm(c: Call) -> list[Iv]:
    k = math.prod(c.types[0].shape[2:])  # type: ignore[union-attr]
    return [_affine(_normalized(c, k), c.ivs[1], c.ivs[2], c.n)]


@_reg("LayerNormalization")
def _layernorm(c: Call) -> list[Iv]:
    t = c.types[0]
    axis = c.a("axis", -1) % t.rank  # type: ignore[union-attr]
    k = math.prod(t.shape[axis:])  # type: ignore[union-attr]
    y = _affine(_normalized(c, k), c.ivs[1], c.ivs[2] if len(c.ivs) > 2 else None, c.n)
    eps = c.a("epsilon", 1e-5)
    f32 = num("float32")
    spread = (c.x[1] - c.x[0]) / 2
    inv = widen((1 / math.sqrt(spread * spread + eps), 1 / math.sqrt(eps / 2)), f32, 64)
    return [y, widen(c.x, f32, 64, absolute=64 * amax(c.x)), inv][:len(c.outs)]


@_reg("RMSNormalization")
def _rmsnorm(c: Call) -> list[Iv]:
    """x / sqrt(mean(x^2) + eps) is within sqrt(n) of 0 (x_i^2 <= n mean(x^2)), then times Scale."""
    t = c.types[0]
    k = math.prod(t.shape[c.a("axis", -1) % t.rank:])  # type: ignore[union-attr]
    r = math.sqrt(k) * (1 + 1e-3) + 1e-3
    return [_affine((-r, r), c.ivs[1], None, c.n)]


@_reg("LpNormalization")
def _lpnorm(c: Call) -> list[Iv]:
    lo, hi = c.x
    return [widen((-1.0 if lo < 0 else 0.0, 1.0 if hi > 0 else 0.0), c.n, 16, absolute=16)]


@_reg("MeanVarianceNormalization")
def _mvn(c: Call) -> list[Iv]:
    t = c.types[0]
    k = math.prod(t.shape[a] for a in {a % t.rank for a in c.a("axes", [0, 2, 3])})  # type: ignore[union-attr]
    if k == 1 or c.x[0] == c.x[1]:  # ORT: NaN for a zero variance (the ONNX function gives 0)
        return [TOP]
    return [widen(_normalized(c, k), c.n, 64, absolute=64)]


# -- scatter, selection, generators, bitwise, Mish/Gelu, ReduceLogSum, GridSample --------------
def _scatter(c: Call, hits: int) -> list[Iv]:
    """data updated by ``hits`` (at most) updates per element: replaced, or combined by the reduction."""
    d, u = c.ivs[0], c.ivs[2]
    red = c.a("reduction", "none")
    if red in ("none", "max", "min") or c.n.kind == "b":
        return [hull(d, u)]  # type: ignore[arg-type]
    if red == "add":
        r = (d[0] + hits * min(u[0], 0.0), d[1] + hits * max(u[1], 0.0))  # type: ignore[index]
        one_sign = (d[0] >= 0 and u[0] >= 0) or (d[1] <= 0 and u[1] <= 0)  # type: ignore[index]
        return [widen(r, c.n, 2 + 2 * hits, absolute=amax(d) + hits * amax(u), keep_sign=one_sign)]  # type: ignore
    # mul: d times a product of 0..hits updates
    if d[0] >= 0 and u[0] >= 0:  # type: ignore[index]
        r = (d[0] * min(1.0, u[0]) ** hits, d[1] * max(1.0, u[1]) ** hits)  # type: ignore[index]
    else:
        m = amax(d) * max(1.0, amax(u)) ** hits  # type: ignore[arg-type]
        r = (-m, m)
    return [widen(r, c.n, 2 + 2 * hits)]


@_reg("ScatterElements")
def _scatter_elements(c: Call) -> list[Iv]:
    t = c.types[1]
    return [_scatter(c, t.shape[c.a("axis", 0) % t.rank])[0]]  # type: ignore[union-attr]


@_reg("ScatterND")
def _scatter_nd(c: Call) -> list[Iv]:
    return _scatter(c, math.prod(c.types[1].shape[:-1]))  # type: ignore[union-attr]


@_reg("TopK")
def _topk(c: Call) -> list[Iv]:
    t = c.types[0]
    return [c.x, (0.0, float(t.shape[c.a("axis", -1) % t.rank] - 1))]  # type: ignore[union-attr]


@_reg("OneHot")
def _onehot(c: Call) -> list[Iv]:
    values = c.ivs[2] if len(c.ivs) > 2 else None
    return [values if values is not None else c.n.full]


_reg("Compress")(lambda c: [c.x])


# selection operators (spec/select.py): indices into their inputs
@_reg("NonZero")
def _nonzero(c: Call) -> list[Iv]:
    return [(0.0, float(max(c.types[0].shape) - 1))]  # type: ignore[union-attr]


@_reg("Unique")
def _unique(c: Call) -> list[Iv]:
    """Y holds X's values; indices, inverse_indices and counts are positions and counts in X."""
    t = c.types[0]
    axis = c.attrs.get("axis")
    n = t.numel if axis is None else t.shape[axis % t.rank]  # type: ignore[union-attr]
    k = c.outs[1].shape[0] if len(c.outs) > 1 else n
    return [c.x, (0.0, n - 1.0), (0.0, k - 1.0), (1.0, float(n))][:len(c.outs)]


@_reg("NonMaxSuppression")
def _nms(c: Call) -> list[Iv]:
    """Rows (batch, class, box)."""
    return [(0.0, float(max(*c.types[0].shape[:2], c.types[1].shape[1]) - 1))]  # type: ignore[union-attr]
_reg("EyeLike")(lambda c: [(0.0, 1.0)])
TRANSFER["CastLike"] = _cast


@_reg("Range")
def _range(c: Call) -> list[Iv]:
    """start + i * delta, all between start and limit."""
    limit = c.ivs[1] if len(c.ivs) > 1 else None
    if limit is None:
        return [c.n.full]
    return [widen(hull(c.x, limit), c.n, 8)]


@_reg("ConstantOfShape")
def _constant_of_shape(c: Call) -> list[Iv]:
    v = c.attrs.get("value")
    return [data_interval(np.asarray(v)) if v is not None else (0.0, 0.0)]


@_reg("BitShift")
def _bitshift(c: Call) -> list[Iv]:
    x, y = c.ivs[0], c.ivs[1]
    if c.a("direction", "LEFT") == "RIGHT":
        return [(math.floor(x[0] / 2.0 ** y[1]), math.floor(x[1] / 2.0 ** y[0]))]  # type: ignore[index]
    return [(x[0] * 2.0 ** y[0], x[1] * 2.0 ** y[1])]  # type: ignore[index]  # may wrap: the finisher's full range


def _ones_below(v: float) -> float:
    """The smallest 2^k - 1 >= v (v >= 0): a bound on an OR / XOR of nonnegative values <= v."""
    return float(2 ** int(v).bit_length() - 1)


@_reg("BitwiseAnd")
def _bitwise_and(c: Call) -> list[Iv]:
    a, b = c.ivs[0], c.ivs[1]
    nonneg = [i for i in (a, b) if i[0] >= 0]  # type: ignore[index]
    return [(0.0, min(i[1] for i in nonneg)) if nonneg else c.n.full]  # type: ignore[index]


@_reg("BitwiseOr")
def _bitwise_or(c: Call) -> list[Iv]:
    a, b = c.ivs[0], c.ivs[1]
    if a[0] >= 0 and b[0] >= 0:  # type: ignore[index]
        return [(max(a[0], b[0]), _ones_below(max(a[1], b[1])))]  # type: ignore[index]
    return [c.n.full]


@_reg("BitwiseXor")
def _bitwise_xor(c: Call) -> list[Iv]:
    a, b = c.ivs[0], c.ivs[1]
    if a[0] >= 0 and b[0] >= 0:  # type: ignore[index]
        return [(0.0, _ones_below(max(a[1], b[1])))]  # type: ignore[index]
    return [c.n.full]


@_reg("BitwiseNot")
def _bitwise_not(c: Call) -> list[Iv]:
    lo, hi = c.x
    if c.n.kind == "i":
        return [(-hi - 1, -lo - 1)]
    if c.n.dtype == "uint64":  # 2**64 - 1 is not a float
        return [c.n.full]
    top = float(np.iinfo(np_dtype(c.n.dtype)).max)
    return [(top - hi, top - lo)]


def _mish(x: float) -> float:
    sp = x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))
    return x * math.tanh(sp)


def _gelu(x: float) -> float:
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def _gelu_tanh(x: float) -> float:
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _valley(f: Callable[[float], float], at: float, lo: float, hi: float) -> Iv:
    """The range over [lo, hi] of a function decreasing below ``at`` and increasing above it."""
    vals = [f(lo), f(hi)] + ([f(at)] if lo <= at <= hi else [])
    return min(vals), max(vals)


TRANSFER["Mish"] = lambda c: [widen(_valley(_mish, -1.19243, *c.x), c.n, 16, absolute=16)]
TRANSFER["Gelu"] = lambda c: [widen(
    _valley(_gelu_tanh, -0.75246, *c.x) if c.a("approximate", "none") == "tanh" else _valley(_gelu, -0.75179, *c.x),
    c.n, 16, absolute=16)]


@_reg("ReduceLogSum")
def _reduce_logsum(c: Call) -> list[Iv]:
    """log of a sum of k positive terms (with empty axes and noop_with_empty_axes: of each term)."""
    lo, hi = c.x
    if lo <= 0:
        return [c.n.full]
    k = _count(c)
    r = (math.log(k * lo), math.log(k * hi))
    r = (math.floor(r[0]), math.ceil(r[1])) if c.n.kind in "iu" else widen(r, c.n, 16, absolute=8 + 4 * k)
    return [r]


@_reg("GridSample")
def _grid_sample(c: Call) -> list[Iv]:
    """A weighted sum of X's pixels (zeros outside with padding_mode zeros), weights summing to 1;
    cubic weights may be negative, with sum |w| <= 1.9 in 2-D."""
    x = c.x
    if c.a("padding_mode", "zeros") == "zeros":
        x = hull(x, (0.0, 0.0))
    lo, hi = x
    if c.a("mode", "") in ("bicubic", "cubic"):
        mid, rad = (lo + hi) / 2, (hi - lo) / 2
        lo, hi = mid - 4 * rad, mid + 4 * rad
    return [widen((lo, hi), c.n, 16, absolute=16 * (amax(x) + 1))]



# ---------------------------------------------------------------------------------------------
# Output intervals
# ---------------------------------------------------------------------------------------------
# operators whose output stays defined for non-finite (even NaN) float inputs
NAN_SAFE = frozenset({"IsNaN", "IsInf", "Shape", "Size", "Equal", "Greater", "Less", "GreaterOrEqual",
                      "LessOrEqual", "ArgMax", "ArgMin"})


def _finish(iv: Iv, t: TensorType) -> Iv:
    """Fits an interval to the output type: overflow -> inf (floats), wrap-around -> the whole range."""
    n = num(t.dtype)
    lo, hi = iv
    if lo != lo or hi != hi:
        return n.full
    if n.kind == "f":
        return (-INF if lo < -n.fmax else lo, INF if hi > n.fmax else hi)
    if n.kind == "b":
        return (0.0 if lo <= 0 else 1.0, 1.0 if hi >= 1 else 0.0)
    if not n.fits(lo, hi):
        return n.lo, n.hi
    return float(math.floor(lo)), float(math.ceil(hi))


def output_intervals(op: str, ivs: Sequence[Iv | None], types: Sequence[TensorType | None],
                     attrs: dict[str, Any], outs: Sequence[TensorType]) -> list[Iv]:
    """The intervals of an operator call's outputs (conservative; unknown operators: unknown)."""
    if not outs:
        return []
    fn = TRANSFER.get(op)
    if fn is None or (op not in NAN_SAFE and not all(i is None or finite(i) for i in ivs)):
        if op == "Cast" and num(outs[0].dtype).kind == "b":
            return [BOOL_IV]
        return [num(t.dtype).full for t in outs]
    try:
        got = fn(Call(ivs, types, attrs, outs))
    except (OverflowError, ValueError, ZeroDivisionError):
        return [num(t.dtype).full for t in outs]
    return [_finish(iv, t) for iv, t in zip(got, outs, strict=True)]


def analyze(g: Graph, inputs: dict[str, Iv] | None = None) -> dict[str, Iv]:
    """Intervals of every value of a graph; runtime inputs from ``inputs`` or their hints, pinned
    runtime inputs (always fed their own data) and constants from their data."""
    ivs: dict[str, Iv] = {}
    for v in g.values.values():
        if v.kind == INPUT_KIND and inputs and v.name in inputs:
            ivs[v.name] = inputs[v.name]
        elif v.kind in (INPUT_KIND, CONST_KIND) and v.data is not None:
            ivs[v.name] = data_interval(v.data)
        elif v.kind == INPUT_KIND:
            ivs[v.name] = default_interval(v.type, v.hint)
    for node in g.nodes:
        ins = [ivs[x] if x else None for x in node.inputs]
        types = [g.values[x].type if x else None for x in node.inputs]
        outs = [g.values[o].type for o in node.outputs]
        for o, iv in zip(node.outputs, output_intervals(node.op, ins, types, node.attrs, outs), strict=True):
            ivs[o] = iv
    return ivs


# ---------------------------------------------------------------------------------------------
# Input domains
# ---------------------------------------------------------------------------------------------
# A domain function gets (slot: spec input index, n: the candidate's numeric facts, numel: the
# candidate's element count, c: the solver context (c.ins: input types so far, c.attrs: attributes
# drawn so far, c.s: the first input's shape), ivs: the intervals of the inputs so far) and returns
# a Domain, REJECT or None.  Domains of later slots may use the earlier inputs' intervals: that is
# how the amplifying operators keep their output finite.  Only slot 0 may use ``numel``.
DomainFn = Callable[[int, Num, int, Any, list], "Domain | None"]
DOMAINS: dict[str, DomainFn] = {}
SHAPED = set()  # operators whose slot-0 domain depends on the candidate's element count


def _dom(*ops: str, shaped: bool = False):
    def deco(fn: DomainFn) -> DomainFn:
        for op in ops:
            DOMAINS[op] = fn
            if shaped:
                SHAPED.add(op)
        return fn
    return deco


def _float_only(make: Callable[[Num], Domain]) -> DomainFn:
    return lambda slot, n, numel, c, ivs: make(n) if n.kind == "f" else None


def _quarter(n: Num) -> Domain:
    return mag(n.fmax / 4)


for _op, _make in {
    "Exp": lambda n: Domain(-n.fmax, n.expmax),
    "Softplus": lambda n: Domain(-n.fmax, n.expmax),
    "Log": lambda n: Domain(n.pos, n.fmax),
    "Sqrt": lambda n: Domain(0.0, n.fmax),
    "Reciprocal": lambda n: Domain(-n.fmax, n.fmax, n.away),
    "Asin": lambda n: Domain(-1.0, 1.0),
    "Acos": lambda n: Domain(-1.0, 1.0),
    "Atanh": lambda n: mag(1 - n.ath),
    "Acosh": lambda n: Domain(1.0, n.sroot),
    "Asinh": lambda n: mag(n.sroot),
    "Sinh": lambda n: mag(n.expmax),
    "Cosh": lambda n: mag(n.expmax),
    "LogSoftmax": _quarter, "Elu": _quarter, "Selu": _quarter, "Celu": _quarter, "LeakyRelu": _quarter,
    "Shrink": _quarter, "HardSigmoid": _quarter, "HardSwish": _quarter,
    "Resize": lambda n: mag(n.fmax / 64),
}.items():
    DOMAINS[_op] = _float_only(_make)


@_dom("Add", "Sub")
def _d_add(slot, n, numel, c, ivs):
    return _quarter(n) if n.kind == "f" else None


@_dom("Sum", "Mean")
def _d_sum(slot, n, numel, c, ivs):
    return mag(n.fmax / 16) if n.kind == "f" else None


def _room(n: Num, m: float, budget: float | None = None) -> Domain:
    """|y| such that |y| * m stays within the budget (and y within a quarter of the range)."""
    b = n.budget if budget is None else budget
    r = n.fmax / 4 if m <= 0 else min(n.fmax / 4, b / m)
    return mag(r)


@_dom("Mul")
def _d_mul(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    return _quarter(n) if slot == 0 else _room(n, amax(ivs[0]))


@_dom("PRelu")
def _d_prelu(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    return _quarter(n) if slot == 0 else _room(n, amax(ivs[0]))


def _int_divisor(n: Num, dividend: Iv) -> Domain:
    """Nonzero; and not -1 when the dividend may be INT_MIN (the quotient traps)."""
    return Domain(away=2.0 if n.kind == "i" and dividend[0] <= n.lo else 1.0)


@_dom("Div")
def _d_div(slot, n, numel, c, ivs):
    if n.kind == "f":
        if slot == 0:
            return _quarter(n)
        return Domain(-n.fmax / 4, n.fmax / 4, max(n.away, amax(ivs[0]) / n.budget))
    return _int_divisor(n, ivs[0]) if slot == 1 else None


@_dom("Mod")
def _d_mod(slot, n, numel, c, ivs):
    if slot == 0:
        return None
    if n.kind == "f":
        return Domain(-n.fmax, n.fmax, n.away)
    return _int_divisor(n, ivs[0])


@_dom("Pow")
def _d_pow(slot, n, numel, c, ivs):
    if slot == 0:
        return _quarter(n) if n.kind == "f" else None
    x = ivs[0]
    xn = num(c.ins[0].dtype)
    limit = (xn.expmax - 1) if xn.kind == "f" else math.log(xn.hi) - 0.5
    integral = n.kind in "iu"
    if xn.kind == "f" and x[0] >= xn.pos:  # a positive base: any exponent with |y log x| <= limit
        r = limit / max(abs(math.log(x[0])), abs(math.log(x[1])), 1e-30)
        return mag(min(r, n.fmax / 4)) if n.kind == "f" else mag(r)
    m = amax(x)
    k = limit / math.log(m) if m > 1 else 64.0
    if integral or x[0] >= 0:  # a nonnegative base or an integer exponent: 0 <= y <= k
        return Domain(0.0, min(k, n.fmax / 4))
    return REJECT  # a negative base needs an integer exponent


@_dom("ReduceSum", "ReduceMean", "ReduceL1", "CumSum", "AveragePool", "GlobalAveragePool", shaped=True)
def _d_sum_like(slot, n, numel, c, ivs):
    return mag(n.budget / max(numel, 1)) if n.kind == "f" and slot == 0 else None


@_dom("ReduceSumSquare", "ReduceL2", "LpNormalization", "MeanVarianceNormalization", shaped=True)
def _d_square_like(slot, n, numel, c, ivs):
    return mag(math.sqrt(n.budget / max(numel, 1))) if n.kind == "f" and slot == 0 else None


@_dom("LpPool", "GlobalLpPool", shaped=True)
def _d_lppool(slot, n, numel, c, ivs):  # p <= 4
    return mag((n.budget / max(numel, 1)) ** 0.25) if n.kind == "f" else None


@_dom("ReduceProd", shaped=True)
def _d_prod(slot, n, numel, c, ivs):
    return mag(n.budget ** (1 / max(numel, 1))) if n.kind == "f" and slot == 0 else None


@_dom("ReduceLogSumExp", shaped=True)
def _d_lse(slot, n, numel, c, ivs):
    return Domain(-n.expmax, n.expmax - math.log(max(numel, 1))) if n.kind == "f" and slot == 0 else None


@_dom("LRN")
def _d_lrn(slot, n, numel, c, ivs):
    return mag(math.sqrt(n.budget / 9)) if n.kind == "f" else None


@_dom("MatMul")
def _d_matmul(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    return _quarter(n) if slot == 0 else _room(n, amax(ivs[0]) * c.s[-1])


@_dom("Gemm")
def _d_gemm(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    if slot == 0:
        return _quarter(n)
    if slot == 1:
        k = c.s[0] if c.attrs.get("transA") else c.s[1]
        return _room(n, amax(ivs[0]) * k * abs(c.attrs.get("alpha") or 1.0))
    return _room(n, abs(1.0 if c.attrs.get("beta") is None else c.attrs["beta"]))


def _d_conv_like(transpose: bool) -> DomainFn:
    def d(slot, n, numel, c, ivs):
        if n.kind != "f":
            return None
        if slot == 0:
            return _quarter(n)
        if slot == 1:
            g = c.attrs.get("group") or 1
            k = (c.s[1] // g) * math.prod(c.attrs["_k"])
            return _room(n, amax(ivs[0]) * k)
        return mag(n.budget)
    return d


DOMAINS["Conv"] = _d_conv_like(False)
DOMAINS["ConvTranspose"] = _d_conv_like(True)


@_dom("Einsum", shaped=True)
def _d_einsum(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    if slot == 0:
        return mag(n.budget / max(numel, 1))
    shapes = [c.s, c.attrs["_plan"][1]]
    return _room(n, amax(ivs[0]) * einsum_count(c.attrs["equation"], shapes))


@_dom("BatchNormalization")
def _d_batchnorm(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    return Domain(0.0, n.qroot) if slot == 4 else mag(n.qroot)


@_dom("InstanceNormalization", shaped=True)
def _d_instnorm(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    if slot == 0:
        return mag(math.sqrt(n.budget / max(numel, 1)))
    if slot == 1:
        return mag(n.budget / math.sqrt(max(math.prod(c.s[2:]), 1)))
    return mag(n.budget)


@_dom("LayerNormalization", "RMSNormalization", shaped=True)
def _d_layernorm(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    if slot == 0:
        return mag(math.sqrt(n.budget / max(numel, 1)))
    if slot == 1:
        axis = (c.attrs.get("axis") if c.attrs.get("axis") is not None else -1) % c.r
        return mag(n.budget / math.sqrt(math.prod(c.s[axis:])))
    return mag(n.budget)


def _d_scatter(hits: Callable[[Any], int]) -> DomainFn:
    """data within a quarter of the range; updates such that up to ``hits`` of them added to (or
    multiplied into) one element stay within it."""
    def d(slot, n, numel, c, ivs):
        if n.kind != "f":
            return None
        if slot == 0:
            return _quarter(n)
        red, m = c.attrs.get("reduction") or "none", max(1, hits(c))
        if red == "add":
            return mag(n.fmax / 4 / (m + 1))
        if red == "mul":
            return mag((n.fmax / 4 / max(amax(ivs[0]), 1.0)) ** (1 / m))
        return _quarter(n)
    return d


DOMAINS["ScatterElements"] = _d_scatter(lambda c: c.attrs["_ishape"][(c.attrs.get("axis") or 0) % c.r])
DOMAINS["ScatterND"] = _d_scatter(lambda c: math.prod(c.attrs["_lead"]))


@_dom("BitShift")
def _d_bitshift(slot, n, numel, c, ivs):  # shifting by the bit width or more is undefined
    return Domain(0.0, np_dtype(n.dtype).itemsize * 8 - 1.0) if slot == 1 and n.kind in "iu" else None


@_dom("ReduceLogSum", shaped=True)
def _d_logsum(slot, n, numel, c, ivs):  # a positive sum of positive terms, within the budget
    if slot != 0 or n.kind not in "fiu":
        return None
    if n.kind == "f":
        return Domain(n.pos, n.budget / max(numel, 1))
    return Domain(1.0, n.fmax / max(numel, 1))


@_dom("GridSample")
def _d_grid_sample(slot, n, numel, c, ivs):
    if slot == 0:
        return mag(n.fmax / 16) if n.kind == "f" else None
    if c.cfg.target == "ort" and n.dtype != c.ins[0].dtype:
        return REJECT  # ORT: kernels only with X and grid of one type
    return Domain(-1.0, 1.0)  # normalized positions (beyond them: padding_mode)



# operators whose domains of slots after the first read the context (earlier inputs, attributes)
CONTEXTUAL = frozenset({"Mul", "PRelu", "Div", "Mod", "Pow", "MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum",
                        "InstanceNormalization", "LayerNormalization", "RMSNormalization", "ScatterElements",
                        "ScatterND",
                        "GridSample"})
# operators whose transfer functions read constant inputs (the others' are not computed)
READS_CONSTANTS = frozenset({"Clip", "Pad", "CumSum", "OneHot", "Range"})
_CACHE: dict[tuple[str, int, str, int], Domain | None] = {}
_MISS = Domain(0.0, 0.0, 0.0, (0.0, 0.0))


def contextual(op: str, slot: int) -> bool:
    """Whether the slot's domain depends on more than the candidate's dtype and element count."""
    return slot > 0 and op in CONTEXTUAL


def domain(op: str, slot: int, dtype: str, numel: int, c: Any, ivs: list) -> Domain | None:
    """The domain of input ``slot`` (spec input index) of ``op`` for a candidate of ``dtype`` with
    ``numel`` elements; float slots always require finite values (except NaN-safe operators).
    Domains that do not depend on the context are cached."""
    cached = not contextual(op, slot)
    if cached:
        key = (op, slot, dtype, numel if slot == 0 and op in SHAPED else 0)
        d = _CACHE.get(key, _MISS)
        if d is not _MISS:
            return d
    n = num(dtype)
    fn = DOMAINS.get(op)
    d = fn(slot, n, numel, c, ivs) if fn is not None else None
    if d is not REJECT and n.kind == "f" and op not in NAN_SAFE:
        fin = mag(n.fmax)
        d = fin if d is None else d.meet(fin)
    if cached:
        _CACHE[key] = d
    return d


# ---------------------------------------------------------------------------------------------
# Quantization, recurrent, signal, region-pooling operators and GroupNormalization (spec/quant.py,
# rnn.py, signal.py, pool.py, norm.py): their transfer functions and domains, kept in this block
# ---------------------------------------------------------------------------------------------
_reg("MaxUnpool", "MaxRoiPool")(lambda c: [hull(c.x, (0.0, 0.0))])  # values moved, zeros elsewhere


@_reg("RoiAlign")
def _roi_align(c: Call) -> list[Iv]:
    """avg: a mean of bilinear samples (convex weights; 0 outside the map); max (ORT): the largest
    weighted corner value.  Both lie in hull(x, 0), up to rounding over the samples."""
    k = _numel(c.types[0])
    return [widen(hull(c.x, (0.0, 0.0)), c.n, 16 + 4 * k, absolute=16 + 4 * k, keep_sign=True)]


@_reg("GroupNormalization")
def _groupnorm(c: Call) -> list[Iv]:
    t = c.types[0]
    k = math.prod(t.shape[1:]) // c.a("num_groups", 1)  # type: ignore[union-attr]
    return [_affine(_normalized(c, k), c.ivs[1], c.ivs[2], c.n)]


@_reg("AffineGrid")
def _affine_grid(c: Call) -> list[Iv]:
    """theta (k x k+1) times homogeneous positions with coordinates in [-1, 1]."""
    k = c.types[0].shape[1]  # type: ignore[union-attr]
    r = (k + 1) * amax(c.x)
    return [widen((-r, r), c.n, 8 + 4 * k)]


@_dom("AffineGrid")
def _d_affine_grid(slot, n, numel, c, ivs):
    return mag(n.fmax / 16) if slot == 0 and n.kind == "f" else None


def _attn_scores(c: Call) -> float:
    """A bound on |Q K^T| * scale over the head size (Q's last dimension, or hidden / q_num_heads)."""
    t = c.types[0]
    d = t.shape[3] if t.rank == 4 else t.shape[2] // c.a("q_num_heads", 1)  # type: ignore[union-attr]
    keys = amax(c.x) * max(amax(c.ivs[1]), amax(c.ivs[4]) if len(c.ivs) > 4 and c.ivs[4] else 0.0)  # type: ignore
    return d * keys * c.a("scale", 1 / math.sqrt(d))


@_reg("Attention")
def _attention(c: Call) -> list[Iv]:
    """Y: a convex combination of the values (0 for a fully masked row); the presents: past and new
    keys / values; qk_matmul_output: the scaled scores (after softcap: within it; with the mask
    added, mode 2, which never holds -inf; the probabilities, mode 3)."""
    past_v = c.ivs[5] if len(c.ivs) > 5 and c.ivs[5] is not None else c.ivs[2]
    past_k = c.ivs[4] if len(c.ivs) > 4 and c.ivs[4] is not None else c.ivs[1]
    k = c.types[1]
    past = c.types[4].shape[2] if len(c.types) > 4 and c.types[4] is not None else 0  # type: ignore[union-attr]
    total = past + k.shape[2 if k.rank == 4 else 1]  # type: ignore[union-attr]
    vals = hull(c.ivs[2], past_v, (0.0, 0.0))  # type: ignore[arg-type]
    out = [widen(vals, c.n, 16 + 4 * total, absolute=16 + 4 * total), hull(c.ivs[1], past_k),  # type: ignore[arg-type]
           hull(c.ivs[2], past_v)]  # type: ignore[arg-type]
    mode, cap = c.a("qk_matmul_output_mode", 0), c.a("softcap", 0.0)
    r = _attn_scores(c)
    if mode >= 1 and cap:
        r = min(r, cap)
    if mode == 2:
        r += amax(c.ivs[3]) if len(c.ivs) > 3 and c.ivs[3] is not None else 0.0  # type: ignore[arg-type]
    qk = (0.0, 1.0) if mode == 3 else (-r, r)
    return [*out, widen(qk, c.n, 16 + 4 * total, absolute=16)][:len(c.outs)]


@_dom("Attention")
def _d_attention(slot, n, numel, c, ivs):
    """Scores (a sum over the head size of products of Q and K) within the budget; values, masks and
    caches within it too."""
    if n.kind != "f":
        return None
    if slot == 0:
        return mag(math.sqrt(n.budget) / 8)
    if slot in (1, 4):
        d = c.s[3] if c.r == 4 else c.s[2] // c.attrs["_qh"]
        return _room(n, amax(ivs[0]) * d)
    return mag(n.budget)


@_reg("DequantizeLinear")
def _dequantize(c: Call) -> list[Iv]:
    """(x - zero_point) * scale, the scale and zero point being constants."""
    zp = c.ivs[2] if len(c.ivs) > 2 and c.ivs[2] is not None else (0.0, 0.0)
    if c.ivs[1] is None:
        return [TOP]
    return [widen(mul(add(c.x, (-zp[1], -zp[0])), c.ivs[1]), c.n, 4)]


@_reg("DynamicQuantizeLinear")
def _dynamic_quantize(c: Call) -> list[Iv]:
    """y_scale = (max(0, max x) - min(0, min x)) / 255; ORT gives 1 for an all-zero x."""
    lo, hi = c.x
    top = widen((0.0, (max(0.0, hi) - min(0.0, lo)) / 255), num("float32"), 16)[1]
    return [(0.0, 255.0), (0.0, max(1.0, top)), (0.0, 255.0)]


def _shifted(x: Iv | None, zero_point: Iv | None) -> float:
    """max |x - zero_point| (an omitted zero point is 0)."""
    if x is None:
        return INF
    z = zero_point if zero_point is not None else (0.0, 0.0)
    return max(abs(x[0] - z[1]), abs(x[1] - z[0]))


def _iv(c: Call, k: int) -> Iv | None:
    return c.ivs[k] if len(c.ivs) > k else None


def _saturate(r: Iv, zero_point: Iv | None, n: Num) -> Iv:
    """saturate(round(r) + zero_point) in the output type (a float result within one unit of r)."""
    z = zero_point if zero_point is not None else (0.0, 0.0)
    lo, hi = math.floor(r[0]) - 1 + z[0], math.ceil(r[1]) + 1 + z[1]
    return (min(max(lo, n.lo), n.hi), max(min(hi, n.hi), n.lo))


@_reg("QuantizeLinear")
def _quantize(c: Call) -> list[Iv]:
    """saturate(round(x / y_scale) + y_zero_point), the scale (positive) and zero point constants; the
    division rounds in x's type (float16 at opset 19+)."""
    s = c.ivs[1]
    if s is None or s[0] <= 0 or not finite(c.x):
        return [(c.n.lo, c.n.hi)]
    ends = [x / y for x in c.x for y in s]
    q = (min(ends), max(ends))
    return [_saturate(widen(q, num(c.types[0].dtype), 8), _iv(c, 2), c.n)]  # type: ignore[union-attr]


def _integer_count(c: Call, w: int, conv: bool) -> int:
    """Terms per output of MatMulInteger / QLinearMatMul (B's inner dim) or of a convolution (C/group
    times the kernel), input ``w`` the weights."""
    shape = c.types[w].shape  # type: ignore[union-attr]
    if conv:
        return math.prod(shape[1:])
    return shape[-2] if len(shape) >= 2 else shape[0]


@_reg("MatMulInteger")
def _matmul_integer(c: Call) -> list[Iv]:
    """A sum of (a - a_zero_point) * (b - b_zero_point), exact in int32."""
    r = _integer_count(c, 1, False) * _shifted(c.x, _iv(c, 2)) * _shifted(c.ivs[1], _iv(c, 3))
    return [(-r, r)]


@_reg("ConvInteger")
def _conv_integer(c: Call) -> list[Iv]:
    """The same over C/group times the kernel's terms; a padded term reads 0 (or the zero point)."""
    r = _integer_count(c, 1, True) * _shifted(hull(c.x, (0.0, 0.0)), _iv(c, 2)) * _shifted(c.ivs[1], _iv(c, 3))
    return [(-r, r)]


def _qlinear(conv: bool) -> Transfer:
    def t(c: Call) -> list[Iv]:
        """saturate(round(sum((a - a_zp) * (b - b_zp)) [+ B] * a_scale * b_scale / y_scale) + y_zp)."""
        sa, sb, sy = c.ivs[1], c.ivs[4], c.ivs[6]
        if sa is None or sb is None or sy is None or sy[0] <= 0:
            return [(c.n.lo, c.n.hi)]
        a = hull(c.x, (0.0, 0.0)) if conv else c.x
        r = _integer_count(c, 3, conv) * _shifted(a, c.ivs[2]) * _shifted(c.ivs[3], c.ivs[5])
        if conv and _iv(c, 8) is not None:
            r += amax(c.ivs[8])  # type: ignore[arg-type]
        r = r * amax(sa) * amax(sb) / sy[0]
        r = r * (1 + 1e-5) + 1e-3  # the requantization's float rounding
        return [_saturate((-r, r), _iv(c, 7), c.n)]
    return t


TRANSFER["QLinearMatMul"] = _qlinear(conv=False)
TRANSFER["QLinearConv"] = _qlinear(conv=True)


@_reg("HannWindow", "HammingWindow", "BlackmanWindow")
def _window(c: Call) -> list[Iv]:
    """Values in [0, 1]; ORT computes them in float32 (also for a double output)."""
    if c.n.kind != "f":
        return [(0.0, 1.0)]
    e = 16 * max(c.n.eps, num("float32").eps)
    return [widen((-e, 1.0 + e), c.n, 16)]


@_reg("DFT")  # (spec/signal.py's dft_spec, once the DSL takes a first-input shape domain)
def _dft(c: Call) -> list[Iv]:
    """Each output is a sum of at most max(m, n) terms x * (cos or sin) over both parts, m the axis
    length and n the DFT length (an inverse transform divides by n, which the bound ignores; IRFFT
    rebuilds up to 2 (m - 1) terms from m bins).  Any axis but the last may be the transformed one."""
    m = max(c.types[0].shape[:-1])  # type: ignore[union-attr]
    k = max(2 * m, max(c.outs[0].shape[:-1]))
    r = 2 * k * amax(c.x)
    return [widen((-r, r), c.n, 8 + 8 * k, absolute=8 * k)]


@_dom("DFT", shaped=True)
def _d_dft(slot, n, numel, c, ivs):
    return mag(n.budget / (4 * max(numel, 16))) if n.kind == "f" and slot == 0 else None


# recurrent layers: a bound on |h| and |c| is carried through the steps
_RNN_DEFAULTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
_UNIT = ("Sigmoid", "HardSigmoid")  # gate values in [0, 1]


def _act_bound(name: str, v: float, alpha: float | None, beta: float | None) -> float:
    """max |f(u)| over |u| <= v (ONNX's recurrent activations; alpha/beta as given or defaulted)."""
    if name in ("Sigmoid", "HardSigmoid"):
        return 1.0
    if name in ("Tanh", "Softsign"):
        return min(1.0, v)
    a = 1.0 if alpha is None else abs(alpha)
    b = 1.0 if beta is None else abs(beta)
    if name == "ScaledTanh":
        return a * min(1.0, b * v)
    if name == "LeakyRelu":
        return v * max(1.0, 0.01 if alpha is None else a)
    if name == "Elu":
        return max(v, a)
    if name == "Softplus":
        return v + math.log(2.0)
    if name == "Affine":
        return a * v + b
    return v  # Relu, ThresholdedRelu


def _rnn_state(c: Call, op: str) -> tuple[float, float]:
    """Bounds on |h_t| and |c_t| over all steps and directions (initial state included)."""
    t = c.types[0]
    layout = c.a("layout", 0)
    steps, inp = t.shape[1 if layout else 0], t.shape[2]  # type: ignore[union-attr]
    hid = c.a("hidden_size", 1)
    ivs = list(c.ivs) + [None] * 8
    x, w, r = amax(c.x), amax(ivs[1]), amax(ivs[2])  # type: ignore[arg-type]
    b = 2 * amax(ivs[3]) if ivs[3] is not None else 0.0
    h0 = amax(ivs[5]) if ivs[5] is not None else 0.0
    c0 = amax(ivs[6]) if op == "LSTM" and ivs[6] is not None else 0.0
    p = amax(ivs[7]) if op == "LSTM" and ivs[7] is not None else 0.0
    k = len(_RNN_DEFAULTS[op])
    acts = c.attrs.get("activations") or _RNN_DEFAULTS[op] * 2
    alphas, betas = c.attrs.get("activation_alpha") or [None], c.attrs.get("activation_beta") or [None]
    clip = c.attrs.get("clip")
    grow = 1 + 16 * c.n.eps * (inp + hid + 8)  # rounding of each step's sums and products
    wx = inp * w * x
    hmax, cmax = h0, c0
    for d in range(0, len(acts), k):
        fs = acts[d:d + k]

        def f(j: int, v: float, fs=fs, clipped: bool = True) -> float:
            if clip is not None and clipped:
                v = min(v, clip)
            return _act_bound(fs[j], v, alphas[0], betas[0]) * grow
        unit = fs[0] in _UNIT
        h, cc = h0, c0
        for _ in range(steps):
            rh = hid * r * h
            if op == "RNN":
                h = f(0, wx + rh + b)
            elif op == "GRU":
                z = f(0, wx + rh + b)
                hh = f(1, wx + z * (rh + b) + b) if c.a("linear_before_reset", 0) else f(1, wx + z * rh + b)
                h = max(hh, h) if unit else ((1 + z) * hh + z * h) * grow
            else:
                gate = f(0, wx + rh + b + p * cc)
                forget = gate if not c.a("input_forget", 0) else (1.0 if unit else 1 + gate)
                cc = (forget * cc + gate * f(1, wx + rh + b)) * grow
                h = f(0, wx + rh + b + p * cc) * f(2, cc, clipped=False)  # ORT does not clip the cell state
            hmax, cmax = max(hmax, h), max(cmax, cc)
            if hmax > c.n.fmax or cmax > c.n.fmax:
                return INF, INF
    return hmax, cmax


def _recurrent(op: str) -> Transfer:
    def t(c: Call) -> list[Iv]:
        hm, cm = _rnn_state(c, op)
        out = [widen((-hm, hm), c.n, 16, absolute=16), widen((-hm, hm), c.n, 16, absolute=16),
               widen((-cm, cm), c.n, 16, absolute=16)]
        return out[:len(c.outs)]
    return t


for _op in ("RNN", "GRU", "LSTM"):
    TRANSFER[_op] = _recurrent(_op)


_GROWING = frozenset({"Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "Elu", "Softplus"})  # spec/rnn.py's UNBOUNDED


def _rnn_unbounded(c) -> bool:
    return any(a in _GROWING for a in c.attrs.get("activations") or ())


@_dom("RNN", "GRU", "LSTM")
def _d_recurrent(slot, n, numel, c, ivs):
    """Gate pre-activations stay within the budget.  Bounded activations keep |h| <= max(1, |h0|)
    (GRU: + 2 per step with a [-1, 1] gate) and |c| <= |c0| + steps; with unbounded ones (short
    sequences only) |R| <= 1 / hidden and small other inputs keep the growth geometric."""
    if n.kind != "f" or slot == 0:
        return None
    hid, inp = c.attrs["hidden_size"], c.s[2]
    steps = c.s[1] if c.attrs.get("layout") else c.s[0]
    small = n.budget / 1024
    if _rnn_unbounded(c):
        return {1: _room(n, amax(ivs[0]) * inp, small), 2: mag(1.0 / hid), 7: mag(1.0)}.get(slot, mag(small))
    if slot == 1:
        return _room(n, amax(ivs[0]) * inp)
    if slot == 2:
        return _room(n, hid * (2 * steps + 1))
    if slot == 5:
        return _room(n, amax(ivs[2]) * hid)
    if slot == 7:
        return _room(n, amax(ivs[6]) + steps if ivs[6] is not None else steps)
    return mag(n.budget)


@_dom("RoiAlign", shaped=True)
def _d_roi_align(slot, n, numel, c, ivs):
    return mag(n.budget / max(numel, 1)) if n.kind == "f" and slot == 0 else None


@_dom("GroupNormalization", shaped=True)
def _d_groupnorm(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    if slot == 0:
        return mag(math.sqrt(n.budget / max(numel, 1)))
    if slot == 1:
        return mag(n.budget / math.sqrt(max(math.prod(c.s[1:]) // c.attrs["num_groups"], 1)))
    return mag(n.budget)


@_dom("DequantizeLinear")
def _d_dequantize(slot, n, numel, c, ivs):
    """int32 data times a scale <= 1 stays finite in float16 (the opset-19 output type)."""
    return mag(2.0 ** 14) if slot == 0 and n.dtype == "int32" else None


@_dom("DynamicQuantizeLinear")
def _d_dynamic_quantize(slot, n, numel, c, ivs):
    """ONNX: y_scale = (max(0, max x) - min(0, min x)) / 255, and y = x / y_scale.  An all-zero x
    gives a zero scale, a division the spec leaves undefined (ORT returns scale 1, the reference
    1/255): the range must be non-degenerate, with a normal scale; max - min must not overflow."""
    if slot != 0 or n.kind != "f":
        return None
    return Domain(-n.fmax / 4, n.fmax / 4, spread=255 * n.pos)


@_dom("QLinearMatMul", "QLinearConv")
def _d_qlinear(slot, n, numel, c, ivs):
    """ORT registers int8 data only with int8 weights (uint8 data with either)."""
    if slot == 3 and c.cfg.target == "ort" and c.ins[0].dtype == "int8" and n.dtype != "int8":
        return REJECT
    return None


CONTEXTUAL = CONTEXTUAL | {"QLinearMatMul", "QLinearConv", "RNN", "GRU", "LSTM", "GroupNormalization", "Attention"}
READS_CONSTANTS = READS_CONSTANTS | {"DequantizeLinear", "Attention", "QuantizeLinear", "MatMulInteger", "ConvInteger",
                                     "QLinearMatMul", "QLinearConv"}


# ---------------------------------------------------------------------------------------------
# ONNX Runtime's contrib operators (spec/contrib.py, domain com.microsoft): their transfer functions
# and domains, kept in this block
# ---------------------------------------------------------------------------------------------
MS = "com.microsoft."


def _present(c: Call, k: int) -> bool:
    """Whether optional input k is given (constant inputs have no interval here: their type says)."""
    return len(c.types) > k and c.types[k] is not None


def _gelu_arg(c: Call) -> Iv:
    """X + bias (FastGelu's optional bias, BiasGelu's B)."""
    return widen(add(c.x, c.ivs[1]), c.n, 2) if _present(c, 1) else c.x  # type: ignore[arg-type]


TRANSFER[MS + "FastGelu"] = lambda c: [widen(_valley(_gelu_tanh, -0.75246, *_gelu_arg(c)), c.n, 16, absolute=16)]
TRANSFER[MS + "BiasGelu"] = lambda c: [widen(_valley(_gelu, -0.75179, *_gelu_arg(c)), c.n, 16, absolute=16)]


@_dom(MS + "FastGelu", MS + "BiasGelu")
def _d_gelu_bias(slot, n, numel, c, ivs):
    """X and the bias, and their sum, within the cube root of the range (FastGelu cubes the sum)."""
    return mag(n.fmax ** (1 / 3) / 4) if n.kind == "f" else None


def _inv_std(u: Iv, eps: float) -> Iv:
    """1 / sqrt(var + eps) of values in ``u`` (float32: the stash type of both normalizations)."""
    spread = (u[1] - u[0]) / 2
    return widen((1 / math.sqrt(spread * spread + eps), 1 / math.sqrt(eps / 2)), num("float32"), 64)


@_reg(MS + "SkipLayerNormalization")
def _skip_layernorm(c: Call) -> list[Iv]:
    """output: LayerNormalization of u = input + skip (+ bias) over H, times gamma (+ beta); mean and
    inv_std_var (float) of u; input_skip_bias_sum: u."""
    u = add(c.x, c.ivs[1])  # type: ignore[arg-type]
    if _present(c, 4):
        u = add(u, c.ivs[4])  # type: ignore[arg-type]
    u = widen(u, c.n, 4)
    h = c.types[0].shape[-1]  # type: ignore[union-attr]
    y = _affine(_normalized(c, h), c.ivs[2], c.ivs[3] if _present(c, 3) else None, c.n)
    f32 = num("float32")
    stats = [widen(u, f32, 64, absolute=64 * amax(u)), _inv_std(u, c.a("epsilon", 1e-12))]
    return [y, *stats, u][:len(c.outs)]


@_dom(MS + "SkipLayerNormalization", shaped=True)
def _d_skip_layernorm(slot, n, numel, c, ivs):
    """input, skip and bias: their sum's squares, summed, within the budget; gamma times the normalized
    values (within sqrt(H)) too."""
    if n.kind != "f":
        return None
    if slot in (0, 1, 4):
        return mag(math.sqrt(n.budget / max(numel if slot == 0 else c.x.numel, 1)) / 3)
    if slot == 2:
        return mag(n.budget / math.sqrt(c.s[-1]))
    return mag(n.budget)


@_reg(MS + "EmbedLayerNormalization")
def _embed_layernorm(c: Call) -> list[Iv]:
    """output: LayerNormalization of the summed embeddings (the segment's only with segment_ids)
    over H; mask_index: a count of ones in a row of S; embedding_sum: the sum."""
    u = add(c.ivs[2], c.ivs[3])  # type: ignore[arg-type]
    if _present(c, 1):
        u = add(u, c.ivs[4])  # type: ignore[arg-type]
    u = widen(u, c.n, 4)
    h = c.types[2].shape[1]  # type: ignore[union-attr]
    y = _affine(_normalized(c, h), c.ivs[5], c.ivs[6], c.n)
    return [y, (0.0, float(c.types[0].shape[1])), u][:len(c.outs)]  # type: ignore[union-attr]


@_dom(MS + "EmbedLayerNormalization")
def _d_embed_layernorm(slot, n, numel, c, ivs):
    """The embeddings: their sum's squares, summed over H, within the budget; gamma as in
    SkipLayerNormalization."""
    if n.kind != "f":
        return None
    h = c.attrs["_h"]
    if slot in (2, 3, 4):
        return mag(math.sqrt(n.budget / h) / 3)
    return mag(n.budget / math.sqrt(h)) if slot == 5 else mag(n.budget)


@_reg(MS + "MatMulInteger16")
def _matmul_int16(c: Call) -> list[Iv]:
    return [_contract(c.ivs[0], c.ivs[1], c.types[0].shape[-1], c.n)]  # type: ignore[arg-type,union-attr]


@_dom(MS + "MatMulInteger16")
def _d_matmul_int16(slot, n, numel, c, ivs):
    """B such that the int32 sums of K products of A and B cannot wrap (ORT: "the accumulation may
    overflow if and only if in 32 bits", which it leaves undefined)."""
    if slot != 1:
        return None
    return mag(min(n.fmax, (2.0 ** 31 - 1) / max(amax(ivs[0]) * c.s[-1], 1.0)))


@_reg(MS + "Attention")
def _ms_attention(c: Call) -> list[Iv]:
    """output: a convex combination of the values (input W + bias, and past's); present: the keys
    and values, past's and new."""
    proj = add(_contract(c.x, c.ivs[1], c.types[0].shape[2], c.n), c.ivs[2])  # type: ignore[arg-type,union-attr]
    kv = widen(hull(proj, c.ivs[4]) if _present(c, 4) else proj, c.n, 4)  # type: ignore[arg-type]
    total = c.outs[1].shape[3] if len(c.outs) > 1 else c.types[0].shape[1]  # type: ignore[union-attr]
    return [widen(kv, c.n, 16 + 4 * total, absolute=16 + 4 * total), kv][:len(c.outs)]


@_dom(MS + "Attention")
def _d_ms_attention(slot, n, numel, c, ivs):
    """Projections q, k (input W + bias) within Q = sqrt(budget / (4 head size)), so that the scores, a
    sum of head-size products q k (past keys within Q too), stay within the budget: the input within
    budget^(1/4) / 8, the weights keeping input_hidden products within Q / 2, the bias within Q / 2."""
    if n.kind != "f":
        return None
    if slot == 0:
        return mag(n.budget ** 0.25 / 8)
    q = math.sqrt(n.budget / (4 * c.attrs["_hd"]))
    if slot == 1:
        return mag(min(n.fmax / 4, q / 2 / max(amax(ivs[0]) * c.s[2], n.tiny)))
    if slot == 2:
        return mag(q / 2)
    return mag(q) if slot == 4 else mag(n.budget / 4)


CONTEXTUAL = CONTEXTUAL | {MS + op for op in ("SkipLayerNormalization", "EmbedLayerNormalization", "MatMulInteger16",
                                              "Attention")}

# ---------------------------------------------------------------------------------------------
# The registry's operators, each classified (tests/test_operator_record.py checks that every one is)
# ---------------------------------------------------------------------------------------------
# Operators without a transfer function, and why: their outputs get the type's whole range (unknown
# for floats, which no float slot accepts, so they would end every graph).  None today.
NO_TRANSFER: dict[str, str] = {}
# Operators that need no input domain: every finite input gives a finite, defined output within the
# type (selections, comparisons, bounded or monotone-in-range functions, integer operators that cannot
# overflow).  Float slots still require finite values.  Every operator is in DOMAINS or here.
_NO_DOMAIN = """
Abs Neg Ceil Floor Round Sigmoid Tanh Relu Sin Cos Tan Atan Erf Softsign Sign Identity Not BitwiseNot Mish Gelu
IsNaN IsInf ThresholdedRelu Clip Cast CastLike Equal Greater Less GreaterOrEqual LessOrEqual And Or Xor
BitwiseAnd BitwiseOr BitwiseXor Where Max Min ReduceMax ReduceMin ArgMax ArgMin Reshape Transpose Flatten
Squeeze Unsqueeze Expand Tile DepthToSpace SpaceToDepth Shape Size Range ConstantOfShape EyeLike Concat Split
Slice Gather GatherElements GatherND Pad Trilu ReverseSequence TopK OneHot Compress MaxPool GlobalMaxPool
MaxUnpool MaxRoiPool Softmax Hardmax Dropout QuantizeLinear MatMulInteger ConvInteger HannWindow HammingWindow
BlackmanWindow NonZero Unique NonMaxSuppression SplitToSequence+ConcatFromSequence
SplitToSequence+SequenceLength SequenceConstruct+SequenceAt SequenceConstruct+SequenceLength
SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence SequenceEmpty+SequenceInsert+SequenceAt
Optional+OptionalGetElement Optional+OptionalHasElement If
"""
NO_DOMAIN = frozenset(_NO_DOMAIN.split())
