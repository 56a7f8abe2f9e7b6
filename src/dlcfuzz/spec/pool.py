"""Pooling over 1-3 spatial dimensions (X is N x C x D1 ... Dn): MaxPool, AveragePool, LpPool and
the global pools.  Window attributes are drawn as in conv.py (strides, kernel, dilations, pads,
then ceil_mode), each in terms of the earlier ones so that every output length is >= 1.

Where ONNX shape inference (1.23) and ONNX Runtime disagree, the domains keep to the region
where both give the same, documented output shape (each such place is marked "ORT" or "ONNX"):
pads < kernel (ORT), SAME with non-negative pads and no dilation of a kernel > 1 (ORT), and
ceil_mode only where the last window starts inside the input or left pad (ORT drops it, ONNX
shape inference does not).
"""

from __future__ import annotations

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.conv import AUTO_PADS, DMAX, KMAX, SMAX, at, eff, fixed, is_same, mode, nsp, pad, pad_flag, pad_seq
from dlcfuzz.spec.dsl import BOOL, Choice, In, Int, Maybe, OpSpec, Seq, ints


def _kernel(c, j: int) -> Int:
    n, s = c.s[2 + j], at(c, "strides", j, 1)
    if mode(c) == "VALID":
        return Int(1, min(KMAX, n))
    if is_same(c):  # ORT: SAME pads (ceil(n/s)-1)*s + k - n must be >= 0 ("padding values must be non-negative")
        return Int((n - 1) % s + 1, KMAX)
    return Int(1, KMAX)


def _dilation(c, j: int) -> Int:
    n, k = c.s[2 + j], c._k[j]
    if k == 1:
        return Int(1, DMAX)
    if is_same(c):  # ORT computes SAME pads from the undilated kernel (output != ceil(n/s))
        return Int(1, 1)
    if mode(c) == "VALID":  # the dilated kernel fits the input
        return Int(1, min(DMAX, (n - 1) // (k - 1)))
    return Int(1, min(DMAX, (n + 2 * k - 3) // (k - 1)))  # ... or the input with pads < k on both sides


def _lens(c, j: int, total: int) -> int:
    """Output length bound used to budget pads (ceil_mode may still be drawn)."""
    return -(-(c.s[2 + j] + total - eff(c, j)) // at(c, "strides", j, 1)) + 1


def _last_window_outside(c, j: int) -> bool:
    """ceil_mode adds a last window that starts in the right pad (or past the input)."""
    n, s = c.s[2 + j], at(c, "strides", j, 1)
    pb, pe = pad(c, j)
    o = -(-(n + pb + pe - eff(c, j)) // s) + 1
    return (o - 1) * s >= n + pb


def pool_dims(c) -> list[int]:
    out = []
    for j in range(nsp(c)):
        n, s = c.s[2 + j], at(c, "strides", j, 1)
        if is_same(c):
            out.append(-(-n // s))
            continue
        pb, pe = pad(c, j)
        num = n + pb + pe - eff(c, j)
        if not c.attrs.get("ceil_mode"):
            out.append(num // s + 1)
            continue
        o = -(-num // s) + 1
        # ORT (as PyTorch) drops a last window starting in the right pad; never drawn (see ceil_mode)
        out.append(o - 1 if (o - 1) * s >= n + pb else o)
    return out


def _ceil_mode(c):
    ok = is_same(c) or not any(_last_window_outside(c, j) for j in range(nsp(c)))
    return Maybe(BOOL if ok else fixed(0))


CHECKS = {
    "pads only with NOTSET": lambda c: c.attrs.get("pads") is None or mode(c) == "NOTSET",
    "pads < kernel (ORT)": lambda c: all(max(pad(c, j)) < c._k[j] for j in range(nsp(c))),
    "a window fits the padded input": lambda c: is_same(c) or all(
        c.s[2 + j] + sum(pad(c, j)) >= eff(c, j) for j in range(nsp(c))),
    "SAME pads >= 0 (ORT)": lambda c: not is_same(c) or all(
        (-(-c.s[2 + j] // at(c, "strides", j, 1)) - 1) * at(c, "strides", j, 1) + eff(c, j) >= c.s[2 + j]
        for j in range(nsp(c))),
    "SAME: no dilated kernel (ORT)": lambda c: not is_same(c) or all(
        c._k[j] == 1 or at(c, "dilations", j, 1) == 1 for j in range(nsp(c))),
    "ceil_mode: last window starts inside input or left pad (ONNX = ORT)": lambda c: not c.attrs.get("ceil_mode")
    or is_same(c) or not any(_last_window_outside(c, j) for j in range(nsp(c))),
    "output dims >= 1": lambda c: all(d >= 1 for d in pool_dims(c)),
}


def window_pool(op: str, since: int, out, dilations: int = 1, ceil: int = 1, **extra) -> OpSpec:
    """A pool with kernel_shape/strides/pads/auto_pad; ``dilations`` and ``ceil_mode`` exist from
    the given opsets."""
    attrs = {
        "auto_pad": Maybe(Choice(AUTO_PADS)),
        "strides": lambda c: Maybe(ints(nsp(c), 1, SMAX)),
        "_k": lambda c: Seq(nsp(c), lambda j, _: _kernel(c, j)),
        "kernel_shape": lambda c: fixed(c._k),
        "dilations": lambda c: Maybe(Seq(nsp(c), lambda j, _: _dilation(c, j))) if c.cfg.opset >= dilations
        else fixed(None),
        "_pad": pad_flag,
        "pads": lambda c: pad_seq(c, [k - 1 for k in c._k], _lens, c.cfg.max_numel // (c.s[0] * c.s[1]))
        if c._pad else fixed(None),
        "ceil_mode": lambda c: _ceil_mode(c) if c.cfg.opset >= ceil else fixed(None),
        **extra,
    }
    return OpSpec(op, "pool", [In("X", rank=(3, 5), room=2)], out, attrs=attrs, checks=dict(CHECKS), since=since)


def _same_type(c) -> list[TensorType]:
    return [TensorType((*c.s[:2], *pool_dims(c)), c.T)]


def _max_out(c) -> list[TensorType]:
    y = TensorType((*c.s[:2], *pool_dims(c)), c.T)
    return [y, TensorType(y.shape, "int64")] if c._indices else [y]


def global_pool(op: str, **attrs) -> OpSpec:
    return OpSpec(op, "pool", [In("X", rank=(3, 5))],
                  lambda c: [TensorType((*c.s[:2], *(1,) * nsp(c)), c.T)], attrs=attrs)


SPECS: list[OpSpec] = [
    window_pool("MaxPool", 12, _max_out, dilations=10, ceil=10,
                storage_order=Maybe(BOOL), _indices=BOOL),  # _indices: the optional int64 Indices output
    window_pool("AveragePool", 11, _same_type, dilations=19, ceil=10, count_include_pad=Maybe(BOOL)),
    window_pool("LpPool", 11, _same_type, dilations=18, ceil=18, p=Maybe(Int(1, 4))),
    global_pool("GlobalAveragePool"),
    global_pool("GlobalMaxPool"),
    global_pool("GlobalLpPool", p=Maybe(Int(1, 4))),
]
