"""Normalizations: BatchNormalization (inference), InstanceNormalization, LayerNormalization,
LpNormalization, MeanVarianceNormalization, RMSNormalization, GroupNormalization."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from dlcfuzz.ir import Node, TensorType, Value
from dlcfuzz.spec.dsl import AnyOf, Axes, Choice, Dom, Exact, Float, In, Maybe, OpSpec, ShapeDom, axis_dom, divisors
from dlcfuzz.spec.reduce import axes_in_range


@dataclass(frozen=True, slots=True)
class Including(Dom):
    """Distinct signed axes of a rank-``rank`` tensor, in any order, always including ``axis``."""

    axis: int
    rank: int

    def sample(self, rng: random.Random) -> list[int]:
        others = Axes(self.rank, 0, None, tuple(a for a in range(self.rank) if a != self.axis)).sample(rng)
        others.insert(rng.randint(0, len(others)), self.axis - self.rank if rng.random() < 0.5 else self.axis)
        return others

    def __contains__(self, v) -> bool:
        return v in Axes(self.rank, 1) and self.axis in [a % self.rank for a in v]

    def size(self) -> int:
        return Axes(self.rank, 1).size()


EPS = Maybe(Float(0.001, 0.1))  # > 0: a zero variance stays defined


def same(c) -> list[TensorType]:
    return [c.x]


def chan(c) -> int:
    """C of an (N x C x D1 ... Dn) tensor; a rank-1 tensor has a single channel (ONNX inference)."""
    return c.s[1] if c.r >= 2 else 1


def per_channel(name: str, hint=None) -> In:
    # T1/T2 (scale/bias, mean/var) may differ from T in ONNX, but ORT only registers kernels with
    # T = T1 = T2, so they share X's type variable
    return In(name, T="T", shape=lambda c: (chan(c),), weight=True, hint=hint)


def channel_shapes(*names: str):
    def check(c) -> bool:
        return all(t.shape == (chan(c),) for t in c.ins[1:1 + len(names)] if t is not None)
    return check


def broadcasts_to_x(k: int):
    def check(c) -> bool:
        t = c.ins[k] if k < len(c.ins) else None
        return t is None or c.bcast(c.s, uni=True).accepts(t.shape)
    return check


def _normalized(c) -> tuple[int, ...]:
    """X's shape from the normalization axis on: the shape of a Scale every compiler takes."""
    return c.s[(c.axis if c.axis is not None else -1) % c.r:]


def normalized_or_broadcast(c) -> ShapeDom:
    """Scale (or B) broadcasts unidirectionally to X (ONNX); half of the time it has the normalized
    shape, the one form every compiler takes (TVM's layer_norm and rms_norm want it)."""
    return AnyOf((Exact(_normalized(c)), c.bcast(c.s, uni=True)))


def normalized_forms(node: Node, values: Mapping[str, Value]) -> list[str]:
    """The profile keys of a normalization's later inputs: ``in1.shape=normalized`` where the input has
    X's shape from the axis on, else ``in1.shape=broadcast``."""
    x = values[node.inputs[0]].type.shape
    kept = x[node.attrs.get("axis", -1) % len(x):]
    return [f"in{k}.shape={'normalized' if values[name].type.shape == kept else 'broadcast'}"
            for k, name in enumerate(node.inputs[1:], start=1) if name]


def layer_norm_out(c) -> list[TensorType]:
    axis = (c.axis if c.axis is not None else -1) % c.r
    stats = TensorType(c.s[:axis] + (1,) * (c.r - axis), "float32")  # U = stash_type (1: float)
    return [c.x, stats, stats][:c._nout]


