"""Where a campaign's wall time goes: inside the compilers' own calls vs everything else.

    python benchmarks/campaign_overhead.py [--backends tvm,openvino,ort,inductor] [--budget 120] [--jobs 1]

Runs a real campaign in a temporary folder and prints, from its store, the share of wall time
spent outside the compilers' import/compile/run calls: generation, input synthesis and the
reference evaluator, oracles, the store, worker start-up and IPC.  Target: under 5 %.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dlcfuzz.cli import main as dlcfuzz
from dlcfuzz.run.store import StoreReader


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--backends", default="tvm,openvino,ort,inductor")
    p.add_argument("--budget", default="120")
    p.add_argument("--jobs", default="1")
    p.add_argument("--ops", default="1:10")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "campaign"
        t0 = time.perf_counter()
        dlcfuzz(["fuzz", "--backends", a.backends, "--budget", a.budget, "--jobs", a.jobs, "--ops", a.ops,
                 "--out", str(out)])
        wall = time.perf_counter() - t0
        store = StoreReader(out)
        n, test_s, gen, inp, comp, orc = store.time_split()
        store.close()
    jobs = int(a.jobs)
    capacity = wall * jobs  # worker-seconds available
    print(f"{n} tests in {wall:.1f}s wall ({n / wall:.2f} tests/s) with {jobs} job(s), backends {a.backends}")
    print(f"  inside the compilers' calls: {comp:.1f}s = {100 * comp / capacity:.1f}% of wall x jobs")
    print(f"  outside: {100 * (1 - comp / capacity):.1f}% -- generation {gen:.2f}s, inputs + reference {inp:.1f}s, "
          f"oracles + store {orc:.2f}s, start-up, IPC and idle {capacity - test_s:.1f}s + "
          f"{test_s - gen - inp - comp - orc:.1f}s")


if __name__ == "__main__":
    main()
