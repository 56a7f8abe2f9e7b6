"""Indexing operators: Concat, Split, Slice, Gather*, Pad, CumSum, Trilu, ReverseSequence, Scatter*,
TopK, OneHot, Compress.

Index-like inputs (split, starts/ends/axes/steps, indices, pads, k, sequence_lens) are constants
drawn in range; arrays drawn by a ``Const`` are kept on the context (``_keep``) so that the
checks can read them.
"""

from __future__ import annotations

import math

import numpy as np

from dlcfuzz.ir import INTS, TensorType
from dlcfuzz.ir.hints import random_array
from dlcfuzz.spec.dsl import (
    BOOL,
    Axes,
    Choice,
    Const,
    Dims,
    In,
    Int,
    Maybe,
    OneOf,
    OpSpec,
    Seq,
    Upto,
    axis_dom,
    divisors,
    i64,
)

TIND = Choice(("int32", "int64"))
I64 = np.iinfo(np.int64)
MAX_OUTS = 6  # at most this many Split outputs
MAX_PAD = 4  # at most this many elements added on one side of an axis


# ---------------------------------------------------------------------------------------------
# Local domains
# ---------------------------------------------------------------------------------------------









def dims_upto(c, budget: int):
    """Seq item: a fresh dimension keeping the product of the dimensions so far <= budget."""
    return lambda i, prefix: Int(1, max(1, min(c.cfg.max_dim, budget // math.prod(prefix))))


def _keep(c, name: str, arr: np.ndarray | None) -> np.ndarray | None:
    """Records a constant's value on the context (a solver variable) for the checks."""
    c.set(name, arr)
    return arr


def _in_bounds(idx: np.ndarray, dim: int) -> bool:
    return bool(np.all((idx >= -dim) & (idx < dim)))


def _ax(c, name: str = "axis", default: int = 0) -> int:
    a = getattr(c, name)
    return (default if a is None else a) % c.r


def _axis_ok(c, name: str = "axis") -> bool:
    a = getattr(c, name)
    return a is None or -c.r <= a < c.r


# ---------------------------------------------------------------------------------------------
# Concat
# ---------------------------------------------------------------------------------------------
def _concat_shape(c):
    """The next input: the first one's shape, except on the axis, within the element budget
    (``room=4`` on the first input leaves room for the 3 other inputs)."""
    ax = c.axis % c.r
    budget = c.cfg.max_numel // (c.x.numel // c.s[ax])
    used = sum(t.shape[ax] for t in c.ins)
    later = c.n - len(c.ins) - 1  # inputs still to come after this one
    return Dims([Upto(budget - used - later, c.cfg.max_dim) if i == ax else d for i, d in enumerate(c.s)])


def _concat_out(c) -> list[TensorType]:
    ax = c.axis % c.r
    s = list(c.s)
    s[ax] = sum(t.shape[ax] for t in c.ins)
    return [TensorType(tuple(s), c.T)]


CONCAT = OpSpec(
    "Concat", "index", [In("inputs", rank=(1, 99), room=4, variadic=True, shape=_concat_shape)], _concat_out,
    attrs={"axis": lambda c: axis_dom(c.r)}, arity=(1, 4), since=13,
    checks={
        "axis in [-r, r-1]": lambda c: -c.r <= c.axis < c.r,
        "inputs have the same rank": lambda c: all(t.rank == c.r for t in c.ins),
        "inputs agree except on axis": lambda c: all(
            t.shape[i] == c.s[i] for t in c.ins for i in range(c.r) if i != c.axis % c.r),
    })


# ---------------------------------------------------------------------------------------------
# Split
# ---------------------------------------------------------------------------------------------
def _split_counts(c):
    """Number of outputs: with a split input any count; omitted before opset 18, an equal split
    (a divisor); omitted since opset 18, num_outputs parts of ceil(d/n), the last one smaller
    but not empty."""
    d = c.s[_ax(c)]
    hi = min(d, MAX_OUTS)
    if c._given:
        return Int(1, hi)
    if c.cfg.opset < 18:
        return Choice([k for k in divisors(d) if k <= hi])
    return Choice([k for k in range(1, hi + 1) if (k - 1) * -(-d // k) < d])


def _split_parts(c):
    d, k = c.s[_ax(c)], c._k
    if not c._given:
        q = -(-d // k)
        return Choice([[q] * (k - 1) + [d - q * (k - 1)]])
    # a composition of d into k positive parts
    return Seq(k, lambda i, prefix: Int(1, d - sum(prefix) - (k - 1 - i)) if i < k - 1 else Int(
        d - sum(prefix), d - sum(prefix)))


def _split_out(c) -> list[TensorType]:
    ax = _ax(c)
    return [TensorType(tuple(p if i == ax else n for i, n in enumerate(c.s)), c.T) for p in c._parts]


SPLIT = OpSpec(
    "Split", "index",
    [In("input", rank=(1, 99)), Const("split", lambda c: _keep(c, "_split", i64(c._parts) if c._given else None))],
    _split_out,
    attrs={
        "axis": lambda c: Maybe(axis_dom(c.r)),
        "_given": BOOL,  # whether the split input is given
        "_k": _split_counts,
        "num_outputs": lambda c: Choice((c._k,) if c.cfg.opset >= 18 and not c._given else (None,)),
        "_parts": _split_parts,
    },
    since=13,
    checks={
        "axis in [-r, r-1]": _axis_ok,
        "split sums to the axis length": lambda c: c._split is None or int(c._split.sum()) == c.s[_ax(c)],
        "split or num_outputs, not both (opset 18)": lambda c: c.cfg.opset < 18 or (
            (c._split is None) != (c.num_outputs is None)),
        "equal split divides the axis (opset < 18)": lambda c: c.cfg.opset >= 18 or c._split is not None or (
            c.s[_ax(c)] % c._k == 0),
        "no empty output": lambda c: all(p >= 1 for p in c._parts),
        "num_outputs is the number of outputs": lambda c: c.outs is None or c.num_outputs in (None, c.outs),
    })


# ---------------------------------------------------------------------------------------------
# Slice
# ---------------------------------------------------------------------------------------------
def _slice_axes(c):
    if c._has_axes:
        return Axes(c.r, 1, c.r)
    return Int(1, c.r)  # axes omitted: starts/ends cover axes 0..k-1


def _axes_list(c) -> list[int]:
    return c._axes if c._has_axes else list(range(c._axes))


def _slice_steps(c):
    k = len(_axes_list(c))
    if not c._has_steps:
        return Choice([[1] * k])
    return Seq(k, lambda i, prefix: Choice((-3, -2, -1, 1, 2, 3)))


def _slice_range(c):
    """Effective (clamped) start and end per axis, never an empty range."""
    dims = [c.s[a] for a in _axes_list(c)]

    def item(i, prefix):
        d, st = dims[i], c._steps[i]
        if st > 0:
            return Seq(2, lambda j, se: Int(0, d - 1) if j == 0 else Int(se[0] + 1, d))
        return Seq(2, lambda j, se: Int(0, d - 1) if j == 0 else Int(-1, se[0] - 1))
    return Seq(len(dims), item)


def _written(c, which: int):
    """How each effective start (which=0) or end (which=1) is written: as is, from the back,
    or out of range so that clamping yields it (up to INT_MIN / INT_MAX of the index type)."""
    info = np.iinfo(c._tind)
    axes = _axes_list(c)

    def item(i, prefix):
        d, st, v = c.s[axes[i]], c._steps[i], c._eff[i][which]
        # the clamp bounds: [0, d] stepping forward; [0, d-1] (start) or [-1, d-1] (end) backward
        lo_clamp = -1 if (which == 1 and st < 0) else 0
        hi_clamp = d if st > 0 else d - 1
        ways = []
        if 0 <= v < d:
            ways += [v, v - d]
        if v == hi_clamp:
            ways += [max(d, v), d + 2, int(info.max)]
        if v == lo_clamp:
            ways += [-d - 1, -d - 3, int(info.min)]
        return Choice(ways)
    return Seq(len(axes), item)


def _eff_range(start: int, end: int, step: int, d: int) -> range:
    """ONNX Slice semantics: adjust negatives, clamp by step direction."""
    start, end = (start + d if start < 0 else start), (end + d if end < 0 else end)
    if step > 0:
        start, end = min(max(start, 0), d), min(max(end, 0), d)
    else:
        start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
    return range(start, end, step)


def _slice_shape(c) -> tuple[int, ...]:
    s = list(c.s)
    for a, b, e, st in zip(_axes_list(c), c._starts, c._ends, c._steps, strict=True):
        s[a] = len(_eff_range(b, e, st, c.s[a]))
    return tuple(s)


def _tind_arr(c, values) -> np.ndarray:
    return np.array(values, dtype=c._tind)


SLICE = OpSpec(
    "Slice", "index",
    [In("data", rank=(1, 99)),
     Const("starts", lambda c: _tind_arr(c, c._starts)),
     Const("ends", lambda c: _tind_arr(c, c._ends)),
     Const("axes", lambda c: _tind_arr(c, c._axes) if c._has_axes else None),
     Const("steps", lambda c: _tind_arr(c, c._steps) if c._has_steps else None)],
    lambda c: [TensorType(_slice_shape(c), c.T)],
    attrs={
        "_tind": TIND,
        "_has_axes": BOOL,
        "_axes": _slice_axes,
        "_has_steps": BOOL,
        "_steps": _slice_steps,
        "_eff": _slice_range,
        "_starts": lambda c: _written(c, 0),
        "_ends": lambda c: _written(c, 1),
    },
    since=13,
    checks={
        "axes in [-r, r-1] and distinct": lambda c: not c._has_axes or c._axes in Axes(c.r, 1, c.r),
        "starts, ends, axes, steps of one length": lambda c: len(c._starts) == len(c._ends) == len(
            _axes_list(c)) == len(c._steps),
        "steps nonzero": lambda c: 0 not in c._steps,
        "no empty output dimension": lambda c: 0 not in _slice_shape(c),
    })


# ---------------------------------------------------------------------------------------------
# Gather, GatherElements, GatherND
# ---------------------------------------------------------------------------------------------
def _gather_ishape(c):
    d = c.s[_ax(c)]
    return Seq(c._q, dims_upto(c, c.cfg.max_numel // (c.x.numel // d)))


def _gather_out(c) -> list[TensorType]:
    ax = _ax(c)
    return [TensorType(c.s[:ax] + tuple(c._ishape) + c.s[ax + 1:], c.T)]


GATHER = OpSpec(
    "Gather", "index",
    [In("data", rank=(1, 99)),
     Const("indices", lambda c: _keep(c, "_indices", c.np.integers(
         -c.s[_ax(c)], c.s[_ax(c)], size=tuple(c._ishape)).astype(c._tind)))],
    _gather_out,
    attrs={
        "axis": lambda c: Maybe(axis_dom(c.r)),
        "_tind": TIND,
        "_q": lambda c: Int(0, min(3, c.cfg.max_rank - c.r + 1)),  # indices rank; output rank r - 1 + q
        "_ishape": _gather_ishape,
    },
    since=13,
    checks={
        "axis in [-r, r-1]": _axis_ok,
        "indices in [-s, s-1]": lambda c: _in_bounds(c._indices, c.s[_ax(c)]),
        "output rank r - 1 + q <= max rank": lambda c: c.r - 1 + c._indices.ndim <= c.cfg.max_rank,
    })


def _ge_ishape(c):
    """Same rank as data; dims <= data's except on the axis, where any length within budget."""
    ax = _ax(c)
    axis_hi = max(1, min(c.cfg.max_dim, c.cfg.max_numel // (c.x.numel // c.s[ax])))
    return Seq(c.r, lambda i, prefix: Int(1, axis_hi) if i == ax else Int(1, c.s[i]))


GATHER_ELEMENTS = OpSpec(
    "GatherElements", "index",
    [In("data", rank=(1, 99)),
     Const("indices", lambda c: _keep(c, "_indices", c.np.integers(
         -c.s[_ax(c)], c.s[_ax(c)], size=tuple(c._ishape)).astype(c._tind)))],
    lambda c: [TensorType(tuple(c._ishape), c.T)],
    attrs={"axis": lambda c: Maybe(axis_dom(c.r)), "_tind": TIND, "_ishape": _ge_ishape},
    since=13,
    checks={
        "axis in [-r, r-1]": _axis_ok,
        "indices of the same rank": lambda c: c._indices.ndim == c.r,
        "indices dims <= data dims off the axis": lambda c: all(
            n <= c.s[i] for i, n in enumerate(c._indices.shape) if i != _ax(c)),
        "indices in [-s, s-1]": lambda c: _in_bounds(c._indices, c.s[_ax(c)]),
    })


def _gnd_b(c) -> int:
    return c.batch_dims or 0


def _gnd_ishape(c):
    """Indices shape: data's b batch dims, free dims within the budget, then m."""
    b, m = _gnd_b(c), c._m
    budget = c.cfg.max_numel // (math.prod(c.s[:b]) * math.prod(c.s[b + m:]))
    free = dims_upto(c, budget)
    return Seq(c._q, lambda i, prefix: Int(c.s[i], c.s[i]) if i < b else (
        Int(m, m) if i == c._q - 1 else free(i - b, prefix[b:])))


def _gnd_indices(c) -> np.ndarray:
    b, m = _gnd_b(c), c._m
    lead = tuple(c._ishape[:-1])
    cols = [c.np.integers(-c.s[b + j], c.s[b + j], size=(*lead, 1)) for j in range(m)]
    return _keep(c, "_indices", np.concatenate(cols, axis=-1).astype(np.int64))


def _gnd_ok(c) -> bool:
    b, idx = _gnd_b(c), c._indices
    m = idx.shape[-1]
    return all(_in_bounds(idx[..., j], c.s[b + j]) for j in range(m))


GATHER_ND = OpSpec(
    "GatherND", "index",
    [In("data", rank=(1, 99)), Const("indices", _gnd_indices)],
    lambda c: [TensorType(tuple(c._ishape[:-1]) + c.s[_gnd_b(c) + c._m:], c.T)],
    attrs={
        "batch_dims": lambda c: Maybe(Int(0, c.r - 1)),
        "_m": lambda c: Int(1, c.r - _gnd_b(c)),  # indices.shape[-1]
        # indices rank q > b, output rank q - 1 + r - b - m <= max rank
        "_q": lambda c: Int(_gnd_b(c) + 1, min(c.cfg.max_rank, _gnd_b(c) + 3,
                                               c.cfg.max_rank + 1 - (c.r - _gnd_b(c) - c._m))),
        "_ishape": _gnd_ishape,
    },
    since=13,
    checks={
        "batch_dims < min(q, r)": lambda c: _gnd_b(c) < min(c._indices.ndim, c.r),
        "leading batch dims equal": lambda c: c._indices.shape[:_gnd_b(c)] == c.s[:_gnd_b(c)],
        "indices last dim in [1, r - batch_dims]": lambda c: 1 <= c._indices.shape[-1] <= c.r - _gnd_b(c),
        "indices in [-s, s-1]": _gnd_ok,
    })


# ---------------------------------------------------------------------------------------------
# Pad
# ---------------------------------------------------------------------------------------------
def _pad_modes(c):
    return Maybe(Choice(("constant", "reflect", "edge") + (("wrap",) if c.cfg.opset >= 19 else ())))


def _pad_axes_list(c) -> list[int]:
    return [a % c.r for a in c._axes] if c._has_axes else list(range(c.r))


def _pad_pairs(c):
    """(begin, end) per padded axis.  Cropping keeps >= 1 element of the data on every axis
    (cropping past the data into the padding is ambiguous), growth keeps the output within
    max_numel, and reflect pads stay below the cropped length."""
    axes = _pad_axes_list(c)
    reflect = c.mode == "reflect"

    def item(i, prev):
        dims = list(c.s)
        for a, (b, e) in zip(axes, prev, strict=False):
            dims[a] += b + e
        d = c.s[axes[i]]
        max_out = c.cfg.max_numel // (math.prod(dims) // dims[axes[i]])
        if reflect:
            return Seq(2, lambda j, be: Int(1 - d, min(MAX_PAD, d - 1, max_out - d)) if j == 0 else Int(
                1 - d + abs(be[0]), min(MAX_PAD, d + min(be[0], 0) - 1, max_out - d - be[0])))
        return Seq(2, lambda j, be: Int(1 - d, min(MAX_PAD, max_out - d)) if j == 0 else Int(
            1 - d - min(be[0], 0), min(MAX_PAD, max_out - d - be[0])))
    return Seq(len(axes), item)


def _pad_shape(c) -> tuple[int, ...]:
    s = list(c.s)
    for a, (b, e) in zip(_pad_axes_list(c), c._pads, strict=True):
        s[a] += b + e
    return tuple(s)


def _pad_reflect_ok(c) -> bool:
    return c.mode != "reflect" or all(
        max(b, e) < c.s[a] + min(b, 0) + min(e, 0) for a, (b, e) in zip(_pad_axes_list(c), c._pads, strict=True))


PAD = OpSpec(
    "Pad", "index",
    [In("data", rank=(1, 99), room=2),
     Const("pads", lambda c: i64([b for b, _ in c._pads] + [e for _, e in c._pads])),
     Const("constant_value", lambda c: random_array(c.np, TensorType((), c.T)) if c._has_cv else None),
     # ONNX Pad-18+ shape inference parses axes as int64 only, although the schema allows int32
     Const("axes", lambda c: i64(c._axes) if c._has_axes else None)],
    lambda c: [TensorType(_pad_shape(c), c.T)],
    attrs={
        "mode": _pad_modes,
        "_has_axes": lambda c: BOOL if c.cfg.opset >= 18 else Choice((0,)),
        "_axes": lambda c: Axes(c.r, 1, c.r) if c._has_axes else Choice((None,)),
        "_pads": _pad_pairs,
        "_has_cv": BOOL,
    },
    since=13,
    checks={
        "axes in [-r, r-1] and distinct": lambda c: not c._has_axes or c._axes in Axes(c.r, 1, c.r),
        "pads has 2 entries per axis": lambda c: len(c._pads) == len(_pad_axes_list(c)),
        "crops keep >= 1 element": lambda c: all(
            c.s[a] + min(b, 0) + min(e, 0) >= 1 for a, (b, e) in zip(_pad_axes_list(c), c._pads, strict=True)),
        "reflect pads < cropped length": _pad_reflect_ok,
        "no empty output dimension": lambda c: 0 not in _pad_shape(c),
    })


# ---------------------------------------------------------------------------------------------
# CumSum, Trilu, ReverseSequence
# ---------------------------------------------------------------------------------------------
CUMSUM = OpSpec(
    "CumSum", "index",
    [In("x", rank=(1, 99)), Const("axis", lambda c: np.array(c._axis, dtype=c._tind))],
    lambda c: [c.x],
    attrs={"_axis": lambda c: axis_dom(c.r), "_tind": TIND, "exclusive": Maybe(BOOL), "reverse": Maybe(BOOL)},
    since=14,
    checks={"axis in [-r, r-1]": lambda c: -c.r <= c._axis < c.r})


def _trilu_k(c):
    """Any k: diagonals inside the matrix, just outside it, and far outside (up to int64 limits)."""
    rows, cols = c.s[-2], c.s[-1]
    far = Choice((int(I64.min), -(2**40), 2**40, int(I64.max)))
    return Maybe(OneOf((Int(-rows - 1, cols + 1), far)), 0.3)


TRILU = OpSpec(
    "Trilu", "index",
    [In("input", rank=(2, 99)), Const("k", lambda c: None if c._k is None else i64(c._k))],
    lambda c: [c.x],
    attrs={"upper": Maybe(BOOL), "_k": _trilu_k},
    since=14,
    checks={"rank >= 2": lambda c: c.r >= 2})


def _rs_batch(c) -> int:
    return 1 if c.batch_axis is None else c.batch_axis


def _rs_lens(c) -> np.ndarray:
    t = c.s[1 - _rs_batch(c)]
    # 0 leaves a sequence unchanged (the ONNX reference skips it explicitly): drawn now and then
    lo = 0 if c.rng.random() < 0.3 else 1
    return _keep(c, "_lens", c.np.integers(lo, t + 1, size=(c.s[_rs_batch(c)],)).astype(np.int64))


REVERSE_SEQUENCE = OpSpec(
    "ReverseSequence", "index",
    [In("input", rank=(2, 99)), Const("sequence_lens", _rs_lens)],
    lambda c: [c.x],
    attrs={
        "batch_axis": Maybe(BOOL),
        # time_axis defaults to 0, so it may be omitted only when batch_axis is 1
        "time_axis": lambda c: Maybe(Choice((0,))) if _rs_batch(c) == 1 else Choice((1,)),
    },
    since=10,
    checks={
        "rank >= 2": lambda c: c.r >= 2,
        "batch_axis and time_axis are 0 and 1": lambda c: {_rs_batch(c), c.time_axis or 0} == {0, 1},
        "sequence_lens has batch length": lambda c: c._lens.shape == (c.s[_rs_batch(c)],),
        "sequence_lens in [0, time length]": lambda c: bool(
            np.all((c._lens >= 0) & (c._lens <= c.s[1 - _rs_batch(c)]))),
    })


# ---------------------------------------------------------------------------------------------
# ScatterElements, ScatterND
# ---------------------------------------------------------------------------------------------
def _reductions(nd: bool):
    """none (the default; indices then must not repeat a target), add and mul; max and min since 18."""
    def dom(c):
        red = ["none", "add", "mul"] + (["max", "min"] if c.cfg.opset >= 18 else [])
        if c.cfg.target == "ort":
            if c.T == "float16":  # ORT: no float16 add / mul (nor max / min in ScatterND)
                red = [r for r in red if r == "none" or (r in ("max", "min") and not nd)]
            if c.T == "bool":  # ORT: no bool max / min
                red = [r for r in red if r not in ("max", "min")]
        return Maybe(Choice(red))
    return dom


def _unique(c) -> bool:
    return (c.reduction or "none") == "none"


def _write_negative(c, idx: np.ndarray, dims) -> np.ndarray:
    """Some in-range indices written from the back (idx - dim)."""
    return np.where(c.np.random(idx.shape) < 0.3, idx - dims, idx)


def _se_indices(c) -> np.ndarray:
    """Indices of the same rank as data, each dim <= data's; with reduction none, distinct along
    the axis within every line (a random prefix of a permutation of the axis per line)."""
    ax, d, shape = _ax(c), c.s[_ax(c)], tuple(c._ishape)
    if _unique(c):
        full = (*shape[:ax], d, *shape[ax + 1:])
        idx = np.take(np.argsort(c.np.random(full), axis=ax), range(shape[ax]), axis=ax)
    else:
        idx = c.np.integers(0, d, size=shape)
    return _keep(c, "_indices", _write_negative(c, idx, d).astype(c._tind))


def _se_distinct(c) -> bool:
    if not _unique(c):
        return True
    ax = _ax(c)
    idx = np.moveaxis(c._indices % c.s[ax], ax, -1).reshape(-1, c._indices.shape[ax])
    return all(len(set(row.tolist())) == len(row) for row in idx)


SCATTER_ELEMENTS = OpSpec(
    "ScatterElements", "index",
    [In("data", rank=(1, 99)), Const("indices", _se_indices), In("updates", shape=lambda c: tuple(c._ishape))],
    lambda c: [c.x],
    attrs={
        "axis": lambda c: Maybe(axis_dom(c.r)),
        "reduction": _reductions(False),
        "_tind": TIND,
        "_ishape": lambda c: Seq(c.r, lambda i, prefix: Int(1, c.s[i])),
    },
    since=16,
    checks={
        "axis in [-r, r-1]": _axis_ok,
        "indices and updates of data's rank": lambda c: c._indices.ndim == c.r == c.ins[2].rank,
        "updates shaped like indices": lambda c: c.ins[2].shape == c._indices.shape,
        "indices in [-s, s-1]": lambda c: _in_bounds(c._indices, c.s[_ax(c)]),
        "no repeated target without a reduction": _se_distinct,
        "max/min only since opset 18": lambda c: c.reduction not in ("max", "min") or c.cfg.opset >= 18,
    })


def _snd_lead(c):
    """indices.shape[:-1]: without a reduction at most as many k-tuples as distinct targets;
    updates (lead + data.shape[k:]) within the element budget."""
    rest = math.prod(c.s[c._k:])
    budget = math.prod(c.s[:c._k]) if _unique(c) else c.cfg.max_numel // rest
    return Seq(c._q - 1, dims_upto(c, budget))


def _snd_indices(c) -> np.ndarray:
    k, lead = c._k, tuple(c._lead)
    n, targets = math.prod(lead), math.prod(c.s[:k])
    flat = c.np.choice(targets, n, replace=False) if _unique(c) else c.np.integers(0, targets, size=n)
    idx = np.stack(np.unravel_index(flat, c.s[:k]), axis=-1).reshape(*lead, k)
    return _keep(c, "_indices", _write_negative(c, idx, np.array(c.s[:k])).astype(np.int64))


def _snd_distinct(c) -> bool:
    if not _unique(c):
        return True
    k = c._indices.shape[-1]
    rows = (c._indices % np.array(c.s[:k])).reshape(-1, k)
    return len({tuple(r) for r in rows.tolist()}) == len(rows)


SCATTER_ND = OpSpec(
    "ScatterND", "index",
    [In("data", rank=(1, 99)), Const("indices", _snd_indices),
     In("updates", shape=lambda c: tuple(c._lead) + c.s[c._k:])],
    lambda c: [c.x],
    attrs={
        "reduction": _reductions(True),
        "_k": lambda c: Int(1, c.r),  # indices.shape[-1]
        # indices rank q >= 1; updates rank q - 1 + r - k <= max rank
        "_q": lambda c: Int(1, min(3, c.cfg.max_rank + 1 - (c.r - c._k))),
        "_lead": _snd_lead,
    },
    since=16,
    checks={
        "indices last dim in [1, r]": lambda c: 1 <= c._indices.shape[-1] <= c.r,
        "updates shape is indices.shape[:-1] + data.shape[k:]": lambda c: c.ins[2].shape == (
            c._indices.shape[:-1] + c.s[c._indices.shape[-1]:]),
        "indices in [-s, s-1]": lambda c: all(
            _in_bounds(c._indices[..., j], c.s[j]) for j in range(c._indices.shape[-1])),
        "no repeated target without a reduction": _snd_distinct,
        "max/min only since opset 18": lambda c: c.reduction not in ("max", "min") or c.cfg.opset >= 18,
    })


# ---------------------------------------------------------------------------------------------
# TopK, OneHot, Compress
# ---------------------------------------------------------------------------------------------
def _topk_shape(c) -> tuple[int, ...]:
    ax = _ax(c, default=-1)
    return (*c.s[:ax], c._k, *c.s[ax + 1:])


TOPK = OpSpec(
    "TopK", "index",
    [In("X", rank=(1, 99)), Const("K", lambda c: i64([c._k]))],
    lambda c: [TensorType(_topk_shape(c), c.T), TensorType(_topk_shape(c), "int64")],
    attrs={
        "axis": lambda c: Maybe(axis_dom(c.r)),
        "_k": lambda c: Int(1, c.s[_ax(c, default=-1)]),
        "largest": Maybe(BOOL),
        # sorted=0 leaves the order of the k results undefined: only with k = 1, where it cannot matter
        "sorted": lambda c: Maybe(BOOL if c._k == 1 else Choice((1,))),
    },
    since=11,
    checks={
        "axis in [-r, r-1]": _axis_ok,
        "k in [1, axis length]": lambda c: 1 <= c._k <= c.s[_ax(c, default=-1)],
        "sorted=0 only when the order cannot matter": lambda c: c.sorted != 0 or c._k == 1,
    })

# ORT: OneHot kernels exist for these (indices, depth, values) type triples only
_ONEHOT_ORT = {
    "int64": (("int64", "int64"), ("float32", "int32"), ("int64", "float32"), ("float32", "float32"),
              ("int32", "float32")),
    "float32": (("int64", "int64"), ("float32", "float32")),
    "int32": (("int32", "float32"), ("float32", "float32")),
}
_NUMERIC = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _onehot_types(c):
    """(depth dtype, values dtype): values preferably in the configured dtype set."""
    if c.cfg.target == "ort":
        pairs = list(_ONEHOT_ORT.get(c.x.dtype, ()))
    else:
        pairs = [(d, v) for d in _NUMERIC for v in (*_NUMERIC, "bool")]
    wanted = [p for p in pairs if not c.cfg.dtypes or p[1] in c.cfg.dtypes]
    return Choice(wanted or pairs)


def _onehot_values(c) -> np.ndarray:
    dtype = c._types[1]
    if dtype == "bool":
        return np.array([False, True]) if c.rng.random() < 0.8 else np.array([True, False])
    return random_array(c.np, TensorType((2,), dtype))


def _onehot_shape(c) -> tuple[int, ...]:
    ax = (-1 if c.axis is None else c.axis) % (c.r + 1)
    return (*c.s[:ax], c._depth, *c.s[ax:])


ONE_HOT = OpSpec(
    "OneHot", "index",
    # ONNX shape inference wants indices of rank >= 1 (the operator's text does not say so)
    [In("indices", rank=lambda c: (1, c.cfg.max_rank - 1), room=2),
     Const("depth", lambda c: np.array([c._depth] if c._vec else c._depth, dtype=c._types[0])),
     Const("values", _onehot_values)],
    lambda c: [TensorType(_onehot_shape(c), c._types[1])],
    # integer indices only: ONNX says float indices are cast to int64, but ORT and the ONNX reference
    # turn a non-integral one into an all-off row (docs/discrepancies.md)
    types={"T1": INTS},
    attrs={
        "axis": lambda c: Maybe(Int(-c.r - 1, c.r)),
        "_types": _onehot_types,
        "_depth": lambda c: Int(1, max(1, min(2 * c.cfg.max_dim, c.cfg.max_numel // c.x.numel))),
        "_vec": BOOL,  # depth as a scalar or a 1-element vector
    },
    since=11,
    checks={
        "axis in [-r-1, r]": lambda c: c.axis is None or -c.r - 1 <= c.axis <= c.r,
        "depth >= 1": lambda c: c._depth >= 1,
        "values has 2 elements": lambda c: c.ins[2].shape == (2,),
    })


def _compress_cond(c) -> np.ndarray:
    """A condition of length <= the axis length (or the element count), with at least one True."""
    cond = c.np.random(c._len) < c.rng.choice((0.3, 0.6, 0.9))
    cond[c.rng.randrange(c._len)] = True
    return _keep(c, "_cond", cond)


def _compress_shape(c) -> tuple[int, ...]:
    n = int(c._cond.sum())
    if c.axis is None:
        return (n,)
    ax = c.axis % c.r
    return (*c.s[:ax], n, *c.s[ax + 1:])


COMPRESS = OpSpec(
    "Compress", "index",
    [In("input", rank=(1, 99)), Const("condition", _compress_cond)],
    lambda c: [TensorType(_compress_shape(c), c.T)],
    attrs={
        "axis": lambda c: Maybe(axis_dom(c.r), 0.3),  # omitted: the flattened input
        "_len": lambda c: Int(1, c.x.numel if c.axis is None else c.s[c.axis % c.r]),
    },
    since=11,
    checks={
        "axis in [-r, r-1]": _axis_ok,
        "condition no longer than the input": lambda c: len(c._cond) <= (
            c.x.numel if c.axis is None else c.s[c.axis % c.r]),
        "condition selects something": lambda c: bool(c._cond.any()),
    })


SPECS: list[OpSpec] = [
    CONCAT, SPLIT, SLICE, GATHER, GATHER_ELEMENTS, GATHER_ND, PAD, CUMSUM, TRILU, REVERSE_SEQUENCE,
    SCATTER_ELEMENTS, SCATTER_ND, TOPK, ONE_HOT, COMPRESS,
]
