"""Neural-network operators as models call them: convolutions (1-3d, transposed), pools (max, avg,
adaptive), interpolate, the norms (layer, group, batch in eval and training mode: the latter writes its
running statistics in place, instance, RMS), softmax, linear algebra (linear, matmul, mm, bmm, baddbmm,
addmm, einsum), scaled_dot_product_attention, pad, GLU/PReLU, one_hot and the losses; and models' control
flow: ``torch.cond`` (a predicate read from data, two branches of calls from the registry that the program
generator builds, ``gen/torch_program.py``: both give the operand's type)."""

from __future__ import annotations

import math

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import BOOL, Choice, Const, Dims, Float, In, Int, Maybe, divisors
from dlcfuzz.spec.torch.base import (
    FLOATS,
    INTS,
    Draw,
    TorchOpSpec,
    budget_domain,
    const_iv,
    hull_iv,
    same_iv,
    scaled_iv,
    small_domain,
)

F32 = ("float32",)
NN_FLOATS = FLOATS  # CPU kernels of torch 2.x take float16 and bfloat16 for most of these


def _sp(c) -> tuple[int, ...]:
    return tuple(c.s[2:])


# ---------------------------------------------------------------------------------------------
# Convolutions
# ---------------------------------------------------------------------------------------------
def _conv_geom(c, transposed: bool) -> Draw:
    """Per spatial dim [stride, padding, dilation, kernel, output_padding], every output length >= 1."""
    def fn(rng):
        out = []
        for L in _sp(c):
            s, d = rng.choice((1, 1, 2)), rng.choice((1, 1, 2))
            if transposed:
                k = rng.randint(1, 3)
                op = rng.randint(0, max(s, d) - 1)
                p = rng.randint(0, min(2, ((L - 1) * s + d * (k - 1) + op) // 2))
            else:
                p = rng.randint(0, 2)
                k = rng.randint(1, max(1, min(4, (L + 2 * p - 1) // d + 1)))
                op = 0
            out.append([s, p, d, k, op])
        return out
    return Draw(fn)


def _conv_len(L, g, transposed):
    s, p, d, k, op = g
    if transposed:
        return (L - 1) * s - 2 * p + d * (k - 1) + op + 1
    return (L + 2 * p - d * (k - 1) - 1) // s + 1


def _conv_out(transposed: bool):
    def out(c) -> list[TensorType]:
        o = c.groups * c.per_group
        return [TensorType((c.s[0], o, *(_conv_len(L, g, transposed) for L, g in zip(_sp(c), c.geom, strict=True))),
                           c.T)]
    return out


def _conv_w(transposed: bool):
    def shape(c):
        k = tuple(g[3] for g in c.geom)
        if transposed:
            return (c.s[1], c.per_group, *k)
        return (c.groups * c.per_group, c.s[1] // c.groups, *k)
    return shape


def _conv_count(c) -> float:
    k = math.prod(g[3] for g in c.attrs["geom"]) if isinstance(c, iv.Call) else math.prod(g[3] for g in c.geom)
    ch = (c.types[0].shape[1] if isinstance(c, iv.Call) else c.s[1])
    return ch * k


def conv(n: int, transposed: bool) -> TorchOpSpec:
    name = f"conv_transpose{n}d" if transposed else f"conv{n}d"

    def emit(a, k):
        g = k["geom"]
        s, p, d = [x[0] for x in g], [x[1] for x in g], [x[2] for x in g]
        bias = a[2] if len(a) > 2 and a[2] else "None"
        if transposed:
            op = [x[4] for x in g]
            return (f"F.{name}({a[0]}, {a[1]}, {bias}, stride={s}, padding={p}, output_padding={op}, "
                    f"groups={k['groups']}, dilation={d})")
        return f"F.{name}({a[0]}, {a[1]}, {bias}, stride={s}, padding={p}, dilation={d}, groups={k['groups']})"

    return TorchOpSpec(
        name, "nn",
        [In("x", T="T", rank=(n + 2, n + 2)), In("weight", T="T", shape=_conv_w(transposed), weight=True),
         In("bias", T="T", shape=lambda c: (c.groups * c.per_group,), optional=True, weight=True)],
        _conv_out(transposed),
        attrs={"groups": lambda c: Choice(divisors(c.s[1])), "per_group": Int(1, 3),
               "geom": lambda c: _conv_geom(c, transposed)},
        types={"T": NN_FLOATS}, emit=emit,
        transfer=scaled_iv(lambda c: _conv_count(c) + 1, (0, 1), 64.0),
        vdomain=budget_domain(lambda c: _conv_count(c) + 1, 8.0))


# ---------------------------------------------------------------------------------------------
# Pools
# ---------------------------------------------------------------------------------------------
def _pool_geom(c, dilation: bool) -> Draw:
    """Per spatial dim [kernel, stride, padding <= kernel // 2, dilation]."""
    def fn(rng):
        out = []
        for L in _sp(c):
            d = rng.choice((1, 1, 2)) if dilation else 1
            k = rng.randint(1, max(1, min(3, (L - 1) // d + 1)))
            s = rng.randint(1, 3)
            p = rng.randint(0, k // 2)
            out.append([k, s, p, d])
        return out
    return Draw(fn)


def _pool_len(L, g, ceil):
    k, s, p, d = g
    num = L + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= L + p:
        out -= 1
    return out


def _pool_out(c) -> list[TensorType]:
    return [TensorType((*c.s[:2], *(_pool_len(L, g, c.ceil_mode) for L, g in zip(_sp(c), c.geom, strict=True))), c.T)]


def pool(kind: str, n: int) -> TorchOpSpec:
    name = f"{kind}_pool{n}d"

    def emit(a, k):
        g = k["geom"]
        ks, ss, ps = [x[0] for x in g], [x[1] for x in g], [x[2] for x in g]
        if kind == "max":
            return (f"F.{name}({a[0]}, {ks}, {ss}, {ps}, dilation={[x[3] for x in g]}, "
                    f"ceil_mode={bool(k['ceil_mode'])})")
        return (f"F.{name}({a[0]}, {ks}, {ss}, {ps}, ceil_mode={bool(k['ceil_mode'])}, "
                f"count_include_pad={bool(k['count_include_pad'])})")

    attrs = {"geom": lambda c: _pool_geom(c, kind == "max"), "ceil_mode": BOOL}
    if kind == "avg":
        attrs["count_include_pad"] = BOOL
    return TorchOpSpec(name, "nn", [In("x", T="T", rank=(n + 2, n + 2))], _pool_out, attrs=attrs,
                       types={"T": F32 if kind == "avg" and n in (1, 3) else NN_FLOATS}, emit=emit,
                       transfer=hull_iv(0, zero=kind == "avg"), vdomain=small_domain(1e4))


def adaptive(kind: str, n: int) -> TorchOpSpec:
    name = f"adaptive_{kind}_pool{n}d"
    return TorchOpSpec(name, "nn", [In("x", T="T", rank=(n + 2, n + 2))],
                       lambda c: [TensorType((*c.s[:2], *c.size), c.T)],
                       attrs={"size": lambda c: Draw(lambda rng: [rng.randint(1, L + 1) for L in _sp(c)])},
                       types={"T": NN_FLOATS}, emit=lambda a, k: f"F.{name}({a[0]}, {k['size']})",
                       transfer=hull_iv(0), vdomain=small_domain(1e4))


# ---------------------------------------------------------------------------------------------
# Interpolation
# ---------------------------------------------------------------------------------------------
_MODES = {3: ("nearest", "nearest-exact", "linear", "area"), 4: ("nearest", "nearest-exact", "bilinear", "bicubic",
                                                                  "area"),
          5: ("nearest", "nearest-exact", "trilinear", "area")}


def _interp_emit(a, k) -> str:
    ac = f", align_corners={bool(k['align_corners'])}" if k.get("align_corners") is not None else ""
    return f"F.interpolate({a[0]}, size={k['size']}, mode={k['mode']!r}{ac})"


INTERPOLATE = TorchOpSpec(
    "interpolate", "nn", [In("x", T="T", rank=(3, 5))], lambda c: [TensorType((*c.s[:2], *c.size), c.T)],
    attrs={"mode": lambda c: Choice(_MODES[c.r]),
           "size": lambda c: Draw(lambda rng: [rng.randint(1, 2 * L + 1) for L in _sp(c)]),
           "align_corners": lambda c: Maybe(BOOL, 0.3) if c.mode in ("linear", "bilinear", "bicubic", "trilinear")
           else Choice((None,))},
    types={"T": F32}, emit=_interp_emit,
    transfer=lambda c: [iv.widen(iv.scale(c.x, 1.5) if c.attrs.get("mode") == "bicubic" else c.x, c.n, 8.0,
                                 absolute=1.0)],
    vdomain=small_domain(1e3))


# ---------------------------------------------------------------------------------------------
# Normalization and softmax
# ---------------------------------------------------------------------------------------------
def _norm_iv(c: iv.Call) -> list[iv.Iv]:
    n = max(1, c.types[0].numel)
    m = math.sqrt(n) + 1
    for k in (1, 2):
        if k < len(c.ivs) and c.ivs[k] is not None:
            m = m * max(1.0, iv.amax(c.ivs[k])) + (iv.amax(c.ivs[k + 1]) if k == 1 and len(c.ivs) > 2 and
                                                   c.ivs[2] is not None else 0)
            break
    return [iv.widen((-m, m), c.n, 8.0, absolute=1.0)]


def _opt_arg(a, i) -> str:
    return a[i] if len(a) > i and a[i] else "None"


LAYER_NORM = TorchOpSpec(
    "layer_norm", "nn",
    [In("x", T="T", rank=(1, 5)), In("weight", T="T", shape=lambda c: c.s[c.r - c.k:], optional=True, weight=True),
     In("bias", T="T", shape=lambda c: c.s[c.r - c.k:], optional=True, weight=True)],
    lambda c: [c.x], attrs={"k": lambda c: Int(1, c.r), "eps": Choice((1e-5, 1e-3))}, types={"T": NN_FLOATS},
    emit=lambda a, k: f"F.layer_norm({a[0]}, {a[0]}.shape[{-k['k']}:], {_opt_arg(a, 1)}, {_opt_arg(a, 2)}, {k['eps']})",
    transfer=_norm_iv, vdomain=small_domain(16.0))

RMS_NORM = TorchOpSpec(
    "rms_norm", "nn",
    [In("x", T="T", rank=(1, 5)), In("weight", T="T", shape=lambda c: c.s[c.r - c.k:], optional=True, weight=True)],
    lambda c: [c.x], attrs={"k": lambda c: Int(1, c.r), "eps": Choice((1e-6, 1e-3))}, types={"T": NN_FLOATS},
    emit=lambda a, k: f"F.rms_norm({a[0]}, {a[0]}.shape[{-k['k']}:], {_opt_arg(a, 1)}, {k['eps']})",
    transfer=_norm_iv, vdomain=small_domain(16.0))

GROUP_NORM = TorchOpSpec(
    "group_norm", "nn",
    [In("x", T="T", rank=(2, 5)), In("weight", T="T", shape=lambda c: (c.s[1],), optional=True, weight=True),
     In("bias", T="T", shape=lambda c: (c.s[1],), optional=True, weight=True)],
    lambda c: [c.x], attrs={"groups": lambda c: Choice(divisors(c.s[1]))}, types={"T": NN_FLOATS},
    emit=lambda a, k: f"F.group_norm({a[0]}, {k['groups']}, {_opt_arg(a, 1)}, {_opt_arg(a, 2)})",
    transfer=_norm_iv, vdomain=small_domain(16.0))

INSTANCE_NORM = TorchOpSpec(
    "instance_norm", "nn",
    # more than one spatial element (the statistics of one element are undefined: torch refuses)
    [In("x", T="T", rank=(3, 3), shape=lambda c: Dims([Int(1, 4), Int(1, 4), Int(2, 6)])),
     In("weight", T="T", shape=lambda c: (c.s[1],), optional=True, weight=True),
     In("bias", T="T", shape=lambda c: (c.s[1],), optional=True, weight=True)],
    lambda c: [c.x], attrs={}, types={"T": F32},
    emit=lambda a, k: f"F.instance_norm({a[0]}, weight={_opt_arg(a, 1)}, bias={_opt_arg(a, 2)})",
    transfer=_norm_iv, vdomain=small_domain(16.0))


def _bn_iv(c: iv.Call) -> list[iv.Iv]:
    m = (iv.amax(c.x) + iv.amax(c.ivs[1])) / math.sqrt(0.25) + math.sqrt(max(1, c.types[0].numel)) + 1
    if len(c.ivs) > 3 and c.ivs[3] is not None:
        m *= max(1.0, iv.amax(c.ivs[3]))
    if len(c.ivs) > 4 and c.ivs[4] is not None:
        m += iv.amax(c.ivs[4])
    return [iv.widen((-m, m), c.n, 8.0, absolute=1.0)]


BATCH_NORM = TorchOpSpec(
    "batch_norm", "nn",
    [In("x", T="T", rank=(2, 5)), In("running_mean", T="T", shape=lambda c: (c.s[1],)),
     In("running_var", T="T", shape=lambda c: (c.s[1],), hint={"min": 0.5, "max": 2.0}),
     In("weight", T="T", shape=lambda c: (c.s[1],), optional=True, weight=True),
     In("bias", T="T", shape=lambda c: (c.s[1],), optional=True, weight=True)],
    lambda c: [c.x], attrs={"training": BOOL, "momentum": Choice((0.1, 0.5))}, types={"T": F32},
    # training mode updates the running statistics in place (program inputs: compared after the run); in
    # either mode they take no gradient (batch_norm is not differentiable in them): marked written always
    mutates=lambda attrs: (1, 2),
    emit=lambda a, k: f"F.batch_norm({a[0]}, {a[1]}, {a[2]}, {_opt_arg(a, 3)}, {_opt_arg(a, 4)}, "
                      f"training={bool(k['training'])}, momentum={k['momentum']})",
    transfer=_bn_iv, vdomain=small_domain(16.0))


def _softmax(name: str) -> TorchOpSpec:
    return TorchOpSpec(
        name, "nn", [In("x", T="T", rank=(0, 5))], lambda c: [TensorType(c.s, c.dtype or c.T)],
        attrs={"dim": lambda c: Int(-c.r, c.r - 1) if c.r else Choice((0,)),
               "dtype": lambda c: Maybe(Choice(("float32",)), 0.7)},
        types={"T": NN_FLOATS},
        emit=lambda a, k: f"F.{name}({a[0]}, dim={k['dim']}" + (f", dtype=torch.{k['dtype']})" if k.get("dtype")
                                                                else ")"),
        transfer=const_iv(0.0, 1.0) if name == "softmax" else lambda c: [(c.x[0] - c.x[1] - 8.0, 0.0)],
        vdomain=small_domain(64.0))


# ---------------------------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------------------------
def _k_count(c) -> float:
    """The contraction length: the first input's last dim."""
    t = c.types[0] if isinstance(c, iv.Call) else c.x
    return float(t.shape[-1]) if t.shape else 1.0


def _contract(name, inputs, out, emit, attrs=None, rank=(2, 2), bias_slot: int | None = None) -> TorchOpSpec:
    slots = (0, 1) if bias_slot is None else (1, 2)
    return TorchOpSpec(name, "nn", [In("x", T="T", rank=rank), *inputs], out, attrs=attrs or {},
                       types={"T": NN_FLOATS}, emit=emit,
                       transfer=scaled_iv(lambda c: 2 * _k_count(c) + 2, slots, 16.0),
                       vdomain=budget_domain(lambda c: 2 * _k_count(c) + 2, 8.0))


def _matmul_y(c):
    if c.r == 1:
        return (c.s[0],) if c.yrank == 1 else (c.s[0], c.m)
    return (c.s[-1],) if c.yrank == 1 else (*c.s[:-2], c.s[-1], c.m)


def _matmul_out(c) -> list[TensorType]:
    y = _matmul_y(c)
    shape = (() if len(y) == 1 else (y[-1],)) if c.r == 1 else c.s[:-1] if len(y) == 1 else (*c.s[:-1], y[-1])
    return [TensorType(tuple(shape), c.T)]


_EINSUM = {  # equation -> (rank of x, the second operand's shape from x's, output shape)
    "ij,jk->ik": (2, lambda s, m: (s[1], m), lambda s, m: (s[0], m)),
    "bij,bjk->bik": (3, lambda s, m: (s[0], s[2], m), lambda s, m: (s[0], s[1], m)),
    "bij,bkj->bik": (3, lambda s, m: (s[0], m, s[2]), lambda s, m: (s[0], s[1], m)),
    "i,j->ij": (1, lambda s, m: (m,), lambda s, m: (s[0], m)),
    "bhld,bhmd->bhlm": (4, lambda s, m: (s[0], s[1], m, s[3]), lambda s, m: (s[0], s[1], s[2], m)),
    "ij,ij->i": (2, lambda s, m: s, lambda s, m: (s[0],)),
    "ijk,k->ij": (3, lambda s, m: (s[2],), lambda s, m: (s[0], s[1])),
}


def _einsum_count(c) -> float:
    t = c.types[0] if isinstance(c, iv.Call) else c.x
    return float(max(t.shape, default=1))


def _sdpa_emit(a, k) -> str:
    mask = f", attn_mask={a[3]}" if len(a) > 3 and a[3] else ""
    causal = ", is_causal=True" if k.get("causal") and not mask else ""
    scale = f", scale={k['scale']}" if k.get("scale") is not None else ""
    return f"F.scaled_dot_product_attention({a[0]}, {a[1]}, {a[2]}{mask}{causal}{scale})"


# flex_attention's score modifications (``score_mod(score, batch, head, q_idx, kv_idx)``), as models write them
FLEX_SCORE_MODS = {
    "none": "",
    "relative": "lambda s, b, h, i, j: s + (i - j)",
    "causal": "lambda s, b, h, i, j: torch.where(i >= j, s, -float('inf'))",  # column 0 is always kept
    "softcap": "lambda s, b, h, i, j: 2.0 * torch.tanh(s / 2.0)",
    "alibi": "lambda s, b, h, i, j: s - (h + 1) * 0.25 * torch.abs(i - j)",
}


def _flex_emit(a, k) -> str:
    # Inductor's CPU flex attention has no backward ("FlexAttention does not support backward on CPU"): the
    # operands are detached, so that a backward program differentiates around the call
    score = f", score_mod={FLEX_SCORE_MODS[k['score_mod']]}" if FLEX_SCORE_MODS[k["score_mod"]] else ""
    scale = f", scale={k['scale']}" if k.get("scale") is not None else ""
    gqa = ", enable_gqa=True" if k["kv_heads"] != k["heads"] else ""
    return f"flex_attention({a[0]}.detach(), {a[1]}.detach(), {a[2]}.detach(){score}{scale}{gqa})"


def _pad_geom(c) -> Draw:
    """Pads for the last dims (``F.pad``'s order: last dim first); reflect pads stay below the size,
    circular ones within it; constant ones may crop (negative) while a dim keeps one element."""
    def fn(rng):
        mode = c.mode
        # reflect/replicate/circular pad the last r-2 or r-1 dims (1 to 3 of them)
        n = (rng.choice([k for k in (c.r - 2, c.r - 1) if 1 <= k <= 3]) if mode != "constant"
             else rng.randint(1, min(3, c.r)))
        pads = []
        for i in range(n):
            L = c.s[c.r - 1 - i]
            for _ in range(2):
                if mode == "reflect":
                    pads.append(rng.randint(0, min(2, L - 1)))
                elif mode == "circular":
                    pads.append(rng.randint(0, min(2, L)))
                elif mode == "replicate":
                    pads.append(rng.randint(0, 2))
                else:
                    pads.append(rng.randint(-1 if L > 2 else 0, 2))
        return pads
    return Draw(fn)


def _pad_out(c) -> list[TensorType]:
    s = list(c.s)
    for i in range(len(c.pads) // 2):
        s[c.r - 1 - i] += c.pads[2 * i] + c.pads[2 * i + 1]
    return [TensorType(tuple(s), c.T)]


def _loss(name: str, target_types=None) -> TorchOpSpec:
    return TorchOpSpec(
        name, "nn", [In("x", T="T", rank=(0, 4)), In("target", T="T", shape=lambda c: c.s)],
        lambda c: [TensorType(c.s if c.reduction == "none" else (), c.T)],
        attrs={"reduction": Choice(("mean", "sum", "none"))}, types={"T": NN_FLOATS},
        emit=lambda a, k: f"F.{name}({a[0]}, {a[1]}, reduction={k['reduction']!r})",
        transfer=lambda c: [iv.widen((-1.0, max(1, c.types[0].numel) * (iv.amax(c.x) + iv.amax(c.ivs[1]) + 1) ** 2),
                                     c.n, 8.0, absolute=1.0)],
        vdomain=small_domain(8.0))


def _ce_target(c) -> np.ndarray:
    return np.array(c.np.integers(0, c.s[1], size=(c.s[0],)), dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Control flow: torch.cond
# ---------------------------------------------------------------------------------------------
# the predicate, read from the first operand's data: exact reductions only (amax/amin of floats, sums of
# integers), so that eager and compiled code take the same branch wherever they agree on that operand
COND_PREDICATES = {"amax_gt0": "{p}.amax() > 0", "amin_lt0": "{p}.amin() < 0", "sum_gt0": "{p}.sum() > 0",
                   "any": "{p}.any()"}


def _cond_predicates(c) -> Choice:
    if c.T == "bool":
        return Choice(("any",))
    return Choice(("amax_gt0", "amin_lt0", "sum_gt0") if c.T in INTS else ("amax_gt0", "amin_lt0"))


def _cond_emit(a: list[str], k: dict) -> str:
    pred = COND_PREDICATES[k["pred"]].format(p=a[0])
    fn = k.get("fn", "branch")
    return f"torch.cond({pred}, {fn}_true, {fn}_false, ({', '.join(a[1:])},))"


def _cond_plain(a: list[str], k: dict) -> str:
    """torch.cond without the higher-order operator: both branches traced inline, and a select."""
    pred = COND_PREDICATES[k["pred"]].format(p=a[0])
    fn, ops = k.get("fn", "branch"), ", ".join(a[1:])
    return f"(torch.where({pred}, {fn}_true({ops})[0], {fn}_false({ops})[0]),)"


# The spec draws the predicate's operand and the branches' first operand (the call's type: both branches
# end in it); the program generator builds the branches (``branches``: per branch, its calls as node
# dicts; ``results``: each branch's result), lifting the tensors they create into further operands, and
# records the hull of the branch results' intervals (``bound``: what ``transfer`` gives).
COND = TorchOpSpec(
    "cond", "nn",
    [In("pred", T="T", rank=(0, 5)), In("x", T="T1", shape=lambda c: c.bcast(c.s))],
    lambda c: [c.ins[1]], attrs={"pred": _cond_predicates},
    types={"T": (*FLOATS, *INTS, "bool"), "T1": FLOATS}, emit=_cond_emit, mechanism="torch.cond", plain=_cond_plain,
    transfer=lambda c: [tuple(c.attrs["bound"]) if "bound" in c.attrs else c.ivs[1] for _ in c.outs],
    vdomain=small_domain(16.0))

# ---------------------------------------------------------------------------------------------
# Loops: while_loop and scan (torch._higher_order_ops), a fixed-count recurrence as a model writes it
# ---------------------------------------------------------------------------------------------
# Inductor lowers both to its WhileLoop IR (a scan becomes a while_loop over its dim).  The count is a carried
# int64 tensor that nothing else feeds, so eager and compiled code run the same iterations; the operand is
# detached (neither loop has a backward on CPU), so that a backward program differentiates around the call,
# and contiguous, as the body returns it (the loop checks that the carried values keep their strides).
LOOP = "a while_loop or scan"  # the mechanism (TorchOpSpec.mechanism)
LOOP_BODIES = {
    "tanh": "torch.tanh({t}) * 0.5 + 0.25",
    "affine": "{t} * 0.5 + 1.0",
    "roll": "({t} + {t}.roll(1, -1)) * 0.5",
    "center": "{t} - {t}.mean() * 0.5",
}


def _loop_bodies(c) -> Choice:
    return Choice(tuple(b for b in LOOP_BODIES if c.r > 0 or b != "roll"))


def _while_emit(a: list[str], k: dict) -> str:
    body = LOOP_BODIES[k["body"]].format(t="t")
    return (f"while_loop(lambda i, t: i < {k['n']}, lambda i, t: (i + 1, {body}), "
            f"(torch.zeros((), dtype=torch.int64), {a[0]}.detach().clone(memory_format=torch.contiguous_format)))[1]")


def _while_plain(a: list[str], k: dict) -> str:
    """The loop unrolled: its body applied n times."""
    t = f"{a[0]}.detach().clone(memory_format=torch.contiguous_format)"
    for _ in range(k["n"]):
        t = "(" + LOOP_BODIES[k["body"]].format(t=t) + ")"
    return t


def _scan_emit(a: list[str], k: dict) -> str:
    # over dim 0 of a contiguous copy (the scanned dim moved first), then moved back: the carry and each
    # step's slice are contiguous, as the loop's body returns them (while_loop checks that they match)
    x, d = f"{a[0]}.detach().movedim({k['dim']}, 0).clone(memory_format=torch.contiguous_format)", k["dim"]
    return (f"(lambda r: (r[0], r[1].movedim(0, {d})))(scan(lambda c, xi: (c * {k['decay']} + xi, "
            f"torch.tanh(c * {k['decay']} + xi)), torch.zeros_like({x}[0]), {x}))")


def _loop_iv(c: iv.Call) -> list[iv.Iv]:
    m = 6.0 * max(1.0, iv.amax(c.x)) + 2.0  # |t - mean/2| at most 1.5 |t| per iteration, four at most
    return [iv.widen((-m, m), c.n, 4.0, absolute=1.0)]


WHILE_LOOP = TorchOpSpec(
    "while_loop", "nn", [In("x", T="T", rank=(0, 4))], lambda c: [c.x],
    attrs={"n": Int(1, 4), "body": _loop_bodies}, types={"T": FLOATS}, emit=_while_emit, plain=_while_plain,
    mechanism=LOOP, grad=False, imports=("from torch._higher_order_ops import while_loop",), transfer=_loop_iv,
    vdomain=small_domain(16.0))
SCAN = TorchOpSpec(
    "scan", "nn", [In("x", T="T", rank=(1, 4))],
    lambda c: [TensorType(tuple(n for i, n in enumerate(c.s) if i != c.dim), c.T), c.x],
    attrs={"dim": lambda c: Int(0, c.r - 1), "decay": Choice((0.5, 0.9, 1.0))}, types={"T": FLOATS},
    emit=_scan_emit, mechanism=LOOP, grad=False, imports=("from torch._higher_order_ops.scan import scan",),
    transfer=lambda c: [iv.widen(iv.scale(c.x, float(max(1, c.types[0].shape[c.attrs["dim"]]))), c.n, 4.0,
                                 absolute=1.0), (-1.0, 1.0)],
    vdomain=small_domain(16.0))

SPECS = [
    *(conv(n, t) for n in (1, 2, 3) for t in (False, True)),
    *(pool(kind, n) for kind in ("max", "avg") for n in (1, 2, 3)),
    *(adaptive(kind, n) for kind, n in (("avg", 1), ("avg", 2), ("avg", 3), ("max", 1), ("max", 2))),
    INTERPOLATE, LAYER_NORM, RMS_NORM, GROUP_NORM, INSTANCE_NORM, BATCH_NORM,
    _softmax("softmax"), _softmax("log_softmax"),
    _contract("linear", [In("weight", T="T", shape=lambda c: (c.o, c.s[-1]), weight=True),
                         In("bias", T="T", shape=lambda c: (c.o,), optional=True, weight=True)],
              lambda c: [TensorType((*c.s[:-1], c.o), c.T)],
              lambda a, k: f"F.linear({a[0]}, {a[1]}, {_opt_arg(a, 2)})", {"o": Int(1, 6)}, rank=(1, 4)),
    _contract("matmul", [In("y", T="T", shape=_matmul_y)], _matmul_out, lambda a, k: f"torch.matmul({a[0]}, {a[1]})",
              {"yrank": Choice((1, 2)), "m": Int(1, 5)}, rank=(1, 4)),
    _contract("mm", [In("y", T="T", shape=lambda c: (c.s[1], c.m))], lambda c: [TensorType((c.s[0], c.m), c.T)],
              lambda a, k: f"torch.mm({a[0]}, {a[1]})", {"m": Int(1, 5)}),
    _contract("bmm", [In("y", T="T", shape=lambda c: (c.s[0], c.s[2], c.m))],
              lambda c: [TensorType((c.s[0], c.s[1], c.m), c.T)], lambda a, k: f"torch.bmm({a[0]}, {a[1]})",
              {"m": Int(1, 5)}, rank=(3, 3)),
    TorchOpSpec("baddbmm", "nn",
                [In("input", T="T", rank=(0, 3)), In("b1", T="T", shape=lambda c: (c.B, c.N, c.K)),
                 In("b2", T="T", shape=lambda c: (c.B, c.K, c.M))],
                lambda c: [TensorType((c.B, c.N, c.M), c.T)],
                attrs={"B": lambda c: Choice((c.s[-3],)) if c.r >= 3 else Int(1, 3),
                       "N": lambda c: Choice((c.s[-2],)) if c.r >= 2 and c.s[-2] != 1 else Int(1, 4),
                       "M": lambda c: Choice((c.s[-1],)) if c.r >= 1 and c.s[-1] != 1 else Int(1, 4),
                       "K": Int(1, 5), "beta": Float(-2.0, 2.0), "alpha": Float(-2.0, 2.0)},
                types={"T": NN_FLOATS},
                emit=lambda a, k: f"torch.baddbmm({a[0]}, {a[1]}, {a[2]}, beta={k['beta']}, alpha={k['alpha']})",
                transfer=scaled_iv(lambda c: 2 * c.attrs["K"] + 2, (1, 2), 16.0),
                vdomain=small_domain(8.0)),
    TorchOpSpec("addmm", "nn",
                [In("input", T="T", rank=(0, 2)), In("m1", T="T", shape=lambda c: (c.N, c.K)),
                 In("m2", T="T", shape=lambda c: (c.K, c.M))],
                lambda c: [TensorType((c.N, c.M), c.T)],
                attrs={"N": lambda c: Choice((c.s[-2],)) if c.r >= 2 and c.s[-2] != 1 else Int(1, 4),
                       "M": lambda c: Choice((c.s[-1],)) if c.r >= 1 and c.s[-1] != 1 else Int(1, 4),
                       "K": Int(1, 5), "beta": Float(-2.0, 2.0), "alpha": Float(-2.0, 2.0)},
                types={"T": NN_FLOATS},
                emit=lambda a, k: f"torch.addmm({a[0]}, {a[1]}, {a[2]}, beta={k['beta']}, alpha={k['alpha']})",
                transfer=scaled_iv(lambda c: 2 * c.attrs["K"] + 2, (1, 2), 16.0),
                vdomain=small_domain(8.0)),
    TorchOpSpec("einsum", "nn",
                [In("x", T="T", rank=(1, 4)),
                 In("y", T="T", shape=lambda c: tuple(_EINSUM[c.equation][1](c.s, c.m)))],
                lambda c: [TensorType(tuple(_EINSUM[c.equation][2](c.s, c.m)), c.T)],
                attrs={"equation": lambda c: Choice([e for e, v in _EINSUM.items() if v[0] == c.r]),
                       "m": Int(1, 4)},
                types={"T": NN_FLOATS}, emit=lambda a, k: f"torch.einsum({k['equation']!r}, {a[0]}, {a[1]})",
                transfer=scaled_iv(lambda c: 2 * _einsum_count(c) + 2, (0, 1), 16.0),
                vdomain=budget_domain(lambda c: 2 * _einsum_count(c) + 2, 8.0)),
    TorchOpSpec("sdpa", "nn",
                [In("q", T="T", rank=(3, 4)), In("k", T="T", shape=lambda c: (*c.s[:-2], c.S, c.s[-1])),
                 In("v", T="T", shape=lambda c: (*c.s[:-2], c.S, c.Ev)),
                 In("mask", T="Tm", shape=lambda c: (c.s[-2], c.S), optional=True)],
                lambda c: [TensorType((*c.s[:-1], c.Ev), c.T)],
                attrs={"S": Int(1, 5), "Ev": Int(1, 5), "causal": BOOL, "scale": Maybe(Choice((0.5, 1.0)), 0.7)},
                types={"T": NN_FLOATS, "Tm": ("bool",)}, emit=_sdpa_emit,
                transfer=lambda c: [iv.widen(iv.hull(c.ivs[2], (0.0, 0.0)), c.n, 16.0, absolute=1.0)],
                vdomain=small_domain(4.0)),
    # FlexAttention (torch.nn.attention.flex_attention): Inductor's CPU template (cpp_flex_attention_template.py)
    # compiles the score modification into the kernel; grouped-query attention where k/v have fewer heads
    TorchOpSpec("flex_attention", "nn",
                [In("q", T="T", rank=(4, 4)),
                 In("k", T="T", shape=lambda c: (c.s[0], c.kv_heads, c.S, c.s[3])),
                 In("v", T="T", shape=lambda c: (c.s[0], c.kv_heads, c.S, c.Ev))],
                lambda c: [TensorType((*c.s[:-1], c.Ev), c.T)],
                attrs={"heads": lambda c: Choice((c.s[1],)),
                       "kv_heads": lambda c: Choice(divisors(c.s[1])), "S": Int(1, 5), "Ev": Int(1, 5),
                       "score_mod": Choice(tuple(FLEX_SCORE_MODS)), "scale": Maybe(Choice((0.5, 1.0)), 0.7)},
                types={"T": FLOATS}, emit=_flex_emit, grad=False,
                imports=("from torch.nn.attention.flex_attention import flex_attention",),
                transfer=lambda c: [iv.widen(iv.hull(c.ivs[2], (0.0, 0.0)), c.n, 16.0, absolute=1.0)],
                vdomain=small_domain(4.0)),
    TorchOpSpec("pad", "nn", [In("x", T="T", rank=(1, 5))], _pad_out,
                attrs={"mode": lambda c: Choice(("constant", "reflect", "replicate", "circular") if c.r >= 3
                                                else ("constant",)),
                       "pads": _pad_geom, "value": lambda c: Choice((0.0, 1.5)) if c.mode == "constant"
                       else Choice((None,))},
                types={"T": NN_FLOATS}, transfer=lambda c: [iv.hull(c.x, (0.0, 1.5))], vdomain=small_domain(1e4),
                emit=lambda a, k: f"F.pad({a[0]}, {k['pads']}, mode={k['mode']!r}" +
                (f", value={k['value']})" if k.get("value") is not None else ")")),
    TorchOpSpec("glu", "nn", [In("x", T="T", rank=(1, 5))],
                lambda c: [TensorType(tuple(x // 2 if i == c.dim % c.r else x for i, x in enumerate(c.s)), c.T)],
                attrs={"dim": lambda c: Choice([d for d in range(-c.r, c.r) if c.s[d] % 2 == 0])},
                types={"T": NN_FLOATS}, transfer=hull_iv(0), vdomain=small_domain(64.0),
                emit=lambda a, k: f"F.glu({a[0]}, {k['dim']})"),
    TorchOpSpec("prelu", "nn", [In("x", T="T", rank=(2, 5)),
                                In("weight", T="T", shape=lambda c: (c.s[1],) if c.per_channel else (1,),
                                   weight=True)],
                lambda c: [c.x], attrs={"per_channel": BOOL}, types={"T": NN_FLOATS},
                transfer=scaled_iv(lambda c: 1.0, (0, 1)), vdomain=small_domain(8.0),
                emit=lambda a, k: f"F.prelu({a[0]}, {a[1]})"),
    TorchOpSpec("normalize", "nn", [In("x", T="T", rank=(1, 5))], lambda c: [c.x],
                attrs={"p": Choice((1.0, 2.0)), "dim": lambda c: Int(-c.r, c.r - 1)}, types={"T": NN_FLOATS},
                transfer=lambda c: [iv.widen(iv.hull(c.x, (-1.0, 1.0)), c.n, 8.0)], vdomain=small_domain(64.0),
                emit=lambda a, k: f"F.normalize({a[0]}, p={k['p']}, dim={k['dim']})"),
    TorchOpSpec("cosine_similarity", "nn", [In("x", T="T", rank=(1, 4)), In("y", T="T", shape=lambda c: c.s)],
                lambda c: [TensorType(tuple(x for i, x in enumerate(c.s) if i != c.dim % c.r), c.T)],
                attrs={"dim": lambda c: Int(-c.r, c.r - 1)}, types={"T": F32},
                transfer=const_iv(-1.1, 1.1), vdomain=small_domain(64.0),
                emit=lambda a, k: f"F.cosine_similarity({a[0]}, {a[1]}, dim={k['dim']})"),
    TorchOpSpec("one_hot", "nn", [In("x", T="T", rank=(0, 3), hint={"min": 0, "max": 3})],
                lambda c: [TensorType((*c.s, c.classes), "int64")], attrs={"classes": Int(4, 6)},
                types={"T": ("int64",)}, transfer=const_iv(0.0, 1.0), grad=False,
                vdomain=lambda slot, n, numel, c, ivs: iv.Domain(0.0, 3.0),
                emit=lambda a, k: f"F.one_hot({a[0]}, {k['classes']})"),
    *(_loss(name) for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")),
    TorchOpSpec("cross_entropy", "nn", [In("x", T="T", rank=(2, 2)), Const("target", _ce_target)],
                lambda c: [TensorType((c.s[0],) if c.reduction == "none" else (), c.T)],
                attrs={"reduction": Choice(("mean", "sum", "none")), "label_smoothing": Choice((0.0, 0.1))},
                types={"T": F32}, vdomain=small_domain(16.0),
                transfer=lambda c: [(0.0, max(1, c.types[0].numel) * (2 * iv.amax(c.x) + 8))],
                emit=lambda a, k: f"F.cross_entropy({a[0]}, {a[1]}, reduction={k['reduction']!r}, "
                                  f"label_smoothing={k['label_smoothing']})"),
    TorchOpSpec("bce_with_logits", "nn", [In("x", T="T", rank=(0, 4)),
                                          In("target", T="T", shape=lambda c: c.s, hint={"min": 0.0, "max": 1.0})],
                lambda c: [TensorType(c.s if c.reduction == "none" else (), c.T)],
                attrs={"reduction": Choice(("mean", "sum", "none"))}, types={"T": F32}, vdomain=small_domain(16.0),
                transfer=lambda c: [(0.0, max(1, c.types[0].numel) * (iv.amax(c.x) + 2))],
                emit=lambda a, k: f"F.binary_cross_entropy_with_logits({a[0]}, {a[1]}, reduction={k['reduction']!r})"),
    COND, WHILE_LOOP, SCAN,
    TorchOpSpec("dropout_eval", "nn", [In("x", T="T", rank=(0, 5))], lambda c: [c.x], attrs={"p": Float(0.1, 0.5)},
                types={"T": NN_FLOATS}, transfer=same_iv, vdomain=small_domain(1e4),
                emit=lambda a, k: f"F.dropout({a[0]}, p={k['p']}, training=False)"),
]

# norms, softmax and contractions of empty tensors (not convolutions, pools, interpolate: eager refuses most
# empty spatial dims; not the losses: a mean of nothing is NaN)
EMPTY_OK = frozenset(f"torch.{n}" for n in (
    "layer_norm", "rms_norm", "group_norm", "softmax", "log_softmax", "linear", "matmul", "mm", "bmm", "baddbmm",
    "addmm", "einsum", "sdpa", "glu", "prelu", "normalize", "cosine_similarity", "dropout_eval"))
for _s in SPECS:
    _s.empty = _s.op in EMPTY_OK
