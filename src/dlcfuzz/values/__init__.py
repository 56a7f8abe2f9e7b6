"""Input synthesis that keeps reference outputs finite.

The generator (``solve/intervals.py``) assumes that every runtime input holds values in
``value_range(type, hint)`` -- the input's hint, else the default range [-2, 2] -- and picks
operator inputs so that, under that assumption, every output is finite.  ``synthesize`` draws
inputs there: attempt 0 over each input's whole range, later attempts over sub-ranges *within*
it (narrower, one-signed, near an end or the middle), chosen per input, so the assumption keeps
holding while the values change.  A campaign calls it for attempts 0..K-1 until ``all_finite``
holds for the reference outputs, and records how many attempts it took.  A pinned runtime input
(a constant-like operand the model takes at run time, ``Value.pinned``) is fed its own value on
every attempt: it is never drawn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from dlcfuzz.ir import Graph, TensorType, np_dtype
from dlcfuzz.ir.hints import feed_array, value_range

__all__ = ["all_finite", "input_range", "synthesize"]

# sub-ranges of [0, 1], scaled onto an input's range on later attempts
_PIECES = (
    (0.0, 1.0), (0.25, 0.75), (0.0, 0.5), (0.5, 1.0), (0.4, 0.6), (0.0, 0.125), (0.875, 1.0), (0.1, 0.9),
)


def input_range(t: TensorType, hint: dict | None, attempt: int, rng: np.random.Generator) -> tuple[float, float]:
    """The range one input draws from at ``attempt`` (always inside ``value_range(t, hint)``)."""
    lo, hi = value_range(t, hint)
    if attempt == 0 or t.dtype == "bool" or lo == hi:
        return lo, hi
    choices = list(_PIECES)
    if lo < 0 < hi:  # one sign only, on either side
        choices += [(0.0, -lo / (hi - lo)), (-lo / (hi - lo), 1.0)]
    a, b = choices[int(rng.integers(len(choices)))]
    sub = (lo + a * (hi - lo), lo + b * (hi - lo))
    if np_dtype(t.dtype).kind in "iu":  # whole bounds, still inside [lo, hi], never empty
        ilo = min(max(math.ceil(sub[0]), lo), hi)
        return float(ilo), float(max(ilo, min(math.floor(sub[1]), hi)))
    return sub


def synthesize(graph: Graph, rng: np.random.Generator, attempt: int = 0) -> dict[str, np.ndarray]:
    """Values for every runtime input of ``graph``; attempt 0 uses each input's whole range."""
    feeds = {}
    for v in graph.inputs:
        if v.pinned:  # its value is part of the model; no draw, so the others' draws do not move
            feeds[v.name] = feed_array(rng, v)
            continue
        lo, hi = input_range(v.type, v.hint, attempt, rng)
        feeds[v.name] = feed_array(rng, v, lo, hi)
    return feeds


def all_finite(outputs: Iterable[np.ndarray]) -> bool:
    """Whether no float output holds a NaN or an infinity."""
    for o in outputs:
        a = np.asarray(o)
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            return False
    return True
