"""Where a campaign spends its CPU: which compiler each test is generated for, and which other
compilers and variants run it, following each one's yield of new distinct bugs per CPU-second.

Each arm (a backend, or one variant of a backend) has a Gamma posterior over its bug rate (Poisson
arrivals of new bugs over its CPU-seconds), started from an optimistic prior so that every arm is
tried.  Thompson sampling draws a rate per arm: the target is the arm with the highest draw, and an
other arm runs the test with probability draw / best draw (at least ``floor``: the cross-compiler vote
that tells a baseline issue from a compiler bug needs the others now and then).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

PRIOR_BUGS = 1.0  # the optimistic prior: one bug in PRIOR_SECONDS, until an arm's own record says otherwise
PRIOR_SECONDS = 60.0


@dataclass
class Arm:
    bugs: float = 0.0
    seconds: float = 0.0
    pulls: int = 0


class Allocator:
    def __init__(self, seed: int = 0, floor: float = 0.25) -> None:
        self.arms: dict[Hashable, Arm] = {}
        self.floor = floor
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def _draw(self, key: Hashable) -> float:
        a = self.arms.setdefault(key, Arm())
        return self.rng.gammavariate(PRIOR_BUGS + a.bugs, 1.0 / (PRIOR_SECONDS + a.seconds))

    def choose(self, keys: Sequence[Hashable]) -> tuple[Hashable, dict[Hashable, bool]]:
        """(the arm to target, whether each other arm runs too)."""
        with self.lock:
            draws = {k: self._draw(k) for k in keys}
            best = max(draws, key=draws.__getitem__)
            top = draws[best]
            runs = {k: k == best or self.rng.random() < max(self.floor, d / top) for k, d in draws.items()}
        return best, runs

    def credit(self, key: Hashable, seconds: float, bugs: int) -> None:
        with self.lock:
            a = self.arms.setdefault(key, Arm())
            a.seconds += seconds
            a.bugs += bugs
            a.pulls += 1

    def rate(self, key: Hashable) -> float:
        """The posterior mean of an arm's new bugs per CPU-second."""
        a = self.arms.get(key, Arm())
        return (PRIOR_BUGS + a.bugs) / (PRIOR_SECONDS + a.seconds)
