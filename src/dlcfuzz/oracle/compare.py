"""Output comparison with per-dtype tolerances.

Defaults (``TOLERANCES``): float64 rtol 1e-5 / atol 1e-8, float32 rtol 1e-2 / atol 1e-3,
float16 rtol 5e-2 / atol 1e-2; integers and booleans exactly.  float32's bound is NNSmith's,
chosen there to keep false alarms rare on chains of 30 operators whose rounding errors
compound (fused multiply-adds, reassociated reductions, vectorized transcendental functions);
float16 has ~3 significant digits; float64 keeps 5 digits because no compiler here has a
reason to lose more.  NaNs compare equal to NaNs and infinities to infinities of the same sign:
the inputs are chosen to keep outputs finite, and a compiler that produces NaN where the
reference does not is still caught.  A variant whose options set ``low_precision`` is
compared with ``LOW_PRECISION`` (rtol 0.1, atol 0.05): bf16 keeps 8 significant bits.
Integer outputs computed from float math (a Cast of a float, a window function with an integer
``output_datatype``) may move by one unit: one ulp upstream flips a rounding.  Outputs that the spec
computes through a narrower float type (``Graph.computed_in_narrower_float``: float64 through float32,
a GroupNormalization whose ``stash_type`` is float16) get that type's tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np

TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-5, 1e-8),
    "float32": (1e-2, 1e-3),
    "float16": (5e-2, 1e-2),
}
# a GPU variant against the variant it is paired with (cuda-eager against eager: torch's CUDA kernels
# against its CPU ones; cuda-inductor against cuda-eager), measured on an NVIDIA H200 with torch 2.11
# (benchmarks/gpu_smoke.py, 270 generated graphs of 1-10 ONNX operators, TF32 off): the largest
# |difference| / max(|value|, atol) of a float32 output was 3.4e-4 (p99 2.6e-5, 293 outputs;
# cuda-inductor against cuda-eager: p99 2.6e-5 besides one real divergence), so float32's rtol is
# 3e-3, about 9 times that, where the CPU's 1e-2 allows for chains of 30 operators compiled by
# different compilers.  float16 (8.4e-4 over only 6 outputs) and float64 (3.3e-15) keep the CPU's.
GPU_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": TOLERANCES["float64"],
    "float32": (3e-3, 1e-3),
    "float16": TOLERANCES["float16"],
}
# variants that compute in low precision on purpose (e.g. OpenVINO's default bf16 hint on CPUs
# with bf16 units): 8 significant bits, compounded over the graph
LOW_PRECISION: dict[str, tuple[float, float]] = {
    "float64": (1e-1, 5e-2),
    "float32": (1e-1, 5e-2),
    "float16": (1e-1, 5e-2),
}


def pair_tolerances(tolerances: dict[str, tuple[float, float]] | None, pair: Collection[tuple[str, str]],
                    low_precision: Collection[tuple[str, str]] = (),
                    in_float32: Collection[tuple[str, str]] = ()) -> dict[str, tuple[float, float]]:
    """The tolerances for comparing the (backend, variant)s of ``pair``: ``LOW_PRECISION`` if one
    computes in low precision on purpose; float32's for float64 if one computes float64 in float32."""
    tol = TOLERANCES | (tolerances or {})
    if set(pair) & set(low_precision):
        tol |= LOW_PRECISION
    if set(pair) & set(in_float32):
        tol["float64"] = tol["float32"]
    return tol


@dataclass
class Mismatch:
    output: int
    kind: str  # "shape", "dtype" or "value"
    detail: str
    max_abs: float = 0.0


def _first_mismatch(expected: list[np.ndarray], actual: list[np.ndarray], float_kinds: str,
                    floats: Callable[[int, np.ndarray, np.ndarray], Mismatch | None],
                    rounded: Collection[int] = (), low_precision: bool = False) -> Mismatch | None:
    """The first output whose count, shape, dtype or values differ; ``floats`` judges the values of
    non-empty outputs whose dtype kind is in ``float_kinds``, every other dtype must match exactly,
    except the ``rounded`` outputs (integers computed from float math), which may move by one unit, and
    by any amount where one side computed in low precision (``low_precision``: bfloat16 moves a float by
    a part in 256, enough to move a quantized value by a step, which a MatMulInteger multiplies by its
    weight): their shapes and types are still compared."""
    if len(expected) != len(actual):
        return Mismatch(-1, "shape", f"{len(actual)} outputs, expected {len(expected)}")
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        e, a = np.asarray(e), np.asarray(a)
        if e.shape != a.shape:
            return Mismatch(i, "shape", f"shape {a.shape}, expected {e.shape}")
        if e.dtype != a.dtype:
            return Mismatch(i, "dtype", f"dtype {a.dtype}, expected {e.dtype}")
        if e.size == 0:
            continue
        if e.dtype.kind in float_kinds:
            m = floats(i, e, a)
            if m is not None:
                return m
        elif i in rounded and e.dtype.kind in "iu":
            if low_precision:
                continue
            with np.errstate(invalid="ignore", over="ignore"):
                bad = np.abs(e.astype(np.float64) - a.astype(np.float64)) > 1
            if bad.any():
                return Mismatch(i, "value", f"{int(bad.sum())}/{e.size} elements differ by more than one unit "
                                "(integers computed from floats)", 1.0)
        elif not np.array_equal(e, a):
            bad = e != a
            return Mismatch(i, "value", f"{int(bad.sum())}/{e.size} elements differ (exact comparison)", 1.0)
    return None


