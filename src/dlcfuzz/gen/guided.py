"""Guided generation: HirGen's coverage guidance (§3.1.3-3.1.4) and GenCoG's expressivity
direction (§5.1), separately or together.

Strategies
  hirgen   operator drawn uniformly; a candidate call is kept with a probability graded by how
           many coverage criteria it extends (operator x dtype, operator x output shape,
           operator→operator edge, optionally operator paths of length 3); one that extends
           none is dropped.
  gencog   the first input is drawn from the existing tensors with a use penalty; the operator
           among those whose first input accepts it, by a softmax over each operator's recent
           gain in vertex diversity; a call whose (input types, attributes) was seen before is
           dropped with probability p_rej.
  guided   GenCoG's choice of tensor and operator, and acceptance graded over all the criteria
           (HirGen's and GenCoG's vertex novelty).

Acceptance of a call extending k of C criteria: k = 0 -> 0 (hirgen) or 1 - p_rej (gencog,
guided); k >= 1 -> 0.5 + 0.5 (k - 1) / (C - 1) (1 when C = 1), so a call new on every criterion
is always kept.  After MAX_TRIES dropped candidates for one insertion the next valid call is
kept regardless (counted as ``forced``), so a saturated coverage never stalls generation.

Coverage lives in a ``Coverage`` object that outlives graphs: a campaign keeps one for its whole
run, stores what each graph added, and reloads it on resume or from another campaign.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dlcfuzz.gen.isra import split_available
from dlcfuzz.ir import CONST_KIND, Graph, Node
from dlcfuzz.solve import Admission, GenOptions, Instantiator, Proposal, Stats, TypeProfile
from dlcfuzz.solve.space import call_space
from dlcfuzz.spec.dsl import EmptyDomain, OpSpec

STRATEGIES = ("hirgen", "gencog", "guided")
HIRGEN_CRITERIA = ("op_dtype", "op_shape", "edge")
EDGE_BOOST = 32.0  # guided: weight of a first input that would make a new operator edge
MAX_TRIES = 20  # dropped candidates per insertion before one is kept regardless
SMALL_CONST = 16  # integer constant inputs up to this size count as attributes (as in the metrics)


class Coverage:
    """Sets of covered keys per criterion, plus the keys added since the last ``take_new``."""

    def __init__(self) -> None:
        self.sets: dict[str, set[str]] = {}
        self.new: list[tuple[str, str]] = []

    def has(self, criterion: str, key: str) -> bool:
        return key in self.sets.get(criterion, ())

    def add(self, criterion: str, key: str) -> bool:
        s = self.sets.setdefault(criterion, set())
        if key in s:
            return False
        s.add(key)
        self.new.append((criterion, key))
        return True

    def load(self, rows: Iterable[tuple[str, str]]) -> None:
        """Adds stored keys (not reported as new)."""
        for criterion, key in rows:
            self.sets.setdefault(criterion, set()).add(key)

    def take_new(self) -> list[tuple[str, str]]:
        new, self.new = self.new, []
        return new

    def size(self, criterion: str) -> int:
        return len(self.sets.get(criterion, ()))


def vertex_key(p: Proposal, g: Graph) -> str:
    """GenCoG's vertex identity: operator, input types and attributes (small integer constant
    inputs count as attributes, as in ``dlcfuzz.metrics``, pinned runtime ones apart from them);
    hashed to keep coverage compact."""
    staged = {v.name: v for v, _ in p.staged}
    parts = [p.node.op, repr(sorted((k, _freeze(v)) for k, v in p.node.attrs.items()))]
    for k, x in enumerate(p.node.inputs):
        if not x:
            continue
        v = staged.get(x) or g.values[x]
        parts.append(str(v.type))
        if v.data is not None and v.data.size <= SMALL_CONST and v.data.dtype.kind in "iub":
            # a pinned runtime input holds the same value as the constant would: another form of the call
            parts.append(f"in{k}={'' if v.kind == CONST_KIND else 'runtime '}{v.data.ravel().tolist()}")
    return hashlib.blake2b("|".join(parts).encode(), digest_size=8).hexdigest()


def _freeze(v):
    if isinstance(v, np.ndarray):
        return (v.dtype.name, v.shape, tuple(v.ravel().tolist()))
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, float):
        return round(v, 6)
    return v


@dataclass
class GuidedStats(Stats):
    proposed: int = 0
    dropped: int = 0
    forced: int = 0
    gains: dict[str, int] = field(default_factory=dict)  # criterion -> calls kept that extended it


class GuidedGenerator:
    def __init__(self, specs: Sequence[OpSpec], limits: GenOptions, op_range: tuple[int, int],
                 profile: TypeProfile | None = None, strategy: str = "guided", coverage: Coverage | None = None,
                 p_rej: float = 0.9, temperature: float = 0.2, paths: bool = False, decay: float = 0.1,
                 admit: Admission | None = None) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
        self.limits, self.op_range, self.profile = limits, op_range, profile
        self.strategy = strategy
        self.coverage = coverage or Coverage()
        self.p_rej, self.temperature, self.decay = p_rej, temperature, decay
        self.admit = admit  # the target compiler's support profile: only calls it takes
        self.specs, self.unavailable = split_available(specs, limits, profile, admit)
        hirgen = (*HIRGEN_CRITERIA, "path") if paths else HIRGEN_CRITERIA
        self.criteria: tuple[str, ...] = {"hirgen": hirgen, "gencog": ("vertex",),
                                          "guided": (*hirgen, "vertex")}[strategy]
        self.directed = strategy != "hirgen"  # GenCoG's choice of tensor, then operator
        # GenCoG's score: an operator's recent rate of new vertices times what one new vertex adds
        # to vertex diversity (1 / N_est)
        self.novelty = {s.op: 1.0 for s in self.specs}
        # on a log scale in [0, 1]: N_est spans four orders of magnitude, and a linear 1 / N_est
        # would leave the operators with tiny call spaces (Range, N_est 9) alone in the softmax
        n_est = {s.op: call_space(s, limits) for s in self.specs}
        lo, hi = math.log(min(n_est.values())), math.log(max(n_est.values()))
        self.worth = {op: (hi - math.log(n)) / (hi - lo) if hi > lo else 1.0 for op, n in n_est.items()}
        self.stats = GuidedStats()

    # -- coverage of one candidate call --------------------------------------------------------
    def keys(self, p: Proposal, inst: Instantiator) -> dict[str, list[str]]:
        """The coverage keys a candidate call would touch, per criterion of this strategy."""
        op, g = p.node.op, inst.g
        ins = [t for t in p.input_types(g) if t is not None]
        out = p.outputs[0].type if p.outputs else None
        keys: dict[str, list[str]] = {}
        for criterion in self.criteria:
            if criterion == "op_dtype":
                io = ins[0].dtype if ins else "-"
                if out is not None and out.dtype != io:
                    io = f"{io}>{out.dtype}"
                keys[criterion] = [f"{op}|{io}"]
            elif criterion == "op_shape":
                keys[criterion] = [f"{op}|{out.shape if out else ()}"]
            elif criterion == "edge":
                keys[criterion] = [f"{inst.producer[x].op}>{op}" for x in p.node.inputs if x in inst.producer]
            elif criterion == "path":
                keys[criterion] = [f"{inst.producer[y].op}>{inst.producer[x].op}>{op}"
                                   for x in p.node.inputs if x in inst.producer
                                   for y in inst.producer[x].inputs if y in inst.producer]
            else:
                keys[criterion] = [vertex_key(p, g)]
        return keys

    def accept_probability(self, gained: int) -> float:
        c = len(self.criteria)
        if gained == 0:
            return 0.0 if self.strategy == "hirgen" else 1.0 - self.p_rej
        return 1.0 if c == 1 else 0.5 + 0.5 * (gained - 1) / (c - 1)

    # -- one graph -------------------------------------------------------------------------------
    def generate(self, seed: int) -> Graph:
        rng = random.Random(seed)
        g = Graph(opset=self.limits.opset, meta={"seed": seed, "strategy": self.strategy})
        inst = Instantiator(g, self.limits, rng, np.random.default_rng(seed), self.profile,
                            use_penalty=self.directed, admit=self.admit)
        for _ in range(rng.randint(*self.op_range)):
            self._insert(inst, rng)
        g.set_leaf_outputs()
        return g

    def _insert(self, inst: Instantiator, rng: random.Random) -> Node | None:
        stats, cov = self.stats, self.coverage
        for attempt in range(MAX_TRIES * 3):
            spec, first = self._choose(inst, rng)
            try:
                p = inst.propose(spec, first)
            except EmptyDomain:
                stats.refused(spec.op, attempt)
                continue
            stats.proposed += 1
            keys = self.keys(p, inst)
            fresh = {c for c, ks in keys.items() if any(not cov.has(c, k) for k in ks)}
            if "vertex" in keys:
                self.novelty[spec.op] += self.decay * (("vertex" in fresh) - self.novelty[spec.op])
            forced = attempt >= MAX_TRIES
            if not forced and rng.random() >= self.accept_probability(len(fresh)):
                stats.dropped += 1
                continue
            stats.forced += forced
            for c, ks in keys.items():
                for k in ks:
                    cov.add(c, k)
            for c in fresh:
                stats.gains[c] = stats.gains.get(c, 0) + 1
            stats.insertions += 1
            node = inst.commit(p)
            self.last_ctx = inst.last_ctx
            return node
        return None  # nothing fits at all (a tiny operator set under tight limits)

    def _choose(self, inst: Instantiator, rng: random.Random):
        """(operator, forced first input or None)."""
        pool = inst.pool
        if self.strategy == "gencog" and pool.values:  # GenCoG: a tensor, then an operator that takes it
            x = pool.choose(rng, pool.values)
            cands = [s for s in self.specs if inst.first_fits(s, x)]
            if cands:
                return self._softmax(cands, rng), x
        if not self.directed:
            return self.specs[rng.randrange(len(self.specs))], None
        spec = self._softmax(self.specs, rng)
        if self.strategy == "guided" and pool.values:
            # an operator, then a first input that makes a new edge (else a less-used one)
            fits = [x for x in pool.values if inst.first_fits(spec, x)]
            if fits:
                weights = [pool.weight(x) * (EDGE_BOOST if self._new_edge(inst, x, spec.op) else 1.0) for x in fits]
                return spec, rng.choices(fits, weights=weights)[0]
        return spec, None

    def _new_edge(self, inst: Instantiator, x, op: str) -> bool:
        p = inst.producer.get(x.name)
        return p is not None and not self.coverage.has("edge", f"{p.op}>{op}")

    def _softmax(self, cands: Sequence[OpSpec], rng: random.Random) -> OpSpec:
        t = self.temperature
        return rng.choices(cands, weights=[math.exp(self.novelty[s.op] * self.worth[s.op] / t) for s in cands])[0]
