"""Shape operators: reshaping, permuting, broadcasting and tiling tensors, reading shapes, and making
tensors from shapes (Range, ConstantOfShape, EyeLike).

Range and ConstantOfShape compute their output shape from their first input's *values*, and the
first input of a spec is a data input: it is pinned to one value ``v`` drawn per call (``_pin``), so
it is either a new runtime input that holds exactly ``v`` or an existing tensor whose value interval
is the single point ``v`` (e.g. the Shape of a tensor whose dims are all ``v``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcfuzz.ir import DTYPE_OF_CODE, DTYPES, ONNX_CODE, TensorType
from dlcfuzz.ir.hints import random_array
from dlcfuzz.spec.dsl import (
    BOOL,
    Axes,
    Broadcast,
    Choice,
    Const,
    Dom,
    In,
    Int,
    Maybe,
    OneOf,
    OpSpec,
    Perm,
    Seq,
    broadcast_shapes,
    divisors,
    i64,
)

NONE = Choice((None,))  # the attribute / optional input is always omitted


# ---------------------------------------------------------------------------------------------
# Local domains
# ---------------------------------------------------------------------------------------------



@dataclass(frozen=True, slots=True)
class Factors(Dom):
    """An ordered factorisation of ``n`` into ``k`` positive factors."""

    n: int
    k: int

    def sample(self, rng: random.Random) -> list[int]:
        if self.k == 0:
            return []
        out, rest = [], self.n
        for _ in range(self.k - 1):
            d = rng.choice(divisors(rest))
            out.append(d)
            rest //= d
        out.append(rest)
        rng.shuffle(out)
        return out

    def __contains__(self, v: Any) -> bool:
        return len(v) == self.k and all(d >= 1 for d in v) and math.prod(v) == self.n

    def size(self) -> int:
        return len(divisors(self.n)) ** max(0, self.k - 1)


@dataclass(frozen=True, slots=True)
class ShapeOf(Dom):
    """A shape drawn from a ShapeDom, as a value domain (for shape-like Const inputs)."""

    shapes: Broadcast

    def sample(self, rng: random.Random) -> list[int]:
        return list(self.shapes.sample(rng))

    def __contains__(self, v: Any) -> bool:
        return self.shapes.accepts(tuple(v))

    def size(self) -> int:
        return 2 ** len(self.shapes.shape) * (self.shapes.max_rank + 1)


def maybe_axes(universe, rank: int) -> Dom:
    """1.. of the given axes, or omitted (None); always omitted when there is none to pick."""
    return Maybe(Axes(rank, 1, among=tuple(universe)), 0.3) if universe else NONE


def norm(axes, rank: int) -> list[int]:
    return sorted(a + rank if a < 0 else a for a in axes)


def out_shape(fn):
    """An ``out`` giving one tensor of the first input's dtype and shape ``fn(c)``."""
    return lambda c: [TensorType(tuple(fn(c)), c.T)]


def axes_const() -> Const:
    return Const("axes", lambda c: None if c._axes is None else i64(c._axes))


# ---------------------------------------------------------------------------------------------
# Per-operator domains and output shapes
# ---------------------------------------------------------------------------------------------
def _reshape_code(c) -> Seq:
    """Each target dim as itself, 0 (copy the input dim: allowzero=0 only) or -1 (at most one)."""
    def item(i, prefix):
        d = c._dims[i]
        opts = [d, d]
        if c.allowzero != 1 and i < c.r and c.s[i] == d:
            opts.append(0)
        if -1 not in prefix:
            opts.append(-1)
        return Choice(opts)
    return Seq(c._rank, item)


def _flatten(c) -> tuple[int, int]:
    a = 1 if c.axis is None else c.axis
    a = a + c.r if a < 0 else a
    return math.prod(c.s[:a]), math.prod(c.s[a:])


def _squeeze(c) -> list[int]:
    if c._axes is None:
        return [d for d in c.s if d != 1]
    drop = set(norm(c._axes, c.r))
    return [d for i, d in enumerate(c.s) if i not in drop]


