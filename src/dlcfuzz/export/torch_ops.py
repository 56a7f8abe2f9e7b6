"""ONNX operators written with torch ops, one function per operator type, with ONNX semantics.

Standalone on purpose (torch and numpy only, no dlcfuzz import): its text opens every generated
torch model source and every repro script, so a model built in a fuzzing worker and one rebuilt
by a repro run exactly the same code.

Calling convention (what ``dlcfuzz.export.torch`` generates): the ONNX inputs in order, positionally
(``None`` for an omitted optional input; shape-like inputs such as Reshape's shape or Slice's
starts arrive as Python lists/scalars, the rest as tensors), then the node's attributes as keywords
whose defaults are ONNX's.  Operators with several outputs take ``nout`` (how many outputs the
node has) and return a tuple.

Device-agnostic: every tensor an operator makes is made on its inputs' device (``device=x.device``),
so the module runs on a GPU as on the CPU; ``tests/test_torch_device.py`` runs each one on ``meta``.

Everything must trace into one graph under ``torch.compile(fullgraph=True)``, static or dynamic:
shape arithmetic in plain Python (lists, no generator expressions), numpy only outside traced code.
"""

import base64
import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

ONNX_DTYPES = {1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32, 7: torch.int64,
               9: torch.bool, 10: torch.float16, 11: torch.float64}


def tensor_of(b64: str, dtype: str, shape: list) -> torch.Tensor:
    """A constant embedded in the source (little-endian bytes, base64)."""
    arr = np.frombuffer(base64.b64decode(b64), dtype=np.dtype(dtype).newbyteorder("<"))
    return torch.from_numpy(arr.astype(dtype).reshape(shape))


def compile_module(module: torch.nn.Module, options: dict):
    """The module as a variant runs it, on ``options["device"]`` (the CPU by default): eager (no
    backend) or ``torch.compile`` with the options."""
    torch.set_num_threads(options.get("threads", 1))
    # float32 matmuls and convolutions in float32 on GPUs too (TF32 keeps 10 mantissa bits):
    # a cross-device difference must be a bug, not a precision setting
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    module = module.to(options.get("device", "cpu"))  # buffers (initializers) follow the module
    if not options.get("backend"):
        return module
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    inductor_config.compile_threads = 1  # no compile worker pool: tiny graphs, isolated workers
    # every compile really compiles (no FX graph / AOT caches): a repro recompiles as the test did
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    # no torch._dynamo.reset(): it would make modules compiled earlier (other variants) recompile;
    # each torch.compile wrapper keeps its own cache entries, and each model its own code objects
    return torch.compile(module, backend=options["backend"], mode=options.get("mode"),
                         dynamic=options.get("dynamic", False), fullgraph=True)


def run_module(fn, inputs: list, device: str = "cpu") -> list:
    """Calls the (compiled) module on numpy inputs placed on ``device``; the outputs as numpy arrays."""
    outs = fn(*[torch.from_numpy(np.array(a)).to(device) for a in inputs])
    return [o.detach().cpu().numpy() for o in outs]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _norm_axes(axes, rank: int) -> list:
    return [a + rank if a < 0 else a for a in axes]


def _is_float(x: torch.Tensor) -> bool:
    return x.dtype.is_floating_point


def _fold(fn, xs):
    out = xs[0]
    for x in xs[1:]:
        out = fn(out, x)
    return out


# ---------------------------------------------------------------------------------------------
# elementwise unary
# ---------------------------------------------------------------------------------------------
def Abs(x):
    return torch.abs(x)


def Neg(x):
    return torch.neg(x)


def Ceil(x):
    return torch.ceil(x)


def Floor(x):
    return torch.floor(x)


def Round(x):
    return torch.round(x)  # half to even, as ONNX


def Exp(x):
    return torch.exp(x)


def Log(x):
    return torch.log(x)


def Sqrt(x):
    return torch.sqrt(x)


def Reciprocal(x):
    return torch.reciprocal(x)


def Sigmoid(x):
    return torch.sigmoid(x)


def Tanh(x):
    return torch.tanh(x)


def Relu(x):
    return torch.relu(x)


def Sin(x):
    return torch.sin(x)


def Cos(x):
    return torch.cos(x)


def Tan(x):
    return torch.tan(x)


def Asin(x):
    return torch.asin(x)


def Acos(x):
    return torch.acos(x)


def Atan(x):
    return torch.atan(x)


def Sinh(x):
    return torch.sinh(x)


def Cosh(x):
    return torch.cosh(x)


def Asinh(x):
    return torch.asinh(x)


def Acosh(x):
    return torch.acosh(x)


def Atanh(x):
    return torch.atanh(x)


def Erf(x):
    return torch.erf(x)


def Softplus(x):
    return F.softplus(x)


def Softsign(x):
    return F.softsign(x)


def Sign(x):
    return torch.sign(x)


def Identity(x):
    return x


def HardSwish(x):
    return F.hardswish(x)  # x * relu6(x + 3) / 6 = ONNX's alpha 1/6, beta 0.5


def Not(x):
    return torch.logical_not(x)


def IsNaN(x):
    return torch.isnan(x)


def IsInf(x, *, detect_negative=1, detect_positive=1):
    if detect_negative and detect_positive:
        return torch.isinf(x)
    if detect_negative:
        return torch.isneginf(x)
    if detect_positive:
        return torch.isposinf(x)
    return torch.zeros_like(x, dtype=torch.bool)


def HardSigmoid(x, *, alpha=0.2, beta=0.5):
    return torch.clamp(x * alpha + beta, 0, 1)


def Elu(x, *, alpha=1.0):
    return F.elu(x, alpha)


def Selu(x, *, alpha=None, gamma=None):
    if alpha is None and gamma is None:
        return F.selu(x)  # the ONNX defaults are torch's constants
    alpha = 1.67326319217681884765625 if alpha is None else alpha
    gamma = 1.05070102214813232421875 if gamma is None else gamma
    return torch.where(x > 0, x, torch.exp(x) * alpha - alpha) * gamma


def LeakyRelu(x, *, alpha=0.01):
    return F.leaky_relu(x, alpha)


def Celu(x, *, alpha=1.0):
    return F.celu(x, alpha)


def ThresholdedRelu(x, *, alpha=1.0):
    return F.threshold(x, alpha, 0.0)


def Shrink(x, *, bias=0.0, lambd=0.5):
    y = torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, 0))
    return y.to(x.dtype)  # integer inputs: the float result truncates back, as ONNX casts


def Clip(x, lo=None, hi=None):
    if lo is None and hi is None:
        return x
    return torch.clamp(x, lo, hi)  # min > max gives max everywhere, as ONNX


def Cast(x, *, to, saturate=1):
    return x.to(ONNX_DTYPES[to])


def CastLike(x, target_type, *, saturate=1):
    return x.to(target_type.dtype)


def BitwiseNot(x):
    return torch.bitwise_not(x)


def Mish(x):
    return F.mish(x)


def Gelu(x, *, approximate="none"):
    return F.gelu(x, approximate=approximate)


# ---------------------------------------------------------------------------------------------
# broadcasting
# ---------------------------------------------------------------------------------------------
def Add(a, b):
    return torch.add(a, b)


def Sub(a, b):
    return torch.sub(a, b)


def Mul(a, b):
    return torch.mul(a, b)


def Div(a, b):
    if _is_float(a):
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="trunc")  # ONNX integer division truncates (C)


def Pow(x, y):
    if x.dtype == y.dtype:
        return torch.pow(x, y)
    # mixed types: ONNX gives X's type; compute in double as numpy's promotion does, then cast
    return torch.pow(x.double(), y.double()).to(x.dtype)


def Mod(a, b, *, fmod=0):
    return torch.fmod(a, b) if fmod else torch.remainder(a, b)


def Equal(a, b):
    return torch.eq(a, b)


def Greater(a, b):
    return torch.gt(a, b)


def Less(a, b):
    return torch.lt(a, b)


def GreaterOrEqual(a, b):
    return torch.ge(a, b)


def LessOrEqual(a, b):
    return torch.le(a, b)


def And(a, b):
    return torch.logical_and(a, b)


def Or(a, b):
    return torch.logical_or(a, b)


def Xor(a, b):
    return torch.logical_xor(a, b)


