"""ONNX Resize's taps along one axis, in numpy: per output position, the source indices (edge-clamped)
and their weights, as ONNX's reference computes them (coordinate transformation, nearest modes,
linear / cubic filters, antialiasing, exclude_outside).

Shared by the torch and the Relax exporters.  Standalone on purpose (numpy and math only): the torch
exporter's generated sources, and so the repro scripts, carry its text (``torch.ops_source``).
"""

import math

import numpy as np


def nearest_weights(ratio: float, mode: str) -> list[float]:
    if ratio == 1.0:
        return [0.0, 1.0]
    if mode == "round_prefer_floor":
        return [float(ratio <= 0.5), float(ratio > 0.5)]
    if mode == "round_prefer_ceil":
        return [float(ratio < 0.5), float(ratio >= 0.5)]
    return [1.0, 0.0] if mode == "floor" else [0.0, 1.0]


def cubic_tap(t: float, a: float) -> float:
    t = abs(t)
    if t <= 1:
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
    return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a if t < 2 else 0.0


def antialias_weights(ratio: float, scale: float, support: int, a: float) -> list[float]:
    """The linear (support 1) or cubic (support 2) filter, stretched by 1/scale when downscaling."""
    scale = min(scale, 1.0)
    start = math.floor(-support / scale) + 1
    args = [scale * (i - ratio) for i in range(start, 2 - start)]
    ws = [max(0.0, 1 - abs(t)) if support == 1 else cubic_tap(t, a) for t in args]
    return [v / sum(ws) for v in ws]


def source_coords(n_in: int, n_out: int, scale: float, roi, ctm: str) -> np.ndarray:
    """ONNX's coordinate transformation: each output position's coordinate in the input.  ONNX's
    length_resized is the output length n_out (ORT agrees); onnx's reference evaluator takes the
    fractional scale * n_in instead, and -0.5 for pytorch_half_pixel at length 1 where ONNX says 0:
    the reference is not trusted there (backends/reference.py), so neither may this be."""
    y = np.arange(n_out, dtype=np.float64)
    if ctm == "align_corners":
        return np.zeros(n_out) if n_out == 1 else y * (n_in - 1) / (n_out - 1)
    if ctm == "asymmetric":
        return y / scale
    if ctm == "tf_crop_and_resize":
        lo, hi = roi
        x = np.full(n_out, (hi - lo) * (n_in - 1) / 2) if n_out == 1 else y * (hi - lo) * (n_in - 1) / (n_out - 1)
        return x + lo * (n_in - 1)
    if ctm == "pytorch_half_pixel":
        return np.zeros(n_out) if n_out == 1 else (y + 0.5) / scale - 0.5
    if ctm == "half_pixel_symmetric":  # ONNX: output_width, the fractional scale * n_in, here
        return n_in / 2 * (1 - n_out / (scale * n_in)) + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5  # half_pixel


def resize_taps(n_in: int, n_out: int, scale: float, roi, mode: str, ctm: str, nearest_mode: str, a: float,
                antialias: int, exclude_outside: int):
    """(indices [out, taps], weights [out, taps], extrapolated [out] or None) for one axis."""
    x = source_coords(n_in, n_out, scale, roi, ctm)
    extrapolated = (x < 0) | (x > n_in - 1) if ctm == "tf_crop_and_resize" else None
    base = np.floor(x)
    rows = []
    for r in np.where(x == base, 1.0, x - base).tolist():
        if mode == "nearest":
            rows.append(nearest_weights(r, nearest_mode))
        elif antialias:
            rows.append(antialias_weights(r, scale, 1 if mode == "linear" else 2, a))
        else:
            rows.append([1 - r, r] if mode == "linear" else [cubic_tap(t, a) for t in (r + 1, r, 1 - r, 2 - r)])
    weights = np.array(rows, dtype=np.float64)
    taps = weights.shape[1]
    pad = -(-taps // 2)
    p = np.floor(x + pad)
    frac = x + pad - p
    if taps % 2 == 0:  # the taps closest to x, ties to the smaller index
        offset = np.where(frac == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    idx = (p + offset).astype(np.int64)[:, None] + np.arange(taps)[None, :] - pad
    if exclude_outside:
        weights = np.where((idx < 0) | (idx >= n_in), 0.0, weights)
        total = weights.sum(-1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n_in - 1), weights, extrapolated
