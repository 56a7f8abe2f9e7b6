"""``dlcfuzz gen``: generate valid computation graphs as ONNX models."""

from __future__ import annotations

import argparse
import json
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dlcfuzz.cli.display import progress
from dlcfuzz.cli.options import (
    UsageError,
    gen_options,
    generation_options,
    opsets_of,
    resolve_op_set,
    split_names,
    strategy_options,
)
from dlcfuzz.gen import STRATEGIES
from dlcfuzz.seeds import derive_seed

if TYPE_CHECKING:
    from dlcfuzz.gen.guided import Coverage
    from dlcfuzz.ir import Graph
    from dlcfuzz.run.profile import JointProfile
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.spec import OpSpec


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("gen", help="generate valid computation graphs as ONNX models")
    g.add_argument("-n", type=int, default=10, help="number of graphs")
    g.add_argument("--out", required=True, help="output folder")
    g.add_argument("--for", dest="for_backend", metavar="BACKEND",
                   help="only calls this compiler takes, by its support profile (see 'dlcfuzz probe')")
    generation_options(g, default_ops=(1, 30), strategies=STRATEGIES)
    g.set_defaults(func=cmd_gen)


def _generator(args: argparse.Namespace, limits: GenOptions, specs: list[OpSpec], coverage: Coverage | None = None):
    from dataclasses import replace

    from dlcfuzz.gen import make_generator
    from dlcfuzz.gen.opsets import OpsetMix

    full_profile, valid = None, None
    if args.target == "ort" or args.strategy in ("declgen", "randoop"):
        try:
            from dlcfuzz.backends.ort import full_profile, model_error
        except ImportError:
            raise UsageError("--target ort and the baselines need onnxruntime: pip install onnxruntime") from None
        valid = model_error  # the baselines' validity: checked, inferred and run as the graph declares
    admit = _target_profile(args.for_backend) if getattr(args, "for_backend", None) else None
    options = strategy_options(args)

    def make(opset: int):
        profile = full_profile(opset, tuple(s.op for s in specs)) if args.target == "ort" and full_profile else None
        return make_generator(args.strategy, specs, replace(limits, opset=opset), args.ops, profile, coverage, valid,
                              admit=admit, **options)

    opsets = opsets_of(args)
    try:
        return OpsetMix(make, opsets) if len(opsets) > 1 else make(opsets[0])
    except ValueError as e:
        raise UsageError(str(e)) from None


def _target_profile(name: str) -> JointProfile:
    """``gen --for NAME``: what that compiler (its installed version) and the baseline ORT both take."""
    from dlcfuzz.backends import BUILTIN, load_backend
    from dlcfuzz.run.profile import JointProfile, find_profile

    if name not in BUILTIN:
        raise UsageError(f"--for: unknown backend {name!r}; known: {', '.join(sorted(BUILTIN))}")
    got = []
    for b in (name, "ort"):
        backend = load_backend(b)
        ok, why = backend.available()
        if not ok:
            raise UsageError(f"--for {name}: {why}")
        version = backend.version()
        profile = find_profile(b, version, lambda line: print(line, file=sys.stderr))
        if profile is None:
            raise UsageError(f"--for {name}: no support profile for {b} {version}; build it with: "
                             f"dlcfuzz probe --backends {b}")
        got.append(profile)
    return JointProfile(*got)


def model_inputs(graph: Graph, seed: int) -> dict[str, np.ndarray]:
    """The values a campaign feeds the graph it generates from ``seed`` on its first draw
    (``run.campaign.Tester.execute``, attempt 0; a disruptive graph's: ``Tester._run_invalid``): every
    runtime input, pinned ones (a runtime shape, axes, indices ...) with the value the solver chose."""
    from dlcfuzz.ir.hints import feed_array
    from dlcfuzz.values import synthesize

    if "violation" in graph.meta:
        rng = np.random.default_rng(seed)
        return {v.name: feed_array(rng, v) for v in graph.inputs}
    return synthesize(graph, np.random.default_rng([seed, 0]), 0)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` as an ``.npz`` that ``numpy.load`` reads (one ``NAME.npy`` per array), byte-identical for
    the same arrays: ``numpy.savez`` stamps each member with the time of writing."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with z.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(a), allow_pickle=False)


def cmd_gen(args: argparse.Namespace) -> int:
    from dlcfuzz.export.onnx import to_bytes

    if getattr(args, "for_backend", None) in ("inductor", "inductor-program"):  # standalone torch programs
        from dlcfuzz.cli.torch_programs import cmd_gen_programs

        return cmd_gen_programs(args)
    limits = gen_options(args)
    specs = resolve_op_set(split_names(args.op_set) if args.op_set else None)
    gen = _generator(args, limits, specs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ops: Counter[str] = Counter()
    violations: Counter[str] = Counter()
    invalid = 0
    start = time.perf_counter()
    gen_time = 0.0
    for i in progress(range(args.n), "generating", args.n):
        t0 = time.perf_counter()
        seed = derive_seed(args.seed, i)
        g = gen.generate(seed)
        gen_time += time.perf_counter() - t0
        ops.update(n.op for n in g.nodes)
        if "violation" in g.meta:
            violations[g.meta["violation"]["kind"]] += 1
        invalid += g.meta.get("valid") is False
        stem = out / f"g{i:05d}"
        stem.with_suffix(".onnx").write_bytes(to_bytes(g))
        stem.with_suffix(".json").write_text(g.to_json())
        write_npz(stem.with_suffix(".npz"), model_inputs(g, seed))  # runs the model without dlcfuzz
    st = gen.stats
    summary = {
        "graphs": args.n, "strategy": args.strategy, "seed": args.seed, "ops": list(args.ops),
        "opset": list(opsets_of(args)) if len(opsets_of(args)) > 1 else limits.opset,
        "insertions": st.insertions, "retried_insertions": st.retried_insertions, "retries": st.retries,
        "operator_types": len(ops), "operator_counts": dict(sorted(ops.items())),
        "unavailable_operators": gen.unavailable,
    }
    if violations:
        summary["violations"] = dict(sorted(violations.items()))
    if args.strategy == "declgen":
        summary["invalid_graphs"] = invalid
    if hasattr(gen, "coverage"):
        summary["coverage"] = {c: len(keys) for c, keys in sorted(gen.coverage.sets.items())}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    wall = time.perf_counter() - start
    retried = 100 * st.retried_insertions / max(1, st.insertions)
    print(f"wrote {args.n} graphs ({st.insertions} operators, {len(ops)} types) to {out} in {wall:.1f}s; "
          f"generation {st.insertions / max(gen_time, 1e-9):.0f} insertions/s; "
          f"insertions needing a retry: {st.retried_insertions} ({retried:.2f}%)")
    if gen.unavailable:
        print(f"left out (not in opset {args.opset}, or no dtype for this target): {', '.join(gen.unavailable)}")
    if violations:
        print(f"each model breaks one constraint: {', '.join(f'{k} {v}' for k, v in sorted(violations.items()))}")
    if args.strategy == "declgen":
        print(f"valid graphs: {args.n - invalid}/{args.n}")
    return 0
