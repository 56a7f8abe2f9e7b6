"""Pointwise torch operators: unary math and activations, binary arithmetic and comparisons with
torch's type promotion across float32/float16/bfloat16/int8/uint8/int32/int64/bool (the two operands
of a binary operator take their dtypes independently), scalar operands, casts, where/lerp/addcmul."""

from __future__ import annotations

import math

from dlcfuzz.ir import TensorType
from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import Choice, Float, In, Int, Maybe, broadcast_shapes
from dlcfuzz.spec.torch.base import (
    ALL,
    FLOATS,
    INTS,
    NUMERIC,
    TorchOpSpec,
    bool_iv,
    const_iv,
    float_of,
    hull_iv,
    onnx_iv,
    result_type,
    same_iv,
    same_type,
    small_domain,
    tdt,
)


def _as_bool(c) -> list[TensorType]:
    return [TensorType(c.s, "bool")]


def _float_out(c) -> list[TensorType]:
    return [TensorType(c.s, float_of(c.T))]


def _positive(margin: float = 0.0):
    def d(slot, n, numel, c, ivs):
        return iv.Domain(n.pos + margin if n.kind == "f" else 1.0, n.fmax / 16) if slot == 0 else None
    return d


def _away(slot_of: int = 0):
    def d(slot, n, numel, c, ivs):
        if slot != slot_of:
            return iv.mag(min(64.0, n.fmax / 16)) if n.kind == "f" else None
        return iv.Domain(-64.0, 64.0, 0.25 if n.kind == "f" else 1.0)
    return d


def _mono(f, lo_clip: float | None = None, hi_clip: float | None = None, slope: float = 1.0):
    """A monotone increasing function's interval (widened for rounding)."""
    def t(c: iv.Call) -> list[iv.Iv]:
        a, b = c.x
        try:
            lo, hi = f(a), f(b)
        except (OverflowError, ValueError):
            return [c.n.full]
        if lo_clip is not None:
            lo = max(lo, lo_clip)
        if hi_clip is not None:
            hi = min(hi, hi_clip)
        return [iv.widen((lo, hi), c.n, 8.0, absolute=1.0)]
    return t


def _bounded(lo: float, hi: float):
    return const_iv(lo, hi)


def _absmag(scale: float = 1.0, offset: float = 0.0):
    """|f(x)| <= scale * max|x| + offset."""
    def t(c: iv.Call) -> list[iv.Iv]:
        m = scale * iv.amax(c.x) + offset
        return [iv.widen((-m, m), c.n, 8.0, absolute=1.0)]
    return t


def _exp_dom(slot, n, numel, c, ivs):
    return iv.mag(min(8.0, n.expmax))


def unary(name: str, emit: str, types=FLOATS, transfer=None, vdomain=None, out=same_type, attrs=None,
          grad: bool = True) -> TorchOpSpec:
    """``emit``: a format string of ``x`` and the attributes, e.g. ``torch.exp({x})``."""
    return TorchOpSpec(name, "pointwise", [In("x", T="T", rank=(0, 5))], out, attrs=dict(attrs or {}),
                       types={"T": types}, emit=lambda a, k: emit.format(x=a[0], **k),
                       transfer=transfer or _absmag(), vdomain=vdomain or small_domain(), grad=grad)


