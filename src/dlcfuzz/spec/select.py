"""Selection operators, whose output *shape* depends on input values: NonZero, Unique,
NonMaxSuppression.

dlcfuzz's graphs have static shapes, so these operators draw the data that decide the output
shape themselves: the first input's values (``In.value``) and the constant inputs after it.  The
input is then a new constant (never a reused tensor), and ``out`` computes the shape from the
drawn data.  The data keep every decision clear of float rounding: no two scores tie, no score
lies near the score threshold, no IoU near the IoU threshold, no box edge near another's.
"""

from __future__ import annotations

import math

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.dsl import BOOL, Choice, Const, Dims, EmptyDomain, In, Int, Maybe, OpSpec, axis_dom


def _rng(c) -> np.random.Generator:
    return c.np


# ---------------------------------------------------------------------------------------------
# NonZero
# ---------------------------------------------------------------------------------------------
def _nonzero_x(c) -> np.ndarray:
    """Zeros at a drawn density (float zeros half of them -0.0, which is zero too), never all zeros."""
    rng, t = _rng(c), c.x
    zero = rng.random(t.shape) < c._density
    zero.flat[c.rng.randrange(t.numel)] = False
    if t.dtype == "bool":
        x = ~zero
    elif t.dtype.startswith(("float", "int")):
        x = rng.integers(1, 5, size=t.shape) * np.where(rng.random(t.shape) < 0.5, -1, 1)
        x = x.astype(t.dtype)
        if t.dtype.startswith("float"):
            x = (x * rng.uniform(0.25, 1.0, size=t.shape)).astype(t.dtype)
            x[zero] = np.where(rng.random(int(zero.sum())) < 0.5, -0.0, 0.0)
        else:
            x[zero] = 0
    else:  # unsigned
        x = rng.integers(1, 5, size=t.shape).astype(t.dtype)
        x[zero] = 0
    x = np.asarray(x)
    # the output (rank x count) within the element budget: zero out nonzeros beyond it
    extra = np.flatnonzero(x)[max(1, c.cfg.max_numel // c.r):]
    x.flat[extra] = 0
    c.set("_nnz", int(np.count_nonzero(x)))
    return x


NON_ZERO = OpSpec(
    "NonZero", "select",
    # a scalar gives shape (0, 1) (ONNX), an empty tensor: rank >= 1
    [In("X", rank=(1, 99), value=_nonzero_x)],
    lambda c: [TensorType((c.r, c._nnz), "int64")],
    attrs={"_density": Choice((0.0, 0.3, 0.6, 0.9))},
    checks={"rank >= 1": lambda c: c.r >= 1, "some element is not zero": lambda c: c._nnz >= 1},
    since=13,
)


# ---------------------------------------------------------------------------------------------
# Unique
# ---------------------------------------------------------------------------------------------
def _card(dtype: str) -> int:
    """How many distinct values ``_atoms`` may draw for one element of ``dtype``."""
    return {"bool": 2, "int8": 256, "uint8": 256}.get(dtype, 2**16)


def _atoms(c, k: int, shape: tuple[int, ...]) -> np.ndarray:
    """k distinct tensors of ``shape`` (stacked on axis 0) of X's type, from a span of about 2k
    consecutive integers (floats: quarters of them; never -0.0, which equals 0.0, but which of the
    two a kernel keeps is not specified), so that equal values are exactly equal."""
    rng, dtype = _rng(c), c.x.dtype
    span = min(max(13, 2 * k), _card(dtype))
    lo = 0 if dtype.startswith("uint") or dtype == "bool" else -(span // 2)

    def value(codes: np.ndarray) -> np.ndarray:
        if dtype == "bool":
            return codes.astype(bool)
        if dtype.startswith("float"):
            return ((codes + lo) / 4).astype(dtype)
        return (codes + lo).astype(dtype)

    if math.prod(shape) == 1:  # single elements: k distinct codes
        codes = rng.choice(span, size=k, replace=False)
        return value(codes).reshape((k, *shape))
    seen: dict[bytes, np.ndarray] = {}
    for _ in range(64 * k):
        a = value(rng.integers(0, span, size=shape))
        seen.setdefault(a.tobytes(), a)
        if len(seen) == k:
            return np.stack(list(seen.values()))
    raise EmptyDomain(f"Unique: {k} distinct slices of shape {shape} in {dtype}")


def _unique_room(c) -> int:
    """How many distinct values (slices) there can be: the axis length, within what the type holds."""
    if c.axis is None:
        return min(c.x.numel, _card(c.x.dtype))
    n = c.s[c.axis % c.r]
    per = c.x.numel // n
    return min(n, _card(c.x.dtype) ** min(per, 4))


def _unique_x(c) -> np.ndarray:
    """``_k`` distinct values (or slices along the axis), each at least once, in a random order."""
    rng = _rng(c)
    if c.axis is None:
        n, cell = c.x.numel, ()
    else:
        ax = c.axis % c.r
        n, cell = c.s[ax], c.s[:ax] + c.s[ax + 1:]
    atoms = _atoms(c, c._k, cell)
    pick = np.concatenate([np.arange(c._k), rng.integers(0, c._k, size=n - c._k)])
    rng.shuffle(pick)
    if c.axis is None:
        return atoms[pick].reshape(c.s)
    return np.moveaxis(atoms[pick], 0, c.axis % c.r)


def _unique_out(c) -> list[TensorType]:
    k = c._k
    if c.axis is None:
        y, n = (k,), c.x.numel
    else:
        ax = c.axis % c.r
        y, n = (*c.s[:ax], k, *c.s[ax + 1:]), c.s[ax]
    return [TensorType(y, c.T), TensorType((k,), "int64"), TensorType((n,), "int64"),
            TensorType((k,), "int64")][:c._nout]


UNIQUE = OpSpec(
    "Unique", "select",
    [In("X", rank=(1, 99), value=_unique_x)],
    _unique_out,
    attrs={
        "axis": lambda c: Maybe(axis_dom(c.r), 0.5),  # omitted: the flattened input
        "sorted": Maybe(BOOL),
        "_k": lambda c: Int(1, _unique_room(c)),
        # outputs Y, indices, inverse_indices, counts as a prefix (the DSL cannot skip a middle output)
        "_nout": Choice((1, 2, 3, 4)),
    },
    checks={"axis in [-r, r-1]": lambda c: c.axis is None or -c.r <= c.axis < c.r,
            "at least one distinct value": lambda c: c._k >= 1},
    since=11,
)


# ---------------------------------------------------------------------------------------------
# NonMaxSuppression
# ---------------------------------------------------------------------------------------------
NMS_BATCHES, NMS_BOXES, NMS_CLASSES = 2, 8, 3
# coordinates lie on a 0.01 grid: two edges are equal or at least 0.01 apart (float32 noise aside)
EDGE = 5e-3  # no box edge this close to another's: the sign of an overlap is clear
IOU_GAP = 2e-3  # no IoU this close to the IoU threshold (float32 errors: about 1e-4 at most)
SCORE_GAP = 1e-3  # no two scores of a class, nor a score and the score threshold, this close


def _corners(c, boxes: np.ndarray) -> np.ndarray:
    """(..., 4) boxes as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2, in float64."""
    b = boxes.astype(np.float64)
    if c.center_point_box:
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2] / 2, b[..., 3] / 2
        return np.stack([yc - h, xc - w, yc + h, xc + w], axis=-1)
    return np.stack([np.minimum(b[..., 0], b[..., 2]), np.minimum(b[..., 1], b[..., 3]),
                     np.maximum(b[..., 0], b[..., 2]), np.maximum(b[..., 1], b[..., 3])], axis=-1)


def _overlaps(c, boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per batch, the S x S intersection extents along y and x (negative: apart) and the IoUs."""
    k = _corners(c, boxes)
    y1, x1, y2, x2 = (k[..., i] for i in range(4))
    dy = np.minimum(y2[:, :, None], y2[:, None, :]) - np.maximum(y1[:, :, None], y1[:, None, :])
    dx = np.minimum(x2[:, :, None], x2[:, None, :]) - np.maximum(x1[:, :, None], x1[:, None, :])
    inter = np.clip(dy, 0, None) * np.clip(dx, 0, None)
    area = (y2 - y1) * (x2 - x1)
    iou = inter / (area[:, :, None] + area[:, None, :] - inter)
    return np.minimum(np.abs(dy), np.abs(dx)), iou


def _off_diagonal(c) -> np.ndarray:
    return ~np.eye(c.s[1], dtype=bool)[None]


def _positive_ious(c) -> np.ndarray:
    """The IoUs of two overlapping boxes of a batch (the others are exactly 0 everywhere)."""
    iou = _overlaps(c, c._boxes)[1]
    return iou[(iou > 0) & _off_diagonal(c)]


def _nms_boxes(c) -> np.ndarray:
    """Boxes of side >= 0.05 within [0, 4]^2, the corners of a diagonal in any order (ONNX: any
    diagonal pair), redrawn until no two edges are within EDGE of each other."""
    rng, (nb, ns, _) = _rng(c), c.s
    for _ in range(100):
        lo = np.round(rng.uniform(0, 3.5, size=(nb, ns, 2)), 2)
        side = np.round(rng.uniform(0.05, 2.0, size=(nb, ns, 2)), 2)
        if c.center_point_box:
            boxes = np.concatenate([lo[..., ::-1] + side[..., ::-1] / 2, side[..., ::-1]], axis=-1)  # xc, yc, w, h
        else:
            hi = lo + side
            flip = rng.random((nb, ns, 2)) < c._flip
            boxes = np.concatenate([np.where(flip, hi, lo), np.where(flip, lo, hi)], axis=-1)  # y1, x1, y2, x2
        boxes = boxes.astype(np.float32)
        if not np.any((_overlaps(c, boxes)[0] < EDGE) & _off_diagonal(c)):
            c.set("_boxes", boxes)
            return boxes
    raise EmptyDomain("NonMaxSuppression: boxes with well separated edges")


def _nms_scores(c) -> np.ndarray:
    """Scores in (0, 1], as a model's probabilities, or in [-1, 1] (ONNX does not bound them); no
    two of one class within SCORE_GAP."""
    rng, (nb, ns, _) = _rng(c), c.s
    grid = np.arange(-1000 if c._signed else 5, 1001, 5)  # thousandths, SCORE_GAP * 5 apart
    rows = [rng.choice(grid, size=ns, replace=False) / 1000 for _ in range(nb * c._classes)]
    c.set("_scores", np.array(rows, dtype=np.float32).reshape(nb, c._classes, ns))
    return c._scores


def _gap_point(taken: np.ndarray, lo: float, hi: float, gap: float, rng: np.random.Generator) -> float | None:
    """A value in [lo, hi] at least ``gap`` from every value in ``taken`` (uniform where one
    lies at random, else the middle of the widest free stretch); None if there is none."""
    for _ in range(20):
        v = round(float(rng.uniform(lo, hi)), 3)
        if np.all(np.abs(taken - v) >= gap):
            return v
    pts = np.sort(np.concatenate([[lo - gap], taken[(taken >= lo) & (taken <= hi)], [hi + gap]]))
    i = int(np.argmax(np.diff(pts)))
    v = round(float((pts[i] + pts[i + 1]) / 2), 3)
    return v if np.all(np.abs(taken - v) >= gap) and lo <= v <= hi else None


def _nms_iou(c) -> np.ndarray | None:
    """The IoU threshold in [0, 1], clear of every IoU of two boxes of a batch; omitted: 0."""
    if not c._has_iou:
        c.set("_iou", 0.0)  # every overlap suppresses: the edges' clearance keeps overlaps clear of 0
        return None
    v = 0.0 if c.rng.random() < 0.1 else _gap_point(_positive_ious(c), 0.0, 1.0, IOU_GAP, _rng(c))
    if v is None:
        raise EmptyDomain("NonMaxSuppression: no IoU threshold clear of the IoUs")
    c.set("_iou", v)
    return np.array(v if c._scalar else [v], dtype=np.float32)


def _nms_score(c) -> np.ndarray | None:
    """The score threshold, clear of every score, below the highest one (something is selected)."""
    if not c._has_score:
        c.set("_score", None)
        return None
    s = c._scores.astype(np.float64).reshape(-1)
    v = _gap_point(s, -1.0, float(s.max()) - SCORE_GAP, SCORE_GAP, _rng(c))
    if v is None:
        raise EmptyDomain("NonMaxSuppression: no score threshold clear of the scores")
    c.set("_score", v)
    return np.array(v if c._scalar else [v], dtype=np.float32)


def nms_select(c) -> np.ndarray:
    """ONNX's selection on the drawn data: per batch and class, boxes by descending score above the
    score threshold, each kept unless its IoU with a kept one exceeds the IoU threshold, at most
    max_output_boxes_per_class of them; rows (batch, class, box)."""
    _, iou = _overlaps(c, c._boxes)
    out = []
    for b in range(c.s[0]):
        for k in range(c._classes):
            sc = c._scores[b, k].astype(np.float64)
            kept: list[int] = []
            for i in sorted(range(c.s[1]), key=lambda j: -sc[j]):
                if len(kept) == c._max:
                    break
                if c._score is not None and sc[i] <= c._score:
                    continue
                if all(iou[b, i, j] <= c._iou for j in kept):
                    kept.append(i)
            out += [(b, k, i) for i in kept]
    return np.array(out, dtype=np.int64).reshape(-1, 3)


def _nms_out(c) -> list[TensorType]:
    c.set("_selected", nms_select(c))
    return [TensorType((len(c._selected), 3), "int64")]


NON_MAX_SUPPRESSION = OpSpec(
    "NonMaxSuppression", "select",
    [In("boxes", shape=lambda c: Dims((Int(1, NMS_BATCHES), Int(1, NMS_BOXES), 4)), value=_nms_boxes),
     Const("scores", _nms_scores),
     # the default 0 selects nothing (an empty output): always given, at least 1
     Const("max_output_boxes_per_class", lambda c: np.array(c._max if c._scalar else [c._max], dtype=np.int64)),
     Const("iou_threshold", _nms_iou),
     Const("score_threshold", _nms_score)],
    _nms_out,
    attrs={
        "center_point_box": Maybe(BOOL),
        "_flip": Choice((0.0, 0.5)),  # share of boxes given by their other diagonal (corner format)
        "_classes": Int(1, NMS_CLASSES),
        "_signed": Choice((0, 0, 0, 1)),  # scores <= 0 too
        "_max": lambda c: Int(1, c.s[1] + 1),
        # ONNX says the three are scalars; a 1-element vector is what exporters write
        "_scalar": BOOL,
        # iou_threshold omitted (default 0) only when score_threshold is too: inputs are positional
        "_has_score": BOOL,
        "_has_iou": lambda c: Choice((1,)) if c._has_score else BOOL,
    },
    checks={
        "boxes is [batches, boxes, 4], scores [batches, classes, boxes]": lambda c: c.s[2] == 4
        and c.ins[1].shape == (c.s[0], c._classes, c.s[1]),
        "max_output_boxes_per_class >= 1": lambda c: c._max >= 1,
        "IoU threshold in [0, 1]": lambda c: 0.0 <= c._iou <= 1.0,
        "no IoU near the threshold": lambda c: c._iou == 0.0
        or not np.any(np.abs(_positive_ious(c) - c._iou) < IOU_GAP),
        "no box edge near another's": lambda c: not np.any((_overlaps(c, c._boxes)[0] < EDGE) & _off_diagonal(c)),
        "scores of a class distinct": lambda c: all(
            len(set(row.tolist())) == len(row) for row in c._scores.reshape(-1, c.s[1])),
        "something is selected": lambda c: len(c._selected) >= 1,
        "boxes have a positive area": lambda c: bool(np.all(
            np.diff(_corners(c, c._boxes).reshape(-1, 2, 2), axis=1) > 0)),
    },
    since=11,
)

SPECS: list[OpSpec] = [NON_ZERO, UNIQUE, NON_MAX_SUPPRESSION]