def Where(cond, x, y):
    return torch.where(cond, x, y)


def BitShift(x, y, *, direction):
    if direction == "LEFT":
        return torch.bitwise_left_shift(x, y)
    return torch.bitwise_right_shift(x, y)


def BitwiseAnd(a, b):
    return torch.bitwise_and(a, b)


def BitwiseOr(a, b):
    return torch.bitwise_or(a, b)


def BitwiseXor(a, b):
    return torch.bitwise_xor(a, b)


def Max(*xs):
    return _fold(torch.maximum, xs)


def Min(*xs):
    return _fold(torch.minimum, xs)


def Sum(*xs):
    return _fold(torch.add, xs)


def Mean(*xs):
    s = _fold(torch.add, xs)
    return s / len(xs) if _is_float(s) else torch.div(s, len(xs), rounding_mode="trunc")


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------
def _reduce_dims(x, axes, noop_with_empty_axes):
    """The dims to reduce, or None for the identity (empty axes with noop_with_empty_axes=1)."""
    if not axes:
        return None if noop_with_empty_axes else list(range(x.dim()))
    return _norm_axes(axes, x.dim())


def _reducer(fn, noop=None):
    """A Reduce* operator: axes as input (opset 18+, ReduceSum 13+) or attribute (older opsets).
    With empty axes and noop_with_empty_axes=1 nothing is reduced, but the elementwise part still
    applies (``noop``: ReduceSumSquare squares, ReduceL1 takes the absolute value...)."""
    def op(data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
        dims = _reduce_dims(data, axes, noop_with_empty_axes)
        if dims is None:
            return data if noop is None else noop(data)
        return fn(data, dims, bool(keepdims))
    op.__name__ = fn.__name__
    return op


def _count(x, dims) -> int:
    return math.prod([x.shape[d] for d in dims])


def _sum(x, dims, keep):
    return x.sum(dims, keepdim=keep, dtype=x.dtype)


def _mean(x, dims, keep):
    if _is_float(x):
        return x.mean(dims, keepdim=keep)
    return torch.div(x.sum(dims, keepdim=keep, dtype=x.dtype), _count(x, dims), rounding_mode="trunc")


def _max(x, dims, keep):
    return torch.amax(x, dims, keepdim=keep)


def _min(x, dims, keep):
    return torch.amin(x, dims, keepdim=keep)


def _prod(x, dims, keep):
    for d in dims:  # torch.prod reduces one dim at a time
        x = x.prod(d, keepdim=True, dtype=x.dtype)
    return x if keep else x.squeeze(dims) if dims else x


def _l1(x, dims, keep):
    if _is_float(x):
        return torch.linalg.vector_norm(x, 1, dims, keepdim=keep)
    return x.abs().sum(dims, keepdim=keep, dtype=x.dtype)


def _l2(x, dims, keep):
    if _is_float(x):
        return torch.linalg.vector_norm(x, 2, dims, keepdim=keep)
    # integers: square in the input type, sum exactly, root in double, truncate (as ONNX's reference)
    return torch.sqrt((x * x).sum(dims, keepdim=keep, dtype=torch.int64).double()).to(x.dtype)


def _log_sum_exp(x, dims, keep):
    if _is_float(x):
        return torch.logsumexp(x, dims, keepdim=keep)
    return torch.logsumexp(x.double(), dims, keepdim=keep).to(x.dtype)  # integers: truncate, as ORT


def _sum_square(x, dims, keep):
    return (x * x).sum(dims, keepdim=keep, dtype=x.dtype)


def _log_sum(x, dims, keep):
    if _is_float(x):
        return torch.log(x.sum(dims, keepdim=keep))
    return torch.log(x.sum(dims, keepdim=keep, dtype=x.dtype).double()).to(x.dtype)  # integers: truncate, as ORT


def _log(x):
    return torch.log(x) if _is_float(x) else torch.log(x.double()).to(x.dtype)


ReduceSum = _reducer(_sum)
ReduceMean = _reducer(_mean)
ReduceMax = _reducer(_max)
ReduceMin = _reducer(_min)
ReduceProd = _reducer(_prod)
ReduceL1 = _reducer(_l1, torch.abs)
ReduceL2 = _reducer(_l2, lambda x: torch.sqrt(x * x) if _is_float(x) else torch.sqrt((x * x).double()).to(x.dtype))
ReduceLogSumExp = _reducer(_log_sum_exp)  # log(exp(x)) = x
ReduceSumSquare = _reducer(_sum_square, lambda x: x * x)
ReduceLogSum = _reducer(_log_sum, _log)  # empty axes with noop_with_empty_axes=1: the log of each element


def _arg(fn, x, axis, keepdims, select_last_index):
    ax = axis % x.dim()
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)  # torch's argmax/argmin reject bool
    if not select_last_index:
        return fn(x, ax, keepdim=bool(keepdims))
    return x.shape[ax] - 1 - fn(x.flip(ax), ax, keepdim=bool(keepdims))


def ArgMax(data, *, axis=0, keepdims=1, select_last_index=0):
    return _arg(torch.argmax, data, axis, keepdims, select_last_index)


def ArgMin(data, *, axis=0, keepdims=1, select_last_index=0):
    return _arg(torch.argmin, data, axis, keepdims, select_last_index)


# ---------------------------------------------------------------------------------------------
# softmax family, matrix products, nn
# ---------------------------------------------------------------------------------------------
def Softmax(x, *, axis=-1):
    return torch.softmax(x, axis)


def LogSoftmax(x, *, axis=-1):
    return torch.log_softmax(x, axis)


def Hardmax(x, *, axis=-1):
    ax = axis % x.dim()
    idx = torch.argmax(x, ax, keepdim=True)  # the first maximum, as ONNX
    pos = torch.arange(x.shape[ax], device=x.device).reshape([-1] + [1] * (x.dim() - 1 - ax))
    return (pos == idx).to(x.dtype)


def MatMul(a, b):
    return torch.matmul(a, b)


def Gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    a = a.t() if transA else a
    b = b.t() if transB else b
    if not _is_float(a):
        # integers: scale in double and truncate, as ONNX's reference does
        y = torch.mm(a, b).double() * alpha
        if c is not None and beta != 0:
            y = y + c.double() * beta
        return y.to(a.dtype)
    if c is not None and beta != 0:
        return torch.addmm(c, a, b, beta=beta, alpha=alpha)
    y = torch.mm(a, b)
    return y if alpha == 1.0 else y * alpha


def PRelu(x, slope):
    return torch.where(x < 0, x * slope, x)


def Dropout(data, ratio=None, training_mode=None, *, seed=None, nout=1):
    y = F.dropout(data, 0.5 if ratio is None else ratio, training=False)  # inference: the identity
    return (y, torch.ones(data.shape, dtype=torch.bool, device=data.device))[:nout]


def Einsum(*inputs, equation):
    if _is_float(inputs[0]):
        return torch.einsum(equation, *inputs)
    # integers go through int64 (same result modulo 2^n): torch 2.13's einsum fails on some int32
    # contractions ("expected scalar type Int but found Long") and returns int64 for sums of one
    return torch.einsum(equation, *[t.long() for t in inputs]).to(inputs[0].dtype)


def LRN(x, *, size, alpha=0.0001, beta=0.75, bias=1.0):
    if x.dim() >= 3 and size % 2:
        return F.local_response_norm(x, size, alpha, beta, bias)  # same window as ONNX for odd sizes
    # ONNX sums channels [c - floor((size-1)/2), c + ceil((size-1)/2)]; torch centers the other way
    lo = (size - 1) // 2
    sq = F.pad((x * x).movedim(1, -1), [lo, size - 1 - lo])
    s = sq.unfold(-1, size, 1).sum(-1).movedim(-1, 1)
    return x / (bias + alpha / size * s) ** beta


# Resize: separable, one axis at a time, as ONNX's reference (taps computed in numpy while tracing: constants)
from dlcfuzz.export.resize_taps import resize_taps  # noqa: E402 (inlined by torch.ops_source)


