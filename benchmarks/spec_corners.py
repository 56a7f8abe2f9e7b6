"""Every spec at its degenerate corners, against ONNX Runtime and onnx's reference evaluator: the
solver is biased through its GenOptions (rank 0; rank <= 1 with size-1 dims; size-1 dims at any rank;
one element in all), which is as far as the GenOptions reach (no size-0 dims, no attribute extremes).

    PYTHONPATH=src python benchmarks/spec_corners.py [--per-op 5] [--ops A,B] [--corners rank0,dim1]

Per corner and operator: graphs generated, graphs the ONNX checker (full) rejects (a spec bug),
graphs ORT rejects although the checker accepts them (ORT's limit, or a model outside the operator
text: read the text), graphs where ORT and the reference disagree or only the reference fails ("[refused]": a
``backends/reference.py`` rule already takes ORT as the baseline there); each finding is listed
with its node's attributes and input shapes.  ORT runs without graph optimizations, both in worker processes.
"""

from __future__ import annotations

import argparse
import time
import zlib
from collections import Counter

import numpy as np

from dlcfuzz.backends.base import OK, Test
from dlcfuzz.backends.ort import full_profile
from dlcfuzz.backends.reference import ReferenceBackend
from dlcfuzz.export.onnx import checker_error, to_onnx
from dlcfuzz.gen.isra import IsraGenerator
from dlcfuzz.oracle.compare import compare
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.seeds import derive_seed
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import synthesize

CORNERS: dict[str, dict] = {
    "rank0": {"max_rank": 0},
    "rank1-dim1": {"max_rank": 1, "max_dim": 1},
    "dim1": {"max_dim": 1},
    "numel1": {"max_dim": 1, "max_numel": 1},
}
LIMITS = PhaseLimits(start=180, import_=30, compile=60, run=20, memory_mb=4096)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-op", type=int, default=5)
    p.add_argument("--ops", default="")
    p.add_argument("--corners", default=",".join(CORNERS))
    p.add_argument("--opset", type=int, default=17)
    a = p.parse_args()
    names = a.ops.split(",") if a.ops else sorted(REGISTRY)
    profile = full_profile(a.opset, tuple(REGISTRY))
    pool = WorkerPool(LIMITS, recycle=400)
    tot: Counter = Counter()
    findings: list[str] = []
    t0 = time.perf_counter()
    try:
        for corner in a.corners.split(","):
            limits = GenOptions(opset=a.opset, **CORNERS[corner])
            for op in names:
                try:
                    gen = IsraGenerator([REGISTRY[op]], limits, (1, 1), profile)
                except ValueError:
                    continue
                for i in range(a.per_op):
                    seed = derive_seed(a.opset, zlib.crc32(f"{corner}/{op}".encode()) * 1000 + i)
                    try:
                        g = gen.generate(seed)
                    except Exception:  # the corner leaves this spec no call (counted, not a finding)
                        tot["no call"] += 1
                        break
                    node = next((n for n in g.nodes if n.op == op), None)
                    if node is None:
                        tot["no call"] += 1
                        break
                    tot["graphs"] += 1
                    model = to_onnx(g)
                    trusted = "" if ReferenceBackend().supports({n.op for n in g.nodes}, g) else " [refused]"
                    attrs = {k: v for k, v in node.attrs.items() if not isinstance(v, np.ndarray)}
                    shapes = [g.values[x].type.shape if x else None for x in node.inputs]
                    where = f"{corner} {op}{trusted}: {attrs} {shapes}"
                    if (err := checker_error(model)) is not None:
                        tot["checker rejects"] += 1
                        findings.append(f"CHECKER {where}: {err[:150]}")
                        continue
                    test = Test(model.SerializeToString(), g.to_json(), synthesize(g, np.random.default_rng(seed)))
                    ort = pool.run("ort", test, ["disable_all"])["disable_all"]
                    ref = pool.run("reference", test, ["default"])["default"]
                    if ort.status != OK:
                        tot["ORT rejects"] += 1
                        findings.append(f"ORT-REJECTS {where}: {ort.message.strip()[:150]}")
                    elif ref.status != OK:
                        tot["reference fails"] += 1
                        findings.append(f"REF-FAILS {where}: {ref.error_type}: {ref.message.strip()[:150]}")
                    elif (m := compare(ort.outputs, ref.outputs)) is not None:
                        tot["ORT != reference"] += 1
                        findings.append(f"DISAGREE {where}: {m.detail}")
    finally:
        pool.close()
    for f in findings:
        print(f)
    print(f"\n{dict(tot)}  ({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
