"""Signal processing: the window generators HannWindow, HammingWindow, BlackmanWindow, and DFT.

DFT's input ends in a dimension of 1 (real) or 2 (complex): its first input takes a shape domain,
which the DSL does not accept yet (OpSpec and the solver take only a rank range for a first input);
``dft_spec()`` builds the spec once they do (the patch to spec/dsl.py and solve/instantiate.py is
in the report that added this module), and then belongs in SPECS.  The axis is an attribute at
opsets 17-19 and a constant input from opset 20; the optional dft_length is a constant that may
truncate or zero-pad the axis, within the element budget.  One-sided transforms only where ONNX
defines them: forward on real input (RFFT), inverse on complex input (IRFFT, whose default length
2 * (n - 1) needs n >= 2).

A window's length is the value of its one input, a scalar: the spec draws the length first (in
the input's hint function, the first thing the solver evaluates) and asks for a scalar holding
exactly that value: a new input gets the one-value hint {min: n, max: n}, and only tensors whose
value interval is that single value are reused (an initializer, a Size, a ReduceX over constants
...), so the output length is static even when the size is computed.  ONNX shape inference only
knows it when the size is a constant.
"""

from __future__ import annotations

import math
import random

import numpy as np

from dlcfuzz.ir import ONNX_CODE, TensorType
from dlcfuzz.spec.dsl import BOOL, Choice, Const, In, Int, Maybe, OpSpec, ShapeDom

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


# ---------------------------------------------------------------------------------------------
# DFT
# ---------------------------------------------------------------------------------------------
NMAX = 16  # dft_length is drawn in 1..NMAX


class Signal(ShapeDom):
    """DFT inputs: rank in ``ranks``, the last dimension 1 (real) or 2 (complex), at most ``cap``
    elements; fresh ones have dims in 1..max_dim."""

    def __init__(self, ranks: tuple[int, ...], cap: int, max_dim: int) -> None:
        self.ranks, self.cap, self.max_dim = ranks, cap, max_dim

    def accepts(self, shape: tuple[int, ...]) -> bool:
        return len(shape) in self.ranks and shape[-1] in (1, 2) and math.prod(shape) <= self.cap

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        last = rng.randint(1, 2)
        room = self.cap // last
        dims = []
        for _ in range(rng.choice(self.ranks) - 1):
            d = rng.randint(1, max(1, min(self.max_dim, room)))
            room //= d
            dims.append(d)
        return (*dims, last)


def _signal(c) -> Signal:
    lo = 3 if c.cfg.opset < 20 else 2  # DFT-17: [batch][n1]...[1|2]; DFT-20: [n0]...[1|2]
    return Signal(tuple(range(lo, c.cfg.max_rank + 1)), c.cfg.max_numel // 2, c.cfg.max_dim)


def _irfft(c) -> bool:
    return bool(c.onesided and c.inverse)


def _out_len(c, n: int) -> int:
    """The transformed axis' output length for a DFT length n."""
    return n // 2 + 1 if c.onesided and not c.inverse else n


def _n(c) -> int:
    """The DFT length: dft_length, else the axis length (IRFFT: 2 * (length - 1))."""
    if c._len is not None:
        return c._len
    m = c.s[c._axis]
    return 2 * (m - 1) if _irfft(c) else m


def _onesided(c):
    """RFFT needs real input, IRFFT complex input."""
    return Maybe(BOOL if (c.s[-1] == 1) != bool(c.inverse) else Choice((0,)))


def _dft_len(c):
    """dft_length: its output keeps within max_numel (IRFFT of a length-1 axis needs it: 2 * 0 = 0)."""
    rest = c.x.numel // (c.s[c._axis] * c.s[-1]) * (1 if _irfft(c) else 2)
    top = 1
    while top < NMAX and rest * _out_len(c, top + 1) <= c.cfg.max_numel:
        top += 1
    dom = Int(1, top)
    m = c.s[c._axis]
    default_ok = (m >= 2 or not _irfft(c)) and rest * _out_len(c, 2 * (m - 1) if _irfft(c) else m) <= c.cfg.max_numel
    return Maybe(dom, 0.4) if default_ok else dom


def _axis_attr(c):
    """opset 17-19: the axis attribute (default 1), in its non-negative or negative form."""
    if c.cfg.opset >= 20:
        return Choice((None,))
    forms = Choice((c._axis, c._axis - c.r))
    return Maybe(forms) if c._axis == 1 else forms


def _axis_input(c):
    """opset 20+: the axis input (default -2, the last signal axis)."""
    if c.cfg.opset < 20:
        return None
    if c._axis == c.r - 2 and c._omit_axis:
        return None
    return np.array(c._axis if c._neg_axis == 0 else c._axis - c.r, dtype=np.int64)


def _dft_out(c) -> list[TensorType]:
    shape = list(c.s)
    shape[c._axis] = _out_len(c, _n(c))
    shape[-1] = 1 if _irfft(c) else 2
    return [TensorType(tuple(shape), c.x.dtype)]


def dft_spec() -> OpSpec:
    """DFT's spec (raises TypeError until the DSL takes a first-input shape domain)."""
    return OpSpec(
        "DFT", "signal",
        [In("input", rank=(2, 99), room=2, shape=_signal),
         Const("dft_length", lambda c: None if c._len is None else np.array(c._len, dtype=c._ltype)),
         Const("axis", _axis_input)],
        _dft_out,
        attrs={
            # ONNX: axis in [-r, -2] U [0, r-2] (the last dimension holds real / imaginary parts)
            "_axis": lambda c: Int(0, c.r - 2),
            "axis": _axis_attr,
            "_omit_axis": BOOL, "_neg_axis": BOOL,
            "inverse": Maybe(BOOL),
            "onesided": _onesided,
            "_len": _dft_len,
            "_ltype": Choice(("int32", "int64")),
        },
        checks={
            "last dimension 1 or 2": lambda c: c.s[-1] in (1, 2),
            "axis is not the last dimension": lambda c: 0 <= c._axis <= c.r - 2,
            "RFFT on real input, IRFFT on complex input": lambda c: not c.onesided or (c.s[-1] == 2) == bool(c.inverse),
            "DFT length >= 1": lambda c: _n(c) >= 1,
        },
        since=17,
    )


SPECS: list[OpSpec] = [window("HannWindow"), window("HammingWindow"), window("BlackmanWindow")]