@torch.compiler.assume_constant_result
def _resize_plan(shape, roi, scales, sizes, axes, policy, ctm, mode, nearest_mode, a, antialias, exclude_outside):
    """Per resized axis: (axis, output length, source indices [out * taps], weights [out][taps] or
    None for a gather, extrapolated positions [out] or None).  Computed in numpy and returned as
    Python lists: constants for torch.compile (which would otherwise trace the numpy code)."""
    r = len(shape)
    axes = list(range(r)) if axes is None else _norm_axes(axes, r)
    f32 = np.float32
    if scales:  # output lengths floor(scale * n) in float32, as ONNX shape inference and ORT
        factors = {d: float(f32(sc)) for d, sc in zip(axes, scales, strict=True)}
        out = {d: int(f32(sc) * f32(shape[d])) for d, sc in zip(axes, scales, strict=True)}
    elif policy in ("not_larger", "not_smaller"):
        pick = min if policy == "not_larger" else max
        # lengths roundf(scale * n) in float32 (ONNX, ORT); coordinates from the double scale (reference)
        sc = pick([f32(n) / f32(shape[d]) for d, n in zip(axes, sizes, strict=True)])
        out = {d: math.floor(float(sc * f32(shape[d])) + 0.5) for d in axes}
        factors = dict.fromkeys(axes, pick([n / shape[d] for d, n in zip(axes, sizes, strict=True)]))
    else:
        factors = {d: n / shape[d] for d, n in zip(axes, sizes, strict=True)}
        out = dict(zip(axes, sizes, strict=True))
    k = len(axes)
    rois = {d: (roi[i], roi[k + i]) if roi else (0.0, 1.0) for i, d in enumerate(axes)}
    plan = []
    for d in axes:
        if math.isclose(factors[d], 1.0) and out[d] == shape[d] and (
                ctm != "tf_crop_and_resize" or (math.isclose(rois[d][0], 0.0) and math.isclose(rois[d][1], 1.0))):
            continue  # the identity on this axis (as the reference skips it)
        idx, w, extrapolated = resize_taps(shape[d], out[d], factors[d], rois[d], mode, ctm, nearest_mode, a,
                                            antialias, exclude_outside)
        if mode == "nearest":  # one tap of weight 1: a gather
            taps, weights = idx[np.arange(out[d]), w.argmax(-1)].tolist(), None
        else:
            taps, weights = idx.reshape(-1).tolist(), w.tolist()
        ext = extrapolated.tolist() if extrapolated is not None and extrapolated.any() else None
        plan.append((d, out[d], taps, weights, ext))
    return plan


def Resize(x, *inputs, **attrs):
    # inputs (roi, scales, sizes) and attributes without Python defaults: under dynamic=True,
    # torch.compile turns default argument values into symbols, which _resize_plan cannot take
    roi, scales, sizes = [*inputs, None, None, None][:3]
    r = x.dim()
    shape = [operator.index(d) for d in x.shape]  # plain ints, also under dynamic shapes
    mode = attrs.get("mode", "nearest")
    plan = _resize_plan(shape, roi, scales, sizes, attrs.get("axes"), attrs.get("keep_aspect_ratio_policy", "stretch"),
                        attrs.get("coordinate_transformation_mode", "half_pixel"), mode,
                        attrs.get("nearest_mode", "round_prefer_floor"), attrs.get("cubic_coeff_a", -0.75),
                        attrs.get("antialias", 0), attrs.get("exclude_outside", 0))
    # float32 math for float16/32, double for float64 and integers (which round at the end)
    y = x.to(torch.float32) if x.dtype in (torch.float16, torch.float32) else x.to(torch.float64)
    for a, n_out, taps, weights, extrapolated in plan:
        g = torch.index_select(y, a, torch.tensor(taps, dtype=torch.int64, device=x.device))
        if weights is not None:
            k = len(weights[0])
            g = g.reshape((*y.shape[:a], n_out, k, *y.shape[a + 1:]))
            w = torch.tensor(weights, dtype=y.dtype, device=x.device).reshape((n_out, k) + (1,) * (r - a - 1))
            g = (g * w).sum(a + 1)
        if extrapolated is not None:
            mask = torch.tensor(extrapolated, device=x.device).reshape((n_out,) + (1,) * (r - a - 1))
            fill = torch.tensor(attrs.get("extrapolation_value", 0.0), dtype=y.dtype, device=x.device)
            g = torch.where(mask, fill, g)
        y = g
    if x.dtype.is_floating_point:
        return y.to(x.dtype)
    info = torch.iinfo(x.dtype)  # integers: round half to even and saturate, as the reference
    return torch.round(y).clamp(info.min, info.max).to(x.dtype)


# ---------------------------------------------------------------------------------------------
# shape
# ---------------------------------------------------------------------------------------------
def Reshape(data, shape, *, allowzero=0):
    if not allowzero:
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return torch.reshape(data, shape)


def Transpose(data, *, perm=None):
    return data.permute(perm if perm is not None else list(range(data.dim() - 1, -1, -1)))


def Flatten(x, *, axis=1):
    a = axis + x.dim() if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))


def Squeeze(data, axes=None):
    if axes is None:
        return data.squeeze()
    return data.squeeze(_norm_axes(axes, data.dim()))


def Unsqueeze(data, axes):
    for a in sorted(_norm_axes(axes, data.dim() + len(axes))):
        data = data.unsqueeze(a)
    return data


def Expand(x, shape):
    return x.expand(torch.broadcast_shapes(x.shape, tuple(shape)))


def Tile(x, repeats):
    return x.repeat(repeats) if repeats else x


def DepthToSpace(x, *, blocksize, mode="DCR"):
    if mode == "CRD":
        return F.pixel_shuffle(x, blocksize)
    b, c, h, w = x.shape
    y = x.reshape(b, blocksize, blocksize, c // blocksize ** 2, h, w).permute(0, 3, 4, 1, 5, 2)
    return y.reshape(b, c // blocksize ** 2, h * blocksize, w * blocksize)


def SpaceToDepth(x, *, blocksize):
    b, c, h, w = x.shape
    y = x.reshape(b, c, h // blocksize, blocksize, w // blocksize, blocksize).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(b, c * blocksize ** 2, h // blocksize, w // blocksize)


def Shape(data, *, start=0, end=None):
    # Python slicing clamps as ONNX
    return torch.tensor(list(data.shape)[start:end], dtype=torch.int64, device=data.device)


def Size(data):
    return torch.tensor(data.numel(), dtype=torch.int64, device=data.device)


# ---------------------------------------------------------------------------------------------
# indexing
# ---------------------------------------------------------------------------------------------
def Concat(*inputs, axis):
    return torch.cat(inputs, axis)


def Split(x, split=None, *, axis=0, num_outputs=None, nout=1):
    d = x.shape[axis]
    if split is None:
        n = num_outputs or nout
        q = -(-d // n)  # parts of ceil(d / n), the last one smaller
        split = [q] * (n - 1) + [d - q * (n - 1)]
    return tuple(torch.split(x, list(split), axis))


def _slice_range(d: int, start: int, end: int, step: int) -> range:
    """ONNX Slice's indices along one axis: negative starts and ends count from the end, then, for a
    negative step, the start is clamped to [0, d-1] and the end to [-1, d-1] (Python's slices clamp a
    start before the first element to "nothing", not to element 0), else both to [0, d]."""
    start, end = start + d if start < 0 else start, end + d if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), d), min(max(end, 0), d), step)
    return range(min(max(start, 0), d - 1), min(max(end, -1), d - 1), step)


def Slice(data, starts, ends, axes=None, steps=None):
    axes = list(range(len(starts))) if axes is None else _norm_axes(axes, data.dim())
    steps = [1] * len(starts) if steps is None else steps
    for a, b, e, st in zip(axes, starts, ends, steps, strict=True):
        d = data.shape[a]
        r = _slice_range(d, int(b), int(e), int(st))
        index = [slice(None)] * data.dim()
        if st > 0:
            index[a] = slice(r.start, r.start + len(r) * st, st)
        else:  # torch has no negative steps: flip, then step forwards from the mirrored start
            data = data.flip(a)
            index[a] = slice(d - 1 - r.start, d - 1 - r.start + len(r) * -st, -st)
        data = data[tuple(index)]
    return data


def _positive(idx, d):
    idx = idx.to(torch.int64)
    return torch.where(idx < 0, idx + d, idx)


def Gather(data, indices, *, axis=0):
    ax = axis % data.dim()
    idx = _positive(indices, data.shape[ax])
    y = torch.index_select(data, ax, idx.reshape(-1))
    return y.reshape(data.shape[:ax] + idx.shape + data.shape[ax + 1:])


def GatherElements(data, indices, *, axis=0):
    ax = axis % data.dim()
    return torch.gather(data, ax, _positive(indices, data.shape[ax]))


def GatherND(data, indices, *, batch_dims=0):
    b, m = batch_dims, indices.shape[-1]
    nb = math.prod(data.shape[:b])
    flat = data.reshape((nb, *data.shape[b:]))
    idx = indices.reshape(nb, -1, m)
    cols = [_positive(idx[..., j], data.shape[b + j]) for j in range(m)]
    y = flat[(torch.arange(nb, device=data.device).reshape(nb, 1), *cols)]
    return y.reshape(indices.shape[:-1] + data.shape[b + m:])


def _pad_index(n: int, begin: int, end: int, mode: str, device: torch.device) -> torch.Tensor:
    i = torch.arange(-begin, n + end, device=device)
    if mode == "edge":
        return i.clamp(0, n - 1)
    if mode == "wrap":
        return i.remainder(n)
    return (n - 1) - ((n - 1) - i.abs()).abs()  # reflect (pads < n)


def Pad(data, pads, constant_value=None, axes=None, *, mode="constant"):
    r = data.dim()
    axes = list(range(r)) if axes is None else _norm_axes(axes, r)
    k = len(axes)
    per_axis = dict(zip(axes, zip(pads[:k], pads[k:], strict=True), strict=True))
    if mode == "constant":
        flat = []  # F.pad: (begin, end) pairs from the last dim backwards; negative pads crop
        for a in range(r - 1, -1, -1):
            flat += per_axis.get(a, (0, 0))
        value = 0 if constant_value is None else constant_value
        return F.pad(data, flat, value=value)
    for a, (b, e) in per_axis.items():
        if b < 0 or e < 0:  # crop first, then pad what is left
            data = data.narrow(a, max(-b, 0), data.shape[a] - max(-b, 0) - max(-e, 0))
            b, e = max(b, 0), max(e, 0)
        if b or e:
            data = torch.index_select(data, a, _pad_index(data.shape[a], b, e, mode, data.device))
    return data


def CumSum(x, axis, *, exclusive=0, reverse=0):
    ax = axis % x.dim()
    if reverse:
        x = x.flip(ax)
    y = torch.cumsum(x, ax, dtype=x.dtype)
    if exclusive:
        y = torch.cat([torch.zeros_like(y.narrow(ax, 0, 1)), y.narrow(ax, 0, y.shape[ax] - 1)], ax)
    return y.flip(ax) if reverse else y


def Trilu(x, k=None, *, upper=1):
    rows, cols = x.shape[-2:]
    k = 0 if k is None else min(max(k, -rows - 1), cols + 1)  # far diagonals act as the nearest outside one
    return torch.triu(x, k) if upper else torch.tril(x, k)


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}
_BOOL_REDUCE = {"add": "amax", "mul": "amin", "max": "amax", "min": "amin"}  # bool + is OR, * is AND


