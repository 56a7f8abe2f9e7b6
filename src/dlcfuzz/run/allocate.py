"""Where a campaign spends its CPU: which compiler each test is generated for, and which other
compilers and variants run it, following each one's yield of new distinct bugs per CPU-second.

Each arm (a backend, or one variant of a backend) has a Gamma posterior over its bug rate (Poisson
arrivals of new bugs over its CPU-seconds), started from an optimistic prior so that every arm is
tried.  Thompson sampling draws a rate per arm: the target is the arm with the highest draw, and an
other arm runs the test with a probability that gives it draw / best draw of the target's CPU (its
cost per test weighed against the target's: a per-test chance alone would give a compiler that is a
hundred times slower a hundred times that CPU).  An arm whose share of the CPU spent so far
is below ``floor`` / (number of arms) runs in any case: a floor on CPU, not on tests, so that a compiler
that takes seconds per test and finds nothing (Inductor) is explored without eating the campaign.  (The
cross-compiler vote on a divergence does not rest on this: the campaign calls the absent ones in.)

An arm may make tests that no other arm can run (``alone``: torch-native programs on Inductor beside the
ONNX compilers).  It is one more arm of the same draw: the target where its draw is the best, and then no
other arm runs; never an arm that runs beside another's target.  The floor holds for it and beside it: an
arm below its floor that the target drawn would leave out (the one that runs alone, or the others where it
is the target) is the target instead.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Collection, Hashable, Sequence
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

    def choose(self, keys: Sequence[Hashable],
               alone: Collection[Hashable] = ()) -> tuple[Hashable, dict[Hashable, bool]]:
        """(the arm to target, whether each other arm runs too); an arm in ``alone`` runs only as the
        target, and alone."""
        with self.lock:
            draws = {k: self._draw(k) for k in keys}
            spent = sum(self.arms[k].seconds for k in keys)
            share = self.floor / len(keys) * spent
            best = max(draws, key=draws.__getitem__)
            # an arm below its floor of CPU that this target would leave out (one that runs alone, or any
            # beside a target that runs alone) is the target instead
            left_out = [k for k in keys if self.arms[k].seconds < share and k != best
                        and (k in alone or best in alone)]
            if left_out:
                best = max(left_out, key=draws.__getitem__)
            top = draws[best]
            if best in alone:
                return best, {k: k == best for k in keys}
            runs = {k: k == best or (k not in alone and (self.arms[k].seconds < share
                    or self.rng.random() < d / top * self._relative_cost(best, k))) for k, d in draws.items()}
        return best, runs

    def _relative_cost(self, best: Hashable, key: Hashable) -> float:
        """The target's CPU seconds per test over ``key``'s (1 until both have run)."""
        a, b = self.arms[key], self.arms[best]
        if not (a.pulls and b.pulls and a.seconds > 0):
            return 1.0
        return (b.seconds / b.pulls) / (a.seconds / a.pulls)

    def credit(self, key: Hashable, seconds: float, bugs: int, tests: int = 1) -> None:
        """An arm's CPU and new bugs (``tests`` = 0: a cost that is no test, as reducing its bug)."""
        with self.lock:
            a = self.arms.setdefault(key, Arm())
            a.seconds += seconds
            a.bugs += bugs
            a.pulls += tests

    def rate(self, key: Hashable) -> float:
        """The posterior mean of an arm's new bugs per CPU-second."""
        a = self.arms.get(key, Arm())
        return (PRIOR_BUGS + a.bugs) / (PRIOR_SECONDS + a.seconds)
