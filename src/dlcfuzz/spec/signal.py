"""Signal processing: the window generators HannWindow, HammingWindow, BlackmanWindow.

A window's length is the value of its one input, a scalar: the spec draws the length first (in
the input's hint function, the first thing the solver evaluates) and asks for a scalar holding
exactly that value: a new input gets the one-value hint {min: n, max: n}, and only tensors whose
value interval is that single value are reused (an initializer, a Size, a ReduceX over constants
...), so the output length is static even when the size is computed.  ONNX shape inference only
knows it when the size is a constant.

DFT is not here: its first input must end in a dimension of 1 (real) or 2 (complex), which the DSL
cannot ask of a first input (it only takes a rank range); see the report in docs/discrepancies.md.
"""

from __future__ import annotations

from dlcfuzz.ir import ONNX_CODE, TensorType
from dlcfuzz.spec.dsl import BOOL, Choice, In, Maybe, OpSpec

WMAX = 10  # window lengths are drawn in 1..WMAX
# T2: ONNX allows every numeric type and bfloat16; ORT registers float, double and the integers
# (float16 runs too, but is not registered)
WINDOW_TYPES = ("float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")


def _size_hint(c) -> dict:
    """Draws the window length and asks for a size input holding exactly it."""
    c.set("_size", c.rng.randint(1, WMAX))
    return {"min": c._size, "max": c._size}


def _out_types(c) -> list[int]:
    types = WINDOW_TYPES + (() if c.cfg.target == "ort" else ("float16",))
    allowed = [d for d in types if not c.cfg.dtypes or d in c.cfg.dtypes] or ["float32"]
    return [ONNX_CODE[d] for d in allowed]


def _dtype(c) -> str:
    code = c.output_datatype or 1
    return next(d for d, k in ONNX_CODE.items() if k == code)


def window(op: str) -> OpSpec:
    return OpSpec(
        op, "signal",
        [In("size", rank=(0, 0), hint=_size_hint)],
        lambda c: [TensorType((c._size,), _dtype(c))],
        # a symmetric window of length 1 divides by N - 1 = 0 (NaN in ONNX's formula and in ORT)
        # (the metrics' call-space estimate evaluates the domains without drawing a size)
        attrs={"periodic": lambda c: Maybe(BOOL if getattr(c, "_size", 2) >= 2 else Choice((1,))),
               "output_datatype": lambda c: Maybe(Choice(_out_types(c)))},
        checks={"size is a scalar": lambda c: c.r == 0,
                "symmetric windows have length >= 2": lambda c: c.periodic in (None, 1) or c._size >= 2},
        since=17,
    )


SPECS: list[OpSpec] = [window("HannWindow"), window("HammingWindow"), window("BlackmanWindow")]