def compare(expected: list[np.ndarray], actual: list[np.ndarray],
            tolerances: dict[str, tuple[float, float]] | None = None, rounded: Collection[int] = (),
            single: Collection[int] | Mapping[int, str] = (), low_precision: bool = False) -> Mismatch | None:
    """The first output that differs beyond tolerance, or None.  ``rounded``: indices of integer
    outputs computed from float math, which one ulp upstream can move by one unit (and low precision on
    one side, ``low_precision``, by any amount); ``single``: indices of float outputs computed through a
    narrower float type, compared with its tolerance (a mapping index -> that type; a plain collection:
    float32)."""
    tol = TOLERANCES | (tolerances or {})

    def floats(i: int, e: np.ndarray, a: np.ndarray) -> Mismatch | None:
        narrow = (single.get(i, "float32") if isinstance(single, Mapping) else "float32") if i in single else None
        rtol, atol = tol[narrow] if narrow else tol.get(e.dtype.name, tol["float32"])
        # NaN, inf and values out of float64's range are compared, not warned about: inf - inf is NaN
        # (counted as the worst difference), a cast of a special value is what it is
        with np.errstate(invalid="ignore", over="ignore"):
            e64, a64 = e.astype(np.float64), a.astype(np.float64)
            close = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
            if close.all():
                return None
            bad = ~close
            worst = float(np.abs(np.nan_to_num(a64 - e64, nan=np.inf))[bad].max())
        return Mismatch(i, "value", f"{int(bad.sum())}/{e.size} elements differ "
                        f"(max abs diff {worst:.4g}, rtol {rtol}, atol {atol})", worst)

    return _first_mismatch(expected, actual, "f", floats, rounded, low_precision)


# OPERA's inconsistency oracle: the Chebyshev distance (max absolute difference) between the library's
# and the compiler's outputs.  The paper's threshold lost its digits in extraction; we take 1e-3 for
# float32 (a single operator has no chain of rounding errors to compound, so NNSmith's 1e-2 relative
# bound would hide real errors) scaled by the output's magnitude above 1 (exp(10) in float32 carries
# ~2e-3 of rounding alone), 1e-7 for float64 and 1e-2 for float16; integers and booleans exactly.
CHEBYSHEV: dict[str, float] = {"float64": 1e-7, "float32": 1e-3, "float16": 1e-2}


def chebyshev(expected: list[np.ndarray], actual: list[np.ndarray],
              tolerances: dict[str, float] | None = None) -> Mismatch | None:
    """The first output whose Chebyshev distance to the expected one exceeds the bound, or None."""
    tol = CHEBYSHEV | (tolerances or {})

    def floats(i: int, e: np.ndarray, a: np.ndarray) -> Mismatch | None:
        with np.errstate(invalid="ignore", over="ignore"):
            return _chebyshev_floats(i, e, a)

    def _chebyshev_floats(i: int, e: np.ndarray, a: np.ndarray) -> Mismatch | None:
        e64 = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
        same_special = (np.isnan(e64) == np.isnan(a)).all() and (e64[np.isinf(e64)] == a[np.isinf(e64)]).all()
        ok = np.isfinite(e64) & np.isfinite(a)
        if not same_special or (ok != np.isfinite(e64)).any():
            n = int((np.isfinite(e64) != np.isfinite(a)).sum() + (np.isnan(e64) != np.isnan(a)).sum())
            return Mismatch(i, "value", f"NaN/inf where the library has none, or the reverse ({n} elements)",
                            float("inf"))
        dist = float(np.abs(e64[ok] - a[ok]).max(initial=0.0))
        bound = tol.get(e.dtype.name, tol["float32"]) * max(1.0, float(np.abs(e64[ok]).max(initial=0.0)))
        return Mismatch(i, "value", f"Chebyshev distance {dist:.4g} > {bound:.3g}", dist) if dist > bound else None

    return _first_mismatch(expected, actual, "fc", floats)


def all_finite(outputs: list[np.ndarray]) -> bool:
    return all(np.isfinite(o).all() for o in outputs if np.asarray(o).dtype.kind == "f")
