"""Isra's backtrack-free instantiation of one operator call, and the tensor pool it reuses from.

Order (Isra §3.3.1): indegree -> first input -> attributes -> remaining inputs -> outputs.
Each step draws from a domain that the spec wrote in terms of the earlier steps, so no step
ever needs to undo an earlier one.  Inputs follow the on-demand policy (§3.3.3): with the
picking rate, reuse a random existing tensor that fits the input's domain; otherwise create a
new graph input (or, for weights, an initializer at ``init_rate``).  A constant-like input
(``Const``: a shape, axes, pads ...) is an initializer, or, at ``runtime_consts``, a runtime input
pinned to the same value (``Value.pinned``), which compilers must handle as a dynamic operand.
A constant (initializer) is written as a ``Constant`` node instead at ``constant_nodes``, in one of the
Constant attributes its type allows (``export.onnx.constant_forms``): its name and attribute go to
``graph.meta["constant_nodes"]``, which the ONNX exporter reads.

Every value carries a conservative value interval (``solve/intervals.py``): runtime inputs the
range input synthesis draws from, initializers and constants their data's, node outputs what
the operator's transfer function gives.  An input slot with a value domain (Acosh's x >= 1, a
divisor away from 0, a matrix whose products stay finite ...) only reuses tensors whose interval
lies in the domain; a new input for it gets a hint that confines its values to the domain.
"""

from __future__ import annotations

import random
from collections import ChainMap
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from dlcfuzz.ir import CONST_KIND, DTYPES, INPUT_KIND, NODE_KIND, SHAPE_FORM, Graph, Node, TensorType, Value
from dlcfuzz.ir.hints import random_array, value_range
from dlcfuzz.solve.intervals import (
    READS_CONSTANTS,
    REJECT,
    SHAPED,
    Domain,
    Iv,
    data_interval,
    fresh_range,
    hint_domain,
    output_intervals,
)
from dlcfuzz.solve.intervals import domain as slot_domain
from dlcfuzz.solve.types import TypeProfile, input_type_vars, type_domains
from dlcfuzz.spec.dsl import Const, Ctx, EmptyDomain, Exact, In, OpSpec, ShapeDom


class Admission(Protocol):
    """What a target compiler takes (``run.profile.SupportProfile``): a generator for it only makes
    calls the target admits, so that no test is spent on one operator the compiler declines."""

    def admits_op(self, op: str) -> bool: ...

    def admits(self, node: Node, values: Mapping[str, Value], opset: int | None = None,
               shaped: Collection[str] = ()) -> bool: ...

    def admits_constant(self, form: str) -> bool: ...


@dataclass(frozen=True)
class GenOptions:
    """Generation limits and knobs (Isra's defaults: rank <= 5, dim <= 5, picking rate 0.97)."""

    max_rank: int = 5
    max_dim: int = 5
    max_numel: int = 4096
    picking_rate: float = 0.97
    init_rate: float = 0.5  # share of new weight tensors that become initializers
    # share of constant-like inputs (``Const``: shapes, axes, pads, K ...) that the model takes at run
    # time, pinned to the value the spec chose: compilers' dynamic-shape paths see them; 0: all initializers
    runtime_consts: float = 0.25
    # share of constants written as Constant nodes (value=, or value_float(s) / value_int(s) where the
    # type fits), as exporters write them, rather than initializers; 0: all initializers
    constant_nodes: float = 0.2
    opset: int = 17
    dtypes: tuple[str, ...] = ()
    target: str = "ort"  # "ort": also narrow to what ONNX Runtime implements; "onnx": the ONNX spec only
    # outputs with a dim of length 0 are allowed (torch programs' empty tensors); False: such a call is refused
    empty_outputs: bool = False