_UNARY = [
    unary("abs", "torch.abs({x})", NUMERIC, onnx_iv("Abs")),
    unary("neg", "torch.neg({x})", ("float32", "float16", "bfloat16", "int32", "int64"), onnx_iv("Neg")),
    unary("exp", "torch.exp({x})", transfer=_mono(math.exp), vdomain=_exp_dom),
    unary("expm1", "torch.expm1({x})", transfer=_mono(math.expm1), vdomain=_exp_dom),
    unary("log", "torch.log({x})", transfer=_mono(lambda v: math.log(max(v, 1e-30))), vdomain=_positive(0.01)),
    unary("log2", "torch.log2({x})", transfer=_mono(lambda v: math.log2(max(v, 1e-30))), vdomain=_positive(0.01)),
    unary("log1p", "torch.log1p({x})", transfer=_mono(lambda v: math.log1p(max(v, -0.99))),
          vdomain=lambda s, n, m, c, i: iv.Domain(-0.9, 64.0)),
    unary("sqrt", "torch.sqrt({x})", transfer=_mono(lambda v: math.sqrt(max(v, 0.0))),
          vdomain=lambda s, n, m, c, i: iv.Domain(0.0, 1e4)),
    unary("rsqrt", "torch.rsqrt({x})", transfer=_bounded(0.0, 10.0), vdomain=_positive(0.01)),
    unary("reciprocal", "torch.reciprocal({x})", transfer=_bounded(-8.0, 8.0), vdomain=_away()),
    unary("sigmoid", "torch.sigmoid({x})", transfer=_bounded(0.0, 1.0)),
    unary("tanh", "torch.tanh({x})", transfer=_bounded(-1.0, 1.0)),
    unary("relu", "torch.relu({x})", ("float32", "float16", "bfloat16", "int32", "int64"), onnx_iv("Relu")),
    unary("gelu", "F.gelu({x}, approximate={approximate!r})", transfer=_absmag(1.0, 1.0),
          attrs={"approximate": Choice(("none", "tanh"))}),
    unary("silu", "F.silu({x})", transfer=_absmag(1.0, 1.0)),
    unary("mish", "F.mish({x})", transfer=_absmag(1.0, 1.0)),
    unary("softplus", "F.softplus({x}, beta={beta}, threshold={threshold})", transfer=_absmag(1.0, 2.0),
          attrs={"beta": Float(0.5, 4.0), "threshold": Float(0.1, 20.0)}),
    unary("elu", "F.elu({x}, alpha={alpha})", transfer=_absmag(1.0, 2.0), attrs={"alpha": Float(0.1, 2.0)}),
    unary("celu", "F.celu({x}, alpha={alpha})", transfer=_absmag(1.0, 2.0), attrs={"alpha": Float(0.5, 2.0)}),
    unary("selu", "F.selu({x})", transfer=_absmag(1.1, 2.0)),
    unary("leaky_relu", "F.leaky_relu({x}, {slope})", transfer=_absmag(), attrs={"slope": Float(0.0, 0.5)}),
    unary("hardtanh", "F.hardtanh({x}, {lo}, {hi})", transfer=_absmag(),
          attrs={"lo": Float(-2.0, -0.5), "hi": Float(0.5, 2.0)}),
    unary("relu6", "F.relu6({x})", transfer=_bounded(0.0, 6.0)),
    unary("hardsigmoid", "F.hardsigmoid({x})", transfer=_bounded(0.0, 1.0)),
    unary("hardswish", "F.hardswish({x})", transfer=_absmag(1.0, 1.0)),
    unary("logsigmoid", "F.logsigmoid({x})", transfer=_absmag(1.0, 1.0)),
    unary("softsign", "F.softsign({x})", transfer=_bounded(-1.0, 1.0)),
    unary("tanhshrink", "F.tanhshrink({x})", transfer=_absmag(1.0, 1.0)),
    unary("sin", "torch.sin({x})", transfer=_bounded(-1.0, 1.0)),
    unary("cos", "torch.cos({x})", transfer=_bounded(-1.0, 1.0)),
    unary("atan", "torch.atan({x})", transfer=_bounded(-1.6, 1.6)),
    unary("erf", "torch.erf({x})", transfer=_bounded(-1.0, 1.0)),
    unary("floor", "torch.floor({x})", transfer=onnx_iv("Floor")),
    unary("ceil", "torch.ceil({x})", transfer=onnx_iv("Ceil")),
    unary("round", "torch.round({x})", transfer=onnx_iv("Round")),
    unary("trunc", "torch.trunc({x})", transfer=_absmag()),
    unary("frac", "torch.frac({x})", transfer=_bounded(-1.0, 1.0)),
    unary("sign", "torch.sign({x})", NUMERIC, _bounded(-1.0, 1.0), grad=False),
    unary("square", "torch.square({x})", ("float32", "float16", "bfloat16", "int32", "int64"),
          lambda c: [iv.widen((0.0, iv.amax(c.x) ** 2), c.n, 4.0)],
          vdomain=lambda s, n, m, c, i: iv.mag(min(64.0, math.sqrt(n.fmax) / 4))),
    unary("nan_to_num", "torch.nan_to_num({x}, nan=0.0, posinf=1.0, neginf=-1.0)", transfer=_absmag()),
    unary("logical_not", "torch.logical_not({x})", ALL, bool_iv, out=_as_bool, grad=False),
    unary("bitwise_not", "torch.bitwise_not({x})", (*INTS, "bool"), lambda c: [c.n.full], grad=False),
    unary("isfinite", "torch.isfinite({x})", FLOATS, bool_iv, out=_as_bool, grad=False),
    unary("sin_int", "torch.sin({x})", INTS, _bounded(-1.0, 1.0), out=_float_out, grad=False),
]


def _rt(c, *slots: int) -> str:
    """torch's result type of some inputs (zero-dim tensors promote like scalars)."""
    return result_type(*((c.ins[k].dtype, c.ins[k].rank) for k in slots))


