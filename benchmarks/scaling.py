"""Throughput of the local and the Ray executor with 1 and 2 workers, and what one driver can absorb.

    python benchmarks/scaling.py [--budget 60] [--backends ort] [--ops 1:10] [--strategy isra] [--workers 1,2]

Runs the same campaign (same seed, same budget) with each executor and worker count in a fresh
temporary folder and prints tests/s (tests committed / wall time of ``Campaign.run``, the set-up of
the backends excluded), Ray's overhead relative to local, and the driver's side of each result:
seconds in ``Campaign.record`` (bundles of new bugs, the SQLite transaction, progress; under Ray
also the coverage merge) per result, hence the results/s one driver could record if workers were
free.  Ray itself is started once (``ray.init(num_cpus=N)``), its start-up timed apart.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.spec import resolve_ops


def run(out: Path, executor: str, workers: int, a: argparse.Namespace) -> dict:
    cfg = CampaignConfig(out, a.backends.split(","), resolve_ops(None), budget_seconds=a.budget, jobs=workers,
                         seed=a.seed, ops=tuple(int(x) for x in a.ops.split(":")), strategy=a.strategy,
                         executor=executor)
    c = Campaign(cfg)
    c.start_backends()
    spent = [0.0]
    record = c.record

    def timed(ex) -> None:
        t0 = time.perf_counter()
        record(ex)
        spent[0] += time.perf_counter() - t0

    c.record = timed
    t0 = time.perf_counter()
    progress = c.run()
    wall = time.perf_counter() - t0
    if executor == "ray":  # includes the coverage merge, which happens outside Campaign.record
        spent[0] = c.executor.record_seconds
    return {"tests": progress.tests, "wall": wall, "rate": progress.tests / wall,
            "record": spent[0] / max(1, progress.tests)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--budget", type=float, default=60.0)
    p.add_argument("--backends", default="ort")
    p.add_argument("--ops", default="1:10")
    p.add_argument("--strategy", default="isra")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--executors", default="local,ray")
    a = p.parse_args()
    workers = [int(w) for w in a.workers.split(",")]
    executors = a.executors.split(",")
    if "ray" in executors:
        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=max(workers), include_dashboard=False, log_to_driver=False)
        print(f"ray.init (a local instance, {max(workers)} CPUs): {time.perf_counter() - t0:.1f}s")
    results: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for executor in executors:
            for w in workers:
                r = run(Path(tmp) / f"{executor}-{w}", executor, w, a)
                results[(executor, w)] = r
                print(f"{executor:5} {w} worker(s): {r['tests']:5d} tests in {r['wall']:6.1f}s = {r['rate']:6.2f} "
                      f"tests/s; driver record {1000 * r['record']:.2f} ms/result "
                      f"(could absorb {1 / max(r['record'], 1e-9):,.0f} results/s)", flush=True)
    for w in workers:
        if ("local", w) in results and ("ray", w) in results:
            lo, ra = results[("local", w)]["rate"], results[("ray", w)]["rate"]
            print(f"{w} worker(s): ray {ra:.2f} vs local {lo:.2f} tests/s: overhead {100 * (1 - ra / lo):+.1f} %")
    for ex in executors:
        if (ex, 1) in results and (ex, 2) in results:
            print(f"{ex}: 2 workers / 1 worker = {results[(ex, 2)]['rate'] / results[(ex, 1)]['rate']:.2f}x")


if __name__ == "__main__":
    main()