class Pool:
    """Existing tensors a new input may reuse, indexed by (dtype, rank) and by exact type.

    With ``use_penalty`` (GenCoG), a tensor already consumed k times is picked with weight
    1/(1+k), which spreads edges over the graph instead of piling them on a few tensors.
    """

    def __init__(self, use_penalty: bool = False) -> None:
        self.by_rank: dict[tuple[str, int], list[Value]] = {}
        self.by_type: dict[TensorType, list[Value]] = {}
        self.values: list[Value] = []
        self.uses: dict[str, int] = {}
        self.use_penalty = use_penalty

    def add(self, v: Value) -> None:
        t = v.type
        if 0 in t.shape:  # made for the input that wants no elements (an empty past state): others refuse it
            return
        self.by_rank.setdefault((t.dtype, t.rank), []).append(v)
        self.by_type.setdefault(t, []).append(v)
        self.values.append(v)

    def used(self, name: str) -> None:
        self.uses[name] = self.uses.get(name, 0) + 1

    def weight(self, v: Value) -> float:
        return 1.0 / (1 + self.uses.get(v.name, 0))

    def pick(self, rng: random.Random, dtypes: Sequence[str], ranks: Sequence[int],
             accept, probes: int = 8) -> Value | None:
        """A random tensor among those with a listed dtype and rank that ``accept``s: uniform, or
        weighted by the use penalty.

        Rejection sampling over the candidates keeps that distribution over the accepted ones; a
        full scan runs only when a few probes all miss.
        """
        buckets = [b for d in dtypes for r in ranks if (b := self.by_rank.get((d, r)))]
        total = sum(len(b) for b in buckets)
        if total == 0:
            return None
        penalty = self.use_penalty
        for _ in range(probes):
            k = rng.randrange(total)
            for b in buckets:
                if k < len(b):
                    v = b[k]
                    break
                k -= len(b)
            if penalty and rng.random() >= self.weight(v):
                continue
            if accept is None or accept(v):
                return v
        fits = [v for b in buckets for v in b if accept is None or accept(v)]
        return self.choose(rng, fits)

    def choose(self, rng: random.Random, values: Sequence[Value]) -> Value | None:
        """One of ``values``: uniform, or weighted by the use penalty."""
        if not values:
            return None
        if not self.use_penalty:
            return values[rng.randrange(len(values))]
        return rng.choices(values, weights=[self.weight(v) for v in values])[0]


@dataclass
class Proposal:
    """An instantiated call not yet in the graph: a strategy may inspect it and then commit or
    drop it (dropping leaves the graph and the pool exactly as they were)."""

    spec: OpSpec
    node: Node
    staged: list[tuple[Value, bool]]  # new input values; flag: reusable by later calls
    outputs: list[Value]
    out_ivs: list[Iv]
    ctx: Ctx
    forms: dict[str, str] = field(default_factory=dict)  # new constants written as Constant nodes
    shapes: dict[str, list] = field(default_factory=dict)  # those written as a Shape: [input, start, end]

    def input_types(self, g: Graph) -> list[TensorType | None]:
        staged = {v.name: v for v, _ in self.staged}
        return [None if not x else (staged[x] if x in staged else g.values[x]).type for x in self.node.inputs]


@dataclass
class Stats:
    insertions: int = 0
    retried_insertions: int = 0  # insertions that needed at least one retry
    retries: int = 0
    failures: dict[str, int] = field(default_factory=dict)

    def refused(self, op: str, attempt: int) -> None:
        """An insertion of ``op`` found an empty domain (nothing was committed) at its ``attempt``-th try."""
        self.retries += 1
        self.failures[op] = self.failures.get(op, 0) + 1
        if attempt == 0:
            self.retried_insertions += 1


