"""Recurrent layers: RNN, GRU, LSTM (one layer, forward / reverse / bidirectional).

X is [seq_length, batch, input_size] (layout 0) or [batch, seq_length, input_size] (layout 1);
W, R, B (and LSTM's peepholes P) are weights, initial_h / initial_c the optional initial state,
sequence_lens an optional constant in [1, seq_length].  hidden_size keeps every output and
weight within max_numel (X leaves room for the gate weights: ``room`` = the number of gates).

Activations are omitted (the defaults) or drawn from ONNX's list, one per gate function and
direction.  activation_alpha / activation_beta, when given, repeat a single value, so that both
readings of "consumed in the order of activation functions" (ONNX Runtime: only by the
activations that take a parameter; literally: one per activation) agree; they are always given
with ThresholdedRelu, Affine and ScaledTanh, whose defaults implementations disagree on (see
docs/discrepancies.md).  The gate activations (GRU's and LSTM's f) stay bounded (|f| <= 1: alpha
and beta are drawn in [0, 1]), and activations that can grow (Relu, Affine, Elu ...) only drive
the candidate / cell / hidden functions of sequences of at most ``GROW_STEPS`` steps, so that
the value domains in solve/intervals.py keep every output finite.
"""

from __future__ import annotations

import math

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.dsl import BOOL, Choice, Const, Float, In, Int, Maybe, OpSpec, Seq

