"""The ``dlcfuzz`` command: wires the packages together, nothing more."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

from dlcfuzz.gen import FUZZ_STRATEGIES, STRATEGIES
from dlcfuzz.ir import DTYPES
from dlcfuzz.seeds import derive_seed


class UsageError(Exception):
    """Bad input from the user: reported in one line with exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the usage too)
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _op_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LB:UB (e.g. 1:30), got {text!r}") from None
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"need 1 <= LB <= UB, got {text!r}")
    return lo, hi


def _names(text: str) -> list[str]:
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    return [n.strip() for n in text.replace("\n", ",").split(",") if n.strip()]


def _resolve_ops(names: list[str] | None):
    from dlcfuzz.spec import REGISTRY, UnknownOperator, get, resolve_ops

    unknown = []
    for n in names or []:
        try:
            get(n)  # a contrib operator by its qualified name, or by its type where that is unambiguous
        except UnknownOperator:
            unknown.append(n)
    if unknown:
        raise UsageError(f"unknown operator(s) in --op-set: {', '.join(unknown)} "
                         f"(known: {len(REGISTRY)} operators, e.g. {', '.join(sorted(REGISTRY)[:5])}, ...)")
    return resolve_ops(names)


def _opsets(args: argparse.Namespace) -> tuple[int, ...]:
    """``--opset``: one opset, or a range/list that each graph's opset is drawn from."""
    from dlcfuzz.export.onnx import MAX_OPSET, MIN_OPSET
    from dlcfuzz.gen.opsets import parse_opsets

    try:
        return parse_opsets(str(args.opset), MIN_OPSET, MAX_OPSET)
    except ValueError as e:
        raise UsageError(f"--opset: {e}; e.g. --opset 17 or --opset {MIN_OPSET}-{MAX_OPSET}") from None


def _limits(args: argparse.Namespace):
    from dlcfuzz.solve import GenOptions

    dtypes = tuple(_names(args.dtypes)) if args.dtypes else ()
    bad = [d for d in dtypes if d not in DTYPES]
    if bad:
        raise UsageError(f"unknown dtype(s) {', '.join(bad)}; known: {', '.join(DTYPES)}")
    if not all(0.0 <= r <= 1.0 for r in (args.picking_rate, args.init_rate, args.runtime_consts,
                                         args.constant_nodes)):
        raise UsageError("--picking-rate, --init-rate, --runtime-consts and --constant-nodes must be within [0, 1]")
    if args.max_rank < 1 or args.max_dim < 1:
        raise UsageError("--max-rank and --max-dim must be at least 1")
    return GenOptions(max_rank=args.max_rank, max_dim=args.max_dim, max_numel=args.max_numel,
                  picking_rate=args.picking_rate, init_rate=args.init_rate, runtime_consts=args.runtime_consts,
                  constant_nodes=args.constant_nodes,
                  opset=_opsets(args)[0], dtypes=dtypes,
                  target=getattr(args, "target", "ort"))


def _strategy_options(args: argparse.Namespace) -> dict:
    """The guided strategies' knobs given on the command line."""
    if args.strategy not in ("hirgen", "gencog", "guided"):
        return {}
    if not 0.0 <= args.p_rej <= 1.0 or args.temperature <= 0:
        raise UsageError("--p-rej must be within [0, 1] and --temperature above 0")
    return {"p_rej": args.p_rej, "temperature": args.temperature, "paths": args.paths}


def _generator(args: argparse.Namespace, limits, specs, coverage=None):
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
    options = _strategy_options(args)

    def make(opset: int):
        profile = full_profile(opset, tuple(s.op for s in specs)) if args.target == "ort" and full_profile else None
        return make_generator(args.strategy, specs, replace(limits, opset=opset), args.ops, profile, coverage, valid,
                              admit=admit, **options)

    opsets = _opsets(args)
    try:
        return OpsetMix(make, opsets) if len(opsets) > 1 else make(opsets[0])
    except ValueError as e:
        raise UsageError(str(e)) from None


def _target_profile(name: str):
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


