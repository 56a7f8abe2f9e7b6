"""Shape operators: reshaping, permuting, broadcasting and tiling tensors, and reading shapes."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from dlcfuzz.ir import TensorType
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
]
