"""Every valid-by-construction strategy, checked the hard way: N graphs of LB..UB operators each,
every graph through the ONNX checker (full), strict ONNX shape inference (output types must match
the specs'), and a run on ONNX Runtime (output types must match again) -- the checks of
``backends.ort.model_error`` (what the tests' ``check_graph`` asserts).

    python benchmarks/validity.py [--graphs 1000] [--ops 1:30] [--strategies isra,hirgen,gencog,guided,randoop]

Prints, per strategy, graphs passing, operator types seen, generation time; then the operator
types seen over all strategies.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from dlcfuzz.backends.ort import full_profile, model_error
from dlcfuzz.gen import make_generator
from dlcfuzz.seeds import derive_seed
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", type=int, default=1000)
    p.add_argument("--ops", default="1:30")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--strategies", default="isra,hirgen,gencog,guided,randoop")
    a = p.parse_args()
    lo, hi = (int(x) for x in a.ops.split(":"))
    limits = GenOptions(opset=a.opset)
    specs = list(REGISTRY.values())
    profile = full_profile(a.opset, tuple(REGISTRY))
    seen_all: Counter[str] = Counter()
    for strategy in a.strategies.split(","):
        gen = make_generator(strategy, specs, limits, (lo, hi), profile, valid=model_error)
        seen: Counter[str] = Counter()
        failed: list[tuple[int, str]] = []
        gen_s = 0.0
        for i in range(a.graphs):
            t0 = time.perf_counter()
            g = gen.generate(derive_seed(a.opset, i))
            gen_s += time.perf_counter() - t0
            seen.update(n.op for n in g.nodes)
            err = model_error(g, seed=i)
            if err is not None:
                failed.append((i, err[:200]))
        seen_all.update(seen)
        nodes = sum(seen.values())
        print(f"{strategy:<8} {a.graphs - len(failed)}/{a.graphs} graphs pass; {nodes} operators, "
              f"{len(seen)} types; generation {gen_s:.1f}s ({nodes / max(gen_s, 1e-9):.0f} operators/s)")
        for i, why in failed[:5]:
            print(f"    graph {i}: {why}")
    never = sorted(set(REGISTRY) - set(seen_all))
    print(f"operator types seen over all strategies: {len(seen_all)} of {len(REGISTRY)} specs "
          f"(opset {a.opset}); never seen: {', '.join(never) or 'none'}")


if __name__ == "__main__":
    main()