SPECS = [
    OpSpec("BatchNormalization", "norm",
           [In("X", rank=(1, 99)), per_channel("scale"), per_channel("B"), per_channel("input_mean"),
            per_channel("input_var", hint={"min": 0})],
           same,
           attrs={"epsilon": EPS, "momentum": Maybe(Float(0.0, 1.0)),
                  # training mode would add the running_mean/running_var outputs: inference only
                  "training_mode": Maybe(Choice((0,)))},
           checks={"scale, B, input_mean, input_var have shape [C]":
                   channel_shapes("scale", "B", "input_mean", "input_var"),
                   "inference mode (one output)": lambda c: not c.training_mode},
           since=15),
    OpSpec("InstanceNormalization", "norm",
           [In("input", rank=(3, 99)), per_channel("scale"), per_channel("B")],
           same, attrs={"epsilon": EPS},
           checks={"rank >= 3": lambda c: c.r >= 3, "scale, B have shape [C]": channel_shapes("scale", "B")},
           since=6),
    OpSpec("LayerNormalization", "norm",
           [In("X", rank=(1, 99)), In("Scale", shape=normalized_or_broadcast, weight=True),
            In("B", shape=normalized_or_broadcast, weight=True, optional=True)],
           layer_norm_out,
           attrs={"axis": lambda c: Maybe(axis_dom(c.r)), "epsilon": EPS,
                  # outputs Y, Mean, InvStdDev as a prefix (the DSL cannot skip a middle output)
                  "_nout": Choice((1, 2, 3)),
                  # stash_type is the precision of the computation and the type U of Mean/InvStdDev:
                  # float (1) only.  At 16 ONNX's function body computes in bfloat16 while ORT's kernel
                  # computes in float, so a compiler that follows either differs by bfloat16's rounding
                  "stash_type": Maybe(Choice((1,)))},
           checks={"axis in [-r, r-1]": lambda c: -c.r <= (c.axis if c.axis is not None else -1) < c.r,
                   "Scale broadcasts to X": broadcasts_to_x(1), "B broadcasts to X": broadcasts_to_x(2),
                   "stash_type is float": lambda c: c.stash_type in (None, 1)},
           features=normalized_forms, since=17),
    OpSpec("LpNormalization", "norm", [In("input", rank=(1, 99))], same,
           attrs={"axis": lambda c: Maybe(axis_dom(c.r)), "p": Maybe(Choice((1, 2)))},
           checks={"axis in [-r, r-1]": lambda c: -c.r <= (c.axis if c.axis is not None else -1) < c.r,
                   "p in {1, 2}": lambda c: c.p in (None, 1, 2)},
           since=1),
    OpSpec("MeanVarianceNormalization", "norm", [In("X", rank=(1, 99))], same,
           # the default axes [0, 2, 3] (omitted attribute) fail ONNX's strict shape inference of the
           # function body (onnx 1.23), so axes is always given
           # ORT divides by a zero variance (NaN) where ONNX's function body adds 1e-9 (0): normalize
           # over a dimension of length >= 2 whenever there is one, so fewer slices are constant
           attrs={"_long": lambda c: Choice([i for i, d in enumerate(c.s) if d >= 2] or [None]),
                  "axes": lambda c: Axes(c.r, lo=1) if c._long is None else Including(c._long, c.r)},
           # the schema allows float16/double, but the function body adds a float32 epsilon, so
           # onnx 1.23's checker rejects those types (an ONNX bug); ORT only has float32 anyway
           types={"T": ("float32",)},
           checks={"axes in [-r, r-1]": lambda c: axes_in_range(c.axes, c.r)},
           since=13),
]

# RMSNormalization: the function body of opset 23 multiplies the normalized X (in X's type) by Scale,
# so T and V are one type in practice (ONNX's checker and ORT reject others); stash_type 1 (float)
# only: the other precisions are bfloat16-only or not implemented by the reference
SPECS.append(OpSpec(
    "RMSNormalization", "norm",
    [In("X", rank=(1, 99)), In("scale", T="T", shape=normalized_or_broadcast, weight=True)],
    same,
    attrs={"axis": lambda c: Maybe(axis_dom(c.r)), "epsilon": EPS, "stash_type": Maybe(Choice((1,)))},
    checks={"axis in [-r, r-1]": lambda c: -c.r <= (c.axis if c.axis is not None else -1) < c.r,
            "scale broadcasts to X": broadcasts_to_x(1)},
    features=normalized_forms, since=23,
))


# GroupNormalization: version 21 (scale/bias of shape [C]).  Version 18 (scale/bias of shape
# [num_groups]) gets no spec: the ONNX checker rejects it as deprecated at opsets 18-20.  ORT has no
# kernel for either and runs the node-dependent function body (backends/ort.py's
# context_function_profile finds the dtypes it runs).
GROUP_NORM = OpSpec(
    "GroupNormalization", "norm",
    [In("X", rank=(2, 99)), per_channel("scale"), per_channel("bias")],
    same,
    attrs={"num_groups": lambda c: Choice(divisors(c.s[1])), "epsilon": EPS,
           # stage-one precision: float, float16, double (bfloat16, 16, is outside dlcfuzz's dtypes)
           "stash_type": Maybe(Choice((1, 10, 11)))},
    checks={"num_groups divides C": lambda c: c.s[1] % c.num_groups == 0,
            "scale, bias have shape [C]": channel_shapes("scale", "bias")},
    since=21,
)
SPECS.append(GROUP_NORM)
