"""``dlcfuzz metrics``: Isra's coverage metrics and GenCoG's diversity of a folder of ONNX models."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dlcfuzz.cli.display import progress
from dlcfuzz.cli.options import UsageError, resolve_op_set, split_names


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("metrics", help="Isra's coverage metrics and GenCoG's diversity of a folder of ONNX models")
    m.add_argument("dir")
    m.add_argument("--op-set", help="operator corpus: comma-separated, or @file (default: all specs)")
    m.add_argument("--opset", type=int, default=17, help="opset whose schemas define allowed indegrees")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=cmd_metrics)


def cmd_metrics(args: argparse.Namespace) -> int:
    from dlcfuzz.metrics import DIVERSITY, GRAPH_METRICS, OP_METRICS, ModelError, OpInfo, compute, load_model, op_nodes
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.solve.space import call_space, indegrees

    specs = resolve_op_set(split_names(args.op_set) if args.op_set else None)
    folder = Path(args.dir)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder of ONNX models")
    files = sorted(folder.rglob("*.onnx"))
    if not files:
        raise UsageError(f"no .onnx files under {folder}")
    limits = GenOptions(opset=args.opset)
    # the metrics count ONNX operators in ONNX files: a composite operator (spec/sequence.py) is written as
    # several, which its name never matches, so it is no corpus entry
    corpus = {s.op: OpInfo(indegrees(s, args.opset), call_space(s, limits)) for s in specs if s.composite is None}
    try:
        graphs = [op_nodes(load_model(f)) for f in progress(files, "reading", len(files))]
    except ModelError as e:
        raise UsageError(str(e)) from None
    result = compute(graphs, corpus)
    result["models"] = len(files)
    result["corpus_size"] = len(corpus)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{len(files)} models, operator corpus of {len(corpus)}")
        for k in (*GRAPH_METRICS, *OP_METRICS, *DIVERSITY):
            pct = k in ("OTC", "IDC", "SEC", "DEC")
            print(f"  {k:<17} {100 * result[k]:.2f} %" if pct else f"  {k:<17} {result[k]:.4f}")
    return 0
