"""The Relax operator table: one function per ONNX operator type, building Relax expressions with
``tvm.relax.op`` that compute exactly what the ONNX operator computes for the calls dlcfuzz's
specs generate.  Each takes a ``Call`` and returns one expression per ONNX output.

An operator missing here is left out of the ``tvm-relax`` backend's graphs (``relax.supported``), and
must be listed with its reason in ``NO_RELAX_TRANSLATION`` (tests/test_operator_record.py checks it).
Constant inputs (axes, shapes, pads, indices...) arrive both as expressions and as numpy arrays
(``Call.const``), for the Relax ops that take them as static attributes.  Shapes are static, so
whatever follows from them (Shape, Size, output lengths, SAME pads, window tables) is computed here.

Where a Relax op exists for the ONNX operator it is used, so that TVM's own lowering is what gets
tested; compositions of primitives fill in what no Relax op covers (or covers differently: e.g.
ONNX's ceil_mode windows, LayerNormalization's broadcast Scale, Resize outside resize2d's reach,
the recurrent layers unrolled).  TVM bugs are not worked around (docs/discrepancies.md, "TVM
Relax"): the fuzzer is meant to meet them.  ``unsupported_call`` says which calls TVM cannot
compile (``UNSUPPORTED_DTYPES``: (operator, dtype) pairs it has no kernel for) or Relax cannot
express; ``relax.supported`` should consult it for every node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcfuzz.export.resize_taps import resize_taps
from dlcfuzz.ir import DTYPE_OF_CODE, TensorType


@dataclass
class Call:
    args: list[Any]  # relax expressions (None: an omitted optional input)
    types: list[TensorType | None]  # input types
    consts: list[np.ndarray | None]  # the data of constant inputs
    attrs: dict[str, Any]
    outs: list[TensorType]
    opset: int

    @property
    def x(self):
        return self.args[0]

    @property
    def t(self) -> TensorType:
        """The first input's type."""
        return self.types[0]

    def a(self, name: str, default: Any = None) -> Any:
        v = self.attrs.get(name)
        return default if v is None else v

    def arg(self, k: int):
        """The k-th input's expression, None when omitted (or past the inputs given)."""
        return self.args[k] if k < len(self.args) else None

    def const(self, k: int) -> np.ndarray | None:
        return self.consts[k] if k < len(self.consts) else None

    def need(self, k: int) -> np.ndarray:
        """The data of constant input k, which this translation needs at build time."""
        v = self.const(k)
        if v is None:
            raise NotImplementedError(f"input {k} must be a constant")
        return v


def _op():
    from tvm import relax

    return relax.op


OPS: dict[str, Callable[[Call], list[Any]]] = {}


def _reg(*names: str):
    def deco(fn):
        for n in names:
            OPS[n] = fn
        return fn
    return deco


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _const(value, dtype: str):
    from tvm import relax

    return relax.const(np.asarray(value, dtype=dtype), dtype)


def _prim(value, dtype: str):
    """A scalar as a Relax PrimValue of ``dtype`` (for ops taking scalar attributes as values)."""
    from tvm import relax

    v = value.item() if isinstance(value, np.generic | np.ndarray) else value
    v = float(v) if _is_float(dtype) else bool(v) if dtype == "bool" else int(v)
    return relax.prim_value(v, dtype)


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def _ax(a: int, rank: int) -> int:
    return a % rank if rank else 0


def _axes(axes: Sequence[int], rank: int) -> list[int]:
    return sorted(int(a) % rank for a in axes)


def _ints(values) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


def _fold(fn, xs):
    out = xs[0]
    for x in xs[1:]:
        out = fn(out, x)
    return out


def _in_float(c: Call, fn, x=None):
    """fn applied to x (default the first input); integers go through float64 and back (truncating)."""
    x = c.x if x is None else x
    dtype = c.t.dtype
    if _is_float(dtype):
        return fn(x)
    return _op().astype(fn(_op().astype(x, "float64")), dtype)


def _positive(idx: np.ndarray, dims) -> np.ndarray:
    """Constant indices in [-d, d-1] written as [0, d-1]."""
    return np.where(idx < 0, idx + dims, idx).astype(idx.dtype)


# ---------------------------------------------------------------------------------------------
# elementwise unary
# ---------------------------------------------------------------------------------------------
_UNARY = {"Abs": "abs", "Neg": "negative", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Sigmoid": "sigmoid",
          "Tanh": "tanh", "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos",
          "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
          "Floor": "floor", "Ceil": "ceil", "Erf": "erf", "Sign": "sign", "Round": "round", "IsNaN": "isnan",
          "Not": "logical_not", "BitwiseNot": "bitwise_not"}
for _onnx, _relax in _UNARY.items():
    OPS[_onnx] = (lambda name: lambda c: [getattr(_op(), name)(c.x)])(_relax)

OPS["Relu"] = lambda c: [_op().nn.relu(c.x)]
OPS["Identity"] = lambda c: [c.x]
OPS["Reciprocal"] = lambda c: [_op().divide(_const(1, c.t.dtype), c.x)]
OPS["Softplus"] = lambda c: [_op().log(_op().add(_op().exp(c.x), _const(1, c.t.dtype)))]
OPS["Softsign"] = lambda c: [_op().divide(c.x, _op().add(_op().abs(c.x), _const(1, c.t.dtype)))]
OPS["Cast"] = lambda c: [_op().astype(c.x, DTYPE_OF_CODE[c.attrs["to"]])]
OPS["CastLike"] = lambda c: [_op().astype(c.x, c.types[1].dtype)]
OPS["Mish"] = lambda c: [_op().multiply(c.x, _op().tanh(OPS["Softplus"](c)[0]))]
OPS["Gelu"] = lambda c: [_op().nn.gelu_tanh(c.x) if c.a("approximate") == "tanh" else _op().nn.gelu(c.x)]


def _affine(c: Call, x, alpha: float, beta: float):
    return _op().add(_op().multiply(x, _const(alpha, c.t.dtype)), _const(beta, c.t.dtype))


@_reg("IsInf")
def _isinf(c: Call) -> list[Any]:
    op = _op()
    neg, pos = c.a("detect_negative", 1), c.a("detect_positive", 1)
    if neg and pos:
        return [op.isinf(c.x)]
    if not (neg or pos):
        return [op.full(c.t.shape, _const(False, "bool"), "bool")]
    side = op.less(c.x, _const(0, c.t.dtype)) if neg else op.greater(c.x, _const(0, c.t.dtype))
    return [op.logical_and(op.isinf(c.x), side)]


@_reg("HardSigmoid")
def _hard_sigmoid(c: Call) -> list[Any]:
    y = _affine(c, c.x, c.a("alpha", 0.2), c.a("beta", 0.5))
    return [_op().clip(y, 0.0, 1.0)]


@_reg("HardSwish")
def _hard_swish(c: Call) -> list[Any]:
    return [_op().multiply(c.x, _op().clip(_affine(c, c.x, 1 / 6, 0.5), 0.0, 1.0))]


@_reg("Elu")
def _elu(c: Call) -> list[Any]:
    op = _op()
    neg = op.multiply(_const(c.a("alpha", 1.0), c.t.dtype), op.subtract(op.exp(c.x), _const(1, c.t.dtype)))
    return [op.where(op.less(c.x, _const(0, c.t.dtype)), neg, c.x)]


@_reg("Selu")
def _selu(c: Call) -> list[Any]:
    op = _op()
    if "alpha" not in c.attrs and "gamma" not in c.attrs:
        return [op.nn.selu(c.x)]
    alpha, gamma = c.a("alpha", 1.67326319217681884765625), c.a("gamma", 1.05070102214813232421875)
    dt = c.t.dtype
    neg = op.subtract(op.multiply(_const(alpha, dt), op.exp(c.x)), _const(alpha, dt))
    return [op.multiply(_const(gamma, dt), op.where(op.greater(c.x, _const(0, dt)), c.x, neg))]


OPS["LeakyRelu"] = lambda c: [_op().nn.leakyrelu(c.x, c.a("alpha", 0.01))]


@_reg("Celu")
def _celu(c: Call) -> list[Any]:
    op, dt = _op(), c.t.dtype
    alpha = _const(c.a("alpha", 1.0), dt)
    neg = op.multiply(alpha, op.subtract(op.exp(op.divide(c.x, alpha)), _const(1, dt)))
    return [op.add(op.maximum(c.x, _const(0, dt)), op.minimum(neg, _const(0, dt)))]


@_reg("ThresholdedRelu")
def _thresholded_relu(c: Call) -> list[Any]:
    op, dt = _op(), c.t.dtype
    return [op.where(op.greater(c.x, _const(c.a("alpha", 1.0), dt)), c.x, _const(0, dt))]


@_reg("Shrink")
def _shrink(c: Call) -> list[Any]:
    bias, lambd = c.a("bias", 0.0), c.a("lambd", 0.5)

    def f(x):
        op, dt = _op(), "float64" if not _is_float(c.t.dtype) else c.t.dtype
        lo = op.where(op.less(x, _const(-lambd, dt)), op.add(x, _const(bias, dt)), _const(0, dt))
        return op.where(op.greater(x, _const(lambd, dt)), op.subtract(x, _const(bias, dt)), lo)
    return [_in_float(c, f)]


@_reg("Clip")
def _clip(c: Call) -> list[Any]:
    op = _op()
    lo, hi = c.arg(1), c.arg(2)
    clo, chi = c.const(1), c.const(2)
    if clo is not None and chi is not None and clo <= chi:
        return [op.clip(c.x, _prim(clo, c.t.dtype), _prim(chi, c.t.dtype))]
    y = c.x if lo is None else op.maximum(c.x, lo)
    return [y if hi is None else op.minimum(y, hi)]  # min > max: max everywhere, as ONNX


# ---------------------------------------------------------------------------------------------
# broadcasting binary and variadic
# ---------------------------------------------------------------------------------------------
_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Equal": "equal",
           "Greater": "greater", "Less": "less", "GreaterOrEqual": "greater_equal", "LessOrEqual": "less_equal",
           "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor", "BitwiseAnd": "bitwise_and",
           "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}  # integer divide truncates, as ONNX
for _onnx, _relax in _BINARY.items():
    OPS[_onnx] = (lambda name: lambda c: [getattr(_op(), name)(c.args[0], c.args[1])])(_relax)

