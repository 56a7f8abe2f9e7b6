"""Broadcasting operators: arithmetic, comparison, logical, bitwise, Where, and the variadic reductions."""

from __future__ import annotations

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.dsl import BOOL, Choice, In, OpSpec, broadcast_shapes


def bcast_prev(c):
    """Any shape that broadcasts with all inputs so far."""
    return c.bcast(broadcast_shapes(*(t.shape for t in c.ins if t is not None)))


def out_like(dtype=None):
    def out(c) -> list[TensorType]:
        shape = broadcast_shapes(*(t.shape for t in c.ins if t is not None))
        return [TensorType(shape, dtype or c.ins[-1].dtype)]
    return out


def binary(op: str, out=None, hint=None, since: int = 1, **attrs) -> OpSpec:
    return OpSpec(op, "broadcast", [In("A", rank=(0, 99)), In("B", shape=bcast_prev, hint=hint)],
                  out or out_like(), attrs=attrs, since=since)


def variadic(op: str) -> OpSpec:
    return OpSpec(op, "broadcast", [In("data_0", rank=(0, 99), variadic=True, shape=bcast_prev)],
                  out_like(), arity=(1, 4))


SPECS = [
    *(binary(op) for op in ("Add", "Sub", "Mul")),
    # divisors (nonzero, and not -1 under an INT_MIN dividend: both trap) are kept by the value
    # domains of solve/intervals.py, which also keep float quotients, powers and remainders finite
    binary("Div"),
    OpSpec("Pow", "broadcast", [In("X", rank=(0, 99)), In("Y", shape=bcast_prev)],
           lambda c: [TensorType(broadcast_shapes(c.s, c.ins[1].shape), c.T)], since=15),
    OpSpec("Mod", "broadcast", [In("A", rank=(0, 99)), In("B", shape=bcast_prev)],
           out_like(),
           # fmod=0 (Python-style remainder) is only defined for integers
           attrs={"fmod": lambda c: BOOL if not c.T.startswith("float") else Choice((1,))}),
    *(binary(op, out=out_like("bool")) for op in
      ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor")),
    # shift amounts stay below the bit width (solve/intervals.py's domain): larger ones are undefined in C
    OpSpec("BitShift", "broadcast", [In("X", rank=(0, 99)), In("Y", shape=bcast_prev)], out_like(),
           attrs={"direction": Choice(("LEFT", "RIGHT"))}, since=11),
    *(binary(op, since=18) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")),
    OpSpec("Where", "broadcast",
           [In("condition", rank=(0, 99)), In("X", shape=bcast_prev), In("Y", shape=bcast_prev)],
           out_like(), since=16),
    *(variadic(op) for op in ("Max", "Min", "Mean", "Sum")),
]
