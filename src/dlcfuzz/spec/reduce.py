"""Reductions: Reduce* over any subset of axes (attribute or input form, by opset), ArgMax/ArgMin."""

from __future__ import annotations

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.dsl import BOOL, Axes, Choice, Const, Dom, In, Maybe, OpSpec, axis_dom, i64

OMIT = Choice((None,))





def axes_in_range(axes, r: int) -> bool:
    return all(-r <= a < r for a in axes or ())


def reduced_shape(s: tuple[int, ...], axes, keepdims) -> tuple[int, ...]:
    """The shape after reducing ``axes`` (all when empty); ``keepdims`` None means the default 1."""
    red = {a % len(s) for a in axes} if axes else set(range(len(s)))
    keep = keepdims != 0
    return tuple(1 if i in red else d for i, d in enumerate(s) if keep or i not in red)


# ReduceLogSum and ReduceLogSumExp are defined through Log, which only floats have: ONNX dropped their
# integer types in opset 28, so an integer one has no defined result to compare (its earlier versions
# still list them)
LOG_DEFINED = {"T": ("float32", "float64", "float16")}


def reduce(op: str, types: dict[str, tuple[str, ...]] | None = None) -> OpSpec:
    """ReduceSum takes axes as an input since opset 13, the others since opset 18 (before: attribute).
    The input form distinguishes an omitted input from an empty one, and noop_with_empty_axes=1
    turns both into the identity."""

    def as_input(c) -> bool:
        return op == "ReduceSum" or c.cfg.opset >= 18

    def axes_dom(c) -> Dom:
        if as_input(c):
            return Maybe(Axes(c.r), 0.2)  # None: input omitted, []: an empty axes tensor
        # an attribute cannot be an empty list; omitted reduces all axes
        return Maybe(Axes(c.r, lo=1), 0.25) if c.r else OMIT

    def out(c) -> list[TensorType]:
        if not c._axes and c.noop_with_empty_axes == 1:
            return [c.x]
        return [TensorType(reduced_shape(c.s, c._axes, c.keepdims), c.T)]

    return OpSpec(
        op, "reduce",
        [In("data", rank=(0, 99)),
         Const("axes", lambda c: i64(c._axes) if as_input(c) and c._axes is not None else None)],
        out,
        attrs={
            "_axes": axes_dom,
            "axes": lambda c: OMIT if as_input(c) else Choice((c._axes,)),
            "keepdims": Maybe(BOOL),
            "noop_with_empty_axes": lambda c: Maybe(BOOL) if as_input(c) else OMIT,
        },
        checks={"axes in [-r, r-1]": lambda c: axes_in_range(c._axes, c.r)},
        types=types or {},
        since=13,
    )


def arg(op: str) -> OpSpec:
    def out(c) -> list[TensorType]:
        return [TensorType(reduced_shape(c.s, [c.axis or 0], c.keepdims), "int64")]

    return OpSpec(
        op, "reduce", [In("data", rank=(1, 99))], out,
        attrs={"axis": lambda c: Maybe(axis_dom(c.r)), "keepdims": Maybe(BOOL), "select_last_index": Maybe(BOOL)},
        checks={"axis in [-r, r-1]": lambda c: -c.r <= (c.axis or 0) < c.r},
        since=13,
    )


SPECS = [
    *(reduce(op) for op in (
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
    )),
    reduce("ReduceLogSumExp", LOG_DEFINED),
    reduce("ReduceLogSum", LOG_DEFINED),
    arg("ArgMax"),
    arg("ArgMin"),
]
