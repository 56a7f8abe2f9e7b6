"""Measures which ONNX operators IREE's ONNX lowering handles: single-operator models of every
dlcfuzz operator (``--per-op`` models each, Isra-generated at ``--opset``, dtypes as a default
campaign draws them) through the ``iree`` backend's ``--variant`` in isolated workers.  An operator
is *lowered* when at least one of its models did not end in a decline (``oracle/unsupported.py``):
it compiled and ran, or failed in a way that is a finding (a real compiler error, a crash).

    PYTHONPATH=src python benchmarks/iree_profile.py [--per-op 3] [--write]

Prints one line per operator and the totals; ``--write`` stores the table with its provenance in
``src/dlcfuzz/data/iree_ops.json``, which ``IreeBackend.supports`` reads.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
import zlib
from importlib.metadata import version
from pathlib import Path

import numpy as np

from dlcfuzz.backends import Test
from dlcfuzz.backends.base import OK
from dlcfuzz.backends.ort import full_profile
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen import make_generator
from dlcfuzz.oracle.unsupported import is_unsupported
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.seeds import derive_seed
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import synthesize

OUT = Path(__file__).resolve().parents[1] / "src/dlcfuzz/data/iree_ops.json"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-op", type=int, default=3, help="single-operator models per operator")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--variant", default="O3-generic")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--write", action="store_true", help=f"store the table in {OUT.name}")
    a = p.parse_args()
    limits = GenOptions(opset=a.opset)
    profile = full_profile(a.opset, tuple(REGISTRY))
    pool = WorkerPool(PhaseLimits(compile=60.0, run=20.0))
    lowered: dict[str, str] = {}
    declined: dict[str, str] = {}
    start = time.perf_counter()
    try:
        for op, spec in sorted(REGISTRY.items()):
            try:
                gen = make_generator("isra", [spec], limits, (1, 1), profile)
            except ValueError:  # no dtype of it at this opset for the default target
                gen = None
            if gen is None or gen.unavailable:
                declined[op] = f"not generated at opset {a.opset}"
                print(f"{op:<28} -          {declined[op]}")
                continue
            statuses = []
            for i in range(a.per_op):
                seed = derive_seed(a.seed, zlib.crc32(op.encode()) * 100 + i)
                g = gen.generate(seed)
                test = Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(seed)))
                o = pool.run("iree", test, [a.variant])[a.variant]
                decline = o.status != OK and is_unsupported("iree", o.phase, o.error_type, o.message)
                statuses.append((o, decline))
            kept = [o for o, decline in statuses if not decline]
            if kept:
                lowered[op] = kept[0].status if kept[0].status != "error" else f"error in {kept[0].phase}"
                print(f"{op:<28} lowered    {lowered[op]}")
            else:
                o = statuses[0][0]
                declined[op] = f"{o.error_type}: {o.message.splitlines()[0][:160]}"
                print(f"{op:<28} declined   {declined[op]}")
    finally:
        pool.close()
    seconds = time.perf_counter() - start
    generated = len(lowered) + sum(not why.startswith("not generated") for why in declined.values())
    print(f"{len(lowered)} of {generated} operators generated at opset {a.opset} lowered "
          f"({a.per_op} models each, variant {a.variant}, {seconds:.0f}s)")
    if a.write:
        table = {
            "provenance": {
                "generated_by": f"PYTHONPATH=src python benchmarks/iree_profile.py --per-op {a.per_op} --write",
                "iree-base-compiler": version("iree-base-compiler"),
                "iree-base-runtime": version("iree-base-runtime"),
                "opset": a.opset, "variant": a.variant, "models_per_op": a.per_op, "seed": a.seed,
                "date": datetime.date.today().isoformat(), "machine": platform.machine(),
            },
            "lowered": sorted(lowered),
            "declined": dict(sorted(declined.items())),
        }
        OUT.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
