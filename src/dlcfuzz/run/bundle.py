"""Bug bundles: everything a compiler engineer needs to see and replay one distinct bug.

    bugs/<signature>/model.onnx (or call.pt, a migrated torch call)   graph.json   inputs.npz
                     expected.npz (the baseline's outputs)
                     actual.npz (the failing variant's outputs) or error.log
                     finding.json   repro.py   report.md (for the compiler's issue tracker)

``repro.py`` needs only numpy, onnx and the one compiler: it embeds the backend's own
``repro_source`` for the variant(s) involved, replays the model on the stored inputs and exits
1 while the bug is present (the same exception type, a fatal signal within 10 runs, a hang, or outputs beyond
the tolerance), 0 once it is gone.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant
from dlcfuzz.backends.devices import device_of
from dlcfuzz.oracle import CRASH, DIFFERENTIAL, Finding
from dlcfuzz.oracle.compare import GPU_TOLERANCES, TOLERANCES
from dlcfuzz.run.bugreport import write_report

_REPRO = '''#!/usr/bin/env python3
"""dlcfuzz bug {signature}: {title}

Needs numpy, onnx and {package} (found with {backend} {version}){gpu}.
Exits 1 while the bug is present, 0 once it is gone.
"""

import pathlib
import signal
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
MODEL = str(HERE / {model_file!r})
ORACLE, KIND = {oracle!r}, {kind!r}
VARIANT, OTHER = {variant!r}, {other!r}
ERROR_TYPE = {error_type!r}
HANG_SECONDS = {hang_seconds!r}
# a fatal signal from reading out of bounds need not happen every time: try a few runs
ATTEMPTS = 10 if KIND in ("signal", "exit") else 1
TOLERANCES = {tolerances!r}
# a migrated test's bound on the Chebyshev distance to the library's outputs (times max(1, max |expected|))
CHEBYSHEV = {chebyshev!r}
SOURCES = {sources!r}


def runner(variant):
    namespace = {{}}
    exec(SOURCES[variant], namespace)
    return namespace["run_model"]


def inputs():
    with np.load(HERE / "inputs.npz") as f:
        return {{k: f[k] for k in f.files}}


def outputs(name):
    with np.load(HERE / name) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k[1:]))]


def mismatch(expected, actual):
    if len(expected) != len(actual):
        return f"{{len(actual)}} outputs, expected {{len(expected)}}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = np.asarray(e), np.asarray(a)
        if e.shape != a.shape or e.dtype != a.dtype:
            return f"output {{i}}: {{a.dtype}}{{a.shape}}, expected {{e.dtype}}{{e.shape}}"
        if e.dtype.kind == "f" and CHEBYSHEV and e.size:
            fin = np.isfinite(e) & np.isfinite(a)
            dist = np.abs(e[fin].astype(np.float64) - a[fin]).max(initial=0.0)
            bound = CHEBYSHEV.get(e.dtype.name, CHEBYSHEV["float32"]) * max(1.0, np.abs(e[fin]).max(initial=0.0))
            ok = np.array([dist <= bound and (np.isfinite(e) == np.isfinite(a)).all()])
        elif e.dtype.kind == "f":
            rtol, atol = TOLERANCES.get(e.dtype.name, TOLERANCES["float32"])
            ok = np.isclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = e == a
        if not np.all(ok):
            return f"output {{i}}: {{int((~ok).sum())}}/{{ok.size}} elements differ"
    return None


def main():
    if ORACLE == "disruptive":  # the model is invalid on purpose: only an error is right
        if HANG_SECONDS:
            signal.signal(signal.SIGALRM, lambda *_: sys.exit(print(f"reproduced: hangs > {{HANG_SECONDS}}s") or 1))
            signal.alarm(HANG_SECONDS)
        try:
            for _ in range(ATTEMPTS):
                got = runner(VARIANT)(MODEL, inputs())
            other = runner(OTHER)(MODEL, inputs()) if KIND == "inconsistent" else None
        except Exception as e:  # a fatal signal ends the process with a non-zero status by itself
            print(f"not reproduced: rejected with {{type(e).__name__}}: {{e}}")
            return 0
        diff = other is not None and mismatch([np.asarray(o) for o in other], [np.asarray(o) for o in got])
        print(f"reproduced: accepted, and the variants disagree: {{diff}}" if diff
              else f"not reproduced: ran {{ATTEMPTS}} time(s)")
        return 1 if diff else 0
    if ORACLE == "crash":
        if HANG_SECONDS:
            signal.signal(signal.SIGALRM, lambda *_: sys.exit(print(f"reproduced: hangs > {{HANG_SECONDS}}s") or 1))
            signal.alarm(HANG_SECONDS)
        try:
            for _ in range(ATTEMPTS):
                runner(VARIANT)(MODEL, inputs())
        except Exception as e:  # a fatal signal ends the process with a non-zero status by itself
            same = ERROR_TYPE in ("", type(e).__name__)
            print(f"{{'reproduced' if same else 'different error'}}: {{type(e).__name__}}: {{e}}")
            return 1 if same else 0
        print(f"not reproduced: the model runs ({{ATTEMPTS}} time(s))")
        return 0
    if ORACLE == "differential":
        expected = outputs("expected.npz")
    else:
        expected = [np.asarray(o) for o in runner(OTHER)(MODEL, inputs())]
    diff = mismatch(expected, [np.asarray(o) for o in runner(VARIANT)(MODEL, inputs())])
    print(f"reproduced: {{diff}}" if diff else "not reproduced: outputs agree")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _save_outputs(path: Path, outs: list[np.ndarray]) -> None:
    np.savez(path, **{f"o{i}": np.asarray(o) for i, o in enumerate(outs)})


def write_bundle(folder: Path, signature: str, title: str, f: Finding, test: Test, backend: Backend,
                 version: str, variants: dict[str, Variant], baseline: list[np.ndarray] | None,
                 actual: list[np.ndarray] | None, hang_seconds: int, artifacts: dict[str, str | bytes] | None = None,
                 model_file: str = "model.onnx", chebyshev: dict[str, float] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (artifacts or {}).items():  # files the backend made (its repro source reads them)
        path = folder / Path(name).name
        path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)
    (folder / model_file).write_bytes(test.model)
    if test.graph_json:
        (folder / "graph.json").write_text(test.graph_json)
    np.savez(folder / "inputs.npz", **test.inputs)
    if baseline is not None:
        _save_outputs(folder / "expected.npz", baseline)
    if actual is not None:
        _save_outputs(folder / "actual.npz", actual)
    if f.traceback or f.oracle == CRASH:
        (folder / "error.log").write_text(f"{f.error_type}: {f.message}\n\n{f.traceback}")
    info = asdict(f) | {"signature": signature, "title": title, "compiler_version": version}
    (folder / "finding.json").write_text(json.dumps(info, indent=1, default=str))
    # a differential finding's "other" names its baseline, whose outputs expected.npz holds
    other = f.other if f.oracle != DIFFERENTIAL else ""
    names = [f.variant] + ([other] if other else [])
    sources = {n: backend.repro_source(variants[n]) for n in names}
    # a cuda variant's source runs it on the GPU (the same code as in the worker): say so up front
    on_gpu = any(device_of(variants[n].options) == "cuda" for n in names)
    gpu = ", and a CUDA GPU" if on_gpu else ""
    repro = _REPRO.format(signature=signature, model_file=model_file, title=title.replace('"""', "'''"),
                          package=backend.pip, gpu=gpu,
                          backend=backend.name, version=version, oracle=f.oracle, kind=f.kind, variant=f.variant,
                          other=other,
                          error_type=f.error_type if f.kind == "exception" else "",
                          hang_seconds=hang_seconds if f.kind == "timeout" else 0,
                          tolerances=TOLERANCES | GPU_TOLERANCES if on_gpu else TOLERANCES, chebyshev=chebyshev,
                          sources=sources)
    (folder / "repro.py").write_text(repro)
    write_report(folder)