def ScatterElements(data, indices, updates, *, axis=0, reduction="none"):
    ax = axis % data.dim()
    idx = _positive(indices, data.shape[ax])
    if reduction == "none":
        return data.scatter(ax, idx, updates)
    if data.dtype == torch.bool:
        y = data.to(torch.uint8).scatter_reduce(ax, idx, updates.to(torch.uint8), _BOOL_REDUCE[reduction])
        return y.to(torch.bool)
    return data.scatter_reduce(ax, idx, updates, _SCATTER_REDUCE[reduction])


def ScatterND(data, indices, updates, *, reduction="none"):
    k = indices.shape[-1]
    lead, rest = list(data.shape[:k]), list(data.shape[k:])
    idx = indices.reshape(-1, k).to(torch.int64)
    flat = torch.zeros(idx.shape[0], dtype=torch.int64, device=data.device)
    for j in range(k):  # row-major position of each k-tuple among data's first k dims
        flat = flat * lead[j] + _positive(idx[:, j], lead[j])
    d = data.reshape([math.prod(lead), *rest])
    u = updates.reshape([idx.shape[0], *rest])
    if reduction == "none":
        return d.index_copy(0, flat, u).reshape(data.shape)
    where = flat.reshape([-1] + [1] * len(rest)).expand(u.shape)
    if data.dtype == torch.bool:
        y = d.to(torch.uint8).scatter_reduce(0, where, u.to(torch.uint8), _BOOL_REDUCE[reduction]).to(torch.bool)
    else:
        y = d.scatter_reduce(0, where, u, _SCATTER_REDUCE[reduction])
    return y.reshape(data.shape)


def TopK(x, k, *, axis=-1, largest=1, sorted=1, nout=2):
    ax = axis % x.dim()
    n = k[0] if isinstance(k, list) else k
    # a stable sort: equal values keep their order, the lower index first (ONNX's tie-break)
    values, idx = torch.sort(x, dim=ax, descending=bool(largest), stable=True)
    return (values.narrow(ax, 0, n), idx.narrow(ax, 0, n))[:nout]


def OneHot(indices, depth, values, *, axis=-1):
    d = int(depth[0] if isinstance(depth, list) else depth)
    idx = indices.to(torch.int64)
    idx = torch.where(idx < 0, idx + d, idx)  # out of [-depth, depth - 1]: matches nothing, all off
    ax = axis % (indices.dim() + 1)
    pos = torch.arange(d, device=indices.device).reshape([d] + [1] * (indices.dim() - ax))
    return torch.where(idx.unsqueeze(ax) == pos, values[1], values[0])


def Compress(x, condition, *, axis=None):
    keep = [i for i in range(len(condition)) if condition[i]]
    idx = torch.tensor(keep, dtype=torch.int64, device=x.device)
    if axis is None:
        return torch.index_select(x.reshape(-1), 0, idx)
    return torch.index_select(x, axis % x.dim(), idx)


def NonZero(x):
    return torch.nonzero(x).t()


def Unique(x, *, axis=None, sorted=1, nout=1):
    # torch sorts (slices lexicographically, as numpy does); ONNX also wants each value's first
    # position, and with sorted=0 the values in the order they first occur
    y, inv, counts = torch.unique(x, sorted=True, return_inverse=True, return_counts=True, dim=axis)
    inv = inv.reshape(-1)
    n = inv.shape[0]
    first = torch.full([counts.shape[0]], n, dtype=torch.int64, device=x.device)
    first = first.scatter_reduce(0, inv, torch.arange(n, device=x.device), "amin")
    if not sorted:
        perm = torch.argsort(first)
        y = torch.index_select(y.reshape(-1) if axis is None else y, 0 if axis is None else axis % x.dim(), perm)
        first, counts = first[perm], counts[perm]
        inv = torch.argsort(perm)[inv]
    return (y, first, inv, counts)[:nout]