def cmd_gen(args: argparse.Namespace) -> int:
    from dlcfuzz.export.onnx import to_bytes

    limits = _limits(args)
    specs = _resolve_ops(_names(args.op_set) if args.op_set else None)
    gen = _generator(args, limits, specs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ops: Counter[str] = Counter()
    violations: Counter[str] = Counter()
    invalid = 0
    start = time.perf_counter()
    gen_time = 0.0
    for i in _progress(range(args.n), "generating", args.n):
        t0 = time.perf_counter()
        g = gen.generate(derive_seed(args.seed, i))
        gen_time += time.perf_counter() - t0
        ops.update(n.op for n in g.nodes)
        if "violation" in g.meta:
            violations[g.meta["violation"]["kind"]] += 1
        invalid += g.meta.get("valid") is False
        stem = out / f"g{i:05d}"
        stem.with_suffix(".onnx").write_bytes(to_bytes(g))
        stem.with_suffix(".json").write_text(g.to_json())
    st = gen.stats
    summary = {
        "graphs": args.n, "strategy": args.strategy, "seed": args.seed, "ops": list(args.ops),
        "opset": list(_opsets(args)) if len(_opsets(args)) > 1 else limits.opset,
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


def cmd_metrics(args: argparse.Namespace) -> int:
    from dlcfuzz.metrics import DIVERSITY, GRAPH_METRICS, OP_METRICS, ModelError, OpInfo, compute, load_model, op_nodes
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.solve.space import call_space, indegrees

    specs = _resolve_ops(_names(args.op_set) if args.op_set else None)
    folder = Path(args.dir)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder of ONNX models")
    files = sorted(folder.rglob("*.onnx"))
    if not files:
        raise UsageError(f"no .onnx files under {folder}")
    limits = GenOptions(opset=args.opset)
    # the metrics count ONNX operators in ONNX files: a composite operator (spec/sequence.py) is written as
    # several, which its name never matches, so it is no corpus entry
    corpus = {s.op: OpInfo(indegrees(s, args.opset), call_space(s, limits)) for s in specs if s.composite is None}
    try:
        graphs = [op_nodes(load_model(f)) for f in _progress(files, "reading", len(files))]
    except ModelError as e:
        raise UsageError(str(e)) from None
    result = compute(graphs, corpus)
    result["models"] = len(files)
    result["corpus_size"] = len(corpus)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{len(files)} models, operator corpus of {len(corpus)}")
        for k in (*GRAPH_METRICS, *OP_METRICS, *DIVERSITY):
            pct = k in ("OTC", "IDC", "SEC", "DEC")
            print(f"  {k:<17} {100 * result[k]:.2f} %" if pct else f"  {k:<17} {result[k]:.4f}")
    return 0


def _budget(text: str) -> float:
    """'90', '90s', '10m', '2h' -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a duration like 90s, 10m or 2h, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _backends(text: str | None) -> list[str]:
    from dlcfuzz.backends import BUILTIN, DEFAULT, UnknownBackend, load_backend, path_of, plugins

    names = _names(text) if text else list(DEFAULT)
    chosen = []
    for n in names:
        try:
            path_of(n)
        except UnknownBackend:
            known = ", ".join(k for k in [*BUILTIN, *plugins()] if k != "reference")
            raise UsageError(f"unknown backend {n!r}; known: {known}, or module:Class "
                             "(list them with 'dlcfuzz backends')") from None
        ok, why = load_backend(n).available()
        if ok:
            chosen.append(n)
        elif text:  # asked for explicitly: say what to do
            raise UsageError(why)
        else:
            print(f"disabled: {why}", file=sys.stderr)
    return chosen


def _devices(text: str | None) -> tuple[tuple[str, ...], list[str]]:
    """(the devices asked for (all by default) that exist here, lines saying which asked-for ones are
    skipped and why); none left is bad input."""
    from dlcfuzz.backends.devices import DEVICES, describe, parse_devices

    try:
        asked = parse_devices(text) if text is not None else DEVICES
    except ValueError as e:
        raise UsageError(str(e)) from None
    _, skipped = describe(asked)
    usable = tuple(d for d in asked if not any(line.startswith(f"{d}:") for line in skipped))
    if not usable:
        raise UsageError(f"--devices {text}: nothing to run, {'; '.join(skipped)}")
    return usable, skipped if text is not None else []


def _found_devices() -> str:
    """"devices found: cpu, cuda (NVIDIA H100)" or "devices found: cpu (cuda: none: no CUDA driver ...)"."""
    from dlcfuzz.backends.devices import found

    here = found()
    cuda = here["cuda"]
    return "devices found: cpu" + (f" (cuda: {cuda})" if cuda.startswith("none") else f", cuda ({cuda})")


def _variant_devices(variants: dict, live: list[str]) -> str:
    """"variants by device: cpu: ort 4, tvm 4; cuda: tvm 1" for the backends under test."""
    from dlcfuzz.backends.devices import DEVICES, device_of

    parts = []
    for d in DEVICES:
        counts = [f"{b} {n}" for b in live if (n := sum(device_of(v.options) == d for v in variants[b].values()))]
        if counts:
            parts.append(f"{d}: {', '.join(counts)}")
    return "variants by device: " + "; ".join(parts)


def _executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: worker processes on this machine; ray: one Ray actor per job on a Ray cluster, "
                        "results recorded here (needs dlcfuzz[ray])")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="with --executor ray: the cluster to join (e.g. auto, or HOST:6379; default: start a local "
                        "Ray instance)")


def _check_executor(args: argparse.Namespace) -> None:
    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray")
    if args.executor == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise UsageError("--executor ray needs Ray: pip install 'dlcfuzz[ray]'")


def _supported_specs(specs: list, backends: list[str]) -> list:
    """The operators at least one backend under test can be tried on (backends with a support
    profile, e.g. inductor or iree, decline the rest), so that no test is generated for nobody."""
    from dlcfuzz.backends import load_backend

    loaded = [load_backend(b) for b in backends if b != "reference"]
    kept = [s for s in specs if any(b.supports({s.op}) for b in loaded)]
    if not kept:
        raise UsageError(f"none of the operators ({', '.join(s.op for s in specs[:5])}"
                         f"{', ...' if len(specs) > 5 else ''}) is supported by the backends under test")
    if len(kept) < len(specs):
        print(f"operators: {len(kept)} of {len(specs)} (the others no backend under test supports: "
              f"{', '.join(sorted({s.op for s in specs} - {s.op for s in kept}))})", file=sys.stderr)
    return kept


def cmd_backends(args: argparse.Namespace) -> int:
    """Every backend, built in or plugin: version, variants (as its worker reports them) and availability."""
    from dlcfuzz.backends import BUILTIN, DEFAULT, load_backend, plugins
    from dlcfuzz.run.worker import PhaseLimits, WorkerDied, WorkerPool

    # origin: "default" (built in, and run when --backends is not given), "built-in", or "plugin"
    rows = ([(n, p, "default" if n in DEFAULT else "built-in") for n, p in BUILTIN.items()]
            + [(n, p, "plugin") for n, p in plugins().items()])
    pool = WorkerPool(PhaseLimits())
    try:
        for name, path, origin in rows:
            try:
                backend = load_backend(name)
                ok, why = backend.available()
            except Exception as e:  # a plugin that cannot even be imported: say why, list the rest
                ok, why = False, f"{name}: cannot load {path}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            if ok and not args.no_variants:
                try:
                    version, described = pool.describe(name)
                except WorkerDied as e:
                    ok, why = False, f"{name}: its worker could not start: {str(e).splitlines()[0][:200]}"
            if not ok:
                print(f"{name:<15} unavailable  {origin:<8} {path}\n{'':<15} {why}")
                continue
            if args.no_variants:
                version, described = backend.version(), [(v.name, v.options) for v in backend.variants()]
            variants = ", ".join(v for v, _ in described)
            print(f"{name:<15} {version:<12} {origin:<8} {path}\n{'':<15} variants: {variants}")
    finally:
        pool.close()
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from dlcfuzz.run.profile import profile_path
    from dlcfuzz.solve import GenOptions

    backends = _backends(args.backends)
    if args.per_op < 1 or args.jobs < 1:
        raise UsageError("--per-op and --jobs must be at least 1")
    specs = _resolve_ops(_names(args.op_set) if args.op_set else None)
    return _probe(backends, Path(args.out), specs, GenOptions(), args.per_op, args.jobs, profile_path)


def _probe(backends: list[str], out: Path, specs: list, limits, per_op: int, jobs: int, where) -> int:
    """Probes ``backends`` and prints, per compiler, what its profile declines and where it is cached."""
    from dlcfuzz.run.probe import probe

    print(f"probing {', '.join(backends)}: {per_op} single-operator tests per operator", file=sys.stderr)
    campaigns, profiles = probe(backends, out, specs, limits, per_op, jobs)
    for why in campaigns[0].disabled.values():
        print(f"disabled: {why}", file=sys.stderr)
    for name, p in sorted(profiles.items()):
        declined_ops = sorted(op for op in p.counts if not p.admits_op(op))
        features = {op: p.declined_keys(op) for op in sorted(p.counts) if p.admits_op(op) and p.declined_keys(op)}
        print(f"{name} {p.version}: {len(p.counts)} operators probed, {len(declined_ops)} declined"
              f"{': ' + ', '.join(declined_ops) if declined_ops else ''}")
        for op, keys in features.items():
            print(f"  {op}: declines {', '.join(keys)}")
        print(f"  profile: {where(name, p.version)}")
    for campaign in campaigns:
        print(f"{bug_summary(campaign.cfg.out)}; list them with: dlcfuzz bugs {campaign.cfg.out}")
    return 0


def cmd_fuzz(args: argparse.Namespace) -> int:
    from dlcfuzz.run.campaign import Campaign, CampaignConfig
    from dlcfuzz.run.store import StoreError

    limits = _limits(args)
    backends = _backends(args.backends)
    specs = _supported_specs(_resolve_ops(_names(args.op_set) if args.op_set else None), backends)
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    _check_executor(args)
    devices, skipped = _devices(args.devices)
    out = Path(args.out)
    cfg = CampaignConfig(out, backends, specs, args.budget, args.max_tests, args.jobs, args.seed, args.ops,
                         limits, _phases(args), strategy=args.strategy, strategy_options=_strategy_options(args),
                         coverage_from=_campaign_folders(args.coverage_from), known_bugs=_known_bugs(args),
                         reduce_seconds=args.reduce_budget, executor=args.executor, ray_address=args.ray_address,
                         devices=devices, targeted=not args.untargeted, allocate=not args.no_allocation,
                         opsets=_opsets(args))
    display = _Display()
    try:
        campaign = Campaign(cfg, display.update)
    except StoreError as e:
        raise UsageError(str(e)) from None
    campaign.start_backends()
    for why in campaign.disabled.values():
        print(f"disabled: {why}", file=sys.stderr)
    for line in skipped:  # cuda asked for where there is none
        print(f"skipped: {line}", file=sys.stderr)
    for why in campaign.device_notes.values():  # the device exists, but this backend cannot use it
        print(f"skipped: {why}: its variants there are skipped", file=sys.stderr)
    live = [b for b in campaign.backends if b != "reference"]
    if not live:
        raise UsageError("no backend under test could start (see the reasons above)")
    for line in campaign.warnings:
        print(line, file=sys.stderr)
    if cfg.targeted and campaign.unprofiled and args.probe_per_op > 0:
        from dlcfuzz.run.profile import profile_path

        _probe(campaign.unprofiled, out / "probes", specs, limits, args.probe_per_op, args.jobs, profile_path)
        campaign.load_profiles()
    print(f"campaign {out}: backends {', '.join(f'{b} {campaign.versions[b]}' for b in live)}"
          + (" (resuming)" if campaign.resumed else ""))
    display.devices = _variant_devices(campaign.variants, live)
    print(f"{_found_devices()}; {display.devices}")
    with display:
        progress = campaign.run()
    display.final(progress)
    _ray_summary(args, campaign, "tests")
    print(f"{bug_summary(out)}; list them with: dlcfuzz bugs {out}")
    return 0


def _frontends(text: str) -> list[str]:
    """The frontend backends of the compilers named for a migration (all must be installed)."""
    from dlcfuzz.backends import BUILTIN, load_backend
    from dlcfuzz.migrate.campaign import FRONTENDS, frontends

    names = _names(text)
    bad = [n for n in names if n not in FRONTENDS and n not in BUILTIN]
    if bad:
        raise UsageError(f"unknown backend {bad[0]!r} for migrate; known: {', '.join(FRONTENDS)} "
                         "(or a frontend: tvm-torch, openvino-torch, inductor-torch)")
    chosen = []
    for n in frontends(names):
        ok, why = load_backend(n).available()
        if not ok:
            raise UsageError(why)
        chosen.append(n)
    return chosen


def _limits_per_source(text: str) -> dict[str, int]:
    """'2' -> {'*': 2}; 'torch-opinfo=1,onnx-node=5' -> per source."""
    out: dict[str, int] = {}
    try:
        for part in text.split(","):
            source, _, n = part.rpartition("=")
            out[source.strip() or "*"] = int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or SOURCE=N,..., got {text!r}") from None
    if any(n < 1 for n in out.values()):
        raise argparse.ArgumentTypeError(f"limits must be at least 1, got {text!r}")
    return out


def cmd_migrate(args: argparse.Namespace) -> int:
    from dlcfuzz.migrate.campaign import Migration, MigrationConfig, summary
    from dlcfuzz.migrate.prioritize import STRATEGIES as ORDERS
    from dlcfuzz.migrate.sources import SOURCES, SourceError
    from dlcfuzz.run.store import StoreError

    sources = _names(args.source)
    for src in sources:
        if src not in SOURCES and not src.endswith(".sqlite"):
            raise UsageError(f"unknown source {src!r}; known: {', '.join(SOURCES)}, or a set recorded with "
                             "'dlcfuzz migrate record' (a .sqlite file)")
        if src.endswith(".sqlite") and not Path(src).is_file():
            raise UsageError(f"recorded instance set {src} does not exist (make one with 'dlcfuzz migrate record')")
    if args.prioritize not in ORDERS:
        raise UsageError(f"unknown --prioritize {args.prioritize!r}; known: {', '.join(ORDERS)}")
    if args.prioritize in ("total-cov", "additional-cov") and not args.coverage_from:
        raise UsageError(f"--prioritize {args.prioritize} orders by frontend coverage measured before: give "
                         "--coverage-from CAMPAIGN (a migration run with --measure-coverage)")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    _check_executor(args)
    out = Path(args.out)
    cfg = MigrationConfig(out, sources, _frontends(args.backends), args.prioritize, args.seed,
                          args.budget or None, args.max_tests, args.jobs, args.limit_per_op,
                          _phases(args), via_onnx=not args.no_onnx_export, measure_coverage=args.measure_coverage,
                          coverage_from=Path(args.coverage_from) if args.coverage_from else None,
                          known_bugs=_known_bugs(args), executor=args.executor, ray_address=args.ray_address)
    display = _Display()
    try:
        migration = Migration(cfg, display.update)
        harvested = migration.harvest(lambda st: print(
            f"harvested {st['source']}: {st['instances']} instances of {st['operators']} operators"
            + (f"; skipped {sum(st['skipped'].values())}" if st.get("skipped") else ""), flush=True))
        migration.start_backends()
        order = migration.order()
    except (StoreError, SourceError, ValueError) as e:
        raise UsageError(str(e).splitlines()[0]) from None
    for why in migration.disabled.values():
        print(f"disabled: {why}", file=sys.stderr)
    live = [b for b in migration.backends if b != "torch-library"]
    if not live:
        raise UsageError("no frontend under test could start (see the reasons above)")
    total = sum(h["instances"] for h in harvested.values())
    print(f"campaign {out}: {total} instances, order {args.prioritize}; frontends "
          + ", ".join(f"{b} {migration.versions[b]}" for b in live) + (" (resuming)" if migration.resumed else ""))
    with display:
        progress = migration.run(order)
    display.final(progress)
    _ray_summary(args, migration, "instances")
    s = summary(out)
    per_backend = ", ".join(f"{b} {n}" for b, n in s["bugs"].items()) or "none"
    print(f"{s['tests']} tests run, {s['discarded']} instances discarded by the library's own run; "
          f"distinct bugs: {sum(s['bugs'].values())} ({per_backend}); findings of bugs known upstream (not "
          f"re-reported): {s['known_upstream']}; list them with: dlcfuzz bugs {out}")
    return 0


def cmd_migrate_record(args: argparse.Namespace) -> int:
    from dlcfuzz.migrate.record import RecordError, record

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if command[:1] == ["pytest"]:
        command = command[1:]
    elif command[:3] in (["python", "-m", "pytest"], [sys.executable, "-m", "pytest"]):
        command = command[3:]
    elif command:
        raise UsageError(f"migrate record runs pytest: expected '-- pytest ARGS...', got {' '.join(command)!r}")
    if not command:
        raise UsageError("migrate record needs a test suite: dlcfuzz migrate record --library torch --out FILE "
                         "-- pytest path/to/tests")
    out = Path(args.out)
    try:
        got = record(args.library, out, command)
    except RecordError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    print(f"recorded {got['instances']} instances into {out} (pytest exit {got['exit']}); run them with: "
          f"dlcfuzz migrate --source {out} --out CAMPAIGN")
    return 0


def cmd_migrate_apfd(args: argparse.Namespace) -> int:
    from dlcfuzz.migrate.apfd import report

    folder = Path(args.campaign)
    if not (folder / "campaign.sqlite").is_file():
        raise UsageError(f"{folder} is not a campaign folder (no campaign.sqlite)")
    try:
        print(report(folder, runs=args.runs, seed=args.seed, library=args.library))
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    return 0


def _known_bugs(args: argparse.Namespace) -> list[Path]:
    """The --known-bugs files, checked now so that a malformed one fails before the campaign starts."""
    from dlcfuzz.run.known import KnownBugs, KnownBugsError

    paths = [Path(p) for p in args.known_bugs or []]
    try:
        KnownBugs.load(paths)
    except KnownBugsError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    return paths


def cmd_reduce(args: argparse.Namespace) -> int:
    from dlcfuzz.run.reduce import ReduceError, reduce_bundle

    folder = Path(args.bug_dir)
    try:
        say = (lambda text: print(text, flush=True)) if args.verbose else None
        r = reduce_bundle(folder, args.budget, progress=say)
    except ReduceError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    s = r.summary()
    first = s.get("first_diverging")
    print(f"reduced {folder}: {s['ops_before']} -> {s['ops_after']} operators ({', '.join(s['nodes_after'])}), "
          f"{s['seconds']:.1f}s; reduced case in {folder / 'reduced'}"
          + (f"; first diverging operator: {first['op']} ({first['node']})" if first else ""))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from dlcfuzz.report import ReportError, write_report

    folder = Path(args.campaign)
    try:
        path = write_report(folder, Path(args.out) if args.out else folder / "report.html")
    except ReportError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    print(f"wrote {path}")
    return 0


def _ray_summary(args: argparse.Namespace, campaign, what: str) -> None:
    if args.executor == "ray":
        ex = campaign.executor
        print(f"ray: {args.jobs} actors, {ex.replaced} replaced after dying, {ex.lost} {what} lost")


def _campaign_folders(names: list[str] | None) -> list[Path]:
    folders = [Path(n) for n in names or []]
    for f in folders:
        if not (f / "campaign.sqlite").is_file():
            raise UsageError(f"--coverage-from {f}: not a campaign folder (no campaign.sqlite)")
    return folders


def _open_store(folder: Path):
    from dlcfuzz.run.store import Store

    if not (folder / "campaign.sqlite").is_file():
        raise UsageError(f"{folder} is not a campaign folder (no campaign.sqlite)")
    return Store(folder)


def bug_summary(folder: Path) -> str:
    """One line: the compiler bugs per backend first, then baseline issues, exporter issues and
    declines, each counted apart."""
    store = _open_store(folder)
    try:
        per_backend = Counter(b["backend"] for b in store.bugs("compiler"))
        other = store.categories()
        merged = store.merged()
        declines = store.db.execute("SELECT COUNT(*) FROM outcomes WHERE unsupported = 1").fetchone()[0]
    finally:
        store.close()
    listed = ", ".join(f"{b} {n}" for b, n in sorted(per_backend.items())) or "none"
    return (f"compiler bugs: {sum(per_backend.values())} ({listed}); merged into a root cause: {merged}; "
            f"baseline issues: {other.get('baseline', 0)}; "
            f"exporter issues: {other.get('exporter', 0)}; rounding noise: {other.get('noise', 0)}; "
            f"undefined behaviour (e.g. integer overflow): {other.get('undefined', 0)}; "
            f"crashes a fresh process did not repeat: {other.get('unconfirmed', 0)}; "
            f"declines (unsupported, not bugs): {declines}")


def cmd_bugs(args: argparse.Namespace) -> int:
    folder = Path(args.campaign)
    if args.unclassified:
        return _unclassified(folder)
    category = next((c for c in ("baseline", "exporter", "noise", "unconfirmed") if getattr(args, c)), "compiler")
    store = _open_store(folder)
    try:
        bugs = store.bugs(category)
    finally:
        store.close()
    print(bug_summary(folder))
    if not bugs:
        print(f"no {category} {'bugs' if category == 'compiler' else 'issues'} found")
        return 0
    print(f"{'signature':<16}  {'backend':<10} {'oracle':<12} {'kind':<9} {'hits':>5}  title")
    for b in bugs:
        print(f"{b['signature']:<16}  {b['backend']:<10} {b['oracle']:<12} {b['kind']:<9} {b['hits']:>5}  "
              f"{b['title']}\n{'':<18}variants: {b['variants'] or b['variant']}; {folder / b['dir'] / 'repro.py'}")
        if b["same_root"]:
            print(f"{'':<18}same root cause: {b['same_root']}")
    return 0


def _unclassified(folder: Path) -> int:
    """Errors that no unsupported rule matched (so they were judged as crashes), by frequency: where
    new decline rules, or wrong ones, show."""
    from dlcfuzz.run.dedup import normalize

    store = _open_store(folder)
    try:
        rows = store.db.execute("SELECT backend, phase, error FROM outcomes WHERE status != 'ok' AND "
                                "status != 'skipped' AND unsupported = 0").fetchall()
    finally:
        store.close()
    counts = Counter((b, ph, normalize(e, lines=1)) for b, ph, e in rows)
    if not counts:
        print("no unclassified errors")
    for (backend, phase, message), n in counts.most_common():
        print(f"{n:>6}  {backend:<10} {phase:<8} {message[:160]}")
    return 0


class _Display:
    """Live progress: a rich table on a terminal, a line every 15 s otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.live = None
        self.last = 0.0
        self.devices = ""  # which devices the variants run on, shown under the live table

    def __enter__(self):
        if self.tty:
            from rich.live import Live

            self.live = Live(refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    @staticmethod
    def line(p) -> str:
        n = max(1, p.tests)
        kinds = ", ".join(f"{b}/{o}: {c} ({p.bugs[(b, o)]} distinct)" for (b, o), c in sorted(p.findings.items()))
        known = f"; known upstream (not re-reported): {sum(p.known.values())}" if p.known else ""
        return (f"{p.tests} tests, {p.rate:.2f} tests/s, valid {100 * p.valid / n:.1f}%, "
                f"finite {100 * p.finite / n:.1f}%; findings: {kinds or 'none'}{known}")

    def update(self, p) -> None:
        now = time.monotonic()
        if self.live is not None:
            from rich.table import Table

            t = Table(title=self.line(p).split(";")[0], caption=self.devices or None)
            for col in ("backend", "oracle", "findings", "distinct"):
                t.add_column(col)
            for (b, o), c in sorted(p.findings.items()):
                t.add_row(b, o, str(c), str(p.bugs[(b, o)]))
            for b, c in sorted(p.unsupported.items()):
                t.add_row(b, "unsupported", str(c), "")
            for b, st in sorted(p.backends.items()):
                t.add_row(b, "tests (useful, CPU s)", f"{st.tests} ({100 * st.useful_rate:.0f}%, {st.seconds:.0f} s)",
                          str(st.bugs))
            self.live.update(t)
        elif now - self.last > 15:
            self.last = now
            print(self.line(p), flush=True)

    def final(self, p) -> None:
        print(self.line(p))
        for line in backend_lines(p):
            print(line)


def backend_lines(p) -> list[str]:
    """Per backend: tests it ran (and was the target of), CPU seconds inside it, useful-test rate and new
    compiler bugs; then the tests without a baseline."""
    lines = [f"  {b:<10} {s.tests:>6} tests ({s.targeted} targeted), {s.seconds:8.1f} s CPU, "
             f"useful {100 * s.useful_rate:5.1f}%, {s.bugs} new bugs"
             f"{f', {3600 * s.bugs / s.seconds:.1f} per CPU-hour' if s.seconds else ''}"
             for b, s in sorted(p.backends.items())]
    if p.crash_only:
        lines.append(f"  {p.crash_only} tests had no baseline that could run them (crash-only tests)")
    return lines


def _progress(items, label: str, total: int):
    if not sys.stderr.isatty():
        return items
    from rich.progress import track

    return track(items, description=label, total=total, transient=True)


def _phase_options(p: argparse.ArgumentParser, compile_timeout: float) -> None:
    p.add_argument("--compile-timeout", type=float, default=compile_timeout, help="seconds per compile phase")
    p.add_argument("--run-timeout", type=float, default=30.0, help="seconds per run phase")
    p.add_argument("--memory-mb", type=int, default=8192, help="resident memory cap of one compiler worker")
    p.add_argument("--fixed-timeouts", action="store_true",
                   help="wait each phase's full limit; by default, once a backend completed 20 runs of a phase, "
                        "a run is a hang at 4x the slowest of them (at least 20 s, at most the limit)")


def _phases(args: argparse.Namespace):  # -> PhaseLimits (imported late: the worker module is not light)
    from dlcfuzz.run.worker import PhaseLimits

    if args.compile_timeout <= 0 or args.run_timeout <= 0 or args.memory_mb <= 0:
        raise UsageError("--compile-timeout, --run-timeout and --memory-mb must be positive")
    return PhaseLimits(compile=args.compile_timeout, run=args.run_timeout, memory_mb=args.memory_mb,
                       pace=0.0 if args.fixed_timeouts else PhaseLimits.pace)


def _generation_options(p: argparse.ArgumentParser, default_ops: tuple[int, int], strategies: tuple[str, ...],
                        default_opsets: str = "17") -> None:
    """The generator's options, shared by ``gen`` and ``fuzz``."""
    p.add_argument("--strategy", choices=strategies, default="isra",
                   help="isra: uniform operators; hirgen: coverage-guided; gencog: expressivity-directed; "
                        "guided: both; disruptive: each model breaks one constraint; declgen/randoop: Isra's baselines")
    p.add_argument("--p-rej", type=float, default=0.9,
                   help="gencog/guided: probability of dropping a call whose inputs and attributes were seen")
    p.add_argument("--temperature", type=float, default=0.2,
                   help="gencog/guided: softmax temperature of the operator choice")
    p.add_argument("--paths", action="store_true", help="hirgen/guided: also cover operator paths of length 3")
    p.add_argument("--ops", type=_op_range, default=default_ops, help="operator count range LB:UB")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opset", default=default_opsets,
                   help=f"opset of the models, or a range or list each model's opset is drawn from, e.g. 13-23 "
                        f"(compilers convert each operator version with its own code; default: {default_opsets})")
    p.add_argument("--max-rank", type=int, default=5)
    p.add_argument("--max-dim", type=int, default=5)
    p.add_argument("--max-numel", type=int, default=4096, help="element limit of every tensor")
    p.add_argument("--picking-rate", type=float, default=0.97, help="probability of reusing an existing tensor")
    p.add_argument("--init-rate", type=float, default=0.5, help="share of new weights that become initializers")
    p.add_argument("--runtime-consts", type=float, default=0.25,
                   help="share of constant-like inputs (shapes, axes, pads ...) taken at run time, pinned to their "
                        "value (0: all initializers)")
    p.add_argument("--constant-nodes", type=float, default=0.2,
                   help="share of constants written as Constant nodes (value=, or value_float(s)/value_int(s) where "
                        "the type fits) rather than initializers (0: all initializers)")
    p.add_argument("--dtypes", help="comma-separated dtypes to use (default: all)")
    p.add_argument("--op-set", help="comma-separated operators, or @file (default: all)")
    p.add_argument("--target", choices=["ort", "onnx"], default="ort",
                   help="narrow dtypes to what ONNX Runtime implements (ort) or to the ONNX spec only (onnx)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dlcfuzz", description="Find bugs in deep learning compilers.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    g = sub.add_parser("gen", help="generate valid computation graphs as ONNX models")
    g.add_argument("-n", type=int, default=10, help="number of graphs")
    g.add_argument("--out", required=True, help="output folder")
    g.add_argument("--for", dest="for_backend", metavar="BACKEND",
                   help="only calls this compiler takes, by its support profile (see 'dlcfuzz probe')")
    _generation_options(g, default_ops=(1, 30), strategies=STRATEGIES)
    g.set_defaults(func=cmd_gen)

    m = sub.add_parser("metrics", help="Isra's coverage metrics and GenCoG's diversity of a folder of ONNX models")
    m.add_argument("dir")
    m.add_argument("--op-set", help="operator corpus: comma-separated, or @file (default: all specs)")
    m.add_argument("--opset", type=int, default=17, help="opset whose schemas define allowed indegrees")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=cmd_metrics)

    f = sub.add_parser("fuzz", help="run a fuzzing campaign against compilers")
    f.add_argument("--backends", help="comma-separated: ort,tvm,openvino,inductor,iree,tvm-relax, a plugin's "
                                      "name (see 'dlcfuzz backends'), or module:Class "
                                      "(default: ort,tvm,openvino,inductor,iree)")
    f.add_argument("--budget", type=_budget, default=600.0, help="wall-clock budget, e.g. 90s, 10m, 2h")
    f.add_argument("--max-tests", type=int, help="stop after this many tests in the campaign")
    f.add_argument("--jobs", type=int, default=1, help="tests run at once (with --executor ray: Ray actors)")
    f.add_argument("--devices", help="comma-separated devices whose variants run: cpu, cuda (default: both; "
                                      "cuda only where a GPU and a backend's CUDA support exist)")
    _executor_options(f)
    f.add_argument("--out", required=True, help="campaign folder (rerun the same command to resume)")
    # 10 operators per graph: benchmarks/graph_size.py measured 351, 441, 434 and 678 distinct bugs per
    # CPU-hour at 5, 10, 20 and 40; at 40 the allocation spent 344 of 349 tests on OpenVINO, whose count was
    # inflated by node dumps that dedup now merges (70 of its crash messages are 33), so 10 it is
    _generation_options(f, default_ops=(10, 10), strategies=FUZZ_STRATEGIES, default_opsets="13-23")
    f.add_argument("--coverage-from", action="append", metavar="CAMPAIGN",
                   help="hirgen/gencog/guided: start coverage guidance from an earlier campaign's (repeatable)")
    f.add_argument("--reduce-budget", type=_budget, default=60.0,
                   help="reduce each new distinct bug right away, searching this long (0: do not; default 60s)")
    f.add_argument("--known-bugs", action="append", metavar="TOML",
                   help="bugs known upstream (counted, not re-reported), besides dlcfuzz's own list (repeatable)")
    _phase_options(f, compile_timeout=120.0)
    f.add_argument("--untargeted", action="store_true",
                   help="generate for ONNX in general, not each test for one compiler from its support profile")
    f.add_argument("--no-allocation", action="store_true",
                   help="run every backend and variant on every test, instead of sharing CPU by each one's yield")
    f.add_argument("--probe-per-op", type=int, default=2,
                   help="tests per operator when a compiler has no support profile for its version yet (0: none)")
    f.set_defaults(func=cmd_fuzz)

    pr = sub.add_parser("probe", help="build the support profiles of compilers (what each version accepts, "
                                      "per operator, dtype and attribute feature), cached per version")
    pr.add_argument("--backends", help="comma-separated (default: ort,tvm,openvino,inductor,iree)")
    pr.add_argument("--per-op", type=int, default=6, help="single-operator tests per operator")
    pr.add_argument("--jobs", type=int, default=1, help="tests run at once")
    pr.add_argument("--out", default="probes", help="folder for the probing campaigns (their findings are bugs)")
    pr.add_argument("--op-set", help="comma-separated operators, or @file (default: all)")
    pr.set_defaults(func=cmd_probe)

    mg = sub.add_parser("migrate", help="OPERA: migrate library tests into single-operator tests of compiler "
                                        "frontends (also: 'migrate record', 'migrate apfd')")
    mg.add_argument("--source", default="onnx-node,torch-opinfo",
                    help="comma-separated: onnx-node, torch-opinfo, or a .sqlite set from 'migrate record'")
    mg.add_argument("--backends", default="tvm,openvino,ort,inductor",
                    help="compilers (tvm, openvino, ort, inductor) or frontends (tvm-torch, openvino-torch, ...)")
    mg.add_argument("--out", required=True, help="campaign folder (rerun the same command to resume)")
    mg.add_argument("--prioritize", default="opera", help="opera, random, fast, total-cov or additional-cov")
    mg.add_argument("--budget", type=_budget, default=1800.0, help="wall-clock budget, e.g. 30m, 2h; 0: no limit")
    mg.add_argument("--max-tests", type=int, help="stop after this many instances")
    mg.add_argument("--limit-per-op", type=_limits_per_source, default={},
                    help="keep at most N instances per operator: N for every source, or SOURCE=N,...")
    mg.add_argument("--jobs", type=int, default=1, help="instances run at once (with --executor ray: Ray actors)")
    _executor_options(mg)
    mg.add_argument("--seed", type=int, default=0)
    mg.add_argument("--no-onnx-export", action="store_true", help="torch instances skip the ONNX frontends")
    mg.add_argument("--measure-coverage", action="store_true",
                    help="record the statements each frontend's Python code runs (for total-/additional-cov)")
    mg.add_argument("--coverage-from", metavar="CAMPAIGN", help="total-/additional-cov: coverage measured there")
    mg.add_argument("--known-bugs", action="append", metavar="TOML",
                    help="bugs known upstream (counted, not re-reported), besides dlcfuzz's own list (repeatable)")
    _phase_options(mg, compile_timeout=60.0)
    mg.set_defaults(func=cmd_migrate)

    rec = sub.add_parser("migrate-record", prog="dlcfuzz migrate record",
                         help="record operator instances while a pytest suite runs (dlcfuzz migrate record ...)")
    rec.add_argument("--library", default="torch", help="the library whose APIs are instrumented (torch)")
    rec.add_argument("--out", required=True, help="the instance set to write (.sqlite); appended to if it exists")
    rec.add_argument("command", nargs=argparse.REMAINDER, help="-- pytest ARGS...")
    rec.set_defaults(func=cmd_migrate_record)

    ap = sub.add_parser("migrate-apfd", prog="dlcfuzz migrate apfd",
                        help="APFD of each prioritization on a migration campaign (dlcfuzz migrate apfd ...)")
    ap.add_argument("campaign")
    ap.add_argument("--runs", type=int, default=5, help="repetitions of the random orders (random, fast)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--library", choices=("onnx", "torch"), help="only this library's migrated instances")
    ap.set_defaults(func=cmd_migrate_apfd)

    rd = sub.add_parser("reduce", help="reduce a bug bundle to a minimal case that keeps its signature")
    rd.add_argument("bug_dir", help="a bug bundle: CAMPAIGN/bugs/SIGNATURE")
    rd.add_argument("--budget", type=_budget, default=300.0, help="search time, e.g. 60s, 5m (default 5m)")
    rd.add_argument("-v", "--verbose", action="store_true", help="print each step")
    rd.set_defaults(func=cmd_reduce)

    r = sub.add_parser("report", help="write a self-contained HTML report of a campaign (needs dlcfuzz[report])")
    r.add_argument("campaign")
    r.add_argument("-o", "--out", help="the HTML file to write (default: CAMPAIGN/report.html)")
    r.set_defaults(func=cmd_report)

    bl = sub.add_parser("backends", help="list every backend (built in, and plugins of the entry-point group "
                                         "dlcfuzz.backends): version, variants, availability")
    bl.add_argument("--no-variants", action="store_true",
                    help="ask each backend in this process rather than in a worker (faster; no crash isolation)")
    bl.set_defaults(func=cmd_backends)

    b = sub.add_parser("bugs", help="list the distinct compiler bugs of a campaign (or its other issues)")
    b.add_argument("campaign")
    which = b.add_mutually_exclusive_group()
    which.add_argument("--baseline", action="store_true",
                       help="list the baseline issues instead: other compilers agree against the baseline")
    which.add_argument("--exporter", action="store_true",
                       help="list dlcfuzz's exporter issues instead (e.g. eager torch against the baseline)")
    which.add_argument("--noise", action="store_true",
                       help="list the rounding noise instead: ties that a comparison or rounding broke the other way")
    which.add_argument("--unconfirmed", action="store_true",
                       help="list the crashes a fresh process running the model alone did not repeat instead")
    which.add_argument("--unclassified", action="store_true",
                       help="errors no unsupported rule matched, by frequency (to review the decline rules)")
    b.set_defaults(func=cmd_bugs)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["migrate"] and argv[1:2] and argv[1] in ("record", "apfd"):
        argv = [f"migrate-{argv[1]}", *argv[2:]]  # 'migrate record' and 'migrate apfd' are commands of their own
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "n", 1) < 0:
            raise UsageError("-n must be >= 0")
        return args.func(args)
    except UsageError as e:
        print(f"dlcfuzz: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `dlcfuzz bugs X | head`
        sys.stderr.close()
        return 0
    except OSError as e:
        print(f"dlcfuzz: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
