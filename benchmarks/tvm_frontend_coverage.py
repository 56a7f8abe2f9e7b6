"""Statement coverage of TVM's Relax ONNX frontend (tvm/relax/frontend/onnx/onnx_frontend.py) reached by
importing N generated models, per generation strategy, with and without targeting TVM's support profile.

Measured on import alone, as ``migrate --measure-coverage`` does: coverage.py inside the TVM worker
around the frontend's import of each model.  Issue 14's bar: 300 models of 10 operators generated for
TVM reach at least 79 % of the file's statements (twice NNSmith's 39.7 %).

    python benchmarks/tvm_frontend_coverage.py [-n 300] [--ops 10] [--arms isra,isra@tvm,guided@tvm]

An arm is STRATEGY or STRATEGY@tvm (generated for TVM, from its cached or packaged support profile),
optionally with /OPSET1+OPSET2... (the models split evenly among those opsets; default 17).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import OK, Test
from dlcfuzz.backends.ort import full_profile
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen import make_generator
from dlcfuzz.gen.guided import Coverage
from dlcfuzz.run.profile import JointProfile, find_profile
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.seeds import derive_seed
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import synthesize

FILE = "tvm/relax/frontend/onnx/onnx_frontend.py"


def statements() -> set[int]:
    """The executable statements of the frontend file, as coverage.py counts them."""
    import coverage
    import tvm

    path = Path(tvm.__file__).parent / "relax/frontend/onnx/onnx_frontend.py"
    _, stmts, _, _, _ = coverage.Coverage(data_file=None).analysis2(str(path))
    return set(stmts)


def missing_by_function(covered: set[int], total: set[int], top: int = 80) -> list[tuple[str, int]]:
    """The uncovered statements grouped by the class and function that hold them, largest first."""
    import ast

    import tvm

    path = Path(tvm.__file__).parent / "relax/frontend/onnx/onnx_frontend.py"
    owner: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef)):
                name = f"{prefix}{child.name}"
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    owner[line] = name
                visit(child, name + ".")

    visit(ast.parse(path.read_text()), "")
    counts: dict[str, int] = {}
    for line in total - covered:
        key = owner.get(line, "<module>")
        counts[key] = counts.get(key, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])[:top]


def arm(name: str, n: int, ops: int, pool: WorkerPool, variant: str) -> dict:
    name, _, opsets = name.partition("/")
    strategy, _, target = name.partition("@")
    specs = list(REGISTRY.values())
    versions = [int(o) for o in opsets.split("+")] if opsets else [17]
    admit = None
    if target:
        got = [find_profile(b, load_backend(b).version()) for b in (target, "ort")]
        if None in got:
            raise SystemExit(f"no support profile for {target} or ort: run dlcfuzz probe --backends {target},ort")
        admit = JointProfile(*got)
    coverage = Coverage() if strategy != "isra" else None
    gens = [make_generator(strategy, specs, GenOptions(opset=v), (ops, ops),
                           full_profile(v, tuple(s.op for s in specs)), coverage, admit=admit) for v in versions]
    covered: set[int] = set()
    imported = ran = 0
    t0 = time.perf_counter()
    for i in range(n):
        g = gens[i % len(gens)].generate(derive_seed(0, i))
        test = Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(i), 0))
        o = pool.run("tvm", test, [variant])[variant]
        imported += o.phase != "import"
        ran += o.status == OK
        covered |= {int(x.rsplit(":", 1)[1]) for x in o.covered if x.startswith(FILE + ":")}
    return {"covered": covered, "imported": imported, "ran": ran, "seconds": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--ops", type=int, default=10)
    ap.add_argument("--arms", default="isra,isra@tvm,guided@tvm")
    ap.add_argument("--missing", action="store_true", help="also list the largest uncovered functions per arm")
    ap.add_argument("--save", type=Path, help="write each arm's uncovered statement lines to this JSON file")
    args = ap.parse_args()
    total = statements()
    print(f"{FILE}: {len(total)} statements; {args.n} models of {args.ops} operators per arm")
    print(f"{'arm':<16} {'imported':>9} {'ran':>6} {'statements':>11} {'coverage':>9} {'seconds':>8}")
    uncovered: dict[str, list[int]] = {}
    for name in args.arms.split(","):
        # a fresh worker per arm: the frontend module's own statements run at its first import only
        pool = WorkerPool(PhaseLimits(), args.n + 1, Path(tempfile.mkdtemp()), frontend_coverage=True)
        try:
            variant = pool.describe("tvm")[1][0][0]
            r = arm(name, args.n, args.ops, pool, variant)
            hit = len(r["covered"] & total)
            print(f"{name:<16} {r['imported']:>9} {r['ran']:>6} {hit:>11} {100 * hit / len(total):>8.1f}% "
                  f"{r['seconds']:>8.0f}", flush=True)
            uncovered[name] = sorted(total - r["covered"])
            if args.missing:
                for fn, n in missing_by_function(r["covered"], total):
                    print(f"    {n:>4} uncovered in {fn}")
        finally:
            pool.close()
    if args.save:
        args.save.write_text(json.dumps(uncovered))


if __name__ == "__main__":
    main()