class Instantiator:
    """Instantiates operator calls into one graph under construction."""

    def __init__(self, graph: Graph, limits: GenOptions, rng: random.Random, nprng: np.random.Generator,
                 profile: TypeProfile | None = None, use_penalty: bool = False,
                 admit: Admission | None = None) -> None:
        self.g = graph
        self.admit = admit
        self.lim = limits
        self.rng = rng
        self.np = nprng
        self.pool = Pool(use_penalty)
        self.producer: dict[str, Node] = {}  # node output name -> the call that produced it
        self.profile = profile
        self.last_ctx: Ctx | None = None  # the context of the last committed call (none yet: None)
        self._counter = 0
        # new values of the call being instantiated, committed only once it is complete; flag: reusable
        self._staged: list[tuple[Value, bool]] = []
        self._types: dict[str, tuple[dict[str, tuple[str, ...]], list[str]]] = {}
        self.iv: dict[str, Iv] = {}  # value name -> conservative interval of its elements
        self._ivs: list[Iv | None] = []  # intervals of the inputs of the call being instantiated
        # Constant-node forms of the call's new constants, and their own random stream: the other
        # draws, hence the graphs, stay what they were without Constant nodes
        self._forms: dict[str, str] = {}
        self._shapes: dict[str, list] = {}
        self._form_rng = random.Random(f"constant-nodes:{graph.meta.get('seed', 0)}")

    # -- type domains, cached per operator ----------------------------------------------------
    def types_of(self, spec: OpSpec) -> tuple[dict[str, tuple[str, ...]], list[str]]:
        got = self._types.get(spec.op)
        if got is None:
            dtypes = self.lim.dtypes
            doms = type_domains(spec, self.lim.opset, dtypes or DTYPES, self.profile)
            got = (doms, input_type_vars(spec, self.lim.opset))
            self._types[spec.op] = got
        return got

    def available(self, spec: OpSpec) -> bool:
        """Whether the operator can be instantiated at all under the dtype set and profile."""
        if spec.since > self.lim.opset or (self.admit is not None and not self.admit.admits_op(spec.op)):
            return False
        doms, tvars = self.types_of(spec)
        return all(doms.get(tv) for tv, inp in zip(tvars, spec.inputs, strict=True) if isinstance(inp, In))

    # -- values -------------------------------------------------------------------------------
    def _name(self) -> str:
        self._counter += 1
        return f"v{self._counter}"

    def _new_value(self, t: TensorType, inp: In, dom: Domain | None) -> Value:
        hint = None
        if dom is not None:
            lo, hi = fresh_range(dom, t, self.rng)
            if (lo, hi) != value_range(t):
                hint = {"min": int(lo), "max": int(hi)} if t.dtype[0] in "iu" else {"min": lo, "max": hi}
        if inp.weight and self.rng.random() < self.lim.init_rate:
            v = Value(self._name(), t, CONST_KIND, random_array(self.np, t, hint), hint)
            self.iv[v.name] = data_interval(v.data)
            self._form(v)
        else:
            v = Value(self._name(), t, INPUT_KIND, None, hint)
            self.iv[v.name] = value_range(t, hint)
        self._staged.append((v, True))
        return v

    def _domains(self, op: str, slot: int, c: Ctx, hint) -> _Domains:
        """The domains of an input slot per candidate dtype (and element count, for the operators
        whose first-slot domain depends on it), filled on demand."""
        shaped = slot == 0 and op in SHAPED
        ivs = self._ivs
        if hint is None:
            def fn(dtype: str, numel: int) -> Domain | None:
                return slot_domain(op, slot, dtype, numel, c, ivs)
        else:
            def fn(dtype: str, numel: int) -> Domain | None:
                d = slot_domain(op, slot, dtype, numel, c, ivs)
                h = hint_domain(hint, dtype)
                if h is None or d is REJECT:
                    return d
                return h if d is None else d.meet(h)
        return _Domains(fn, shaped)

    def _fits(self, doms: _Domains) -> Callable[[Value], bool]:
        """Whether a tensor's interval lies in the slot's domain."""
        iv = self.iv
        if doms.shaped:
            def fits(v: Value) -> bool:
                d = doms.get_shaped(v.type.dtype, v.type.numel)
                return d is None or d.accepts(iv[v.name])
            return fits

        def fits_dtype(v: Value) -> bool:
            d = doms[v.type.dtype]
            return d is None or d.accepts(iv[v.name])
        return fits_dtype

    # -- one operator call --------------------------------------------------------------------
    def instantiate(self, spec: OpSpec, first: Value | None = None) -> Node:
        """Appends one call of ``spec`` to the graph; raises EmptyDomain if a domain ran dry."""
        return self.commit(self.propose(spec, first))

    def first_fits(self, spec: OpSpec, x: Value) -> bool:
        """A cheap necessary condition for ``x`` as the first input of ``spec``: dtype, static rank
        range and room (value domains are checked by ``propose``)."""
        doms, tvars = self.types_of(spec)
        first = spec.inputs[0]
        assert isinstance(first, In)
        if first.value is not None:  # the spec draws the values: a new constant, never a reused tensor
            return False
        if x.type.dtype not in doms[tvars[0]] or x.type.numel > self.lim.max_numel // first.room:
            return False
        if first.shape is not None and not first.variadic:
            sd = spec.first_shape(Ctx(self.lim, self.rng, self.np))
            if sd is not None and not sd.accepts(x.type.shape):
                return False
        if callable(first.rank):
            return True
        return first.rank[0] <= x.type.rank <= min(first.rank[1], self.lim.max_rank)

    def propose(self, spec: OpSpec, first: Value | None = None) -> Proposal:
        """One call of ``spec``, not yet in the graph; ``first``: its first input, else chosen by
        the picking rate.  Raises EmptyDomain if a domain ran dry (or ``first`` does not fit)."""
        lim, rng = self.lim, self.rng
        doms, tvars = self.types_of(spec)
        c = Ctx(lim, rng, self.np)
        inputs: list[str] = []
        self._staged = []
        self._ivs = []
        self._forms = {}
        self._shapes = {}

        # G1: indegree
        lo, hi = spec.arity
        c.n = rng.randint(lo, hi) if hi > lo else lo

        # G2: the first input
        forced, first = first, spec.inputs[0]
        assert isinstance(first, In)
        tvar = tvars[0]
        rlo, rhi = first.rank(c) if callable(first.rank) else first.rank
        rhi = min(rhi, lim.max_rank)
        if rlo > rhi:
            raise EmptyDomain(f"{spec.op}: first input rank {rlo}..{rhi}")
        numel_cap = lim.max_numel // first.room
        sd = spec.first_shape(c)
        ranks = range(rlo, rhi + 1) if sd is None or sd.ranks is None else [r for r in sd.ranks if rlo <= r <= rhi]
        x = forced
        hint = first.hint(c) if callable(first.hint) else first.hint
        dom = self._domains(spec.op, 0, c, hint)
        if x is not None:
            t = x.type
            if (t.dtype not in doms[tvar] or not rlo <= t.rank <= rhi or t.numel > numel_cap or not self._fits(dom)(x)
                    or (sd is not None and not sd.accepts(t.shape)) or first.value is not None):
                raise EmptyDomain(f"{spec.op}: {t} does not fit its first input")
        elif first.value is None and rng.random() < lim.picking_rate:
            fits = self._fits(dom)
            x = self.pool.pick(rng, doms[tvar], ranks, lambda v: v.type.numel <= numel_cap and fits(v)
                               and (sd is None or sd.accepts(v.type.shape)))
        if x is None:
            dtypes = _allowed(doms[tvar], dom)
            dtype = dtypes[rng.randrange(len(dtypes))]
            shape = _fresh_shape(rng, rlo, rhi, lim.max_dim, numel_cap) if sd is None else sd.sample(rng)
            t = TensorType(shape, dtype)
            if not rlo <= t.rank <= rhi or t.numel > numel_cap:
                raise EmptyDomain(f"{spec.op}: a first input of shape {shape} exceeds the rank or size limits")
            if first.value is None:
                x = self._new_value(t, first, dom.of(dtype, t.numel))
            else:  # its data come once the attributes are drawn
                x = Value(self._name(), t, CONST_KIND)
                self._staged.append((x, True))
                self._form(x)
        c.x, c.s, c.r = x.type, x.type.shape, x.type.rank
        self._bind(c, tvar, x.type.dtype)
        self._append_input(c, inputs, x, None, first.value is not None)

        # G3: attributes (and solver variables), in declaration order
        for name, dom in spec.attrs.items():
            d = dom(c) if callable(dom) else dom
            c.set(name, d.sample(rng))
        if first.value is not None:
            self._fill(spec, c, x, first.value(c))

        # G4..: the remaining inputs, one tensor at a time (a variadic first input repeats first)
        for _ in range(c.n - 1 if first.variadic else 0):
            self._append_input(c, inputs, self._input(c, spec.op, 0, first, tvar, doms))
        for k, inp in enumerate(spec.inputs[1:], start=1):
            if isinstance(inp, Const):
                arr = inp.value(c)
                if arr is None:
                    self._append_input(c, inputs, None)
                    continue
                # no draw at rate 0: generation with runtime constants off is what it was before them
                runtime = lim.runtime_consts > 0 and rng.random() < lim.runtime_consts
                v = Value(self._name(), TensorType(tuple(arr.shape), arr.dtype.name),
                          INPUT_KIND if runtime else CONST_KIND, arr)
                self._staged.append((v, False))
                if not runtime:
                    self._form(v)
                # only the operators that read constant values get their intervals (numpy min/max is slow)
                self._append_input(c, inputs, v, data_interval(arr) if spec.op in READS_CONSTANTS else None, True)
            elif inp.optional and not c.has(inp.name):
                self._append_input(c, inputs, None)
            else:
                for _ in range(c.n if inp.variadic else 1):
                    self._append_input(c, inputs, self._input(c, spec.op, k, inp, tvars[k], doms))
        while inputs and inputs[-1] == "":
            inputs.pop()

        # outputs, with the global size limit
        outs = spec.out(c)
        for t in outs:
            if t.numel > lim.max_numel or (0 in t.shape and not lim.empty_outputs):
                raise EmptyDomain(f"{spec.op}: output {t} exceeds the size limit")
        node = Node(spec.op, inputs, [], {k: v for k, v in c.attrs.items() if k[0] != "_" and v is not None},
                    f"n{len(self.g.nodes)}")
        out_ivs = output_intervals(spec.op, self._ivs, c.ins, node.attrs, outs)
        values = [Value(self._name(), t, NODE_KIND) for t in outs]
        node.outputs = [v.name for v in values]
        if self.admit is not None and not self._admitted(node, values):
            raise EmptyDomain(f"{spec.op}: the target compiler declines this call")
        return Proposal(spec, node, self._staged, values, out_ivs, c, self._forms, self._shapes)

    def _admitted(self, node: Node, outputs: list[Value]) -> bool:
        """Whether the target takes the call (its results' types too: the profile keys them); where it
        declines the call with some constant-like inputs taken at run time, the call with all of them
        constant is offered instead."""
        assert self.admit is not None
        values = ChainMap({v.name: v for v, _ in self._staged}, {v.name: v for v in outputs}, self.g.values)
        if self.admit.admits(node, values, self.lim.opset, self._shapes):
            return True
        if self._shapes:  # declined with constants written as a Shape: offered with them as constants
            for name in self._shapes:
                self._forms.pop(name, None)
            self._shapes = {}
            if self.admit.admits(node, values, self.lim.opset):
                return True
        pinned = [v for v, _ in self._staged if v.pinned]
        for v in pinned:  # staged values are this call's own: nothing else reads them yet
            v.kind = CONST_KIND
        return bool(pinned) and self.admit.admits(node, values, self.lim.opset)

    def _form(self, v: Value) -> None:
        """Writes the new constant ``v`` as a Constant node at the ``constant_nodes`` rate: in a typed
        attribute (value_ints ...) half the time its type allows one, else in ``value``; only in forms
        the target compiler admits (TVM 0.27 converts ``value`` alone).  A 1-D int64 constant that is
        (a slice of) the shape of a runtime tensor of the graph is written as that tensor's Shape half
        the time (under the same knob: at rate 0 there are no Constant nodes and no such Shape nodes)."""
        rate = self.lim.constant_nodes
        if rate <= 0:  # no draw at rate 0
            return
        from dlcfuzz.ir import constant_forms

        sources = self._shape_sources(v)
        if sources and self._form_rng.random() < 0.5:  # whether the target takes it: its consumer's key
            self._forms[v.name] = SHAPE_FORM
            self._shapes[v.name] = list(self._form_rng.choice(sources))
            return
        if self._form_rng.random() >= rate:
            return

        forms = constant_forms(v.type)
        typed = len(forms) > 1 and self._form_rng.random() < 0.5
        for form in ([forms[1]] if typed else []) + ["value"]:
            if self.admit is None or self.admit.admits_constant(form):
                self._forms[v.name] = form
                return

    def _shape_sources(self, v: Value) -> list[tuple[str, int | None, int | None]]:
        """The graph's runtime tensors (inputs and node outputs) whose shape, or a slice of it (opset
        15's Shape start/end), holds the data of 1-D int64 constant ``v``: (tensor, start, end)."""
        if v.data is None or v.type.dtype != "int64" or v.type.rank != 1 or v.type.numel == 0:
            return []
        want = tuple(int(d) for d in v.data)
        out: list[tuple[str, int | None, int | None]] = []
        for x in self.g.values.values():
            if x.kind == CONST_KIND or x.pinned or x.data is not None:
                continue
            shape = x.type.shape
            if shape == want:
                out.append((x.name, None, None))
            elif self.lim.opset >= 15:
                out += [(x.name, k, k + len(want)) for k in range(len(shape) - len(want) + 1)
                        if shape[k:k + len(want)] == want]
        return out

    def commit(self, p: Proposal) -> Node:
        """Adds a proposed call to the graph and its new tensors to the pool."""
        for v, reusable in p.staged:
            self.g.add_value(v)
            if reusable:
                self.pool.add(v)
        for x in p.node.inputs:
            if x:
                self.pool.used(x)
        for v, iv in zip(p.outputs, p.out_ivs, strict=True):
            self.g.add_value(v)
            self.pool.add(v)
            self.iv[v.name] = iv
            self.producer[v.name] = p.node
        forms = {name: form for name, form in p.forms.items() if name in self.g.values
                 and self.g.values[name].kind == CONST_KIND}
        if forms:
            self.g.meta.setdefault("constant_nodes", {}).update(forms)
            shapes = {name: src for name, src in p.shapes.items() if name in forms}
            if shapes:
                self.g.meta.setdefault("shape_of", {}).update(shapes)
        p.node.name = f"n{len(self.g.nodes)}"
        self.g.add_node(p.node)
        self.last_ctx = p.ctx  # tests assert the spec's checks on it
        return p.node

    def _fill(self, spec: OpSpec, c: Ctx, x: Value, arr: np.ndarray) -> None:
        """Gives the first input the data its spec drew (``In.value``), and their interval."""
        if not isinstance(arr, np.ndarray) or arr.shape != x.type.shape or arr.dtype.name != x.type.dtype:
            raise TypeError(f"{spec.op}: the drawn {spec.inputs[0].name} is not a {x.type} array")
        x.data = arr
        self.iv[x.name] = self._ivs[0] = data_interval(arr)

    def _append_input(self, c: Ctx, inputs: list[str], v: Value | None, iv: Iv | None = None,
                      const: bool = False) -> None:
        """Records an input (None: an omitted optional input, written as "") and its interval."""
        inputs.append(v.name if v is not None else "")
        c.ins.append(v.type if v is not None else None)
        self._ivs.append(iv if const or v is None else self.iv[v.name])

    def _bind(self, c: Ctx, tvar: str, dtype: str) -> None:
        c.types[tvar] = dtype
        if tvar == "T":
            c.T = dtype

    def _input(self, c: Ctx, op: str, slot: int, inp: In, tvar: str, doms: dict[str, tuple[str, ...]]) -> Value:
        rng = self.rng
        bound = c.types.get(tvar)
        dtypes: Sequence[str] = (bound,) if bound is not None else doms[tvar]
        if not dtypes:
            raise EmptyDomain(f"type variable {tvar} has no dtype")
        sd = inp.shape(c) if inp.shape else None
        if isinstance(sd, tuple):
            sd = Exact(sd)
        assert isinstance(sd, ShapeDom)
        v = None
        hint = inp.hint(c) if callable(inp.hint) else inp.hint
        dom = self._domains(op, slot, c, hint)
        if rng.random() < self.lim.picking_rate:
            fits = self._fits(dom)
            if isinstance(sd, Exact):
                cands = [w for d in dtypes for w in self.pool.by_type.get(TensorType(sd.shape, d), ()) if fits(w)]
                v = self.pool.choose(rng, cands)
            else:
                ranks = sd.ranks if sd.ranks is not None else range(self.lim.max_rank + 1)
                v = self.pool.pick(rng, dtypes, ranks, lambda w: sd.accepts(w.type.shape) and fits(w))
        if v is None:
            dtypes = _allowed(dtypes, dom)
            dtype = dtypes[rng.randrange(len(dtypes))]
            t = TensorType(sd.sample(rng), dtype)
            v = self._new_value(t, inp, dom.of(dtype, t.numel))
        if bound is None:
            self._bind(c, tvar, v.type.dtype)
        return v


