"""Pooling over 1-3 spatial dimensions (X is N x C x D1 ... Dn): MaxPool, AveragePool, LpPool,
the global pools and MaxUnpool; region pooling over images (RoiAlign, MaxRoiPool).  Window
attributes are drawn as in conv.py (strides, kernel, dilations, pads, then ceil_mode), each in
terms of the earlier ones so that every output length is >= 1.

Where ONNX shape inference (1.23) and ONNX Runtime disagree, the domains keep to the region
where both give the same, documented output shape (each such place is marked "ORT" or "ONNX"):
pads < kernel (ORT), SAME with non-negative pads and no dilation of a kernel > 1 (ORT), and
ceil_mode only where the last window starts inside the input or left pad (ORT drops it, ONNX
shape inference does not).

MaxUnpool's indices are a constant laid out as MaxPool's Indices would be: distinct flat indices
into the output, one position of each window (the pads keep a position for every window), so
no two elements race for one output.  RoiAlign's and MaxRoiPool's regions are constants inside
the image, their batch indices in range.
"""

from __future__ import annotations

import math

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.conv import AUTO_PADS, DMAX, KMAX, SMAX, at, eff, fixed, is_same, mode, nsp, pad, pad_flag, pad_seq
from dlcfuzz.spec.dsl import BOOL, Choice, Const, In, Int, Maybe, OpSpec, Seq, i64, ints


def _kernel(c, j: int) -> Int:
    n, s = c.s[2 + j], at(c, "strides", j, 1)
    if mode(c) == "VALID":
        return Int(1, min(KMAX, n))
    if is_same(c):  # ORT: SAME pads (ceil(n/s)-1)*s + k - n must be >= 0 ("padding values must be non-negative")
        return Int((n - 1) % s + 1, KMAX)
    return Int(1, KMAX)