def NonMaxSuppression(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None, *,
                      center_point_box=0):
    nb, ns, nc = boxes.shape[0], boxes.shape[1], scores.shape[1]
    b = boxes.to(torch.float32)
    if center_point_box:  # [x_center, y_center, width, height]
        x1, x2 = b[..., 0] - b[..., 2] / 2, b[..., 0] + b[..., 2] / 2
        y1, y2 = b[..., 1] - b[..., 3] / 2, b[..., 1] + b[..., 3] / 2
    else:  # [y1, x1, y2, x2] of any diagonal pair of corners
        y1, y2 = torch.minimum(b[..., 0], b[..., 2]), torch.maximum(b[..., 0], b[..., 2])
        x1, x2 = torch.minimum(b[..., 1], b[..., 3]), torch.maximum(b[..., 1], b[..., 3])
    area = (y2 - y1) * (x2 - x1)  # [nb, ns]
    ih = torch.minimum(y2[:, :, None], y2[:, None, :]) - torch.maximum(y1[:, :, None], y1[:, None, :])
    iw = torch.minimum(x2[:, :, None], x2[:, None, :]) - torch.maximum(x1[:, :, None], x1[:, None, :])
    inter = ih.clamp(min=0) * iw.clamp(min=0)
    union = area[:, :, None] + area[:, None, :] - inter
    # no overlap, or a box without area: never suppressed
    valid = (inter > 0) & (area[:, :, None] > 0) & (area[:, None, :] > 0) & (union > 0)
    thr = 0.0 if iou_threshold is None else iou_threshold.reshape(-1)[0]
    over = valid & (inter / torch.where(union > 0, union, 1.0) > thr)  # [nb, ns, ns]
    # each class's boxes by descending score (equal scores: the lower index first)
    order = torch.argsort(scores, dim=2, descending=True, stable=True)  # [nb, nc, ns]
    ranked = torch.gather(scores, 2, order)
    cand = torch.ones_like(ranked, dtype=torch.bool) if score_threshold is None else (
        ranked > score_threshold.reshape(-1)[0])
    rows = torch.gather(over[:, None].expand(nb, nc, ns, ns), 2, order[..., None].expand(nb, nc, ns, ns))
    over_ranked = torch.gather(rows, 3, order[:, :, None, :].expand(nb, nc, ns, ns))
    limit = 0 if max_output_boxes_per_class is None else max_output_boxes_per_class.reshape(-1)[0]
    kept = torch.zeros([nb, nc, ns], dtype=torch.bool, device=boxes.device)
    count = torch.zeros([nb, nc], dtype=torch.int64, device=boxes.device)
    pos = torch.arange(ns, device=boxes.device)
    for i in range(ns):  # greedy, in rank order: kept unless a kept box overlaps it too much
        hit = (kept & over_ranked[:, :, i, :]).any(-1)
        take = cand[:, :, i] & ~hit & (count < limit)
        kept = kept | (take[:, :, None] & (pos == i))
        count = count + take.to(torch.int64)
    sel = torch.nonzero(kept)  # (batch, class, rank), in ONNX's output order
    return torch.stack([sel[:, 0], sel[:, 1], order[sel[:, 0], sel[:, 1], sel[:, 2]]], 1)


def Range(start, limit, delta):
    """start + i * delta for i < max(ceil((limit - start) / delta), 0), in start's type.  The length is
    read from the values: torch.compile specializes on it (the spec fixes them per graph)."""
    first, last, step = start.item(), limit.item(), delta.item()
    n = max(math.ceil((last - first) / step), 0)
    return start + torch.arange(n, device=start.device).to(start.dtype) * delta


def ConstantOfShape(input, *, value=None):
    """A tensor of ``input``'s values as its shape, filled with ``value`` (written as [[v], dtype name];
    omitted: a float32 zero).  The shape is read from the values, as Range's length."""
    shape = []
    for i in range(input.shape[0]):
        shape.append(int(input[i]))
    fill, dtype = (0.0, torch.float32) if value is None else (value[0][0], getattr(torch, value[1]))
    return torch.full(shape, fill, dtype=dtype, device=input.device)


def EyeLike(x, *, dtype=None, k=0):
    rows, cols = x.shape
    diag = (torch.arange(cols, device=x.device).reshape(1, cols)
            - torch.arange(rows, device=x.device).reshape(rows, 1)) == k
    return diag.to(x.dtype if dtype is None else ONNX_DTYPES[dtype])


def ReverseSequence(x, sequence_lens, *, batch_axis=1, time_axis=0):
    t_len = x.shape[time_axis]
    src = [[n - 1 - t if t < n else t for t in range(t_len)] for n in sequence_lens]  # [batch][time]
    idx = torch.tensor(src, dtype=torch.int64, device=x.device)
    if time_axis < batch_axis:
        idx = idx.t()
    idx = idx.reshape(idx.shape + (1,) * (x.dim() - 2)).expand(x.shape)
    return torch.gather(x, time_axis, idx)


