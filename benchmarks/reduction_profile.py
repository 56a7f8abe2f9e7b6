"""Where a campaign's CPU goes between testing and reducing, and where a reduction's time goes.

    python benchmarks/reduction_profile.py CAMPAIGN [--sample 15] [--seed 1]

From the campaign's store: the tests' thread seconds by phase, and the reductions' seconds and
candidates by stage (``reduction.json``).  Then a sample of its listed bugs is reduced again with
this tree, as a campaign does (its own pool of warm workers, no verification run first), timing every
worker call by the reducer step that made it, the backend and whether the worker was fresh (a new
process: its start-up is paid again).  The campaign folder is only read.
"""

from __future__ import annotations

import argparse
import glob
import inspect
import json
import random
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from dlcfuzz.ir import Graph
from dlcfuzz.run.reduce import Case, ReduceError, reduce_case
from dlcfuzz.run.store import StoreReader
from dlcfuzz.run.worker import PhaseLimits, WorkerPool

STEPS = ("check", "intermediates", "first_diverging", "calibrate", "verify", "_baseline", "isolate", "downstream")


def campaign_split(out: Path) -> None:
    store = StoreReader(out)
    n, total, gen, inputs, compilers, oracle = store.time_split()
    store.close()
    print(f"{n} tests, {total:.0f} thread s: generation {gen:.0f}, inputs and baseline {inputs:.0f}, "
          f"compilers {compilers:.0f}, oracle {oracle:.0f}")
    done = [json.loads(Path(p).read_text()) for p in glob.glob(str(out / "bugs" / "*" / "reduction.json"))]
    stages: Counter = Counter()
    for r in done:
        stages.update(r.get("stages", {}))
    print(f"{len(done)} reductions, {sum(r['seconds'] for r in done):.0f} s, "
          f"{sum(r['candidates_tried'] for r in done)} candidates; kept by stage: {dict(stages)}")


def profile(out: Path, sample: int, seed: int) -> None:
    store = StoreReader(out)
    dirs = [out / b["dir"] for b in store.listed_bugs("compiler")]
    store.close()
    dirs = random.Random(seed).sample(dirs, min(sample, len(dirs)))
    spent: dict[tuple, float] = defaultdict(float)
    calls: Counter = Counter()
    run = WorkerPool.run

    def timed(self, backend, test, variants, fresh=False, runs=1):
        step = next((f.function for f in inspect.stack()[1:8] if f.function in STEPS), "other")
        t0 = time.monotonic()
        try:
            return run(self, backend, test, variants, fresh=fresh, runs=runs)
        finally:
            key = (step, backend, "fresh" if fresh else "pooled")
            spent[key] += time.monotonic() - t0
            calls[key] += 1

    WorkerPool.run = timed
    pool = WorkerPool(PhaseLimits())
    t_all = time.monotonic()
    try:
        for folder in dirs:
            info = json.loads((folder / "finding.json").read_text())
            graph = Graph.from_json((folder / "graph.json").read_text())
            with np.load(folder / "inputs.npz") as f:
                inputs = {k: f[k] for k in f.files}
            t0 = time.monotonic()
            try:
                r = reduce_case(Case(graph, inputs, info, info["signature"]), 60, pool, verify=False)
                print(f"  {folder.name[:10]} {info['backend']:<9} {info['oracle']:<12} {time.monotonic() - t0:5.1f} s "
                      f"{r.candidates_tried:3} candidates, {r.ops_before} -> {r.ops_after} operators {r.stages}")
            except ReduceError as e:
                print(f"  {folder.name[:10]} {info['backend']:<9} failed: {e}")
    finally:
        pool.close()
        WorkerPool.run = run
    print(f"{len(dirs)} reductions: {time.monotonic() - t_all:.1f} s; worker calls by step, backend, worker:")
    for key in sorted(spent, key=spent.__getitem__, reverse=True):
        print(f"  {spent[key]:7.1f} s {calls[key]:5}x  {' '.join(key)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--sample", type=int, default=15, help="listed bugs to reduce again (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    campaign_split(a.campaign)
    if a.sample:
        profile(a.campaign, a.sample, a.seed)


if __name__ == "__main__":
    main()