def _dilation(c, j: int, empty_windows: bool) -> Int:
    n, k = c.s[2 + j], c._k[j]
    if k == 1:
        return Int(1, DMAX)
    if is_same(c):  # ORT computes SAME pads from the undilated kernel (output != ceil(n/s))
        return Int(1, 1)
    if mode(c) == "VALID" or not empty_windows:  # the dilated kernel fits the (unpadded) input
        # not empty_windows: a dilated kernel longer than the input can step over it, and a window of
        # padding only has no value (MaxPool: "the maximum number of elements exclude pad";
        # AveragePool: "divided by the number of elements (exclude pad ...)"); undilated, every window
        # with pads < kernel holds an input element, so only dilation is narrowed
        return Int(1, max(1, min(DMAX, (n - 1) // (k - 1))))
    return Int(1, min(DMAX, (n + 2 * k - 3) // (k - 1)))  # ... or the input with pads < k on both sides


def _lens(c, j: int, total: int) -> int:
    """Output length bound used to budget pads (ceil_mode may still be drawn)."""
    return -(-(c.s[2 + j] + total - eff(c, j)) // at(c, "strides", j, 1)) + 1


def _last_window_outside(c, j: int) -> bool:
    """ceil_mode adds a last window that starts in the right pad (or past the input)."""
    n, s = c.s[2 + j], at(c, "strides", j, 1)
    pb, pe = pad(c, j)
    o = -(-(n + pb + pe - eff(c, j)) // s) + 1
    return (o - 1) * s >= n + pb


def pool_dims(c) -> list[int]:
    out = []
    for j in range(nsp(c)):
        n, s = c.s[2 + j], at(c, "strides", j, 1)
        if is_same(c):
            out.append(-(-n // s))
            continue
        pb, pe = pad(c, j)
        num = n + pb + pe - eff(c, j)
        if not c.attrs.get("ceil_mode"):
            out.append(num // s + 1)
            continue
        o = -(-num // s) + 1
        # ORT (as PyTorch) drops a last window starting in the right pad; never drawn (see ceil_mode)
        out.append(o - 1 if (o - 1) * s >= n + pb else o)
    return out


def _ceil_mode(c):
    ok = is_same(c) or not any(_last_window_outside(c, j) for j in range(nsp(c)))
    return Maybe(BOOL if ok else fixed(0))


CHECKS = {
    "pads only with NOTSET": lambda c: c.attrs.get("pads") is None or mode(c) == "NOTSET",
    "pads < kernel (ORT)": lambda c: all(max(pad(c, j)) < c._k[j] for j in range(nsp(c))),
    "a window fits the padded input": lambda c: is_same(c) or all(
        c.s[2 + j] + sum(pad(c, j)) >= eff(c, j) for j in range(nsp(c))),
    "SAME pads >= 0 (ORT)": lambda c: not is_same(c) or all(
        (-(-c.s[2 + j] // at(c, "strides", j, 1)) - 1) * at(c, "strides", j, 1) + eff(c, j) >= c.s[2 + j]
        for j in range(nsp(c))),
    "SAME: no dilated kernel (ORT)": lambda c: not is_same(c) or all(
        c._k[j] == 1 or at(c, "dilations", j, 1) == 1 for j in range(nsp(c))),
    "ceil_mode: last window starts inside input or left pad (ONNX = ORT)": lambda c: not c.attrs.get("ceil_mode")
    or is_same(c) or not any(_last_window_outside(c, j) for j in range(nsp(c))),
    "output dims >= 1": lambda c: all(d >= 1 for d in pool_dims(c)),
}


def _same_begin(c, j: int) -> int:
    """The begin pad auto_pad SAME gives dimension j (the extra one at the end for SAME_UPPER)."""
    n, s = c.s[2 + j], at(c, "strides", j, 1)
    total = max(0, (-(-n // s) - 1) * s + eff(c, j) - n)
    return total // 2 if mode(c) == "SAME_UPPER" else total - total // 2


def windows_hold_input(c) -> bool:
    """Every window has a tap inside the unpadded input (a tap every dilation from its start)."""
    for j, out in enumerate(pool_dims(c)):
        n, s, d, k = c.s[2 + j], at(c, "strides", j, 1), at(c, "dilations", j, 1), c._k[j]
        pb = _same_begin(c, j) if is_same(c) else pad(c, j)[0]
        for o in range(out):
            start = o * s - pb
            if not any(0 <= start + i * d < n for i in range(k)):
                return False
    return True


def window_pool(op: str, since: int, out, dilations: int = 1, ceil: int = 1, empty_windows: bool = True,
                **extra) -> OpSpec:
    """A pool with kernel_shape/strides/pads/auto_pad; ``dilations`` and ``ceil_mode`` exist from
    the given opsets; ``empty_windows``: whether a window of padding only has a defined value."""
    attrs = {
        "auto_pad": Maybe(Choice(AUTO_PADS)),
        "strides": lambda c: Maybe(ints(nsp(c), 1, SMAX)),
        "_k": lambda c: Seq(nsp(c), lambda j, _: _kernel(c, j)),
        "kernel_shape": lambda c: fixed(c._k),
        "dilations": lambda c: Maybe(Seq(nsp(c), lambda j, _: _dilation(c, j, empty_windows)))
        if c.cfg.opset >= dilations else fixed(None),
        "_pad": pad_flag,
        "pads": lambda c: pad_seq(c, [k - 1 for k in c._k], _lens, c.cfg.max_numel // (c.s[0] * c.s[1]))
        if c._pad else fixed(None),
        "ceil_mode": lambda c: _ceil_mode(c) if c.cfg.opset >= ceil else fixed(None),
        **extra,
    }
    checks = dict(CHECKS) if empty_windows else {**CHECKS, "every window holds an input element": windows_hold_input}
    return OpSpec(op, "pool", [In("X", rank=(3, 5), room=2)], out, attrs=attrs, checks=checks, since=since)


def _same_type(c) -> list[TensorType]:
    return [TensorType((*c.s[:2], *pool_dims(c)), c.T)]


def _max_out(c) -> list[TensorType]:
    y = TensorType((*c.s[:2], *pool_dims(c)), c.T)
    return [y, TensorType(y.shape, "int64")] if c._indices else [y]


def global_pool(op: str, **attrs) -> OpSpec:
    return OpSpec(op, "pool", [In("X", rank=(3, 5))],
                  lambda c: [TensorType((*c.s[:2], *(1,) * nsp(c)), c.T)], attrs=attrs)


SPECS: list[OpSpec] = [
    window_pool("MaxPool", 12, _max_out, dilations=10, ceil=10, empty_windows=False,
                storage_order=Maybe(BOOL), _indices=BOOL),  # _indices: the optional int64 Indices output
    # count_include_pad is drawn after the window, so every AveragePool keeps an input element per window
    window_pool("AveragePool", 11, _same_type, dilations=19, ceil=10, empty_windows=False,
                count_include_pad=Maybe(BOOL)),
    window_pool("LpPool", 11, _same_type, dilations=18, ceil=18, p=Maybe(Int(1, 4))),
    global_pool("GlobalAveragePool"),
    global_pool("GlobalMaxPool"),
    global_pool("GlobalLpPool", p=Maybe(Int(1, 4))),
]


# ---------------------------------------------------------------------------------------------
# MaxUnpool: X is MaxPool's output, I its indices (global flat indices into the unpooled output)
# ---------------------------------------------------------------------------------------------
def _unpool_base(c, j: int, **override) -> int:
    """(in - 1) * stride + kernel: the output length before pads."""
    s = override.get("strides", at(c, "strides", j, 1))
    k = override.get("_k", at(c, "_k", j, 1))
    return (c.s[2 + j] - 1) * s + k


def _unpool_grown(name: str, hi: int):
    """strides / kernel lengths in [1, hi] that keep N x C x prod(base lengths) within max_numel
    (not-yet-drawn values count at their minimum, 1, which always fits: X itself)."""
    def dom(c) -> Seq:
        n, room = nsp(c), c.cfg.max_numel // (c.s[0] * c.s[1])

        def item(j: int, prefix: list[int]) -> Int:
            def fits(v: int) -> bool:
                vals = [*prefix, v]
                return math.prod(_unpool_base(c, q, **{name: vals[q] if q < len(vals) else 1})
                                 for q in range(n)) <= room
            top = 1
            while top < hi and fits(top + 1):
                top += 1
            return Int(1, top)
        return Seq(n, item)
    return dom


def _unpool_pad_cap(c, j: int) -> int:
    """pads_begin + pads_end <= (in-1)(s-1) + k-1: exactly when every window keeps a position of
    its own (an injective index map exists; the output length is then >= the input length)."""
    return (c.s[2 + j] - 1) * (at(c, "strides", j, 1) - 1) + c._k[j] - 1


def _unpool_pads(c) -> Seq:
    n = nsp(c)

    def item(i: int, prefix: list[int]) -> Int:
        j = i % n
        cap = _unpool_pad_cap(c, j) - (prefix[j] if i >= n else 0)
        return Int(0, min(c._k[j] - 1, cap))
    return Seq(2 * n, item)


def unpool_dims(c) -> list[int]:
    """Spatial output lengths: the inferred ones, plus the extra of an explicit output_shape."""
    extra = c._extra or [0] * nsp(c)
    return [_unpool_base(c, j) - sum(pad(c, j)) + extra[j] for j in range(nsp(c))]


def _unpool_extra(c) -> Seq:
    """output_shape - inferred shape per spatial axis: in [0, stride - 1] (the input lengths a
    MaxPool with these windows maps to the same output), within the element budget."""
    n, room = nsp(c), c.cfg.max_numel // (c.s[0] * c.s[1])
    base = [_unpool_base(c, j) - sum(pad(c, j)) for j in range(n)]

    def item(j: int, prefix: list[int]) -> Int:
        def fits(v: int) -> bool:
            e = [*prefix, v] + [0] * (n - j - 1)
            return math.prod(b + x for b, x in zip(base, e, strict=True)) <= room
        top = 0
        while top < at(c, "strides", j, 1) - 1 and fits(top + 1):
            top += 1
        return Int(0, top)
    return Seq(n, item)


def _positions(rng, n_in: int, s: int, k: int, pb: int, limit: int) -> list[int]:
    """A random increasing map o -> p, p in window o ([o*s - pb, o*s - pb + k) within [0, limit)):
    distinct positions, as MaxPool's arg-max of distinct windows.  The latest feasible position of
    each window is computed backwards, so every forward draw extends (the pads domain ensures one)."""
    latest, nxt = [0] * n_in, limit
    for o in reversed(range(n_in)):
        latest[o] = nxt = min(o * s - pb + k, nxt) - 1
    out, prev = [], -1
    for o in range(n_in):
        prev = rng.randint(max(0, o * s - pb, prev + 1), latest[o])
        out.append(prev)
    return out


def _unpool_indices(c) -> np.ndarray:
    """Distinct flat indices into the (N, C, D1 ... Dn) output, each in its window; ORT reads them
    against the output shape, also when output_shape is given (see docs/discrepancies.md)."""
    n, dims = nsp(c), unpool_dims(c)
    plane = math.prod(dims)
    steps = [math.prod(dims[j + 1:]) for j in range(n)]
    planes = c.s[0] * c.s[1]
    out = np.empty((planes, *c.s[2:]), dtype=np.int64)
    for q in range(planes):
        flat = np.zeros(c.s[2:], dtype=np.int64)
        for j in range(n):
            pos = np.array(_positions(c.rng, c.s[2 + j], at(c, "strides", j, 1), c._k[j], pad(c, j)[0], dims[j]))
            flat = flat + (pos * steps[j]).reshape([-1 if q2 == j else 1 for q2 in range(n)])
        out[q] = q * plane + flat
    c.set("_I", out.reshape(c.s))
    return c._I


def _unpool_out(c) -> list[TensorType]:
    return [TensorType((*c.s[:2], *unpool_dims(c)), c.x.dtype)]


def _unpool_indices_ok(c) -> bool:
    idx = c._I.reshape(-1)
    return len(set(idx.tolist())) == idx.size and idx.min() >= 0 and idx.max() < math.prod(_unpool_out(c)[0].shape)


MAX_UNPOOL = OpSpec(
    "MaxUnpool", "pool",
    [In("X", rank=(3, 5), room=4), Const("I", _unpool_indices),
     Const("output_shape", lambda c: i64([*c.s[:2], *unpool_dims(c)]) if c._extra is not None else None)],
    _unpool_out,
    attrs={
        "strides": lambda c: Maybe(_unpool_grown("strides", SMAX)(c)),
        "_k": _unpool_grown("_k", KMAX),
        "kernel_shape": lambda c: fixed(c._k),
        "pads": lambda c: Maybe(_unpool_pads(c)),
        "_extra": lambda c: Maybe(_unpool_extra(c), 0.6),  # an explicit output_shape
    },
    checks={
        "pads < kernel": lambda c: all(max(pad(c, j)) < c._k[j] for j in range(nsp(c))),
        "each window keeps a position of its own": lambda c: all(
            sum(pad(c, j)) <= _unpool_pad_cap(c, j) for j in range(nsp(c))),
        "I: distinct indices within the output": _unpool_indices_ok,
        "output_shape >= the inferred shape": lambda c: c._extra is None or min(c._extra) >= 0,
    },
    since=11,
)


# ---------------------------------------------------------------------------------------------
# RoiAlign, MaxRoiPool: X is N x C x H x W; the regions are constants inside the image
# ---------------------------------------------------------------------------------------------
ROIS_MAX = 4  # regions per call
BIN_MAX = 6  # output bins per side


def _roi_room(c) -> int:
    """Room for (num_rois x bins) per channel."""
    return c.cfg.max_numel // c.s[1]


def _bins(c, *names: str) -> int:
    return math.prod(c.attrs.get(n) or 1 for n in names)


def _box(c, scale: float) -> list[float]:
    """(x1, y1, x2, y2) with x1 <= x2, y1 <= y2, inside the image in input coordinates (the
    feature map divided by spatial_scale)."""
    h, w = c.s[2] / scale, c.s[3] / scale
    x = sorted(round(c.rng.uniform(0, w), 3) for _ in range(2))
    y = sorted(round(c.rng.uniform(0, h), 3) for _ in range(2))
    return [x[0], y[0], x[1], y[1]]


def _roi_align_rois(c) -> np.ndarray:
    scale = c.spatial_scale if c.spatial_scale is not None else 1.0
    c.set("_boxes", np.array([_box(c, scale) for _ in range(c._rois)], dtype=c.x.dtype))
    return c._boxes


def _batch_indices(c) -> np.ndarray:
    c.set("_batch", c.np.integers(0, c.s[0], size=c._rois).astype(np.int64))
    return c._batch


def _inside(c, boxes: np.ndarray, scale: float | None) -> bool:
    s = 1.0 if scale is None else scale
    h, w = c.s[2] / s, c.s[3] / s
    x1, y1, x2, y2 = boxes.T.astype(np.float64)
    return bool(np.all((x1 >= 0) & (x1 <= x2) & (x2 <= w * (1 + 1e-6)) & (y1 >= 0) & (y1 <= y2)
                       & (y2 <= h * (1 + 1e-6))))


ROI_ALIGN = OpSpec(
    "RoiAlign", "pool",
    [In("X", rank=(4, 4)), Const("rois", _roi_align_rois), Const("batch_indices", _batch_indices)],
    lambda c: [TensorType((c._rois, c.s[1], c.output_height or 1, c.output_width or 1), c.x.dtype)],
    attrs={
        "mode": Maybe(Choice(("avg", "max"))),
        "output_height": lambda c: Maybe(Int(1, max(1, min(BIN_MAX, _roi_room(c))))),
        "output_width": lambda c: Maybe(Int(1, max(1, min(BIN_MAX, _roi_room(c) // _bins(c, "output_height"))))),
        "sampling_ratio": Maybe(Int(0, 3)),
        "spatial_scale": Maybe(Choice((0.0625, 0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0))),
        "coordinate_transformation_mode": lambda c: Maybe(Choice(("half_pixel", "output_half_pixel")))
        if c.cfg.opset >= 16 else fixed(None),
        "_rois": lambda c: Int(1, max(1, min(ROIS_MAX, _roi_room(c) // _bins(c, "output_height", "output_width")))),
    },
    checks={
        "rois is [num_rois, 4], batch_indices [num_rois]": lambda c: c.ins[1].shape == (c._rois, 4)
        and c.ins[2].shape == (c._rois,),
        "batch_indices in [0, N)": lambda c: bool(np.all((c._batch >= 0) & (c._batch < c.s[0]))),
        "rois inside the image": lambda c: _inside(c, c._boxes, c.spatial_scale),
        "sampling_ratio >= 0": lambda c: (c.sampling_ratio or 0) >= 0,
    },
    since=16,
)


def _max_roi_rois(c) -> np.ndarray:
    scale = c.spatial_scale if c.spatial_scale is not None else 1.0
    boxes = [_box(c, scale) for _ in range(c._rois)]
    batch = c.np.integers(0, c.s[0], size=c._rois)
    c.set("_batch", batch)
    c.set("_boxes", np.array(boxes, dtype=c.x.dtype))
    return np.concatenate([batch[:, None].astype(c.x.dtype), c._boxes], axis=1)


MAX_ROI_POOL = OpSpec(
    "MaxRoiPool", "pool",
    [In("X", rank=(4, 4)), Const("rois", _max_roi_rois)],
    lambda c: [TensorType((c._rois, c.s[1], *c.pooled_shape), c.x.dtype)],
    attrs={
        "_ph": lambda c: Int(1, max(1, min(BIN_MAX, _roi_room(c)))),
        "pooled_shape": lambda c: Seq(2, lambda i, prefix: Int(1, max(1, min(BIN_MAX, _roi_room(c) // c._ph)))
                                      if i else Choice((c._ph,))),
        "spatial_scale": Maybe(Choice((0.0625, 0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0))),
        "_rois": lambda c: Int(1, max(1, min(ROIS_MAX, _roi_room(c) // math.prod(c.pooled_shape)))),
    },
    checks={
        "rois is [num_rois, 5]": lambda c: c.ins[1].shape == (c._rois, 5),
        "batch index in [0, N)": lambda c: bool(np.all((c._batch >= 0) & (c._batch < c.s[0]))),
        "rois inside the image": lambda c: _inside(c, c._boxes, c.spatial_scale),
        "pooled_shape >= 1": lambda c: min(c.pooled_shape) >= 1,
    },
    since=1,
)

SPECS += [MAX_UNPOOL, ROI_ALIGN, MAX_ROI_POOL]
