"""Validity, speed, Isra's metrics and GenCoG's diversity of every generation strategy, and of
NNSmith, at equal vertex count over one shared operator set, in one run.

    python benchmarks/diversity.py [--graphs 100] [--nodes 20] [--no-nnsmith] [--curve-graphs 200]

1. NNSmith (PyPI, in its own venv under bench-work/, see nnsmith_peer.py) generates ``--graphs``
   models of ``--nodes`` abstract operators; its exporter adds helper nodes, so its ONNX graphs
   are larger.  The shared operator set is what it produced that dlcfuzz has a spec for, and
   the graph size is NNSmith's mean number of operators from that set (with ``--no-nnsmith``:
   all our operators and ``--nodes``).
2. Each dlcfuzz strategy (isra, hirgen, gencog, guided, declgen, randoop) generates as many
   graphs of that size over the shared set (so the same number of vertices; Randoop may fall
   short of the size within its attempt budget), timed; every graph is checked with the ONNX
   checker and ONNX Runtime (validity); the metrics are computed over the valid graphs with
   the same code as ``dlcfuzz metrics``.
3. DeclGen's validity as graphs grow (1, 5, 10, 20 operators, all operators).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import onnx

from dlcfuzz.backends.ort import full_profile, model_error
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen import make_generator
from dlcfuzz.metrics import DIVERSITY, GRAPH_METRICS, OP_METRICS, OpInfo, compute, load_model, op_nodes
from dlcfuzz.seeds import derive_seed
from dlcfuzz.solve import GenOptions
from dlcfuzz.solve.space import call_space, indegrees
from dlcfuzz.spec import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
STRATEGIES = ("isra", "hirgen", "gencog", "guided", "declgen", "randoop")
LIMITS = GenOptions()


def measure(folder: Path, ops: list[str]) -> dict[str, float]:
    corpus = {op: OpInfo(indegrees(REGISTRY[op], 17), call_space(REGISTRY[op], LIMITS)) for op in ops}
    return compute((op_nodes(load_model(f)) for f in sorted(folder.rglob("*.onnx"))), corpus)


def run_strategy(strategy: str, ops: list[str], size: int, graphs: int, out: Path) -> dict[str, float]:
    """Generates ``graphs`` graphs of ``size`` operators; writes the valid ones to ``out``."""
    specs = [REGISTRY[o] for o in ops]
    gen = make_generator(strategy, specs, LIMITS, (size, size), full_profile(17, tuple(ops)), valid=model_error)
    out.mkdir(parents=True)
    seconds, valid, vertices, reasons = 0.0, 0, 0, []
    for i in range(graphs):
        t0 = time.perf_counter()
        g = gen.generate(derive_seed(1, i))
        seconds += time.perf_counter() - t0
        vertices += len(g.nodes)
        # DeclGen's graphs were checked in a child process already (the ONNX checker segfaults on
        # some invalid graphs); the others are checked here again, on other inputs
        err = (g.meta["invalid_reason"] or "invalid") if strategy == "declgen" and not g.meta["valid"] else (
            None if strategy == "declgen" else model_error(g, seed=i))
        if err is None:
            valid += 1
            (out / f"g{i:05d}.onnx").write_bytes(to_bytes(g))
        elif strategy != "declgen":
            reasons.append(f"graph {i}: {err[:160]}")
    for r in reasons[:3]:
        print(f"  {strategy} invalid {r}", file=sys.stderr)
    row = {"validity": valid / graphs, "seconds": seconds, "vertices": vertices}
    return row | (measure(out, ops) if valid else {})


def declgen_curve(sizes: list[int], graphs: int) -> dict[int, float]:
    specs = [s for s in REGISTRY.values() if s.since <= LIMITS.opset]
    prof = full_profile(LIMITS.opset, tuple(REGISTRY))
    curve = {}
    for n in sizes:
        gen = make_generator("declgen", specs, LIMITS, (n, n), prof, valid=model_error)
        curve[n] = sum(bool(gen.generate(derive_seed(2, i)).meta["valid"]) for i in range(graphs)) / graphs
    return curve


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", type=int, default=100)
    p.add_argument("--nodes", type=int, default=20, help="NNSmith's abstract operators per graph")
    p.add_argument("--no-nnsmith", action="store_true", help="skip the peer (all our operators, --nodes each)")
    p.add_argument("--curve-graphs", type=int, default=200, help="graphs per size for DeclGen's validity curve")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows: dict[str, dict[str, float]] = {}
        if a.no_nnsmith:
            ops = sorted(s.op for s in REGISTRY.values() if s.since <= LIMITS.opset)
            size = a.nodes
        else:
            sys.path.insert(0, str(Path(__file__).parent))
            from nnsmith_peer import run_nnsmith

            theirs = Path(tmp, "nnsmith")
            t0 = time.perf_counter()
            info = run_nnsmith(a.nodes, a.graphs, 1, ROOT / "bench-work", save=theirs)
            seconds = time.perf_counter() - t0
            seen = {n.op_type for f in theirs.rglob("*.onnx") for n in onnx.load(str(f)).graph.node}
            ops = sorted(seen & set(REGISTRY))
            saved = len(list(theirs.rglob("*.onnx")))
            rows["NNSmith"] = {"validity": saved / a.graphs, "seconds": info.get("gen_seconds", seconds),
                               "vertices": 0} | measure(theirs, ops)
            size = max(1, round(rows["NNSmith"]["NOO"]))
            rows["NNSmith"]["vertices"] = round(rows["NNSmith"]["NOO"] * saved)
            print(f"NNSmith-only operators (not measured): {sorted(seen - set(REGISTRY))}")
        print(f"shared operator set: {len(ops)} operators; {a.graphs} graphs of {size} operators per strategy")
        for s in STRATEGIES:
            rows[s] = run_strategy(s, ops, size, a.graphs, Path(tmp, s))
            print(f"  {s}: done in {rows[s]['seconds']:.1f}s", file=sys.stderr)

    cols = list(rows)
    print(f"\n{'metric':<17}" + "".join(f"{c:>11}" for c in cols))
    for k in ("validity", "seconds", "vertices", *GRAPH_METRICS, *OP_METRICS, *DIVERSITY):
        print(f"{k:<17}" + "".join(f"{rows[c].get(k, float('nan')):>11.4f}" for c in cols))
    if "NNSmith" in rows:
        ref = rows["NNSmith"]
        best = max(STRATEGIES, key=lambda s: rows[s].get("vertex_diversity", 0.0))
        for k in DIVERSITY:
            print(f"{k} vs NNSmith: " + ", ".join(
                f"{s} {rows[s].get(k, 0.0) / ref[k]:.2f}x" for s in STRATEGIES if ref.get(k)))
        print(f"best strategy by vertex diversity: {best}")
    curve = declgen_curve([1, 5, 10, 20], a.curve_graphs)
    print("\nDeclGen validity by graph size: " + ", ".join(f"{n} ops {100 * v:.1f}%" for n, v in curve.items()))


if __name__ == "__main__":
    main()
