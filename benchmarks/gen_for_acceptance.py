"""The share of ``dlcfuzz gen --for BACKEND`` graphs that the backend itself takes: its ``supports(ops, graph)``
and the writer it reads (ONNX for the ONNX importers, the torch exporter for Inductor).  A profile that admits
only what was probed gives 100% for every backend.

    python benchmarks/gen_for_acceptance.py -n 100 --ops 10:10 [--opset 17] [--backends ort,tvm,openvino,inductor,iree]

Prints, per backend, the graphs taken, why the others were not, and how many operator types the graphs hold.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

from dlcfuzz.backends import load_backend
from dlcfuzz.cli import main as dlcfuzz
from dlcfuzz.ir import Graph

DEFAULT = ("ort", "tvm", "openvino", "inductor", "iree")


def refusal(backend: str, g: Graph) -> str | None:
    """Why the backend (or the writer it reads) cannot take the graph, or None."""
    b = load_backend(backend)
    if not b.supports({n.op for n in g.nodes}, g):
        if backend == "inductor":
            from dlcfuzz.export.torch import unsupported

            return unsupported(g) or "supports() is False"
        bad = sorted(op for op in {n.op for n in g.nodes} if not b.supports({op}))
        return f"supports() is False ({', '.join(bad) or 'a call of the graph'})"
    from dlcfuzz.export.onnx import to_bytes

    to_bytes(g)
    if backend == "inductor":
        from dlcfuzz.export.torch import to_torch_source

        to_torch_source(g)
    return None


def campaign_graphs(backend: str, n: int, ops: str, seed: int, opset: str) -> list[Graph]:
    """n graphs of the campaign's targeted generator for ``backend`` (``JointProfile(target, ORT)``)."""
    from dlcfuzz.gen.opsets import parse_opsets
    from dlcfuzz.run.campaign import CampaignConfig, campaign_generator
    from dlcfuzz.run.profile import JointProfile, find_profile
    from dlcfuzz.seeds import derive_seed
    from dlcfuzz.spec import REGISTRY

    lo, hi = (int(x) for x in ops.split(":"))
    profiles = [find_profile(b, load_backend(b).version()) for b in (backend, "ort")]
    cfg = CampaignConfig(Path(tempfile.mkdtemp()), [backend], list(REGISTRY.values()), budget_seconds=None,
                         max_tests=n, ops=(lo, hi), opsets=tuple(parse_opsets(opset, 7, 23)))
    gen = campaign_generator(cfg, None, JointProfile(*profiles))  # type: ignore[arg-type]
    return [gen.generate(derive_seed(seed, i)) for i in range(n)]


def measure(backend: str, n: int, ops: str, seed: int, opset: str = "17") -> tuple[int, Counter[str], int]:
    """(graphs taken, why the others were not, operator types) of n graphs from ``gen --for backend``; for
    Inductor, whose ``gen --for`` writes torch programs, the campaign's ONNX graphs targeted at it."""
    with tempfile.TemporaryDirectory() as tmp:
        dlcfuzz(["gen", "--for", backend, "-n", str(n), "--ops", ops, "--seed", str(seed), "--opset", opset,
                 "--out", tmp])
        graphs = [Graph.from_json(path.read_text()) for path in sorted(Path(tmp).glob("g*.json"))]
    if not graphs:  # gen --for inductor: torch-native programs, not graphs
        graphs = campaign_graphs(backend, n, ops, seed, opset)
    why: Counter[str] = Counter()
    taken = 0
    types: set[str] = set()
    for g in graphs:
        types |= {node.op for node in g.nodes}
        reason = refusal(backend, g)
        if reason is None:
            taken += 1
        else:
            why[reason.split(" (value")[0]] += 1
    return taken, why, len(types)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=100)
    p.add_argument("--ops", default="10:10")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opset", default="17", help="an opset, or a range such as 13-23 (the campaign's default)")
    p.add_argument("--backends", default=",".join(DEFAULT))
    args = p.parse_args()
    result = {}
    for backend in args.backends.split(","):
        taken, why, types = measure(backend, args.n, args.ops, args.seed, args.opset)
        result[backend] = {"taken": taken, "of": args.n, "operator_types": types, "why_not": dict(why.most_common(8))}
        print(f"{backend}: {taken}/{args.n} taken, {types} operator types; {dict(why.most_common(8))}", flush=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
