"""Measure the peer tool NNSmith's graph-generation throughput on this machine.

NNSmith is a benchmark subject, never a dependency of dlcfuzz: this script installs it into its own virtual
environment inside a work folder (default ``bench-work/nnsmith-venv`` under the repository root), reusing the
venv when it already exists and works, and then runs *this same file* with ``--child`` inside that venv.

The child generates graphs in-process (NNSmith's CLI would pay ~1.8 s of start-up per model), one at a time:

* generation  -- ``nnsmith.graph_gen.model_gen(...)`` with the CLI's defaults (method ``symbolic-cinit``,
  ``max_elem_per_tensor=2**16``), timed alone;
* materialization -- ``make_concrete()``, ``Model.init("onnx").from_gir(...)``, ``refine_weights()`` (which
  exports to ONNX) and ``make_oracle()``, timed separately.

A graph that does not reach ``--nodes`` operators within NNSmith's own generation timeout (``--timeout-ms``,
NNSmith's default 10 s), or whose generation or materialization raises, is skipped and counted in
``graphs_failed`` (``graphs_timed_out`` tells the timeouts apart; ``failed_seconds`` is the time they took).
``graphs_per_s`` and ``ops_per_s`` divide the successful graphs and their abstract operators by
``gen_seconds`` (generation only); ``graphs_per_s_with_materialize`` also counts materialization.

torch 2.13's ``torch.onnx.export`` defaults to the dynamo exporter, which breaks NNSmith 0.1.0; the child wraps
it to pass ``dynamo=False`` before NNSmith is imported (NNSmith's files are left untouched). NNSmith's operator
probe cache goes to ``<work>/xdg-cache`` (XDG_CACHE_HOME).

With ``--save DIR`` every successful model is also written to ``DIR/nnsmith-s<seed>-<index>.onnx`` so that
``dlcfuzz metrics DIR`` can measure NNSmith's diversity. NNSmith's weights are unbounded (one 10-op model was
379 MB), so models larger than ``--max-model-mb`` (default 32 MB) are not saved; they still count for throughput
and are reported as ``graphs_oversize``. Some graphs ask for 16 GB tensors while materializing, which on this
2-core, 24 GiB machine got the child OOM-killed: the child caps its address space (``--max-memory-gb``, default 8),
so such a graph fails cleanly and counts in ``graphs_failed``.

Usage::

    python benchmarks/nnsmith_peer.py --nodes 20 --graphs 30 --seed 1 [--work bench-work] [--save DIR]

prints one JSON line to stdout; progress and diagnostics go to stderr. ``run_nnsmith`` does the same from Python.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NNSMITH_VERSION = "0.1.0"
TORCH_VERSION = "2.13.0"  # resolves to the local CPU wheel; unpinned torch would pull GBs of CUDA
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORK = REPO_ROOT / "bench-work"
VENV_NAME = "nnsmith-venv"
DEFAULT_TIMEOUT_MS = 10_000  # NNSmith's own default (mgen.timeout_ms)
DEFAULT_MAX_MODEL_MB = 32.0
DEFAULT_MAX_MEMORY_GB = 8.0  # address-space cap of the child: a runaway graph fails instead of OOM-killing the machine
GEN_METHOD = "symbolic-cinit"  # NNSmith's CLI default (mgen.method)
MAX_ELEM_PER_TENSOR = 2**16  # NNSmith's CLI default (mgen.max_elem_per_tensor)


def _log(msg: str) -> None:
    print(f"[nnsmith-peer] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------------------
# Parent side: set up the venv, run the child, collect its JSON.
# --------------------------------------------------------------------------------------------------------------


def _reason(stderr: str) -> str:
    """One line explaining a failed command: pip's last ERROR line, else the last non-empty line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1]


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _venv_works(python: Path) -> bool:
    probe = "import nnsmith, onnx, torch; print(nnsmith.__version__, torch.__version__.split('+')[0])"
    try:
        r = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=300, env=_child_env())
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and r.stdout.split() == [NNSMITH_VERSION, TORCH_VERSION]


def _child_env(work: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # keep the system's packages (dlcfuzz's onnx, ...) out of the venv
    env.pop("PYTHONHOME", None)
    env["PYTHONNOUSERSITE"] = "1"
    if work is not None:
        env["XDG_CACHE_HOME"] = str(work / "xdg-cache")
    return env


def ensure_venv(work: Path) -> tuple[Path, float]:
    """Return the venv's python and the seconds spent setting it up (about 0 when reused)."""
    venv = work / VENV_NAME
    python = _venv_python(venv)
    start = time.perf_counter()
    if python.exists() and _venv_works(python):
        _log(f"reusing {venv}")
        return python, time.perf_counter() - start
    work.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        _log(f"creating {venv}")
        r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"cannot create the NNSmith venv at {venv}: {_reason(r.stderr)}")
    pkgs = [f"nnsmith=={NNSMITH_VERSION}", f"torch=={TORCH_VERSION}", "onnx"]
    _log(f"installing {' '.join(pkgs)} into {venv} (takes a minute or so)")
    cmd = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--retries", "2", *pkgs]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=_child_env())
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"cannot install NNSmith into {venv}: pip took more than an hour") from None
    if r.returncode != 0:
        raise RuntimeError(f"cannot install NNSmith into {venv}: {_reason(r.stderr)}")
    if not _venv_works(python):
        raise RuntimeError(f"NNSmith venv at {venv} was installed but cannot import nnsmith {NNSMITH_VERSION}")
    seconds = time.perf_counter() - start
    _log(f"venv ready in {seconds:.1f} s")
    return python, seconds


