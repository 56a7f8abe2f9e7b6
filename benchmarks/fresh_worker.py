"""What a fresh worker costs, started by a new interpreter (spawn) or forked by a fork server (fork).

    python benchmarks/fresh_worker.py [--backends ort,tvm,openvino,inductor,iree] [--n 5] [--start spawn,fork]
                                      [--reduce BUNDLE ... [--reduce-budget 5m]]

Per backend that is installed and per start method (``WorkerPool(start=...)``, in the order given), N fresh
workers each run one tiny test (Add, Relu, Neg on float32; one variant) and end, as a crash's
confirmation or a reduction's last check does.  Printed: the wall seconds of the N runs and the CPU seconds
of every process they started (the workers and their tools; with fork, the server's own CPU after its start
too), the seconds the compiler's import, compile and run took inside them, and, for fork, what the server's
one-time start cost and what it preloaded (or why the backend spawns instead).

``--reduce BUNDLE ...``: ``dlcfuzz reduce`` of a copy of each bug bundle, once per start method
(``DLCFUZZ_WORKER_START``), with its wall and CPU seconds (the command and all it started) and its last
line.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import OK, Test
from dlcfuzz.backends.ort import full_profile
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen.isra import IsraGenerator
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.run.worker import START_METHODS, PhaseLimits, WorkerPool
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY

# the variant each backend compiles the test with (its first, where not named): a compiled one, not eager
VARIANT = {"ort": "all", "inductor": "inductor"}


def tiny_test() -> Test:
    lim = GenOptions(dtypes=("float32",))
    gen = IsraGenerator([REGISTRY[o] for o in ("Add", "Relu", "Neg")], lim, (3, 3),
                        full_profile(lim.opset, tuple(REGISTRY)))
    g = gen.generate(0)
    rng = np.random.default_rng(0)
    return Test(to_bytes(g), g.to_json(), {v.name: feed_array(rng, v) for v in g.inputs})


def children_cpu() -> float:
    """CPU seconds of every ended process this one has waited for, and of theirs."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def process_cpu(pid: int) -> float:
    """CPU seconds a live process has used itself (utime + stime from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def installed(backend: str) -> bool:
    try:
        return load_backend(backend).available()[0]
    except Exception:
        return False


def measure(backend: str, start: str, n: int, test: Test) -> dict:
    logs = tempfile.mkdtemp(prefix="fresh-worker-")
    pool = WorkerPool(PhaseLimits(), log_dir=Path(logs), start=start)
    row: dict = {"backend": backend, "start": start, "setup_wall": 0.0, "setup_cpu": 0.0, "how": "spawn"}
    try:
        if start == "fork":  # the server's one-time start, apart from the N workers
            t0 = time.perf_counter()
            server = pool._server(backend)
            row["setup_wall"] = time.perf_counter() - t0
            row["setup_cpu"] = process_cpu(server.proc.pid) if server is not None else 0.0
            row["how"] = pool.started_by.get(backend, "spawn")
        cpu0 = children_cpu()
        t0 = time.perf_counter()
        inside = 0.0
        variant = ""
        for _ in range(n):
            if not variant:  # asked of the first worker (a fresh one: it counts as one of the N)
                w = pool._new_worker(backend)
                names = [v for v, _ in w.variants]
                variant = VARIANT[backend] if VARIANT.get(backend) in names else names[0]
                got = w.execute(test, [variant])
                pool.release(w, keep=False)
            else:
                got = pool.run(backend, test, [variant], fresh=True)
            o = got[variant]
            if o.status != OK:
                raise SystemExit(f"{backend} ({start}): {o.status} in {o.phase}: {o.message[:300]}")
            inside += sum(o.seconds.values())
        row["wall"] = time.perf_counter() - t0
    finally:
        pool.close()  # the server ends: its own CPU and its children's are counted once it is waited for
    row["cpu"] = children_cpu() - cpu0 - row["setup_cpu"]
    row["inside"] = inside
    row["variant"] = variant
    shutil.rmtree(logs, ignore_errors=True)
    return row


def reduce_once(bundle: Path, start: str, budget: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / bundle.name
        shutil.copytree(bundle, copy, ignore=shutil.ignore_patterns("reduced", "reduction.json"))
        env = dict(os.environ, DLCFUZZ_WORKER_START=start)
        cpu0 = children_cpu()
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "dlcfuzz.cli", "reduce", "-v", "--budget", budget, str(copy)],
                              env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        cpu = children_cpu() - cpu0
        out = done.stdout + done.stderr
        last = [line for line in out.splitlines() if line.strip()][-1:] or [""]
        return {"start": start, "wall": wall, "cpu": cpu, "rc": done.returncode, "last": last[0][:200]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="ort,tvm,openvino,inductor,iree")
    p.add_argument("--n", type=int, default=5, help="fresh workers per backend and start method")
    p.add_argument("--start", default="spawn,fork", help=f"start methods, in order: {','.join(START_METHODS)}")
    p.add_argument("--reduce", type=Path, nargs="+", default=[], help="bug bundles to reduce with each start method")
    p.add_argument("--reduce-budget", default="5m")
    a = p.parse_args()
    starts = a.start.split(",")
    test = tiny_test()
    rows = []
    for backend in a.backends.split(","):
        if not installed(backend):
            print(f"{backend}: not installed, skipped")
            continue
        for start in starts:
            row = measure(backend, start, a.n, test)
            rows.append(row)
            print(f"{backend:9} {start:5} {a.n} fresh workers ({row['variant']}): wall {row['wall']:6.2f} s "
                  f"({row['wall'] / a.n:.2f}/worker), CPU {row['cpu']:6.2f} s ({row['cpu'] / a.n:.2f}/worker), "
                  f"compiler's own {row['inside']:.2f} s", flush=True)
            if start == "fork":
                print(f"{'':15} server start: wall {row['setup_wall']:.2f} s, CPU {row['setup_cpu']:.2f} s; "
                      f"{row['how']}", flush=True)
    if len(starts) > 1:
        print("\nper fresh worker, " + " -> ".join(starts) + ":")
        for backend in dict.fromkeys(r["backend"] for r in rows):
            mine = {r["start"]: r for r in rows if r["backend"] == backend}
            walls = " -> ".join(f"{mine[s]['wall'] / a.n:.2f}" for s in starts)
            cpus = " -> ".join(f"{mine[s]['cpu'] / a.n:.2f}" for s in starts)
            print(f"  {backend:9} wall {walls} s, CPU {cpus} s")
    for bundle in a.reduce:
        print(f"\ndlcfuzz reduce {bundle} (--budget {a.reduce_budget}):")
        for start in starts:
            r = reduce_once(bundle, start, a.reduce_budget)
            print(f"  {start:5} wall {r['wall']:6.1f} s, CPU {r['cpu']:6.1f} s, exit {r['rc']}; {r['last']}",
                  flush=True)


if __name__ == "__main__":
    main()
