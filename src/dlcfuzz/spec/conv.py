"""Convolutions: Conv and ConvTranspose over 1-3 spatial dimensions (X is N x C x D1 ... Dn).

The window helpers here are shared with pool.py.  List attributes are drawn dimension by
dimension (a ``Seq``) in an order that keeps every output length >= 1: kernel and dilation
first, then pads whose sum covers what the effective kernel lacks; whatever makes the output
grow (pads, and for ConvTranspose strides/kernel/dilations/output_padding) is drawn against an
element budget, with the not-yet-drawn values counted at their minimum, so the output keeps
within ``max_numel``.  The solver variable ``_k`` holds the kernel lengths.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.dsl import Choice, In, Int, Maybe, OpSpec, Seq, divisors, ints

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
SMAX, KMAX, DMAX = 4, 5, 3  # strides, kernel lengths and dilations are drawn in 1..max


# ---------------------------------------------------------------------------------------------
# Shared window helpers
# ---------------------------------------------------------------------------------------------
def fixed(v) -> Choice:
    """The one-value domain (``None`` omits the attribute)."""
    return Choice((v,))


def nsp(c) -> int:
    """The number of spatial dimensions."""
    return c.r - 2


def at(c, name: str, j: int, default: int) -> int:
    """Element j of list attribute ``name``; its default when omitted or not drawn yet."""
    v = c.attrs.get(name)
    return default if v is None else v[j]


def mode(c) -> str:
    return c.attrs.get("auto_pad") or "NOTSET"


def is_same(c) -> bool:
    return mode(c) in ("SAME_UPPER", "SAME_LOWER")


def eff(c, j: int) -> int:
    """The effective (dilated) kernel length of dimension j."""
    return (at(c, "_k", j, 1) - 1) * at(c, "dilations", j, 1) + 1


def pad(c, j: int) -> tuple[int, int]:
    """(begin, end) pads of dimension j (zeros when omitted)."""
    p = c.attrs.get("pads")
    return (0, 0) if p is None else (p[j], p[j + nsp(c)])


def pad_flag(c) -> Choice:
    """``_pad``: whether ``pads`` is given.  Only with explicit padding, and always when some
    effective kernel is longer than its input (the pads must make a window fit)."""
    if mode(c) != "NOTSET":
        return fixed(0)
    if all(eff(c, j) <= c.s[2 + j] for j in range(nsp(c))):
        return Choice((0, 1, 1))
    return fixed(1)


def pad_seq(c, cap: list[int], out_len, budget: int) -> Seq:
    """``pads`` [b1..bn, e1..en]: each side in [0, cap[j]], b + e >= effective kernel - input
    (a window fits), and prod(out_len(c, j, b + e)) <= budget (out_len is monotone in the pad)."""
    n = nsp(c)
    need = [max(0, eff(c, j) - c.s[2 + j]) for j in range(n)]

    def item(i: int, prefix: list[int]) -> Int:
        j = i % n

        def fits(v: int) -> bool:
            p = [*prefix, v]
            tot = [need[q] if q >= len(p) else max(need[q], p[q]) if q + n >= len(p) else p[q] + p[q + n]
                   for q in range(n)]
            return math.prod(out_len(c, q, tot[q]) for q in range(n)) <= budget

        lo = max(0, need[j] - (cap[j] if i < n else prefix[j]))
        hi = lo
        while hi < cap[j] and fits(hi + 1):
            hi += 1
        return Int(lo, hi)

    return Seq(2 * n, item)


def group(c) -> int:
    return c.attrs.get("group") or 1


def budget(c) -> int:
    """Room for the product of output spatial lengths: N x M x spatial with M >= group."""
    return c.cfg.max_numel // (c.s[0] * group(c))


def mult(spatial):
    """``_m``: output channels per group, within the element budget."""
    def dom(c) -> Int:
        room = c.cfg.max_numel // (c.s[0] * group(c) * math.prod(spatial(c)))
        return Int(1, max(1, min(c.cfg.max_dim, room)))
    return dom


def same_dims(c, spatial) -> bool:
    return len(spatial) == nsp(c) and all(d >= 1 for d in spatial)


# ---------------------------------------------------------------------------------------------
# Conv
# ---------------------------------------------------------------------------------------------
def _conv_len(c, j: int, total: int) -> int:
    return (c.s[2 + j] + total - eff(c, j)) // at(c, "strides", j, 1) + 1


def conv_dims(c) -> list[int]:
    if is_same(c):  # output = ceil(input / stride)
        return [-(-c.s[2 + j] // at(c, "strides", j, 1)) for j in range(nsp(c))]
    return [_conv_len(c, j, sum(pad(c, j))) for j in range(nsp(c))]


def _conv_k(c, j: int) -> Int:
    return Int(1, min(KMAX, c.s[2 + j])) if mode(c) == "VALID" else Int(1, KMAX)


def _conv_dil(c, j: int) -> Int:
    k = c._k[j]
    if mode(c) == "VALID" and k > 1:  # the dilated kernel must fit the unpadded input
        return Int(1, min(DMAX, (c.s[2 + j] - 1) // (k - 1)))
    return Int(1, DMAX)  # explicit pads cover any effective kernel


def _conv_dilations(c):
    if is_same(c):  # ORT: "Dilation not supported for AutoPadType::SAME_UPPER or SAME_LOWER"
        return Maybe(fixed([1] * nsp(c)))
    return Maybe(Seq(nsp(c), lambda j, _: _conv_dil(c, j)))


def _conv_out(c) -> list[TensorType]:
    return [TensorType((c.s[0], c.ins[1].shape[0], *conv_dims(c)), c.T)]


def _w(c) -> tuple[int, ...]:
    return c.ins[1].shape


CONV = OpSpec(
    "Conv", "conv",
    [In("X", rank=(3, 5), room=2),
     In("W", shape=lambda c: (group(c) * c._m, c.s[1] // group(c), *c._k), weight=True),
     In("B", shape=lambda c: (group(c) * c._m,), optional=True, weight=True)],
    _conv_out,
    attrs={
        "auto_pad": Maybe(Choice(AUTO_PADS)),
        "group": lambda c: Maybe(Choice(divisors(c.s[1]))),
        "strides": lambda c: Maybe(ints(nsp(c), 1, SMAX)),
        "_k": lambda c: Seq(nsp(c), lambda j, _: _conv_k(c, j)),
        "dilations": _conv_dilations,
        "kernel_shape": lambda c: Maybe(fixed(c._k)),  # omitted: inferred from W
        "_pad": pad_flag,
        # pads of any size (a window may lie wholly in the padding), up to the effective kernel
        "pads": lambda c: pad_seq(c, [eff(c, j) for j in range(nsp(c))], _conv_len, budget(c)) if c._pad
        else fixed(None),
        "_m": mult(conv_dims),
    },
    checks={
        "group divides C": lambda c: c.s[1] % group(c) == 0,
        "group divides M": lambda c: _w(c)[0] % group(c) == 0,
        "W is [M, C/group, k...]": lambda c: len(_w(c)) == c.r and _w(c)[1] * group(c) == c.s[1],
        "kernel_shape matches W": lambda c: c.attrs.get("kernel_shape") in (None, list(_w(c)[2:])),
        "B is [M]": lambda c: c.ins[2] is None or c.ins[2].shape == (_w(c)[0],),
        "pads only with NOTSET": lambda c: c.attrs.get("pads") is None or mode(c) == "NOTSET",
        "pads >= 0": lambda c: all(p >= 0 for p in c.attrs.get("pads") or ()),
        "a window fits the padded input": lambda c: is_same(c) or all(
            c.s[2 + j] + sum(pad(c, j)) >= eff(c, j) for j in range(nsp(c))),
        "no dilation with SAME (ORT)": lambda c: not is_same(c) or all(
            at(c, "dilations", j, 1) == 1 for j in range(nsp(c))),
        "output dims >= 1": lambda c: same_dims(c, conv_dims(c)),
    },
    since=11,
)


# ---------------------------------------------------------------------------------------------
# ConvTranspose
# ---------------------------------------------------------------------------------------------
def ct_base(c, j: int, **override) -> int:
    """stride*(in-1) + output_padding + effective kernel: the output length before pads."""
    def get(name: str, default: int) -> int:
        if name in override:
            v = override[name]
            return default if v is None else v
        return at(c, name, j, default)
    s, k, d, op = get("strides", 1), get("_k", 1), get("dilations", 1), get("output_padding", 0)
    return s * (c.s[2 + j] - 1) + op + (k - 1) * d + 1


def grown(name: str, lo: int, hi: Callable) -> Callable:
    """A list attribute whose element j is in [lo, hi(c, j)] and keeps the product of the
    ConvTranspose base lengths within the budget (not-yet-drawn values count at their minimum)."""
    def dom(c) -> Seq:
        n, room = nsp(c), budget(c)

        def item(j: int, prefix: list[int]) -> Int:
            def fits(v: int) -> bool:
                vals = [*prefix, v]
                return math.prod(ct_base(c, q, **{name: vals[q] if q < len(vals) else None})
                                 for q in range(n)) <= room
            top, h = lo, hi(c, j)
            while top < h and fits(top + 1):
                top += 1
            return Int(lo, top)
        return Seq(n, item)
    return dom


def _op_hi(c, j: int) -> int:
    s = at(c, "strides", j, 1)
    if is_same(c):
        # ONNX shape inference pads SAME by max(0, ek - s) and ignores output_padding, ORT pads to
        # in*stride: they agree iff output_padding <= max(0, stride - ek)
        return max(0, s - eff(c, j))
    return s - 1  # ORT rejects output_padding >= stride (ONNX: < stride or < dilation)


def ct_dims(c) -> list[int]:
    osh = c.attrs.get("output_shape")
    if osh is not None:
        return list(osh)
    n = nsp(c)
    if is_same(c):  # padded towards in*stride; never below the unpadded length (pads >= 0)
        return [min(ct_base(c, j), c.s[2 + j] * at(c, "strides", j, 1)) for j in range(n)]
    return [ct_base(c, j) - sum(pad(c, j)) for j in range(n)]


def _ct_pads(c) -> Seq:
    n = nsp(c)

    def item(i: int, prefix: list[int]) -> Int:
        j = i % n
        room = ct_base(c, j) - 1 - (prefix[j] if i >= n else 0)  # output length stays >= 1
        return Int(0, min(eff(c, j), room))
    return Seq(2 * n, item)


def _ct_out(c) -> list[TensorType]:
    return [TensorType((c.s[0], group(c) * c._m, *ct_dims(c)), c.T)]


CONV_TRANSPOSE = OpSpec(
    "ConvTranspose", "conv",
    [In("X", rank=(3, 5), room=4),
     In("W", shape=lambda c: (c.s[1], c._m, *c._k), weight=True),
     In("B", shape=lambda c: (group(c) * c._m,), optional=True, weight=True)],
    _ct_out,
    attrs={
        "auto_pad": Maybe(Choice(AUTO_PADS)),
        "group": lambda c: Maybe(Choice(divisors(c.s[1]))),
        "strides": lambda c: Maybe(grown("strides", 1, lambda c, j: SMAX)(c)),
        "_k": grown("_k", 1, lambda c, j: KMAX),
        "dilations": lambda c: Maybe(grown("dilations", 1, lambda c, j: DMAX)(c)),
        "output_padding": lambda c: Maybe(grown("output_padding", 0, _op_hi)(c)),
        "kernel_shape": lambda c: Maybe(fixed(c._k)),
        # explicit output lengths: pads follow; ONNX shape inference gives up below the input length
        "output_shape": lambda c: Maybe(Seq(nsp(c), lambda j, _: Int(c.s[2 + j], ct_base(c, j))), 0.6),
        "_pad": lambda c: Choice((0, 1, 1)) if mode(c) == "NOTSET" else fixed(0),
        "pads": lambda c: _ct_pads(c) if c._pad else fixed(None),
        "_m": mult(ct_dims),
    },
    checks={
        "group divides C": lambda c: c.s[1] % group(c) == 0,
        "W is [C, M/group, k...]": lambda c: len(_w(c)) == c.r and _w(c)[0] == c.s[1],
        "kernel_shape matches W": lambda c: c.attrs.get("kernel_shape") in (None, list(_w(c)[2:])),
        "B is [M]": lambda c: c.ins[2] is None or c.ins[2].shape == (_w(c)[1] * group(c),),
        "pads only with NOTSET": lambda c: c.attrs.get("pads") is None or mode(c) == "NOTSET",
        "pads >= 0": lambda c: all(p >= 0 for p in c.attrs.get("pads") or ()),
        "output_padding < stride (ORT; ONNX: < stride or dilation)": lambda c: all(
            at(c, "output_padding", j, 0) < at(c, "strides", j, 1) for j in range(nsp(c))),
        "SAME: output_padding <= stride - effective kernel (ONNX = ORT)": lambda c: not is_same(c) or all(
            at(c, "output_padding", j, 0) <= max(0, at(c, "strides", j, 1) - eff(c, j)) for j in range(nsp(c))),
        "output_shape between input and unpadded length": lambda c: c.attrs.get("output_shape") is None or all(
            c.s[2 + j] <= c.output_shape[j] <= ct_base(c, j) for j in range(nsp(c))),
        "output dims >= 1": lambda c: same_dims(c, ct_dims(c)),
    },
    since=11,
)

SPECS: list[OpSpec] = [CONV, CONV_TRANSPOSE]
