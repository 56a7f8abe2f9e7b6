"""What a torch operator's spec adds to the constraint DSL's ``OpSpec``.

A torch operator is an ``OpSpec`` (same inputs, attribute domains, ``out`` and ``checks``, solved by
the same Isra instantiation), named in the ``torch`` namespace (``torch.add_``, ``torch.conv2d``), with:

- ``emit``: how the program writer spells the call, from its argument expressions and the node's
  attributes (Python values), e.g. ``lambda a, k: f"{a[0]}.narrow({k['dim']}, {k['start']}, {k['length']})"``;
- ``transfer`` (and ``vdomain``): the operator's value interval function and input domains, registered
  with the solver's interval analysis under the operator's name (``solve/intervals.py``'s ``TRANSFER``
  and ``DOMAINS``), so that reused tensors keep the outputs finite as for ONNX operators;
- ``mutates``: the input the call writes in place (``add_``, ``index_put_``: 0), whose later readers see
  the write; ``view``: the output aliases the first input (a later in-place write through it reaches it);
- ``ties``: outputs that are indices chosen among ties (sort, topk, max's indices): never compared;
- ``grad``: whether its float outputs carry gradients back (backward's loss reads them);
- ``dynamic_output``: an output size depends on values (masked_select, nonzero, unique);
- ``empty``: the operator takes a first input with a dim of length 0 (the generator then sometimes gives
  it one; ``EMPTY_OK`` in each family module lists them);
- ``imports``: the import lines its spelling needs beyond ``torch`` and ``F`` (written at the head of a program
  that calls it);
- ``mechanism`` and ``plain``: a mechanism of torch.compile's own that the call goes through beyond its
  values (an in-place write: functionalization; ``torch.cond``: a higher-order operator), and the call
  spelled without it, with the same values (the write out of place; both branches and a select).  The
  trigger analysis of a program bug (``oracle/program_triggers.py``) spells a program's calls plainly to
  tell a bug of the mechanism, shared by every operator that goes through it, from one operator's.

Element types are torch's: ``TORCH_DTYPES`` (bfloat16 included); a binary operator's two type
variables may differ and its output takes torch's type promotion (``promote``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dlcfuzz.ir import TensorType
from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import OpSpec

NAMESPACE = "torch"
FLOATS = ("float32", "float16", "bfloat16")
LOWP = ("float16", "bfloat16")
INTS = ("int8", "uint8", "int32", "int64")
NUMERIC = (*FLOATS, *INTS)
ALL = (*NUMERIC, "bool")
# the element types torch-native programs use (float64 only as the eager tie-breaker's)
TORCH_DTYPES = ALL

Emit = Callable[[list[str], dict[str, Any]], str]


@dataclass
class TorchOpSpec(OpSpec):
    emit: Emit | None = None
    transfer: Callable[[iv.Call], list[iv.Iv]] | None = None
    vdomain: Callable | None = None  # the input slots' value domains (solve/intervals.py's DomainFn)
    mutates: int | Callable[[dict[str, Any]], tuple[int, ...]] | None = None
    view: bool = False
    ties: tuple[int, ...] = ()
    grad: bool = True
    # data-dependent output shapes (masked_select, nonzero): Dynamo needs capture_dynamic_output_shape_ops
    dynamic_output: bool = False
    # takes a first input with a dim of length 0 (an empty tensor): eager runs it and ``out`` gives its shape
    empty: bool = False
    imports: tuple[str, ...] = ()
    mechanism: str = ""
    plain: Emit | None = None

    def __post_init__(self) -> None:
        if not self.op.startswith(NAMESPACE + "."):
            self.op = f"{NAMESPACE}.{self.op}"
        super().__post_init__()  # the operator's domain is its namespace, "torch"


def mutated_slots(spec: OpSpec, attrs: dict[str, Any]) -> tuple[int, ...]:
    """The input slots a call writes in place (batch_norm in training mode: its running statistics)."""
    m = getattr(spec, "mutates", None)
    if m is None:
        return ()
    return tuple(m(attrs)) if callable(m) else (m,)


def top(spec_op: str) -> str:
    """The torch call's own name (``torch.add_`` -> ``add_``)."""
    return spec_op.rpartition(".")[2]


# ---------------------------------------------------------------------------------------------
# torch's type promotion (torch.result_type for two tensors of the same category rules)
# ---------------------------------------------------------------------------------------------
_CAT = {"bool": 0, "uint8": 1, "int8": 1, "int16": 1, "int32": 1, "int64": 1,
        "float16": 2, "bfloat16": 2, "float32": 2, "float64": 2}
_INT_ORDER = ("uint8", "int8", "int16", "int32", "int64")
_FLOAT_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def promote(a: str, b: str) -> str:
    """torch.promote_types for the dtypes programs use."""
    if a == b:
        return a
    ca, cb = _CAT[a], _CAT[b]
    if ca != cb:
        return a if ca > cb else b
    if ca == 1:
        if {a, b} == {"uint8", "int8"}:
            return "int16"
        return max(a, b, key=_INT_ORDER.index)
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"
    return max(a, b, key=_FLOAT_BITS.__getitem__)


def result_type(*operands: tuple[str, int]) -> str:
    """torch.result_type of tensors given as (dtype, rank): dimensioned tensors decide; zero-dim ones
    only where their category (bool < integer < float) is higher than all the dimensioned ones'."""
    dims = [d for d, r in operands if r > 0]
    zeros = [d for d, r in operands if r == 0]
    res_dim = _fold(dims)
    res_zero = _fold(zeros)
    if res_dim is None:
        assert res_zero is not None
        return res_zero
    if res_zero is None or _CAT[res_zero] <= _CAT[res_dim]:
        return res_dim
    return _fold([d for d in zeros if _CAT[d] == _CAT[res_zero]]) or res_zero


