"""``dlcfuzz migrate`` (OPERA): migrate library tests into single-operator tests of compiler frontends;
``migrate record`` records a pytest suite's operator instances, ``migrate apfd`` scores prioritizations."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlcfuzz.cli.display import Display, ray_summary
from dlcfuzz.cli.options import (
    UsageError,
    check_executor,
    duration,
    executor_options,
    known_bug_files,
    phase_limits,
    phase_options,
    split_names,
)


def register(sub: argparse._SubParsersAction) -> None:
    """``migrate``, ``migrate-record`` and ``migrate-apfd`` (main turns 'migrate record' into the second)."""
    mg = sub.add_parser("migrate", help="OPERA: migrate library tests into single-operator tests of compiler "
                                        "frontends (also: 'migrate record', 'migrate apfd')")
    mg.add_argument("--source", default="onnx-node,torch-opinfo",
                    help="comma-separated: onnx-node, torch-opinfo, or a .sqlite set from 'migrate record'")
    mg.add_argument("--backends", default="tvm,openvino,ort,inductor",
                    help="compilers (tvm, openvino, ort, inductor) or frontends (tvm-torch, openvino-torch, ...)")
    mg.add_argument("--out", required=True, help="campaign folder (rerun the same command to resume)")
    mg.add_argument("--prioritize", default="opera", help="opera, random, fast, total-cov or additional-cov")
    mg.add_argument("--budget", type=duration, default=1800.0, help="wall-clock budget, e.g. 30m, 2h; 0: no limit")
    mg.add_argument("--max-tests", type=int, help="stop after this many instances")
    mg.add_argument("--limit-per-op", type=_limits_per_source, default={},
                    help="keep at most N instances per operator: N for every source, or SOURCE=N,...")
    mg.add_argument("--jobs", type=int, default=1, help="instances run at once (with --executor ray: Ray actors)")
    executor_options(mg)
    mg.add_argument("--seed", type=int, default=0)
    mg.add_argument("--no-onnx-export", action="store_true", help="torch instances skip the ONNX frontends")
    mg.add_argument("--measure-coverage", action="store_true",
                    help="record the statements each frontend's Python code runs (for total-/additional-cov)")
    mg.add_argument("--coverage-from", metavar="CAMPAIGN", help="total-/additional-cov: coverage measured there")
    mg.add_argument("--known-bugs", action="append", metavar="TOML",
                    help="bugs known upstream (counted, not re-reported), besides dlcfuzz's own list (repeatable)")
    phase_options(mg, compile_timeout=60.0)
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


def _frontends(text: str) -> list[str]:
    """The frontend backends of the compilers named for a migration (all must be installed)."""
    from dlcfuzz.backends import BUILTIN, load_backend
    from dlcfuzz.migrate.campaign import FRONTENDS, frontends

    names = split_names(text)
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

    sources = split_names(args.source)
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
    check_executor(args)
    out = Path(args.out)
    cfg = MigrationConfig(out, sources, _frontends(args.backends), args.prioritize, args.seed,
                          args.budget or None, args.max_tests, args.jobs, args.limit_per_op,
                          phase_limits(args), via_onnx=not args.no_onnx_export, measure_coverage=args.measure_coverage,
                          coverage_from=Path(args.coverage_from) if args.coverage_from else None,
                          known_bugs=known_bug_files(args), executor=args.executor, ray_address=args.ray_address)
    display = Display()
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
    ray_summary(args, migration, "instances")
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
