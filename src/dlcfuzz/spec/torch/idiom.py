"""Idioms: short multi-call snippets that models write and that Inductor's graph passes look for, each one
spec (one call of the program) whose ``emit`` writes the whole snippet as one expression (an inner
``lambda`` where the snippet reads an intermediate twice).

Random compositions of single operators rarely form the shapes Inductor's pattern matcher rewrites
(WhiteFox, OOPSLA 2024, found its Inductor bugs by aiming at them); an idiom forms one on purpose, with its
operands typed by the same constraint DSL, so that the solver instantiates it like any operator.  The
pass each one aims at (``torch/_inductor/fx_passes/``; ``TARGETS`` below):

- ``mm_bias`` (``mm(x, w) + b``, an activation after): post_grad's addmm fusion;
- ``batched_dot`` (``a.unsqueeze(-2) @ b.unsqueeze(-1)``): the CPU decomposition of a bmm of rows by columns;
- ``linear_act`` (``act(F.linear(x, w, b))``), ``conv_bn`` (conv2d -> batch_norm in eval -> activation),
  ``conv_binary`` (conv2d then add/sub/mul/div by per-channel constants): under freezing, conv-bn folding,
  binary folding and the mkldnn weight-packing and conv/linear + unary fusions; else the addmm
  decomposition and convolution lowering;
- ``numpy_axis`` (``torch.sum(x, axis=1, keepdims=True)``, NumPy's keywords): the pre-grad normalization of
  NumPy-style keywords;
- ``split_cat``, ``cat_split``, ``cat_slice_cat``: post_grad's split_with_sizes/cat eliminations and the
  cat-slice-cat lowering (issues #99686, #100807); in another order than the split's, the check that refuses;
- ``view_pair``, ``permute_pair``, ``convert_pair``: joint_graph's pointless view(-pair), permute-pair and
  dtype-conversion removals;
- ``scaled_softmax`` (softmax/log_softmax of ``x * c`` or ``x / c``): joint_graph's mul/div-softmax rewrite;
- ``attention`` (``q @ k^T / scale -> softmax -> @ v``, with an additive mask, an eval dropout): the
  scaled-dot-product-attention patterns of fuse_attention.py;
- ``full_cumsum`` (``torch.full(...).cumsum``): post_grad's pointless cumsum; ``onehot_scatter``
  (``zeros(...).scatter(dim, idx, value)``): joint_graph's scatter upon a constant tensor;
  ``partial_reduce`` (``amax(dim)`` beside ``amax()``): post_grad's partial-reduction reuse;
- ``noop`` (``x + 0``, ``x * 1``, ``x ** 1``, ``cat([x])``, ``repeat(1, ..)``, ``pad(x, [0, 0])``,
  ``x * ones_like(x)``): the no-op removals of joint_graph/post_grad and uniform-value constant folding;
- ``qlinear``, ``qconv``: int8 inference as PyTorch 2 export quantization (pt2e) leaves a model: activations
  quantized to uint8 and back, int8 per-channel weights dequantized where read, an optional quantized add and
  requantized output: under freezing, the oneDNN qlinear/qconv weight prepacking and post-op fusions of
  quantization.py; else the quantize/dequantize lowerings;
- ``rms_norm``, ``layer_norm``, ``gelu`` written out (LLaMA's RMSNorm with its float upcast, BERT's
  LayerNorm, GPT-2's tanh GELU), and ``unbind_stack``: the fusion and reduction code on what models write.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import BOOL, Choice, Const, In, Int
from dlcfuzz.spec.torch.base import (
    FLOATS,
    INTS,
    Draw,
    TorchOpSpec,
    budget_domain,
    same_iv,
    same_type,
    small_domain,
)

FAMILY = "idiom"
T_F = {"T": FLOATS}


def _spec(name: str, inputs: list, out: Callable, emit: Callable[[list[str], dict], str],
          transfer: Callable[[iv.Call], list[iv.Iv]], attrs: dict | None = None, types: dict | None = None,
          vdomain: Callable | None = None, **kw: Any) -> TorchOpSpec:
    return TorchOpSpec(f"idiom_{name}", FAMILY, inputs, out, attrs=attrs or {}, types=types or T_F, emit=emit,
                       transfer=transfer, vdomain=vdomain or small_domain(8.0), **kw)


def _bound(m: float, c: iv.Call, lo0: bool = False) -> list[iv.Iv]:
    r = iv.widen((0.0 if lo0 else -m, m), c.n, 16.0, absolute=4.0)
    return [r for _ in c.outs]


def _amax(c: iv.Call, k: int) -> float:
    return max(1.0, iv.amax(c.ivs[k])) if k < len(c.ivs) and c.ivs[k] is not None else 1.0  # type: ignore[arg-type]


def _dims_over(c, n: int = 2) -> list[int]:
    """The dims of the first input at least ``n`` long."""
    return [d for d in range(c.r) if c.s[d] >= n]


# ---------------------------------------------------------------------------------------------
# Activations (as models spell them)
# ---------------------------------------------------------------------------------------------
ACTS = {
    "none": "{}", "relu": "torch.relu({})", "gelu": "F.gelu({})", "gelu_tanh": "F.gelu({}, approximate='tanh')",
    "silu": "F.silu({})", "sigmoid": "torch.sigmoid({})", "tanh": "torch.tanh({})", "hardswish": "F.hardswish({})",
    "leaky_relu": "F.leaky_relu({}, 0.1)", "relu6": "F.relu6({})", "hardtanh": "F.hardtanh({}, -0.5, 2.0)",
}


def _act(k: dict, expr: str) -> str:
    return ACTS[k.get("act", "none")].format(expr)


# ---------------------------------------------------------------------------------------------
# Matmul / linear / convolution epilogues
# ---------------------------------------------------------------------------------------------
def _mm_bias_emit(a: list[str], k: dict) -> str:
    mm = f"torch.mm({a[0]}, {a[1]})"
    s = f"{mm} + {a[2]}" if k["order"] == 0 else f"{a[2]} + {mm}"
    return _act(k, f"({s})")


def _contraction_iv(count: Callable[[iv.Call], float]) -> Callable[[iv.Call], list[iv.Iv]]:
    def t(c: iv.Call) -> list[iv.Iv]:
        m = float(count(c)) * _amax(c, 0) * _amax(c, 1) + (_amax(c, 2) if len(c.ivs) > 2 else 0.0)
        return _bound(m + 1.0, c)
    return t


def _budget(count: Callable[[Any], float]) -> Callable:
    """Operands of a contraction within the dtype's budget: x within 4, the others within 4 and
    budget / (count * max|x|)."""
    return budget_domain(count, first=4.0, cap=4.0)


MM_BIAS = _spec(
    "mm_bias", [In("x", T="T", rank=(2, 2)), In("w", T="T", shape=lambda c: (c.s[1], c.o), weight=True),
                In("b", T="T", shape=lambda c: (c.o,) if c.brank == 1 else (c.s[0], c.o), weight=True)],
    lambda c: [TensorType((c.s[0], c.o), c.T)], _mm_bias_emit,
    _contraction_iv(lambda c: c.types[0].shape[1]),
    attrs={"o": Int(1, 6), "brank": Choice((1, 1, 2)), "order": BOOL,
           "act": Choice(("none", "none", "relu", "gelu", "silu", "tanh"))},
    vdomain=_budget(lambda c: c.s[1]))


LINEAR_ACT = _spec(
    "linear_act", [In("x", T="T", rank=(2, 3)), In("w", T="T", shape=lambda c: (c.o, c.s[-1]), weight=True),
                   In("b", T="T", shape=lambda c: (c.o,), optional=True, weight=True)],
    lambda c: [TensorType((*c.s[:-1], c.o), c.T)],
    lambda a, k: _act(k, f"F.linear({a[0]}, {a[1]}, {a[2] if len(a) > 2 and a[2] else 'None'})"),
    _contraction_iv(lambda c: c.types[0].shape[-1]),
    attrs={"o": Int(1, 6), "act": Choice(tuple(ACTS))},
    vdomain=_budget(lambda c: c.s[-1]))


# a batch of dot products as a matmul of a row by a column: Inductor decomposes such a bmm into pointwise
# code and a sum on CPU (decompose_bmm)
BATCHED_DOT = _spec(
    "batched_dot", [In("a", T="T", rank=(2, 3)), In("b", T="T", shape=lambda c: c.s, weight=True)],
    lambda c: [TensorType(c.s[:-1] if c.squeeze else (*c.s[:-1], 1, 1), c.T)],
    lambda a, k: f"({a[0]}.unsqueeze(-2) @ {a[1]}.unsqueeze(-1))" + (".squeeze(-1).squeeze(-1)" * k["squeeze"]),
    _contraction_iv(lambda c: c.types[0].shape[-1]), attrs={"squeeze": Choice((1, 1, 0))},
    vdomain=_budget(lambda c: c.s[-1]))


def _conv_attrs() -> dict:
    return {"o": Int(1, 4), "k": lambda c: Int(1, min(3, c.s[2], c.s[3])),
            "pad": lambda c: Int(0, c.k // 2)}


def _conv_out(c) -> list[TensorType]:
    return [TensorType((c.s[0], c.o, c.s[2] + 2 * c.pad - c.k + 1, c.s[3] + 2 * c.pad - c.k + 1), c.T)]


def _conv_expr(a: list[str], k: dict, bias: str) -> str:
    return f"F.conv2d({a[0]}, {a[1]}, {bias}, padding={k['pad']})"


def _conv_count(c) -> float:
    t = c.types[0] if isinstance(c, iv.Call) else c.x
    k = c.attrs["k"] if isinstance(c, iv.Call) else c.k
    return float(t.shape[1] * k * k)


def _conv_bn_emit(a: list[str], k: dict) -> str:
    conv = _conv_expr(a, k, a[2] if a[2] else "None")
    bn = (f"F.batch_norm({conv}, {a[3]}.detach(), {a[4]}.detach(), {a[5]}, {a[6]}, training=False, "
          f"eps={k['eps']})")
    return _act(k, bn)


def _conv_bn_iv(c: iv.Call) -> list[iv.Iv]:
    conv = _conv_count(c) * _amax(c, 0) * _amax(c, 1) + _amax(c, 2) + _amax(c, 3)
    return _bound(conv * _amax(c, 5) / math.sqrt(0.5) * 1.01 + _amax(c, 6) + 1.0, c)


def _conv_domain(positive: int) -> Callable:
    """A convolution's operands within the dtype's budget, and operand ``positive`` in [0.5, 2] (a running
    variance, or a constant that divides: away from 0)."""
    budget = _budget(_conv_count)

    def d(slot, n, numel, c, ivs):
        if n.kind != "f":
            return None
        return iv.Domain(0.5, 2.0) if slot == positive else budget(slot, n, numel, c, ivs)
    return d


CONV_BN = _spec(
    "conv_bn", [In("x", T="T", rank=(4, 4)),
                In("w", T="T", shape=lambda c: (c.o, c.s[1], c.k, c.k), weight=True),
                In("cb", T="T", shape=lambda c: (c.o,), optional=True, weight=True),
                In("mean", T="T", shape=lambda c: (c.o,), weight=True),
                In("var", T="T", shape=lambda c: (c.o,), weight=True, hint={"min": 0.5, "max": 2.0}),
                In("gamma", T="T", shape=lambda c: (c.o,), weight=True),
                In("beta", T="T", shape=lambda c: (c.o,), weight=True)],
    _conv_out, _conv_bn_emit, _conv_bn_iv,
    attrs={**_conv_attrs(), "eps": Choice((1e-5, 1e-3)), "act": Choice(("none", "relu", "relu", "silu", "hardtanh"))},
    types={"T": ("float32",)}, vdomain=_conv_domain(4))  # 4: the running variance


# ---------------------------------------------------------------------------------------------
# int8 inference as PyTorch 2 export quantization leaves a model (pt2e, X86InductorQuantizer, convert_pt2e)
# ---------------------------------------------------------------------------------------------
# an activation quantized to uint8 per tensor and back; an int8 weight with its per-output-channel scales and
# zero points (constants, as convert_pt2e folds them), dequantized where it is read: under freezing, Inductor
# prepacks the weight and fuses each dequantize -> linear/conv -> add/activation -> quantize into one oneDNN
# qlinear / qconv (fx_passes/quantization.py, mkldnn_lowerings.py); without it, the quantize/dequantize lowerings
QDQ_HELPERS = '''import torch.ao.quantization.fx._decomposed  # registers torch.ops.quantized_decomposed


def _qdq(t, scale, zero_point):
    qd = torch.ops.quantized_decomposed
    q = qd.quantize_per_tensor.default(t, scale, zero_point, 0, 255, torch.uint8)
    return qd.dequantize_per_tensor.default(q, scale, zero_point, 0, 255, torch.uint8)


def _dq_weight(q, scale, zero_point):
    return torch.ops.quantized_decomposed.dequantize_per_channel.default(q, scale, zero_point, 0, -128, 127,
                                                                         torch.int8)'''
Q_ACTS = ("none", "relu", "relu", "gelu", "silu", "hardtanh")


def _quantized_emit(contraction: Callable[[str, str, str, dict], str]) -> Callable[[list[str], dict], str]:
    """dequantize -> linear/conv (+ a quantized other operand) -> activation (-> quantize), pt2e's form.  int8
    inference has no backward (eager's quantize has no derivative, its per-channel dequantize of the weight only
    a deprecated fallback's for the scales): the operands are read detached, so that a backward program
    differentiates around the call."""
    def emit(a: list[str], k: dict) -> str:
        x = f"_qdq({a[0]}.detach(), {k['scale']}, {k['zp']})"
        bias = f"{a[4]}.detach()" if len(a) > 4 and a[4] else "None"
        out = contraction(x, f"_dq_weight({a[1]}, {a[2]}.detach(), {a[3]})", bias, k)
        if len(a) > 5 and a[5]:
            out = f"({out} + _qdq({a[5]}.detach(), {k['scale']}, {k['zp']}))"
        out = _act(k, out)
        return f"_qdq({out}, 0.1, 128)" if k["requant"] else out
    return emit


def _q_weight(c) -> np.ndarray:
    return c.np.integers(-128, 128, size=c.wshape).astype(np.int8)


def _q_scales(c) -> np.ndarray:
    return (c.np.integers(1, 11, size=(c.o,)) * 0.002).astype(np.float32)


def _q_inputs(out_shape: Callable) -> list:
    """The int8 weight (of the ``wshape`` attribute), its scales and zero points, a bias, an other operand."""
    return [Const("wq", _q_weight), Const("ws", _q_scales),
            Const("wz", lambda c: np.zeros((c.o,), dtype=np.int64)),
            In("b", T="T", shape=lambda c: (c.o,), optional=True, weight=True),
            In("other", T="T", shape=out_shape, optional=True)]


def _q_iv(count: Callable[[iv.Call], float]) -> Callable[[iv.Call], list[iv.Iv]]:
    """|x| <= 7.75 once quantized (uint8 at scale 0.05, zero point 100), |w| <= 128 * 0.02."""
    def t(c: iv.Call) -> list[iv.Iv]:
        return _bound(float(count(c)) * 7.75 * 2.56 + _amax(c, 4) + 8.0, c)
    return t


def _q_attrs() -> dict:
    return {"scale": Choice((0.02, 0.05)), "zp": Choice((128, 100)), "act": Choice(Q_ACTS), "requant": BOOL}


QLINEAR = _spec(
    "qlinear", [In("x", T="T", rank=(2, 3)),
                *_q_inputs(lambda c: (*c.s[:-1], c.o))],
    lambda c: [TensorType((*c.s[:-1], c.o), c.T)],
    _quantized_emit(lambda x, w, b, k: f"F.linear({x}, {w}, {b})"),
    _q_iv(lambda c: c.types[0].shape[-1]),
    attrs={"o": Int(1, 6), "wshape": lambda c: Choice(((c.o, c.s[-1]),)), **_q_attrs()},
    types={"T": ("float32",)}, imports=(QDQ_HELPERS,), vdomain=small_domain(4.0), grad=False)
QCONV = _spec(
    "qconv", [In("x", T="T", rank=(4, 4)), *_q_inputs(lambda c: tuple(_conv_out(c)[0].shape))],
    _conv_out, _quantized_emit(lambda x, w, b, k: f"F.conv2d({x}, {w}, {b}, padding={k['pad']})"),
    _q_iv(_conv_count),
    attrs={**_conv_attrs(), "wshape": lambda c: Choice(((c.o, c.s[1], c.k, c.k),)), **_q_attrs()},
    types={"T": ("float32",)}, imports=(QDQ_HELPERS,), vdomain=small_domain(4.0), grad=False)


_BINOPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _conv_binary_emit(a: list[str], k: dict) -> str:
    conv = _conv_expr(a, k, a[2] if a[2] else "None")
    out = f"{conv} {_BINOPS[k['op']]} {a[3]}"
    if len(a) > 4 and a[4]:
        out = f"({out}) + {a[4]}"
    return _act(k, f"({out})")


def _conv_binary_iv(c: iv.Call) -> list[iv.Iv]:
    conv = _conv_count(c) * _amax(c, 0) * _amax(c, 1) + _amax(c, 2)
    m = conv * 2.0 if c.attrs["op"] == "div" else conv * _amax(c, 3) if c.attrs["op"] == "mul" else conv + _amax(c, 3)
    return _bound(m + _amax(c, 4) + 1.0, c)


CONV_BINARY = _spec(
    "conv_binary", [In("x", T="T", rank=(4, 4)),
                    In("w", T="T", shape=lambda c: (c.o, c.s[1], c.k, c.k), weight=True),
                    In("cb", T="T", shape=lambda c: (c.o,), optional=True, weight=True),
                    In("c", T="T", shape=lambda c: (c.o, 1, 1) if c.per_channel else (1,), weight=True,
                       hint={"min": 0.5, "max": 2.0}),
                    In("d", T="T", shape=lambda c: (c.o, 1, 1), optional=True, weight=True)],
    _conv_out, _conv_binary_emit, _conv_binary_iv,
    attrs={**_conv_attrs(), "op": Choice(tuple(_BINOPS)), "per_channel": Choice((1, 1, 0)),
           "act": Choice(("none", "none", "relu"))},
    types={"T": ("float32",)}, vdomain=_conv_domain(3))  # 3: the constant


def _numpy_out(c) -> list[TensorType]:
    return _partial_out(c)


def _numpy_iv(c: iv.Call) -> iv.Iv:
    if c.attrs["fn"] != "sum":
        return iv.hull(c.x, (0.0, 0.0))
    n = c.types[0].shape[c.attrs["dim"]]  # type: ignore[union-attr]
    return iv.hull((c.x[0] * n, c.x[1] * n), (0.0, 0.0))


NUMPY_AXIS = _spec(
    "numpy_axis", [In("x", T="T", rank=(1, 4))], _numpy_out,
    lambda a, k: f"torch.{k['fn']}({a[0]}, axis={k['dim']}, keepdims={bool(k['keepdim'])})",
    lambda c: [iv.widen(_numpy_iv(c), c.n, 64.0, absolute=4.0)],
    attrs={"dim": lambda c: Int(-c.r, c.r - 1), "keepdim": BOOL, "fn": Choice(("sum", "mean", "amax", "amin"))},
    vdomain=small_domain(64.0))


# ---------------------------------------------------------------------------------------------
# split / cat
# ---------------------------------------------------------------------------------------------
def _parts(c) -> Draw:
    """A split of ``c.s[c.dim]`` into 2-3 parts of at least 1."""
    def fn(rng):
        n = c.s[c.dim]
        k = rng.randint(2, min(3, n))
        cuts = sorted(rng.sample(range(1, n), k - 1))
        return [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    return Draw(fn)


def _split_cat_emit(a: list[str], k: dict) -> str:
    split = f"torch.split({a[0]}, {k['sizes']}, {k['dim']})"
    if not k["reorder"]:
        return f"torch.cat({split}, {k['dim']})"
    order = ", ".join(f"p[{i}]" for i in reversed(range(len(k["sizes"]))))
    return f"(lambda p: torch.cat([{order}], {k['dim']}))({split})"


SPLIT_CAT = _spec(
    "split_cat", [In("x", T="T", rank=(1, 4))], same_type, _split_cat_emit, same_iv,
    attrs={"dim": lambda c: Choice(_dims_over(c)), "sizes": _parts, "reorder": Choice((0, 0, 0, 1))},
    types={"T": (*FLOATS, *INTS)}, vdomain=small_domain(1e4))


def _with(shape: tuple[int, ...], dim: int, n: int) -> tuple[int, ...]:
    return tuple(n if i == dim else d for i, d in enumerate(shape))


def _cat_split_sizes(c) -> Draw:
    def fn(rng):
        total = c.s[c.dim] + c.m
        if rng.random() < 0.75:
            return [c.s[c.dim], c.m]
        cut = rng.randint(1, total - 1)
        return [cut, total - cut]
    return Draw(fn)


CAT_SPLIT = _spec(
    "cat_split", [In("a", T="T", rank=(1, 4)), In("b", T="T", shape=lambda c: _with(c.s, c.dim, c.m))],
    lambda c: [TensorType(_with(c.s, c.dim, n), c.T) for n in c.sizes],
    lambda a, k: f"torch.split(torch.cat([{a[0]}, {a[1]}], {k['dim']}), {k['sizes']}, {k['dim']})",
    lambda c: [iv.hull(c.ivs[0], c.ivs[1]) for _ in c.outs],
    attrs={"dim": lambda c: Int(0, c.r - 1), "m": Int(1, 3), "sizes": _cat_split_sizes},
    types={"T": (*FLOATS, *INTS)}, vdomain=small_domain(1e4))


def _cat_slice_cat_emit(a: list[str], k: dict) -> str:
    return (f"(lambda t: torch.cat([t, t.narrow(1, 0, {k['size']})], 1))"
            f"(torch.cat([{a[0]}, {a[1]}], 1))")


CAT_SLICE_CAT = _spec(
    "cat_slice_cat", [In("a", T="T", rank=(2, 4)), In("b", T="T", shape=lambda c: _with(c.s, 1, c.m))],
    lambda c: [TensorType(_with(c.s, 1, c.s[1] + c.m + c.size), c.T)], _cat_slice_cat_emit,
    lambda c: [iv.hull(c.ivs[0], c.ivs[1])],
    attrs={"m": Int(1, 3), "size": lambda c: Int(1, c.s[1] + c.m)},
    types={"T": (*FLOATS, *INTS)}, vdomain=small_domain(1e4))


UNBIND_STACK = _spec(
    "unbind_stack", [In("x", T="T", rank=(1, 4))], same_type,
    lambda a, k: f"torch.stack(torch.unbind({a[0]}, {k['dim']}), {k['dim']})", same_iv,
    attrs={"dim": lambda c: Choice(_dims_over(c, 1))}, types={"T": (*FLOATS, *INTS)}, vdomain=small_domain(1e4))


# ---------------------------------------------------------------------------------------------
# Pointless view / permute / dtype-conversion pairs
# ---------------------------------------------------------------------------------------------
def _factorization(c) -> Draw:
    def fn(rng):
        n = math.prod(c.s)
        dims = []
        while n > 1 and len(dims) < 3:
            ds = [d for d in range(2, n + 1) if n % d == 0]
            d = rng.choice(ds)
            dims.append(d)
            n //= d
        if n > 1:
            dims[-1] *= n
        return dims or [1]
    return Draw(fn)


def _view_pair_emit(a: list[str], k: dict) -> str:
    x, kind = a[0], k["kind"]
    if kind == "same":
        return f"{x}.contiguous().view({x}.shape)"
    if kind == "flat":
        return f"{x}.contiguous().view(-1).view({x}.shape)"
    if kind == "reshape":
        return f"{x}.reshape({k['mid']}).reshape({x}.shape)"
    return f"{x}.contiguous().view({k['mid']}).view({x}.shape)"


VIEW_PAIR = _spec(
    "view_pair", [In("x", T="T", rank=(1, 4))], same_type, _view_pair_emit, same_iv,
    attrs={"kind": Choice(("same", "flat", "mid", "mid", "reshape")), "mid": _factorization},
    types={"T": (*FLOATS, *INTS, "bool")}, vdomain=small_domain(1e4), view=True)


def _perm(c) -> Draw:
    def fn(rng):
        p = list(range(c.r))
        while p == list(range(c.r)):
            rng.shuffle(p)
        return p
    return Draw(fn)


def _permute_pair_emit(a: list[str], k: dict) -> str:
    p = k["perm"]
    inv = sorted(range(len(p)), key=p.__getitem__)
    if k["kind"] == "transpose":
        return f"{a[0]}.transpose({p[0]}, {p[1]}).transpose({p[0]}, {p[1]})"
    return f"{a[0]}.permute({p}).permute({inv})"


PERMUTE_PAIR = _spec(
    "permute_pair", [In("x", T="T", rank=(2, 5))], same_type, _permute_pair_emit, same_iv,
    attrs={"perm": _perm, "kind": Choice(("permute", "permute", "transpose"))},
    types={"T": (*FLOATS, *INTS, "bool")}, vdomain=small_domain(1e4), view=True)


def _mid_dtypes(c) -> Choice:
    # wider first (AMP's upcast, the pass drops it), or narrower (kept: it rounds)
    if c.T == "float32":
        return Choice(("float64", "float64", "float16", "bfloat16"))
    return Choice(("float32", "float32", "float64"))


CONVERT_PAIR = _spec(
    "convert_pair", [In("x", T="T", rank=(0, 4))], same_type,
    lambda a, k: f"{a[0]}.to(torch.{k['mid']}).to({a[0]}.dtype)",
    lambda c: [iv.widen(c.x, c.n, 1024.0, absolute=4.0)], attrs={"mid": _mid_dtypes}, vdomain=small_domain(1e3))


# ---------------------------------------------------------------------------------------------
# softmax of a scaled input; attention written out
# ---------------------------------------------------------------------------------------------
def _scaled_softmax_emit(a: list[str], k: dict) -> str:
    s = a[1] if len(a) > 1 and a[1] else repr(k["scale"])
    scaled = {"mul": f"{a[0]} * {s}", "rmul": f"{s} * {a[0]}", "div": f"{a[0]} / {s}"}[k["op"]]
    return f"torch.{k['fn']}({scaled}, dim={k['dim']})"


def _scaled_softmax_iv(c: iv.Call) -> list[iv.Iv]:
    if c.attrs["fn"] == "softmax":
        return [(0.0, 1.0)]
    s = _amax(c, 1) if len(c.ivs) > 1 and c.ivs[1] is not None else abs(c.attrs["scale"])
    s = max(s, 4.0) if c.attrs["op"] == "div" else s
    return [(-(2.0 * iv.amax(c.x) * s + math.log(max(2, c.types[0].numel)) + 8.0), 0.0)]


def _keep_dim_shape(c) -> tuple[int, ...]:
    return tuple(1 if i == c.dim % c.r else d for i, d in enumerate(c.s))


def _scale_domain(slot, n, numel, c, ivs):
    if n.kind != "f":
        return None
    return iv.Domain(0.25, 2.0) if slot == 1 else iv.mag(16.0)


SCALED_SOFTMAX = _spec(
    "scaled_softmax", [In("x", T="T", rank=(1, 4)),
                       In("scale", T="T", shape=_keep_dim_shape, optional=True, hint={"min": 0.25, "max": 2.0})],
    same_type, _scaled_softmax_emit, _scaled_softmax_iv,
    attrs={"dim": lambda c: Int(-c.r, c.r - 1), "op": Choice(("mul", "rmul", "div", "div")),
           "scale": Choice((0.125, 0.5, 1.7, -0.8)), "fn": Choice(("softmax", "softmax", "log_softmax")),
           "_has_scale": Choice((0, 0, 1))},
    vdomain=_scale_domain)


def _attention_emit(a: list[str], k: dict) -> str:
    q, key, v = a[0], a[1], a[2]
    mask = a[3] if len(a) > 3 and a[3] else None
    drop = (lambda w: f"F.dropout({w}, p={k['dropout']}, training=False)") if k["dropout"] else (lambda w: w)
    if k["heads"] == "bmm":  # 3-d, unscaled (a mask, where drawn, added)
        scores = f"torch.bmm({q}, {key}.transpose(1, 2))" + (f" + {mask}" if mask else "")
        return f"torch.bmm({drop(f'({scores}).softmax(dim=-1)')}, {v})"
    if k["heads"] == "last":  # (batch, length, heads, dim), as projections give them: permuted to heads first
        q, key, v = (f"{t}.permute(0, 2, 1, 3)" for t in (q, key, v))
    s, op = k["scale"], k["op"]
    if mask is None:
        return f"{drop(f'torch.matmul({q}, {key}.transpose(-2, -1)).{op}({s}).softmax(dim=-1)')}.matmul({v})"
    sym = "/" if k["op"] == "div" else "*"
    return f"{drop(f'torch.softmax({q} @ {key}.transpose(-2, -1) {sym} {s} + {mask}, dim=-1)')} @ {v}"


def _attention_kv(c, last: int) -> tuple[int, ...]:
    if c.heads == "last":
        return (c.s[0], c.S, c.s[2], last)
    return (*c.s[:-2], c.S, last)


def _attention_out(c) -> list[TensorType]:
    if c.heads == "last":
        return [TensorType((c.s[0], c.s[2], c.s[1], c.Ev), c.T)]
    return [TensorType((*c.s[:-1], c.Ev), c.T)]


ATTENTION = _spec(
    "attention", [In("q", T="T", rank=(3, 4)), In("k", T="T", shape=lambda c: _attention_kv(c, c.s[-1])),
                  In("v", T="T", shape=lambda c: _attention_kv(c, c.Ev)),
                  In("mask", T="T", shape=lambda c: (c.s[1] if c.heads == "last" else c.s[-2], c.S), optional=True)],
    _attention_out, _attention_emit,
    lambda c: [iv.widen(iv.hull(c.ivs[2], (0.0, 0.0)), c.n, 64.0, absolute=4.0)],
    attrs={"heads": lambda c: Choice(("first", "first", "last")) if c.r == 4 else Choice(("bmm",)),
           "_has_mask": lambda c: Choice((0, 0, 1) if c.heads == "bmm" else (0, 1)),
           # a masked score is divided by the scale in the fused patterns (multiplied: left as written)
           "S": Int(1, 5), "Ev": Int(1, 5),
           "op": lambda c: Choice(("div", "div", "mul") if c._has_mask else ("div", "mul")),
           "scale": lambda c: Choice((math.sqrt(c.s[-1]), 2.0)) if c.op == "div" else
           Choice((round(1 / math.sqrt(c.s[-1]), 4), 0.5)),
           "dropout": Choice((0, 0, 0.1))},
    vdomain=small_domain(4.0))


# ---------------------------------------------------------------------------------------------
# Constant tensors that Inductor rewrites: full -> cumsum, zeros -> scatter, partial reductions, no-ops
# ---------------------------------------------------------------------------------------------
def _full_cumsum_emit(a: list[str], k: dict) -> str:
    x, d, v = a[0], k["dim"], k["fill"]
    pos = (f"torch.ones_like({x}).cumsum({d})" if k["kind"] == "ones_like" else
           f"torch.full({x}.shape, {v}, dtype={x}.dtype, device={x}.device).cumsum({d})")
    return f"{x} + {pos}"


def _full_cumsum_iv(c: iv.Call) -> list[iv.Iv]:
    top = max(1.0, abs(c.attrs["fill"])) * c.types[0].shape[c.attrs["dim"]]
    lo, hi = c.x
    return [iv.widen((lo + min(0.0, -top), hi + top), c.n, 16.0, absolute=4.0)]


FULL_CUMSUM = _spec(
    "full_cumsum", [In("x", T="T", rank=(1, 4))], same_type, _full_cumsum_emit, _full_cumsum_iv,
    attrs={"dim": lambda c: Int(0, c.r - 1), "kind": Choice(("full", "full", "ones_like")),
           "fill": Choice((1.0, 0.5, 2.0))}, vdomain=small_domain(64.0))


def _onehot_index(c) -> np.ndarray:
    return np.array(c.np.integers(0, c.s[c.dim], size=_keep_dim_shape(c)), dtype=np.int64)


def _onehot_emit(a: list[str], k: dict) -> str:
    x = a[0]
    base = (f"torch.zeros({x}.shape, dtype={x}.dtype, device={x}.device)" if k["bg"] == 0.0 else
            f"torch.full({x}.shape, {k['bg']}, dtype={x}.dtype, device={x}.device)")
    return f"{x} * {base}.scatter({k['dim']}, {a[1]}, {k['value']})"


ONEHOT_SCATTER = _spec(
    "onehot_scatter", [In("x", T="T", rank=(1, 4)), Const("index", _onehot_index)], same_type, _onehot_emit,
    lambda c: [iv.widen(iv.hull(iv.mul(c.x, (-2.0, 2.0)), (0.0, 0.0)), c.n, 8.0, absolute=2.0)],
    attrs={"dim": lambda c: Int(0, c.r - 1), "value": Choice((1.0, 2.0, -0.5)), "bg": Choice((0.0, 0.0, 1.0))},
    vdomain=small_domain(1e3), grad=True)


def _partial_out(c) -> list[TensorType]:
    shape = _keep_dim_shape(c) if c.keepdim else tuple(d for i, d in enumerate(c.s) if i != c.dim % c.r)
    return [TensorType(shape, c.T)]


PARTIAL_REDUCE = _spec(
    "partial_reduce", [In("x", T="T", rank=(1, 4))], _partial_out,
    lambda a, k: f"{a[0]}.{k['fn']}({k['dim']}, keepdim={bool(k['keepdim'])}) - {a[0]}.{k['fn']}()",
    lambda c: [iv.widen((-2 * iv.amax(c.x), 2 * iv.amax(c.x)), c.n, 8.0, absolute=2.0)],
    attrs={"dim": lambda c: Int(-c.r, c.r - 1), "keepdim": BOOL, "fn": Choice(("amax", "amin"))},
    vdomain=small_domain(1e3))


_NOOPS_FLOAT = ("add0", "sub0", "mul1", "div1", "pow1", "cat1", "repeat1", "pad0", "ones_like_mul")
_NOOPS_INT = ("add0", "sub0", "mul1", "pow1", "cat1", "repeat1", "ones_like_mul", "floor")


def _noop_emit(a: list[str], k: dict) -> str:
    x = a[0]
    return {"add0": f"{x} + 0", "sub0": f"{x} - 0", "mul1": f"{x} * 1", "div1": f"{x} / 1", "pow1": f"{x} ** 1",
            "cat1": f"torch.cat([{x}], {k['dim']})", "repeat1": f"{x}.repeat({[1] * k['rank']})",
            "pad0": f"F.pad({x}, [0, 0])", "ones_like_mul": f"{x} * torch.ones_like({x})",
            "floor": f"torch.floor({x})"}[k["kind"]]


NOOP = _spec(
    "noop", [In("x", T="T", rank=(1, 4))], same_type, _noop_emit, same_iv,
    attrs={"kind": lambda c: Choice(_NOOPS_INT if c.T in INTS else _NOOPS_FLOAT),
           "dim": lambda c: Int(0, c.r - 1), "rank": lambda c: Choice((c.r,))},
    types={"T": (*FLOATS, *INTS)}, vdomain=small_domain(1e4))


# ---------------------------------------------------------------------------------------------
# Norms and activations written out
# ---------------------------------------------------------------------------------------------
def _rms_emit(a: list[str], k: dict) -> str:
    x, eps = a[0], k["eps"]
    w = f" * {a[1]}" if len(a) > 1 and a[1] else ""
    if k["upcast"]:
        h = f"(lambda h: h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + {eps}))({x}.float())"
        return f"{h}.to({x}.dtype){w}"
    return f"{x} * torch.rsqrt({x}.pow(2).mean(-1, keepdim=True) + {eps}){w}"


def _norm_iv(c: iv.Call) -> list[iv.Iv]:
    n = math.sqrt(max(1, c.types[0].shape[-1] if c.types[0].shape else 1))
    return _bound(n * 1.01 * _amax(c, 1) + (_amax(c, 2) if len(c.ivs) > 2 else 0.0) + 1.0, c)


RMS_NORM = _spec(
    "rms_norm", [In("x", T="T", rank=(1, 4)), In("w", T="T", shape=lambda c: (c.s[-1],), optional=True, weight=True)],
    same_type, _rms_emit, _norm_iv, attrs={"eps": Choice((1e-6, 1e-5)), "upcast": BOOL}, vdomain=small_domain(16.0))


def _ln_emit(a: list[str], k: dict) -> str:
    x, eps = a[0], k["eps"]
    body = (f"(lambda h: (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, keepdim=True, unbiased=False) + "
            f"{eps}))({x})")
    if len(a) > 1 and a[1]:
        body = f"{body} * {a[1]}"
    if len(a) > 2 and a[2]:
        body = f"{body} + {a[2]}"
    return body


LAYER_NORM = _spec(
    "layer_norm", [In("x", T="T", rank=(1, 4)), In("w", T="T", shape=lambda c: (c.s[-1],), optional=True, weight=True),
                   In("b", T="T", shape=lambda c: (c.s[-1],), optional=True, weight=True)],
    same_type, _ln_emit, _norm_iv, attrs={"eps": Choice((1e-5, 1e-12))}, types={"T": ("float32",)},
    vdomain=small_domain(16.0))


def _gelu_emit(a: list[str], k: dict) -> str:
    x = a[0]
    return {"tanh": f"0.5 * {x} * (1.0 + torch.tanh(0.7978845608028654 * ({x} + 0.044715 * torch.pow({x}, 3.0))))",
            "erf": f"{x} * 0.5 * (1.0 + torch.erf({x} / 1.4142135623730951))",
            "quick": f"{x} * torch.sigmoid(1.702 * {x})",
            "silu": f"{x} * torch.sigmoid({x})"}[k["kind"]]


GELU = _spec(
    "gelu", [In("x", T="T", rank=(0, 4))], same_type, _gelu_emit,
    lambda c: [iv.widen(iv.hull(c.x, (-0.5, 0.0)), c.n, 64.0, absolute=4.0)],
    attrs={"kind": Choice(("tanh", "erf", "quick", "silu"))}, vdomain=small_domain(16.0))


SPECS = [MM_BIAS, LINEAR_ACT, BATCHED_DOT, CONV_BN, CONV_BINARY, NUMPY_AXIS, SPLIT_CAT, CAT_SPLIT, CAT_SLICE_CAT,
         UNBIND_STACK, VIEW_PAIR, PERMUTE_PAIR, CONVERT_PAIR, SCALED_SOFTMAX, ATTENTION, FULL_CUMSUM, ONEHOT_SCATTER,
         PARTIAL_REDUCE, NOOP, RMS_NORM, LAYER_NORM, GELU, QLINEAR, QCONV]

# the pass each idiom aims at: counters["inductor"] keys or pattern-matcher pattern names (as
# benchmarks/inductor_reach.py names them), under the default config unless the entry says freezing
TARGETS: dict[str, tuple[str, ...]] = {
    "torch.idiom_mm_bias": ("post_grad.addmm",),
    "torch.idiom_split_cat": ("post_grad.splitwithsizes_cat_replace",),
    "torch.idiom_cat_split": ("post_grad.cat_splitwithsizes_replace",),
    "torch.idiom_cat_slice_cat": ("post_grad.cat_slice_cat",),
    "torch.idiom_view_pair": ("joint_graph.pointless_view", "joint_graph.pointless_view_pair",
                              "removed_pointless_view_pair"),
    "torch.idiom_permute_pair": ("joint_graph.pointless_permute_pair",),
    "torch.idiom_convert_pair": ("joint_graph.pointless_convert",),
    "torch.idiom_scaled_softmax": ("joint_graph.mul_softmax_pattern", "joint_graph.div_softmax_pattern"),
    "torch.idiom_attention": ("fuse_attention",),
    "torch.idiom_full_cumsum": ("post_grad.pointless_cumsum_replacement",),
    "torch.idiom_onehot_scatter": ("joint_graph.scatter_upon_const_tensor",),
    "torch.idiom_partial_reduce": ("post_grad.register_partial_reduction_pattern.<locals>.reuse_partial",),
    "torch.idiom_linear_act": ("freezing: mkldnn_linear_weight_pack_matcher_count",),
    "torch.idiom_conv_bn": ("freezing: mkldnn_conv_weight_pack_matcher_count",),
    "torch.idiom_conv_binary": ("freezing: binary_folding",),
    "torch.idiom_numpy_axis": ("numpy_compat_normalization",),
    "torch.idiom_batched_dot": ("decompose_bmm",),
    "torch.idiom_qlinear": ("freezing: qlinear_weight_prepack_matcher_count",),
    "torch.idiom_qconv": ("freezing: qconv_weight_prepack_matcher_count",),
}

# what takes an empty first input (a dim of 0) as eager does: the shape-preserving ones of plain arithmetic
EMPTY_OK = frozenset(f"torch.idiom_{n}" for n in ("convert_pair", "gelu", "permute_pair"))
for _s in SPECS:
    _s.empty = _s.op in EMPTY_OK
