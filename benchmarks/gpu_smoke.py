"""GPU smoke test: every GPU variant on real hardware, and the numbers to set GPU tolerances from.

    PYTHONPATH=src python benchmarks/gpu_smoke.py [--backends tvm,ort,inductor] [--budget 120s]
        [--program-budget 90s] [--graphs 60] [--measure-seconds 120] [--jobs 4] [--keep DIR]

1. Lists each backend's variants by device, and why a backend has none on cuda (a CPU-only build...).
2. Runs a short real campaign of ONNX graphs (``dlcfuzz fuzz --devices cpu,cuda``) and prints, from
   its store, the outcomes of every variant (ok / error / crash / timeout, unsupported apart) and the
   cross-device findings: a cuda variant's metamorphic findings, with the variant it was compared
   with; each one's ``repro.py`` is run here, and whether it reproduces is printed.
3. The same for torch-native programs (``dlcfuzz fuzz --backends inductor --devices cpu,cuda``): the
   ``inductor-cuda`` variants compile each program with Triton, judged against eager on the GPU.
4. Measures: ``--graphs`` generated graphs (at most ``--measure-seconds``) run through every variant
   (in workers, as a campaign does): the share of the modules that eager torch runs on the CPU (the
   exporter takes them) that also run on ``cuda-eager``, and, for each cuda variant and the variant
   it is compared with (``compare_with``), the relative tolerance each float output would need (at
   the campaign's atol), as quantiles per dtype.  The GPU tolerances are set from these numbers.

Without a GPU it says so and exits 0 (nothing to smoke-test).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import OK, Test
from dlcfuzz.backends.devices import cuda_gpus, device_of
from dlcfuzz.cli import main as dlcfuzz
from dlcfuzz.oracle.compare import TOLERANCES
from dlcfuzz.run.store import StoreReader
from dlcfuzz.run.worker import PhaseLimits, WorkerDied, WorkerPool


def describe(pool: WorkerPool, backends: list[str], versions: dict[str, str] | None = None
             ) -> dict[str, dict[str, dict]]:
    """backend -> variant -> options, for the backends that start (and their ``versions``); prints the
    variants by device."""
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
        if versions is not None:
            versions[name] = version
        by_device = defaultdict(list)
        for v, o in variants:
            by_device[device_of(o)].append(v + (f" (vs {o['compare_with']})" if o.get("compare_with") else ""))
        print(f"  {name} {version}: " + "; ".join(f"{d}: {', '.join(vs)}" for d, vs in by_device.items())
              + "".join(f"; no {d}: {why}" for d, why in notes.items()))
    return found


def campaign(backends: list[str], budget: str, jobs: int, out: Path, repros: int) -> None:
    """A short campaign on every device; per-variant outcomes, the GPU's distinct bugs, their repros."""
    code = dlcfuzz(["fuzz", "--backends", ",".join(backends), "--devices", "cpu,cuda", "--budget", budget,
                    "--jobs", str(jobs), "--reduce-budget", "0", "--out", str(out)])
    if code:
        print(f"the campaign failed (exit {code})")
        return
    store = StoreReader(out)
    rows = store.outcome_counts_per_variant()
    bugs = [(b["backend"], b["variant"], b["oracle"], b["kind"], b["category"],
             b["title"], b["dir"]) for b in sorted(store.bug_rows(), key=lambda b: (b["backend"], b["variant"]))]
    store.close()
    per: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for b, v, status, unsupported, n in rows:
        per[(b, v)]["unsupported" if unsupported else status] += n
    print("\nper-variant outcomes:")
    for (b, v), c in per.items():
        print(f"  {b}/{v}: " + ", ".join(f"{k} {n}" for k, n in c.most_common()))
    print("\ncross-device and GPU-only distinct bugs, each repro.py run here:")
    shown, tally = 0, Counter()
    for b, v, oracle, kind, category, title, folder in bugs:
        if "cuda" not in v and v != "tensorrt":
            continue
        path = Path(folder) if Path(folder).is_absolute() else out / folder
        info = json.loads((path / "finding.json").read_text()) if (path / "finding.json").exists() else {}
        other = f" vs {info['other']}" if info.get("other") else ""
        print(f"  {b}/{v}{other} [{oracle}/{kind}/{category}] {title[:160]}  ({folder})")
        if shown < repros and (path / "repro.py").exists():
            verdict = run_repro(path)
            tally[verdict.split(":")[0]] += 1
            print(f"      repro.py: {verdict}")
        shown += 1
    print(f"  ({shown} of {len(bugs)} distinct bugs on the GPU; repro.py: "
          + (", ".join(f"{k} {n}" for k, n in tally.items()) or "none run") + ")")


