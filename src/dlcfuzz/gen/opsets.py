"""Graphs at many opsets: each graph gets an opset drawn from its seed, and is made by a generator of
that opset.

Compilers convert each operator version with its own code (TVM's ONNX frontend has ``_impl_v1`` to
``_impl_v23``, e.g. Reduce* with axes as an attribute before opset 18 and as an input after), so a
campaign at one opset leaves the others' converters untested.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from dlcfuzz.ir import Graph
from dlcfuzz.seeds import derive_seed


def parse_opsets(text: str, lo: int, hi: int) -> tuple[int, ...]:
    """``"17"``, ``"13-21"`` or ``"13,17,21"`` as a sorted tuple of opsets within [lo, hi]; raises
    ValueError with what is wrong."""
    got: set[int] = set()
    for part in text.split(","):
        first, sep, last = part.strip().partition("-")
        try:
            a, b = int(first), int(last) if sep else int(first)
        except ValueError:
            raise ValueError(f"opset {part.strip()!r} is not a number or a range like 13-21") from None
        if not lo <= a <= b <= hi:
            raise ValueError(f"opset {part.strip()} is not within {lo}..{hi}")
        got.update(range(a, b + 1))
    return tuple(sorted(got))


class OpsetMix:
    """One generator per opset behind the generator interface; the generators share one ``Stats``.

    An opset under which no operator can be generated (e.g. for a target that declines them all there)
    is left out; ValueError when that leaves none.
    """

    def __init__(self, make: Callable[[int], Any], opsets: Sequence[int]) -> None:
        self.gens: dict[int, Any] = {}
        errors = []
        for v in opsets:
            try:
                self.gens[v] = make(v)
            except ValueError as e:
                errors.append(f"opset {v}: {e}")
        if not self.gens:
            raise ValueError("; ".join(errors))
        self.opsets = tuple(self.gens)
        first = next(iter(self.gens.values()))
        self.stats = first.stats
        for g in self.gens.values():
            g.stats = self.stats
        self.specs = list({s.op: s for g in self.gens.values() for s in g.specs}.values())
        self.unavailable = sorted(set.intersection(*(set(g.unavailable) for g in self.gens.values())))
        self._last = first

    def generate(self, seed: int) -> Graph:
        # the opset's draw must not share a stream with the graph's own draws (index -1: no test's)
        opset = random.Random(derive_seed(seed, -1)).choice(self.opsets)
        self._last = self.gens[opset]
        return self._last.generate(seed)

    def __getattr__(self, name: str) -> Any:
        # strategy-specific state (coverage, last_ctx ...) is the last-used generator's, and exists only
        # where the strategy has it (hasattr); coverage objects are shared by all of them.  Feedback on a
        # graph goes to the generator of its opset.
        attr = getattr(self.__dict__["_last"], name)
        if name == "feedback":
            return lambda graph, fired: self.gens.get(graph.opset, self._last).feedback(graph, fired)
        return attr
