"""Generation throughput of dlcfuzz's Isra generator, and the same against NNSmith (in one run).

    python benchmarks/gen_throughput.py [--graphs 200] [--ops 1:200] [--peer-nodes 20,100] [--no-peer]

Prints graphs/s, operator insertions/s and the retry rate for the given op range on one core,
then dlcfuzz vs NNSmith at equal operator counts (NNSmith in its own venv, see nnsmith_peer.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dlcfuzz.backends.ort import full_profile
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen.isra import IsraGenerator
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY

ROOT = Path(__file__).resolve().parent.parent


def measure(op_range: tuple[int, int], graphs: int, seed: int = 1) -> dict:
    limits = GenOptions()
    gen = IsraGenerator(list(REGISTRY.values()), limits, op_range, full_profile(limits.opset, tuple(REGISTRY)))
    gen.generate(seed)  # warm caches (type domains, schemas)
    gen.stats.__init__()
    t_gen = t_onnx = 0.0
    for i in range(graphs):
        t0 = time.perf_counter()
        g = gen.generate(seed + i)
        t1 = time.perf_counter()
        to_bytes(g)
        t_onnx += time.perf_counter() - t1
        t_gen += t1 - t0
    st = gen.stats
    return {
        "graphs": graphs, "ops": f"{op_range[0]}:{op_range[1]}", "insertions": st.insertions,
        "graphs_per_s": graphs / t_gen, "insertions_per_s": st.insertions / t_gen,
        "with_onnx_graphs_per_s": graphs / (t_gen + t_onnx),
        "with_onnx_insertions_per_s": st.insertions / (t_gen + t_onnx),
        "retried_insertions_pct": 100 * st.retried_insertions / max(1, st.insertions),
        "zero_retry_insertions_pct": 100 * (1 - st.retried_insertions / max(1, st.insertions)),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--graphs", type=int, default=200)
    p.add_argument("--ops", default="1:200")
    p.add_argument("--peer-nodes", default="20,100", help="operator counts for the NNSmith comparison")
    p.add_argument("--peer-graphs", type=int, default=10)
    p.add_argument("--no-peer", action="store_true")
    a = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    lo, hi = (int(x) for x in a.ops.split(":"))
    r = measure((lo, hi), a.graphs)
    print(f"dlcfuzz isra, --ops {a.ops}, {a.graphs} graphs, one core:")
    print(f"  {r['graphs_per_s']:.1f} graphs/s, {r['insertions_per_s']:.0f} operator insertions/s "
          f"({r['with_onnx_insertions_per_s']:.0f}/s including ONNX serialization)")
    print(f"  insertions needing a retry: {r['retried_insertions_pct']:.3f} % "
          f"(zero retries on {r['zero_retry_insertions_pct']:.3f} %)")
    results = {"dlcfuzz": r, "peer": []}
    if not a.no_peer:
        sys.path.insert(0, str(Path(__file__).parent))
        from nnsmith_peer import run_nnsmith

        for n in (int(x) for x in a.peer_nodes.split(",")):
            ours = measure((n, n), max(a.peer_graphs, 20))
            try:
                peer = run_nnsmith(n, a.peer_graphs, 1, ROOT / "bench-work")
            except RuntimeError as e:
                print(f"  NNSmith unavailable: {e}")
                break
            gen_ratio = ours["graphs_per_s"] / max(peer["graphs_per_s"], 1e-12)
            onnx_ratio = ours["with_onnx_graphs_per_s"] / max(peer["graphs_per_s_with_materialize"], 1e-12)
            print(f"{n}-operator graphs ({peer['graphs_ok']} NNSmith graphs ok, {peer['graphs_failed']} failed):")
            print(f"  generation only: dlcfuzz {ours['graphs_per_s']:.1f} vs NNSmith {peer['graphs_per_s']:.3f} "
                  f"graphs/s -> {gen_ratio:.0f}x")
            print(f"  generation + ONNX model: dlcfuzz {ours['with_onnx_graphs_per_s']:.1f} vs NNSmith "
                  f"{peer['graphs_per_s_with_materialize']:.3f} graphs/s -> {onnx_ratio:.0f}x")
            ratio = onnx_ratio
            results["peer"].append({"nodes": n, "dlcfuzz": ours, "nnsmith": peer, "graphs_per_s_ratio": ratio})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