def _binary_out(c) -> list[TensorType]:
    return [TensorType(broadcast_shapes(c.s, c.ins[1].shape), _rt(c, 0, 1))]


def _cmp_out(c) -> list[TensorType]:
    return [TensorType(broadcast_shapes(c.s, c.ins[1].shape), "bool")]


def binary(name: str, emit: str, types=NUMERIC, other=None, transfer=None, vdomain=None, out=_binary_out,
           grad: bool = True, attrs=None) -> TorchOpSpec:
    """Two tensors that broadcast, each of its own dtype (torch promotes): ``emit`` formats x, y and
    the attributes."""
    return TorchOpSpec(name, "pointwise",
                       [In("x", T="T", rank=(0, 5)), In("y", T="T1", shape=lambda c: c.bcast(c.s))],
                       out, attrs=dict(attrs or {}), types={"T": types, "T1": other or types},
                       emit=lambda a, k: emit.format(x=a[0], y=a[1], **k),
                       transfer=transfer, vdomain=vdomain or small_domain(), grad=grad)


def _div_iv(c: iv.Call) -> list[iv.Iv]:
    m = iv.amax(c.ivs[0]) / 0.25 + 1  # the divisor's domain keeps |y| >= 0.25
    return [iv.widen((-m, m), c.n, 4.0, absolute=1.0)]


def _mul_dom(slot, n, numel, c, ivs):
    if n.kind != "f":
        return iv.mag(100.0) if n.kind in "iu" else None
    if slot == 0:
        return iv.mag(min(64.0, n.fmax / 64))
    return iv.mag(max(1.0, min(64.0, n.budget / max(1.0, iv.amax(ivs[0])))))


def _int_small(slot, n, numel, c, ivs):
    """Integer operands stay small enough that int8 sums and products do not wrap differently."""
    if n.kind in "iu":
        return iv.mag(10.0)
    return iv.mag(min(64.0, n.fmax / 64)) if n.kind == "f" else None


def _pow_dom(slot, n, numel, c, ivs):
    if slot == 0:
        return iv.Domain(0.25, 4.0) if n.kind == "f" else iv.Domain(0.0, 3.0)
    return iv.Domain(-2.0, 2.0) if n.kind == "f" else iv.Domain(0.0, 2.0)


_B = [
    binary("add", "torch.add({x}, {y}, alpha={alpha})", transfer=onnx_iv("Add"), vdomain=_int_small,
           attrs={"alpha": Choice((1, 2, -1))}),
    binary("sub", "torch.sub({x}, {y})", ("float32", "float16", "bfloat16", *INTS), transfer=onnx_iv("Sub"),
           vdomain=_int_small),
    binary("mul", "torch.mul({x}, {y})", (*NUMERIC, "bool"), transfer=onnx_iv("Mul"), vdomain=_mul_dom),
    binary("div", "torch.div({x}, {y})", NUMERIC, transfer=_div_iv, vdomain=_away(1),
           out=lambda c: [TensorType(_binary_out(c)[0].shape, float_of(_rt(c, 0, 1)))]),
    binary("div_floor", "torch.div({x}, {y}, rounding_mode={mode!r})", ("float32", "float16", "bfloat16", "int32",
                                                                         "int64"),
           transfer=_div_iv, vdomain=_away(1), attrs={"mode": Choice(("floor", "trunc"))}, grad=False),
    binary("remainder", "torch.remainder({x}, {y})", ("float32", "int32", "int64"), transfer=hull_iv(0, 1),
           vdomain=_away(1), grad=False),
    binary("fmod", "torch.fmod({x}, {y})", ("float32", "float16", "int32", "int64"), transfer=hull_iv(0, 1),
           vdomain=_away(1), grad=False),
    binary("maximum", "torch.maximum({x}, {y})", transfer=hull_iv(0, 1)),
    binary("minimum", "torch.minimum({x}, {y})", transfer=hull_iv(0, 1)),
    binary("pow", "torch.pow({x}, {y})", FLOATS, transfer=const_iv(0.0, 64.0), vdomain=_pow_dom),
    binary("atan2", "torch.atan2({x}, {y})", FLOATS, transfer=const_iv(-3.2, 3.2)),
    binary("hypot", "torch.hypot({x}, {y})", ("float32",), transfer=lambda c: [
        (0.0, 1.5 * (iv.amax(c.ivs[0]) + iv.amax(c.ivs[1])) + 1)]),
    binary("copysign", "torch.copysign({x}, {y})", FLOATS, transfer=_absmag(),
           out=lambda c: [TensorType(_binary_out(c)[0].shape, float_of(_rt(c, 0, 1)))]),
    *(binary(name, f"torch.{name}({{x}}, {{y}})", ALL, transfer=bool_iv, out=_cmp_out, grad=False)
      for name in ("eq", "ne", "lt", "le", "gt", "ge")),
    *(binary(name, f"torch.{name}({{x}}, {{y}})", ALL, transfer=bool_iv, out=_cmp_out, grad=False)
      for name in ("logical_and", "logical_or", "logical_xor")),
    *(binary(name, f"torch.{name}({{x}}, {{y}})", (*INTS, "bool"), transfer=lambda c: [c.n.full], grad=False)
      for name in ("bitwise_and", "bitwise_or", "bitwise_xor")),
]


