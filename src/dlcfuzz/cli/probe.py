"""``dlcfuzz probe``: build the support profiles of compilers, cached per version."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dlcfuzz.cli.bugs import bug_summary
from dlcfuzz.cli.options import UsageError, backend_names, resolve_op_set, split_names

if TYPE_CHECKING:
    from dlcfuzz.solve import GenOptions
    from dlcfuzz.spec import OpSpec


def register(sub: argparse._SubParsersAction) -> None:
    pr = sub.add_parser("probe", help="build the support profiles of compilers (what each version accepts, "
                                      "per operator, dtype and attribute feature), cached per version")
    pr.add_argument("--backends", help="comma-separated (default: ort,tvm,openvino,inductor,iree)")
    pr.add_argument("--per-op", type=int, default=6, help="single-operator tests per operator")
    pr.add_argument("--jobs", type=int, default=1, help="tests run at once")
    pr.add_argument("--out", default="probes", help="folder for the probing campaigns (their findings are bugs)")
    pr.add_argument("--op-set", help="comma-separated operators, or @file (default: all)")
    pr.set_defaults(func=cmd_probe)


def cmd_probe(args: argparse.Namespace) -> int:
    from dlcfuzz.run.profile import profile_path
    from dlcfuzz.solve import GenOptions

    backends = backend_names(args.backends)
    if args.per_op < 1 or args.jobs < 1:
        raise UsageError("--per-op and --jobs must be at least 1")
    specs = resolve_op_set(split_names(args.op_set) if args.op_set else None)
    return probe_and_report(backends, Path(args.out), specs, GenOptions(), args.per_op, args.jobs, profile_path)


def probe_and_report(backends: list[str], out: Path, specs: list[OpSpec], limits: GenOptions, per_op: int, jobs: int,
                     where: Callable[[str, str], Path]) -> int:
    """Probes ``backends`` and prints, per compiler, what its profile declines and where it is cached."""
    from dlcfuzz.run.probe import probe

    print(f"probing {', '.join(backends)}: {per_op} single-operator tests per operator", file=sys.stderr)
    campaigns, profiles = probe(backends, out, specs, limits, per_op, jobs)
    if not campaigns:  # none of the operators can be generated at these settings: nothing was probed
        print(f"nothing to probe: none of {len(specs)} operator(s) can be generated here", file=sys.stderr)
        return 0
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