HMAX = 8  # hidden_size is drawn in 1..HMAX
GROW_STEPS = 4  # unbounded activations only on sequences this short
BOUNDED = ("Tanh", "Sigmoid", "HardSigmoid", "Softsign", "ScaledTanh")
UNBOUNDED = ("Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "Elu", "Softplus")
NEEDS_ALPHA = ("ThresholdedRelu", "Affine", "ScaledTanh")  # no agreed default: alpha always given
NEEDS_BETA = ("Affine", "ScaledTanh")
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
NACTS = {"RNN": 1, "GRU": 2, "LSTM": 3}


def nd(c) -> int:
    """num_directions."""
    return 2 if c.direction == "bidirectional" else 1


def seq_len(c) -> int:
    return c.s[1] if c.layout else c.s[0]


def batch(c) -> int:
    return c.s[0] if c.layout else c.s[1]


def _h_max(c, op: str, dirs: int) -> int:
    """The largest hidden_size that keeps Y, W, R and B within max_numel."""
    m, g, i = c.cfg.max_numel, GATES[op], c.s[2]
    return min(HMAX, m // (seq_len(c) * dirs * batch(c)), m // (dirs * g * i), math.isqrt(m // (dirs * g)),
               m // (dirs * 2 * g))


def _direction(op: str):
    def dom(c):
        both = ("forward", "reverse", "bidirectional") if _h_max(c, op, 2) >= 1 else ("forward", "reverse")
        return Maybe(Choice(both))
    return dom


def _activations(op: str):
    """Per direction: GRU / LSTM's first function (the gates) bounded, the others unbounded only on
    short sequences."""
    def dom(c):
        free = BOUNDED + UNBOUNDED if seq_len(c) <= GROW_STEPS else BOUNDED
        k = NACTS[op]
        return Maybe(Seq(k * nd(c), lambda i, prefix: Choice(BOUNDED if op != "RNN" and i % k == 0 else free)), 0.5)
    return dom


def _param(needs: tuple[str, ...], lo: float, hi: float):
    """``_alpha`` / ``_beta``: one value for every activation; required where a listed activation
    has no agreed default, else optional; none without explicit activations."""
    def dom(c):
        if c.activations is None:
            return Choice((None,))
        if any(a in needs for a in c.activations):
            return Float(lo, hi)
        return Maybe(Float(lo, hi), 0.5)
    return dom


def _repeat(name: str):
    return lambda c: Choice((None if getattr(c, name) is None else [getattr(c, name)] * len(c.activations),))


def _state(c) -> tuple[int, ...]:
    """initial_h / initial_c / Y_h / Y_c: [num_directions, batch, hidden] (layout 1: batch first)."""
    return (batch(c), nd(c), c.hidden_size) if c.layout else (nd(c), batch(c), c.hidden_size)


def _y(c) -> tuple[int, ...]:
    if c.layout:
        return (batch(c), seq_len(c), nd(c), c.hidden_size)
    return (seq_len(c), nd(c), batch(c), c.hidden_size)


def _seq_lens(c):
    if not c._has_lens:
        return None
    c.set("_lens", c.np.integers(1, seq_len(c), size=batch(c), endpoint=True).astype(np.int32))
    return c._lens


def recurrent(op: str, extra_inputs: list, extra_attrs: dict) -> OpSpec:
    g = GATES[op]
    inputs = [
        In("X", rank=(3, 3), room=g),
        In("W", shape=lambda c: (nd(c), g * c.hidden_size, c.s[2]), weight=True),
        In("R", shape=lambda c: (nd(c), g * c.hidden_size, c.hidden_size), weight=True),
        In("B", shape=lambda c: (nd(c), 2 * g * c.hidden_size), optional=True, weight=True),
        Const("sequence_lens", _seq_lens),
        In("initial_h", shape=_state, optional=True),
        *extra_inputs,
    ]
    nouts = 3 if op == "LSTM" else 2
    attrs = {
        # ORT: "Batchwise recurrent operations (layout == 1) are not supported"
        "layout": lambda c: Maybe(Choice((0,)) if c.cfg.target == "ort" else BOOL),
        "direction": _direction(op),
        "hidden_size": lambda c: Int(1, _h_max(c, op, nd(c))),
        "activations": _activations(op),
        "_alpha": _param(NEEDS_ALPHA, 0.1, 1.0),
        "activation_alpha": _repeat("_alpha"),
        "_beta": _param(NEEDS_BETA, 0.0, 1.0),
        "activation_beta": _repeat("_beta"),
        "clip": Maybe(Float(0.5, 5.0), 0.7),
        "_has_lens": BOOL,
        "_nout": Choice(range(1, nouts + 1)),  # outputs Y, Y_h (, Y_c) as a prefix
        **extra_attrs,
    }

    def out(c) -> list[TensorType]:
        return [TensorType(_y(c), c.T), TensorType(_state(c), c.T), TensorType(_state(c), c.T)][:c._nout]

    checks = {
        "X is 3-D": lambda c: c.r == 3,
        "W is [dirs, gates*hidden, input]": lambda c: c.ins[1].shape == (nd(c), g * c.hidden_size, c.s[2]),
        "R is [dirs, gates*hidden, hidden]": lambda c: c.ins[2].shape == (nd(c), g * c.hidden_size, c.hidden_size),
        "B is [dirs, 2*gates*hidden]": lambda c: c.ins[3] is None or c.ins[3].shape == (nd(c), 2 * g * c.hidden_size),
        "sequence_lens in [1, seq_length]": lambda c: c.ins[4] is None or bool(
            np.all((c._lens >= 1) & (c._lens <= seq_len(c)))),
        "initial state is [dirs, batch, hidden]": lambda c: all(
            t is None or t.shape == _state(c) for t in c.ins[5:7]),
        "one activation per gate function and direction": lambda c: c.activations is None
        or len(c.activations) == NACTS[op] * nd(c),
        "parameterized activations get their alpha / beta": lambda c: c.activations is None or (
            (c._alpha is not None or not set(NEEDS_ALPHA) & set(c.activations))
            and (c._beta is not None or not set(NEEDS_BETA) & set(c.activations))),
        "unbounded activations on short sequences": lambda c: c.activations is None
        or seq_len(c) <= GROW_STEPS or set(c.activations) <= set(BOUNDED),
        "bounded gate activations": lambda c: op == "RNN" or c.activations is None
        or all(a in BOUNDED for a in c.activations[::NACTS[op]]),
    }
    # ORT registers double GRU/LSTM kernels that throw "does not support double yet" at run time;
    # the type override is static, so double is left out for every target
    types = {"T": ("float16", "float32")} if op != "RNN" else {}
    return OpSpec(op, "rnn", inputs, out, attrs=attrs, types=types, checks=checks, since=14)


def _peepholes(c) -> tuple[int, ...]:
    return (nd(c), 3 * c.hidden_size)


SPECS: list[OpSpec] = [
    recurrent("RNN", [], {}),
    recurrent("GRU", [], {"linear_before_reset": Maybe(BOOL)}),
    recurrent("LSTM", [In("initial_c", shape=_state, optional=True), In("P", shape=_peepholes, optional=True,
                                                                         weight=True)],
              {"input_forget": Maybe(BOOL)}),
]
