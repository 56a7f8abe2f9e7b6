"""Value hints: which values a tensor may hold so that the operator reading it stays defined.

A hint is a small dict: ``min`` / ``max`` (inclusive bounds) and ``nonzero`` (no zeros, e.g. an
integer divisor).  ``random_array`` is the one place that turns a hint into values, and
``value_range`` says which range it draws from (the generator's value-interval analysis assumes
exactly that range for a runtime input).  ``feed_array`` is what a runtime input is fed: a pinned
input's own value, else ``random_array``'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dlcfuzz.ir.dtypes import np_dtype
from dlcfuzz.ir.graph import TensorType, Value

DEFAULT_LO, DEFAULT_HI = -2.0, 2.0  # runtime inputs without a hint hold values in this range


def value_range(t: TensorType, hint: dict[str, Any] | None = None,
                lo: float = DEFAULT_LO, hi: float = DEFAULT_HI) -> tuple[float, float]:
    """The closed range ``random_array(rng, t, hint, lo, hi)`` draws from (integers: whole bounds)."""
    if t.dtype == "bool":
        return 0.0, 1.0
    hint = hint or {}
    lo = max(lo, hint.get("min", lo))
    hi = min(hi, hint.get("max", hi))
    if lo > hi:  # the requested range misses the hint's: draw from the hint's own range
        lo = hint.get("min", hi - 1.0)
        hi = hint.get("max", lo + 1.0)
    dt = np_dtype(t.dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        ilo = max(math.ceil(lo), int(info.min))
        ihi = max(ilo, min(math.floor(hi), int(info.max)))
        return float(ilo), float(ihi)
    return float(lo), float(hi)


def random_array(rng: np.random.Generator, t: TensorType, hint: dict[str, Any] | None = None,
                 lo: float = DEFAULT_LO, hi: float = DEFAULT_HI) -> np.ndarray:
    """Random values of type ``t`` in [lo, hi], narrowed by the hint."""
    if t.dtype == "bool":
        return np.asarray(rng.random(t.shape) < 0.5)
    hint = hint or {}
    lo, hi = value_range(t, hint, lo, hi)
    dt = np_dtype(t.dtype)
    if dt.kind in "iu":
        ilo, ihi = int(lo), int(hi)
        a = np.asarray(rng.integers(ilo, ihi + 1, size=t.shape))
        if hint.get("nonzero"):
            a[a == 0] = ihi or ilo or 1
        return a.astype(dt)
    a = np.asarray(rng.uniform(lo, hi, size=t.shape))
    if hint.get("nonzero"):
        a[np.abs(a) < 0.1] = 0.5
    return a.astype(dt)


def feed_array(rng: np.random.Generator, v: Value, lo: float = DEFAULT_LO, hi: float = DEFAULT_HI) -> np.ndarray:
    """Values for the runtime input ``v``: a pinned input's value (a copy; never drawn), else random
    values of its type in [lo, hi], narrowed by its hint."""
    if v.data is not None:
        return np.array(v.data, copy=True)
    return random_array(rng, v.type, v.hint, lo, hi)
