"""Output comparison with per-dtype tolerances.

Defaults (``TOLERANCES``): float64 rtol 1e-5 / atol 1e-8, float32 rtol 1e-2 / atol 1e-3,
float16 rtol 5e-2 / atol 1e-2; integers and booleans exactly.  float32's bound is NNSmith's,
chosen there to keep false alarms rare on chains of 30 operators whose rounding errors
compound (fused multiply-adds, reassociated reductions, vectorized transcendental functions);
float16 has ~3 significant digits; float64 keeps 5 digits because no compiler here has a
reason to lose more.  NaNs compare equal to NaNs and infinities to infinities of the same sign:
the inputs are chosen to keep outputs finite, and a compiler that produces NaN where the
reference does not is still caught.  A variant whose options set ``reduced_precision`` is
compared with ``REDUCED_PRECISION`` (rtol 0.1, atol 0.05): bf16 keeps 8 significant bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-5, 1e-8),
    "float32": (1e-2, 1e-3),
    "float16": (5e-2, 1e-2),
}
# variants that compute in reduced precision on purpose (e.g. OpenVINO's default bf16 hint on CPUs
# with bf16 units): 8 significant bits, compounded over the graph
REDUCED_PRECISION: dict[str, tuple[float, float]] = {
    "float64": (1e-1, 5e-2),
    "float32": (1e-1, 5e-2),
    "float16": (1e-1, 5e-2),
}


@dataclass
class Mismatch:
    output: int
    kind: str  # "shape", "dtype" or "value"
    detail: str
    max_abs: float = 0.0


def compare(expected: list[np.ndarray], actual: list[np.ndarray],
            tolerances: dict[str, tuple[float, float]] | None = None) -> Mismatch | None:
    """The first output that differs beyond tolerance, or None."""
    tol = TOLERANCES | (tolerances or {})
    if len(expected) != len(actual):
        return Mismatch(-1, "shape", f"{len(actual)} outputs, expected {len(expected)}")
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        e, a = np.asarray(e), np.asarray(a)
        if e.shape != a.shape:
            return Mismatch(i, "shape", f"shape {a.shape}, expected {e.shape}")
        if e.dtype != a.dtype:
            return Mismatch(i, "dtype", f"dtype {a.dtype}, expected {e.dtype}")
        if e.dtype.kind == "f":
            rtol, atol = tol.get(e.dtype.name, tol["float32"])
            e64, a64 = e.astype(np.float64), a.astype(np.float64)
            close = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
            if not close.all():
                bad = ~close
                diff = np.abs(np.nan_to_num(a64 - e64, nan=np.inf))
                return Mismatch(i, "value", f"{int(bad.sum())}/{e.size} elements differ "
                                f"(max abs diff {float(diff[bad].max()):.4g}, rtol {rtol}, atol {atol})",
                                float(diff[bad].max()))
        elif not np.array_equal(e, a):
            bad = e != a
            return Mismatch(i, "value", f"{int(bad.sum())}/{e.size} elements differ (exact comparison)", 1.0)
    return None


def all_finite(outputs: list[np.ndarray]) -> bool:
    return all(np.isfinite(o).all() for o in outputs if np.asarray(o).dtype.kind == "f")
