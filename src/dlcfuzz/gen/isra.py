"""Isra's generator (§3.2): append operators in topological order, each instantiated without
backtracking; the number of operators is uniform in [lb, ub] and operator types are uniform
over the operator set."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from dlcfuzz.ir import Graph
from dlcfuzz.solve import Instantiator, Limits, Stats, TypeProfile
from dlcfuzz.spec.dsl import EmptyDomain, OpSpec

MAX_TRIES = 20  # per insertion; each extra try is counted as a retry


class IsraGenerator:
    def __init__(self, specs: Sequence[OpSpec], limits: Limits, op_range: tuple[int, int],
                 profile: TypeProfile | None = None) -> None:
        self.limits = limits
        self.op_range = op_range
        self.profile = profile
        probe = Instantiator(Graph(), limits, random.Random(0), np.random.default_rng(0), profile)
        self.specs = [s for s in specs if probe.available(s)]
        self.unavailable = sorted(s.op for s in specs if not probe.available(s))
        if not self.specs:
            raise ValueError("no operator can be generated under this dtype set, opset and target")
        self.stats = Stats()

    def generate(self, seed: int) -> Graph:
        rng = random.Random(seed)
        g = Graph(opset=self.limits.opset, meta={"seed": seed, "strategy": "isra"})
        inst = Instantiator(g, self.limits, rng, np.random.default_rng(seed), self.profile)
        n_ops = rng.randint(*self.op_range)
        stats = self.stats
        for _ in range(n_ops):
            for attempt in range(MAX_TRIES):
                spec = self.specs[rng.randrange(len(self.specs))]
                try:
                    inst.instantiate(spec)
                    self.last_ctx = inst.last_ctx
                    break
                except EmptyDomain:  # nothing was committed; draw another operator
                    stats.retries += 1
                    stats.failures[spec.op] = stats.failures.get(spec.op, 0) + 1
                    if attempt == 0:
                        stats.retried_insertions += 1
            stats.insertions += 1
        g.set_leaf_outputs()
        return g

