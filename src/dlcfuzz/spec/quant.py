"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv.

Scales and zero points are constants (as a quantizer writes them, so that ONNX Runtime's QDQ fusions
see them): scales positive, zero points anywhere in their type's range, per tensor (a scalar or a
1-element vector) or, where the operator allows it, per axis / per column / per output channel.
Their dtypes follow the data: a zero point has its tensor's type, an output zero point fixes the
output type.  ``ort(c)`` narrows to what ONNX Runtime's CPU kernels implement (marked ``ORT:``);
the type pairings ORT registers for QLinearMatMul / QLinearConv (int8 data needs int8 weights) are
enforced by the second data input's value domain in ``solve/intervals.py``.
"""

from __future__ import annotations

import numpy as np

from dlcfuzz.ir import ONNX_CODE, TensorType
from dlcfuzz.spec.conv import CONV, conv_dims, group
from dlcfuzz.spec.dsl import BOOL, Choice, Const, In, Maybe, OpSpec, axis_dom
from dlcfuzz.spec.nn import _k_of_b, _matmul_b, _mm_out

SCALE_LO, SCALE_HI = 0.005, 1.0  # positive scales; ONNX Runtime requantizes with their ratio


def ort(c) -> bool:
    return c.cfg.target == "ort"


def _fixed(v) -> Choice:
    return Choice((v,))


def _allowed(c, cands: tuple[str, ...]) -> tuple[str, ...]:
    """Dtypes of a constant or output that no type variable governs: the chosen dtype set's, if any."""
    got = tuple(d for d in cands if not c.cfg.dtypes or d in c.cfg.dtypes)
    return got or cands[:1]


def _keep(c, name: str, v):
    """Records a constant's value on the context (a solver variable) for the checks."""
    c.set(name, v)
    return v


