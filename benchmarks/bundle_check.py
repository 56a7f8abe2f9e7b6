"""Evidence for judging bug bundles by hand: each bundle's model (the reduced one where there is one)
on ONNX Runtime (no graph optimizations) and on ONNX's reference evaluator, and the bundle's own
``repro.py`` run standalone.

    PYTHONPATH=src python benchmarks/bundle_check.py CAMPAIGN [--backend iree]

Prints one block per bug: signature, title, operators of the checked model, what ORT and the
reference evaluator do with it (ok, or their error), the largest difference between ORT and the
reference, and the repro's exit code and first line (1: the bug reproduces).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

from dlcfuzz.run.store import StoreReader


def run_ort(model: Path, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray] | None, str]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    try:
        return ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"]).run(None, feeds), "ok"
    except Exception as e:
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"


def run_reference(model: Path, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray] | None, str]:
    from onnx.reference import ReferenceEvaluator

    try:
        return [np.asarray(o) for o in ReferenceEvaluator(onnx.load(model)).run(None, feeds)], "ok"
    except Exception as e:
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"


def largest_difference(a: list[np.ndarray], b: list[np.ndarray]) -> str:
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return f"shapes differ: {x.shape} vs {y.shape}"
        if x.size and x.dtype.kind in "fiub":
            fin = np.isfinite(x.astype(np.float64)) & np.isfinite(y.astype(np.float64))
            worst = max(worst, float(np.abs(x.astype(np.float64) - y.astype(np.float64))[fin].max(initial=0.0)))
    return f"{worst:.3g}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("campaign", type=Path)
    p.add_argument("--backend", default="iree")
    a = p.parse_args()
    store = StoreReader(a.campaign)
    rows = [(b["signature"], b["oracle"], b["variant"], b["hits"], b["title"], b["dir"])
            for b in sorted(store.bug_rows(), key=lambda b: b["first_test"]) if b["backend"] == a.backend]
    store.close()
    for sig, oracle, variant, hits, title, folder in rows:
        bundle = a.campaign / folder
        case = bundle / "reduced" if (bundle / "reduced" / "model.onnx").is_file() else bundle
        with np.load(case / "inputs.npz") as f:
            feeds = {k: f[k] for k in f.files}
        ops = [n.op_type for n in onnx.load(case / "model.onnx").graph.node]
        ort_out, ort_status = run_ort(case / "model.onnx", feeds)
        ref_out, ref_status = run_reference(case / "model.onnx", feeds)
        diff = largest_difference(ort_out, ref_out) if ort_out and ref_out else "-"
        repro = subprocess.run([sys.executable, str(case / "repro.py")], capture_output=True, text=True, timeout=300)
        first = (repro.stdout.strip().splitlines() or repro.stderr.strip().splitlines()[-1:] or [""])[0]
        meta = json.loads((bundle / "finding.json").read_text()) if (bundle / "finding.json").is_file() else {}
        print(f"{sig} {oracle}/{meta.get('kind', '?')} {variant} hits={hits} [{case.name}] ops={','.join(ops)}\n"
              f"  title: {title[:200]}\n  ORT: {ort_status} | reference: {ref_status} | max |ORT-ref|: {diff}\n"
              f"  repro.py: exit {repro.returncode}: {first[:200]}")


if __name__ == "__main__":
    main()
