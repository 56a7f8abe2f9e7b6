"""Sequence and Optional patterns, as composite operators.

ONNX sequences (SplitToSequence, SequenceConstruct, SequenceAt, SequenceInsert, SequenceErase,
SequenceLength, SequenceEmpty, ConcatFromSequence) and optionals (Optional, OptionalHasElement,
OptionalGetElement) take or make values that are not tensors, which dlcfuzz's IR does not type.
Real exporters emit them in short patterns (torch.onnx: a tensor split into a list, then indexed or
concatenated), so each spec here is one such pattern: one IR node that reads tensors and makes
tensors, and whose ``Composite`` says how the ONNX exporter writes it as the chain of ONNX
operators.  The spec's name joins the chain's operators with "+", as titles and profiles show it.

Everything that reads IR nodes (the solver, intervals, input synthesis, the reducer, localization)
sees one tensor operator; the values inside the chain are never IR values.  Positions and split
lengths are ``Const`` inputs of the IR node, so they are initializers, Constant nodes or pinned
runtime inputs like any other constant-like input.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from dlcfuzz.ir import ONNX_CODE, Node, TensorType
from dlcfuzz.spec.dsl import (
    BOOL,
    AnyOf,
    Choice,
    Composite,
    Const,
    Dims,
    Exact,
    In,
    Int,
    Maybe,
    OpSpec,
    Subset,
    axis_dom,
    inner,
)

SEQ = "sequence"
POSITION = Choice(("int64", "int32"))  # ONNX's I: a position or split of either integer type


def _name(node: Node, k: int) -> str:
    """The name of the k-th ONNX node of a composite's chain."""
    return f"{node.name}.{k}" if node.name else ""


def _attrs(node: Node, **names: str) -> dict:
    """The IR node's attributes ``names`` maps to ONNX attribute names (absent ones stay absent:
    the ONNX default)."""
    return {onnx: node.attrs[ir] for onnx, ir in names.items() if node.attrs.get(ir) is not None}


def _scalar(c, value: int) -> np.ndarray:
    return np.array(value, dtype=c._I)


def _strip(inputs: list[str]) -> list[str]:
    """Inputs without trailing omitted ones (ONNX writes none)."""
    out = list(inputs)
    while out and not out[-1]:
        out.pop()
    return out


def _same_rank(c) -> AnyOf:
    """A sequence element: the first input's shape, or any shape of its rank."""
    return AnyOf((Exact(c.s), Dims([c.dim()] * c.r)))


