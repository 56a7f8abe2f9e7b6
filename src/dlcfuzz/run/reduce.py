"""Test-case reduction: one small case per bug.

``reduce_bundle(folder)`` shrinks the test of a bug bundle (``run/bundle.py``) while it keeps the
bundle's signature (``run/dedup.py``); ``reduce_case(Case(...), budget, pool)`` does the same for
a test a campaign has in memory.  A candidate is *interesting* when, judged exactly as the
campaign judges a test (the finding's backend and variant(s) in isolated workers, the reference
evaluator or ORT without optimizations as the differential baseline, ``oracle.judge`` /
``judge_invalid``, a crash confirmed in a fresh worker), one of its findings has the bundle's
signature.  Candidates stay valid models (the ONNX checker with strict shape inference in this
process, an ONNX Runtime run without optimizations in a worker, outputs of the declared types),
except for disruptive findings, whose model is invalid on purpose: there the node that breaks the
constraint (``graph.meta["violation"]``) is kept and only the signature counts.

Stages, repeated while one of them makes progress and the budget lasts:

1. nodes: first the *suspect*, the operator the finding points at, alone (the located first
   diverging node, or the one node a crash message names: stage "suspect"), then ddmin-style:
   remove chunks of nodes (halving the chunk size down to single nodes); a removed node's outputs
   that kept nodes read become graph inputs of the same type holding the values the node produced
   (computed once per round by exposing every intermediate value of the current case as an output,
   on the baseline), new leaves become graph outputs, unused inputs and constants go;
2. outputs: keep only the differing output, else drop outputs one at a time (with the nodes that
   only fed them);
3. shapes: halve dimensions (or set them to 1) of graph inputs and weights, jointly by dimension
   length first, then one at a time; node output types are inferred again with the operator specs
   (cross-checked with ONNX shape inference, which covers specs whose types depend on solver
   variables) and the spec's checks; inputs are sliced, else synthesized afresh;
4. attributes: omit them (the ONNX default, where the spec allows omitting), or set small values
   (0, 1, the first choice) that the spec's domain holds;
5. dtypes: float64 / float16 / bfloat16 to float32, everywhere at once.

A pinned runtime input (``Value.pinned``: a shape, axes ... taken at run time) keeps its shape and
value (stage 5 converts a float one with its data): it is fed its own data, and goes only with the
last node that reads it.

Afterwards the reduced case runs again in a fresh worker; if it no longer reproduces (a flaky
bug), the smallest accepted candidate that reproduces again (twice in all) is taken instead.  For
value findings the *first diverging operator* is located (GenCoG): every intermediate value
becomes an output and the first node, in topological order, whose outputs differ beyond the
tolerance between the backend and its baseline is reported.

The result lands next to the original files, which stay untouched: ``reduced/`` (model.onnx,
graph.json, inputs.npz, expected.npz for differential findings, the bundle's repro.py and the
backend's artifacts for the reduced model) and ``reduction.json``.

A campaign reduces a new distinct bug right after writing its bundle with::

    result = reduce_case(Case(graph, test.inputs, finding, sig, cfg.tolerances), 60, pool=self.pool)
    write_reduction(folder, result)
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import random
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import OK, Outcome, Test, Variant
from dlcfuzz.backends.ort import model_error
from dlcfuzz.export.onnx import checker_error, to_bytes, to_onnx
from dlcfuzz.ir import (
    CONST_KIND,
    DTYPE_OF_CODE,
    INPUT_KIND,
    NODE_KIND,
    ONNX_CODE,
    Graph,
    Node,
    TensorType,
    Value,
    np_dtype,
)
from dlcfuzz.ir.hints import random_array
from dlcfuzz.oracle import (
    CONFIRM_RUNS,
    DIFFERENTIAL,
    DISRUPTIVE,
    FALLBACK,
    INCONSISTENT,
    METAMORPHIC,
    Finding,
    all_finite,
    criteria_for,
    explain,
    judge,
    judge_invalid,
    run_baseline,
    run_confirmed,
)
from dlcfuzz.oracle import CRASH as ORACLE_CRASH
from dlcfuzz.oracle.judge import baseline_chain
from dlcfuzz.oracle.localize import exposed, first_divergence
from dlcfuzz.run.bugreport import write_report
from dlcfuzz.run.dedup import graph_signature, named_nodes, normalize, producer, title
from dlcfuzz.run.store import StoreDamaged, StoreError, StoreReader
from dlcfuzz.run.worker import PhaseLimits, WorkerDied, WorkerPool
from dlcfuzz.solve import GenOptions
from dlcfuzz.solve.types import input_type_vars
from dlcfuzz.spec import REGISTRY
from dlcfuzz.spec.dsl import Ctx, In
from dlcfuzz.values import synthesize

VALIDITY = FALLBACK  # the run that confirms a candidate is a valid model (and doubles as the fallback baseline)
FLAKY_KINDS = frozenset({"signal", "exit", "timeout", "oom", "unconfirmed"})
ORIGINAL_ATTEMPTS = 3  # runs of the original before it counts as no longer reproducing (flaky kinds)
FALLBACK_TRIES = 8  # earlier candidates tried when the reduced one does not reproduce again
FLOAT_TARGET = "float32"
SIMPLER_FLOATS = ("float64", "float16", "bfloat16")

__all__ = ["Case", "ReduceError", "ReductionResult", "reduce_bundle", "reduce_case", "retype", "write_reduction"]


class ReduceError(Exception):
    """The folder is not a bug bundle, or its bug no longer reproduces (one line)."""


@dataclass
class Case:
    """A test with a distinct bug, as a campaign has it right after finding the bug.

    ``finding``: the Finding (or its ``asdict``, as in finding.json); ``signature``: its signature;
    ``tolerances``: the campaign's per-dtype (rtol, atol) overrides."""

    graph: Graph
    inputs: dict[str, np.ndarray]
    finding: Finding | dict[str, Any]
    signature: str
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class ReductionResult:
    signature: str
    graph: Graph  # the reduced graph (names of nodes and values are the original's)
    inputs: dict[str, np.ndarray]
    expected: list[np.ndarray] | None  # the baseline's outputs (differential findings)
    ops_before: int
    ops_after: int
    nodes_before: list[str]  # operator types in topological order
    nodes_after: list[str]
    inputs_before: int
    inputs_after: int
    elements_before: int  # elements of all graph inputs
    elements_after: int
    seconds: float
    compiler_seconds: float  # of which inside the bug's compiler
    candidates_tried: int  # candidates run on the compilers (cached repeats and type errors not counted)
    first_diverging: dict[str, str] | None  # {node, op, output, detail}
    reproduced: bool  # the reduced case gave the signature again in a fresh worker
    stages: dict[str, int] = field(default_factory=dict)  # accepted candidates per stage
    budget_exhausted: bool = False
    validity: str = ""  # what candidates had to pass: "checker+ort", "checker" or "none" (disruptive)
    artifacts: dict[str, str | bytes] = field(default_factory=dict)  # the backend's files for the reduced model
    # the divergence came from a part of the graph apart from the signed operator (``_Reducer.isolate``):
    # its own signature and title, and the finding there
    signed_as: str = ""
    title: str = ""
    finding: Finding | None = None

    def summary(self) -> dict[str, Any]:
        """What reduction.json holds."""
        return {"signature": self.signature, "ops_before": self.ops_before, "ops_after": self.ops_after,
                "nodes_before": self.nodes_before, "nodes_after": self.nodes_after,
                "inputs_before": self.inputs_before, "inputs_after": self.inputs_after,
                "elements_before": self.elements_before, "elements_after": self.elements_after,
                "seconds": round(self.seconds, 2), "compiler_seconds": round(self.compiler_seconds, 2),
                "candidates_tried": self.candidates_tried,
                "first_diverging": self.first_diverging, "reproduced": self.reproduced, "stages": self.stages,
                "budget_exhausted": self.budget_exhausted, "validity": self.validity,
                **({"signed_as": self.signed_as, "title": self.title} if self.signed_as else {})}


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------
BUNDLE_FILES = ("finding.json", "graph.json", "inputs.npz", "model.onnx")


