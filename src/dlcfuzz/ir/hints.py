"""Value hints: which values a tensor may hold so that the operator reading it stays defined.

A hint is a small dict: ``min`` / ``max`` (inclusive bounds) and ``nonzero`` (no zeros, e.g. an
integer divisor).  ``random_array`` is the one place that turns a hint into values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlcfuzz.ir.dtypes import np_dtype
from dlcfuzz.ir.graph import TensorType


def random_array(rng: np.random.Generator, t: TensorType, hint: dict[str, Any] | None = None,
                 lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    """Random values of type ``t`` in [lo, hi], narrowed by the hint."""
    hint = hint or {}
    lo = max(lo, hint.get("min", lo))
    hi = min(hi, hint.get("max", hi))
    dt = np_dtype(t.dtype)
    if t.dtype == "bool":
        return np.asarray(rng.random(t.shape) < 0.5)
    if dt.kind in "iu":
        ilo = max(int(np.ceil(lo)), int(np.iinfo(dt).min))
        ihi = min(int(np.floor(hi)), int(np.iinfo(dt).max))
        a = np.asarray(rng.integers(ilo, ihi + 1, size=t.shape))
        if hint.get("nonzero"):
            a[a == 0] = ihi if ihi != 0 else ilo
        return a.astype(dt)
    a = np.asarray(rng.uniform(lo, hi, size=t.shape))
    if hint.get("nonzero"):
        a[np.abs(a) < 0.1] = 0.5
    return a.astype(dt)
