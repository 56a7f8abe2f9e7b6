"""Isra's two baselines (§4.1.1-4.1.2): graphs built from the operators' syntax alone.

Both build each operator call the same way, with no compatibility check: the indegree within
the spec's arity; every data input a uniformly random existing tensor of *any* type (at the
picking rate) or a new graph input with a random dtype the schema (and target profile) allows for
that slot and a random shape (rank 0..max_rank, dims 1..max_dim); the attributes drawn from the
spec's domains evaluated on that random first input; ``Const`` inputs as the spec computes them;
the output types from ``spec.out`` when it succeeds, else a random type.  Spec functions run
outside the preconditions their authors wrote them for, so any exception they raise counts as a
failed draw: an attribute is then omitted, a constant becomes a random data input.

- ``DeclGenGenerator`` builds the whole graph so and checks validity once, at the end;
- ``RandoopGenerator`` (feedback-directed, after Randoop) checks the model after every call and
  keeps the call only if the model stays valid, so its graphs are always valid.

Validity is a callable ``Graph -> str | None`` (the reason it is invalid, None if valid) passed
by the caller, e.g. ``dlcfuzz.backends.ort.graph_error``: generators do not import backends.  It
runs in a child process (``Isolated``), because checkers crash on some of these graphs: onnx 1.23.2's
shape inference segfaults when an EyeLike with a ``dtype`` reads a tensor whose inference failed.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcfuzz.ir import CONST_KIND, DTYPES, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.solve import GenOptions, Instantiator, Stats, TypeProfile
from dlcfuzz.solve.instantiate import _fresh_shape
from dlcfuzz.solve.types import schema
from dlcfuzz.spec.dsl import Const, Ctx, In, OpSpec

Validity = Callable[[Graph], str | None]
CRASHED = "the check crashed or timed out"
_FAILED = object()


def _attempt(fn: Callable[[], Any]) -> Any:
    """``fn()``, or _FAILED if the spec function does not hold on this random call."""
    try:
        return fn()
    except Exception:  # EmptyDomain, IndexError, ZeroDivisionError ...: outside the spec's preconditions
        return _FAILED


def _serve(conn: Any, valid: Validity) -> None:
    faulthandler.disable()  # a crash is an expected outcome here, reported as CRASHED
    while True:
        try:
            g = conn.recv()
        except EOFError:
            return
        try:
            conn.send(valid(g))
        except Exception as e:
            conn.send(f"{type(e).__name__}: {e}")


class Isolated:
    """``valid`` run in a forked child process, restarted when it dies: a check that crashes or
    hangs counts as a rejection instead of killing the generator."""

    def __init__(self, valid: Validity, timeout: float = 60.0) -> None:
        self.valid, self.timeout = valid, timeout
        self.crashes = 0
        self._ctx = multiprocessing.get_context("fork")  # cheap restarts; any callable works
        self._proc: Any = None
        self._conn: Any = None

    def __call__(self, g: Graph) -> str | None:
        if self._proc is None:
            self._conn, child = self._ctx.Pipe()
            self._proc = self._ctx.Process(target=_serve, args=(child, self.valid), daemon=True)
            self._proc.start()
            child.close()
        self._conn.send(g)
        try:
            if self._conn.poll(self.timeout):
                return self._conn.recv()
        except EOFError:
            pass
        self.close()
        self.crashes += 1
        return CRASHED

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
            self._conn.close()
            self._proc = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit multiprocessing may be gone
            self.close()


@dataclass
class BaselineStats(Stats):
    """Isra's counters (``insertions``: calls in the returned graphs) plus the baselines' own."""

    generated: int = 0  # graphs returned
    valid: int = 0  # of which valid
    attempts: int = 0  # calls built (Randoop: each one checked unless spec.out failed)
    accepted: int = 0  # calls kept
    checks: int = 0  # validity checks run
    seconds: float = 0.0  # total generation time, validity checks included


class _Calls:
    """Appends random calls, built from the syntax only, to one graph; can undo the last one."""

    def __init__(self, g: Graph, lim: GenOptions, types: Callable, rng: random.Random, nprng: np.random.Generator):
        self.g, self.lim, self.types, self.rng, self.np = g, lim, types, rng, nprng
        self.dtypes = lim.dtypes or DTYPES
        self.pool: list[Value] = []  # graph inputs and node outputs: what a data input may reuse
        self.counter = 0

    def _value(self, t: TensorType, kind: str, data: np.ndarray | None = None) -> Value:
        self.counter += 1
        return self.g.add_value(Value(f"v{self.counter}", t, kind, data))

    def _random_type(self, dtypes: Sequence[str]) -> TensorType:
        lim = self.lim
        dtypes = dtypes or self.dtypes
        return TensorType(_fresh_shape(self.rng, 0, lim.max_rank, lim.max_dim, lim.max_numel),
                          dtypes[self.rng.randrange(len(dtypes))])

    def _data(self, c: Ctx, dtypes: Sequence[str]) -> str:
        """An existing tensor of any type, or a new graph input of a dtype the slot allows."""
        if self.pool and self.rng.random() < self.lim.picking_rate:
            v = self.pool[self.rng.randrange(len(self.pool))]
        else:
            v = self._value(self._random_type(dtypes), INPUT_KIND)
            self.pool.append(v)
        c.ins.append(v.type)
        return v.name

    def build(self, spec: OpSpec) -> bool:
        """Appends one call of ``spec``; returns whether ``spec.out`` gave its output types."""
        rng = self.rng
        doms, tvars = self.types(spec)
        c = Ctx(self.lim, rng, self.np)
        c.n = rng.randint(*spec.arity)
        first = spec.inputs[0]
        assert isinstance(first, In)
        inputs = [self._data(c, doms[tvars[0]])]
        c.x = c.ins[0]
        c.s, c.r = c.x.shape, c.x.rank
        c.types[tvars[0]] = c.x.dtype
        if tvars[0] == "T":
            c.T = c.x.dtype
        for name, dom in spec.attrs.items():
            v = _attempt(lambda: (dom(c) if callable(dom) else dom).sample(rng))
            c.set(name, None if v is _FAILED else v)
        if first.value is not None:  # the spec's data, where it can draw them for this input
            arr = _attempt(lambda: first.value(c))
            if isinstance(arr, np.ndarray) and arr.shape == c.x.shape and arr.dtype.name == c.x.dtype:
                inputs[0] = self._value(c.x, CONST_KIND, arr).name
        for _ in range(c.n - 1 if first.variadic else 0):
            inputs.append(self._data(c, doms[tvars[0]]))
        for k, inp in enumerate(spec.inputs[1:], start=1):
            if isinstance(inp, Const):
                arr = _attempt(lambda: inp.value(c))
                if isinstance(arr, np.ndarray):
                    v = self._value(TensorType(tuple(arr.shape), arr.dtype.name), CONST_KIND, arr)
                    inputs.append(v.name)
                    c.ins.append(v.type)
                elif arr is None:
                    inputs.append("")
                    c.ins.append(None)
                else:  # the spec cannot compute it here: any data input, as the syntax allows
                    inputs.append(self._data(c, doms.get(tvars[k], ())))
            elif inp.optional and not c.has(inp.name):
                inputs.append("")
                c.ins.append(None)
            else:
                for _ in range(c.n if inp.variadic else 1):
                    inputs.append(self._data(c, doms[tvars[k]]))
        while inputs and inputs[-1] == "":
            inputs.pop()
        outs = _attempt(lambda: spec.out(c))
        ok = isinstance(outs, list | tuple) and bool(outs) and all(
            isinstance(t, TensorType) and t.dtype in DTYPES and all(isinstance(d, int) and d >= 0 for d in t.shape)
            for t in outs)
        if not ok:  # the call is invalid anyway: give it the schema's number of outputs, of random types
            sch = schema(spec.op, self.lim.opset)
            outs = [self._random_type(()) for _ in range(max(1, sch.min_output if sch else 1))]
        node = Node(spec.op, inputs, [], {k: v for k, v in c.attrs.items() if k[0] != "_" and v is not None},
                    f"n{len(self.g.nodes)}")
        for t in outs:
            v = self._value(t, NODE_KIND)
            self.pool.append(v)
            node.outputs.append(v.name)
        self.g.add_node(node)
        return ok

    def mark(self) -> tuple[int, int, int, int, list[str]]:
        return len(self.g.nodes), len(self.g.values), len(self.pool), self.counter, list(self.g.outputs)

    def undo(self, mark: tuple[int, int, int, int, list[str]]) -> None:
        """Restores the graph (and the value naming) exactly as it was at ``mark``."""
        nodes, values, pool, self.counter, self.g.outputs = mark
        del self.g.nodes[nodes:]
        for name in list(self.g.values)[values:]:
            del self.g.values[name]
        del self.pool[pool:]


class _Baseline:
    strategy = ""

    def __init__(self, specs: Sequence[OpSpec], limits: GenOptions, op_range: tuple[int, int],
                 profile: TypeProfile | None = None, valid: Validity | None = None, isolate: bool = True) -> None:
        self.limits, self.op_range, self.profile = limits, op_range, profile
        self.valid = Isolated(valid) if isolate and valid is not None else valid
        # the same operator set as Isra's: those with a dtype for every input under the dtypes/target
        self._types = Instantiator(Graph(), limits, random.Random(0), np.random.default_rng(0), profile)
        self.specs = [s for s in specs if self._types.available(s)]
        self.unavailable = sorted(s.op for s in specs if not self._types.available(s))
        if not self.specs:
            raise ValueError("no operator can be generated under this dtype set, opset and target")
        self.stats = BaselineStats()

    def generate(self, seed: int) -> Graph:
        start = time.perf_counter()
        rng = random.Random(seed)
        g = Graph(opset=self.limits.opset, meta={"seed": seed, "strategy": self.strategy})
        calls = _Calls(g, self.limits, self._types.types_of, rng, np.random.default_rng(seed))
        self._fill(g, calls, rng, rng.randint(*self.op_range))
        self.stats.generated += 1
        self.stats.valid += bool(g.meta["valid"])
        self.stats.seconds += time.perf_counter() - start
        return g

    def _pick(self, rng: random.Random) -> OpSpec:
        return self.specs[rng.randrange(len(self.specs))]

    def _check(self, g: Graph) -> str | None:
        """Why ``g`` is invalid (None: valid); a graph the check cannot even export is invalid."""
        self.stats.checks += 1
        try:
            return self.valid(g)
        except Exception as e:  # e.g. an empty list attribute, whose ONNX type cannot be inferred
            return f"{type(e).__name__}: {e}"

    def _fill(self, g: Graph, calls: _Calls, rng: random.Random, n_ops: int) -> None:
        raise NotImplementedError


class DeclGenGenerator(_Baseline):
    """The whole graph from the syntax, validity checked once at the end (``g.meta["valid"]``;
    None when no validity check was given)."""

    strategy = "declgen"

    def _fill(self, g: Graph, calls: _Calls, rng: random.Random, n_ops: int) -> None:
        for _ in range(n_ops):
            self.stats.attempts += 1
            self.stats.accepted += 1
            self.stats.insertions += 1
            calls.build(self._pick(rng))
        g.set_leaf_outputs()
        reason = self._check(g) if self.valid is not None else None
        g.meta["valid"] = None if self.valid is None else reason is None
        g.meta["invalid_reason"] = reason


class RandoopGenerator(_Baseline):
    """Feedback-directed: a call is kept only if ``spec.out`` typed it, its outputs stay within the
    element limit, and the whole model is still valid; else it is undone and another random call
    is tried, up to ``budget`` x the operator count attempts.

    The new call's outputs are graph outputs when it is checked, so with ``graph_error`` the ONNX
    checker's strict shape inference confirms their declared types where it can infer them.  Some
    graphs pass the checker and ONNX Runtime's session creation but fail when run, or run with
    other output shapes than ONNX infers: to exclude them too, pass a check that also runs the model."""

    strategy = "randoop"
    budget = 20

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.valid is None:
            raise ValueError("RandoopGenerator needs a validity check")

    def _fill(self, g: Graph, calls: _Calls, rng: random.Random, n_ops: int) -> None:
        attempts = 0
        while len(g.nodes) < n_ops and attempts < self.budget * n_ops:
            attempts += 1
            mark = calls.mark()
            kept = calls.build(self._pick(rng))
            node = g.nodes[-1]
            kept = kept and all(g.values[o].type.numel <= self.limits.max_numel for o in node.outputs)
            if kept:
                g.set_leaf_outputs()
                kept = self._check(g) is None
            if not kept:
                calls.undo(mark)
        self.stats.attempts += attempts
        self.stats.accepted += len(g.nodes)
        self.stats.insertions += len(g.nodes)
        g.meta.update(valid=True, invalid_reason=None, target_ops=n_ops, attempts=attempts)
