"""Elementwise unary operators: one input of any rank, output of the same type (unless noted);
CastLike also reads a second input of any shape (only its type matters)."""

from __future__ import annotations

import numpy as np

from dlcfuzz.ir import DTYPE_OF_CODE, DTYPES, ONNX_CODE, TensorType
from dlcfuzz.spec.dsl import Choice, Const, Dom, Float, In, Maybe, OpSpec, ShapeDom


class AnyShape(ShapeDom):
    """Any shape (for an input whose values are not read); new ones are small."""

    ranks = None

    def __init__(self, max_rank: int, max_dim: int) -> None:
        self.max_rank, self.max_dim = max_rank, max_dim

    def accepts(self, shape: tuple[int, ...]) -> bool:
        return True

    def sample(self, rng) -> tuple[int, ...]:
        return tuple(rng.randint(1, self.max_dim) for _ in range(rng.randint(0, min(2, self.max_rank))))


def same(c) -> list[TensorType]:
    return [c.x]


def as_bool(c) -> list[TensorType]:
    return [TensorType(c.s, "bool")]


def unary(op: str, out=same, since: int = 1, types: dict | None = None, **attrs: Dom) -> OpSpec:
    """A unary elementwise operator on tensors of rank 0..max; attributes given as domains."""
    return OpSpec(op, "elementwise", [In("X", rank=(0, 99))], out, attrs=dict(attrs),
                  types=types or {}, since=since)


def _clip_bound(which: str):
    def value(c):
        v = getattr(c, which)
        if v is None:
            return None
        if not c.T.startswith("float"):
            v = round(v) if not c.T.startswith("uint") else abs(round(v))
        return np.array(v, dtype=c.T)
    return value


SPECS = [
    *(unary(op) for op in (
        "Abs", "Neg", "Ceil", "Floor", "Round", "Exp", "Log", "Sqrt", "Reciprocal", "Sigmoid", "Tanh",
        "Relu", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
        "Erf", "Softplus", "Softsign", "Sign", "Identity", "HardSwish",
    )),
    unary("Not"),
    unary("BitwiseNot", since=18),
    unary("Mish", since=18),
    unary("Gelu", since=20, approximate=Maybe(Choice(("none", "tanh")))),
    unary("IsNaN", out=as_bool),
    unary("IsInf", out=as_bool, detect_negative=Maybe(Choice((0, 1))), detect_positive=Maybe(Choice((0, 1)))),
    unary("HardSigmoid", alpha=Maybe(Float(0.05, 1.0)), beta=Maybe(Float(-1.0, 1.0))),
    unary("Elu", alpha=Maybe(Float(0.1, 2.0))),
    unary("Selu", alpha=Maybe(Float(0.5, 2.0)), gamma=Maybe(Float(0.5, 2.0))),
    unary("LeakyRelu", alpha=Maybe(Float(0.0, 1.0))),
    unary("Celu", alpha=Maybe(Float(0.1, 2.0))),
    unary("ThresholdedRelu", alpha=Maybe(Float(-1.0, 2.0))),
    unary("Shrink", bias=Maybe(Float(0.0, 1.0)), lambd=Maybe(Float(0.0, 1.5))),
    OpSpec("Clip", "elementwise",
           [In("input", rank=(0, 99)), Const("min", _clip_bound("_min")), Const("max", _clip_bound("_max"))],
           same,
           # min > max is defined (every element becomes max), so the bounds are drawn independently
           attrs={"_min": Maybe(Float(-3.0, 0.5), 0.3), "_max": Maybe(Float(-0.5, 3.0), 0.3)},
           since=13),
    OpSpec("Cast", "elementwise", [In("input", rank=(0, 99))],
           lambda c: [TensorType(c.s, DTYPE_OF_CODE[c.to])],
           attrs={"to": lambda c: Choice([ONNX_CODE[d] for d in (c.cfg.dtypes or DTYPES)])},
           since=13),
    OpSpec("CastLike", "elementwise",
           [In("input", rank=(0, 99)), In("target_type", shape=lambda c: AnyShape(c.cfg.max_rank, c.cfg.max_dim))],
           lambda c: [TensorType(c.s, c.ins[1].dtype)],
           since=15),
]