def scale(c, shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return np.round(c.np.uniform(SCALE_LO, SCALE_HI, size=shape), 4).astype(dtype)


def zero_point(c, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Anywhere in the type's range (int32: 0, the only zero point DequantizeLinear defines)."""
    if dtype == "int32":
        return np.zeros(shape, dtype=dtype)
    info = np.iinfo(dtype)
    return c.np.integers(int(info.min), int(info.max), size=shape, endpoint=True).astype(dtype)


def _param_shape(c) -> tuple[int, ...]:
    """Scale / zero point shape of QuantizeLinear and DequantizeLinear: per axis (the axis's length),
    or per tensor (a scalar or a 1-element vector)."""
    if c._per_axis:
        return (c.s[(1 if c.axis is None else c.axis) % c.r],)
    return (1,) if c._unit else ()


def _q_axis(c):
    """Per axis: the axis (default 1 needs rank >= 2).  Per tensor it is ignored (any valid axis)."""
    if c._per_axis:
        return Maybe(axis_dom(c.r)) if c.r >= 2 else axis_dom(c.r)
    return Maybe(axis_dom(c.r)) if c.r >= 1 else _fixed(None)


def _unit_ok(c) -> bool:
    """Whether a 1-element vector scale is valid: ONNX reads any 1-D scale as per axis ("a scalar for
    per-tensor / per layer quantization, or a 1-D tensor for per-axis quantization"), and per axis
    the axis must lie in "[-r, r-1] where r = rank(input)" (none does at rank 0; the default axis 1
    needs rank >= 2) and "the scale must be a 1-D tensor, with the length of the quantization axis"
    (opset 21): so only along an axis of length 1."""
    ax = 1 if c.axis is None else c.axis
    return -c.r <= ax < c.r and c.s[ax % c.r] == 1


def _param_checks(k: int) -> dict:
    return {
        "scale and zero point have one shape": lambda c: c.ins[k + 1] is None or c.ins[k].shape == c.ins[k + 1].shape,
        "per axis: scale has the axis's length": lambda c: not c._per_axis or c.ins[k].shape == _param_shape(c),
        "per tensor: scale has one element": lambda c: c._per_axis or c.ins[k].numel == 1,
        "axis in [-r, r-1]": lambda c: c.axis is None or -c.r <= c.axis < c.r,
        "a 1-D scale (also of one element) is per axis: a valid axis of that length": lambda c: len(c.ins[k].shape) != 1
        or (-c.r <= (1 if c.axis is None else c.axis) < c.r
            and c.ins[k].shape[0] == c.s[(1 if c.axis is None else c.axis) % c.r]),
    }


# ---------------------------------------------------------------------------------------------
# QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
# ---------------------------------------------------------------------------------------------
def _q_types(c) -> tuple[str, ...]:
    # ORT: int16/uint16 from opset 21 (ONNX also has float8 from 19 and 4-bit types from 21)
    return _allowed(c, ("int8", "uint8", "int16", "uint16") if c.cfg.opset >= 21 else ("int8", "uint8"))


def _q_out_type(c) -> str:
    if c._zt is not None:
        return c._zt
    od = c.attrs.get("output_dtype")
    return next((d for d, code in ONNX_CODE.items() if code == od), "uint8") if od else "uint8"


def _output_dtype(c):
    """opset 21: output_dtype, the zero point's type when one is given (else any quantized type)."""
    if c.cfg.opset < 21:
        return _fixed(None)
    if c._zt is not None:
        return Maybe(_fixed(ONNX_CODE[c._zt]), 0.7)
    return Maybe(Choice([ONNX_CODE[d] for d in _q_types(c)]), 0.5)


QUANTIZE = OpSpec(
    "QuantizeLinear", "quant",
    [In("x", rank=(0, 99)),
     # opset 19+: the scale has x's type (13: float)
     Const("y_scale", lambda c: scale(c, _param_shape(c), "float32" if c.cfg.opset < 19 else c.x.dtype)),
     Const("y_zero_point", lambda c: None if c._zt is None else zero_point(c, _param_shape(c), c._zt))],
    lambda c: [TensorType(c.s, _q_out_type(c))],
    attrs={
        "_per_axis": lambda c: BOOL if c.r >= 1 else _fixed(0),
        "axis": _q_axis,
        "_unit": lambda c: BOOL if not c._per_axis and _unit_ok(c) else _fixed(0),  # per tensor: () or (1,)
        "_zt": lambda c: Maybe(Choice(_q_types(c)), 0.2),  # the zero point's type; None: omitted (uint8)
        "output_dtype": _output_dtype,
    },
    checks={**_param_checks(1),
            "output type is the zero point's": lambda c: c.ins[2] is None or _q_out_type(c) == c.ins[2].dtype},
    since=13,
)


def _dq_out_type(c) -> str:
    return "float32" if c.cfg.opset < 19 else c._st


DEQUANTIZE = OpSpec(
    "DequantizeLinear", "quant",
    [In("x", rank=(0, 99)),
     Const("x_scale", lambda c: scale(c, _param_shape(c), _dq_out_type(c))),
     Const("x_zero_point", lambda c: zero_point(c, _param_shape(c), c.x.dtype) if c._zp else None)],
    lambda c: [TensorType(c.s, _dq_out_type(c))],
    attrs={
        "_per_axis": lambda c: BOOL if c.r >= 1 else _fixed(0),
        "axis": _q_axis,
        "_unit": lambda c: BOOL if not c._per_axis and _unit_ok(c) else _fixed(0),  # per tensor: () or (1,)
        # ORT (opset 21): QDQ propagation after an int8 DequantizeLinear with a zero point inserts a
        # QuantizeLinear whose output_dtype contradicts its zero point: the session fails
        "_zp": lambda c: _fixed(0) if ort(c) and c.cfg.opset >= 21 and c.x.dtype == "int8" else BOOL,
        # opset 19+: the scale's type is the output type (ORT: float, float16; ONNX also bfloat16)
        "_st": lambda c: Choice(_allowed(c, ("float32", "float16"))) if c.cfg.opset >= 19 else _fixed(None),
    },
    # int32 data (ONNX allows it, ORT implements it) is left out for every target: ORT's graph
    # optimizations crash on it (MatMulIntegerToFloat fusion of two int32 DequantizeLinear feeding a
    # MatMul, QDQ propagation of an int32 zero point through Unsqueeze / MaxPool ...), so the
    # session of any model using it may fail; spec.types is static (see docs/discrepancies.md)
    types={"T": ("int8", "uint8"), "T1": ("int8", "uint8", "int16", "uint16")},
    checks={**_param_checks(1),
            "ORT opset 21: no zero point for int8": lambda c: not (ort(c) and c.cfg.opset >= 21)
            or c.x.dtype != "int8" or not c._zp},
    since=13,
)


DYNAMIC_QUANTIZE = OpSpec(
    "DynamicQuantizeLinear", "quant",
    [In("x", rank=(0, 99))],
    lambda c: [TensorType(c.s, "uint8"), TensorType((), "float32"), TensorType((), "uint8")],
    since=11,
)


# ---------------------------------------------------------------------------------------------
# MatMulInteger, QLinearMatMul
# ---------------------------------------------------------------------------------------------
def _b_param_shape(c, b: tuple[int, ...]) -> tuple[int, ...]:
    """A per-tensor or per-column shape for B's zero point / scale.  ORT: per column is (N,) for a
    2-D B, B's batch dims + (1, N) beyond (ONNX also allows per-row / N-D forms for A)."""
    if len(b) >= 2 and c.rng.random() < 0.5:
        return (b[-1],) if len(b) == 2 else (*b[:-2], 1, b[-1])
    return (1,) if c.rng.random() < 0.3 else ()


def _mmi_bzp(c):
    if not c._bzp:
        return None
    return _keep(c, "_bzs", zero_point(c, _b_param_shape(c, c.ins[1].shape), c.ins[1].dtype))


def _mm_checks(b: int) -> dict:
    return {"inner dimensions match": lambda c: _k_of_b(c.ins[b].shape) == c.s[-1]}


MATMUL_INTEGER = OpSpec(
    "MatMulInteger", "quant",
    [In("A", rank=(1, 99)), In("B", shape=_matmul_b, weight=True),
     # ORT: a_zero_point per tensor only (ONNX: also per row)
     Const("a_zero_point", lambda c: zero_point(c, () if c._unit else (1,), c.x.dtype) if c._azp else None),
     Const("b_zero_point", _mmi_bzp)],
    lambda c: [TensorType(_mm_out(c.s, c.ins[1].shape), "int32")],
    attrs={"_azp": BOOL, "_unit": BOOL, "_bzp": BOOL},
    checks={**_mm_checks(1),
            "a_zero_point per tensor": lambda c: c.ins[2] is None or c.ins[2].numel == 1,
            "zero points have their data's type": lambda c: all(
                z is None or z.dtype == d.dtype for z, d in ((c.ins[2], c.x), (c.ins[3], c.ins[1])))},
    since=10,
)


def _qmm_b_params(c, which: str):
    """b_scale / b_zero_point: one shape for both, drawn with the first of them."""
    if which == "scale":
        c.set("_bshape", _b_param_shape(c, c.ins[3].shape))
        return scale(c, c._bshape)
    return zero_point(c, c._bshape, c.ins[3].dtype)


def _unit_shape(c) -> tuple[int, ...]:
    return (1,) if c.rng.random() < 0.3 else ()


QLINEAR_MATMUL = OpSpec(
    "QLinearMatMul", "quant",
    [In("a", rank=(1, 99)),
     # ORT: a's scale and zero point per tensor only
     Const("a_scale", lambda c: scale(c, c._ashape)),
     Const("a_zero_point", lambda c: zero_point(c, c._ashape, c.x.dtype)),
     In("b", shape=_matmul_b, weight=True),
     Const("b_scale", lambda c: _qmm_b_params(c, "scale")),
     Const("b_zero_point", lambda c: _qmm_b_params(c, "zero_point")),
     Const("y_scale", lambda c: scale(c, c._yshape)),
     # ORT: the output type is a's (uint8 x {uint8, int8} -> uint8, int8 x int8 -> int8)
     Const("y_zero_point", lambda c: zero_point(c, c._yshape, c.x.dtype if ort(c) else c._yt))],
    lambda c: [TensorType(_mm_out(c.s, c.ins[3].shape), c.x.dtype if ort(c) else c._yt)],
    attrs={"_ashape": lambda c: Choice(((), (1,))), "_yshape": lambda c: Choice(((), (1,))),
           "_yt": lambda c: _fixed(None) if ort(c) else Choice(("int8", "uint8"))},
    checks={**_mm_checks(3),
            "scale and zero point have one shape": lambda c: all(
                c.ins[k].shape == c.ins[k + 1].shape for k in (1, 4, 6)),
            "ORT: int8 a needs int8 b": lambda c: not ort(c) or c.x.dtype != "int8" or c.ins[3].dtype == "int8"},
    since=10,
)


# ---------------------------------------------------------------------------------------------
# ConvInteger, QLinearConv (Conv's window attributes)
# ---------------------------------------------------------------------------------------------
def _w_shape(c) -> tuple[int, ...]:
    return (group(c) * c._m, c.s[1] // group(c), *c._k)


def _conv_checks(w: int) -> dict:
    """Conv's checks with the weight at input ``w``."""
    def wshape(c):
        return c.ins[w].shape
    return {
        "group divides C": lambda c: c.s[1] % group(c) == 0,
        "W is [M, C/group, k...]": lambda c: len(wshape(c)) == c.r and wshape(c)[1] * group(c) == c.s[1],
        "group divides M": lambda c: wshape(c)[0] % group(c) == 0,
        "kernel_shape matches W": lambda c: c.attrs.get("kernel_shape") in (None, list(wshape(c)[2:])),
        **{k: v for k, v in CONV.checks.items()
           if k in ("pads only with NOTSET", "pads >= 0", "a window fits the padded input",
                    "no dilation with SAME (ORT)", "output dims >= 1")},
    }


CONV_INTEGER = OpSpec(
    "ConvInteger", "quant",
    [In("x", rank=(3, 5), room=2), In("w", shape=_w_shape, weight=True),
     # ONNX: x_zero_point "is a scalar"; w's "a scalar or a 1-D tensor ... equal to the number of output
     # channels (M)" (ORT: per tensor only), so a 1-element vector only where M is 1
     Const("x_zero_point", lambda c: zero_point(c, (), c.x.dtype) if c._xzp else None),
     Const("w_zero_point", lambda c: zero_point(c, _m_unit_shape(c), c.ins[1].dtype) if c._wzp else None)],
    lambda c: [TensorType((c.s[0], group(c) * c._m, *conv_dims(c)), "int32")],
    attrs={**CONV.attrs, "_xzp": BOOL, "_wzp": BOOL},
    checks={**_conv_checks(1),
            "x zero point is a scalar": lambda c: c.ins[2] is None or c.ins[2].shape == (),
            "w zero point: per tensor or [M]": lambda c: c.ins[3] is None
            or c.ins[3].shape in ((), (c.ins[1].shape[0],))},
    since=10,
)


def _m_unit_shape(c) -> tuple[int, ...]:
    """A per-tensor shape where ONNX allows "a scalar or a 1-D tensor [of] the number of output channels
    (M)": a scalar, or a 1-element vector when M is 1."""
    return _unit_shape(c) if group(c) * c._m == 1 else ()


def _qc_w_params(c, which: str):
    """w_scale / w_zero_point: per tensor or per output channel, one shape for both."""
    m = group(c) * c._m
    if which == "scale":
        c.set("_wshape", (m,) if c.rng.random() < 0.5 else _m_unit_shape(c))
        return scale(c, c._wshape)
    return zero_point(c, c._wshape, c.ins[3].dtype)


QLINEAR_CONV = OpSpec(
    "QLinearConv", "quant",
    [In("x", rank=(3, 5), room=2),
     Const("x_scale", lambda c: scale(c, c._xshape)),
     Const("x_zero_point", lambda c: zero_point(c, c._xshape, c.x.dtype)),
     In("w", shape=_w_shape, weight=True),
     Const("w_scale", lambda c: _qc_w_params(c, "scale")),
     Const("w_zero_point", lambda c: _qc_w_params(c, "zero_point")),
     Const("y_scale", lambda c: scale(c, c._yshape)),
     Const("y_zero_point", lambda c: zero_point(c, c._yshape, c.x.dtype if ort(c) else c._yt)),
     In("B", T="T4", shape=lambda c: (group(c) * c._m,), optional=True, weight=True)],
    lambda c: [TensorType((c.s[0], group(c) * c._m, *conv_dims(c)), c.x.dtype if ort(c) else c._yt)],
    # ONNX: x's and y's scale and zero point are "a scalar, which means a per-tensor/layer quantization"
    # (a 1-element vector is read per axis by OpenVINO)
    attrs={**CONV.attrs, "_xshape": Choice(((),)), "_yshape": Choice(((),)),
           "_yt": lambda c: _fixed(None) if ort(c) else Choice(("int8", "uint8"))},
    checks={**_conv_checks(3),
            "B is [M]": lambda c: c.ins[8] is None or c.ins[8].shape == (c.ins[3].shape[0],),
            "w scale and zero point: per tensor or [M]": lambda c: c.ins[4].shape == c.ins[5].shape
            and c.ins[4].shape in ((), (c.ins[3].shape[0],)),
            "x and y scale and zero point are scalars": lambda c: all(c.ins[k].shape == () for k in (1, 2, 6, 7)),
            "ORT: int8 x needs int8 w": lambda c: not ort(c) or c.x.dtype != "int8" or c.ins[3].dtype == "int8"},
    since=10,
)

SPECS: list[OpSpec] = [QUANTIZE, DEQUANTIZE, DYNAMIC_QUANTIZE, MATMUL_INTEGER, CONV_INTEGER, QLINEAR_MATMUL,
                       QLINEAR_CONV]