# ---------------------------------------------------------------------------------------------
# SplitToSequence, then ConcatFromSequence or SequenceLength
# ---------------------------------------------------------------------------------------------
def _chunks(c) -> list[int]:
    """The lengths along ``axis`` of SplitToSequence's pieces."""
    n = c.s[c.axis % c.r]
    if c._mode == "none":  # no split: pieces of length 1
        return [1] * n
    if c._mode == "scalar":  # pieces of length split, the last one shorter
        return [c._chunk] * (n // c._chunk) + ([n % c._chunk] if n % c._chunk else [])
    cuts = [0, *c._cuts, n]
    return [b - a for a, b in pairwise(cuts)]


def _pieces(c) -> list[tuple[int, ...]]:
    """The shapes of SplitToSequence's pieces: keepdims=0 squeezes the axis, only without split."""
    ax = c.axis % c.r
    if c._mode == "none" and c.keepdims == 0:
        return [c.s[:ax] + c.s[ax + 1:]] * c.s[ax]
    return [(*c.s[:ax], k, *c.s[ax + 1:]) for k in _chunks(c)]


def _split(c) -> np.ndarray | None:
    if c._mode == "none":
        return None
    if c._mode == "scalar":
        return _scalar(c, c._chunk)
    return np.array(_chunks(c), dtype=c._I)


def _split_axis(c):
    """Mostly an axis longer than 1 (which splits into several pieces); any axis otherwise."""
    long = [a for a, d in enumerate(c.s) if d > 1]
    return Choice([*long, *(a - c.r for a in long)]) if c._several and long else axis_dom(c.r)


def _several(c) -> bool:
    """Whether the split is drawn to make several pieces (the axis is longer than 1)."""
    return bool(c._several) and c.s[c.axis % c.r] > 1


SPLIT_ATTRS = {
    # nine in ten splits make several pieces, the others may make one, a degenerate sequence (TVM 0.27
    # loops forever concatenating it: docs/discrepancies.md)
    "_several": Choice((1,) * 9 + (0,)),
    "axis": _split_axis,
    # split omitted (pieces of 1), a scalar (pieces of that length, the last one shorter), or 1-D lengths
    "_mode": Choice(("none", "scalar", "list")),
    "_chunk": lambda c: Int(1, c.s[c.axis % c.r] - _several(c)),
    "_cuts": lambda c: Subset(range(1, c.s[c.axis % c.r]), lo=int(_several(c))),
    # ONNX: keepdims only applies without split ("If input 'split' is specified, this attribute is
    # ignored"); ORT 1.31 squeezes a scalar split's pieces too (and fails on pieces longer than 1), so
    # with a split it is 1 or omitted (docs/discrepancies.md)
    "keepdims": lambda c: Maybe(BOOL) if c._mode == "none" else Maybe(Choice((1,)), 0.5),
    "_I": POSITION,
}
SPLIT_CHECKS = {
    "split lengths sum to the axis length": lambda c: sum(_chunks(c)) == c.s[c.axis % c.r],
    "axis in [-r, r-1]": lambda c: -c.r <= c.axis < c.r,
}


def _split_node(node: Node, out: str) -> Node:
    return Node("SplitToSequence", node.inputs[:2], [out], _attrs(node, axis="axis", keepdims="keepdims"),
                _name(node, 0))


def _equal(c) -> bool:
    return len(set(_pieces(c))) == 1


def _new_axis(c):
    rank = len(_pieces(c)[0])
    if rank == 0:  # scalars only stack
        return Choice((1,))
    return Maybe(BOOL, 0.5) if _equal(c) else Choice((None, 0))


def _concat_axis(c, rank: int, differs: int | None):
    """ConcatFromSequence's axis over pieces of ``rank``: any with new_axis (in [-rank-1, rank]), any
    where the pieces are equal, else the one axis they differ along."""
    if c.new_axis:
        return Int(-rank - 1, rank)
    if differs is None:
        return axis_dom(rank)
    return Choice((differs, differs - rank))


def _concat_shape(pieces: list[tuple[int, ...]], axis: int, new_axis: bool) -> tuple[int, ...]:
    if new_axis:
        ax = axis % (len(pieces[0]) + 1)
        return (*pieces[0][:ax], len(pieces), *pieces[0][ax:])
    ax = axis % len(pieces[0])
    return (*pieces[0][:ax], sum(p[ax] for p in pieces), *pieces[0][ax + 1:])


def _concats(pieces: list[tuple[int, ...]], axis: int, new_axis: bool) -> bool:
    """Whether ConcatFromSequence takes the pieces: all equal (new_axis), or equal off the axis."""
    if new_axis:
        return len(set(pieces)) == 1 and -len(pieces[0]) - 1 <= axis <= len(pieces[0])
    if not pieces[0] or not -len(pieces[0]) <= axis < len(pieces[0]):
        return False
    ax = axis % len(pieces[0])
    return len({p[:ax] + p[ax + 1:] for p in pieces}) == 1


SPLIT_CONCAT = OpSpec(
    "SplitToSequence+ConcatFromSequence", SEQ,
    [In("input", T="T", rank=(1, 99)), Const("split", _split)],
    lambda c: [TensorType(_concat_shape(_pieces(c), c.concat_axis, bool(c.new_axis)), c.T)],
    attrs={
        **SPLIT_ATTRS,
        "new_axis": _new_axis,
        "concat_axis": lambda c: _concat_axis(c, len(_pieces(c)[0]), None if _equal(c) else c.axis % c.r),
    },
    checks={**SPLIT_CHECKS,
            "the pieces concatenate": lambda c: _concats(_pieces(c), c.concat_axis, bool(c.new_axis))},
    since=11,
    doc="x split into a sequence, concatenated (or stacked) again along any axis the pieces allow",
    composite=Composite(
        ("SplitToSequence", "ConcatFromSequence"),
        {"T": (("SplitToSequence", "T"), ("ConcatFromSequence", "S"))},
        lambda n, _types: [_split_node(n, inner(n, 0)),
                   Node("ConcatFromSequence", [inner(n, 0)], list(n.outputs),
                        _attrs(n, axis="concat_axis", new_axis="new_axis"), _name(n, 1))]),
)

SPLIT_LENGTH = OpSpec(
    "SplitToSequence+SequenceLength", SEQ,
    [In("input", T="T", rank=(1, 99)), Const("split", _split)],
    lambda c: [TensorType((), "int64")],
    attrs=dict(SPLIT_ATTRS),
    checks=dict(SPLIT_CHECKS),
    since=11,
    doc="how many pieces SplitToSequence makes",
    composite=Composite(
        ("SplitToSequence", "SequenceLength"),
        {"T": (("SplitToSequence", "T"), ("SequenceLength", "S"))},
        lambda n, _types: [_split_node(n, inner(n, 0)),
                   Node("SequenceLength", [inner(n, 0)], list(n.outputs), {}, _name(n, 1))]),
)


# ---------------------------------------------------------------------------------------------
# SequenceConstruct, then SequenceAt or SequenceLength
# ---------------------------------------------------------------------------------------------
CONSTRUCT_AT = OpSpec(
    "SequenceConstruct+SequenceAt", SEQ,
    [In("inputs", T="T", variadic=True, shape=_same_rank),
     Const("position", lambda c: _scalar(c, c._pos))],
    lambda c: [c.ins[c._pos % c.n]],
    attrs={"_pos": lambda c: Int(-c.n, c.n - 1), "_I": POSITION},
    arity=(1, 4),
    checks={"position in [-n, n-1]": lambda c: -c.n <= c._pos < c.n},
    since=11,
    doc="a sequence of tensors (of one dtype, any shapes of one rank), indexed by a constant position",
    composite=Composite(
        ("SequenceConstruct", "SequenceAt"),
        {"T": (("SequenceConstruct", "T"), ("SequenceAt", "T"))},
        lambda n, _types: [Node("SequenceConstruct", n.inputs[:-1], [inner(n, 0)], {}, _name(n, 0)),
                   Node("SequenceAt", [inner(n, 0), n.inputs[-1]], list(n.outputs), {}, _name(n, 1))]),
)


def _any_rank(c) -> AnyOf:
    """A sequence element for SequenceLength: of the first input's rank or one less."""
    return AnyOf((Exact(c.s), Dims([c.dim()] * c.r), Dims([c.dim()] * max(0, c.r - 1))))


CONSTRUCT_LENGTH = OpSpec(
    "SequenceConstruct+SequenceLength", SEQ,
    [In("inputs", T="T", variadic=True, shape=_any_rank)],
    lambda c: [TensorType((), "int64")],
    arity=(1, 4),
    since=11,
    doc="the length of a sequence of tensors (of one dtype, any shapes)",
    composite=Composite(
        ("SequenceConstruct", "SequenceLength"),
        {"T": (("SequenceConstruct", "T"),)},
        lambda n, _types: [Node("SequenceConstruct", list(n.inputs), [inner(n, 0)], {}, _name(n, 0)),
                   Node("SequenceLength", [inner(n, 0)], list(n.outputs), {}, _name(n, 1))]),
)


# ---------------------------------------------------------------------------------------------
# SequenceConstruct, SequenceInsert, SequenceErase, ConcatFromSequence
# ---------------------------------------------------------------------------------------------
def _concat_part(c) -> Dims | Exact:
    """A tensor of the sequence: the first input's shape off the concat axis (exactly it to stack)."""
    if c.new_axis:
        return Exact(c.s)
    ax = c.concat_axis % c.r
    return Dims([c.dim() if k == ax else d for k, d in enumerate(c.s)])


def _edited(c) -> list[tuple[int, ...]]:
    """The shapes of the sequence after the insertion and the erasure (ONNX's defaults: append, erase
    the last)."""
    seq = [t.shape for t in c.ins[3:]]
    # a negative position counts from the back as Python's list.insert does (-1: before the last)
    seq.insert(c._insert if c._has_insert else len(seq), c.s)
    seq.pop(c._erase if c._has_erase else -1)
    return seq


INSERT_ERASE = OpSpec(
    "SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence", SEQ,
    # the inserted tensor first: the sequence is the variadic tail, so that the chain's inputs are
    # positional (tensor, insert position or "", erase position or "", sequence...)
    [In("tensor", T="T", room=4),
     Const("insert_position", lambda c: _scalar(c, c._insert) if c._has_insert else None),
     Const("erase_position", lambda c: _scalar(c, c._erase) if c._has_erase else None),
     In("inputs", T="T", variadic=True, shape=_concat_part)],
    lambda c: [TensorType(_concat_shape(_edited(c), c.concat_axis, bool(c.new_axis)), c.T)],
    attrs={
        "new_axis": lambda c: Choice((1,)) if c.r == 0 else Maybe(BOOL, 0.5),
        "concat_axis": lambda c: Int(-c.r - 1, c.r) if c.new_axis else axis_dom(c.r),
        "_has_insert": BOOL,
        "_insert": lambda c: Int(-c.n, c.n),  # ONNX: [-n, n] for a sequence of n
        "_has_erase": BOOL,
        "_erase": lambda c: Int(-c.n - 1, c.n),  # [-(n+1), n] after the insertion
        "_I": POSITION,
    },
    arity=(1, 3),
    checks={"insert position in [-n, n]": lambda c: -c.n <= c._insert <= c.n,
            "erase position in [-n-1, n]": lambda c: -c.n - 1 <= c._erase <= c.n,
            "the edited sequence concatenates": lambda c: _concats(_edited(c), c.concat_axis, bool(c.new_axis))},
    since=11,
    doc="a sequence edited by SequenceInsert and SequenceErase (constant or default positions), concatenated",
    composite=Composite(
        ("SequenceConstruct", "SequenceInsert", "SequenceErase", "ConcatFromSequence"),
        {"T": (("SequenceConstruct", "T"), ("SequenceInsert", "S"), ("SequenceErase", "S"),
               ("ConcatFromSequence", "S"))},
        lambda n, _types: [
            Node("SequenceConstruct", n.inputs[3:], [inner(n, 0)], {}, _name(n, 0)),
            Node("SequenceInsert", _strip([inner(n, 0), n.inputs[0], n.inputs[1]]), [inner(n, 1)], {}, _name(n, 1)),
            Node("SequenceErase", _strip([inner(n, 1), n.inputs[2]]), [inner(n, 2)], {}, _name(n, 2)),
            Node("ConcatFromSequence", [inner(n, 2)], list(n.outputs),
                 _attrs(n, axis="concat_axis", new_axis="new_axis"), _name(n, 3))]),
)


# ---------------------------------------------------------------------------------------------
# SequenceEmpty, SequenceInsert, SequenceAt
# ---------------------------------------------------------------------------------------------
EMPTY_INSERT_AT = OpSpec(
    "SequenceEmpty+SequenceInsert+SequenceAt", SEQ,
    [In("tensor", T="T"),
     Const("insert_position", lambda c: _scalar(c, 0) if c._has_insert else None),
     Const("position", lambda c: _scalar(c, c._at))],
    lambda c: [c.x],
    attrs={
        # SequenceEmpty's element type (default float)
        "dtype": lambda c: Maybe(Choice((ONNX_CODE[c.T],))) if c.T == "float32" else Choice((ONNX_CODE[c.T],)),
        "_has_insert": BOOL,  # into an empty sequence only at 0
        "_at": Choice((0, -1)),
        "_I": POSITION,
    },
    checks={"dtype is the tensor's": lambda c: c.dtype in (None, ONNX_CODE[c.T])},
    since=11,
    doc="a tensor inserted into an empty sequence, read back",
    composite=Composite(
        ("SequenceEmpty", "SequenceInsert", "SequenceAt"),
        {"T": (("SequenceEmpty", "S"), ("SequenceInsert", "S"), ("SequenceAt", "T"))},
        lambda n, _types: [
            Node("SequenceEmpty", [], [inner(n, 0)], _attrs(n, dtype="dtype"), _name(n, 0)),
            Node("SequenceInsert", _strip([inner(n, 0), n.inputs[0], n.inputs[1]]), [inner(n, 1)], {}, _name(n, 1)),
            Node("SequenceAt", [inner(n, 1), n.inputs[2]], list(n.outputs), {}, _name(n, 2))]),
)


# ---------------------------------------------------------------------------------------------
# Optional, then OptionalGetElement or OptionalHasElement
# ---------------------------------------------------------------------------------------------
OPTIONAL_GET = OpSpec(
    "Optional+OptionalGetElement", SEQ,
    [In("input", T="T")],
    lambda c: [c.x],
    since=15,
    doc="a tensor wrapped in an optional and unwrapped",
    composite=Composite(
        ("Optional", "OptionalGetElement"),
        {"T": (("Optional", "V"), ("OptionalGetElement", "V"))},
        lambda n, _types: [Node("Optional", list(n.inputs), [inner(n, 0)], {}, _name(n, 0)),
                   Node("OptionalGetElement", [inner(n, 0)], list(n.outputs), {}, _name(n, 1))]),
)

OPTIONAL_HAS = OpSpec(
    "Optional+OptionalHasElement", SEQ,
    [In("input", T="T")],
    lambda c: [TensorType((), "bool")],
    since=15,
    doc="whether an optional holding a tensor holds one (true)",
    composite=Composite(
        ("Optional", "OptionalHasElement"),
        {"T": (("Optional", "V"),)},
        lambda n, _types: [Node("Optional", list(n.inputs), [inner(n, 0)], {}, _name(n, 0)),
                   Node("OptionalHasElement", [inner(n, 0)], list(n.outputs), {}, _name(n, 1))]),
)

SPECS: list[OpSpec] = [SPLIT_CONCAT, SPLIT_LENGTH, CONSTRUCT_AT, CONSTRUCT_LENGTH, INSERT_ERASE, EMPTY_INSERT_AT,
                       OPTIONAL_GET, OPTIONAL_HAS]