def reduce_bundle(folder: Path, budget_seconds: float = 300, phases: PhaseLimits | None = None,
                  progress: Callable[[str], None] | None = None) -> ReductionResult:
    """Reduces the bug bundle in ``folder`` and writes ``reduced/`` and ``reduction.json`` into it.

    Raises ReduceError (one line) when the folder is not a bundle or its bug no longer reproduces;
    the folder is then left untouched."""
    folder = Path(folder)
    for name in BUNDLE_FILES:
        if not (folder / name).is_file():
            raise ReduceError(f"{folder} is not a bug bundle (no {name})")
    try:
        info = json.loads((folder / "finding.json").read_text())
        sig = info["signature"]
        graph = Graph.from_json((folder / "graph.json").read_text())
        with np.load(folder / "inputs.npz") as f:
            inputs = {k: f[k] for k in f.files}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ReduceError(f"{folder}: cannot read the bundle: {type(e).__name__}: {e}".splitlines()[0]) from None
    case = Case(graph, inputs, info, sig, _campaign_tolerances(folder))
    pool = WorkerPool(phases or PhaseLimits())
    try:
        result = reduce_case(case, budget_seconds, pool, progress=progress)
    finally:
        pool.close()
    write_reduction(folder, result)
    return result


def reduce_case(case: Case, budget_seconds: float = 300, pool: WorkerPool | None = None,
                phases: PhaseLimits | None = None, progress: Callable[[str], None] | None = None,
                verify: bool = True) -> ReductionResult:
    """Reduces one case; ``pool`` may be the campaign's (workers are shared, one test at a time).

    ``verify``: first confirm that the case gives its signature (up to 3 runs for fatal signals,
    hangs and memory blow-ups); raises ReduceError if it does not.  A campaign that has just seen
    the bug may skip that run (``verify=False``).  ``budget_seconds`` bounds the search; the
    confirmation runs before and after it and the first-diverging-operator search come on top."""
    own = pool is None
    pool = pool or WorkerPool(phases or PhaseLimits())
    try:
        return _Reducer(case, pool, budget_seconds, progress).run(verify)
    finally:
        if own:
            pool.close()


def write_reduction(folder: Path, result: ReductionResult) -> None:
    """Writes ``reduced/`` and ``reduction.json`` into the bundle ``folder`` (nothing else changes)."""
    folder = Path(folder)
    tmp = folder / "reduced.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    for name, data in result.artifacts.items():  # files the backend made (the repro source may read them)
        path = tmp / Path(name).name
        path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)
    (tmp / "model.onnx").write_bytes(to_bytes(result.graph))
    (tmp / "graph.json").write_text(result.graph.to_json())
    np.savez(tmp / "inputs.npz", **result.inputs)
    if result.expected is not None:
        np.savez(tmp / "expected.npz", **{f"o{i}": np.asarray(o) for i, o in enumerate(result.expected)})
    if (folder / "repro.py").is_file():  # it reads the files next to it: it replays the reduced case
        shutil.copyfile(folder / "repro.py", tmp / "repro.py")
    final = folder / "reduced"
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    text = json.dumps(result.summary(), indent=1)
    (folder / "reduction.json.tmp").write_text(text)
    (folder / "reduction.json.tmp").replace(folder / "reduction.json")
    if (folder / "finding.json").is_file():
        write_report(folder)  # the report now describes the reduced case


def _campaign_tolerances(folder: Path) -> dict[str, tuple[float, float]]:
    """The tolerances of the campaign a bundle came from (``<campaign>/bugs/<sig>``), if readable."""
    campaign = folder.parent.parent
    if not (campaign / "campaign.sqlite").is_file():
        return {}
    try:
        store = StoreReader(campaign)
        try:
            config = store.meta_value("config")
        finally:
            store.close()
        tol = json.loads(config).get("tolerances", {}) if config else {}
        return {k: tuple(v) for k, v in tol.items()}
    except StoreDamaged:  # said in one line, with the command that rebuilds it
        raise
    except (StoreError, sqlite3.Error, ValueError, TypeError, AttributeError):
        return {}


def finding_from_dict(d: dict[str, Any]) -> Finding:
    names = {f.name for f in dataclasses.fields(Finding)}
    return Finding(**{k: v for k, v in d.items() if k in names})


# ---------------------------------------------------------------------------------------------
# Graph surgery
# ---------------------------------------------------------------------------------------------
def _copy(g: Graph) -> Graph:
    out = Graph(opset=g.opset, meta=copy.deepcopy(g.meta))
    out.values = {k: Value(v.name, v.type, v.kind, v.data, dict(v.hint) if v.hint else v.hint)
                  for k, v in g.values.items()}
    out.nodes = [Node(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.name) for n in g.nodes]
    out.outputs = list(g.outputs)
    return out