OPS["Where"] = lambda c: [_op().where(*c.args[:3])]
OPS["Max"] = lambda c: [_fold(_op().maximum, c.args)]
OPS["Min"] = lambda c: [_fold(_op().minimum, c.args)]
OPS["Sum"] = lambda c: [_fold(_op().add, c.args)]
OPS["Mean"] = lambda c: [_op().divide(_fold(_op().add, c.args), _const(len(c.args), c.outs[0].dtype))]  # floats
OPS["BitShift"] = lambda c: [(_op().left_shift if c.attrs["direction"] == "LEFT" else _op().right_shift)(
    c.args[0], c.args[1])]


@_reg("Pow")
def _pow(c: Call) -> list[Any]:
    op = _op()
    x, y = c.args[0], c.args[1]
    if c.types[0].dtype == c.types[1].dtype:
        return [op.power(x, y)]
    # mixed types: ONNX gives X's type; computed in double, as numpy promotes
    return [op.astype(op.power(op.astype(x, "float64"), op.astype(y, "float64")), c.t.dtype)]


@_reg("Mod")
def _mod(c: Call) -> list[Any]:
    # fmod=1: the sign of the dividend (C fmod, truncated); fmod=0 (integers): of the divisor (floored)
    return [(_op().mod if c.a("fmod", 0) else _op().floor_mod)(c.args[0], c.args[1])]


@_reg("PRelu")
def _prelu(c: Call) -> list[Any]:
    op = _op()
    x, slope = c.args[0], c.args[1]
    r, s = c.t.rank, (1,) * (c.t.rank - c.types[1].rank) + c.types[1].shape
    big = [i for i, d in enumerate(s) if d != 1]
    if r >= 1 and len(big) == 1 and s[big[0]] == c.t.shape[big[0]] and _is_float(c.t.dtype):
        return [op.nn.prelu(x, op.reshape(slope, (s[big[0]],)), big[0])]  # one slope per position of one axis
    return [op.where(op.less(x, _const(0, c.t.dtype)), op.multiply(x, slope), x)]


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------
def _reduce_axes(c: Call) -> list[int] | None:
    """The axes to reduce (normalized), None for all, [] for none (noop_with_empty_axes)."""
    if "axes" in c.attrs:
        axes = c.attrs["axes"]
    else:
        if c.arg(1) is not None and c.const(1) is None:
            raise NotImplementedError("axes must be a constant")
        axes = c.const(1)
    if axes is None or len(axes) == 0:
        return [] if c.a("noop_with_empty_axes", 0) else None
    return _axes(_ints(axes), c.t.rank)


def _reducer(fn, noop=lambda c, x: x):
    """A Reduce* operator: ``fn(c, x, axes or None, keepdims)``; with empty axes and
    noop_with_empty_axes=1 nothing is reduced, but the elementwise part (``noop``) still applies."""
    def table_fn(c: Call) -> list[Any]:
        axes = _reduce_axes(c)
        if axes == []:
            return [noop(c, c.x)]
        return [fn(c, c.x, axes, bool(c.a("keepdims", 1)))]
    return table_fn


def _count(c: Call, axes) -> int:
    return math.prod(c.t.shape[a] for a in (axes if axes is not None else range(c.t.rank)))


def _mean(c, x, axes, keep):
    op = _op()
    if _is_float(c.t.dtype):
        return op.mean(x, axes, keep)
    s = op.sum(op.astype(x, "int64"), axes, keep)  # integers: the exact sum, truncated quotient
    return op.astype(op.divide(s, _const(_count(c, axes), "int64")), c.t.dtype)


def _l2(c, x, axes, keep):
    op = _op()
    if _is_float(c.t.dtype):
        return op.sqrt(op.sum(op.multiply(x, x), axes, keep))
    w = op.astype(x, "int64")
    return op.astype(op.sqrt(op.astype(op.sum(op.multiply(w, w), axes, keep), "float64")), c.t.dtype)


def _l2_noop(c, x):
    return _in_float(c, lambda v: _op().sqrt(_op().multiply(v, v)), x)


OPS.update({
    "ReduceSum": _reducer(lambda c, x, axes, keep: _op().sum(x, axes, keep)),
    "ReduceMean": _reducer(_mean),
    "ReduceMax": _reducer(lambda c, x, axes, keep: _op().max(x, axes, keep)),
    "ReduceMin": _reducer(lambda c, x, axes, keep: _op().min(x, axes, keep)),
    "ReduceProd": _reducer(lambda c, x, axes, keep: _op().prod(x, axes, keep)),
    "ReduceL1": _reducer(lambda c, x, axes, keep: _op().sum(_op().abs(x), axes, keep), lambda c, x: _op().abs(x)),
    "ReduceL2": _reducer(_l2, _l2_noop),
    "ReduceSumSquare": _reducer(lambda c, x, axes, keep: _op().sum(_op().multiply(x, x), axes, keep),
                                lambda c, x: _op().multiply(x, x)),
    "ReduceLogSum": _reducer(lambda c, x, axes, keep: _in_float(c, _op().log, _op().sum(x, axes, keep)),
                             lambda c, x: _in_float(c, _op().log, x)),
    "ReduceLogSumExp": _reducer(
        lambda c, x, axes, keep: _in_float(c, lambda v: _op().log(_op().sum(_op().exp(v), axes, keep)), x),
        lambda c, x: _in_float(c, lambda v: _op().log(_op().exp(v)), x)),
})


def _arg(fn_name: str):
    def table_fn(c: Call) -> list[Any]:
        op = _op()
        ax, keep = _ax(c.a("axis", 0), c.t.rank), bool(c.a("keepdims", 1))
        fn = getattr(op, fn_name)
        if not c.a("select_last_index", 0):
            return [fn(c.x, ax, keep)]
        idx = fn(op.flip(c.x, ax), ax, keep)  # the last extremum: the first one of the reversed axis
        return [op.subtract(_const(c.t.shape[ax] - 1, "int64"), idx)]
    return table_fn


OPS["ArgMax"] = _arg("argmax")
OPS["ArgMin"] = _arg("argmin")


# ---------------------------------------------------------------------------------------------
# shape
# ---------------------------------------------------------------------------------------------
@_reg("Reshape")
def _reshape(c: Call) -> list[Any]:
    code = _ints(c.need(1))
    if not c.a("allowzero", 0):
        code = [c.t.shape[i] if d == 0 else d for i, d in enumerate(code)]
    return [_op().reshape(c.x, code)]  # -1 stays for Relax to infer


OPS["Flatten"] = lambda c: [_op().reshape(c.x, c.outs[0].shape)]
OPS["Transpose"] = lambda c: [_op().permute_dims(c.x, c.a("perm"))]
OPS["Expand"] = lambda c: [_op().broadcast_to(c.x, c.outs[0].shape)]
OPS["Size"] = lambda c: [_const(c.t.numel, "int64")]
OPS["Shape"] = lambda c: [_const(c.t.shape[c.a("start", 0):c.a("end")], "int64")]  # slicing clamps as ONNX


@_reg("Squeeze")
def _squeeze(c: Call) -> list[Any]:
    axes = c.const(1) if "axes" not in c.attrs else c.attrs["axes"]
    return [_op().squeeze(c.x, None if axes is None else _axes(_ints(axes), c.t.rank))]


@_reg("Unsqueeze")
def _unsqueeze(c: Call) -> list[Any]:
    axes = c.attrs["axes"] if "axes" in c.attrs else c.need(1)
    return [_op().expand_dims(c.x, _axes(_ints(axes), c.outs[0].rank))]


@_reg("Tile")
def _tile(c: Call) -> list[Any]:
    reps = _ints(c.need(1))
    return [_op().tile(c.x, reps) if reps else c.x]