# ---------------------------------------------------------------------------------------------
# convolution and pooling
# ---------------------------------------------------------------------------------------------
def _same_pads(sizes, kernel, strides, dilations, lower: bool) -> list:
    """ONNX SAME_UPPER / SAME_LOWER pads (begins then ends): output = ceil(in / stride)."""
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        total = max(0, (-(-n // s) - 1) * s + (k - 1) * d + 1 - n)
        b = total - total // 2 if lower else total // 2
        begins.append(b)
        ends.append(total - b)
    return begins + ends


def _window_pads(x, auto_pad, kernel, strides, dilations, pads) -> list:
    sizes = x.shape[2:]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return _same_pads(sizes, kernel, strides, dilations, auto_pad == "SAME_LOWER")
    if auto_pad == "VALID" or pads is None:
        return [0] * (2 * len(sizes))
    return list(pads)


def _spatial_pad(x, pads, value=0.0):
    """F.pad of the spatial dims from ONNX pads [b1..bn, e1..en]."""
    n = len(pads) // 2
    flat = []
    for j in range(n - 1, -1, -1):
        flat += [pads[j], pads[n + j]]
    return F.pad(x, flat, value=value)


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def Conv(x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None,
         strides=None):
    n = x.dim() - 2
    kernel = list(w.shape[2:])
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    pads = _window_pads(x, auto_pad, kernel, strides, dilations, pads)
    if pads[:n] == pads[n:]:
        padding = pads[:n]
    else:  # asymmetric: pad explicitly
        x, padding = _spatial_pad(x, pads), [0] * n
    return CONV[n](x, w, b, strides, padding, dilations, group)


def ConvTranspose(x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
                  output_padding=None, output_shape=None, pads=None, strides=None):
    n = x.dim() - 2
    kernel = list(w.shape[2:])
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    output_padding = output_padding or [0] * n
    full = [s * (i - 1) + op + (k - 1) * d + 1
            for i, s, op, k, d in zip(x.shape[2:], strides, output_padding, kernel, dilations, strict=True)]
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        sizes = x.shape[2:]
        target = output_shape if output_shape is not None else [i * s for i, s in zip(sizes, strides, strict=True)]
        total = [max(0, f - t) for f, t in zip(full, target, strict=True)]
        # ONNX: SAME_UPPER puts the odd pad at the end, everything else at the beginning
        begins = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        pads = begins + [t - bg for t, bg in zip(total, begins, strict=True)]
    elif pads is None:
        pads = [0] * (2 * n)
    common = [min(pads[j], pads[n + j]) for j in range(n)]
    y = CONV_T[n](x, w, b, strides, common, output_padding, group, dilations)
    for j in range(n):  # asymmetric pads: crop what the common padding left
        lo, hi = pads[j] - common[j], pads[n + j] - common[j]
        if lo or hi:
            y = y.narrow(2 + j, lo, y.shape[2 + j] - lo - hi)
    return y


def _pool_geometry(x, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides):
    n = x.dim() - 2
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    pads = _window_pads(x, auto_pad, kernel_shape, strides, dilations, pads)
    ceil = bool(ceil_mode) and auto_pad not in ("SAME_UPPER", "SAME_LOWER")
    return n, strides, dilations, pads, ceil


def _native_pads(x, kernel, pads) -> bool:
    """torch's pools take symmetric pads of at most half the kernel, and its 3-D pools refuse
    inputs smaller than the kernel even when padded ("input image ... smaller than kernel size")."""
    n = len(kernel)
    return pads[:n] == pads[n:] and all([2 * p <= k and size >= k for p, k, size in
                                         zip(pads[:n], kernel, x.shape[2:], strict=True)])


def _windows(x, kernel, strides, dilations, pads, ceil: bool, value):
    """All pooling windows as trailing dims: (N, C, *out, *kernel), padding with ``value``; with
    ceil_mode, the partial last windows get extra ``value`` padding."""
    n = len(kernel)
    pads = list(pads)
    for j in range(n):
        eff = (kernel[j] - 1) * dilations[j] + 1
        size = x.shape[2 + j] + pads[j] + pads[n + j]
        if ceil:
            out = -(-(size - eff) // strides[j]) + 1
            if (out - 1) * strides[j] >= x.shape[2 + j] + pads[j]:
                out -= 1  # the last window must start inside the input or the left pad
            pads[n + j] += max(0, (out - 1) * strides[j] + eff - size)
    y = _spatial_pad(x, pads, value)
    for j in range(n):
        eff = (kernel[j] - 1) * dilations[j] + 1
        y = y.unfold(2 + j, eff, strides[j])[..., ::dilations[j]]
    return y


def _window_dims(n: int) -> list:
    return list(range(-n, 0))


POOL_MAX = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
POOL_AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def MaxPool(x, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape, pads=None, storage_order=0,
            strides=None, nout=1):
    n, strides, dilations, pads, ceil = _pool_geometry(x, auto_pad, ceil_mode, dilations, kernel_shape, pads,
                                                       strides)
    if _native_pads(x, kernel_shape, pads):
        begins, xp = [0] * n, x
        padding = pads[:n]
    else:  # pad with -inf, so that padding never wins (integers go through double: exact for int8/uint8)
        begins, xp = pads[:n], _spatial_pad(x if _is_float(x) else x.double(), pads, float("-inf"))
        padding = [0] * n
    y, idx = POOL_MAX[n](xp, kernel_shape, strides, padding, dilations, ceil_mode=ceil, return_indices=True)
    y = y.to(x.dtype)
    if nout == 1:
        return (y,)
    # torch: the index in the (padded) spatial plane; ONNX: in the whole unpadded tensor, row-major
    # (storage_order 0) or column-major spatial order (1)
    psizes, sizes = xp.shape[2:], x.shape[2:]
    coords = []
    for j in range(n - 1, -1, -1):
        coords.append(idx % psizes[j] - begins[j])
        idx = idx // psizes[j]
    coords.reverse()
    flat = torch.zeros_like(idx)
    order = range(n - 1, -1, -1) if storage_order else range(n)
    for j in order:
        flat = flat * sizes[j] + coords[j]
    plane = math.prod(sizes)
    base = torch.arange(x.shape[0] * x.shape[1], device=x.device).reshape(x.shape[:2] + (1,) * n) * plane
    return y, base + flat


def AveragePool(x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape,
                pads=None, strides=None):
    n, strides, dilations, pads, ceil = _pool_geometry(x, auto_pad, ceil_mode, dilations, kernel_shape, pads,
                                                       strides)
    if all([d == 1 for d in dilations]) and _native_pads(x, kernel_shape, pads):
        return POOL_AVG[n](x, kernel_shape, strides, pads[:n], ceil, bool(count_include_pad))
    # the mean over each window of the elements inside the input (or the padded input with
    # count_include_pad), never of the ceil_mode extension
    dims = _window_dims(n)
    total = _windows(x, kernel_shape, strides, dilations, pads, ceil, 0.0).sum(dims)
    ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype, device=x.device)
    if count_include_pad:
        ones, pads = _spatial_pad(ones, pads, 1.0), [0] * (2 * n)
    count = _windows(ones, kernel_shape, strides, dilations, pads, ceil, 0.0).sum(dims)
    return total / count


def LpPool(x, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape, p=2, pads=None, strides=None):
    n, strides, dilations, pads, ceil = _pool_geometry(x, auto_pad, ceil_mode, dilations, kernel_shape, pads,
                                                       strides)
    w = _windows(x.abs() ** p, kernel_shape, strides, dilations, pads, ceil, 0.0)
    return w.sum(_window_dims(n)) ** (1.0 / p)


def GlobalAveragePool(x):
    return x.mean(list(range(2, x.dim())), keepdim=True)


def GlobalMaxPool(x):
    return torch.amax(x, list(range(2, x.dim())), keepdim=True)


def GlobalLpPool(x, *, p=2):
    return torch.linalg.vector_norm(x, p, list(range(2, x.dim())), keepdim=True)


def MaxUnpool(x, i, output_shape=None, *, kernel_shape, pads=None, strides=None):
    # I holds flat indices into the whole output tensor (as ORT reads them; MaxPool's Indices):
    # a scatter (F.max_unpool takes per-plane indices and only symmetric padding)
    n = x.dim() - 2
    strides = strides or [1] * n
    pads = pads or [0] * (2 * n)
    shape = list(output_shape) if output_shape is not None else list(x.shape[:2]) + [
        (x.shape[2 + j] - 1) * strides[j] + kernel_shape[j] - pads[j] - pads[n + j] for j in range(n)]
    y = torch.zeros(math.prod(shape), dtype=x.dtype, device=x.device)
    return y.scatter(0, i.reshape(-1), x.reshape(-1)).reshape(shape)


# ---------------------------------------------------------------------------------------------
# normalization
# ---------------------------------------------------------------------------------------------
def BatchNormalization(x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    if x.dim() >= 2:
        return F.batch_norm(x, mean, var, scale, b, False, 0.0, epsilon)
    return (x - mean) / torch.sqrt(var + epsilon) * scale + b  # rank 1: a single channel


def InstanceNormalization(x, scale, b, *, epsilon=1e-5):
    if math.prod(x.shape[2:]) > 1:
        return F.instance_norm(x, weight=scale, bias=b, eps=epsilon)
    # torch refuses a single spatial element; the variance is 0, so y = B
    shape = (-1,) + (1,) * (x.dim() - 2)
    return (x - x) / math.sqrt(epsilon) * scale.reshape(shape) + b.reshape(shape)


def LayerNormalization(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1, nout=1):
    a = axis % x.dim()
    normalized = tuple(x.shape[a:])
    if nout == 1 and scale.shape == normalized and (b is None or b.shape == normalized):
        return (F.layer_norm(x, normalized, scale, b, epsilon),)
    # Scale and B broadcast to X; Mean and InvStdDev are float (stash_type 1), as is the computation.
    # stash_type 16 (bfloat16) is computed in float too: as ORT does, and more precise than asked
    xf = x.to(torch.float32)
    dims = list(range(a, x.dim()))
    mean = xf.mean(dims, keepdim=True)
    diff = xf - mean
    inv = torch.rsqrt((diff * diff).mean(dims, keepdim=True) + epsilon)
    y = (diff * inv).to(x.dtype) * scale
    if b is not None:
        y = y + b
    return (y, mean, inv)[:nout]


def RMSNormalization(x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    # ONNX's function body (stash_type 1): normalized in float32, cast back to X's type, times Scale
    xf = x.to(torch.float32)
    dims = list(range(axis % x.dim(), x.dim()))
    return (xf * torch.rsqrt((xf * xf).mean(dims, keepdim=True) + epsilon)).to(x.dtype) * scale


def LpNormalization(x, *, axis=-1, p=2):
    norm = torch.linalg.vector_norm(x, p, axis, keepdim=True)
    return torch.where(norm == 0, 0, x / norm).to(x.dtype)


def GridSample(x, grid, *, align_corners=0, mode="linear", padding_mode="zeros"):
    # opset 16 names bilinear / bicubic what opset 20 names linear / cubic; torch: 4-D and 5-D
    mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    return F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=bool(align_corners))


def AffineGrid(theta, size, *, align_corners=0):
    return F.affine_grid(theta, list(size), align_corners=bool(align_corners))


def Attention(q, k, v, attn_mask=None, past_key=None, past_value=None, *, is_causal=0, kv_num_heads=None,
              q_num_heads=None, qk_matmul_output_mode=0, scale=None, softcap=0.0, softmax_precision=None, nout=1):
    three = q.dim() == 3
    b = q.shape[0]
    if three:  # (B, S, heads * size) -> (B, heads, S, size)
        q = q.reshape(b, q.shape[1], q_num_heads, -1).transpose(1, 2)
        k = k.reshape(b, k.shape[1], kv_num_heads, -1).transpose(1, 2)
        v = v.reshape(b, v.shape[1], kv_num_heads, -1).transpose(1, 2)
    past = 0 if past_key is None else past_key.shape[2]
    if past_key is not None:
        k, v = torch.cat([past_key, k], 2), torch.cat([past_value, v], 2)
    present_k, present_v = k, v
    reps = q.shape[1] // k.shape[1]  # GQA: q head h reads kv head h // reps
    if reps > 1:
        k, v = k.repeat_interleave(reps, 1), v.repeat_interleave(reps, 1)
    # ONNX scales Q and K by sqrt(scale), the square root cast to Q's type
    root = torch.tensor(math.sqrt(1 / math.sqrt(q.shape[3]) if scale is None else scale), dtype=q.dtype,
                        device=q.device)
    raw = torch.matmul(q * root, (k * root).transpose(-1, -2))
    capped = softcap * torch.tanh(raw / softcap) if softcap else raw
    sq, total = raw.shape[-2], raw.shape[-1]
    bias = torch.zeros([sq, total], dtype=q.dtype, device=q.device)
    if attn_mask is not None:
        bias = bias + (torch.where(attn_mask, 0.0, -math.inf).to(q.dtype) if attn_mask.dtype == torch.bool
                       else attn_mask)
    if is_causal:  # query i attends key j iff j <= i + past
        rows = torch.arange(sq, device=q.device).reshape(sq, 1)
        allowed = torch.arange(total, device=q.device).reshape(1, total) <= rows + past
        bias = bias + torch.where(allowed, 0.0, -math.inf).to(q.dtype)
    scores = capped + bias
    work = q.dtype if softmax_precision is None else ONNX_DTYPES[softmax_precision]
    probs = torch.softmax(scores.to(work), -1)
    dead = torch.isneginf(bias.amax(-1, keepdim=True))  # a fully masked row: zeros (ONNX's errata)
    probs = torch.where(dead, 0.0, probs).to(q.dtype)
    y = torch.matmul(probs, v)
    if three:
        y = y.transpose(1, 2).reshape(b, sq, -1)
    qk = (raw, capped, scores, probs)[qk_matmul_output_mode]
    return (y, present_k, present_v, qk.to(q.dtype))[:nout]


def MeanVarianceNormalization(x, *, axes=None):
    dims = [0, 2, 3] if axes is None else list(axes)
    mean = x.mean(dims, keepdim=True)
    var = (x * x).mean(dims, keepdim=True) - mean * mean  # as ONNX's function body
    return (x - mean) / (torch.sqrt(var) + 1e-9)


def GroupNormalization(x, scale, bias, *, num_groups, epsilon=1e-5, stash_type=1):
    # ONNX's function body (opset 21: scale and bias per channel): statistics in stash_type with
    # Var = E[x^2] - E[x]^2, the normalized values cast back to x's type for scale and bias
    work = ONNX_DTYPES.get(stash_type, torch.float32)
    n, c = x.shape[0], x.shape[1]
    xu = x.to(work).reshape(n, num_groups, -1)
    mean = xu.mean(-1, keepdim=True)
    var = (xu * xu).mean(-1, keepdim=True) - mean * mean
    eps = torch.tensor(epsilon, dtype=work, device=x.device)
    norm = ((xu - mean) / torch.sqrt(var + eps)).reshape(n, c, -1).to(x.dtype)
    y = scale.to(x.dtype).reshape(1, -1, 1) * norm + bias.to(x.dtype).reshape(1, -1, 1)
    return y.reshape(x.shape)


# ---------------------------------------------------------------------------------------------
# quantization
# ---------------------------------------------------------------------------------------------
def _along(p, x, axis):
    """A per-tensor parameter as a scalar; a per-axis one (1-D) shaped to broadcast along ``axis``."""
    if p.dim() == 0 or x.dim() == 0:
        return p.reshape([])
    shape = [1] * x.dim()
    shape[axis % x.dim()] = p.shape[0]
    return p.reshape(shape)


def _saturate(q, dtype):
    """Rounded float values into an integer type, saturating (as ONNX's quantizers)."""
    info = torch.iinfo(dtype)
    return q.clamp(info.min, info.max).to(torch.int32).to(dtype)


def QuantizeLinear(x, y_scale, y_zero_point=None, *, axis=1, saturate=1, output_dtype=0, block_size=0):
    dtype = y_zero_point.dtype if y_zero_point is not None else ONNX_DTYPES[output_dtype or 2]
    # x / scale in float32 (as ORT, also for float16), rounded half to even
    q = torch.round(x.to(torch.float32) / _along(y_scale, x, axis).to(torch.float32))
    if y_zero_point is not None:
        q = q + _along(y_zero_point, x, axis).to(torch.float32)
    return _saturate(q, dtype)


def DequantizeLinear(x, x_scale, x_zero_point=None, *, axis=1, block_size=0, output_dtype=0):
    d = x.to(torch.int32)
    if x_zero_point is not None:
        d = d - _along(x_zero_point, x, axis).to(torch.int32)
    return (d.to(torch.float32) * _along(x_scale, x, axis).to(torch.float32)).to(x_scale.dtype)


def DynamicQuantizeLinear(x, *, nout=3):
    lo = torch.clamp(x.min(), max=0.0)
    hi = torch.clamp(x.max(), min=0.0)
    scale = (hi - lo) / 255
    scale = torch.where(scale == 0, 1.0, scale)  # all-zero x: ONNX divides by 0, ORT takes 1
    zp = torch.clamp(torch.round(-lo / scale), 0, 255)
    y = torch.clamp(torch.round(x / scale) + zp, 0, 255)
    return (y.to(torch.uint8), scale, zp.to(torch.uint8))[:nout]


def _centered(x, zero_point):
    """x - zero_point in double (exact for 8- and 16-bit integers and their products' sums)."""
    return x.double() - (zero_point.double() if zero_point is not None else 0.0)


def MatMulInteger(a, b, a_zero_point=None, b_zero_point=None):
    return torch.matmul(_centered(a, a_zero_point), _centered(b, b_zero_point)).to(torch.int32)


def ConvInteger(x, w, x_zero_point=None, w_zero_point=None, **attrs):
    # the padding holds x's zero point (padded x - x_zero_point = 0), as in ORT and the reference
    return torch.round(Conv(_centered(x, x_zero_point), _centered(w, w_zero_point), **attrs)).to(torch.int32)


def _requantize(acc, multiplier, y_zero_point):
    """round(acc * a_scale * b_scale / y_scale) + y_zero_point, saturated; the multiplier in float32
    as ORT computes it."""
    q = torch.round(acc.to(torch.float32) * multiplier) + y_zero_point.to(torch.float32)
    return _saturate(q, y_zero_point.dtype)


def QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    vector = a.dim() == 1  # numpy.matmul: a 1-D a is a row, removed from the result
    a = _centered(a.reshape([1, -1]) if vector else a, a_zero_point)
    b = _centered(b, b_zero_point)  # per column: (N,) or (..., 1, N) broadcasts over B
    acc = torch.matmul(a, b)  # exact integers
    multiplier = a_scale.to(torch.float32) * b_scale.to(torch.float32) / y_scale.to(torch.float32)
    y = _requantize(acc, multiplier, y_zero_point)
    return y.squeeze(-2) if vector and b.dim() >= 2 else y.reshape(acc.shape[:-1]) if vector else y


def QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None, **attrs):
    n = x.dim() - 2
    per_channel = [-1] + [1] * (n + 1)  # per output channel, as W's first dim
    wz = w_zero_point.reshape(per_channel) if w_zero_point.numel() > 1 else w_zero_point
    acc = Conv(_centered(x, x_zero_point), _centered(w, wz), **attrs)
    if B is not None:
        acc = acc + B.double().reshape([1, -1] + [1] * n)
    ws = w_scale.to(torch.float32)
    ws = ws.reshape([1, -1] + [1] * n) if ws.numel() > 1 else ws.reshape([])
    multiplier = x_scale.to(torch.float32).reshape([]) * ws / y_scale.to(torch.float32).reshape([])
    return _requantize(acc, multiplier, y_zero_point.reshape([]))


# ---------------------------------------------------------------------------------------------
# RNN, GRU, LSTM
# ---------------------------------------------------------------------------------------------
_GATE_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
# activation -> (function, the defaults of the alpha / beta it takes: ORT's, see docs/discrepancies.md)
_RNN_ACTS = {
    "Relu": (Relu, ()), "Tanh": (Tanh, ()), "Sigmoid": (Sigmoid, ()), "Softsign": (Softsign, ()),
    "Softplus": (Softplus, ()), "LeakyRelu": (LeakyRelu, (0.01,)), "ThresholdedRelu": (ThresholdedRelu, (0.0,)),
    "Elu": (Elu, (1.0,)), "HardSigmoid": (HardSigmoid, (0.2, 0.5)),
    "Affine": (lambda v, alpha, beta: alpha * v + beta, (0.0, 0.0)),
    "ScaledTanh": (lambda v, alpha, beta: alpha * torch.tanh(beta * v), (0.0, 0.0)),
}


def _rnn_acts(names, alphas, betas) -> list:
    """ONNX Runtime's reading: alpha / beta values are consumed, in order, only by the activations
    that take them (a list repeating one value means the same under every reading)."""
    out, used = [], [0, 0]
    for name in names:
        fn, params = _RNN_ACTS[name]
        params = list(params)
        for j, given in enumerate([alphas, betas][:len(params)]):
            if given is not None and used[j] < len(given):
                params[j] = given[used[j]]
                used[j] += 1
        out.append(functools.partial(fn, **dict(zip(["alpha", "beta"], params, strict=False))))
    return out


def _recurrent(op, x, w, r, b, lens, h0, c0, p, direction, activations, alphas, betas, clip, layout,
               linear_before_reset=0, input_forget=0, nout=1):
    if layout:
        x = x.transpose(0, 1)
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    steps, batch, hid = x.shape[0], x.shape[1], r.shape[-1]
    dirs = 2 if direction == "bidirectional" else 1
    k = len(_GATE_ACTS[op])
    fs = _rnn_acts(activations or _GATE_ACTS[op] * dirs, alphas, betas)
    lens = list(lens) if lens is not None else [steps] * batch
    mask = torch.tensor([[t < n for n in lens] for t in range(steps)], device=x.device).reshape(steps, batch, 1)

    def cl(v):
        return v if clip is None else torch.clamp(v, -clip, clip)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        f = fs[d * k:(d + 1) * k]
        rev = direction == "reverse" or d == 1
        # a reversed direction runs over each sequence's own steps backwards: reverse the valid part
        order = [[(n - 1 - t if t < n else t) if rev else t for n in lens] for t in range(steps)]
        idx = torch.tensor(order, device=x.device).reshape(steps, batch, 1).expand(steps, batch, x.shape[2])
        xs = torch.gather(x, 0, idx)
        wd, rd = w[d], r[d]
        g = wd.shape[0] // hid
        bd = b[d] if b is not None else torch.zeros(2 * g * hid, dtype=x.dtype, device=x.device)
        wb, rb = bd[:g * hid], bd[g * hid:]
        h = h0[d] if h0 is not None else torch.zeros(batch, hid, dtype=x.dtype, device=x.device)
        c = c0[d] if c0 is not None else torch.zeros(batch, hid, dtype=x.dtype, device=x.device)
        pd = p[d] if p is not None else torch.zeros(3 * hid, dtype=x.dtype, device=x.device)
        out = []
        for t in range(steps):
            xt = xs[t] @ wd.t() + wb
            cn = c
            if op == "RNN":
                hn = f[0](cl(xt + h @ rd.t() + rb))
            elif op == "GRU":
                hr = h @ rd[:2 * hid].t() + rb[:2 * hid]
                z = f[0](cl(xt[:, :hid] + hr[:, :hid]))
                rr = f[0](cl(xt[:, hid:2 * hid] + hr[:, hid:]))
                if linear_before_reset:
                    hh = f[1](cl(xt[:, 2 * hid:] + rr * (h @ rd[2 * hid:].t() + rb[2 * hid:])))
                else:
                    hh = f[1](cl(xt[:, 2 * hid:] + (rr * h) @ rd[2 * hid:].t() + rb[2 * hid:]))
                hn = (1 - z) * hh + z * h
            else:  # LSTM: gates i, o, f, c
                pre = xt + h @ rd.t() + rb
                i = f[0](cl(pre[:, :hid] + pd[:hid] * c))
                fg = 1 - i if input_forget else f[0](cl(pre[:, 2 * hid:3 * hid] + pd[2 * hid:] * c))
                cn = fg * c + i * f[1](cl(pre[:, 3 * hid:]))
                o = f[0](cl(pre[:, hid:2 * hid] + pd[hid:2 * hid] * cn))
                hn = o * f[2](cn)  # ORT does not clip the cell state before h
            m = mask[t]
            h = torch.where(m, hn, h)
            c = torch.where(m, cn, c)
            out.append(torch.where(m, hn, torch.zeros_like(hn)))
        ys.append(torch.gather(torch.stack(out), 0, idx[:, :, :1].expand(steps, batch, hid)))  # in time order
        hs.append(h)
        cs.append(c)
    y, yh, yc = torch.stack(ys, 1), torch.stack(hs), torch.stack(cs)
    if layout:
        y, yh, yc = y.permute(2, 0, 1, 3), yh.transpose(0, 1), yc.transpose(0, 1)
    return (y, yh, yc)[:nout]


def RNN(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size=None, layout=0, nout=1):
    return _recurrent("RNN", x, w, r, b, sequence_lens, initial_h, None, None, direction, activations,
                      activation_alpha, activation_beta, clip, layout, nout=nout)


def GRU(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size=None, layout=0, linear_before_reset=0, nout=1):
    return _recurrent("GRU", x, w, r, b, sequence_lens, initial_h, None, None, direction, activations,
                      activation_alpha, activation_beta, clip, layout, linear_before_reset=linear_before_reset,
                      nout=nout)


def LSTM(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *, activation_alpha=None,
         activation_beta=None, activations=None, clip=None, direction="forward", hidden_size=None, input_forget=0,
         layout=0, nout=1):
    return _recurrent("LSTM", x, w, r, b, sequence_lens, initial_h, initial_c, p, direction, activations,
                      activation_alpha, activation_beta, clip, layout, input_forget=input_forget, nout=nout)


# ---------------------------------------------------------------------------------------------
# windows
# ---------------------------------------------------------------------------------------------
def _window(size, periodic, output_datatype, a0, a1, a2):
    """a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1, in double with
    ONNX Runtime's float32 coefficients (integers truncate: Blackman's peak is 1 only with them).
    The length is the size's value: torch.compile specializes on it (the spec fixes it per graph)."""
    n = int(size)
    k = torch.arange(n, dtype=torch.float64, device=size.device) * (2 * math.pi / (n if periodic else n - 1))
    return (a0 - a1 * torch.cos(k) + a2 * torch.cos(2 * k)).to(ONNX_DTYPES[output_datatype])


_F32 = np.float32
HANN = (0.5, 0.5, 0.0)
HAMMING = (float(_F32(25 / 46)), float(_F32(1) - _F32(25 / 46)), 0.0)
BLACKMAN = (float(_F32(0.5) - _F32(0.08)), 0.5, float(_F32(0.08)))


def HannWindow(size, *, output_datatype=1, periodic=1):
    return _window(size, periodic, output_datatype, *HANN)


def HammingWindow(size, *, output_datatype=1, periodic=1):
    return _window(size, periodic, output_datatype, *HAMMING)


def BlackmanWindow(size, *, output_datatype=1, periodic=1):
    return _window(size, periodic, output_datatype, *BLACKMAN)


# ---------------------------------------------------------------------------------------------
# sequences and optionals: a sequence is a Python list of tensors, an optional the tensor or None
# (the ONNX chains of dlcfuzz's composite operators, spec/sequence.py; positions and split lengths
# arrive as Python ints and lists)
# ---------------------------------------------------------------------------------------------
def SequenceConstruct(*inputs):
    return list(inputs)


def SequenceEmpty(*, dtype=1):
    return []


def SequenceAt(input_sequence, position):
    return input_sequence[int(position)]


def SequenceInsert(input_sequence, tensor, position=None):
    out = list(input_sequence)
    # ONNX's position is in [-n, n]: a negative one counts from the back as list.insert does
    out.insert(len(out) if position is None else int(position), tensor)
    return out


def SequenceErase(input_sequence, position=None):
    out = list(input_sequence)
    out.pop(-1 if position is None else int(position))
    return out


def SequenceLength(input_sequence):
    device = input_sequence[0].device if len(input_sequence) else None
    return torch.tensor(len(input_sequence), dtype=torch.int64, device=device)


def SplitToSequence(input, split=None, *, axis=0, keepdims=1):
    if split is None:  # pieces of length 1, the axis squeezed unless keepdims
        pieces = list(torch.split(input, 1, axis))
        return pieces if keepdims else [p.squeeze(axis) for p in pieces]
    # a scalar: pieces of that length, the last one shorter (torch.split's rule); a list: the lengths
    return list(torch.split(input, split if isinstance(split, list) else int(split), axis))


def ConcatFromSequence(input_sequence, *, axis, new_axis=0):
    return torch.stack(input_sequence, axis) if new_axis else torch.cat(input_sequence, axis)


def Optional(input=None, *, type=None):
    return input


def OptionalHasElement(input=None):
    device = input.device if input is not None else None
    return torch.tensor(input is not None, device=device)


def OptionalGetElement(input):
    return input
