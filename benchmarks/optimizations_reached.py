"""Does compiler feedback pay off?  Isra's uniform generation against the ``feedback`` strategy, in
equal time, on what the compilers themselves did.

    python benchmarks/optimizations_reached.py [--backends inductor,tvm] [--budget 180] [--seed 0]
        [--strategies isra,feedback,guided]
    python benchmarks/optimizations_reached.py --overhead [--tests 20]

Per backend and strategy, one real campaign (``dlcfuzz fuzz``, jobs 1, the same budget and seed) in a
temporary folder; printed side by side: distinct Inductor counters and pattern rewrites fired
(``inductor:...`` keys; ``per-pattern`` counts the named rewrites alone), distinct TVM passes that
changed a module (``tvm:pass:...``), the same at half the budget, tests made, distinct bugs (all
categories / the compiler's own).

``--overhead`` compiles the same generated models in process with the feedback measured and not
(alternating, after a warm-up) and prints the compile time per test each way.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import dlcfuzz.run.campaign as campaign_module
from dlcfuzz.cli import main as dlcfuzz
from dlcfuzz.run.store import Store

STRATEGIES = ("isra", "feedback")


class Measured(campaign_module.Campaign):
    """The campaign the CLI builds, watching the fired keys every recorded test brings."""

    runs: list[Measured] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.first_seen: dict[str, float] = {}  # key -> seconds into the campaign
        self.t0 = time.monotonic()
        Measured.runs.append(self)

    def record(self, ex) -> None:
        now = time.monotonic() - self.t0
        for vs in ex.outcomes.values():
            for o in vs.values():
                for k in o.fired:
                    self.first_seen.setdefault(k, now)
        super().record(ex)


def arm(backend: str, strategy: str, budget: float, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "campaign"
        campaign_module.Campaign = Measured  # the CLI imports it from the module when it runs
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            dlcfuzz(["fuzz", "--backends", backend, "--budget", str(budget), "--jobs", "1", "--seed", str(seed),
                     "--strategy", strategy, "--out", str(out)])
        c = Measured.runs.pop()
        store = Store(out)
        tests, cats = store.summary()["tests"], store.categories()
        store.close()
    seen = c.first_seen
    horizon = max(0.0, min(budget, time.monotonic() - c.t0))

    def count(prefix: str, until: float | None = None) -> int:
        return sum(k.startswith(prefix) and (until is None or t <= until) for k, t in seen.items())

    return {"tests": tests, "bugs": sum(cats.values()), "compiler bugs": cats.get("compiler", 0),
            "inductor keys": count("inductor:"), "inductor keys @1/2": count("inductor:", horizon / 2),
            "per-pattern": count("inductor:inductor_pattern_matcher_per_pattern:"),
            "tvm passes": count("tvm:pass:"), "tvm passes @1/2": count("tvm:pass:", horizon / 2),
            "keys": sorted(seen)}


def compare(backends: list[str], budget: float, seed: int, strategies: tuple[str, ...] = STRATEGIES) -> None:
    for backend in backends:
        results = {s: arm(backend, s, budget, seed) for s in strategies}
        rows = ["tests", "bugs", "compiler bugs"] + (
            ["inductor keys", "inductor keys @1/2", "per-pattern"] if backend.startswith("inductor")
            else ["tvm passes", "tvm passes @1/2"])
        print(f"\n== {backend}: {budget:.0f}s per strategy, jobs 1, seed {seed}")
        print(f"{'':<20}" + "".join(f"{s:>12}" for s in strategies))
        for r in rows:
            print(f"{r:<20}" + "".join(f"{results[s][r]:>12}" for s in strategies))
        base = set(results[strategies[0]]["keys"])
        for s in strategies[1:]:  # each against the first (isra)
            keys = set(results[s]["keys"])
            print(f"only {strategies[0]} (not {s}): {sorted(base - keys)}")
            print(f"only {s}: {sorted(keys - base)}")


def overhead(n: int) -> None:
    """In-process compile time per test with and without measuring the fired keys."""
    from dlcfuzz.backends import load_backend
    from dlcfuzz.backends.base import Test
    from dlcfuzz.export.onnx import to_bytes
    from dlcfuzz.gen import make_generator
    from dlcfuzz.ir.hints import feed_array
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.spec import REGISTRY

    for name in ("tvm", "inductor"):
        be = load_backend(name)
        specs = [s for s in REGISTRY.values() if be.supports({s.op})]
        gen = make_generator("isra", specs, GenOptions(dtypes=("float32",)), (1, 10))
        times: dict[bool, list[float]] = {True: [], False: []}
        for seed in range(n + 1):
            g = gen.generate(seed)
            if not be.supports({x.op for x in g.nodes}, g):
                continue
            rng = np.random.default_rng(seed)
            test = Test(to_bytes(g), g.to_json(), {v.name: feed_array(rng, v) for v in g.inputs})
            try:
                imported = be.load(test)
                for on in (seed % 2 == 0, seed % 2 == 1):  # alternate which goes first
                    be.report_fired = on
                    t0 = time.perf_counter()
                    for v in be.variants():
                        if name == "inductor" and not v.options.get("backend"):
                            continue
                        if name == "inductor":
                            imported = be.load(test)  # a fresh module: Dynamo caches per module
                        be.compile(imported, v)
                    if seed:  # seed 0 warms the compiler up
                        times[on].append(time.perf_counter() - t0)
            except Exception:  # a compiler's error is not what this measures
                continue
        on, off = statistics.mean(times[True]), statistics.mean(times[False])
        print(f"{name}: {len(times[True])} tests, compile per test (all variants) {off * 1000:.0f} ms without, "
              f"{on * 1000:.0f} ms with feedback: {(on - off) * 1000:+.1f} ms ({100 * (on - off) / off:+.1f}%)")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--backends", default="inductor,tvm")
    p.add_argument("--budget", type=float, default=180.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--strategies", default=",".join(STRATEGIES), help="the first is the baseline (isra)")
    p.add_argument("--overhead", action="store_true")
    p.add_argument("--tests", type=int, default=20)
    a = p.parse_args()
    if a.overhead:
        overhead(a.tests)
    else:
        compare(a.backends.split(","), a.budget, a.seed, tuple(a.strategies.split(",")))


if __name__ == "__main__":
    main()