def _scalar_out(c) -> list[TensorType]:
    """torch's promotion of a tensor with a Python scalar: a float scalar makes an integer tensor's
    result float32; an integer scalar keeps the tensor's dtype."""
    s = c.scalar
    return [TensorType(c.s, c.T if not isinstance(s, float) or c.T in FLOATS else "float32")]


def _scalar_iv(c: iv.Call) -> list[iv.Iv]:
    s = float(c.attrs["scalar"])
    a = iv.amax(c.x) if c.x is not None else 1.0
    m = (abs(s) + 1) * (a + 1)
    return [iv.widen((-m, m), c.n, 4.0, absolute=1.0)]


_SCALAR = [
    TorchOpSpec("mul_scalar" if op == "*" else "add_scalar" if op == "+" else "sub_rscalar", "pointwise",
                [In("x", T="T", rank=(0, 5))], _scalar_out,
                attrs={"scalar": Choice((2, -1, 3, 0.5, -1.5, 2.25))},
                types={"T": NUMERIC}, transfer=_scalar_iv, vdomain=_int_small,
                emit=(lambda a, k, op=op: f"({a[0]} {op} {k['scalar']!r})" if op != "r-"
                      else f"({k['scalar']!r} - {a[0]})"))
    for op in ("*", "+", "r-")
]


def _clamp_iv(c: iv.Call) -> list[iv.Iv]:
    lo, hi = c.x
    mn, mx = c.attrs.get("min"), c.attrs.get("max")
    if mn is not None:
        lo, hi = max(lo, mn), max(hi, mn)
    if mx is not None:
        lo, hi = min(lo, mx), min(hi, mx)
    return [(lo, hi)]


def _where_out(c) -> list[TensorType]:
    return [TensorType(broadcast_shapes(c.s, c.ins[1].shape, c.ins[2].shape), _rt(c, 1, 2))]


def _lerp_out(c) -> list[TensorType]:
    return [TensorType(broadcast_shapes(c.s, c.ins[1].shape), c.T)]