def run_nnsmith(
    nodes: int,
    graphs: int,
    seed: int,
    work: Path,
    save: Path | None = None,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    max_model_mb: float = DEFAULT_MAX_MODEL_MB,
    max_memory_gb: float = DEFAULT_MAX_MEMORY_GB,
) -> dict[str, Any]:
    """Generate ``graphs`` NNSmith graphs of ``max_nodes=nodes`` and return the measurements (see module doc).

    Raises RuntimeError with a one-line reason when the venv cannot be set up or the child fails.
    """
    if nodes < 1 or graphs < 0:
        raise ValueError("nodes must be >= 1 and graphs >= 0")
    work = Path(work).resolve()
    if save is not None:
        save = Path(save).resolve()
        if save.is_dir() and any(save.rglob("*.onnx")):
            raise ValueError(f"{save} already holds .onnx files: give a fresh folder")
        save.mkdir(parents=True, exist_ok=True)
    python, setup_seconds = ensure_venv(work)
    (work / "xdg-cache").mkdir(parents=True, exist_ok=True)
    cmd = [str(python), str(Path(__file__).resolve()), "--child", "--nodes", str(nodes), "--graphs", str(graphs)]
    cmd += ["--seed", str(seed), "--timeout-ms", str(timeout_ms), "--max-model-mb", str(max_model_mb)]
    cmd += ["--max-memory-gb", str(max_memory_gb)]
    if save is not None:
        cmd += ["--save", str(save)]
    # Generous bound: operator probe on first use, then each graph's generation timeout plus materialization.
    limit = 900 + graphs * (timeout_ms / 1000 + 120)
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=_child_env(work), timeout=limit)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"NNSmith child did not finish within {limit:.0f} s") from None
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"NNSmith child failed with exit code {r.returncode} (see its stderr above)")
    result: dict[str, Any] = json.loads(lines[-1])
    result["venv_setup_seconds"] = round(setup_seconds, 2)
    return result


# --------------------------------------------------------------------------------------------------------------
# Child side: runs inside the venv, imports NNSmith, generates and times.
# --------------------------------------------------------------------------------------------------------------