class _Domains(dict):
    """dtype -> the slot's domain, computed on first use; ``shaped`` slots key by (dtype, numel)."""

    def __init__(self, fn: Callable[[str, int], Domain | None], shaped: bool) -> None:
        super().__init__()
        self.fn, self.shaped = fn, shaped

    def __missing__(self, dtype: str) -> Domain | None:
        d = self[dtype] = self.fn(dtype, 0)
        return d

    def get_shaped(self, dtype: str, numel: int) -> Domain | None:
        key = (dtype, numel)
        if key in self:
            return self[key]
        d = self[key] = self.fn(dtype, numel)
        return d

    def of(self, dtype: str, numel: int) -> Domain | None:
        return self.get_shaped(dtype, numel) if self.shaped else self[dtype]


def _allowed(dtypes: Sequence[str], dom: _Domains) -> Sequence[str]:
    """The dtypes a new tensor for the slot may take (a domain may REJECT some; by dtype only)."""
    ok = [d for d in dtypes if dom.of(d, 1) is not REJECT]
    return ok if len(ok) < len(dtypes) and ok else dtypes


def _fresh_shape(rng: random.Random, rlo: int, rhi: int, max_dim: int, numel_cap: int) -> tuple[int, ...]:
    rank = rng.randint(rlo, rhi)
    shape = []
    room = numel_cap
    for _ in range(rank):
        d = rng.randint(1, max(1, min(max_dim, room)))
        room = max(1, room // d)
        shape.append(d)
    return tuple(shape)