def run_repro(folder: Path, timeout: int = 120) -> str:
    """'reproduced: ...' (exit 1), 'not reproduced: ...' (exit 0) or what else the bundle's repro.py did."""
    try:
        p = subprocess.run([sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timeout: still running after {timeout}s"
    last = (p.stdout.strip().splitlines() or p.stderr.strip().splitlines() or [""])[-1][:200]
    if p.returncode == 1:
        return f"reproduced: {last}"
    if p.returncode == 0:
        return f"not reproduced: {last}"
    return f"exit {p.returncode}: {last}"


def measure(found: dict[str, dict[str, dict]], graphs: int, seconds: float, threads: int) -> None:
    """The share of CPU-eager-run modules that cuda-eager runs, and the relative tolerance needed by each
    cuda variant against its compare_with partner, per dtype."""
    from dlcfuzz.backends.ort import full_profile
    from dlcfuzz.export.onnx import to_bytes
    from dlcfuzz.gen.isra import IsraGenerator
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.spec import REGISTRY
    from dlcfuzz.values import all_finite, synthesize

    limits = GenOptions()
    gen = IsraGenerator(list(REGISTRY.values()), limits, (1, 10), full_profile(limits.opset, tuple(REGISTRY)))
    needed: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    worst_abs: dict[tuple[str, str, str, str], float] = defaultdict(float)
    plain: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    # (backend, variant, partner) -> [partner ran, both ran]; and what the variant said where it did not
    ran: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    failed: dict[tuple[str, str], Counter] = defaultdict(Counter)
    deadline, count, lock, local = time.monotonic() + seconds, Counter(), threading.Lock(), threading.local()
    pools: list[WorkerPool] = []

    def one(seed: int) -> None:
        """One graph through every cuda variant and its partner, in this thread's own workers."""
        if time.monotonic() > deadline:
            return
        if not hasattr(local, "pool"):
            local.pool = WorkerPool(PhaseLimits())
            with lock:
                pools.append(local.pool)
        pool = local.pool
        with lock:
            g = gen.generate(seed)
            count["graphs"] += 1
        feeds = synthesize(g, np.random.default_rng(seed))
        test = Test(to_bytes(g), g.to_json(), feeds)
        ops = {n.op for n in g.nodes}
        for name, variants in found.items():
            pairs = {v: o["compare_with"] for v, o in variants.items()
                     if device_of(o) == "cuda" and o.get("compare_with") in variants}
            if not pairs or not load_backend(name).supports(ops, g):
                continue
            try:
                got = pool.run(name, test, sorted(set(pairs) | set(pairs.values())))
            except WorkerDied as e:
                with lock:
                    failed[(name, "worker")][str(e).splitlines()[0][:80]] += 1
                continue
            with lock:
                record(name, got, pairs)

    def record(name: str, got: dict, pairs: dict[str, str]) -> None:
        """Counts what ran, and the differences of the float outputs (under the lock)."""
        for v, mate in pairs.items():
            a, b = got[v], got[mate]
            if b.status == OK:
                ran[(name, v, mate)][0] += 1
                if a.status == OK:
                    ran[(name, v, mate)][1] += 1
                else:
                    first = (a.message or "").strip().splitlines()[:1]
                    failed[(name, v)][f"{a.status} {a.error_type}: {first[0][:90] if first else ''}"] += 1
            if a.status != OK or b.status != OK or not all_finite(b.outputs or []):
                continue
            for x, y in zip(a.outputs or [], b.outputs or [], strict=False):
                x, y = np.asarray(x), np.asarray(y)
                if y.dtype.kind != "f" or x.shape != y.shape or not y.size:
                    continue
                atol = TOLERANCES.get(y.dtype.name, TOLERANCES["float32"])[1]
                gap = np.abs(x.astype(np.float64) - y)
                finite = np.isfinite(gap)
                diff = np.where(finite, gap, 0.0) - atol
                rel = np.where(diff > 0, diff / np.maximum(np.abs(y.astype(np.float64)), 1e-30), 0.0)
                needed[(name, v, mate, y.dtype.name)].append(float(np.nanmax(rel)))
                key = (name, v, mate, y.dtype.name)
                worst_abs[key] = max(worst_abs[key], float(gap[finite].max(initial=0.0)))
                # the difference against the value's size, with atol as the size's floor
                scale = np.maximum(np.abs(y.astype(np.float64)), atol)
                plain[key].append(float((gap[finite] / scale[finite]).max(initial=0.0)))

    try:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(one, range(graphs)))
    finally:
        for pl in pools:
            pl.close()
    done = count["graphs"]
    print(f"\nshare of the modules its partner runs that each cuda variant runs, over {done} graphs:")
    for (name, v, mate), (n, both) in sorted(ran.items()):
        print(f"  {name}/{v} (partner {mate}): {both}/{n}" + (f" = {100 * both / n:.1f} %" if n else ""))
        for why, k in failed[(name, v)].most_common(5):
            print(f"      {k} x {why}")
    for why, k in failed.get(("inductor", "worker"), Counter()).items():
        print(f"  worker died {k} x: {why}")
    print(f"\nrelative tolerance needed (at the campaign's atol), over {done} graphs; campaign rtol in brackets:")
    for (name, v, mate, dtype), xs in sorted(needed.items()):
        q = np.quantile(xs, [0.5, 0.9, 0.99, 1.0])
        print(f"  {name}/{v} vs {mate} {dtype} [{TOLERANCES.get(dtype, TOLERANCES['float32'])[0]:g}]: "
              f"n={len(xs)} median {q[0]:.2e} p90 {q[1]:.2e} p99 {q[2]:.2e} max {q[3]:.2e}; "
              f"largest |difference| {worst_abs[(name, v, mate, dtype)]:.3g}")
        r = np.quantile(plain[(name, v, mate, dtype)], [0.5, 0.9, 0.99, 1.0])
        print(f"      |difference| / max(|value|, atol) per output: median {r[0]:.2e} p90 {r[1]:.2e} "
              f"p99 {r[2]:.2e} max {r[3]:.2e}")


def borrow_profiles(versions: dict[str, str], cache: Path) -> None:
    """A GPU machine's compiler versions (torch's CUDA build) have no packaged support profile, and
    probing one would take the smoke test's minutes: a cache (``DLCFUZZ_CACHE``) holding each packaged
    profile of the same backend as this version's.  Targeting is then by the CPU build's profile: a
    test it admits that this build declines is counted as declined, as with any profile."""
    from importlib.resources import as_file, files

    from dlcfuzz.run.profile import SupportProfile, find_profile, save_profile

    os.environ["DLCFUZZ_CACHE"] = str(cache)
    with as_file(files("dlcfuzz.data")) as data:
        packaged = {p.name.split("-")[0]: p for p in sorted((Path(data) / "profiles").glob("*.json"))}
    for backend, version in versions.items():
        if backend in packaged and find_profile(backend, version) is None:
            profile = SupportProfile.from_json(packaged[backend].read_text())
            profile.version = version
            save_profile(profile)
            print(f"  {backend} {version}: borrows {packaged[backend].name}")


def section(name: str, fn, *args) -> None:
    """One part of the smoke test: its time, and its traceback rather than the end of the run."""
    print(f"\n== {name}", flush=True)
    t0 = time.monotonic()
    try:
        fn(*args)
    except Exception:
        traceback.print_exc(file=sys.stdout)
    print(f"== {name}: {time.monotonic() - t0:.0f} s", flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backends", default="tvm,ort,inductor", help="the ONNX campaign's backends")
    p.add_argument("--budget", default="120s", help="the ONNX campaign's budget")
    p.add_argument("--program-budget", default="90s", help="the torch-program campaign's budget (0: none)")
    p.add_argument("--jobs", type=int, default=2, help="the campaigns' workers")
    p.add_argument("--repros", type=int, default=8, help="repro.py runs per campaign, at most")
    p.add_argument("--graphs", type=int, default=60, help="graphs for the tolerance measurement (0: none)")
    p.add_argument("--measure-seconds", type=float, default=120, help="the measurement's time, at most")
    p.add_argument("--borrow-profiles", action="store_true",
                   help="a compiler version with no packaged profile borrows its backend's (no probing)")
    p.add_argument("--keep", help="a folder to copy the campaigns into (their bundles, for a look later)")
    a = p.parse_args()
    gpus, why = cuda_gpus()
    if not gpus:
        print(f"no GPU here ({why}): nothing to smoke-test; the GPU variants are skipped")
        return 0
    print(f"GPUs: {', '.join(gpus)}\nvariants:")
    backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    pool = WorkerPool(PhaseLimits())
    try:
        versions: dict[str, str] = {}
        found = describe(pool, [*backends, "inductor-program"], versions)
        programs = found.pop("inductor-program", None)
        if a.borrow_profiles:
            borrow_profiles(versions, Path(tempfile.mkdtemp(prefix="dlcfuzz-cache-")))
        if not any(device_of(o) == "cuda" for vs in found.values() for o in vs.values()):
            print("no ONNX backend has a cuda variant here (see the reasons above)")
        with tempfile.TemporaryDirectory() as tmp:
            if found and a.budget not in ("0", "0s"):
                section("ONNX graphs: campaign", campaign, list(found), a.budget, a.jobs, Path(tmp) / "onnx",
                        a.repros)
            if programs and a.program_budget not in ("0", "0s"):
                section("torch programs: campaign", campaign, ["inductor"], a.program_budget, a.jobs,
                        Path(tmp) / "programs", a.repros)
            if a.keep:
                for part in ("onnx", "programs"):
                    if (Path(tmp) / part).exists():
                        shutil.copytree(Path(tmp) / part, Path(a.keep) / part, dirs_exist_ok=True)
        if a.graphs:
            section("tolerances and cuda-eager's share", measure, found, a.graphs, a.measure_seconds, a.jobs)
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