_OTHER = [
    TorchOpSpec("where", "pointwise",
                [In("cond", T="Tb", rank=(0, 5)), In("x", T="T", shape=lambda c: c.bcast(c.s)),
                 In("y", T="T1", shape=lambda c: c.bcast(broadcast_shapes(c.s, c.ins[1].shape)))],
                _where_out, types={"Tb": ("bool",), "T": ALL, "T1": ALL},
                emit=lambda a, k: f"torch.where({a[0]}, {a[1]}, {a[2]})", transfer=hull_iv(1, 2),
                vdomain=small_domain()),
    TorchOpSpec("lerp", "pointwise",
                [In("x", T="T", rank=(0, 5)), In("end", T="T", shape=lambda c: c.bcast(c.s, uni=True))],
                _lerp_out, attrs={"weight": Float(0.0, 1.0)}, types={"T": FLOATS},
                emit=lambda a, k: f"torch.lerp({a[0]}, {a[1]}, {k['weight']})", transfer=hull_iv(0, 1),
                vdomain=small_domain()),
    TorchOpSpec("addcmul", "pointwise",
                [In("x", T="T", rank=(0, 5)), In("t1", T="T", shape=lambda c: c.bcast(c.s, uni=True)),
                 In("t2", T="T", shape=lambda c: c.bcast(c.s, uni=True))],
                same_type, attrs={"value": Float(-4.0, 4.0)}, types={"T": FLOATS},
                emit=lambda a, k: f"torch.addcmul({a[0]}, {a[1]}, {a[2]}, value={k['value']})",
                transfer=lambda c: [iv.widen((-1, 1), c.n, 1, absolute=iv.amax(c.ivs[0]) + 4 * iv.amax(c.ivs[1])
                                             * iv.amax(c.ivs[2]) + 1)],
                vdomain=small_domain(8.0)),
    TorchOpSpec("addcdiv", "pointwise",
                [In("x", T="T", rank=(0, 5)), In("t1", T="T", shape=lambda c: c.bcast(c.s, uni=True)),
                 In("t2", T="T", shape=lambda c: c.bcast(c.s, uni=True))],
                same_type, attrs={"value": Float(-4.0, 4.0)}, types={"T": FLOATS},
                emit=lambda a, k: f"torch.addcdiv({a[0]}, {a[1]}, {a[2]}, value={k['value']})",
                transfer=lambda c: [iv.widen((-1, 1), c.n, 1, absolute=iv.amax(c.ivs[0]) + 16 * iv.amax(c.ivs[1])
                                             + 1)],
                vdomain=_away(2)),
    TorchOpSpec("clamp", "pointwise", [In("x", T="T", rank=(0, 5))], same_type,
                attrs={"min": Maybe(Int(-2, 0), 0.3), "max": lambda c: Maybe(Int(1, 3), 0.0 if c.min is None else 0.3)},
                types={"T": NUMERIC}, emit=lambda a, k: f"torch.clamp({a[0]}, min={k.get('min')}, max={k.get('max')})",
                transfer=_clamp_iv,
                vdomain=small_domain()),
    TorchOpSpec("to", "pointwise", [In("x", T="T", rank=(0, 5))],
                lambda c: [TensorType(c.s, c.dtype)], types={"T": ALL},
                # a float out of an unsigned type's range is undefined in C++ (eager and compiled may differ)
                attrs={"dtype": lambda c: Choice([d for d in ALL
                                                  if d != c.T and not (c.T in FLOATS and d == "uint8")])},
                emit=lambda a, k: f"{a[0]}.to({tdt(k['dtype'])})",
                transfer=lambda c: [iv.BOOL_IV if c.outs[0].dtype == "bool" else
                                    (c.x if c.outs[0].dtype in FLOATS or c.types[0].dtype not in FLOATS
                                     else (math.floor(c.x[0]), math.ceil(c.x[1])))],
                vdomain=lambda s, n, m, c, i: iv.mag(100.0) if n.kind in "fiu" else None),
    TorchOpSpec("type_as", "pointwise",
                [In("x", T="T", rank=(0, 5)), In("other", T="T1", shape=lambda c: c.bcast(c.s))],
                lambda c: [TensorType(c.s, c.ins[1].dtype)], types={"T": FLOATS, "T1": FLOATS},
                emit=lambda a, k: f"{a[0]}.type_as({a[1]})", transfer=same_iv, vdomain=small_domain()),
]

_ITEM_USE = {  # how the scalar read with .item() feeds the call: a format string of the tensor and the scalar
    "mul": "{y} * {s}", "add": "{y} + {s}", "sub": "{s} - {y}",
    "clamp_max": "torch.clamp({y}, max={s})", "clamp_min": "torch.clamp({y}, min={s})",
    "full_like": "torch.full_like({y}, {s})",
}


def _item_iv(c: iv.Call) -> list[iv.Iv]:
    y, s = c.ivs[0], c.ivs[1]
    assert y is not None and s is not None
    use = c.attrs.get("use")
    if use == "mul":
        r = iv.mul(y, s)
    elif use in ("add", "sub"):
        m = iv.amax(y) + iv.amax(s)
        r = (-m, m)
    elif use == "full_like":
        r = s
    else:
        r = iv.hull(y, s)
    return [iv.widen(r, c.n, 8.0, absolute=1.0)]


def _item_emit(a: list[str], k: dict) -> str:
    scalar = f"{a[1]}.{k['read']}().item()"
    return _ITEM_USE[k["use"]].format(y=a[0], s=scalar)


# a scalar read out of a tensor (.item(): a data-dependent Python number to Dynamo, with
# capture_scalar_outputs) feeding a later call: arithmetic, a clamp bound, a fill value
ITEM = TorchOpSpec("item", "pointwise",
                   [In("y", T="T", rank=(0, 5)), In("s", T="T1", shape=lambda c: c.bcast(c.s))],
                   same_type, attrs={"read": Choice(("amax", "amin")), "use": Choice(tuple(_ITEM_USE))},
                   types={"T": FLOATS, "T1": NUMERIC}, emit=_item_emit, transfer=_item_iv,
                   vdomain=small_domain(16.0))

SPECS = [*_UNARY, *_B, *_SCALAR, *_OTHER, ITEM]

# every pointwise operator takes empty tensors (an empty result) but item, whose amax()/amin() of an empty tensor
# eager refuses
EMPTY_OK = frozenset(s.op for s in SPECS) - {"torch.item"}
for _s in SPECS:
    _s.empty = _s.op in EMPTY_OK
