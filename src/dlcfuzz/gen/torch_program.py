"""torch-native programs: Isra's generator over the torch operator specs (``spec.torch``), plus what
a program does beyond its graph.

The graph is built exactly as an ONNX graph is (``solve.Instantiator``: indegree, first input,
attributes, other inputs, outputs; tensors reused at the picking rate, value intervals keeping outputs
finite), with torch's element types (bfloat16 included) and operator names.  Then the program chooses:

- each runtime input's *layout* (``meta["layouts"]``): contiguous, channels_last (rank 4/5), transposed
  (a permuted storage), step-sliced (every other element of a larger storage), offset (a slice that
  starts inside its storage), or expanded (stride 0 in its size-1 broadcast dims, never for an input the
  program writes to);
- which inputs the program writes in place (``meta["mutated"]``, through views or not): they are compared
  after the run, and take no gradient;
- the outputs never compared (``meta["ties"]``: indices chosen among ties);
- whether backward runs (``meta["backward"]``: a cotangent per float output, gradients of the float
  inputs and parameters), and the dims marked dynamic (``meta["dynamic"]``).

Beyond the solver's calls: an operator that takes empty tensors (``TorchOpSpec.empty``) sometimes gets
a first input with a dim of length 0 (``ProgramOptions.empty_rate``: a new runtime input, or an empty
tensor an earlier call made); the data a data-dependent operator draws (nonzero's, unique's) are a
runtime input pinned to them half the time; and ``torch.cond``'s two branches are built here
(``_branches``): chains of calls solved on a sub-graph from the branch operand to a result of its type.

A call the program cannot make is not committed (a counted retry): a write into a parameter, into a
broadcast (stride-0) view, or a call whose float output interval is not finite.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from dlcfuzz.gen.feedback import STRATEGY as FEEDBACK
from dlcfuzz.gen.feedback import Rewards
from dlcfuzz.gen.guided import Coverage
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, Graph, Node, TensorType, Value
from dlcfuzz.ir.graph import TORCH_LANGUAGE, is_torch_program
from dlcfuzz.solve import GenOptions, Instantiator, Proposal, Stats
from dlcfuzz.solve.intervals import finite
from dlcfuzz.spec.dsl import EmptyDomain, In
from dlcfuzz.spec.torch import TORCH_DTYPES, TORCH_REGISTRY, TorchOpSpec, mutated_slots
from dlcfuzz.spec.torch.base import is_float

MAX_TRIES = 20
COND = "torch.cond"
# what a branch of torch.cond calls where the generator's own operators offer nothing a branch may call
BRANCH_DEFAULT = ("torch.sin", "torch.tanh", "torch.relu", "torch.neg", "torch.abs", "torch.sigmoid", "torch.gelu",
                  "torch.add", "torch.sub", "torch.mul", "torch.clamp", "torch.softmax", "torch.cumsum", "torch.flip",
                  "torch.roll", "torch.layer_norm", "torch.clone")
# calls that may return their input itself (torch.cond refuses a branch output that aliases an operand)
_MAY_ALIAS = frozenset({"torch.contiguous", "torch.channels_last", "torch.type_as", "torch.to", "torch.dropout_eval"})
IDIOM = "idiom"  # the spec family of idioms (spec/torch/idiom.py)
PIN_DRAWN = 0.5  # share of drawn data (nonzero's, unique's input) taken at run time, pinned
LANGUAGE = TORCH_LANGUAGE  # graph.meta["language"] of a torch-native program

# torch programs: small tensors (Inductor compiles are the cost, not the data), fewer fresh inputs
TORCH_LIMITS = GenOptions(max_rank=5, max_dim=5, max_numel=1024, picking_rate=0.9, init_rate=0.3,
                          runtime_consts=0.3, constant_nodes=0.0, opset=17, dtypes=TORCH_DTYPES, target="onnx",
                          empty_outputs=True)

# a branch of torch.cond: no empty tensors, its constants (index tensors) always constants
BRANCH_LIMITS = replace(TORCH_LIMITS, empty_outputs=False, runtime_consts=0.0)

LAYOUTS = ("contiguous", "channels_last", "transposed", "sliced", "offset", "expanded")
# views through which a write reaches several elements of one memory location (eager refuses)
BROADCAST_VIEWS = frozenset({"torch.expand", "torch.broadcast_like", "torch.as_strided"})


@dataclass
class ProgramOptions:
    """What programs do beyond their graphs, as shares of programs (or of inputs, for layouts)."""

    layout_rate: float = 0.6  # share of runtime inputs in a layout other than contiguous
    backward_rate: float = 0.7  # the backward compile found the most roots per compiler-second (run/torch_campaign.py)
    dynamic_rate: float = 1.0  # share of programs whose dims may be marked dynamic
    # share of calls of an operator that takes empty tensors (``TorchOpSpec.empty``) given one as first
    # input: a runtime input with a dim of length 0, or an empty tensor an earlier call made
    empty_rate: float = 0.04
    # share of such calls that read an earlier empty tensor, where the program has one of the right type
    empty_reuse: float = 0.6
    # share of calls that are idioms (``spec/torch/idiom.py``: snippets Inductor's passes rewrite), where the
    # generator has both idioms and single operators: 1-3 of a program's 10 calls, ~90% of programs with one
    idiom_rate: float = 0.2


def is_program(graph: Graph) -> bool:
    return is_torch_program(graph)


def spec_of(node: Node) -> TorchOpSpec:
    return TORCH_REGISTRY[node.op]


def spelled_plainly(graph: Graph, node: Node) -> bool:
    """Whether the program spells the call without its mechanism (``meta["plain"]``: the first outputs of
    such calls; ``TorchOpSpec.plain``): an in-place write out of place writes nothing and aliases nothing."""
    return bool(node.outputs) and node.outputs[0] in graph.meta.get("plain", ())


def roots(graph: Graph, name: str) -> list[str]:
    """The chain of values a view-produced value aliases, itself first, its base last."""
    producer = {o: n for n in graph.nodes for o in n.outputs}
    chain = [name]
    while chain[-1] in producer:
        n = producer[chain[-1]]
        spec = TORCH_REGISTRY.get(n.op)
        if (spec is None or not (spec.view or spec.mutates is not None) or not n.inputs or not n.inputs[0]
                or spelled_plainly(graph, n)):
            break
        chain.append(n.inputs[0])
    return chain


def mutated_inputs(graph: Graph) -> list[str]:
    """The program's runtime inputs that some call writes in place (directly or through views)."""
    out: list[str] = []
    for n in graph.nodes:
        spec = TORCH_REGISTRY.get(n.op)
        if spec is None or spelled_plainly(graph, n):
            continue
        for k in mutated_slots(spec, n.attrs):
            if k < len(n.inputs) and n.inputs[k]:
                base = roots(graph, n.inputs[k])[-1]
                v = graph.values[base]
                if v.kind == INPUT_KIND and base not in out:
                    out.append(base)
    return out