def _in_order(g: Graph) -> bool:
    seen = {n for n, v in g.values.items() if v.kind != NODE_KIND}
    for n in g.nodes:
        if any(x and x not in seen for x in n.inputs):
            return False
        seen.update(n.outputs)
    return True


def _hint_of(data: np.ndarray | None, t: TensorType) -> dict[str, Any] | None:
    """A hint that keeps fresh values of a former intermediate within the range it held."""
    if data is None or data.size == 0 or t.dtype == "bool":
        return None
    a = np.asarray(data)
    if a.dtype.kind == "f":
        if not np.isfinite(a).all():
            return None
        return {"min": float(a.min()), "max": float(a.max())}
    if a.dtype.kind in "iu":
        return {"min": int(a.min()), "max": int(a.max())}
    return None


def _prune(g: Graph, feeds: dict[str, np.ndarray], protect: str = "") -> None:
    """Drops nodes that feed nothing (except ``protect``), then unused inputs and constants."""
    while True:
        used = {x for n in g.nodes for x in n.inputs if x} | set(g.outputs)
        dead = [i for i, n in enumerate(g.nodes)
                if not (protect and n.name == protect) and not any(o in used for o in n.outputs)]
        if not dead:
            break
        for i in reversed(dead):
            for o in g.nodes[i].outputs:
                g.values.pop(o, None)
            del g.nodes[i]
    used = {x for n in g.nodes for x in n.inputs if x} | set(g.outputs)
    produced = {o for n in g.nodes for o in n.outputs}
    for name in list(g.values):
        v = g.values[name]
        if (v.kind != NODE_KIND and name not in used) or (v.kind == NODE_KIND and name not in produced):
            del g.values[name]
            feeds.pop(name, None)


def _subgraph(src: Graph, keep: list[int], feeds: dict[str, np.ndarray], inter: dict[str, np.ndarray],
              rng: np.random.Generator) -> tuple[Graph, dict[str, np.ndarray]] | None:
    """The nodes ``keep`` of ``src``: values they read that removed nodes produced become graph
    inputs (holding ``inter``'s values), new leaves become outputs, unused inputs go."""
    nodes = [src.nodes[i] for i in keep]
    produced = {o for n in nodes for o in n.outputs}
    consumed = {x for n in nodes for x in n.inputs if x}
    src_consumed = {x for n in src.nodes for x in n.inputs if x}
    g = Graph(opset=src.opset, meta=copy.deepcopy(src.meta))
    new_feeds: dict[str, np.ndarray] = {}
    for name, v in src.values.items():
        if v.kind == NODE_KIND:
            if name in produced:
                g.values[name] = Value(name, v.type, NODE_KIND, None, v.hint)
            elif name in consumed:
                data = inter.get(name)
                hint = _hint_of(data, v.type)
                if data is None or tuple(np.shape(data)) != v.type.shape or np.asarray(data).dtype.name != v.type.dtype:
                    data = random_array(rng, v.type, hint)
                g.values[name] = Value(name, v.type, INPUT_KIND, None, hint)
                new_feeds[name] = np.asarray(data)
        elif name in consumed:
            g.values[name] = v
            if v.kind == INPUT_KIND:
                new_feeds[name] = feeds[name]
    g.nodes = [Node(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.name) for n in nodes]
    outs = [o for o in src.outputs if o in produced]
    have = set(outs)
    outs += [o for n in nodes for o in n.outputs if o in src_consumed and o not in consumed and o not in have]
    if not outs or not g.nodes:
        return None
    g.outputs = outs
    return g, new_feeds


def _without_outputs(src: Graph, feeds: dict[str, np.ndarray], keep: list[str], protect: str
                     ) -> tuple[Graph, dict[str, np.ndarray]] | None:
    g = _copy(src)
    g.outputs = list(keep)
    feeds = dict(feeds)
    _prune(g, feeds, protect)
    if not g.outputs or not g.nodes:
        return None
    return g, feeds


# ---------------------------------------------------------------------------------------------
# Types, inferred again with the operator specs (and ONNX shape inference)
# ---------------------------------------------------------------------------------------------
class _SpecRejects(Exception):
    pass


def _slots(spec: Any, node: Node) -> list[int | None]:
    """The position in ``spec.inputs`` of the spec input (In or Const) behind each input of ``node``."""
    if getattr(spec.inputs[0], "variadic", False):
        return [0] * len(node.inputs)
    return [k if k < len(spec.inputs) else None for k in range(len(node.inputs))]


def _ctx(spec: Any, node: Node, ins: list[TensorType | None], opset: int) -> Any:
    """The spec's context for an existing call: input types, type variables and attributes (the
    solver variables that are not attributes stay unknown: a spec function that reads one raises)."""
    c = Ctx(GenOptions(opset=opset), random.Random(0), np.random.default_rng(0))
    first = ins[0]
    c.x, c.s, c.r, c.T = first, first.shape, first.rank, first.dtype
    tvars = input_type_vars(spec, opset)
    for k, t in zip(_slots(spec, node), ins, strict=True):
        if k is not None and t is not None:
            c.types.setdefault(tvars[k], t.dtype)
    c.n = len(node.inputs) if spec.variadic else 1
    c.outs = len(node.outputs)
    c.ins = list(ins) + ([] if spec.variadic else [None] * max(0, len(spec.inputs) - len(ins)))
    for name in spec.attrs:
        if name.startswith("_has_"):
            k = next((i for i, inp in enumerate(spec.inputs) if inp.name == name[5:]), len(node.inputs))
            c.set(name, int(k < len(node.inputs) and node.inputs[k] != ""))
        elif not name.startswith("_"):
            c.set(name, node.attrs.get(name))
    for name, v in node.attrs.items():
        if name not in c.attrs:
            c.set(name, v)
    return c


def _spec_types(node: Node, ins: list[TensorType | None], opset: int) -> list[TensorType] | None:
    """Output types by the operator's spec (None: the spec cannot tell without its solver
    variables); raises _SpecRejects when one of the spec's checks fails on the call."""
    spec = REGISTRY.get(node.op)
    if spec is None or not ins or ins[0] is None:
        return None
    try:
        c = _ctx(spec, node, ins, opset)
    except Exception:  # an input position the spec does not describe
        return None
    for name, check in spec.checks.items():
        try:
            ok = check(c)
        except Exception:  # reads a solver variable: ONNX inference and the run will judge
            continue
        if not ok:
            raise _SpecRejects(f"{node.op}: check {name!r} fails")
    try:
        outs = spec.out(c)
    except Exception:
        return None
    if not isinstance(outs, list | tuple) or not all(isinstance(t, TensorType) for t in outs):
        return None
    return list(outs)


