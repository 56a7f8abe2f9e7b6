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
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, SHAPE_FORM, Graph, TensorType, Value
from dlcfuzz.solve import GenOptions, Instantiator, Stats, TypeProfile
from dlcfuzz.spec.dsl import EmptyDomain, OpSpec


class ProbeGenerator:
    def __init__(self, specs: Sequence[OpSpec], limits: GenOptions, op_range: tuple[int, int] = (1, 1),
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
        if rng.random() < 0.5:
            self._shape_constants(g)
        g.set_leaf_outputs()
        return g

    def _shape_constants(self, g: Graph) -> None:
        """Writes the call's 1-D int64 constants as the Shape of a new graph input of that shape, so that
        the profile learns which consumers a compiler takes a Shape for (``in1=shape``): a single call
        has no other tensor whose shape the constant could be (``Instantiator._shape_sources``)."""
        if self.limits.constant_nodes <= 0 or not g.nodes:
            return
        for k, name in enumerate(g.nodes[0].inputs[1:], start=1):
            v = g.values.get(name) if name else None
            if v is None or v.kind != CONST_KIND or v.type.dtype != "int64" or v.type.rank != 1 or v.data is None:
                continue
            dims = tuple(int(d) for d in v.data)
            if not dims or not all(1 <= d <= self.limits.max_dim for d in dims):
                continue
            src = g.add_value(Value(f"shape_of_in{k}", TensorType(dims, "float32"), INPUT_KIND)).name
            g.meta.setdefault("constant_nodes", {})[name] = SHAPE_FORM
            g.meta.setdefault("shape_of", {})[name] = [src, None, None]
