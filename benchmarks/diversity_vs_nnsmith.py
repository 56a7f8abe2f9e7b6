"""Coverage and diversity of dlcfuzz's Isra graphs vs NNSmith's, at equal size, in one run.

    python benchmarks/diversity_vs_nnsmith.py [--graphs 100] [--nodes 20]

NNSmith generates ``--graphs`` models of ``--nodes`` abstract operators (its exporter adds
helper nodes, so its ONNX graphs are larger); dlcfuzz then generates as many graphs with the
same mean number of operators, over the operators both tools produce; both folders are measured
with `dlcfuzz metrics` over that common corpus, and the ratios printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import onnx

from dlcfuzz.cli import main as dlcfuzz
from dlcfuzz.metrics import DIVERSITY, GRAPH_METRICS, OP_METRICS, OpInfo, compute, load_model, op_nodes
from dlcfuzz.solve import Limits
from dlcfuzz.solve.space import call_space, indegrees
from dlcfuzz.spec import REGISTRY

ROOT = Path(__file__).resolve().parent.parent


def measure(folder: Path, ops: list[str]) -> dict[str, float]:
    corpus = {op: OpInfo(indegrees(REGISTRY[op], 17), call_space(REGISTRY[op], Limits())) for op in ops}
    return compute((op_nodes(load_model(f)) for f in sorted(folder.rglob("*.onnx"))), corpus)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--graphs", type=int, default=100)
    p.add_argument("--nodes", type=int, default=20)
    a = p.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from nnsmith_peer import run_nnsmith

    with tempfile.TemporaryDirectory() as tmp:
        theirs, ours = Path(tmp, "nnsmith"), Path(tmp, "dlcfuzz")
        run_nnsmith(a.nodes, a.graphs, 1, ROOT / "bench-work", save=theirs)
        seen = {n.op_type for f in theirs.rglob("*.onnx") for n in onnx.load(str(f)).graph.node}
        common = sorted(seen & set(REGISTRY))
        m_theirs = measure(theirs, common)
        size = round(m_theirs["NOO"])
        dlcfuzz(["gen", "-n", str(a.graphs), "--ops", f"{size}:{size}", "--seed", "1", "--out", str(ours),
                 "--op-set", ",".join(common)])
        m_ours = measure(ours, common)
    print(f"common operator corpus: {len(common)} operators; NNSmith-only: {sorted(seen - set(REGISTRY))}")
    print(f"{'metric':<17} {'dlcfuzz':>10} {'NNSmith':>10} {'ratio':>7}")
    for k in (*GRAPH_METRICS, *OP_METRICS, *DIVERSITY):
        r = m_ours[k] / m_theirs[k] if m_theirs[k] else float("inf")
        print(f"{k:<17} {m_ours[k]:>10.4f} {m_theirs[k]:>10.4f} {r:>6.2f}x")


if __name__ == "__main__":
    main()