def _fold(dtypes: list[str]) -> str | None:
    out = None
    for d in dtypes:
        out = d if out is None else promote(out, d)
    return out


def is_float(dtype: str) -> bool:
    return _CAT.get(dtype) == 2


def float_of(dtype: str) -> str:
    """The dtype of a float-valued function of a tensor (sin of an int tensor is float32)."""
    return dtype if is_float(dtype) else "float32"


def tdt(dtype: str) -> str:
    """The torch spelling of an element type."""
    return f"torch.{dtype}"


def same_type(c) -> list[TensorType]:
    """One output of the first input's type (shape and dtype)."""
    return [c.x]


def uni_shape(c):
    """Shapes that broadcast one way into the first input's (an operand written into it)."""
    return c.bcast(c.s, uni=True)


# ---------------------------------------------------------------------------------------------
# Interval functions (the solver's interval analysis, solve/intervals.py, on torch calls)
# ---------------------------------------------------------------------------------------------
def grow_iv(k: float = 2.0) -> Callable[[iv.Call], list[iv.Iv]]:
    """A write into the first input: its interval grows by k times the other operands' (a bounded write)."""
    def t(c: iv.Call) -> list[iv.Iv]:
        m = iv.amax(c.x) + sum(k * iv.amax(i) for i in c.ivs[1:] if i is not None) + 1
        return [iv.widen((-m, m), c.n, 4.0, absolute=1.0)]
    return t


def same_iv(c: iv.Call) -> list[iv.Iv]:
    """Values moved, not computed (views, gathers, sorts): every output holds input 0's values; integer
    outputs beyond the first (indices) get their dtype's range."""
    out = [c.x]
    for t in c.outs[1:]:
        out.append(c.x if t.dtype == c.types[0].dtype else index_iv(t))  # type: ignore[union-attr]
    return out


def index_iv(t: TensorType) -> iv.Iv:
    return (0.0, float(max(1, max(t.shape, default=1)) * 64))


def hull_iv(*slots: int, zero: bool = False) -> Callable[[iv.Call], list[iv.Iv]]:
    """The hull of some inputs' intervals (and 0): cat, where, scatter, pad."""
    def t(c: iv.Call) -> list[iv.Iv]:
        got = [c.ivs[k] for k in (slots or range(len(c.ivs))) if k < len(c.ivs) and c.ivs[k] is not None]
        got = [g for g in got if g is not None]
        if zero:
            got.append((0.0, 0.0))
        h = iv.hull(*got)
        return [h for _ in c.outs]
    return t


def const_iv(lo: float, hi: float) -> Callable[[iv.Call], list[iv.Iv]]:
    return lambda c: [(lo, hi) for _ in c.outs]


def bool_iv(c: iv.Call) -> list[iv.Iv]:
    return [iv.BOOL_IV for _ in c.outs]


def scaled_iv(count: Callable[[iv.Call], float], slots: Sequence[int] = (0,), absolute: float = 0.0
              ) -> Callable[[iv.Call], list[iv.Iv]]:
    """An amplifying operator: |out| <= count * prod(max |input slot|) + absolute (sums, contractions)."""
    def t(c: iv.Call) -> list[iv.Iv]:
        m = float(count(c))
        for k in slots:
            if k < len(c.ivs) and c.ivs[k] is not None:
                m *= max(1.0, iv.amax(c.ivs[k]))  # type: ignore[arg-type]
        m = m + absolute
        r = iv.widen((-m, m), c.n, 8.0, absolute=1.0)
        return [r for _ in c.outs]
    return t


def onnx_iv(onnx_op: str) -> Callable[[iv.Call], list[iv.Iv]]:
    """The interval function of the ONNX operator that computes the same thing."""
    return lambda c: iv.TRANSFER[onnx_op](c)


def budget_domain(count: Callable[[Any], float], first: float = 64.0, cap: float | None = None) -> Callable:
    """Input domains of an amplifying operator: the first input within ``first``, later ones such that
    count * max|x0| * max|xk| stays within the dtype's budget (and within ``cap``, where given)."""
    def d(slot, n, numel, c, ivs):
        if n.kind != "f":
            return None
        if slot == 0:
            return iv.mag(min(first, n.budget))
        m = max(1.0, iv.amax(ivs[0])) if ivs and ivs[0] is not None else first
        k = max(1.0, float(count(c)))
        return iv.mag(max(1.0, min(n.budget / (k * m), n.fmax / 4 if cap is None else cap)))
    return d


def small_domain(bound: float = 64.0) -> Callable:
    """Every float slot within ``bound`` (keeps a chain of arithmetic far from overflow)."""
    def d(slot, n, numel, c, ivs):
        return iv.mag(min(bound, n.fmax / 16)) if n.kind == "f" else None
    return d


def prod(xs: Sequence[int]) -> int:
    return math.prod(xs)


class Draw:
    """A value drawn by a function of the random stream: for attributes whose valid values are easier
    to construct than to enumerate (a strided window inside the storage, a split of a length).  Every
    draw is valid by construction (the Isra discipline), and the function is written in terms of the
    earlier choices only."""

    def __init__(self, fn: Callable[[Any], Any], size: int = 8) -> None:
        self.fn, self._size = fn, size

    def sample(self, rng: Any) -> Any:
        return self.fn(rng)

    def __contains__(self, v: Any) -> bool:
        return True

    def size(self) -> int:
        return self._size
