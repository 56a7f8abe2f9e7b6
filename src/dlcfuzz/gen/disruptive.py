"""Disruptive generation (HirGen §3.1.5): a valid graph whose last operator call breaks exactly one
constraint, so that a compiler's frontend has to reject it.

Each model is a valid prefix of n-1 operators (n uniform in the operator range, built by the same
Instantiator as Isra's generator) followed by one final call, instantiated validly and then
mutated to break one named constraint of its operator.  The final node's outputs keep the valid
call's types and, with the prefix's leaves, become graph outputs.

Violation kinds (uniform among those applicable to the drawn operator; the operator is redrawn
when none is):

- ``dtype``: every input of one ONNX type variable gets a dtype outside the schema's allowed set at
  the opset (universe: the 12 dlcfuzz dtypes), same shapes;
- ``dtype-mismatch``: one of two or more inputs sharing an ONNX type variable gets another dtype
  that the variable allows;
- ``shape``: a later data input gets a shape its spec shape domain rejects (evaluated with the size
  limits lifted, so that only the operator's own rules remain) and that breaks one of the spec's
  named checks (any shape the domain rejects, for a spec without checks: the broadcasting ops);
- ``rank``: the first input gets a rank outside the spec's rank range, where that range is ONNX's
  (``RANK_EXEMPT`` lists the operators whose bound is a dlcfuzz or ONNX Runtime choice);
- ``attribute``: an attribute (or a constant axes/axis/steps input) gets a value ONNX forbids: an
  axis outside its range, a perm that is no permutation, a zero or negative stride, kernel,
  dilation, blocksize or size, a negative pad, a group that does not divide C, an enum string
  outside its set, an undefined Cast target, an Einsum term longer than its input's rank;
- ``arity``: one input more than the schema's maximum (non-variadic schemas), or a required input
  dropped.

Type variables and arities come from the ONNX schema (``onnx.defs.get_schema``), shape rules from
the specs' shape domains and checks, attribute rules from a table keyed by ONNX attribute names.
"""

from __future__ import annotations

import copy
import random
import string
from collections.abc import Callable, ItemsView, Iterator, KeysView, Sequence, ValuesView
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
import onnx.defs

from dlcfuzz.gen.isra import insert_uniform, split_available
from dlcfuzz.ir import CONST_KIND, DTYPES, INPUT_KIND, Graph, Node, TensorType, Value, np_dtype
from dlcfuzz.solve import GenOptions, Instantiator, Stats, TypeProfile
from dlcfuzz.solve.types import onnx_type_name, schema
from dlcfuzz.spec.dsl import Broadcast, Choice, Const, Ctx, EmptyDomain, Exact, In, Int, Maybe, OpSpec, ShapeDom

KINDS = ("dtype", "dtype-mismatch", "shape", "rank", "attribute", "arity")
MAX_FINAL_TRIES = 200  # final operator draws (an EmptyDomain or no applicable violation: redraw)

