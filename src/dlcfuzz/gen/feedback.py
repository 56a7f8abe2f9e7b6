"""Compiler-feedback guidance: operators (and operator pairs) that recently made the compiler do
something new are drawn more often.

After each test the campaign hands the generator the compiler-side keys the backends reported
(``Outcome.fired``: Inductor counters and pattern rewrites, TVM passes that changed the module) with
``feedback(graph, keys)``.  A key no earlier test fired is new.  The test's reward is
``1 - 0.5 ** new`` (0 when it fired nothing new, e.g. a model the compiler declined), and every
operator of the graph, and every operator pair along one of its edges, moves its value toward that
reward (an exponential moving average).  Values start at ``prior`` (optimistic: an operator never
tried is worth trying), so early on the choice spreads over untried operators and later
concentrates on the ones that keep paying.

Operators are drawn by a softmax of their values over ``temperature``; the first input of a call is,
half of the time, an existing tensor drawn by the softmax of its producer pair's value (else the
instantiator picks inputs as Isra does).  Everything else is Isra's generation.

The fired keys live in the campaign's ``Coverage`` under the criterion ``compiler``, so the store
keeps them and a resumed campaign does not count them as new again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence

import numpy as np

from dlcfuzz.gen.guided import Coverage
from dlcfuzz.gen.isra import MAX_TRIES, split_available
from dlcfuzz.ir import Graph, Value
from dlcfuzz.solve import Admission, GenOptions, Instantiator, Stats, TypeProfile
from dlcfuzz.spec.dsl import EmptyDomain, OpSpec

STRATEGY = "feedback"
CRITERION = "compiler"  # the Coverage criterion of compiler-side keys
GRAPH_INPUT = "-"  # the producer of a graph input, in operator pairs


def reward(new_keys: int) -> float:
    """A test's reward in [0, 1): 0 for nothing new, 1/2 for one new key, 3/4 for two..."""
    return 1.0 - 0.5 ** new_keys


class Rewards:
    """The bandit behind compiler-feedback guidance: each operator's (and operator pair's) recent reward,
    from the compiler keys its tests fired that no earlier test had.  Shared by the ONNX generator
    (``FeedbackGenerator``) and the torch-program generator (``gen/torch_program.py``)."""

    def __init__(self, ops: Iterable[str], coverage: Coverage | None = None, temperature: float = 0.25,
                 decay: float = 0.3, prior: float = 1.0) -> None:
        self.coverage = coverage if coverage is not None else Coverage()
        self.temperature, self.decay, self.prior = temperature, decay, prior
        self.value = {op: prior for op in ops}  # operator -> recent reward of tests holding it
        self.pair_value: dict[tuple[str, str], float] = {}  # (producer, consumer) -> the same, per edge
        self.rewarded = 0  # tests that fired something new

    def credit(self, graph: Graph, keys: Iterable[str]) -> list[tuple[str, str]]:
        """Credits ``graph``'s operators and operator pairs with the compiler keys its test fired that
        no earlier test had; returns those new keys as (criterion, key), now in the coverage."""
        new = [(CRITERION, k) for k in sorted(set(keys)) if not self.coverage.has(CRITERION, k)]
        self.coverage.load(new)  # load, not add: the caller stores them with this test
        r = reward(len(new))
        self.rewarded += r > 0
        d = self.decay
        for op in {n.op for n in graph.nodes}:
            if op in self.value:
                self.value[op] += d * (r - self.value[op])
        for pair in edges(graph):
            v = self.pair_value.get(pair, self.prior)
            self.pair_value[pair] = v + d * (r - v)
        return new

    def weight(self, op: str) -> float:
        """An operator's weight in the draw: the softmax numerator of its value."""
        return math.exp(self.value[op] / self.temperature)

    def pair_weight(self, pair: tuple[str, str]) -> float:
        return math.exp(self.pair_value.get(pair, self.prior) / self.temperature)


class FeedbackGenerator:
    def __init__(self, specs: Sequence[OpSpec], limits: GenOptions, op_range: tuple[int, int],
                 profile: TypeProfile | None = None, coverage: Coverage | None = None,
                 temperature: float = 0.25, decay: float = 0.3, prior: float = 1.0, pairs: bool = True,
                 admit: Admission | None = None) -> None:
        self.admit = admit  # the target compiler's support profile: only calls it takes
        self.limits, self.op_range, self.profile = limits, op_range, profile
        self.pairs = pairs
        self.specs, self.unavailable = split_available(specs, limits, profile, admit)
        self.rewards = Rewards([s.op for s in self.specs], coverage, temperature, decay, prior)
        self.coverage = self.rewards.coverage
        self.value, self.pair_value = self.rewards.value, self.rewards.pair_value
        self.stats = Stats()

    @property
    def rewarded(self) -> int:
        return self.rewards.rewarded

    # -- the campaign's side -------------------------------------------------------------------------
    def feedback(self, graph: Graph, keys: Iterable[str]) -> list[tuple[str, str]]:
        return self.rewards.credit(graph, keys)

    # -- one graph -------------------------------------------------------------------------------------
    def generate(self, seed: int) -> Graph:
        rng = random.Random(seed)
        g = Graph(opset=self.limits.opset, meta={"seed": seed, "strategy": STRATEGY})
        inst = Instantiator(g, self.limits, rng, np.random.default_rng(seed), self.profile, admit=self.admit)
        for _ in range(rng.randint(*self.op_range)):
            self._insert(inst, rng)
            self.last_ctx = inst.last_ctx
        g.set_leaf_outputs()
        return g

    def _insert(self, inst: Instantiator, rng: random.Random) -> None:
        """As Isra's insert_uniform, with the operator and first input drawn by their values."""
        stats = self.stats
        for attempt in range(MAX_TRIES):
            spec = self.choose_op(self.specs, rng)
            first = self._first(inst, spec, rng) if self.pairs and rng.random() < 0.5 else None
            try:
                inst.instantiate(spec, first)
                break
            except EmptyDomain:
                stats.refused(spec.op, attempt)
        stats.insertions += 1

    def weights(self, specs: Sequence[OpSpec]) -> list[float]:
        return [self.rewards.weight(s.op) for s in specs]

    def choose_op(self, specs: Sequence[OpSpec], rng: random.Random) -> OpSpec:
        return rng.choices(specs, weights=self.weights(specs))[0]

    def _first(self, inst: Instantiator, spec: OpSpec, rng: random.Random) -> Value | None:
        fits = [x for x in inst.pool.values if inst.first_fits(spec, x)]
        if not fits:
            return None
        weights = [self.rewards.pair_weight((_producer(inst, x), spec.op)) for x in fits]
        return rng.choices(fits, weights=weights)[0]


def _producer(inst: Instantiator, x: Value) -> str:
    p = inst.producer.get(x.name)
    return p.op if p is not None else GRAPH_INPUT


def edges(graph: Graph) -> set[tuple[str, str]]:
    """(producer operator, consumer operator) of every edge; a graph input's producer is "-"."""
    made = {o: n.op for n in graph.nodes for o in n.outputs}
    return {(made.get(x, GRAPH_INPUT), n.op) for n in graph.nodes for x in n.inputs if x}