def _onnx_types(g: Graph) -> dict[str, tuple[str | None, list[int | None] | None]] | None:
    """Every value's (dtype, dims) by ONNX's strict shape inference, the declared output types
    ignored; None when inference rejects the model."""
    try:
        model = to_onnx(g)
    except (ValueError, KeyError, TypeError):
        return None
    for o in model.graph.output:
        o.ClearField("type")
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception:
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        except Exception:
            return None
    out: dict[str, tuple[str | None, list[int | None] | None]] = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        tt = vi.type.tensor_type
        dims = ([d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
                if tt.HasField("shape") else None)
        out[vi.name] = (DTYPE_OF_CODE.get(tt.elem_type), dims)
    return out


def _spec_admits(g: Graph) -> bool:
    """Whether no node breaks a check of its spec, on the types the specs alone tell (a node whose
    spec cannot tell its outputs leaves them unknown, and the checks that need them are skipped)."""
    known = {name: v.type for name, v in g.values.items() if v.kind != NODE_KIND}
    for node in g.nodes:
        try:
            outs = _spec_types(node, [known.get(x) if x else None for x in node.inputs], g.opset)
        except _SpecRejects:
            return False
        for o, t in zip(node.outputs, outs or [], strict=False):
            known[o] = t
    return True


def retype(g: Graph) -> Graph | None:
    """``g`` with every node output's type inferred again from its graph inputs' and constants'
    types (after a shape, attribute or dtype change): by the operator's spec, cross-checked with
    ONNX shape inference (which alone covers specs whose types need their solver variables).
    None when a spec's check fails, the two disagree, or neither can tell.  The specs judge first:
    ONNX's C++ inference runs in this process, and aborts it on some invalid calls (onnx 1.23:
    Split-18 with num_outputs 1 and two outputs, under data propagation)."""
    if not _spec_admits(g):
        return None
    onnx_t = _onnx_types(g)
    if onnx_t is None:
        return None
    out = _copy(g)
    known = {name: v.type for name, v in g.values.items() if v.kind != NODE_KIND}
    for node in out.nodes:
        ins = [known.get(x) if x else None for x in node.inputs]
        try:
            by_spec = _spec_types(node, ins, g.opset)
        except _SpecRejects:
            return None
        for k, o in enumerate(node.outputs):
            dtype, dims = onnx_t.get(o, (None, None))
            t_spec = by_spec[k] if by_spec is not None and k < len(by_spec) else None
            if dtype is not None and dims is not None and None not in dims:
                t = TensorType(tuple(dims), dtype)
                if t_spec is not None and t_spec != t:
                    return None
            elif t_spec is not None:
                t = t_spec
            else:
                return None
            known[o] = t
            out.values[o].type = t
    return out


# ---------------------------------------------------------------------------------------------
# The interestingness test
# ---------------------------------------------------------------------------------------------
@dataclass
class _Trial:
    interesting: bool
    reason: str  # "static" (checker/types), "run" (ORT refuses), "baseline" (none, or not finite), "signature"
    output: int = -1  # the differing output of the matching finding
    expected: list[np.ndarray] | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def _digest(model: bytes, graph_json: str, feeds: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(model)
    h.update(graph_json.encode())
    for k in sorted(feeds):
        a = np.ascontiguousarray(feeds[k])
        h.update(f"{k}:{a.dtype}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class _Reducer:
    def __init__(self, case: Case, pool: WorkerPool, budget: float, progress: Callable[[str], None] | None):
        self.case = case
        self.pool = pool
        self.progress = progress or (lambda msg: None)
        self.start = time.monotonic()
        self.deadline = self.start + budget
        self.f = case.finding if isinstance(case.finding, Finding) else finding_from_dict(case.finding)
        self.sig = case.signature
        self.tol = dict(case.tolerances)
        self.violation = case.graph.meta.get("violation") if self.f.oracle == DISRUPTIVE else None
        self.protect = (self.violation or {}).get("node", "")
        self.tried = 0
        self.compiler_seconds = 0.0  # inside the bug's compiler, over all candidates (the campaign's CPU breakdown)
        self.cache: dict[str, _Trial] = {}
        self.stages: dict[str, int] = {}
        self.history: list[tuple[Graph, dict[str, np.ndarray]]] = []
        self.last: _Trial | None = None
        self.rng = np.random.default_rng(0)
        self.check_static = self.check_run = self.violation is None
        self.exhausted = False
        self.beside = ""  # the operators a divergence needs beside it (``isolate``)
        self._start_backend()

    # -- set-up ----------------------------------------------------------------------------------
    def _start_backend(self) -> None:
        f = self.f
        try:
            self.backend = load_backend(f.backend)
        except Exception as e:
            raise ReduceError(f"bug {self.sig}: cannot load backend {f.backend}: {e}".splitlines()[0]) from None
        ok, why = self.backend.available()
        if not ok:
            raise ReduceError(f"bug {self.sig}: {why}")
        try:
            _, variants = self.pool.describe(f.backend)
        except WorkerDied as e:
            raise ReduceError(f"bug {self.sig}: {str(e).splitlines()[0]}") from None
        order = [n for n, _ in variants]
        # judged by what the campaign judges by: the same tolerances and the variants' traits
        self.criteria = criteria_for({f.backend: {n: Variant(n, o) for n, o in variants}}, self.tol)
        wanted = {f.variant}
        if f.oracle in (METAMORPHIC,) or (f.oracle == DISRUPTIVE and f.kind == INCONSISTENT):
            wanted.add(f.other)
        missing = wanted - set(order)
        if missing:
            raise ReduceError(f"bug {self.sig} no longer reproduces: {f.backend} has no variant "
                              f"{', '.join(sorted(missing))} now")
        self.variants = [n for n in order if n in wanted]  # the order the campaign ran them in

    def time_left(self) -> bool:
        if time.monotonic() >= self.deadline:
            self.exhausted = True
            return False
        return True

    # -- running a candidate -----------------------------------------------------------------------
    def _run_backend(self, test: Test, fresh: bool) -> tuple[dict[str, Outcome], list[Finding]]:
        """The backend's outcomes, confirmed as the campaign confirms them (``oracle.run_confirmed``)."""
        runs = CONFIRM_RUNS if self.f.oracle == ORACLE_CRASH else 1  # a value finding is one run's outputs
        got, late, seconds = run_confirmed(self.pool, self.f.backend, test, self.variants, fresh=fresh, runs=runs)
        self.compiler_seconds += seconds
        return got, late

    def _baseline(self, g: Graph, test: Test, ort: Outcome | None
                  ) -> tuple[list[np.ndarray] | None, tuple[str, str] | None]:
        """(the baseline's outputs, which baseline ran), chosen as the campaign chooses it
        (``oracle.run_baseline``); ``ort``: ONNX Runtime's validity run, where it ran."""
        base = run_baseline(self.pool, test, g, fallback=ort)
        return base.outputs, base.which

    def check(self, g: Graph, feeds: dict[str, np.ndarray], fresh: bool = False) -> _Trial:
        """Whether the candidate gives the signature (cached by model and inputs)."""
        try:
            if self.violation is None:  # a disruptive model may break the graph's own rules too
                g.validate()
            model = to_bytes(g)
        except (ValueError, KeyError, TypeError):
            return _Trial(False, "static")
        graph_json = g.to_json()
        key = _digest(model, graph_json, feeds)
        if not fresh and key in self.cache:
            return self.cache[key]
        trial = self._check(g, model, graph_json, feeds, fresh)
        self.cache[key] = trial
        return trial

    def _check(self, g: Graph, model: bytes, graph_json: str, feeds: dict[str, np.ndarray], fresh: bool) -> _Trial:
        if self.check_static and model_error(g, run=False) is not None:
            return _Trial(False, "static")
        if not self.backend.supports({n.op for n in g.nodes}, g):
            return _Trial(False, "static")
        self.tried += 1
        test = Test(model, graph_json, {k: np.asarray(v) for k, v in feeds.items()})
        ort = None
        if self.check_run:
            ort = self.pool.run(VALIDITY[0], test, [VALIDITY[1]])[VALIDITY[1]]
            if ort.status != OK or not _declared(g, ort.outputs or []):
                return _Trial(False, "run")
        baseline, judged_by = None, None
        if self.f.oracle == DIFFERENTIAL:
            baseline, judged_by = self._baseline(g, test, ort)
            if baseline is None or not all_finite(baseline):
                return _Trial(False, "baseline")
        outcomes, late = self._run_backend(test, fresh)
        # a value finding keeps the name of what it was compared with when it was found (a disruptive
        # model's graph breaks a rule on purpose: its outputs are not read for traits)
        criteria = self.criteria if self.violation is not None else self.criteria.for_graph(g, self.f.other)
        if self.violation is not None:
            confirmed = checker_error(to_onnx(g)) is not None
            verdict = judge_invalid({self.f.backend: outcomes}, self.violation, confirmed, criteria)
        else:
            verdict = judge({self.f.backend: outcomes}, baseline, criteria)
        findings = verdict.findings + late
        if any(f.diverges and graph_signature(f, g) != self.sig for f in findings):
            # where the divergence starts and which pass causes it, as the campaign signed it (only
            # needed while the diverging node is not yet the producer of the differing output)
            explain(g, test, findings, {self.f.backend: outcomes}, {self.f.backend: self.backend}, self.pool,
                    judged_by, criteria)
        for f in findings:
            if self.beside and f.diverges:
                f.details["beside"] = self.beside
            if graph_signature(f, g) == self.sig:
                return _Trial(True, "", f.output, baseline, outcomes, findings)
        return _Trial(False, "signature", -1, baseline, outcomes, findings)

    def accept(self, cand: tuple[Graph, dict[str, np.ndarray]] | None, stage: str) -> bool:
        if cand is None or not self.time_left():
            return False
        trial = self.check(*cand)
        if trial.interesting:
            self.last = trial
            self.history.append(cand)
            self.stages[stage] = self.stages.get(stage, 0) + 1
            g = cand[0]
            self.progress(f"{stage}: {len(g.nodes)} nodes, {len(g.inputs)} inputs "
                          f"({self.tried} candidates, {time.monotonic() - self.start:.0f}s)")
        return trial.interesting

    # -- the original ----------------------------------------------------------------------------------
    def calibrate(self, g: Graph, feeds: dict[str, np.ndarray]) -> None:
        """Candidates must stay as valid as the original is: a bug of ORT itself (or of the ONNX
        checker) may keep the original from passing the validity check."""
        if self.violation is not None:
            return
        self.check_static = model_error(g, run=False) is None
        self.check_run = self.check_static
        if self.check_run:
            test = Test(to_bytes(g), g.to_json(), feeds)
            o = self.pool.run(VALIDITY[0], test, [VALIDITY[1]])[VALIDITY[1]]
            self.check_run = o.status == OK and _declared(g, o.outputs or [])

    def verify(self, g: Graph, feeds: dict[str, np.ndarray]) -> None:
        attempts = ORIGINAL_ATTEMPTS if self.f.kind in FLAKY_KINDS else 1
        trial = None
        for k in range(attempts):
            trial = self.check(g, feeds, fresh=k > 0)
            if trial.interesting:
                self.last = trial
                return
        raise ReduceError(f"bug {self.sig} no longer reproduces: {self._why(trial)}")

    def _why(self, trial: _Trial | None) -> str:
        if trial is None:
            return "not run"
        if trial.reason == "static":
            return "the model is no longer valid"
        if trial.reason == "run":
            return "the model no longer runs on ONNX Runtime"
        if trial.reason == "baseline":
            return "no finite baseline outputs"
        if trial.findings:
            f = trial.findings[0]
            what = f"{f.error_type}: {normalize(f.message)}" if f.oracle == ORACLE_CRASH else normalize(f.message)
            return f"{f.backend} {f.variant} now gives another finding ({f.oracle} {f.kind} in {f.phase}: {what})"[:300]
        states = ", ".join(f"{v} {o.status}" for v, o in trial.outcomes.items())
        return f"{self.f.backend} gives no finding ({states})"

    # -- intermediate values -------------------------------------------------------------------------
    def intermediates(self, g: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every node output of ``g`` on ``feeds``, by the baseline (the reference evaluator, else
        ORT without optimizations); for a disruptive graph, of the nodes before the violation."""
        tainted: set[str] = set()
        nodes = []
        for n in g.nodes:
            if (self.protect and n.name == self.protect) or any(x in tainted for x in n.inputs):
                tainted.update(n.outputs)
            else:
                nodes.append(n)
        names = [o for n in nodes for o in n.outputs]
        if not names:
            return {}
        visible = _copy(g)
        visible.nodes = [Node(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.name) for n in nodes]
        for o in tainted:
            visible.values.pop(o, None)
        visible.outputs = names
        try:
            test = Test(to_bytes(visible), visible.to_json(), feeds)
        except (ValueError, KeyError, TypeError):
            return {}
        for backend, variant in baseline_chain(visible):
            o = self.pool.run(backend, test, [variant])[variant]
            if o.status == OK and len(o.outputs or []) == len(names):
                return dict(zip(names, o.outputs, strict=True))
        return {}

    # -- stages ------------------------------------------------------------------------------------
    def ddmin(self, g: Graph, feeds: dict[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
        inter = self.intermediates(g, feeds)

        def removable(h: Graph) -> list[int]:
            return [i for i, n in enumerate(h.nodes) if not (self.protect and n.name == self.protect)]

        idx = removable(g)
        # the operator the finding points at, alone, first: most bugs need one operator, and halving
        # takes about log2(nodes) kept steps and as many refused ones (each a compile) to get there
        suspects = self._suspects(g)
        if suspects and len(suspects) < len(g.nodes) and self.time_left():
            cand = _subgraph(g, suspects, feeds, inter, self.rng)
            if self.accept(cand, "suspect"):
                g, feeds = cand
                idx = removable(g)
        n = 2
        while idx and self.time_left():
            chunk = max(1, math.ceil(len(idx) / n))
            groups = [idx[i:i + chunk] for i in range(0, len(idx), chunk)]
            for grp in reversed(groups):  # consumers first: removing them makes no new inputs
                drop = set(grp)
                keep = [i for i in range(len(g.nodes)) if i not in drop]
                cand = _subgraph(g, keep, feeds, inter, self.rng) if keep else None
                if self.accept(cand, "nodes"):
                    g, feeds = cand
                    idx = removable(g)
                    n = max(n - 1, 2)
                    break
            else:
                if chunk == 1:
                    break
                n = min(n * 2, len(idx))
        return g, feeds

    def _suspects(self, g: Graph) -> list[int]:
        """The indices of the suspects, the nodes the finding points at: the first diverging node the
        campaign located, else the one node a crash message names (by its name, else as ``onnx.OP``), and the node a
        disruptive model breaks a rule at; [] when it points at none."""
        f = self.f
        at = {self.protect} if self.protect else set()
        first = (f.details.get("first_diverging") or {}).get("node") if f.diverges else None
        if first:
            at.add(first)
        elif f.oracle == ORACLE_CRASH:
            named = [n.name for n in named_nodes(g, f.message)]
            if not named:
                named = [n.name for n in g.nodes if f"onnx.{n.op}" in f.message]
            if len(named) == 1:
                at.add(named[0])
        return [i for i, n in enumerate(g.nodes) if n.name in at]

    def outputs(self, g: Graph, feeds: dict[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
        if len(g.outputs) < 2:
            return g, feeds
        pinned = {o for n in g.nodes if self.protect and n.name == self.protect for o in n.outputs}
        last = self.last
        if last is not None and 0 <= last.output < len(g.outputs):
            keep = [o for i, o in enumerate(g.outputs) if i == last.output or o in pinned]
            cand = _without_outputs(g, feeds, keep, self.protect) if len(keep) < len(g.outputs) else None
            if self.accept(cand, "outputs"):
                return cand
        for o in reversed(list(g.outputs)):
            if len(g.outputs) < 2 or not self.time_left():
                break
            if o not in g.outputs or o in pinned:
                continue
            cand = _without_outputs(g, feeds, [x for x in g.outputs if x != o], self.protect)
            if self.accept(cand, "outputs"):
                g, feeds = cand
        return g, feeds

    def _shrinkable(self, g: Graph) -> list[str]:
        """Graph inputs and weights whose shape may change: not read as a constant operand (a
        shape, axes, pads ...) of a spec (which every pinned input is), nor by an operator without a spec."""
        fixed: set[str] = set()
        for n in g.nodes:
            spec = REGISTRY.get(n.op)
            slots = _slots(spec, n) if spec is not None else [None] * len(n.inputs)
            for x, k in zip(n.inputs, slots, strict=True):
                if x and (k is None or not isinstance(spec.inputs[k], In)):
                    fixed.add(x)
        return [name for name, v in g.values.items()
                if v.kind in (INPUT_KIND, CONST_KIND) and name not in fixed and any(d > 1 for d in v.type.shape)]

    def _shape_moves(self, g: Graph) -> Iterator[dict[str, tuple[int, ...]]]:
        names = self._shrinkable(g)
        shapes = {n: g.values[n].type.shape for n in names}
        yield {n: tuple((d + 1) // 2 for d in s) for n, s in shapes.items()}  # everything at once
        lengths = sorted({d for s in shapes.values() for d in s if d > 1}, reverse=True)
        for d in lengths:  # one dimension length everywhere (shared dims of broadcasting operands)
            for new in sorted({1, (d + 1) // 2}):
                if new < d:
                    yield {n: tuple(new if x == d else x for x in s) for n, s in shapes.items() if d in s}
        for n, s in shapes.items():
            for i, d in enumerate(s):
                for new in sorted({1, (d + 1) // 2}):
                    if new < d:
                        yield {n: (*s[:i], new, *s[i + 1:])}

    def _reshaped(self, g: Graph, feeds: dict[str, np.ndarray], move: dict[str, tuple[int, ...]],
                  synthesize_inputs: bool) -> tuple[Graph, dict[str, np.ndarray]] | None:
        h = _copy(g)
        for name, shape in move.items():
            v = h.values[name]
            if shape == v.type.shape:
                continue
            v.type = TensorType(shape, v.type.dtype)
            if v.kind == CONST_KIND:
                v.data = np.ascontiguousarray(v.data[tuple(slice(0, d) for d in shape)])
        h2 = retype(h)
        if h2 is None:
            return None
        new = dict(feeds)
        fresh = synthesize(h2, np.random.default_rng([len(self.history), 7]), 0) if synthesize_inputs else {}
        for name in move:
            if name in new:
                new[name] = fresh[name] if synthesize_inputs else np.ascontiguousarray(
                    np.asarray(feeds[name])[tuple(slice(0, d) for d in move[name])])
        return h2, new

    def shapes(self, g: Graph, feeds: dict[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
        failed: set[tuple] = set()  # single-dimension moves that failed once are not tried again
        progress = True
        while progress and self.time_left():
            progress = False
            for move in self._shape_moves(g):
                if not move or not self.time_left():
                    continue
                key = _move_key(g, move)
                if key in failed:
                    continue
                cand = self._reshaped(g, feeds, move, False)
                if cand is not None and self.accept(cand, "shapes"):
                    g, feeds = cand
                    progress = True
                    break
                value_bound = cand is not None and self.check(*cand).reason in ("run", "baseline")
                if value_bound and any(k in feeds for k in move):
                    cand = self._reshaped(g, feeds, move, True)  # the sliced values do not fit: fresh ones
                    if self.accept(cand, "shapes"):
                        g, feeds = cand
                        progress = True
                        break
                if key is not None:
                    failed.add(key)
        return g, feeds

    def _attr_candidates(self, g: Graph, node: Node, name: str) -> list[Any]:
        cur = node.attrs[name]
        cands: list[Any] = [_OMIT]
        if isinstance(cur, bool):
            pass
        elif isinstance(cur, int):
            cands += [v for v in (0, 1) if v != cur and abs(v) <= abs(cur)]
        elif isinstance(cur, float):
            cands += [v for v in (0.0, 1.0) if v != cur and abs(v) <= abs(cur) + 1]
        dom = None
        spec = REGISTRY.get(node.op)
        if spec is not None and name in spec.attrs:
            try:
                ins = [g.values[x].type if x else None for x in node.inputs]
                c = _ctx(spec, node, ins, g.opset)
                d = spec.attrs[name]
                dom = d(c) if callable(d) else d
            except Exception:  # the domain needs a solver variable: the validity check decides
                dom = None
            inner = getattr(dom, "dom", dom)  # Maybe(Choice(...))
            if isinstance(cur, str) and isinstance(getattr(inner, "values", None), tuple) and inner.values:
                first = inner.values[0]
                if first != cur and first is not None:
                    cands.append(first)
        if dom is None:  # no spec, or a domain that needs a solver variable: the validity check decides
            return cands
        out = []
        for v in cands:
            try:
                ok = (None in dom) if v is _OMIT else (v in dom)
            except Exception:
                ok = False
            if ok:
                out.append(v)
        return out

    def attributes(self, g: Graph, feeds: dict[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
        i = 0
        while i < len(g.nodes) and self.time_left():
            node = g.nodes[i]
            if self.protect and node.name == self.protect:
                i += 1
                continue
            for name in sorted(node.attrs):
                for v in self._attr_candidates(g, node, name):
                    h = _copy(g)
                    if v is _OMIT:
                        del h.nodes[i].attrs[name]
                    else:
                        h.nodes[i].attrs[name] = v
                    h2 = retype(h)
                    if h2 is not None and self.accept((h2, feeds), "attributes"):
                        g = h2
                        node = g.nodes[i]
                        break
                if not self.time_left():
                    break
            i += 1
        return g, feeds

    def dtypes(self, g: Graph, feeds: dict[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
        for src in SIMPLER_FLOATS:
            if not self.time_left():
                break
            if not any(v.type.dtype == src for v in g.values.values()):
                continue
            h = _copy(g)
            to = np_dtype(FLOAT_TARGET)
            for v in h.values.values():
                if v.type.dtype == src:
                    v.type = TensorType(v.type.shape, FLOAT_TARGET)
                    if v.data is not None:
                        v.data = v.data.astype(to)
            for n in h.nodes:
                for k, a in list(n.attrs.items()):
                    if k in ("to", "dtype") and a == ONNX_CODE.get(src):
                        n.attrs[k] = ONNX_CODE[FLOAT_TARGET]
                    elif isinstance(a, np.ndarray) and a.dtype.name == src:
                        n.attrs[k] = a.astype(to)
            h2 = retype(h)
            if h2 is None:
                continue
            new = {k: (np.asarray(a).astype(to) if np.asarray(a).dtype.name == src else a) for k, a in feeds.items()}
            if self.accept((h2, new), "dtypes"):
                g, feeds = h2, new
        return g, feeds

    # -- first diverging operator ------------------------------------------------------------------
    def first_diverging(self, g: Graph, feeds: dict[str, np.ndarray]) -> dict[str, str] | None:
        """The first node in topological order whose outputs differ between the backend's variant
        and its baseline (the reference for differential findings, the other variant otherwise),
        with every intermediate value exposed as a graph output."""
        f = self.f
        if f.oracle not in (DIFFERENTIAL, METAMORPHIC) and f.kind != INCONSISTENT:
            return None
        every = exposed(g)
        try:
            test = Test(to_bytes(every), every.to_json(), feeds)
        except (ValueError, KeyError, TypeError):
            return None
        got = self.pool.run(f.backend, test, self.variants)
        actual = got.get(f.variant)
        if actual is None or actual.status != OK:
            return None
        if f.oracle == DIFFERENTIAL:
            expected = self._baseline(every, test, None)[0]
        else:
            other = got.get(f.other)
            expected = other.outputs if other is not None and other.status == OK else None
        if expected is None:
            return None
        tol = self.criteria.pair_tolerances({(f.backend, f.variant), (f.backend, f.other)})
        return first_divergence(every, expected, actual.outputs or [], tol, feeds, self.pool)

    def _signed(self, g: Graph) -> tuple[Finding, int] | None:
        """The last accepted trial's finding with the signature, and the index of the node of ``g`` it is at."""
        f = next((f for f in self.last.findings if graph_signature(f, g) == self.sig), None) if self.last else None
        if f is None:
            return None
        node = (f.details.get("first_diverging") or {}).get("node")
        out = g.outputs[f.output] if 0 <= f.output < len(g.outputs) else None
        at = next((i for i, n in enumerate(g.nodes) if (n.name == node if node else out in n.outputs)), None)
        return (f, at) if at is not None else None

    def isolate(self, g: Graph, feeds: dict[str, np.ndarray]
                ) -> tuple[Graph, dict[str, np.ndarray], Finding | None]:
        """A divergence can show at an operator that is not its cause: OpenVINO returns every output
        of a dynamic model empty when one node fails, so a Neg beside a failing LRN "diverges" first.
        When the reduced graph has parts that share no value and the signed operator's part alone
        diverges nowhere, the divergence is another part's:

        - the part that diverges alone (same oracle and variant) becomes the case, signed by its own
          first diverging operator;
        - where none does alone, the divergence needs the parts together: it is signed by the other
          parts' operators (``details["beside"]``), whichever operator it shows at."""
        f0 = self.f
        if not f0.diverges or self.violation is not None:
            return g, feeds, None
        parts, signed = g.parts(), self._signed(g)
        if len(parts) < 2 or signed is None:
            return g, feeds, None
        mine = next(p for p in parts if signed[1] in p)
        others = [p for p in parts if p is not mine]
        alone = _subgraph(g, mine, feeds, {}, self.rng)
        if alone is None or not self.time_left() or any(f.diverges for f in self.check(*alone).findings):
            return g, feeds, None
        for part in others:
            cand = _subgraph(g, part, feeds, {}, self.rng)
            if cand is None or not self.time_left():
                continue
            trial = self.check(*cand)
            same = [f for f in trial.findings if f.diverges
                    and (f.oracle, f.backend, f.variant) == (f0.oracle, f0.backend, f0.variant)]
            if same:
                self.sig, self.f, self.last = graph_signature(same[0], cand[0]), same[0], trial
                self.history.append(cand)
                self.progress(f"parts: the divergence is {'+'.join(n.op for n in cand[0].nodes)}'s")
                return cand[0], cand[1], same[0]
        self.beside = "+".join(sorted({g.nodes[i].op for p in others for i in p}))
        moved = dataclasses.replace(signed[0], details={**signed[0].details, "beside": self.beside})
        self.sig, self.f = graph_signature(moved, g), moved
        self.progress(f"parts: the divergence needs {self.beside} beside it")
        return g, feeds, moved

    def downstream(self, g: Graph, feeds: dict[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
        """Drops everything downstream of the first diverging operator the campaign located, which
        becomes the one output, and keeps that operator through the later stages."""
        first = (self.f.details.get("first_diverging") or {}) if self.f.diverges else {}
        name = first.get("output")
        if not name or name not in g.values or g.outputs == [name]:
            return g, feeds
        if self.accept(_without_outputs(g, feeds, [name], first.get("node", "")), "downstream"):
            self.protect = first.get("node", "")
            return self.history[-1]
        return g, feeds

    # -- the whole reduction ------------------------------------------------------------------------
    def run(self, verify: bool) -> ReductionResult:
        g0 = _copy(self.case.graph)
        if not _in_order(g0):
            g0.nodes = g0.toposort()
        # a pinned input's value is part of the model: it is fed that, whatever the case's inputs say
        feeds0 = {v.name: np.asarray(v.data if v.pinned else self.case.inputs[v.name])
                  for v in g0.inputs if v.pinned or v.name in self.case.inputs}
        missing = [v.name for v in g0.inputs if v.name not in feeds0]
        if missing:
            raise ReduceError(f"bug {self.sig}: no values for the inputs {', '.join(missing)}")
        self.calibrate(g0, feeds0)
        if verify:
            self.verify(g0, feeds0)
        self.history.append((g0, feeds0))
        g, feeds = self.downstream(g0, feeds0)
        for _ in range(4):
            before = sum(self.stages.values())
            g, feeds = self.ddmin(g, feeds)
            g, feeds = self.outputs(g, feeds)
            if self.violation is None:
                g, feeds = self.shapes(g, feeds)
                g, feeds = self.attributes(g, feeds)
                g, feeds = self.dtypes(g, feeds)
            if sum(self.stages.values()) == before or not self.time_left():
                break
        g, feeds, moved = self.isolate(g, feeds)
        # the reduced case must reproduce on its own, in a fresh worker
        self.progress(f"confirming the reduced case ({len(g.nodes)} nodes) in a fresh worker")
        final = self.check(g, feeds, fresh=True)
        reproduced = final.interesting
        if not reproduced:  # flaky: the smallest candidate that reproduces again (twice in all)
            for h, hf in [c for c in reversed(self.history) if c[0] is not g][:FALLBACK_TRIES]:
                t = self.check(h, hf, fresh=True)
                if t.interesting:
                    g, feeds, final, reproduced = h, hf, t, True
                    break
        self.progress(f"reduced to {len(g.nodes)} nodes; locating the first diverging operator")
        diverging = self.first_diverging(g, feeds) if reproduced else None
        if moved is not None:  # where it was signed
            diverging = moved.details.get("first_diverging") or diverging
        elif diverging is None and reproduced and self.f.oracle in (DIFFERENTIAL, METAMORPHIC):
            diverging = self.first_diverging(g0, feeds0)
        outcome = final.outcomes.get(self.f.variant)
        return ReductionResult(
            signature=self.sig, graph=g, inputs=feeds,
            expected=final.expected if self.f.oracle == DIFFERENTIAL else None,
            ops_before=len(g0.nodes), ops_after=len(g.nodes),
            nodes_before=[n.op for n in g0.nodes], nodes_after=[n.op for n in g.nodes],
            inputs_before=len(g0.inputs), inputs_after=len(g.inputs),
            elements_before=sum(v.type.numel for v in g0.inputs), elements_after=sum(v.type.numel for v in g.inputs),
            seconds=time.monotonic() - self.start, compiler_seconds=self.compiler_seconds,
            candidates_tried=self.tried, first_diverging=diverging,
            reproduced=reproduced, stages=dict(self.stages), budget_exhausted=self.exhausted,
            validity="checker+ort" if self.check_run else "checker" if self.check_static else "none",
            artifacts=dict(outcome.artifacts) if outcome is not None else {},
            signed_as=self.sig if moved else "", finding=moved,
            title=title(moved, producer(g, moved.output)[0]) if moved else "")


_OMIT = object()  # an attribute candidate: omit it (the operator's default)


def _move_key(g: Graph, move: dict[str, tuple[int, ...]]) -> tuple | None:
    """(tensor, dim, from, to) of a move that changes one dimension of one tensor (else None)."""
    if len(move) != 1:
        return None
    (name, shape), = move.items()
    old = g.values[name].type.shape
    diff = [i for i, (a, b) in enumerate(zip(old, shape, strict=True)) if a != b]
    return (name, diff[0], old[diff[0]], shape[diff[0]]) if len(diff) == 1 else None


def _declared(g: Graph, outs: list[np.ndarray]) -> bool:
    """Whether ORT's outputs have the types the graph declares."""
    if len(outs) != len(g.outputs):
        return False
    for name, o in zip(g.outputs, outs, strict=True):
        t = g.values[name].type
        if tuple(np.shape(o)) != t.shape or np.asarray(o).dtype.name != t.dtype:
            return False
    return True