# Operators whose first-input rank range is not ONNX's own rule but a dlcfuzz choice (a rank range
# that depends on the target is evaluated for ``--target onnx``, which drops ONNX Runtime's limits):
# Shape takes scalars (dlcfuzz avoids the empty result), Unsqueeze's and OneHot's bounds keep the
# output within max_rank, Pad and Resize are defined on scalars; the global pools' "N x C x D1 ..."
# is descriptive: ONNX shape inference accepts any rank (ORT wants >= 3, at run time only).
RANK_EXEMPT = frozenset({"Shape", "Unsqueeze", "Pad", "Resize", "OneHot",
                         "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})

_OPTION = onnx.defs.OpSchema.FormalParameterOption
_STRING = onnx.defs.OpSchema.AttrType.STRING
_UNBOUNDED = 2**31 - 1
_LETTERS = string.ascii_lowercase + string.ascii_uppercase


# ---------------------------------------------------------------------------------------------
# The final call and its candidate violations
# ---------------------------------------------------------------------------------------------
@dataclass
class Candidate:
    """One way to break the final call: ``apply()`` mutates the graph."""

    group: str  # candidates are drawn group first (an input slot, an attribute ...), then uniformly
    constraint: str
    detail: str
    apply: Callable[[], None]


class _Call:
    """The final node, its solved context, and mutation helpers."""

    def __init__(self, g: Graph, node: Node, spec: OpSpec, c: Ctx, lim: GenOptions) -> None:
        self.g, self.node, self.spec, self.c, self.lim = g, node, spec, c, lim
        self.sch = _schema(spec, lim.opset)
        self.slot: list[int] = []  # node input position -> spec input index
        self.label: list[str] = []  # node input position -> display name
        for k, inp in enumerate(spec.inputs):
            reps = c.n if isinstance(inp, In) and inp.variadic else 1
            self.slot.extend([k] * reps)
            self.label.extend([inp.name] if reps == 1 else [f"{inp.name}[{i}]" for i in range(reps)])

    # -- inputs -------------------------------------------------------------------------------
    def present(self) -> list[int]:
        return [p for p, name in enumerate(self.node.inputs) if name]

    def value(self, p: int) -> Value:
        return self.g.values[self.node.inputs[p]]

    def formal(self, p: int) -> onnx.defs.OpSchema.FormalParameter:
        ins = self.sch.inputs
        return ins[min(p, len(ins) - 1)]

    def spec_input(self, p: int) -> In | Const:
        return self.spec.inputs[self.slot[p]]

    def fresh_name(self) -> str:
        i = len(self.g.values)
        while f"d{i}" in self.g.values:
            i += 1
        return f"d{i}"

    def new_value(self, t: TensorType, data: np.ndarray | None = None) -> str:
        """A new graph input (or an initializer, given data) of type ``t``."""
        v = Value(self.fresh_name(), t, CONST_KIND if data is not None else INPUT_KIND, data)
        self.g.add_value(v)
        return v.name

    def retype(self, p: int, t: TensorType) -> None:
        """Input ``p`` becomes a new graph input of type ``t``; a constant input stays a constant
        (its data cast) when only the dtype changes."""
        old = self.value(p)
        data = None
        if isinstance(self.spec_input(p), Const) and old.data is not None and t.shape == old.type.shape:
            with np.errstate(all="ignore"):
                data = old.data.astype(np_dtype(t.dtype))
        self.node.inputs[p] = self.new_value(t, data)

    # -- context copies for re-evaluating domains and checks ----------------------------------
    def ctx(self, relaxed: bool = False, **attrs: Any) -> Ctx:
        c = copy.copy(self.c)
        c.attrs, c.ins, c.types = dict(self.c.attrs), list(self.c.ins), dict(self.c.types)
        c.rng = random.Random(0)
        if relaxed:  # the size limits lifted: what remains of a domain is the operator's rule
            c.cfg = replace(self.lim, max_numel=2**31, max_dim=1024)
        for k, v in attrs.items():
            c.set(k, v)
        return c

    def failing(self, c: Ctx) -> list[str]:
        """Names of the spec's checks that ``c`` breaks (a check that raises counts as broken)."""
        out = []
        for name, fn in self.spec.checks.items():
            try:
                ok = bool(fn(c))
            except Exception:
                ok = False
            if not ok:
                out.append(name)
        return out


def _type_groups(call: _Call) -> dict[str, list[int]]:
    """ONNX type variable (or literal type) -> the present input slots it types."""
    groups: dict[str, list[int]] = {}
    for p in call.present():
        groups.setdefault(call.formal(p).type_str, []).append(p)
    return groups


def _dtype_candidates(call: _Call) -> list[Candidate]:
    out = []
    for tvar, ps in _type_groups(call).items():
        allowed = allowed_dtypes(call.sch, tvar)
        names = ", ".join(call.label[p] for p in ps)
        for d in DTYPES:
            if d in allowed:
                continue
            if tvar.startswith("tensor("):
                constraint = f"{call.formal(ps[0]).name} is {'/'.join(sorted(allowed))}"
            else:
                constraint = f"{tvar} excludes {d}"

            def apply(ps=ps, d=d) -> None:
                for p in ps:
                    call.retype(p, TensorType(call.value(p).type.shape, d))
            out.append(Candidate(tvar, constraint, f"{names} as {d}", apply))
    return out


def _mismatch_candidates(call: _Call) -> list[Candidate]:
    out = []
    for tvar, ps in _type_groups(call).items():
        allowed = allowed_dtypes(call.sch, tvar)
        if len(ps) < 2 or len(allowed) < 2:
            continue
        for p in ps:
            cur = call.value(p).type
            other = call.label[ps[0] if p != ps[0] else ps[1]]
            for d in DTYPES:
                if d in allowed and d != cur.dtype:
                    out.append(Candidate(
                        call.label[p], f"inputs of {tvar} share one dtype",
                        f"{call.label[p]} as {d} while {other} is {cur.dtype}",
                        partial(call.retype, p, TensorType(cur.shape, d))))
    return out


def _shape_name(call: _Call, p: int, sd: ShapeDom) -> str:
    name = call.label[p]
    if isinstance(sd, Broadcast):
        if sd.uni:
            return f"{name} broadcastable to {call.label[0]}"
        return f"{name} broadcastable with {', '.join(call.label[:p])}"
    if isinstance(sd, Exact):
        return f"{name} has shape {sd.shape}"
    return f"{name} shape"


def _shape_variants(s: tuple[int, ...], max_dim: int) -> list[tuple[int, ...]]:
    """Shapes one edit away from ``s``: a dimension changed, one added, one removed."""
    out = []
    for i in range(len(s)):
        out += [(*s[:i], v, *s[i + 1:]) for v in range(1, max_dim + 2) if v != s[i]]
    out += [(v, *s) for v in range(2, max_dim + 1)] + [(*s, v) for v in range(2, max_dim + 1)]
    out += [s[:i] + s[i + 1:] for i in range(len(s))]
    return out


def _einsum_rejects(call: _Call, p: int, shape: tuple[int, ...]) -> bool:
    """ONNX Einsum follows numpy.einsum, which broadcasts a letter's length-1 dimensions: a shape is
    a violation only if numpy refuses it."""
    shapes = [call.value(q).type.shape if q != p else shape for q in call.present()]
    try:
        np.einsum(call.node.attrs["equation"], *(np.zeros(s, dtype=np.float32) for s in shapes))
    except ValueError:
        return True
    return False


# operators whose spec checks are stricter than ONNX on some shapes: an extra test that ONNX refuses them
SHAPE_REJECTS: dict[str, Callable[[_Call, int, tuple[int, ...]], bool]] = {"Einsum": _einsum_rejects}


def _shape_candidates(call: _Call) -> list[Candidate]:
    out = []
    base = call.failing(call.ctx(relaxed=True))
    for p in call.present():
        inp = call.spec_input(p)
        if p == 0 or not isinstance(inp, In) or inp.shape is None:
            continue
        c = call.ctx(relaxed=True)
        c.ins = c.ins[:p]  # the domain as the solver saw it: earlier inputs only
        try:
            sd = inp.shape(c)
        except Exception:
            continue
        if isinstance(sd, tuple):
            sd = Exact(sd)
        cur = call.value(p).type
        found: list[tuple[tuple[int, ...], list[str]]] = []
        for s in _shape_variants(cur.shape, call.lim.max_dim):
            if TensorType(s, cur.dtype).numel > call.lim.max_numel or len(s) > call.lim.max_rank or sd.accepts(s):
                continue
            c2 = call.ctx(relaxed=True)
            c2.ins[p] = TensorType(s, cur.dtype)
            broken = [n for n in call.failing(c2) if n not in base]
            rejects = SHAPE_REJECTS.get(call.spec.op)
            if (broken or not call.spec.checks) and (rejects is None or rejects(call, p, s)):
                found.append((s, broken))
        single = [f for f in found if len(f[1]) == 1]
        for s, broken in single or found:
            out.append(Candidate(
                call.label[p], broken[0] if broken else _shape_name(call, p, sd),
                f"{call.label[p]} {cur.shape} -> {s}",
                partial(call.retype, p, TensorType(s, cur.dtype))))
    return out


def _rank_candidates(call: _Call) -> list[Candidate]:
    if call.spec.op in RANK_EXEMPT:
        return []
    first = call.spec.inputs[0]
    assert isinstance(first, In)
    if callable(first.rank):
        c = call.ctx()
        c.cfg = replace(call.lim, target="onnx")  # ONNX's rank range, not the target's
        lo, hi = first.rank(c)
    else:
        lo, hi = first.rank
    x = call.value(0).type
    out = []
    for r in range(call.lim.max_rank + 1):
        if lo <= r <= hi:
            continue
        if r < x.rank:
            s = x.shape[:r]
        else:
            grow = 2 if x.numel * 2 ** (r - x.rank) <= call.lim.max_numel else 1
            s = x.shape + (grow,) * (r - x.rank)
        constraint = f"{first.name} rank >= {lo}" if hi >= 99 else f"{first.name} rank in [{lo}, {hi}]"
        out.append(Candidate("rank", constraint, f"{call.label[0]} {x.shape} -> {s}",
                             partial(call.retype, 0, TensorType(s, x.dtype))))
    return out


# -- attributes ---------------------------------------------------------------------------------
def _unwrap(d: Any) -> Any:
    return d.dom if isinstance(d, Maybe) else d


def _int_bounds(d: Any) -> tuple[int, int] | None:
    d = _unwrap(d)
    if isinstance(d, Int):
        return d.lo, d.hi
    if isinstance(d, Choice):
        vals = [v for v in d.values if isinstance(v, int)]
        if vals:
            return min(vals), max(vals)
    return None


Rule = Callable[[_Call, str, Any, Any], list[tuple[Any, str]]]


def _axis_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    b = _int_bounds(dom)
    if b is None:
        return []
    lo, hi = b
    return [(hi + 1, f"{name} in [{lo}, {hi}]"), (lo - 1, f"{name} in [{lo}, {hi}]")]


def _axes_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    axes = list(value or [])
    bad = call.c.r + len(axes)  # out of range for the input and for an output that grows by len(axes)
    if not axes:
        return [([bad], f"{name} in [-r, r-1]")]
    return [([bad, *axes[1:]], f"{name} in [-r, r-1]"), ([*axes[:-1], -bad - 1], f"{name} in [-r, r-1]")]


def _perm_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    r = call.c.r
    p = list(value) if value is not None else list(range(r - 1, -1, -1))
    if r == 0:
        return [([0], "perm is a permutation of range(r)")]
    out = [([r, *p[1:]], "perm is a permutation of range(r)"), ([*p, r], "perm has r entries")]
    if r >= 2:  # (an attribute cannot be an empty list: a shorter perm only from rank 2)
        out += [(p[:-1], "perm has r entries"), ([p[0], p[0], *p[2:]], "perm is a permutation of range(r)")]
    return out


def _window(call: _Call, name: str, value: Any) -> list[int] | None:
    if value is not None:
        return list(value)
    n = call.c.r - 2
    if n < 1:
        return None
    if name == "kernel_shape":
        return list(getattr(call.c, "_k", [1] * n))
    return [0] * (2 * n) if name == "pads" else [1] * n


def _positive_list_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    v = _window(call, name, value)
    if not v:
        return []
    return [([*v[:-1], 0], f"{name} >= 1"), ([-1, *v[1:]], f"{name} >= 1")]


def _pads_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    v = _window(call, name, value)
    if not v:
        return []
    return [([-1, *v[1:]], "pads >= 0"), ([*v[:-1], -1], "pads >= 0")]


def _positive_int_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    return [(0, f"{name} >= 1"), (-1, f"{name} >= 1")]


def _blocksize_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    """Zero, negative, or a blocksize breaking the spec's divisibility check."""
    out = _positive_int_rule(call, name, value, dom)
    for b in range(2, call.lim.max_dim + 2):
        broken = call.failing(call.ctx(**{name: b}))
        if len(broken) == 1:
            out.append((b, broken[0]))
    return out


def _group_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    x = call.value(0).type
    if x.rank < 2:
        return []
    ch = x.shape[1]
    return [(0, "group >= 1")] + [(g, "group divides C") for g in range(2, ch + 2) if ch % g]


def _quant_axis_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    """(De)QuantizeLinear ignore the axis for a per-tensor scale (one element): per axis only."""
    scale = call.value(1).type if len(call.node.inputs) > 1 and call.node.inputs[1] else None
    return _axis_rule(call, name, value, dom) if scale is not None and scale.numel > 1 else []


def _lp_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    return [(0, "p in {1, 2}"), (3, "p in {1, 2}")]


def _fmod_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    return [(0, "fmod = 1 for floating-point types")] if call.c.T.startswith("float") else []


def _cast_to_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    # not 0 (UNDEFINED): onnx 1.23's checker raises a bare ValueError on it, and ORT 1.31 loads it
    return [(99, "to is a TensorProto data type")]


def _equation_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    """Term 0 gets one letter more than input 0 has dimensions."""
    lhs, arrow, rhs = value.partition("->")
    terms = lhs.split(",")
    letters = terms[0].replace("...", "")
    k = call.c.r - len(letters) + 1
    new = [x for x in _LETTERS if x not in value][:k]
    if len(new) < k:
        return []
    terms[0] += "".join(new)
    return [(",".join(terms) + arrow + rhs, "equation term 0 has one letter per dimension of input 0")]


def _enum_rule(call: _Call, name: str, value: Any, dom: Any) -> list[tuple[Any, str]]:
    """A near miss of a valid string: another case, or one character short."""
    d = _unwrap(dom)
    if not isinstance(d, Choice):
        return []
    valid = [v for v in d.values if isinstance(v, str)]
    if not valid:
        return []
    words = set(call.sch.attributes[name].description.replace(",", " ").replace("`", " ").split())
    constraint = f"{name} in {{{', '.join(valid)}}}"
    out = []
    for v in valid:
        for bad in (v.swapcase(), v[:-1]):
            if bad and bad not in valid and bad not in words and bad not in [b for b, _ in out]:
                out.append((bad, constraint))
    return out


ATTR_RULES: dict[str, Rule] = {
    "axis": _axis_rule, "batch_dims": _axis_rule, "batch_axis": _axis_rule, "time_axis": _axis_rule,
    "axes": _axes_rule, "perm": _perm_rule,
    "strides": _positive_list_rule, "kernel_shape": _positive_list_rule, "dilations": _positive_list_rule,
    "pads": _pads_rule, "size": _positive_int_rule, "blocksize": _blocksize_rule, "group": _group_rule,
}
# attribute names whose rule is specific to one operator
OP_ATTR_RULES: dict[tuple[str, str], Rule] = {
    ("LpNormalization", "p"): _lp_rule, ("Mod", "fmod"): _fmod_rule, ("Cast", "to"): _cast_to_rule,
    ("Einsum", "equation"): _equation_rule,
    ("QuantizeLinear", "axis"): _quant_axis_rule, ("DequantizeLinear", "axis"): _quant_axis_rule,
}


def _attr_rule(call: _Call, name: str) -> Rule | None:
    rule = OP_ATTR_RULES.get((call.spec.op, name)) or ATTR_RULES.get(name)
    if rule is None and call.sch.attributes[name].type == _STRING:
        return _enum_rule
    return rule


def _const_rule(call: _Call, name: str, arr: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """Constant inputs that play an attribute's role: axes, axis, steps."""
    vals = [int(v) for v in arr.reshape(-1)]
    if name == "axes":
        got = _axes_rule(call, name, vals, None)
    elif name == "axis" and arr.ndim == 0:
        r = call.c.r
        got = [(r, "axis in [-r, r-1]"), (-r - 1, "axis in [-r, r-1]")]
    elif name == "steps" and vals:
        got = [([*vals[:-1], 0], "steps nonzero")]
    else:
        return []
    return [(np.array(v, dtype=arr.dtype).reshape(arr.shape if np.size(v) == arr.size else -1), why)
            for v, why in got]


def _attribute_candidates(call: _Call) -> list[Candidate]:
    out = []
    for name, dom in call.spec.attrs.items():
        if name.startswith("_") or name not in call.sch.attributes:
            continue
        rule = _attr_rule(call, name)
        if rule is None:
            continue
        try:
            d = dom(call.ctx()) if callable(dom) else dom
        except Exception:
            d = None
        value = call.node.attrs.get(name)
        for new, why in rule(call, name, value, d):
            def apply(name=name, new=new) -> None:
                call.node.attrs[name] = new
            out.append(Candidate(name, why, f"{name}={new!r} (was {value!r})", apply))
    for p in call.present():
        inp = call.spec_input(p)
        v = call.value(p)
        if not isinstance(inp, Const) or v.data is None or v.type.dtype not in ("int32", "int64"):
            continue
        for arr, why in _const_rule(call, inp.name, v.data):
            out.append(Candidate(inp.name, why, f"{inp.name}={arr.tolist()} (was {v.data.tolist()})",
                                 lambda p=p, arr=arr: call.node.inputs.__setitem__(
                                     p, call.new_value(TensorType(arr.shape, arr.dtype.name), arr))))
    return out


def _arity_error(sch: onnx.defs.OpSchema, inputs: Sequence[str]) -> str | None:
    """Which arity rule of the schema ``inputs`` break (None: none)."""
    inputs = list(inputs)
    while inputs and not inputs[-1]:
        inputs.pop()
    hi = "" if sch.max_input >= _UNBOUNDED else sch.max_input
    if not sch.min_input <= len(inputs) <= sch.max_input:
        return f"inputs {sch.min_input}..{hi}"
    for q, name in enumerate(inputs):
        formal = sch.inputs[min(q, len(sch.inputs) - 1)]
        if not name and formal.option == _OPTION.Single:
            return f"input {q} ({formal.name}) required"
    return None


def _arity_candidates(call: _Call) -> list[Candidate]:
    sch, node = call.sch, call.node
    out = []
    if sch.max_input < _UNBOUNDED:
        extra = [*node.inputs, *[""] * (sch.max_input - len(node.inputs))]
        why = _arity_error(sch, [*extra, "x"])
        if why:
            def add() -> None:
                node.inputs[:] = [*extra, call.new_value(call.value(0).type)]
            out.append(Candidate("extra", why, f"an extra input {call.value(0).type} at position {len(extra)}", add))
    for p in call.present():
        new = list(node.inputs)
        if call.formal(p).option == _OPTION.Variadic:
            del new[p]
        else:
            new[p] = ""
        while new and not new[-1]:
            new.pop()
        why = _arity_error(sch, new)
        if why:
            out.append(Candidate("drop", why, f"input {p} ({call.label[p]}) dropped",
                                 lambda new=new: node.inputs.__setitem__(slice(None), new)))
    return out


BUILDERS: dict[str, Callable[[_Call], list[Candidate]]] = {
    "dtype": _dtype_candidates, "dtype-mismatch": _mismatch_candidates, "shape": _shape_candidates,
    "rank": _rank_candidates, "attribute": _attribute_candidates, "arity": _arity_candidates,
}


def allowed_dtypes(sch: onnx.defs.OpSchema, tvar: str) -> frozenset[str]:
    """The dlcfuzz dtypes an ONNX type variable (or a fixed ``tensor(...)`` type) allows."""
    if tvar.startswith("tensor("):
        return frozenset({onnx_type_name(tvar)} - {None})
    for tc in sch.type_constraints:
        if tc.type_param_str == tvar:
            return frozenset({onnx_type_name(t) for t in tc.allowed_type_strs} - {None})
    return frozenset(DTYPES)


# ---------------------------------------------------------------------------------------------
# Graph helpers
# ---------------------------------------------------------------------------------------------
def prune(g: Graph) -> None:
    """Drops graph inputs and initializers that no node reads."""
    used = g.consumers()
    for name in [n for n, v in g.values.items() if v.kind in (INPUT_KIND, CONST_KIND) and n not in used]:
        del g.values[name]


def prefix_graph(g: Graph) -> Graph:
    """A copy of ``g`` without its last node (the disruptive call): the valid prefix."""
    p = Graph.from_dict(g.to_dict())
    last = p.nodes.pop()
    for o in last.outputs:
        del p.values[o]
    prune(p)
    p.set_leaf_outputs()
    p.meta = {k: v for k, v in p.meta.items() if k != "violation"}
    return p


def _undo(inst: Instantiator, g: Graph, n_nodes: int, before: set[str]) -> None:
    """Removes the calls appended after ``n_nodes`` nodes and the values they added."""
    added = {n for n in g.values if n not in before}
    for n in added:
        del g.values[n]
        inst.iv.pop(n, None)
    del g.nodes[n_nodes:]
    for bucket in (*inst.pool.by_rank.values(), *inst.pool.by_type.values()):
        bucket[:] = [v for v in bucket if v.name not in added]


def _schema(spec: OpSpec, opset: int):
    """The ONNX schema whose rules the call breaks: none for a composite, whose IR inputs are not its ONNX
    operators' formal inputs (If reads x and y through its branches, its one ONNX input is the condition)."""
    return None if spec.composite is not None else schema(spec.op, opset)


# ---------------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------------
def _may_apply(spec: OpSpec, kind: str, opset: int) -> bool:
    """A cheap static filter: whether ``kind`` can apply to some call of ``spec``."""
    sch = _schema(spec, opset)
    if sch is None:
        return False
    if kind == "dtype":
        return any(len(allowed_dtypes(sch, f.type_str)) < len(DTYPES) for f in sch.inputs)
    if kind == "dtype-mismatch":
        tvars = [f.type_str for f in sch.inputs]
        return len(set(tvars)) < len(tvars) or any(f.option == _OPTION.Variadic for f in sch.inputs)
    if kind == "shape":
        return spec.variadic or any(isinstance(i, In) for i in spec.inputs[1:])
    if kind == "rank":
        r = spec.inputs[0].rank
        return spec.op not in RANK_EXEMPT and (callable(r) or r[0] > 0 or r[1] < 99)
    if kind == "attribute":
        names = {n for n in spec.attrs if not n.startswith("_") and n in sch.attributes}
        return bool({n for n in names if n in ATTR_RULES or (spec.op, n) in OP_ATTR_RULES
                     or sch.attributes[n].type == _STRING}
                    or any(isinstance(i, Const) and i.name in ("axes", "axis", "steps") for i in spec.inputs))
    return True


@dataclass
class DisruptiveStats(Stats):
    """Isra's insertion counters (every call, the disruptive one included; a redrawn final operator
    counts as a retry) and the violations made per kind, readable as a mapping (``stats["shape"]``)."""

    kinds: dict[str, int] = field(default_factory=dict)
    final_retries: int = 0  # final operators redrawn (an EmptyDomain, or no applicable violation)

    def __getitem__(self, kind: str) -> int:
        return self.kinds[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self.kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    def keys(self) -> KeysView[str]:
        return self.kinds.keys()

    def values(self) -> ValuesView[int]:
        return self.kinds.values()

    def items(self) -> ItemsView[str, int]:
        return self.kinds.items()


class DisruptiveGenerator:
    """Valid prefix + one final call that breaks exactly one named constraint of its operator."""

    def __init__(self, specs: Sequence[OpSpec], limits: GenOptions, op_range: tuple[int, int],
                 profile: TypeProfile | None = None, kinds: Sequence[str] = KINDS) -> None:
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            raise ValueError(f"unknown violation kind(s) {', '.join(bad)}; known: {', '.join(KINDS)}")
        self.limits, self.op_range, self.profile = limits, op_range, profile
        self.kinds = tuple(k for k in KINDS if k in kinds)
        self.specs, self.unavailable = split_available(specs, limits, profile)
        self.final_specs = [s for s in self.specs if any(_may_apply(s, k, limits.opset) for k in self.kinds)]
        if not self.final_specs:
            raise ValueError("no operator can be generated (or disrupted) under this dtype set, opset and target")
        self.stats = DisruptiveStats(kinds=dict.fromkeys(self.kinds, 0))

    def generate(self, seed: int) -> Graph:
        rng = random.Random(seed)
        g = Graph(opset=self.limits.opset, meta={"seed": seed, "strategy": "disruptive"})
        inst = Instantiator(g, self.limits, rng, np.random.default_rng(seed), self.profile)
        n_ops = rng.randint(*self.op_range)
        st = self.stats
        for _ in range(n_ops - 1):
            insert_uniform(inst, self.specs, rng, st)
        st.insertions += 1
        for attempt in range(MAX_FINAL_TRIES):
            if attempt:
                st.retries += 1
                st.final_retries += 1
                st.retried_insertions += attempt == 1
            spec = self.final_specs[rng.randrange(len(self.final_specs))]
            n_nodes, before = len(g.nodes), set(g.values)
            try:
                node = inst.instantiate(spec)
            except EmptyDomain:
                st.failures[spec.op] = st.failures.get(spec.op, 0) + 1
                continue
            call = _Call(g, node, spec, inst.last_ctx, self.limits)
            by_kind = {k: cands for k in self.kinds if (cands := BUILDERS[k](call))}
            if not by_kind:
                _undo(inst, g, n_nodes, before)
                continue
            kind = list(by_kind)[rng.randrange(len(by_kind))]
            cands = by_kind[kind]
            groups = list(dict.fromkeys(c.group for c in cands))
            group = groups[rng.randrange(len(groups))]
            cands = [c for c in cands if c.group == group]
            cand = cands[rng.randrange(len(cands))]
            cand.apply()
            break
        else:
            raise RuntimeError(f"seed {seed}: no operator could be disrupted in {MAX_FINAL_TRIES} draws")
        prune(g)
        g.set_leaf_outputs()
        g.meta["violation"] = {"op": spec.op, "node": node.name, "kind": kind,
                               "constraint": cand.constraint, "detail": cand.detail}
        st.kinds[kind] += 1
        return g


__all__ = ["KINDS", "RANK_EXEMPT", "DisruptiveGenerator", "DisruptiveStats", "allowed_dtypes", "prefix_graph", "prune"]