def _unsqueeze(c) -> list[int]:
    n = c.r + c._k
    ones, rest = set(norm(c._axes, n)), iter(c.s)
    return [1 if j in ones else next(rest) for j in range(n)]


def _tile_repeats(c) -> Seq:
    """Per-dimension repeats, each within what the earlier ones left of the element budget."""
    budget = c.cfg.max_numel // c.x.numel
    return Seq(c.r, lambda i, prefix: Int(1, max(1, min(c.cfg.max_dim, budget // math.prod(prefix)))))


def _shape_start(c) -> int:
    s = 0 if c.start is None else c.start
    return min(max(s + c.r if s < 0 else s, 0), c.r)


def _shape_end(c) -> int:
    e = c.r if c.end is None else c.end
    return min(max(e + c.r if e < 0 else e, 0), c.r)


def _shape_end_dom(c) -> Dom:
    """end (negative or past the rank: clamped) such that the slice keeps >= 1 dimension."""
    s0, r = _shape_start(c), c.r
    return Maybe(Choice([*range(s0 - r + 1, 0), *range(s0 + 1, r + 3)]))


def _bcast_ok(a, b) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b), strict=False))


def _pin(lo, hi):
    """A first input's hint (a function of ``c``): all its values equal one integer ``v`` in [lo(c), hi(c)],
    drawn per call and kept on the context as ``c._v``."""
    def hint(c) -> dict[str, int]:
        v = c.rng.randint(lo(c), hi(c))
        c.set("_v", v)
        return {"min": v, "max": v}
    return hint


# -- Range: start (pinned) + delta * i for i < n, with limit in (start + (n-1) delta, start + n delta] --
def _range_deltas(c) -> Choice:
    ints = (1, 2, 3, -1, -2, -3)
    return Choice(ints + ((0.5, 0.25, 1.5, -0.5, -0.25) if c.T.startswith("float") else ()))


def _range_past(c) -> Choice:
    """How far past the last element the limit lies, in (0, |delta|]: exact in every type."""
    d = abs(c._delta)
    return Choice(range(1, int(d) + 1) if isinstance(c._delta, int) else (d / 2, d))


def _range_limit(c):
    return c._v + c._delta * (c._n - 1) + math.copysign(c._past, c._delta)


def _range_count(c) -> int:
    """ONNX: max(ceil((limit - start) / delta), 0), in exact arithmetic."""
    from fractions import Fraction
    q = (Fraction(_range_limit(c)) - c._v) / Fraction(c._delta)
    return max(math.ceil(q), 0)


# -- ConstantOfShape: a shape vector of length k (<= 5, the max rank) whose entries all equal v --
SHAPE_ROOM = 819  # a room of 4096 // 819 = 5 elements: shape vectors of at most 5 entries (the default max rank)


def _cos_vmax(c) -> int:
    """The largest v (<= max_dim) with v ** k <= max_numel for every shape vector length k the room allows."""
    k, v = max(1, c.cfg.max_numel // SHAPE_ROOM), 1
    while v < c.cfg.max_dim and (v + 1) ** k <= c.cfg.max_numel:
        v += 1
    return v


def _cos_value(c):
    """The value attribute: a one-element tensor of any dtype, or omitted (a float32 zero)."""
    return Maybe(Choice(c.cfg.dtypes or DTYPES), 0.2)


def _cos_tensor(c) -> np.ndarray | None:
    if c._vtype is None:
        return None
    return random_array(c.np, TensorType((1,), c._vtype))


def _cos_out(c) -> list[TensorType]:
    dtype = "float32" if c.value is None else c.value.dtype.name
    return [TensorType((c._v,) * c.s[0], dtype)]


# -- EyeLike --
_EYE_ORT = ("float32", "float64", "int32", "int64", "uint64")  # ORT: T1 and T2 kernels


def _eye_dtype(c) -> Dom:
    allowed = _EYE_ORT if c.cfg.target == "ort" else DTYPES
    codes = [ONNX_CODE[d] for d in allowed if not c.cfg.dtypes or d in c.cfg.dtypes]
    return Maybe(Choice(codes), 0.4) if codes else NONE


def _eye_k(c) -> Dom:
    rows, cols = c.s
    far = Choice((-(2 ** 63), -(2 ** 40), 2 ** 40, 2 ** 63 - 1))  # far outside: all zeros (up to the int64 limits)
    return Maybe(OneOf((Int(-rows - 1, cols + 1), far)), 0.3)


# ---------------------------------------------------------------------------------------------
SPECS: list[OpSpec] = [
    OpSpec("Reshape", "shape", [In("data", rank=(0, 99)), Const("shape", lambda c: i64(c._code))],
           out_shape(lambda c: c._dims),
           attrs={
               # the target shape: its rank, then a factorisation of the element count
               "_rank": lambda c: Int(0 if c.x.numel == 1 else 1, c.cfg.max_rank),
               "_dims": lambda c: Factors(c.x.numel, c._rank),
               "allowzero": Maybe(BOOL),
               "_code": _reshape_code,
           },
           checks={
               "element count preserved": lambda c: math.prod(c._dims) == c.x.numel,
               "at most one -1": lambda c: c._code.count(-1) <= 1,
               "entries >= -1": lambda c: all(v >= -1 for v in c._code),
               "0 copies an input dim": lambda c: all(i < c.r for i, v in enumerate(c._code) if v == 0),
               "allowzero=1 without 0": lambda c: c.allowzero != 1 or 0 not in c._code,
           },
           since=14),
    OpSpec("Transpose", "shape", [In("data", rank=(0, 99))],
           out_shape(lambda c: [c.s[p] for p in (c.perm if c.perm is not None else range(c.r - 1, -1, -1))]),
           attrs={"perm": lambda c: Maybe(Perm(c.r)) if c.r else NONE},
           checks={"perm is a permutation": lambda c: c.perm is None or sorted(c.perm) == list(range(c.r))},
           since=13),
    OpSpec("Flatten", "shape", [In("input", rank=(0, 99))], out_shape(_flatten),
           # the default axis 1 is out of range for a scalar, so a scalar takes an explicit axis 0
           attrs={"axis": lambda c: Maybe(Int(-c.r, c.r)) if c.r else Choice((0,))},
           checks={"axis in [-r, r]": lambda c: -c.r <= (1 if c.axis is None else c.axis) <= c.r},
           since=13),
    OpSpec("Squeeze", "shape", [In("data", rank=(0, 99)), axes_const()], out_shape(_squeeze),
           attrs={"_axes": lambda c: maybe_axes([i for i, d in enumerate(c.s) if d == 1], c.r)},
           checks={
               "axes in [-r, r-1]": lambda c: c._axes is None or all(-c.r <= a < c.r for a in c._axes),
               "axes unique": lambda c: c._axes is None or len(set(norm(c._axes, c.r))) == len(c._axes),
               "squeezed dims are 1": lambda c: c._axes is None or all(c.s[a] == 1 for a in c._axes),
           },
           since=13),
    OpSpec("Unsqueeze", "shape", [In("data", rank=lambda c: (0, c.cfg.max_rank - 1)), axes_const()],
           out_shape(_unsqueeze),
           attrs={
               "_k": lambda c: Int(1, c.cfg.max_rank - c.r),  # how many dims to insert
               "_axes": lambda c: Axes(c.r + c._k, c._k, c._k),
           },
           checks={
               "axes in [-r', r'-1]": lambda c: all(-c.r - c._k <= a < c.r + c._k for a in c._axes),
               "axes unique": lambda c: len(set(norm(c._axes, c.r + c._k))) == len(c._axes),
           },
           since=13),
    OpSpec("Expand", "shape", [In("input", rank=(0, 99)), Const("shape", lambda c: i64(c._shape))],
           out_shape(lambda c: broadcast_shapes(c.s, tuple(c._shape))),
           attrs={"_shape": lambda c: ShapeOf(c.bcast(c.s))},
           checks={
               "shape broadcasts with input": lambda c: _bcast_ok(c.s, c._shape),
               "shape entries >= 1": lambda c: all(d >= 1 for d in c._shape),
           },
           since=13),
    OpSpec("Tile", "shape", [In("input", rank=(0, 99), room=8), Const("repeats", lambda c: i64(c._repeats))],
           out_shape(lambda c: [d * k for d, k in zip(c.s, c._repeats, strict=True)]),
           attrs={"_repeats": _tile_repeats},
           checks={
               "one repeat per dim": lambda c: len(c._repeats) == c.r,
               "repeats >= 1": lambda c: all(k >= 1 for k in c._repeats),
           },
           since=13),
    OpSpec("DepthToSpace", "shape", [In("input", rank=(4, 4))],
           out_shape(lambda c: (c.s[0], c.s[1] // c.blocksize**2, c.s[2] * c.blocksize, c.s[3] * c.blocksize)),
           attrs={
               "blocksize": lambda c: Choice([b for b in divisors(c.s[1]) if c.s[1] % (b * b) == 0]),
               "mode": Maybe(Choice(("DCR", "CRD"))),
           },
           checks={"C divisible by blocksize^2": lambda c: c.s[1] % c.blocksize**2 == 0},
           since=13),
    OpSpec("SpaceToDepth", "shape", [In("input", rank=(4, 4))],
           out_shape(lambda c: (c.s[0], c.s[1] * c.blocksize**2, c.s[2] // c.blocksize, c.s[3] // c.blocksize)),
           attrs={"blocksize": lambda c: Choice([b for b in divisors(c.s[2]) if c.s[3] % b == 0])},
           checks={"H and W divisible by blocksize": lambda c: c.s[2] % c.blocksize == 0 == c.s[3] % c.blocksize},
           since=13),
    # a scalar's shape is empty: an output with a zero-length dim, which the fuzzer never makes
    OpSpec("Shape", "shape", [In("data", rank=(1, 99))],
           lambda c: [TensorType((_shape_end(c) - _shape_start(c),), "int64")],
           attrs={"start": lambda c: Maybe(Int(-c.r - 2, c.r - 1)), "end": _shape_end_dom},
           checks={"slice keeps >= 1 dim": lambda c: _shape_end(c) > _shape_start(c)},
           since=15),
    OpSpec("Size", "shape", [In("data", rank=(0, 99))], lambda c: [TensorType((), "int64")], since=13),
    OpSpec("Range", "shape",
           [In("start", rank=(0, 0), hint=_pin(lambda c: -2, lambda c: 2)),
            Const("limit", lambda c: np.array(_range_limit(c), dtype=c.T)),
            Const("delta", lambda c: np.array(c._delta, dtype=c.T))],
           lambda c: [TensorType((c._n,), c.T)],
           attrs={
               "_delta": _range_deltas,
               "_n": lambda c: Int(1, min(4 * c.cfg.max_dim, c.cfg.max_numel)),  # the output length
               "_past": _range_past,
           },
           checks={
               "start, limit, delta are scalars": lambda c: c.r == 0,
               "delta nonzero": lambda c: c._delta != 0,
               "output length is n >= 1": lambda c: _range_count(c) == c._n >= 1,
           },
           since=11),
    OpSpec("ConstantOfShape", "shape",
           [In("input", rank=(1, 1), room=SHAPE_ROOM,
               hint=_pin(lambda c: 1, _cos_vmax))],
           _cos_out,
           attrs={"_vtype": _cos_value, "value": lambda c: Choice((_cos_tensor(c),))},
           checks={
               "shape entries >= 0": lambda c: c._v >= 0,
               "output within the element budget": lambda c: c._v ** c.s[0] <= c.cfg.max_numel,
               "value has one element": lambda c: c.value is None or c.value.size == 1,
           },
           since=9),
    OpSpec("EyeLike", "shape", [In("input", rank=(2, 2))],
           lambda c: [TensorType(c.s, c.x.dtype if c.dtype is None else DTYPE_OF_CODE[c.dtype])],
           attrs={"dtype": _eye_dtype, "k": _eye_k},
           checks={"rank 2": lambda c: c.r == 2},
           since=9),
]
