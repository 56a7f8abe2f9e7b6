"""Isra's generator (§3.2): append operators in topological order, each instantiated without
backtracking; the number of operators is uniform in [lb, ub] and operator types are uniform
over the operator set."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from dlcfuzz.ir import Graph
from dlcfuzz.solve import Admission, GenOptions, Instantiator, Stats, TypeProfile
from dlcfuzz.spec.dsl import EmptyDomain, OpSpec

MAX_TRIES = 20  # per insertion; each extra try is counted as a retry


def split_available(specs: Sequence[OpSpec], limits: GenOptions,
                    profile: TypeProfile | None, admit: Admission | None = None) -> tuple[list[OpSpec], list[str]]:
    """(the specs that can be instantiated under the dtype set, opset, kernel profile and target
    compiler; the names of those that cannot).  Raises ValueError when none can."""
    probe = Instantiator(Graph(), limits, random.Random(0), np.random.default_rng(0), profile, admit=admit)
    ok = [s for s in specs if probe.available(s)]
    if not ok:
        raise ValueError("no operator can be generated under this dtype set, opset and target")
    return ok, sorted(s.op for s in specs if not probe.available(s))


def insert_uniform(inst: Instantiator, specs: Sequence[OpSpec], rng: random.Random, stats: Stats) -> None:
    """Appends one call of a uniformly drawn operator, drawing again (a counted retry) when a
    domain runs dry, at most MAX_TRIES times."""
    for attempt in range(MAX_TRIES):
        spec = specs[rng.randrange(len(specs))]
        try:
            inst.instantiate(spec)
            break
        except EmptyDomain:  # nothing was committed; draw another operator
            stats.refused(spec.op, attempt)
    stats.insertions += 1


class IsraGenerator:
    def __init__(self, specs: Sequence[OpSpec], limits: GenOptions, op_range: tuple[int, int],
                 profile: TypeProfile | None = None, admit: Admission | None = None) -> None:
        self.limits = limits
        self.op_range = op_range
        self.profile = profile
        self.admit = admit  # the target compiler's support profile: only calls it takes
        self.specs, self.unavailable = split_available(specs, limits, profile, admit)
        self.stats = Stats()

    def generate(self, seed: int) -> Graph:
        rng = random.Random(seed)
        g = Graph(opset=self.limits.opset, meta={"seed": seed, "strategy": "isra"})
        inst = Instantiator(g, self.limits, rng, np.random.default_rng(seed), self.profile, admit=self.admit)
        for _ in range(rng.randint(*self.op_range)):
            insert_uniform(inst, self.specs, rng, self.stats)
            self.last_ctx = inst.last_ctx
        g.set_leaf_outputs()
        return g