def _patch_torch_onnx_export() -> None:
    """torch 2.13 defaults to the dynamo exporter, which NNSmith 0.1.0 cannot use: default to the TorchScript one."""
    import functools

    import torch.onnx

    original = torch.onnx.export

    @functools.wraps(original)
    def export(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("dynamo", False)
        return original(*args, **kwargs)

    torch.onnx.export = export


def _load_opset(model_type: Any) -> list[Any]:
    """NNSmith's exportable operator set, probed once and cached; an empty cached probe is deleted and redone."""
    from nnsmith.narrow_spec import NNSMITH_CACHE_DIR, auto_opset, get_cache_name

    opset = auto_opset(model_type, None)
    if not opset:
        cache = Path(NNSMITH_CACHE_DIR) / f"{get_cache_name(model_type, None)}.yaml"
        _log(f"empty operator probe cached at {cache}: deleting it and probing again")
        cache.unlink(missing_ok=True)
        opset = auto_opset(model_type, None)
    if not opset:
        raise SystemExit("nnsmith_peer: error: NNSmith found no exportable operator")
    return opset


def _child(args: argparse.Namespace) -> int:
    # Keep stdout for our JSON line alone: anything NNSmith or torch print goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    if args.max_memory_gb > 0:
        # Some graphs ask for 16 GB tensors while materializing; with a cap that is a failed graph, not an OOM kill.
        import resource

        cap = int(args.max_memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    import logging
    import warnings

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    warnings.filterwarnings("ignore")
    _patch_torch_onnx_export()

    import onnx
    import torch
    from nnsmith import __version__ as nnsmith_version
    from nnsmith.abstract.extension import activate_ext
    from nnsmith.graph_gen import model_gen
    from nnsmith.materialize import Model

    model_type = Model.init("onnx", backend_target="cpu")
    model_type.add_seed_setter()
    start = time.perf_counter()
    opset = _load_opset(model_type)
    activate_ext(opset=opset, factory=None)
    _log(f"nnsmith {nnsmith_version}: {len(opset)} operators ready in {time.perf_counter() - start:.1f} s")

    save: Path | None = Path(args.save) if args.save else None
    cap_bytes = int(args.max_model_mb * 1024 * 1024)
    ok = failed = timed_out = oversize = saved = 0
    ops_total = onnx_nodes_total = 0
    gen_seconds = mat_seconds = failed_seconds = 0.0
    for i in range(args.graphs):
        graph_seed = args.seed + i
        t0 = time.perf_counter()
        try:
            gen = model_gen(
                opset=opset,
                method=GEN_METHOD,
                max_nodes=args.nodes,
                seed=graph_seed,
                timeout_ms=args.timeout_ms,
                max_elem_per_tensor=MAX_ELEM_PER_TENSOR,
            )
        except Exception as e:
            failed += 1
            failed_seconds += time.perf_counter() - t0
            _log(f"graph {i} (seed {graph_seed}): generation failed: {type(e).__name__}: {e}")
            continue
        t_gen = time.perf_counter() - t0
        n_ops = gen.num_op()
        if n_ops < args.nodes:  # NNSmith stops at its timeout with a smaller graph
            failed += 1
            timed_out += 1
            failed_seconds += t_gen
            _log(f"graph {i} (seed {graph_seed}): timed out after {t_gen:.2f} s with {n_ops}/{args.nodes} ops")
            continue
        t1 = time.perf_counter()
        try:
            model = model_type.from_gir(gen.make_concrete())
            model.refine_weights()  # also exports to ONNX
            model.make_oracle()
        except Exception as e:
            failed += 1
            failed_seconds += time.perf_counter() - t0
            _log(f"graph {i} (seed {graph_seed}): materialization failed: {type(e).__name__}: {e}")
            continue
        t_mat = time.perf_counter() - t1
        proto = model.onnx_model
        ok += 1
        ops_total += n_ops
        onnx_nodes_total += len(proto.graph.node)
        gen_seconds += t_gen
        mat_seconds += t_mat
        note = ""
        if save is not None:
            try:
                size = proto.ByteSize()
            except ValueError:  # protobuf refuses to size messages over 2 GB
                size = cap_bytes + 1
            if size > cap_bytes:
                oversize += 1
                note = f", not saved ({size / 2**20:.0f} MB > {args.max_model_mb:g} MB)"
            else:
                onnx.save(proto, str(save / f"nnsmith-s{args.seed}-{i:04d}.onnx"))
                saved += 1
        _log(
            f"graph {i} (seed {graph_seed}): {n_ops} ops -> {len(proto.graph.node)} ONNX nodes, "
            f"gen {t_gen:.3f} s, materialize {t_mat:.3f} s{note}"
        )

    result: dict[str, Any] = {
        "tool": "nnsmith",
        "version": nnsmith_version,
        "torch_version": torch.__version__,
        "method": GEN_METHOD,
        "seed": args.seed,
        "graphs_requested": args.graphs,
        "graphs_ok": ok,
        "graphs_failed": failed,
        "graphs_timed_out": timed_out,
        "nodes_requested": args.nodes,
        "abstract_ops_total": ops_total,
        "onnx_nodes_total": onnx_nodes_total,
        "gen_seconds": round(gen_seconds, 4),
        "materialize_seconds": round(mat_seconds, 4),
        "failed_seconds": round(failed_seconds, 4),
        "graphs_per_s": round(ok / gen_seconds, 4) if gen_seconds > 0 else None,
        "ops_per_s": round(ops_total / gen_seconds, 4) if gen_seconds > 0 else None,
        "graphs_per_s_with_materialize": (
            round(ok / (gen_seconds + mat_seconds), 4) if gen_seconds + mat_seconds > 0 else None
        ),
        "timeout_ms": args.timeout_ms,
        "max_memory_gb": args.max_memory_gb,
    }
    if save is not None:
        result.update(save_dir=str(save), graphs_saved=saved, graphs_oversize=oversize, max_model_mb=args.max_model_mb)
    out.write(json.dumps(result) + "\n")
    out.flush()
    return 0


# --------------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Measure NNSmith's graph-generation throughput (prints one JSON line).")
    p.add_argument("--nodes", type=int, default=20, help="max_nodes of each graph (default 20)")
    p.add_argument("--graphs", type=int, default=30, help="graphs to generate (default 30)")
    p.add_argument("--seed", type=int, default=1, help="seed of the first graph; graph i uses seed+i (default 1)")
    p.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"work folder holding the venv ({DEFAULT_WORK})")
    p.add_argument("--save", type=Path, help="also write each ONNX model into this (fresh) folder")
    p.add_argument("--timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS, help="NNSmith's generation timeout")
    p.add_argument("--max-model-mb", type=float, default=DEFAULT_MAX_MODEL_MB, help="do not save larger models")
    p.add_argument(
        "--max-memory-gb", type=float, default=DEFAULT_MAX_MEMORY_GB, help="address-space cap of the child (0: none)"
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.child:
        return _child(args)
    try:
        result = run_nnsmith(
            args.nodes,
            args.graphs,
            args.seed,
            args.work,
            args.save,
            timeout_ms=args.timeout_ms,
            max_model_mb=args.max_model_mb,
            max_memory_gb=args.max_memory_gb,
        )
    except (RuntimeError, ValueError) as e:
        print(f"nnsmith_peer: error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