@_reg("DepthToSpace")
def _depth_to_space(c: Call) -> list[Any]:
    op, b = _op(), c.attrs["blocksize"]
    if c.a("mode", "DCR") == "CRD":
        return [op.nn.pixel_shuffle(c.x, b)]
    n, ch, h, w = c.t.shape
    y = op.permute_dims(op.reshape(c.x, (n, b, b, ch // b ** 2, h, w)), [0, 3, 4, 1, 5, 2])
    return [op.reshape(y, c.outs[0].shape)]


@_reg("SpaceToDepth")
def _space_to_depth(c: Call) -> list[Any]:
    op, b = _op(), c.attrs["blocksize"]
    n, ch, h, w = c.t.shape
    y = op.permute_dims(op.reshape(c.x, (n, ch, h // b, b, w // b, b)), [0, 3, 5, 1, 2, 4])
    return [op.reshape(y, c.outs[0].shape)]


@_reg("Range")
def _range(c: Call) -> list[Any]:
    # start + i * delta (the output length is static; start is read at run time)
    op, out = _op(), c.outs[0]
    steps = op.multiply(op.arange(0, out.shape[0], 1, out.dtype), _const(c.need(2), out.dtype))
    return [op.add(c.x, steps)]


@_reg("ConstantOfShape")
def _constant_of_shape(c: Call) -> list[Any]:
    out = c.outs[0]
    value = c.attrs.get("value")
    v = np.zeros((), out.dtype) if value is None else np.asarray(value).reshape(())
    return [_op().full(out.shape, _const(v, out.dtype), out.dtype)]


@_reg("EyeLike")
def _eye_like(c: Call) -> list[Any]:
    rows, cols = c.t.shape
    k = min(max(int(c.a("k", 0)), -rows), cols)  # a diagonal outside the matrix: all zeros either way
    return [_op().eye_like(c.x, k, c.outs[0].dtype)]


# ---------------------------------------------------------------------------------------------
# indexing
# ---------------------------------------------------------------------------------------------
OPS["Concat"] = lambda c: [_op().concat(list(c.args), _ax(c.attrs["axis"], c.t.rank))]


@_reg("Split")
def _split(c: Call) -> list[Any]:
    from tvm import relax

    ax = _ax(c.a("axis", 0), c.t.rank)
    if len(c.outs) == 1:
        return [c.x]
    bounds = np.cumsum([o.shape[ax] for o in c.outs])[:-1].tolist()
    parts = _op().split(c.x, bounds, ax)
    return [relax.TupleGetItem(parts, i) for i in range(len(c.outs))]


@_reg("Slice")
def _slice(c: Call) -> list[Any]:
    starts, ends = _ints(c.need(1)), _ints(c.need(2))
    axes = _ints(c.need(3)) if c.arg(3) is not None else list(range(len(starts)))
    steps = _ints(c.need(4)) if c.arg(4) is not None else [1] * len(starts)
    axes = [a % c.t.rank for a in axes]
    # ONNX clamps a start below -d to 0 when stepping backwards; strided_slice (as numpy) makes the
    # slice empty: written as 0.  Every other out-of-range value is left to strided_slice to clamp.
    starts = [0 if st < 0 and b < -c.t.shape[a] else b for a, b, st in zip(axes, starts, steps, strict=True)]
    return [_op().strided_slice(c.x, axes, starts, ends, steps)]


OPS["Gather"] = lambda c: [_op().take(c.x, c.args[1], _ax(c.a("axis", 0), c.t.rank), mode="wrap")]


@_reg("GatherElements")
def _gather_elements(c: Call) -> list[Any]:
    ax = _ax(c.a("axis", 0), c.t.rank)
    idx = _positive(c.need(1), c.t.shape[ax])
    return [_op().gather_elements(c.x, _const(idx, idx.dtype.name), ax)]


@_reg("GatherND")
def _gather_nd(c: Call) -> list[Any]:
    b, idx = c.a("batch_dims", 0), c.need(1)
    idx = _positive(idx, np.array(c.t.shape[b:b + idx.shape[-1]]))
    return [_op().gather_nd(c.x, _const(idx, idx.dtype.name), b)]


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@_reg("Pad")
def _pad(c: Call) -> list[Any]:
    op, r = _op(), c.t.rank
    pads = _ints(c.need(1))
    axes = _ints(c.need(3)) if c.arg(3) is not None else list(range(r))
    k = len(axes)
    width = [[0, 0] for _ in range(r)]
    for i, a in enumerate(axes):
        width[a % r] = [pads[i], pads[k + i]]
    x = c.x
    if any(p < 0 for w in width for p in w):  # crop first, then pad what is left
        crop = [j for j in range(r) if min(width[j]) < 0]
        x = op.strided_slice(x, crop, [max(-width[j][0], 0) for j in crop],
                             [c.t.shape[j] - max(-width[j][1], 0) for j in crop])
        width = [[max(p, 0) for p in w] for w in width]
    mode = c.a("mode", "constant")
    value = c.const(2)
    if value is None and c.arg(2) is not None:
        raise NotImplementedError("constant_value must be a constant")
    v = 0.0 if value is None else value.item()
    return [op.nn.pad(x, [p for w in width for p in w], _PAD_MODES[mode], v)]


@_reg("CumSum")
def _cumsum(c: Call) -> list[Any]:
    op = _op()
    ax = _ax(int(c.need(1)), c.t.rank)
    x = op.flip(c.x, ax) if c.a("reverse", 0) else c.x
    y = op.cumsum(x, ax, c.t.dtype, bool(c.a("exclusive", 0)))
    return [op.flip(y, ax) if c.a("reverse", 0) else y]


@_reg("Trilu")
def _trilu(c: Call) -> list[Any]:
    rows, cols = c.t.shape[-2:]
    k = 0 if c.arg(1) is None else int(c.need(1))
    k = min(max(k, -rows - 1), cols + 1)  # far diagonals act as the nearest one outside the matrix
    return [(_op().triu if c.a("upper", 1) else _op().tril)(c.x, k)]


@_reg("ReverseSequence")
def _reverse_sequence(c: Call) -> list[Any]:
    return [_op().reverse_sequence(c.x, c.args[1], c.a("time_axis", 0), c.a("batch_axis", 1))]


_SCATTER = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@_reg("ScatterElements")
def _scatter_elements(c: Call) -> list[Any]:
    ax = _ax(c.a("axis", 0), c.t.rank)
    idx = _positive(c.need(1), c.t.shape[ax])
    return [_op().scatter_elements(c.x, _const(idx, idx.dtype.name), c.args[2], ax,
                                   _SCATTER[c.a("reduction", "none")])]


@_reg("ScatterND")
def _scatter_nd(c: Call) -> list[Any]:
    idx = c.need(1)
    idx = _positive(idx, np.array(c.t.shape[:idx.shape[-1]]))
    return [_op().scatter_nd(c.x, _const(idx, idx.dtype.name), c.args[2], _SCATTER[c.a("reduction", "none")])]


@_reg("TopK")
def _topk(c: Call) -> list[Any]:
    from tvm import relax

    k = int(c.need(1).reshape(-1)[0])
    ax = _ax(c.a("axis", -1), c.t.rank)
    t = _op().topk(c.x, k, ax, "both", bool(c.a("largest", 1)), "int64")
    return [relax.TupleGetItem(t, i) for i in range(len(c.outs))]


@_reg("OneHot")
def _one_hot(c: Call) -> list[Any]:
    op = _op()
    depth = int(c.need(1).reshape(-1)[0])
    values, dt = c.need(2), c.outs[0].dtype
    idx = c.x
    idx = op.where(op.less(idx, _const(0, c.t.dtype)), op.add(idx, _const(depth, c.t.dtype)), idx)
    ax = _ax(c.a("axis", -1), c.t.rank + 1)
    return [op.one_hot(idx, _prim(values[1], dt), _prim(values[0], dt), depth, ax)]


@_reg("Compress")
def _compress(c: Call) -> list[Any]:
    op = _op()
    keep = _const(np.nonzero(c.need(1))[0], "int64")
    if c.a("axis") is None:
        return [op.take(op.reshape(c.x, (c.t.numel,)), keep, 0)]
    return [op.take(c.x, keep, _ax(c.attrs["axis"], c.t.rank))]


# selection operators: their output shapes follow from values (relax.emit casts them to the
# shapes the spec knows)
OPS["NonZero"] = lambda c: [_op().nonzero(c.x)]


@_reg("Unique")
def _unique(c: Call) -> list[Any]:
    from tvm import relax

    n = len(c.outs)
    axis = c.a("axis")
    u = _op().unique(c.x, bool(c.a("sorted", 1)), n > 1, n > 2, n > 3, None if axis is None else _ax(axis, c.t.rank))
    return [u] if n == 1 else [relax.TupleGetItem(u, i) for i in range(n)]


@_reg("NonMaxSuppression")
def _nms(c: Call) -> list[Any]:
    op = _op()
    boxes = c.x
    if c.a("center_point_box", 0):  # all_class_non_max_suppression takes corners (y1, x1, y2, x2)
        xc, yc, w, h = (op.strided_slice(boxes, [2], [i], [i + 1]) for i in range(4))
        half = _const(2, "float32")
        w, h = op.divide(w, half), op.divide(h, half)
        boxes = op.concat([op.subtract(yc, h), op.subtract(xc, w), op.add(yc, h), op.add(xc, w)], 2)
    # ONNX's defaults: max_output_boxes_per_class 0, iou_threshold 0, no score threshold
    limit = c.arg(2) if c.arg(2) is not None else _const(0, "int64")
    iou = c.arg(3) if c.arg(3) is not None else _const(0, "float32")
    score = c.arg(4) if c.arg(4) is not None else _const(-np.inf, "float32")
    out = op.vision.all_class_non_max_suppression(boxes, c.args[1], limit, iou, score, "onnx")
    from tvm import relax

    return [relax.TupleGetItem(out, 0)]


# ---------------------------------------------------------------------------------------------
# softmax family, matrix products, nn
# ---------------------------------------------------------------------------------------------
OPS["Softmax"] = lambda c: [_op().nn.softmax(c.x, _ax(c.a("axis", -1), c.t.rank))]
OPS["LogSoftmax"] = lambda c: [_op().nn.log_softmax(c.x, _ax(c.a("axis", -1), c.t.rank))]
OPS["MatMul"] = lambda c: [_op().matmul(c.args[0], c.args[1])]


@_reg("Attention")
def _attention(c: Call) -> list[Any]:
    """ONNX's Attention from primitives (nn.attention takes no GQA, softcap, cache or score output)."""
    op, dt = _op(), c.t.dtype
    q, k, v = c.args[:3]
    b = c.t.shape[0]
    if c.t.rank == 3:  # (B, S, heads * size) -> (B, heads, S, size)
        def heads(x, t: TensorType, n: int):
            return op.permute_dims(op.reshape(x, (b, t.shape[1], n, t.shape[2] // n)), [0, 2, 1, 3])
        q = heads(q, c.t, c.attrs["q_num_heads"])
        k, v = heads(k, c.types[1], c.attrs["kv_num_heads"]), heads(v, c.types[2], c.attrs["kv_num_heads"])
    past = c.types[4].shape[2] if c.arg(4) is not None else 0
    if past:
        k, v = op.concat([c.args[4], k], 2), op.concat([c.args[5], v], 2)
    present_k, present_v = k, v
    y_shape = c.outs[0].shape
    if c.t.rank == 4:
        hq, d = c.t.shape[1], c.t.shape[3]
    else:
        hq, d = c.attrs["q_num_heads"], c.t.shape[2] // c.attrs["q_num_heads"]
    hk = c.types[1].shape[1] if c.t.rank == 4 else c.attrs["kv_num_heads"]
    if hq > hk:  # GQA: q head h reads kv head h // (hq / hk)
        k, v = op.repeat(k, hq // hk, 1), op.repeat(v, hq // hk, 1)
    root = _const(math.sqrt(c.a("scale", 1 / math.sqrt(d))), dt)  # Q and K scaled by sqrt(scale) in T1
    raw = op.matmul(op.multiply(q, root), op.permute_dims(op.multiply(k, root), [0, 1, 3, 2]))
    cap = c.a("softcap", 0.0)
    capped = op.multiply(_const(cap, dt), op.tanh(op.divide(raw, _const(cap, dt)))) if cap else raw
    sq = c.outs[0].shape[2] if c.t.rank == 4 else c.t.shape[1]
    total = past + c.types[1].shape[2 if c.t.rank == 4 else 1]
    bias = np.zeros((sq, total), dtype=dt)
    mask = c.const(3)
    if mask is not None:
        bias = bias + (np.where(mask, 0.0, -np.inf).astype(dt) if mask.dtype == np.bool_ else mask)
    if c.a("is_causal", 0):  # query i attends key j iff j <= i + past
        bias = bias + np.where(np.arange(total)[None, :] <= np.arange(sq)[:, None] + past, 0.0, -np.inf).astype(dt)
    scores = op.add(capped, _const(bias, dt))
    work = DTYPE_OF_CODE[c.attrs["softmax_precision"]] if c.attrs.get("softmax_precision") else dt
    probs = op.nn.softmax(op.astype(scores, work), -1)
    dead = np.isneginf(bias.max(-1, keepdims=True))  # a fully masked row: zeros (ONNX's errata)
    if dead.any():
        probs = op.where(_const(dead, "bool"), _const(0, work), probs)
    probs = op.astype(probs, dt)
    y = op.matmul(probs, v)
    if c.t.rank == 3:
        y = op.reshape(op.permute_dims(y, [0, 2, 1, 3]), y_shape)
    qk = (raw, capped, scores, probs)[c.a("qk_matmul_output_mode", 0)]
    return [y, present_k, present_v, qk][:len(c.outs)]


@_reg("Hardmax")
def _hardmax(c: Call) -> list[Any]:
    op = _op()
    ax = _ax(c.a("axis", -1), c.t.rank)
    idx = op.argmax(c.x, ax, True)  # the first maximum, as ONNX
    pos = _const(np.arange(c.t.shape[ax]).reshape((-1,) + (1,) * (c.t.rank - 1 - ax)), "int64")
    return [op.astype(op.equal(pos, idx), c.t.dtype)]


@_reg("Gemm")
def _gemm(c: Call) -> list[Any]:
    op = _op()
    a = op.permute_dims(c.args[0]) if c.a("transA", 0) else c.args[0]
    b = op.permute_dims(c.args[1]) if c.a("transB", 0) else c.args[1]
    alpha, beta = c.a("alpha", 1.0), c.a("beta", 1.0)
    dt = c.t.dtype if _is_float(c.t.dtype) else "float64"  # integers: scaled in double, truncated

    def f(y):
        y = op.astype(y, dt) if dt != c.t.dtype else y
        y = y if alpha == 1.0 else op.multiply(y, _const(alpha, dt))
        if c.arg(2) is not None and beta != 0:
            cc = op.astype(c.args[2], dt) if dt != c.t.dtype else c.args[2]
            y = op.add(y, cc if beta == 1.0 else op.multiply(cc, _const(beta, dt)))
        return op.astype(y, c.t.dtype) if dt != c.t.dtype else y
    return [f(op.matmul(a, b))]


@_reg("Dropout")
def _dropout(c: Call) -> list[Any]:
    mask = _op().full(c.t.shape, _const(True, "bool"), "bool")  # inference: the identity, all kept
    return [c.x, mask][:len(c.outs)]


@_reg("Einsum")
def _einsum(c: Call) -> list[Any]:
    return [_op().einsum([a for a in c.args if a is not None], c.attrs["equation"])]


@_reg("LRN")
def _lrn(c: Call) -> list[Any]:
    # ONNX sums squares over channels [c - floor((size-1)/2), c + ceil((size-1)/2)]
    op, dt, size = _op(), c.t.dtype, c.attrs["size"]
    lo, ch = (size - 1) // 2, c.t.shape[1]
    width = [0, 0, lo, size - 1 - lo] + [0, 0] * (c.t.rank - 2)
    sq = op.nn.pad(op.multiply(c.x, c.x), width, "constant", 0.0)
    s = _fold(op.add, [op.strided_slice(sq, [1], [j], [j + ch]) for j in range(size)])
    scale = op.add(_const(c.a("bias", 1.0), dt), op.multiply(_const(c.a("alpha", 1e-4) / size, dt), s))
    return [op.divide(c.x, op.power(scale, _const(c.a("beta", 0.75), dt)))]


# ---------------------------------------------------------------------------------------------
# convolution and pooling
# ---------------------------------------------------------------------------------------------
def _window_pads(c: Call, kernel, strides, dilations) -> list[int]:
    """ONNX pads [b1..bn, e1..en]: explicit, VALID (0) or SAME (output = ceil(in / stride))."""
    n, mode = len(kernel), c.a("auto_pad", "NOTSET")
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(c.t.shape[2:], kernel, strides, dilations, strict=True):
            total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
            b = total - total // 2 if mode == "SAME_LOWER" else total // 2
            begins.append(b)
            ends.append(total - b)
        return begins + ends
    if mode == "VALID":
        return [0] * (2 * n)
    return list(c.a("pads", [0] * (2 * n)))


def _geometry(c: Call, kernel) -> tuple[list[int], list[int], list[int]]:
    n = len(kernel)
    strides, dilations = list(c.a("strides", [1] * n)), list(c.a("dilations", [1] * n))
    return strides, dilations, _window_pads(c, kernel, strides, dilations)


def _bias(c: Call, y, k: int):
    if c.arg(k) is None:
        return y
    return _op().add(y, _op().reshape(c.args[k], (1, c.types[k].shape[0]) + (1,) * (c.t.rank - 2)))


def _conv_expr(c: Call, x, w, w_type: TensorType, out_dtype: str | None = None):
    """ONNX Conv's window attributes on x and w, without bias."""
    nn = _op().nn
    kernel = list(w_type.shape[2:])
    strides, dilations, pads = _geometry(c, kernel)
    conv = {1: nn.conv1d, 2: nn.conv2d, 3: nn.conv3d}[len(kernel)]
    return conv(x, w, strides, pads, dilations, c.a("group", 1), out_dtype=out_dtype)


OPS["Conv"] = lambda c: [_bias(c, _conv_expr(c, c.x, c.args[1], c.types[1]), 2)]


@_reg("ConvTranspose")
def _conv_transpose(c: Call) -> list[Any]:
    nn = _op().nn
    kernel = list(c.types[1].shape[2:])
    n = len(kernel)
    strides, dilations = list(c.a("strides", [1] * n)), list(c.a("dilations", [1] * n))
    out_pad = list(c.a("output_padding", [0] * n))
    pads = list(c.a("pads", [0] * (2 * n)))
    if c.a("output_shape") is not None or c.a("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        full = [s * (i - 1) + p + (k - 1) * d + 1
                for i, s, p, k, d in zip(c.t.shape[2:], strides, out_pad, kernel, dilations, strict=True)]
        total = [max(0, f - t) for f, t in zip(full, c.outs[0].shape[2:], strict=True)]
        # ONNX: SAME_UPPER puts the odd pad at the end, everything else at the beginning
        begins = [t // 2 if c.a("auto_pad") == "SAME_UPPER" else t - t // 2 for t in total]
        pads = begins + [t - b for t, b in zip(total, begins, strict=True)]
    elif c.a("auto_pad") == "VALID":
        pads = [0] * (2 * n)
    conv = {1: nn.conv1d_transpose, 2: nn.conv2d_transpose, 3: nn.conv3d_transpose}[n]
    return [_bias(c, conv(c.x, c.args[1], strides, pads, out_pad, dilations, c.a("group", 1)), 2)]


def _ceil_pads(c: Call, kernel, strides, dilations, pads) -> list[int]:
    """Explicit pads whose floor-mode output is the ceil_mode output of ONNX (the extra end pad
    holds no input), with ONNX's rule that the last window starts inside the input or left pad."""
    n = len(kernel)
    pads = list(pads)
    if not c.a("ceil_mode", 0) or c.a("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        return pads
    for j in range(n):
        eff = (kernel[j] - 1) * dilations[j] + 1
        size = c.t.shape[2 + j] + pads[j] + pads[n + j]
        out = -(-(size - eff) // strides[j]) + 1
        if (out - 1) * strides[j] >= c.t.shape[2 + j] + pads[j]:
            out -= 1
        pads[n + j] += max(0, (out - 1) * strides[j] + eff - size)
    return pads


def _sum_windows(c: Call, x, kernel, strides, dilations, pads):
    """The sum over each (zero-padded) window: a depthwise convolution with a kernel of ones."""
    nn, ch = _op().nn, c.t.shape[1]
    ones = _const(np.ones((ch, 1, *kernel)), c.t.dtype)
    conv = {1: nn.conv1d, 2: nn.conv2d, 3: nn.conv3d}[len(kernel)]
    return conv(x, ones, strides, pads, dilations, ch)


@_reg("MaxPool")
def _max_pool(c: Call) -> list[Any]:
    nn = _op().nn
    kernel = list(c.attrs["kernel_shape"])
    strides, dilations, pads = _geometry(c, kernel)
    pads = _ceil_pads(c, kernel, strides, dilations, pads)
    pool = {1: nn.max_pool1d, 2: nn.max_pool2d, 3: nn.max_pool3d}[len(kernel)]
    y = pool(c.x, kernel, strides, pads, dilations, False)
    return [y] if len(c.outs) == 1 else [y, _max_pool_indices(c, kernel, strides, dilations, pads)]


def _window_table(c: Call, kernel, strides, dilations, pads) -> tuple[np.ndarray, np.ndarray]:
    """Per output position and window element: the (row-major) coordinates in the input's
    spatial dims, [out, k, n], and whether they lie inside the input, [out, k]."""
    n, sizes, outs = len(kernel), c.t.shape[2:], c.outs[0].shape[2:]
    o = np.stack(np.meshgrid(*[np.arange(v) for v in outs], indexing="ij"), -1).reshape(-1, 1, n)
    k = np.stack(np.meshgrid(*[np.arange(v) for v in kernel], indexing="ij"), -1).reshape(1, -1, n)
    pos = o * np.array(strides) + k * np.array(dilations) - np.array(pads[:n])
    return pos, np.all((pos >= 0) & (pos < np.array(sizes)), -1)


def _max_pool_indices(c: Call, kernel, strides, dilations, pads):
    """ONNX's Indices (flat, row-major or with storage_order=1 column-major spatial dims, the
    first maximum of each window): gather every window, argmax, look the index up."""
    op, sizes = _op(), c.t.shape[2:]
    pos, inside = _window_table(c, kernel, strides, dilations, pads)
    pos = np.where(inside[..., None], pos, 0)
    plane = math.prod(sizes)
    flat = np.ravel_multi_index(tuple(np.moveaxis(pos, -1, 0)), sizes)  # [out, k]
    x = c.x if _is_float(c.t.dtype) else op.astype(c.x, "float64")  # integers exact in double
    w = op.take(op.reshape(x, (*c.t.shape[:2], plane)), _const(flat, "int64"), 2)
    w = op.where(_const(inside, "bool"), w, _const(-np.inf, c.t.dtype if _is_float(c.t.dtype) else "float64"))
    first = op.argmax(w, 3, False)  # [N, C, out]
    order = "F" if c.a("storage_order", 0) else "C"
    stored = np.ravel_multi_index(tuple(np.moveaxis(pos, -1, 0)), sizes, order=order).reshape(-1)
    at = op.add(first, _const(np.arange(flat.shape[0]) * flat.shape[1], "int64"))
    base = np.arange(c.t.shape[0] * c.t.shape[1]).reshape((*c.t.shape[:2], 1)) * plane
    return op.reshape(op.add(op.take(_const(stored, "int64"), at, 0), _const(base, "int64")), c.outs[1].shape)


@_reg("AveragePool")
def _avg_pool(c: Call) -> list[Any]:
    op = _op()
    kernel = list(c.attrs["kernel_shape"])
    strides, dilations, pads = _geometry(c, kernel)
    full = _ceil_pads(c, kernel, strides, dilations, pads)
    if full == pads and all(d == 1 for d in dilations):
        pool = {1: op.nn.avg_pool1d, 2: op.nn.avg_pool2d, 3: op.nn.avg_pool3d}[len(kernel)]
        return [pool(c.x, kernel, strides, pads, dilations, False, bool(c.a("count_include_pad", 0)))]
    # ceil_mode or dilations: the window sums over the counts of elements inside the input (or
    # the explicitly padded input with count_include_pad), never of the ceil_mode extension
    total = _sum_windows(c, c.x, kernel, strides, dilations, full)
    n = len(kernel)
    ones = _const(np.ones((1, c.t.shape[1], *c.t.shape[2:])), c.t.dtype)
    if c.a("count_include_pad", 0):
        ones = op.nn.pad(ones, [0, 0, 0, 0] + [p for j in range(n) for p in (pads[j], pads[n + j])], "constant", 1.0)
        full = [0] * n + [f - p for f, p in zip(full[n:], pads[n:], strict=True)]
    count = _sum_windows(c, ones, kernel, strides, dilations, full)
    # a dilated window may miss the input altogether: 0 (as ORT), not 0 / 0
    return [op.divide(total, op.maximum(count, _const(1, c.t.dtype)))]


@_reg("LpPool")
def _lp_pool(c: Call) -> list[Any]:
    op, dt, p = _op(), c.t.dtype, c.a("p", 2)
    kernel = list(c.attrs["kernel_shape"])
    strides, dilations, pads = _geometry(c, kernel)
    pads = _ceil_pads(c, kernel, strides, dilations, pads)
    s = _sum_windows(c, op.power(op.abs(c.x), _const(p, dt)), kernel, strides, dilations, pads)
    return [op.power(s, _const(1.0 / p, dt))]


def _spatial(c: Call) -> list[int]:
    return list(range(2, c.t.rank))


OPS["GlobalAveragePool"] = lambda c: [_op().mean(c.x, _spatial(c), True)]
OPS["GlobalMaxPool"] = lambda c: [_op().max(c.x, _spatial(c), True)]


@_reg("GlobalLpPool")
def _global_lp_pool(c: Call) -> list[Any]:
    op, dt, p = _op(), c.t.dtype, c.a("p", 2)
    s = op.sum(op.power(op.abs(c.x), _const(p, dt)), _spatial(c), True)
    return [op.power(s, _const(1.0 / p, dt))]


# ---------------------------------------------------------------------------------------------
# normalization
# ---------------------------------------------------------------------------------------------
_NORM_DTYPES = ("float32", "float16")  # Relax's layer_norm and group_norm take no other dtype


def _per_channel(c: Call, v):
    return _op().reshape(v, (c.t.shape[1],) + (1,) * (c.t.rank - 2))


@_reg("BatchNormalization")
def _batch_norm(c: Call) -> list[Any]:
    from tvm import relax

    op, eps = _op(), c.a("epsilon", 1e-5)
    if c.t.rank >= 2:
        y = op.nn.batch_norm(c.x, *c.args[1:5], axis=1, epsilon=eps, training=False)
        return [relax.TupleGetItem(y, 0)]
    scale, b, mean, var = c.args[1:5]  # rank 1: a single channel
    inv = op.divide(scale, op.sqrt(op.add(var, _const(eps, c.t.dtype))))
    return [op.add(op.multiply(op.subtract(c.x, mean), inv), b)]


@_reg("InstanceNormalization")
def _instance_norm(c: Call) -> list[Any]:
    return [_op().nn.instance_norm(c.x, c.args[1], c.args[2], 1, _spatial(c), c.a("epsilon", 1e-5))]


@_reg("LayerNormalization")
def _layer_norm(c: Call) -> list[Any]:
    op, r = _op(), c.t.rank
    a, eps = _ax(c.a("axis", -1), r), c.a("epsilon", 1e-5)
    dims = list(range(a, r))
    norm_shape = c.t.shape[a:]
    b = c.arg(2)
    native = c.t.dtype in _NORM_DTYPES and len(c.outs) == 1
    if native and c.types[1].shape == norm_shape and (b is None or c.types[2].shape == norm_shape):
        beta = b if b is not None else _const(np.zeros(norm_shape), c.t.dtype)
        return [op.nn.layer_norm(c.x, c.args[1], beta, dims, eps)]
    # Scale and B broadcast to X; Mean and InvStdDev in float32 (stash_type 1), as the computation
    xf = op.astype(c.x, "float32")
    mean = op.mean(xf, dims, True)
    diff = op.subtract(xf, mean)
    inv = op.rsqrt(op.add(op.mean(op.multiply(diff, diff), dims, True), _const(eps, "float32")))
    y = op.multiply(op.astype(op.multiply(diff, inv), c.t.dtype), c.args[1])
    y = y if b is None else op.add(y, b)
    return [y, mean, inv][:len(c.outs)]


@_reg("AffineGrid")
def _affine_grid(c: Call) -> list[Any]:
    # image.affine_grid puts the coordinates second ([N, k, *spatial]); ONNX puts them last
    dims = [int(d) for d in c.need(1)[2:]]
    grid = _op().image.affine_grid(c.x, tuple(dims), bool(c.a("align_corners", 0)))
    return [_op().permute_dims(grid, [0, *range(2, len(dims) + 2), 1])]


@_reg("RMSNormalization")
def _rms_norm(c: Call) -> list[Any]:
    # ONNX's function body (stash_type 1): X / sqrt(mean(X^2) + epsilon) in float32, cast back to
    # X's type, times Scale (which broadcasts to X)
    op, r = _op(), c.t.rank
    a, eps = _ax(c.a("axis", -1), r), c.a("epsilon", 1e-5)
    dims = list(range(a, r))
    xf = op.astype(c.x, "float32")
    if c.types[1].shape == c.t.shape[a:]:
        return [op.astype(op.nn.rms_norm(xf, op.astype(c.args[1], "float32"), dims, eps), c.t.dtype)]
    inv = op.rsqrt(op.add(op.mean(op.multiply(xf, xf), dims, True), _const(eps, "float32")))
    return [op.multiply(op.astype(op.multiply(xf, inv), c.t.dtype), c.args[1])]


@_reg("GroupNormalization")
def _group_norm(c: Call) -> list[Any]:
    # ONNX's function body: statistics in stash_type (Var = E[x^2] - E[x]^2), the normalized values
    # cast back to X's type, then scale and bias per channel
    op, dt, eps = _op(), c.t.dtype, c.a("epsilon", 1e-5)
    work, groups = DTYPE_OF_CODE.get(c.a("stash_type", 1), "float32"), c.attrs["num_groups"]
    if work == dt and dt in _NORM_DTYPES:
        return [op.nn.group_norm(c.x, c.args[1], c.args[2], groups, 1, _spatial(c), eps)]
    xu = op.astype(c.x, work)
    if work in _NORM_DTYPES:
        ch = c.t.shape[1]
        ones, zeros = _const(np.ones(ch), work), _const(np.zeros(ch), work)
        norm = op.nn.group_norm(xu, ones, zeros, groups, 1, _spatial(c), eps)
    else:
        x3 = op.reshape(xu, (c.t.shape[0], groups, c.t.numel // c.t.shape[0] // groups))
        mean = op.mean(x3, [2], True)
        var = op.subtract(op.mean(op.multiply(x3, x3), [2], True), op.multiply(mean, mean))
        norm = op.divide(op.subtract(x3, mean), op.sqrt(op.add(var, _const(eps, work))))
        norm = op.reshape(norm, c.t.shape)
    y = op.multiply(op.astype(norm, dt), _per_channel(c, op.astype(c.args[1], dt)))
    return [op.add(y, _per_channel(c, op.astype(c.args[2], dt)))]


@_reg("LpNormalization")
def _lp_norm(c: Call) -> list[Any]:
    op, dt = _op(), c.t.dtype
    ax = _ax(c.a("axis", -1), c.t.rank)
    x = op.abs(c.x) if c.a("p", 2) == 1 else op.multiply(c.x, c.x)
    norm = op.sum(x, ax, True) if c.a("p", 2) == 1 else op.sqrt(op.sum(x, ax, True))
    return [op.where(op.equal(norm, _const(0, dt)), _const(0, dt), op.divide(c.x, norm))]


@_reg("MeanVarianceNormalization")
def _mvn(c: Call) -> list[Any]:
    op, dt = _op(), c.t.dtype
    dims = _axes(c.a("axes", [0, 2, 3]), c.t.rank)
    mean = op.mean(c.x, dims, True)
    var = op.subtract(op.mean(op.multiply(c.x, c.x), dims, True), op.multiply(mean, mean))  # ONNX's body
    return [op.divide(op.subtract(c.x, mean), op.add(op.sqrt(var), _const(1e-9, dt)))]


@_reg("MaxUnpool")
def _max_unpool(c: Call) -> list[Any]:
    # I holds flat indices into the whole output (as MaxPool's Indices, and as ORT reads them)
    op, out = _op(), c.outs[0]
    flat = op.zeros((out.numel,), out.dtype)
    idx = _const(c.need(1).reshape(-1), "int64")
    y = op.scatter_elements(flat, idx, op.reshape(c.x, (c.t.numel,)), 0)
    return [op.reshape(y, out.shape)]


_GRID_MODES = {"linear": "bilinear", "cubic": "bicubic"}  # opset 20 names; opset 16's are TVM's


@_reg("GridSample")
def _grid_sample(c: Call) -> list[Any]:
    op, r = _op(), c.t.rank
    mode = c.a("mode", "linear" if c.opset >= 20 else "bilinear")
    grid = op.permute_dims(c.args[1], [0, r - 1, *range(1, r - 1)])  # TVM: the coordinates second
    return [op.image.grid_sample(c.x, grid, _GRID_MODES.get(mode, mode), "NCHW" if r == 4 else "NCDHW",
                                 c.a("padding_mode", "zeros"), bool(c.a("align_corners", 0)))]


@_reg("RoiAlign")
def _roi_align(c: Call) -> list[Any]:
    if c.a("mode", "avg") != "avg":
        raise NotImplementedError("RoiAlign max: ONNX takes the max of the weighted corner values, TVM of "
                                  "the interpolated samples")
    scale = c.a("spatial_scale", 1.0)
    half = c.a("coordinate_transformation_mode", "half_pixel" if c.opset >= 16 else "output_half_pixel")
    boxes = c.need(1).astype(np.float64)
    if half == "half_pixel":  # ONNX shifts the scaled box by half a pixel; TVM scales only
        boxes = boxes - 0.5 / scale
    rois = np.concatenate([c.need(2).reshape(-1, 1), boxes], 1).astype(c.t.dtype)
    size = (c.a("output_height", 1), c.a("output_width", 1))
    # aligned=True: no 1-pixel minimum box (half_pixel); False keeps it (output_half_pixel), as ONNX
    return [_op().vision.roi_align(c.x, _const(rois, c.t.dtype), size, scale, c.a("sampling_ratio", 0),
                                   half == "half_pixel", "NCHW", "avg")]


OPS["MaxRoiPool"] = lambda c: [_op().vision.roi_pool(c.x, c.args[1], tuple(c.attrs["pooled_shape"]),
                                                     c.a("spatial_scale", 1.0), "NCHW")]


# ---------------------------------------------------------------------------------------------
# Resize: TVM's image.resize2d where it computes exactly ONNX's (a 4-D float input resized on H and
# W only, from sizes or from scales that give whole lengths, no antialias / aspect-ratio policy /
# crop); otherwise, as ONNX's reference, separably: per resized axis, the taps (edge-clamped source
# indices) and their weights are computed here in numpy (shapes are static) and applied with take,
# multiply and sum.
# ---------------------------------------------------------------------------------------------
def _resize_taps(c: Call, n_in: int, n_out: int, scale: float, roi):
    """(indices [out, taps], weights [out, taps], extrapolated [out] or None) for one axis."""
    return resize_taps(n_in, n_out, scale, roi, c.a("mode", "nearest"),
                       c.a("coordinate_transformation_mode", "half_pixel"), c.a("nearest_mode", "round_prefer_floor"),
                       c.a("cubic_coeff_a", -0.75), c.a("antialias", 0), c.a("exclude_outside", 0))


def _resize_factors(c: Call) -> tuple[list[int], dict[int, float], dict[int, int]]:
    """(resized axes, their scales, their output lengths), as ONNX and ORT compute them."""
    shape, r, f32 = c.t.shape, c.t.rank, np.float32
    axes = [int(a) % r for a in c.a("axes")] if c.a("axes") is not None else list(range(r))  # as listed
    scales, sizes = c.const(2), c.const(3)
    if scales is not None and scales.size:  # output lengths floor(scale * n) in float32
        return axes, {d: float(f32(v)) for d, v in zip(axes, scales, strict=True)}, {
            d: int(f32(v) * f32(shape[d])) for d, v in zip(axes, scales, strict=True)}
    sizes = _ints(sizes)
    policy = c.a("keep_aspect_ratio_policy", "stretch")
    if policy in ("not_larger", "not_smaller"):
        pick = min if policy == "not_larger" else max
        # lengths roundf(scale * n) in float32 (ONNX, ORT); coordinates from the double scale (reference)
        sc = pick([f32(n) / f32(shape[d]) for d, n in zip(axes, sizes, strict=True)])
        common = pick([n / shape[d] for d, n in zip(axes, sizes, strict=True)])
        return axes, dict.fromkeys(axes, common), {d: math.floor(float(sc * f32(shape[d])) + 0.5) for d in axes}
    return axes, {d: n / shape[d] for d, n in zip(axes, sizes, strict=True)}, dict(zip(axes, sizes, strict=True))


_RESIZE2D = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
_NATIVE_CTM = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel")


@_reg("Resize")
def _resize(c: Call) -> list[Any]:
    op, out = _op(), c.outs[0]
    axes, factors, lengths = _resize_factors(c)
    ctm = c.a("coordinate_transformation_mode", "half_pixel")
    changed = [d for d in axes if lengths[d] != c.t.shape[d] or not math.isclose(factors[d], 1.0)]
    whole = all(math.isclose(factors[d] * c.t.shape[d], lengths[d]) for d in changed)  # TVM: the size ratio
    if (c.t.rank == 4 and set(changed) <= {2, 3} and _is_float(c.t.dtype) and not c.a("antialias", 0) and whole
            and ctm in _NATIVE_CTM and (ctm != "pytorch_half_pixel" or all(lengths[d] > 1 for d in changed))):
        return [op.image.resize2d(c.x, out.shape[2:], None, "NCHW", _RESIZE2D[c.a("mode", "nearest")], ctm,
                                  c.a("nearest_mode", "round_prefer_floor"), c.a("cubic_coeff_a", -0.75),
                                  c.a("exclude_outside", 0))]
    roi = c.const(1)
    k = len(axes)
    y = op.astype(c.x, "float32" if c.t.dtype in ("float16", "float32") else "float64")
    ydt, shape = ("float32" if c.t.dtype in ("float16", "float32") else "float64"), list(c.t.shape)
    for i, d in enumerate(axes):
        crop = (float(roi[i]), float(roi[k + i])) if roi is not None and roi.size else (0.0, 1.0)
        if d not in changed and (ctm != "tf_crop_and_resize" or crop == (0.0, 1.0)):
            continue  # the identity on this axis (as the reference skips it)
        y = _resize_axis(c, y, ydt, shape, d, lengths[d], factors[d], crop)
        shape[d] = lengths[d]
    if _is_float(c.t.dtype):
        return [op.astype(y, c.t.dtype)]
    info = np.iinfo(c.t.dtype)  # integers: round half to even and saturate, as the reference
    return [op.astype(op.clip(op.round(y), float(info.min), float(info.max)), c.t.dtype)]


def _resize_axis(c: Call, y, ydt: str, shape: list[int], d: int, n_out: int, scale: float, roi):
    op, r = _op(), len(shape)
    idx, w, extrapolated = _resize_taps(c, shape[d], n_out, scale, roi)
    if c.a("mode", "nearest") == "nearest":  # one tap of weight 1: a gather
        g = op.take(y, _const(idx[np.arange(n_out), w.argmax(-1)], "int64"), d)
    else:
        taps = w.shape[1]
        g = op.take(y, _const(idx.reshape(-1), "int64"), d)
        g = op.reshape(g, (*shape[:d], n_out, taps, *shape[d + 1:]))
        g = op.sum(op.multiply(g, _const(w.reshape((n_out, taps) + (1,) * (r - d - 1)), ydt)), [d + 1])
    if extrapolated is not None and extrapolated.any():
        mask = _const(extrapolated.reshape((n_out,) + (1,) * (r - d - 1)), "bool")
        g = op.where(mask, _const(c.a("extrapolation_value", 0.0), ydt), g)
    return g


# ---------------------------------------------------------------------------------------------
# quantization: scales and zero points are constants (spec/quant.py), shaped here in numpy
# ---------------------------------------------------------------------------------------------
def _along(p: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """A per-tensor parameter as a scalar; a per-axis one (1-D) shaped to broadcast along ``axis``."""
    if p.ndim == 0 or rank == 0 or p.size == 1:
        return p.reshape(())
    shape = [1] * rank
    shape[axis % rank] = p.shape[0]
    return p.reshape(shape)


def _saturate(c: Call, q, dtype: str):
    """Rounded float values into an integer type, saturating (as ONNX's quantizers)."""
    info = np.iinfo(dtype)
    return _op().astype(_op().clip(q, float(info.min), float(info.max)), dtype)


def _centered(x, zero_point: np.ndarray | None):
    """x - zero_point in int32 (exact for 8- and 16-bit data and their products' sums)."""
    x = _op().astype(x, "int32")
    return x if zero_point is None else _op().subtract(x, _const(zero_point, "int32"))


@_reg("QuantizeLinear")
def _quantize(c: Call) -> list[Any]:
    # x / scale in float32 (as ORT, also for float16), rounded half to even, plus the zero point
    op, ax, r = _op(), c.a("axis", 1), c.t.rank
    q = op.round(op.divide(op.astype(c.x, "float32"), _const(_along(c.need(1), r, ax), "float32")))
    zp = c.const(2)
    if zp is not None:
        q = op.add(q, _const(_along(zp, r, ax), "float32"))
    return [_saturate(c, q, c.outs[0].dtype)]


@_reg("DequantizeLinear")
def _dequantize(c: Call) -> list[Any]:
    op, ax, r = _op(), c.a("axis", 1), c.t.rank
    zp = c.const(2)
    d = _centered(c.x, None if zp is None else _along(zp, r, ax))
    y = op.multiply(op.astype(d, "float32"), _const(_along(c.need(1), r, ax), "float32"))
    return [op.astype(y, c.outs[0].dtype)]


@_reg("DynamicQuantizeLinear")
def _dynamic_quantize(c: Call) -> list[Any]:
    op, f = _op(), "float32"
    lo = op.minimum(op.min(c.x), _const(0, f))
    hi = op.maximum(op.max(c.x), _const(0, f))
    scale = op.divide(op.subtract(hi, lo), _const(255, f))
    scale = op.where(op.equal(scale, _const(0, f)), _const(1, f), scale)  # all-zero x: ORT takes 1
    zp = op.clip(op.round(op.divide(op.negative(lo), scale)), 0.0, 255.0)
    y = op.clip(op.add(op.round(op.divide(c.x, scale)), zp), 0.0, 255.0)
    return [op.astype(y, "uint8"), scale, op.astype(zp, "uint8")]


def _matmul_acc(c: Call, a, a_zp, b, b_zp):
    """The exact integer product (a - a_zp) @ (b - b_zp); a 1-D a is a row (reshaped away by the caller)."""
    a = _centered(a, None if a_zp is None else a_zp.reshape(()))
    if c.t.rank == 1:
        a = _op().reshape(a, (1, c.t.shape[0]))
    return _op().matmul(a, _centered(b, b_zp))


@_reg("MatMulInteger")
def _matmul_integer(c: Call) -> list[Any]:
    acc = _matmul_acc(c, c.x, c.const(2), c.args[1], c.const(3))
    return [_op().reshape(acc, c.outs[0].shape)]


def _requantize(c: Call, acc, multiplier: np.ndarray, y_zp: np.ndarray):
    """round(acc * multiplier) + y_zero_point, saturated into y's type; the multiplier (a_scale *
    b_scale / y_scale) in float32 as ORT computes it."""
    op = _op()
    q = op.round(op.multiply(op.astype(acc, "float32"), _const(multiplier, "float32")))
    return _saturate(c, op.add(q, _const(y_zp.reshape(()), "float32")), c.outs[0].dtype)


@_reg("QLinearMatMul")
def _qlinear_matmul(c: Call) -> list[Any]:
    a_scale, b_scale, y_scale = (c.need(k).astype(np.float32) for k in (1, 4, 6))
    acc = _matmul_acc(c, c.x, c.need(2), c.args[3], c.need(5))
    y = _requantize(c, acc, a_scale.reshape(()) * b_scale / y_scale.reshape(()), c.need(7))
    return [_op().reshape(y, c.outs[0].shape)]


@_reg("ConvInteger")
def _conv_integer(c: Call) -> list[Any]:
    # the padding holds x's zero point (padded x - x_zero_point = 0), as in ORT and the reference
    x, w = _centered(c.x, c.const(2)), _centered(c.args[1], c.const(3))
    return [_conv_expr(c, x, w, c.types[1], "int32")]


@_reg("QLinearConv")
def _qlinear_conv(c: Call) -> list[Any]:
    op, n = _op(), c.t.rank - 2
    w_zp, w_scale = c.need(5), c.need(4).astype(np.float32)
    if w_zp.size > 1:  # per output channel, as W's first dim
        w_zp = w_zp.reshape((-1,) + (1,) * (n + 1))
    acc = _conv_expr(c, _centered(c.x, c.need(2).reshape(())), _centered(c.args[3], w_zp), c.types[3], "int32")
    if c.arg(8) is not None:
        acc = op.add(acc, op.reshape(c.args[8], (1, c.types[8].shape[0]) + (1,) * n))
    ws = w_scale.reshape((1, -1) + (1,) * n) if w_scale.size > 1 else w_scale.reshape(())
    multiplier = c.need(1).astype(np.float32).reshape(()) * ws / c.need(6).astype(np.float32).reshape(())
    return [_requantize(c, acc, multiplier, c.need(7))]


# ---------------------------------------------------------------------------------------------
# windows: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1, in double
# with ONNX Runtime's float32 coefficients (integers truncate: Blackman's peak is 1 only with them)
# ---------------------------------------------------------------------------------------------
_F32 = np.float32
_WINDOWS = {"HannWindow": (0.5, 0.5, 0.0),
            "HammingWindow": (float(_F32(25 / 46)), float(_F32(1) - _F32(25 / 46)), 0.0),
            "BlackmanWindow": (float(_F32(0.5) - _F32(0.08)), 0.5, float(_F32(0.08)))}


def _window(a0: float, a1: float, a2: float):
    def table_fn(c: Call) -> list[Any]:
        op, out, f = _op(), c.outs[0], "float64"
        n = out.shape[0]  # the size input's value (pinned by the spec), static here
        k = op.multiply(op.arange(0, n, 1, f), _const(2 * math.pi / (n if c.a("periodic", 1) else n - 1), f))
        y = op.add(op.subtract(_const(a0, f), op.multiply(_const(a1, f), op.cos(k))),
                   op.multiply(_const(a2, f), op.cos(op.add(k, k))))
        return [op.astype(y, out.dtype)]
    return table_fn


for _onnx, _coeffs in _WINDOWS.items():
    OPS[_onnx] = _window(*_coeffs)


# ---------------------------------------------------------------------------------------------
# RNN, GRU, LSTM: the time steps unrolled (ONNX Runtime's reading where ONNX is vague, as torch_ops)
# ---------------------------------------------------------------------------------------------
_GATE_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _act(name: str, dt: str, alpha: float, beta: float):
    op = _op()

    def k(v):
        return _const(v, dt)
    return {
        "Relu": op.nn.relu, "Tanh": op.tanh, "Sigmoid": op.sigmoid,
        "Softsign": lambda v: op.divide(v, op.add(op.abs(v), k(1))),
        "Softplus": lambda v: op.log(op.add(op.exp(v), k(1))),
        "LeakyRelu": lambda v: op.where(op.less(v, k(0)), op.multiply(v, k(alpha)), v),
        "ThresholdedRelu": lambda v: op.where(op.greater(v, k(alpha)), v, k(0)),
        "Elu": lambda v: op.where(op.less(v, k(0)), op.multiply(k(alpha), op.subtract(op.exp(v), k(1))), v),
        "HardSigmoid": lambda v: op.clip(op.add(op.multiply(v, k(alpha)), k(beta)), 0.0, 1.0),
        "Affine": lambda v: op.add(op.multiply(v, k(alpha)), k(beta)),
        "ScaledTanh": lambda v: op.multiply(k(alpha), op.tanh(op.multiply(v, k(beta)))),
    }[name]


# the alpha / beta each activation takes by default (ONNX Runtime's, see docs/discrepancies.md)
_ACT_PARAMS = {"LeakyRelu": (0.01,), "ThresholdedRelu": (0.0,), "Elu": (1.0,), "HardSigmoid": (0.2, 0.5),
               "Affine": (0.0, 0.0), "ScaledTanh": (0.0, 0.0)}


def _rnn_acts(c: Call, op_type: str, dirs: int) -> list:
    """ONNX Runtime's reading: alpha / beta values are consumed, in order, only by the activations
    that take them."""
    names = c.a("activations") or _GATE_ACTS[op_type] * dirs
    given, used, out = [c.a("activation_alpha"), c.a("activation_beta")], [0, 0], []
    for name in names:
        defaults = _ACT_PARAMS.get(name, ())
        params = [*defaults, 0.0, 0.0]
        for j in range(len(defaults)):
            if given[j] is not None and used[j] < len(given[j]):
                params[j] = given[j][used[j]]
                used[j] += 1
        out.append(_act(name, c.t.dtype, params[0], params[1]))
    return out


def _pick(v, d: int):
    """Direction d of a [num_directions, ...] tensor."""
    return _op().squeeze(_op().strided_slice(v, [0], [d], [d + 1]), [0])


@dataclass
class _Rnn:
    """The static facts of a recurrent call (time-major: X is [steps, batch, size])."""

    op_type: str
    steps: int
    batch: int
    size: int
    hid: int
    lens: list[int]
    acts: list  # activation functions, NACTS per direction
    clip: float | None

    def cl(self, v):
        return v if self.clip is None else _op().clip(v, -self.clip, self.clip)


def _recurrent(op_type: str):
    def table_fn(c: Call) -> list[Any]:
        op, layout = _op(), c.a("layout", 0)
        x = op.permute_dims(c.x, [1, 0, 2]) if layout else c.x  # time-major
        steps, batch, size = (c.t.shape[1], c.t.shape[0], c.t.shape[2]) if layout else c.t.shape
        direction = c.a("direction", "forward")
        dirs = 2 if direction == "bidirectional" else 1
        lens = _ints(c.need(4)) if c.arg(4) is not None else [steps] * batch
        r = _Rnn(op_type, steps, batch, size, c.types[2].shape[-1], lens, _rnn_acts(c, op_type, dirs), c.a("clip"))
        runs = [_rnn_direction(c, r, x, d, direction == "reverse" or d == 1) for d in range(dirs)]
        y, yh, yc = (op.stack([run[j] for run in runs], 1 if j == 0 else 0) if runs[0][j] is not None else None
                     for j in range(3))
        if layout:
            y, yh = op.permute_dims(y, [2, 0, 1, 3]), op.permute_dims(yh, [1, 0, 2])
            yc = yc if yc is None else op.permute_dims(yc, [1, 0, 2])
        return [y, yh, yc][:len(c.outs)]
    return table_fn


def _rnn_direction(c: Call, r: _Rnn, x, d: int, rev: bool):
    """Direction d: (Y [steps, batch, hid] in time order, last h, last cell state or None).  A
    reversed direction runs over each sequence's own steps backwards (a constant gather)."""
    op, dt, k = _op(), c.t.dtype, len(_GATE_ACTS[r.op_type])
    order = np.array([[(n - 1 - t if t < n else t) if rev else t for n in r.lens] for t in range(r.steps)])
    xs = op.gather_elements(x, _const(np.broadcast_to(order[..., None], (r.steps, r.batch, r.size)), "int64"), 0)
    gates = c.types[1].shape[1] // r.hid
    bd = _pick(c.args[3], d) if c.arg(3) is not None else _const(np.zeros(2 * gates * r.hid), dt)
    wb, rb = (op.strided_slice(bd, [0], [j * gates * r.hid], [(j + 1) * gates * r.hid]) for j in (0, 1))
    xs_w = op.add(op.matmul(xs, op.permute_dims(_pick(c.args[1], d))), wb)  # every step's input part at once
    h, cell = _rnn_state(c, r, 5, d), _rnn_state(c, r, 6, d) if r.op_type == "LSTM" else None
    pd = _pick(c.args[7], d) if r.op_type == "LSTM" and c.arg(7) is not None else None
    out = []
    for t in range(r.steps):
        mask = _const(np.array([[t < n] for n in r.lens]), "bool")
        xt = op.squeeze(op.strided_slice(xs_w, [0], [t], [t + 1]), [0])
        hn, cn = _step(r, c, r.acts[d * k:(d + 1) * k], xt, h, cell, _pick(c.args[2], d), rb, pd)
        h = op.where(mask, hn, h)
        cell = op.where(mask, cn, cell) if cell is not None else None
        out.append(op.where(mask, hn, _const(0, dt)))
    back = _const(np.broadcast_to(order[..., None], (r.steps, r.batch, r.hid)), "int64")
    return op.gather_elements(op.stack(out, 0), back, 0), h, cell


def _rnn_state(c: Call, r: _Rnn, k: int, d: int):
    """initial_h (k=5) / initial_c (k=6) of direction d, or zeros."""
    if c.arg(k) is None:
        return _const(np.zeros((r.batch, r.hid)), c.t.dtype)
    return _pick(_op().permute_dims(c.args[k], [1, 0, 2]) if c.a("layout", 0) else c.args[k], d)


def _step(r: _Rnn, c: Call, f, xt, h, cell, rd, rb, pd):
    """One time step on [batch, gates * hidden] pre-activations: (new h, new cell state or None)."""
    op, hid, cl, op_type = _op(), r.hid, r.cl, r.op_type

    def part(v, j: int):  # gate j of a [batch, gates * hidden] tensor
        return op.strided_slice(v, [1], [j * hid], [(j + 1) * hid])

    def blk(v, j: int, n: int = 1):  # gates j..j+n-1 of a weight / bias (gates along axis 0)
        return op.strided_slice(v, [0], [j * hid], [(j + n) * hid])

    if op_type == "RNN":
        return f[0](cl(op.add(op.add(xt, op.matmul(h, op.permute_dims(rd))), rb))), None
    if op_type == "GRU":  # gates z, r, h
        hr = op.add(op.matmul(h, op.permute_dims(blk(rd, 0, 2))), blk(rb, 0, 2))
        z = f[0](cl(op.add(part(xt, 0), part(hr, 0))))
        r = f[0](cl(op.add(part(xt, 1), part(hr, 1))))
        if c.a("linear_before_reset", 0):
            inner = op.multiply(r, op.add(op.matmul(h, op.permute_dims(blk(rd, 2))), blk(rb, 2)))
        else:
            inner = op.add(op.matmul(op.multiply(r, h), op.permute_dims(blk(rd, 2))), blk(rb, 2))
        hh = f[1](cl(op.add(part(xt, 2), inner)))
        return op.add(op.multiply(op.subtract(_const(1, c.t.dtype), z), hh), op.multiply(z, h)), None
    # LSTM: gates i, o, f, c; peepholes i, o, f
    pre = op.add(op.add(xt, op.matmul(h, op.permute_dims(rd))), rb)

    def gate(j: int, peep: int, s):
        v = part(pre, j)
        return f[0](cl(v if pd is None else op.add(v, op.multiply(blk(pd, peep), s))))
    i = gate(0, 0, cell)
    fg = op.subtract(_const(1, c.t.dtype), i) if c.a("input_forget", 0) else gate(2, 2, cell)
    cn = op.add(op.multiply(fg, cell), op.multiply(i, f[1](cl(part(pre, 3)))))
    return op.multiply(gate(1, 1, cn), f[2](cn)), cn  # ORT does not clip the cell state before h


for _onnx in _GATE_ACTS:
    OPS[_onnx] = _recurrent(_onnx)


# ---------------------------------------------------------------------------------------------
# What TVM cannot compile, or Relax cannot express
# ---------------------------------------------------------------------------------------------
# (op, dtype) pairs TVM 0.27 cannot compile on llvm (a limitation, not a wrong result): graphs
# holding them are not given to the tvm-relax backend
UNSUPPORTED_DTYPES: dict[tuple[str, str], str] = {
    **{("TopK", d): "TVM's topk has no kernel for it ('Unsupported input dtype')"
       for d in ("int16", "uint16", "uint32", "uint64")},
    ("ReduceMax", "bool"): "TVM's max reduction has no bool identity ('Cannot decide min_value')",
    ("ReduceMin", "bool"): "TVM's min reduction has no bool identity ('Cannot decide max_value')",
}


def _bool_reduction(types: list[TensorType | None], attrs: dict[str, Any]) -> str | None:
    if types[0] is None or types[0].dtype != "bool" or attrs.get("reduction", "none") == "none":
        return None
    return "a reduction on bool: TVM has no arithmetic on bool (tir 'MatchesCode(kDLFloat)' check fails)"


# operator calls TVM cannot compile or Relax cannot express exactly, by input types and attributes
# (the table raises NotImplementedError for those Relax cannot express)
_UNSUPPORTED_CALLS: dict[str, Callable[[list[TensorType | None], dict[str, Any]], str | None]] = {
    "RoiAlign": lambda types, attrs: "max mode: ONNX (and ORT) take the max of the weighted corner values of "
                                     "each sample, TVM's roi_align the max of the interpolated samples"
    if attrs.get("mode") == "max" else None,
    "ScatterElements": _bool_reduction,
    "ScatterND": _bool_reduction,
}


# ---------------------------------------------------------------------------------------------
# sequences and optionals (spec/sequence.py's composite operators): a sequence is a Relax tuple of
# tensors, as TVM's ONNX frontend makes it; positions and split lengths are constants
# ---------------------------------------------------------------------------------------------
def _pieces(c: Call) -> list[Any]:
    """SplitToSequence's pieces (its input and split are the call's first two inputs)."""
    from tvm import relax

    ax = _ax(c.attrs["axis"], c.t.rank)
    n = c.t.shape[ax]
    split = c.const(1) if len(c.args) > 1 and c.arg(1) is not None else None
    if split is None:
        lengths = [1] * n
    elif split.ndim == 0:  # pieces of that length, the last one shorter
        k = int(split)
        lengths = [k] * (n // k) + ([n % k] if n % k else [])
    else:
        lengths = _ints(split)
    if len(lengths) == 1:  # split into one section is the tensor itself in Relax, not a 1-tuple
        pieces = [c.x]
    else:
        parts = _op().split(c.x, np.cumsum(lengths)[:-1].tolist(), ax)
        pieces = [relax.TupleGetItem(parts, i) for i in range(len(lengths))]
    if split is None and c.a("keepdims", 1) == 0:
        pieces = [_op().squeeze(p, [ax]) for p in pieces]
    return pieces


def _concat_from_sequence(pieces: list[Any], axis: int, new_axis: bool, rank: int):
    if new_axis:
        ax = axis % (rank + 1)
        return _op().concat([_op().expand_dims(p, [ax]) for p in pieces], ax)
    return _op().concat(pieces, axis % rank)


def _piece_rank(c: Call) -> int:
    split_given = len(c.args) > 1 and c.arg(1) is not None
    return c.t.rank - (not split_given and c.a("keepdims", 1) == 0)


OPS["SplitToSequence+ConcatFromSequence"] = lambda c: [
    _concat_from_sequence(_pieces(c), c.attrs["concat_axis"], bool(c.a("new_axis", 0)), _piece_rank(c))]
OPS["SplitToSequence+SequenceLength"] = lambda c: [_const(len(_pieces(c)), "int64")]


def _construct_at(c: Call) -> list[Any]:
    from tvm import relax

    seq = relax.Tuple(list(c.args[:-1]))
    return [relax.TupleGetItem(seq, int(c.need(len(c.args) - 1)) % (len(c.args) - 1))]


OPS["SequenceConstruct+SequenceAt"] = _construct_at
OPS["SequenceConstruct+SequenceLength"] = lambda c: [_const(len(c.args), "int64")]


def _insert_erase(c: Call) -> list[Any]:
    seq = list(c.args[3:])
    seq.insert(len(seq) if c.arg(1) is None else int(c.need(1)), c.x)  # list.insert's negative positions: ONNX's
    seq.pop(-1 if c.arg(2) is None else int(c.need(2)))
    return [_concat_from_sequence(seq, c.attrs["concat_axis"], bool(c.a("new_axis", 0)), c.t.rank)]


OPS["SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence"] = _insert_erase
OPS["SequenceEmpty+SequenceInsert+SequenceAt"] = lambda c: [c.x]
OPS["Optional+OptionalGetElement"] = lambda c: [c.x]
OPS["Optional+OptionalHasElement"] = lambda c: [_const(True, "bool")]


def unsupported_call(op: str, types: list[TensorType | None], attrs: dict[str, Any] | None = None) -> str | None:
    """Why TVM cannot run this operator call (None: it can): an input dtype TVM lacks a kernel for,
    or (given the node's attributes) a variant of the operator Relax cannot express."""
    for t in types:
        if t is not None and (op, t.dtype) in UNSUPPORTED_DTYPES:
            return f"{op} on {t.dtype}: {UNSUPPORTED_DTYPES[op, t.dtype]}"
    rule = _UNSUPPORTED_CALLS.get(op)
    why = rule(types, attrs or {}) if rule else None
    return f"{op}: {why}" if why else None


# ---------------------------------------------------------------------------------------------
# Left out of OPS
# ---------------------------------------------------------------------------------------------
# The registry's operators (dlcfuzz.spec.REGISTRY) with no Relax translation, and why: ``supported``
# refuses their graphs.  tests/test_operator_record.py fails on an operator neither in OPS nor here.
NO_RELAX_TRANSLATION: dict[str, str] = {
    "If": "its branches are subgraphs: the builder writes one straight-line function (TVM's ONNX frontend "
          "converts If, which the tvm backend tests)",
    **{f"com.microsoft.{op}": "a Microsoft contrib operator: TVM's ONNX frontend converts it, which the tvm "
       "backend tests" for op in ("FastGelu", "BiasGelu", "SkipLayerNormalization", "EmbedLayerNormalization",
                                  "MatMulInteger16", "Attention")},
}
# Calls refused (unsupported_call; the table raises NotImplementedError where Relax cannot express them):
# - RoiAlign with mode=max: ONNX Runtime, whose reading the ONNX reference follows, takes the max
#   over each sample's four weighted corner values; TVM's roi_align max mode takes the max of the
#   interpolated samples (0.7 to 1.7 apart on generated calls).
# - ScatterElements / ScatterND with a reduction on bool, and the (op, dtype) pairs of
#   UNSUPPORTED_DTYPES: TVM cannot compile them.