class TorchProgramGenerator:
    """Isra's loop over torch operator specs; ``generate(seed)`` gives a program (a Graph whose
    ``meta["language"]`` is "torch")."""

    def __init__(self, specs: Sequence[TorchOpSpec] | None = None, op_range: tuple[int, int] = (1, 10),
                 limits: GenOptions = TORCH_LIMITS, options: ProgramOptions | None = None,
                 guided: bool = False, coverage: Coverage | None = None) -> None:
        self.specs = list(specs) if specs else list(TORCH_REGISTRY.values())
        self.op_range = op_range
        self.limits = limits
        self.options = options or ProgramOptions()
        self.stats = Stats()
        self._idioms = [s for s in self.specs if s.family == IDIOM]
        self._singles = [s for s in self.specs if s.family != IDIOM]
        # compiler-feedback guidance (``gen/feedback.py``): operators drawn by the Inductor optimizations their
        # programs recently fired for the first time; None: uniform draws (Isra's)
        self.rewards = Rewards([s.op for s in self.specs], coverage) if guided else None

    def feedback(self, graph: Graph, keys: list[str]) -> list[tuple[str, str]]:
        """Credits ``graph``'s operators with the compiler keys its test fired (guided generators only)."""
        return self.rewards.credit(graph, keys) if self.rewards is not None else []

    def generate(self, seed: int) -> Graph:
        rng = random.Random(seed)
        strategy = "isra" if self.rewards is None else FEEDBACK
        g = Graph(opset=self.limits.opset, meta={"seed": seed, "strategy": strategy, "language": LANGUAGE})
        inst = Instantiator(g, self.limits, rng, np.random.default_rng(seed))
        ties: list[str] = []
        self._empties: list[Value] = []
        for _ in range(rng.randint(*self.op_range)):
            self._insert(inst, rng, ties)
        g.set_leaf_outputs()
        if not g.outputs and g.nodes:
            g.outputs = list(g.nodes[-1].outputs)
        mutated = mutated_inputs(g)
        g.meta["ties"] = ties
        g.meta["mutated"] = mutated
        g.meta["layouts"] = self._layouts(g, rng, set(mutated))
        g.meta["backward"] = rng.random() < self.options.backward_rate
        g.meta["dynamic"] = rng.random() < self.options.dynamic_rate
        return g

    def _insert(self, inst: Instantiator, rng: random.Random, ties: list[str]) -> None:
        stats = self.stats
        for attempt in range(MAX_TRIES):
            spec = self._draw(rng)
            fresh = None
            try:
                first = None
                if spec.empty and rng.random() < self.options.empty_rate:
                    first, fresh = self._empty_first(inst, spec, rng)
                p = inst.propose(spec, first)
                if fresh is not None:  # the new empty input: added to the graph with the call, not reusable
                    p.staged.insert(0, (fresh, False))
                if spec.op == COND:
                    self._branches(inst, p, rng)
                self._check(inst, p)
            except EmptyDomain:
                stats.refused(spec.op, attempt)
                continue
            self._pin_drawn(p, rng)
            node = inst.commit(p)
            for k, name in enumerate(node.outputs):  # empty tensors are out of the solver's pool: kept here
                v = inst.g.values[name]
                if 0 in v.type.shape and k not in spec.ties:
                    self._empties.append(v)
            for k in spec.ties:  # indices among ties: never read by a later call
                name = node.outputs[k]
                ties.append(name)
                _forget(inst, name)
            break
        stats.insertions += 1

    def _draw(self, rng: random.Random) -> TorchOpSpec:
        """The next call's operator: an idiom at ``idiom_rate`` where the generator has idioms and single
        operators (one random draw more only then: a generator of either kind alone draws as before)."""
        group = self.specs
        if self._idioms and self._singles:
            group = self._idioms if rng.random() < self.options.idiom_rate else self._singles
        if self.rewards is not None:
            return rng.choices(group, weights=[self.rewards.weight(s.op) for s in group])[0]
        return group[rng.randrange(len(group))]

    def _branch_specs(self) -> list[TorchOpSpec]:
        """The operators a branch of torch.cond may call: the generator's own where they may (no view,
        no in-place write, no data-dependent size, none that may return its input), else a default set."""
        own = [s for s in self.specs if _in_branch(s)]
        return own or [TORCH_REGISTRY[o] for o in BRANCH_DEFAULT]

    def _branches(self, inst: Instantiator, p: Proposal, rng: random.Random) -> None:
        """Builds torch.cond's two branches: each a chain of 1..3 calls (a sub-graph solved by the same
        instantiation) from the branch operand to a result of its type; the tensors the calls create
        (new inputs, parameters, index constants) become further operands of the call."""
        specs = self._branch_specs()
        x = p.node.inputs[1]
        staged = {v.name: v for v, _ in p.staged}
        xv = staged.get(x) or inst.g.values[x]
        target = xv.type
        branches: list[list[dict]] = []
        results: list[str] = []
        ivs: list = []
        lifted: list[Value] = []
        counter = inst._counter
        for _ in range(2):
            sub = Graph(opset=inst.g.opset, meta={"language": LANGUAGE})
            sub_inst = Instantiator(sub, BRANCH_LIMITS, rng, inst.np)
            sub_inst._counter = counter
            operand = sub.add_value(Value(x, target, INPUT_KIND))
            sub_inst.iv[x] = inst.iv[x]
            sub_inst.pool.add(operand)
            last = operand
            for _ in range(rng.randint(1, 3)):
                for _try in range(MAX_TRIES):
                    spec = specs[rng.randrange(len(specs))]
                    try:
                        q = sub_inst.propose(spec, last)
                        if q.outputs[0].type != target:
                            raise EmptyDomain(f"{spec.op}: a branch call must keep the operand's type")
                        self._check(sub_inst, q)
                    except EmptyDomain:
                        continue
                    node = sub_inst.commit(q)
                    last = sub.values[node.outputs[0]]
                    break
                else:
                    raise EmptyDomain("torch.cond: no branch call keeps the operand's type")
            if last is operand:
                raise EmptyDomain("torch.cond: an empty branch")
            counter = sub_inst._counter
            branches.append([{"op": n.op, "inputs": list(n.inputs), "outputs": list(n.outputs),
                              "attrs": dict(n.attrs)} for n in sub.nodes])
            results.append(last.name)
            ivs.append(sub_inst.iv[last.name])
            for v in sub.values.values():
                if v.kind in (INPUT_KIND, CONST_KIND) and v.name != x:
                    lifted.append(v)
                    if v.name in sub_inst.iv:
                        inst.iv[v.name] = sub_inst.iv[v.name]
        inst._counter = counter
        for v in lifted:
            p.staged.append((v, False))
            p.node.inputs.append(v.name)
            p.ctx.ins.append(v.type)
        lo = min(iv[0] for iv in ivs)
        hi = max(iv[1] for iv in ivs)
        p.node.attrs.update({"fn": p.outputs[0].name, "branches": branches, "results": results, "bound": [lo, hi]})
        p.out_ivs = [(lo, hi)]

    def _empty_first(self, inst: Instantiator, spec: TorchOpSpec, rng: random.Random
                     ) -> tuple[Value, Value | None]:
        """A first input with a dim of length 0 for ``spec``: an empty tensor an earlier call made (at
        ``empty_reuse``), else a new runtime input (returned second: added to the graph if the call is)."""
        first = spec.inputs[0]
        if not isinstance(first, In) or callable(first.rank) or first.value is not None or first.variadic:
            raise EmptyDomain(f"{spec.op}: no empty first input")
        rlo, rhi = max(1, first.rank[0]), min(first.rank[1], self.limits.max_rank)
        dtypes = spec.types.get(first.T or "", ())
        fits = [v for v in self._empties if rlo <= v.type.rank <= rhi and v.type.dtype in dtypes]
        if fits and rng.random() < self.options.empty_reuse:
            return rng.choice(fits), None
        if rlo > rhi or not dtypes:
            raise EmptyDomain(f"{spec.op}: no empty first input")
        shape = [rng.randint(1, self.limits.max_dim) for _ in range(rng.randint(rlo, rhi))]
        shape[rng.randrange(len(shape))] = 0
        t = TensorType(tuple(shape), rng.choice(dtypes))
        v = Value(inst._name(), t, INPUT_KIND)
        # no element: every value domain holds it; (1, 1) lies in all of them (positive, away from 0, small)
        inst.iv[v.name] = (1.0, 1.0)
        return v, v

    def _pin_drawn(self, p, rng: random.Random) -> None:
        """The data a data-dependent operator drew for its first input (nonzero's, unique's) are a constant
        (a parameter or buffer) half the time, else a runtime input pinned to them: Dynamo meets the
        data-dependent size on a graph input either way."""
        first = p.spec.inputs[0]
        if getattr(first, "value", None) is None or not p.staged or rng.random() >= PIN_DRAWN:
            return
        v = p.staged[0][0]
        if v.kind == CONST_KIND and v.data is not None and v.name == p.node.inputs[0]:
            v.kind = INPUT_KIND

    def _check(self, inst: Instantiator, p) -> None:
        """Refuses a proposal the program cannot make (see the module doc)."""
        for t, v in zip(p.outputs, p.out_ivs, strict=True):
            if is_float(t.type.dtype) and not finite(v):
                raise EmptyDomain(f"{p.spec.op}: a float output may not be finite")
        slots = mutated_slots(p.spec, p.node.attrs)
        if not slots:
            return
        g = inst.g
        staged = {v.name: v for v, _ in p.staged}
        for k in slots:
            name = p.node.inputs[k]
            if name in staged:
                continue  # a new runtime input: written in place is fine
            chain = roots(g, name)
            base = g.values[chain[-1]]
            if base.kind == CONST_KIND:
                raise EmptyDomain(f"{p.spec.op}: would write into a parameter or constant")
            producer = {o: n for n in g.nodes for o in n.outputs}
            if any(c in producer and producer[c].op in BROADCAST_VIEWS for c in chain):
                raise EmptyDomain(f"{p.spec.op}: would write through a broadcast view")
            # an operand that shares the written tensor's memory (x.add_(x.t())): eager refuses partial overlap
            for j, other in enumerate(p.node.inputs):
                if j != k and other and other not in staged and roots(g, other)[-1] == chain[-1]:
                    raise EmptyDomain(f"{p.spec.op}: an operand overlaps the tensor it writes")

    def _layouts(self, g: Graph, rng: random.Random, mutated: set[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for v in g.inputs:
            if v.pinned:
                continue
            r = v.type.rank
            kinds = ["contiguous"]
            if rng.random() < self.options.layout_rate and r >= 1:
                kinds = ["sliced", "offset"]
                if r in (4, 5):
                    kinds += ["channels_last"] * 2
                if r >= 2:
                    kinds += ["transposed"] * 2
                if v.name not in mutated and any(d > 1 for d in v.type.shape):
                    kinds.append("expanded")
            kind = rng.choice(kinds)
            spec: dict = {"kind": kind}
            if kind == "transposed":
                perm = list(range(r))
                while perm == list(range(r)):
                    rng.shuffle(perm)
                spec["perm"] = perm
            elif kind == "sliced":
                spec["dim"] = rng.randrange(r)
                spec["step"] = rng.choice((2, 3))
            elif kind == "expanded":  # stride 0 in some dims longer than 1: their elements repeat
                wide = [i for i, d in enumerate(v.type.shape) if d > 1]
                spec["dims"] = sorted(rng.sample(wide, rng.randint(1, len(wide))))
            out[v.name] = spec
        return out


def _in_branch(spec: TorchOpSpec) -> bool:
    first = spec.inputs[0]
    return not (spec.view or spec.mutates is not None or spec.ties or spec.dynamic_output or spec.op == COND
                or spec.op in _MAY_ALIAS or spec.op == "torch.item" or not isinstance(first, In)
                or first.value is not None or first.variadic)


def _forget(inst: Instantiator, name: str) -> None:
    """Takes a value out of the solver's pool of reusable tensors."""
    pool = inst.pool
    v = inst.g.values[name]
    for bucket in (pool.by_rank.get((v.type.dtype, v.type.rank)), pool.by_type.get(v.type), pool.values):
        if bucket is not None and v in bucket:
            bucket.remove(v)
