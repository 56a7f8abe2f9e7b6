"""Microsoft's contrib operators (domain com.microsoft) that ONNX Runtime 1.31 runs on its CPU provider:
FastGelu, BiasGelu, SkipLayerNormalization, EmbedLayerNormalization, MatMulInteger16 and Attention
(registered as ``com.microsoft.Attention``: ONNX's Attention of opset 23 is another operator).

Inputs, attributes and outputs follow ONNX Runtime's schemas (``ContribOperators.md``;
``onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema()``).  ONNX's own tools have no
schema for them, so every type variable is named and its types listed here: the schema's allowed types,
which a generator for ONNX Runtime narrows to the CPU kernels' (``backends.ort.domain_profile``: float32
only, int16 for MatMulInteger16).  The shape rules are those of ORT's CPU kernels, measured: a call
outside them fails at run time.  Contrib operators are version 1 of their domain at every opset of the
default domain (``since`` stays 1); the exporter imports com.microsoft version 1 where a model uses one.

The normalizations always get an ``epsilon`` of at least 0.001: their default, 1e-12, lies far below
float32's rounding of the mean, so a row of (nearly) equal values normalizes its rounding residue into
an arbitrary value (ORT's EmbedLayerNormalization of a constant row of 1.3 gives 0.118 where 0 is
due), and SkipLayerNormalization's one-pass variance (E[x^2] - E[x]^2, ORT's CPU kernel) may go below
-epsilon, a NaN (``solve/intervals.py`` assumes a variance error below epsilon / 2).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.dsl import BOOL, AnyOf, Choice, Const, Dims, Exact, Float, In, Int, Maybe, OpSpec
from dlcfuzz.spec.nn import _bidi, _k_of_b, _matmul_b, _mm_out

MS = "com.microsoft"
EPS = Float(0.001, 0.1)  # always given: see the module doc
FLOATS = ("float32", "float64", "float16")  # the Gelu family's T (bfloat16 is outside dlcfuzz's dtypes)


def same(c) -> list[TensorType]:
    return [c.x]


def last_dim(c) -> tuple[int, ...]:
    return (c.s[-1],)


def _ints(c, hi: int, shape: tuple[int, ...]) -> np.ndarray:
    """int32 indices in [0, hi) (an embedding's row, a segment, a position)."""
    return c.np.integers(0, hi, size=shape).astype(np.int32)


def _ids(c, name: str, hi: int, shape: tuple[int, ...]) -> np.ndarray:
    """``_ints``, recorded on the context as solver variable ``name`` for the checks."""
    c.set(name, _ints(c, hi, shape))
    return getattr(c, name)


def _below(name: str, table: int) -> Callable:
    """A check: the ids recorded as ``name`` (if drawn) index rows of input ``table``."""
    def check(c) -> bool:
        ids = c.attrs.get(name)
        return ids is None or (int(ids.min(initial=0)) >= 0 and int(ids.max(initial=0)) < c.ins[table].shape[0])
    return check


def shaped(k: int, shape: Callable) -> Callable:
    """A check: input k is absent or has ``shape(c)``."""
    return lambda c: c.ins[k] is None or c.ins[k].shape == shape(c)


# ---------------------------------------------------------------------------------------------
# FastGelu (the tanh approximation) and BiasGelu (the exact Gelu of A + B): ORT wants a 1-D bias
# as long as X's last dimension, and X of rank >= 1
# ---------------------------------------------------------------------------------------------
FAST_GELU = OpSpec(
    "FastGelu", "contrib",
    [In("X", T="T", rank=(1, 99)), In("bias", T="T", shape=last_dim, optional=True, weight=True)],
    same, types={"T": FLOATS}, domain=MS,
    checks={"X rank >= 1": lambda c: c.r >= 1, "bias has shape [X's last dim]": shaped(1, last_dim)},
)

BIAS_GELU = OpSpec(
    "BiasGelu", "contrib",
    [In("A", T="T", rank=(1, 99)), In("B", T="T", shape=last_dim, weight=True)],
    same, types={"T": FLOATS}, domain=MS,
    checks={"A rank >= 1": lambda c: c.r >= 1, "B has shape [A's last dim]": shaped(1, last_dim)},
)


# ---------------------------------------------------------------------------------------------
# SkipLayerNormalization: LayerNormalization over the last axis of input + skip (+ bias); input is
# (S, H) or (B, S, H), skip has input's shape or, for a 3-D input, (1, S, H) or (S, H); gamma, beta,
# bias are (H,).  Outputs: output, mean, inv_std_var (float, shape (..., 1)), input_skip_bias_sum,
# as a prefix (the DSL cannot skip a middle output)
# ---------------------------------------------------------------------------------------------
def _skip_shapes(c) -> AnyOf:
    forms = [Exact(c.s)]
    if c.r == 3:
        forms += [Exact((1, *c.s[1:])), Exact(c.s[1:])]
    return AnyOf(tuple(forms))


def _sln_out(c) -> list[TensorType]:
    stats = TensorType((*c.s[:-1], 1), "float32")  # U: float only
    return [c.x, stats, stats, c.x][:c._nout]


SKIP_LAYER_NORM = OpSpec(
    "SkipLayerNormalization", "contrib",
    [In("input", T="T", rank=(2, 3)), In("skip", T="T", shape=_skip_shapes),
     In("gamma", T="T", shape=last_dim, weight=True),
     In("beta", T="T", shape=last_dim, weight=True, optional=True),
     In("bias", T="T", shape=last_dim, weight=True, optional=True)],
    _sln_out,
    attrs={"epsilon": EPS, "_nout": Choice((1, 2, 3, 4))},
    types={"T": ("float32", "float16")},  # the schema's (and bfloat16); ORT's CPU kernels: float32 and float16
    domain=MS,
    checks={"input rank 2 or 3": lambda c: c.r in (2, 3),
            "skip has input's shape, or (1, S, H) or (S, H) for a 3-D input":
                lambda c: _skip_shapes(c).accepts(c.ins[1].shape),
            "gamma, beta, bias have shape [H]": lambda c: all(shaped(k, last_dim)(c) for k in (2, 3, 4))},
)


# ---------------------------------------------------------------------------------------------
# EmbedLayerNormalization: word + position (+ segment) embeddings of int32 ids, then LayerNormalization
# over the hidden size H.  ORT fails at run time on an id outside its table ("input index out of
# range"), so the ids are constants drawn within the tables: input_ids (B, S) in [0, vocabulary), the
# optional segment_ids (with segment_embedding) in [0, segments), position_ids (B, S) or (1, S)
# in [0, positions); without position_ids, position s reads row s, so position_embedding has >= S
# rows.  mask (B, S) is 0/1 (mask_index counts its ones).  A single output (no mask_index) needs
# mask_index_type 0, or ORT's shape inference wants output 1
# ---------------------------------------------------------------------------------------------
def _eln_out(c) -> list[TensorType]:
    b, s = c.s
    y = TensorType((b, s, c._h), c.types["T"])
    return [y, TensorType((b,), "int32"), y][:c._nout]


EMBED_LAYER_NORM = OpSpec(
    "EmbedLayerNormalization", "contrib",
    [In("input_ids", T="T1", rank=(2, 2), value=lambda c: _ids(c, "_input_ids", c._vocab, c.s)),
     Const("segment_ids", lambda c: _ids(c, "_segment_ids", c._segments, c.s) if c._seg else None),
     In("word_embedding", T="T", shape=lambda c: (c._vocab, c._h), weight=True),
     In("position_embedding", T="T", shape=lambda c: (c._positions, c._h), weight=True),
     In("segment_embedding", T="T", shape=lambda c: (c._segments, c._h), weight=True, optional=True),
     In("gamma", T="T", shape=lambda c: (c._h,), weight=True),
     In("beta", T="T", shape=lambda c: (c._h,), weight=True),
     Const("mask", lambda c: _ints(c, 2, c.s) if c._mask else None),
     Const("position_ids",
           lambda c: _ids(c, "_position_ids", c._positions, (c._pb, c.s[1])) if c._pos_ids else None)],
    _eln_out,
    attrs={"_vocab": lambda c: c.dim(), "_h": lambda c: c.dim(),
           "_seg": BOOL, "_segments": lambda c: c.dim(),
           # segment_ids need segment_embedding; the table alone is left out: ORT then adds its row 0 to
           # every position, TVM nothing (the schema does not say)
           "_has_segment_embedding": lambda c: Choice((c._seg,)),
           "_pos_ids": BOOL, "_pb": lambda c: Choice((1, c.s[0])),
           "_positions": lambda c: c.dim() if c._pos_ids else Int(c.s[1], max(c.s[1], c.cfg.max_dim)),
           "_mask": BOOL, "epsilon": EPS, "_nout": Choice((1, 2, 3)),
           "mask_index_type": lambda c: Choice((0,)) if c._nout == 1 else Maybe(Choice((1,)))},
    types={"T1": ("int32",), "T": ("float32", "float16")},  # ORT's CPU kernel: float32
    domain=MS,
    checks={"input_ids index word_embedding": _below("_input_ids", 2),
            "segment_ids index segment_embedding": _below("_segment_ids", 4),
            "position_ids index position_embedding": _below("_position_ids", 3),
            "segment_ids and segment_embedding together": lambda c: (c.ins[1] is None) == (c.ins[4] is None),
            "position_embedding covers the positions": lambda c: c.ins[8] is not None or c._positions >= c.s[1],
            "gamma, beta have shape [H]": lambda c: c.ins[5].shape == c.ins[6].shape == (c._h,),
            "one output only with mask_index_type 0": lambda c: c._nout > 1 or c.mask_index_type == 0},
)


# ---------------------------------------------------------------------------------------------
# MatMulInteger16: numpy's matmul of int16 A and B into int32.  The schema also allows uint16 (T1, T2)
# and uint32 (T3) without saying which output a mixed pair gets; ORT registers int16 x int16 -> int32 only
# ---------------------------------------------------------------------------------------------
MATMUL_INTEGER16 = OpSpec(
    "MatMulInteger16", "contrib",
    [In("A", T="T1", rank=(1, 99)), In("B", T="T2", shape=_matmul_b, weight=True)],
    lambda c: [TensorType(_mm_out(c.s, c.ins[1].shape), "int32")],
    types={"T1": ("int16",), "T2": ("int16",)}, domain=MS,
    checks={"inner dimensions match": lambda c: _k_of_b(c.ins[1].shape) == c.s[-1],
            "batch dimensions broadcast": lambda c: _bidi(c.s[:-2], c.ins[1].shape[:-2])},
)


# ---------------------------------------------------------------------------------------------
# Attention (com.microsoft): multi-head self-attention of input (B, S, input_hidden) with merged Q/K/V
# weights (input_hidden, 2 H + Hv) and bias (2 H + Hv), H and Hv multiples of num_heads (qkv_hidden_sizes
# [H, H, Hv], needed where Hv != H).  Left out: do_rotary (ORT's CPU kernel has no rotary embedding),
# past_present_share_buffer with past_sequence_length (a GPU feature), the 4-D mask (CPU: "not
# supported"), and an absent bias: the schema makes it optional, but ORT 1.31's CPU kernel dies of a
# segmentation fault without it (a crash of the baseline itself).
#   mask_index: (B, total) or (B, S, total) of 0/1, or (B,) lengths, or (2 B,) ends then starts;
#   past (2, B, heads, P, H / heads) needs the present output and equal head sizes, and excludes
#   attention_bias (B or 1, heads or 1, S, total); total = P + S.
#   Outputs: output (B, S, Hv), present (2, B, heads, total, H / heads) where Hv = H.
# ---------------------------------------------------------------------------------------------
def _qkv(c) -> int:
    return c.num_heads * (2 * c._hd + c._hdv)


def _total(c) -> int:
    return c._past + c.s[1]


def _attn_mask(c) -> np.ndarray | None:
    b, s, total = c.s[0], c.s[1], _total(c)
    if c._mask == "2d":
        return _ints(c, 2, (b, total))
    if c._mask == "3d":
        return _ints(c, 2, (b, s, total))
    if c._mask == "1d":
        return _ints(c, total + 1, (b,))
    if c._mask == "2b":  # exclusive ends, then inclusive starts (left padding)
        ends = _ints(c, total + 1, (b,))
        return np.concatenate([ends, (c.np.random(b) * (ends + 1)).astype(np.int32)])
    return None


def _attn_out(c) -> list[TensorType]:
    b, s = c.s[:2]
    y = TensorType((b, s, c.num_heads * c._hdv), c.T)
    return [y, TensorType((2, b, c.num_heads, _total(c), c._hd), c.T)][:c._nout]


def _qkv_sizes(c):
    h, hv = c.num_heads * c._hd, c.num_heads * c._hdv
    return Choice(([h, h, hv],)) if hv != h else Maybe(Choice(([h, h, h],)))


ATTENTION = OpSpec(
    "Attention", "contrib",
    [In("input", T="T", rank=(3, 3)),
     In("weights", T="T", shape=lambda c: (c.s[2], _qkv(c)), weight=True),
     In("bias", T="T", shape=lambda c: (_qkv(c),), weight=True),
     Const("mask_index", _attn_mask),
     In("past", T="T", shape=lambda c: (2, c.s[0], c.num_heads, c._past, c._hd), optional=True),
     In("attention_bias", T="T", optional=True, weight=True,
        shape=lambda c: Dims([Choice((1, c.s[0])), Choice((1, c.num_heads)), c.s[1], _total(c)]))],
    _attn_out,
    # scale, unidirectional and past at a quarter each: TVM asserts that all three are absent, and
    # the common (BERT) form without them is then about a quarter of the calls
    attrs={"num_heads": Int(1, 4), "_hd": lambda c: c.dim(),
           "_has_past": Choice((0, 0, 0, 1)), "_past": lambda c: Int(0, c.cfg.max_dim) if c._has_past else Choice((0,)),
           "_hdv": lambda c: Choice((c._hd,)) if c._has_past else c.dim(),
           "qkv_hidden_sizes": _qkv_sizes,
           "_mask": Choice((None, "2d", "3d", "1d", "2b")),
           "_has_attention_bias": lambda c: Choice((0,)) if c._has_past else BOOL,
           "unidirectional": Maybe(BOOL, 0.75), "scale": Maybe(Float(0.1, 1.0), 0.75),
           "mask_filter_value": Maybe(Float(-10000.0, -1.0), 0.5),
           "_nout": lambda c: Choice((2,)) if c._has_past else Choice((1, 2) if c._hdv == c._hd else (1,))},
    types={"T": ("float32", "float16")},  # ORT's CPU kernel: float32 (mask_index, M, is int32: a constant)
    domain=MS,
    checks={"weights (input_hidden, 2 H + Hv)": lambda c: c.ins[1].shape == (c.s[2], _qkv(c)),
            "bias (2 H + Hv)": lambda c: c.ins[2].shape == (_qkv(c),),
            "qkv_hidden_sizes: Q and K alike, divisible by num_heads": lambda c: c.qkv_hidden_sizes is None or (
                c.qkv_hidden_sizes[0] == c.qkv_hidden_sizes[1]
                and all(x % c.num_heads == 0 for x in c.qkv_hidden_sizes)),
            "past with present, equal head sizes, no attention_bias": lambda c: c.ins[4] is None or (
                c._nout == 2 and c._hdv == c._hd and c.ins[5] is None),
            "present only with equal head sizes": lambda c: c._nout == 1 or c._hdv == c._hd},
)

SPECS = [FAST_GELU, BIAS_GELU, SKIP_LAYER_NORM, EMBED_LAYER_NORM, MATMUL_INTEGER16, ATTENTION]
