"""GPU smoke test: every GPU variant on real hardware, and the numbers to set GPU tolerances from.

    PYTHONPATH=src python benchmarks/gpu_smoke.py [--backends tvm,ort,inductor] [--budget 120s] [--graphs 60]

1. Lists each backend's variants by device, and why a backend has none on cuda (a CPU-only build...).
2. Runs a short real campaign (``dlcfuzz fuzz --devices cpu,cuda``) and prints, from its store, the
   outcomes of every variant (ok / error / crash / timeout, unsupported apart) and the cross-device
   findings: a cuda variant's metamorphic findings, with the variant it was compared with.
3. Measures: ``--graphs`` generated graphs run through every variant (in workers, as a campaign
   does); for each cuda variant and the variant it is compared with (``compare_with``), the relative
   tolerance each float output would need (at the campaign's atol), as quantiles per dtype.  The GPU
   tolerances are to be set from these numbers.

Without a GPU it says so and exits 0 (nothing to smoke-test).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import OK, Test
from dlcfuzz.backends.devices import cuda_gpus, device_of
from dlcfuzz.cli import main as dlcfuzz
from dlcfuzz.oracle.compare import TOLERANCES
from dlcfuzz.run.store import StoreReader
from dlcfuzz.run.worker import PhaseLimits, WorkerDied, WorkerPool


def describe(pool: WorkerPool, backends: list[str]) -> dict[str, dict[str, dict]]:
    """backend -> variant -> options, for the backends that start; prints the variants by device."""
    found: dict[str, dict[str, dict]] = {}
    for name in backends:
        ok, why = load_backend(name).available()
        if not ok:
            print(f"  {name}: disabled: {why}")
            continue
        try:
            version, variants = pool.describe(name)
            notes = pool.device_notes(name)
        except WorkerDied as e:
            print(f"  {name}: worker does not start: {str(e).splitlines()[0]}")
            continue
        found[name] = dict(variants)
        by_device = defaultdict(list)
        for v, o in variants:
            by_device[device_of(o)].append(v + (f" (vs {o['compare_with']})" if o.get("compare_with") else ""))
        print(f"  {name} {version}: " + "; ".join(f"{d}: {', '.join(vs)}" for d, vs in by_device.items())
              + "".join(f"; no {d}: {why}" for d, why in notes.items()))
    return found


def campaign(backends: list[str], budget: str, out: Path) -> None:
    code = dlcfuzz(["fuzz", "--backends", ",".join(backends), "--devices", "cpu,cuda", "--budget", budget,
                    "--jobs", "1", "--reduce-budget", "0", "--out", str(out)])
    if code:
        print(f"the campaign failed (exit {code})")
        return
    store = StoreReader(out)
    rows = store.outcome_counts_per_variant()
    bugs = [(b["backend"], b["variant"], b["oracle"], b["kind"], b["title"], b["dir"])
            for b in sorted(store.bug_rows(), key=lambda b: (b["backend"], b["variant"]))]
    store.close()
    per: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for b, v, status, unsupported, n in rows:
        per[(b, v)]["unsupported" if unsupported else status] += n
    print("\nper-variant outcomes:")
    for (b, v), c in per.items():
        print(f"  {b}/{v}: " + ", ".join(f"{k} {n}" for k, n in c.most_common()))
    print("\ncross-device and GPU-only distinct bugs:")
    shown = 0
    for b, v, oracle, kind, title, folder in bugs:
        if "cuda" not in v and v != "tensorrt":
            continue
        path = Path(folder) if Path(folder).is_absolute() else out / folder
        info = json.loads((path / "finding.json").read_text()) if (path / "finding.json").exists() else {}
        other = f" vs {info['other']}" if info.get("other") else ""
        print(f"  {b}/{v}{other} [{oracle}/{kind}] {title}  ({folder}/repro.py)")
        shown += 1
    print(f"  ({shown} of {len(bugs)} distinct bugs)")


def measure(pool: WorkerPool, found: dict[str, dict[str, dict]], graphs: int) -> None:
    """Relative tolerance needed by each cuda variant against its compare_with partner, per dtype."""
    from dlcfuzz.backends.ort import full_profile
    from dlcfuzz.export.onnx import to_bytes
    from dlcfuzz.gen.isra import IsraGenerator
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.spec import REGISTRY
    from dlcfuzz.values import all_finite, synthesize

    limits = GenOptions()
    gen = IsraGenerator(list(REGISTRY.values()), limits, (1, 10), full_profile(limits.opset, tuple(REGISTRY)))
    needed: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for seed in range(graphs):
        g = gen.generate(seed)
        feeds = synthesize(g, np.random.default_rng(seed))
        test = Test(to_bytes(g), g.to_json(), feeds)
        ops = {n.op for n in g.nodes}
        for name, variants in found.items():
            pairs = {v: o["compare_with"] for v, o in variants.items()
                     if device_of(o) == "cuda" and o.get("compare_with") in variants}
            if not pairs or not load_backend(name).supports(ops, g):
                continue
            got = pool.run(name, test, sorted(set(pairs) | set(pairs.values())))
            for v, mate in pairs.items():
                a, b = got[v], got[mate]
                if a.status != OK or b.status != OK or not all_finite(b.outputs or []):
                    continue
                for x, y in zip(a.outputs or [], b.outputs or [], strict=False):
                    x, y = np.asarray(x), np.asarray(y)
                    if y.dtype.kind != "f" or x.shape != y.shape or not y.size:
                        continue
                    atol = TOLERANCES.get(y.dtype.name, TOLERANCES["float32"])[1]
                    diff = np.abs(x.astype(np.float64) - y) - atol
                    rel = np.where(diff > 0, diff / np.maximum(np.abs(y.astype(np.float64)), 1e-30), 0.0)
                    needed[(name, v, mate, y.dtype.name)].append(float(np.nanmax(rel)))
    print(f"\nrelative tolerance needed (at the campaign's atol), over {graphs} graphs; campaign rtol in brackets:")
    for (name, v, mate, dtype), xs in sorted(needed.items()):
        q = np.quantile(xs, [0.5, 0.9, 0.99, 1.0])
        print(f"  {name}/{v} vs {mate} {dtype} [{TOLERANCES.get(dtype, TOLERANCES['float32'])[0]:g}]: "
              f"n={len(xs)} median {q[0]:.2e} p90 {q[1]:.2e} p99 {q[2]:.2e} max {q[3]:.2e}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backends", default="tvm,ort,inductor")
    p.add_argument("--budget", default="120s", help="the campaign's budget")
    p.add_argument("--graphs", type=int, default=60, help="graphs for the tolerance measurement (0: none)")
    a = p.parse_args()
    gpus, why = cuda_gpus()
    if not gpus:
        print(f"no GPU here ({why}): nothing to smoke-test; the GPU variants are skipped")
        return 0
    print(f"GPUs: {', '.join(gpus)}\nvariants:")
    backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    pool = WorkerPool(PhaseLimits())
    try:
        found = describe(pool, backends)
        if not any(device_of(o) == "cuda" for vs in found.values() for o in vs.values()):
            print("no backend has a cuda variant here (see the reasons above)")
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            campaign(list(found), a.budget, Path(tmp) / "campaign")
        if a.graphs:
            measure(pool, found, a.graphs)
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
