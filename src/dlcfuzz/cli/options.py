"""Option parsing and validation shared by the commands: the parser class whose errors are one line
with exit code 2, and the options (generation, phases, executor, backends, devices) that several
commands take."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dlcfuzz.ir import DTYPES

if TYPE_CHECKING:  # the modules behind them load late: a command imports only what it runs
    from dlcfuzz.run.worker import PhaseLimits
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.spec import OpSpec


class UsageError(Exception):
    """Bad input from the user: reported in one line with exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are a UsageError (one line, exit 2) instead of usage and exit."""

    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the usage too)
        raise UsageError(f"{message} (see '{self.prog} --help')")


def op_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LB:UB (e.g. 1:30), got {text!r}") from None
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"need 1 <= LB <= UB, got {text!r}")
    return lo, hi


def split_names(text: str) -> list[str]:
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    return [n.strip() for n in text.replace("\n", ",").split(",") if n.strip()]


def unknown_names(names: list[str] | None, lookup: Callable[[str], object], missing: type[Exception]) -> list[str]:
    """The names in ``names`` that ``lookup`` does not know (it raises ``missing`` for them)."""
    unknown = []
    for n in names or []:
        try:
            lookup(n)
        except missing:
            unknown.append(n)
    return unknown


def resolve_op_set(names: list[str] | None) -> list[OpSpec]:
    from dlcfuzz.spec import REGISTRY, UnknownOperator, get, resolve_ops

    # a contrib operator by its qualified name, or by its type where that is unambiguous
    unknown = unknown_names(names, get, UnknownOperator)
    if unknown:
        raise UsageError(f"unknown operator(s) in --op-set: {', '.join(unknown)} "
                         f"(known: {len(REGISTRY)} operators, e.g. {', '.join(sorted(REGISTRY)[:5])}, ...)")
    return resolve_ops(names)


def opsets_of(args: argparse.Namespace) -> tuple[int, ...]:
    """``--opset``: one opset, or a range/list that each graph's opset is drawn from."""
    from dlcfuzz.export.onnx import MAX_OPSET, MIN_OPSET
    from dlcfuzz.gen.opsets import parse_opsets

    try:
        return parse_opsets(str(args.opset), MIN_OPSET, MAX_OPSET)
    except ValueError as e:
        raise UsageError(f"--opset: {e}; e.g. --opset 17 or --opset {MIN_OPSET}-{MAX_OPSET}") from None


def gen_options(args: argparse.Namespace) -> GenOptions:
    """The generator's options (limits, rates, opset, dtypes, target) from the command line, checked."""
    from dlcfuzz.solve import GenOptions

    dtypes = tuple(split_names(args.dtypes)) if args.dtypes else ()
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
                      opset=opsets_of(args)[0], dtypes=dtypes,
                      target=getattr(args, "target", "ort"))


def strategy_options(args: argparse.Namespace) -> dict:
    """The guided strategies' knobs given on the command line."""
    if args.strategy not in ("hirgen", "gencog", "guided"):
        return {}
    if not 0.0 <= args.p_rej <= 1.0 or args.temperature <= 0:
        raise UsageError("--p-rej must be within [0, 1] and --temperature above 0")
    return {"p_rej": args.p_rej, "temperature": args.temperature, "paths": args.paths}


def duration(text: str) -> float:
    """'90', '90s', '10m', '2h' -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a duration like 90s, 10m or 2h, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def backend_names(text: str | None) -> list[str]:
    from dlcfuzz.backends import BUILTIN, DEFAULT, UnknownBackend, load_backend, path_of, plugins

    names = split_names(text) if text else list(DEFAULT)
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


def usable_devices(text: str | None) -> tuple[tuple[str, ...], list[str]]:
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


def executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: worker processes on this machine; ray: one Ray actor per job on a Ray cluster, "
                        "results recorded here (needs dlcfuzz[ray])")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="with --executor ray: the cluster to join (e.g. auto, or HOST:6379; default: start a local "
                        "Ray instance)")


def check_executor(args: argparse.Namespace) -> None:
    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray")
    if args.executor == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise UsageError("--executor ray needs Ray: pip install 'dlcfuzz[ray]'")


def known_bug_files(args: argparse.Namespace) -> list[Path]:
    """The --known-bugs files, checked now so that a malformed one fails before the campaign starts."""
    from dlcfuzz.run.known import KnownBugs, KnownBugsError

    paths = [Path(p) for p in args.known_bugs or []]
    try:
        KnownBugs.load(paths)
    except KnownBugsError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    return paths


def campaign_folders(names: list[str] | None) -> list[Path]:
    folders = [Path(n) for n in names or []]
    for f in folders:
        if not (f / "campaign.sqlite").is_file():
            raise UsageError(f"--coverage-from {f}: not a campaign folder (no campaign.sqlite)")
    return folders


def phase_options(p: argparse.ArgumentParser, compile_timeout: float) -> None:
    p.add_argument("--compile-timeout", type=float, default=compile_timeout, help="seconds per compile phase")
    p.add_argument("--run-timeout", type=float, default=30.0, help="seconds per run phase")
    p.add_argument("--memory-mb", type=int, default=8192, help="resident memory cap of one compiler worker")
    p.add_argument("--fixed-timeouts", action="store_true",
                   help="wait each phase's full limit; by default, once a backend completed 20 runs of a phase, "
                        "a run is a hang at 4x the slowest of them (at least 20 s, at most the limit)")


def phase_limits(args: argparse.Namespace) -> PhaseLimits:  # imported late: the worker module is not light
    from dlcfuzz.run.worker import PhaseLimits

    if args.compile_timeout <= 0 or args.run_timeout <= 0 or args.memory_mb <= 0:
        raise UsageError("--compile-timeout, --run-timeout and --memory-mb must be positive")
    return PhaseLimits(compile=args.compile_timeout, run=args.run_timeout, memory_mb=args.memory_mb,
                       pace=0.0 if args.fixed_timeouts else PhaseLimits.pace)


def generation_options(p: argparse.ArgumentParser, default_ops: tuple[int, int], strategies: tuple[str, ...],
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
    p.add_argument("--ops", type=op_range, default=default_ops, help="operator count range LB:UB")
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
