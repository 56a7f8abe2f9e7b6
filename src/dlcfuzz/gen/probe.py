"""Probe strategy: single-operator graphs, the operators in turn, for building a compiler's support
profile (``dlcfuzz probe``).  NNSmith probes each operator x dtype once; here each operator gets
several calls with freshly drawn dtypes, ranks, attributes and input forms, so that the profile can
tell which feature of a call a compiler declines."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import numpy as np

from dlcfuzz.gen.isra import MAX_TRIES, split_available
from dlcfuzz.ir import Graph
from dlcfuzz.solve import Instantiator, Limits, Stats, TypeProfile
from dlcfuzz.spec.dsl import EmptyDomain, OpSpec


class ProbeGenerator:
    def __init__(self, specs: Sequence[OpSpec], limits: Limits, op_range: tuple[int, int] = (1, 1),
                 profile: TypeProfile | None = None) -> None:
        self.limits, self.profile = limits, profile
        self.specs, self.unavailable = split_available(specs, limits, profile)
        self.stats = Stats()
        self._next = 0
        self._lock = threading.Lock()

    def generate(self, seed: int) -> Graph:
        """One call of the next operator in turn (the seed draws everything else)."""
        with self._lock:
            spec = self.specs[self._next % len(self.specs)]
            self._next += 1
        rng = random.Random(seed)
        g = Graph(opset=self.limits.opset, meta={"seed": seed, "strategy": "probe", "probe": spec.op})
        inst = Instantiator(g, self.limits, rng, np.random.default_rng(seed), self.profile)
        for _ in range(MAX_TRIES):
            try:
                inst.instantiate(spec)
                break
            except EmptyDomain:
                self.stats.retries += 1
        self.stats.insertions += 1
        g.set_leaf_outputs()
        return g
