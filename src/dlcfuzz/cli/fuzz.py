"""``dlcfuzz fuzz``: a fuzzing campaign against compilers, with its live display."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dlcfuzz.cli.bugs import bug_summary
from dlcfuzz.cli.display import Display, ray_summary
from dlcfuzz.cli.options import (
    UsageError,
    backend_names,
    campaign_folders,
    check_executor,
    duration,
    executor_options,
    gen_options,
    generation_options,
    known_bug_files,
    opsets_of,
    phase_limits,
    phase_options,
    resolve_op_set,
    split_names,
    strategy_options,
    usable_devices,
)
from dlcfuzz.cli.probe import probe_and_report
from dlcfuzz.gen import FUZZ_STRATEGIES

if TYPE_CHECKING:
    from dlcfuzz.backends.base import Variant
    from dlcfuzz.spec import OpSpec


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("fuzz", help="run a fuzzing campaign against compilers")
    f.add_argument("--backends", help="comma-separated: ort,tvm,openvino,inductor,iree,tvm-relax, a plugin's "
                                      "name (see 'dlcfuzz backends'), or module:Class "
                                      "(default: ort,tvm,openvino,inductor,iree); with inductor, torch-native "
                                      "programs run too (alone: programs only)")
    f.add_argument("--budget", type=duration, default=600.0, help="wall-clock budget, e.g. 90s, 10m, 2h")
    f.add_argument("--max-tests", type=int, help="stop after this many tests in the campaign")
    f.add_argument("--jobs", type=int, default=1, help="tests run at once (with --executor ray: Ray actors)")
    f.add_argument("--devices", help="comma-separated devices whose variants run: cpu, cuda (default: both; "
                                      "cuda only where a GPU and a backend's CUDA support exist)")
    executor_options(f)
    f.add_argument("--out", required=True, help="campaign folder (rerun the same command to resume)")
    # 10 operators per graph: benchmarks/graph_size.py measured 351, 441, 434 and 678 distinct bugs per
    # CPU-hour at 5, 10, 20 and 40; at 40 the allocation spent 344 of 349 tests on OpenVINO, whose count was
    # inflated by node dumps that dedup now merges (70 of its crash messages are 33), so 10 it is
    generation_options(f, default_ops=(10, 10), strategies=FUZZ_STRATEGIES, default_opsets="13-23")
    f.add_argument("--coverage-from", action="append", metavar="CAMPAIGN",
                   help="hirgen/gencog/guided: start coverage guidance from an earlier campaign's (repeatable)")
    f.add_argument("--reduce-budget", type=duration, default=60.0,
                   help="reduce each new distinct bug right away, searching this long (0: do not; default 60s)")
    f.add_argument("--known-bugs", action="append", metavar="TOML",
                   help="bugs known upstream (counted, not re-reported), besides dlcfuzz's own list (repeatable)")
    phase_options(f, compile_timeout=120.0)
    f.add_argument("--untargeted", action="store_true",
                   help="generate for ONNX in general, not each test for one compiler from its support profile")
    f.add_argument("--no-allocation", action="store_true",
                   help="run every backend and variant on every test, instead of sharing CPU by each one's yield "
                        "(torch-native programs, with Inductor beside other backends: every few tests, in turn)")
    f.add_argument("--probe-per-op", type=int, default=2,
                   help="tests per operator when a compiler has no support profile for its version yet (0: none)")
    f.set_defaults(func=cmd_fuzz)


def _found_devices() -> str:
    """"devices found: cpu, cuda (NVIDIA H100)" or "devices found: cpu (cuda: none: no CUDA driver ...)"."""
    from dlcfuzz.backends.devices import found

    here = found()
    cuda = here["cuda"]
    return "devices found: cpu" + (f" (cuda: {cuda})" if cuda.startswith("none") else f", cuda ({cuda})")


def _variant_devices(variants: dict[str, dict[str, Variant]], live: list[str]) -> str:
    """"variants by device: cpu: ort 4, tvm 4; cuda: tvm 1" for the backends under test."""
    from dlcfuzz.backends.devices import DEVICES, device_of

    parts = []
    for d in DEVICES:
        counts = [f"{b} {n}" for b in live if (n := sum(device_of(v.options) == d for v in variants[b].values()))]
        if counts:
            parts.append(f"{d}: {', '.join(counts)}")
    return "variants by device: " + "; ".join(parts)


def _supported_specs(specs: list[OpSpec], backends: list[str]) -> list[OpSpec]:
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


def _program_specs(args: argparse.Namespace, backends: list[str]) -> list[OpSpec]:
    """The torch operators of the torch-native programs a campaign whose backends include Inductor runs
    beside its ONNX graphs (the program backend is one more arm of the allocation): all of them, or
    none where ``--op-set`` names the ONNX operators the campaign is restricted to."""
    if args.op_set:
        print("torch-native programs: none (--op-set names ONNX operators; --backends inductor alone runs "
              "programs of the torch operators it names)", file=sys.stderr)
        return []
    from dlcfuzz.spec.torch import resolve_torch_ops

    return resolve_torch_ops(None)


def cmd_fuzz(args: argparse.Namespace) -> int:
    from dlcfuzz.cli.supervise import remaining
    from dlcfuzz.run.campaign import Campaign, CampaignConfig
    from dlcfuzz.run.store import StoreError

    args.budget = remaining(args.budget)  # restarted after a crash: what is left of the budget

    limits = gen_options(args)
    backends = backend_names(args.backends)
    from dlcfuzz.run.program_frontends import FRONTENDS, frontends_only
    from dlcfuzz.run.torch_campaign import PROGRAMS_ONLY, runs_programs, wants_programs

    if frontends_only(backends) or wants_programs(backends):  # torch-native programs only (cli/torch_programs.py)
        from dlcfuzz.cli.torch_programs import cmd_fuzz_programs

        return cmd_fuzz_programs(args, backends)
    torch_only = [b for b in backends if b in FRONTENDS or b in PROGRAMS_ONLY]
    if torch_only:  # they take no ONNX graph (fed one, each test was a false crash)
        raise UsageError(f"{', '.join(torch_only)} run torch-native programs only: name them alone or with "
                         "inductor, and the ONNX compilers in a campaign of their own")
    specs = _supported_specs(resolve_op_set(split_names(args.op_set) if args.op_set else None), backends)
    program_specs = _program_specs(args, backends) if runs_programs(backends) else []
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    check_executor(args)
    devices, skipped = usable_devices(args.devices)
    out = Path(args.out)
    cfg = CampaignConfig(out, backends, specs, args.budget, args.max_tests, args.jobs, args.seed, args.ops,
                         limits, phase_limits(args), strategy=args.strategy, strategy_options=strategy_options(args),
                         coverage_from=campaign_folders(args.coverage_from), known_bugs=known_bug_files(args),
                         reduce_seconds=args.reduce_budget, executor=args.executor, ray_address=args.ray_address,
                         devices=devices, targeted=not args.untargeted, allocate=not args.no_allocation,
                         opsets=opsets_of(args), program_specs=program_specs)
    display = Display()
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

        probe_and_report(campaign.unprofiled, out / "probes", specs, limits, args.probe_per_op, args.jobs, profile_path)
        campaign.load_profiles()
    if cfg.targeted and campaign.unprobed and args.probe_per_op > 0:  # a profile admits only what was probed
        from dlcfuzz.run.profile import profile_path

        for name, unknown in sorted(campaign.unprobed.items()):
            probe_and_report([name], out / "probes", [s for s in specs if s.op in unknown], limits, args.probe_per_op,
                             args.jobs, profile_path)
        campaign.load_profiles()
    programs = campaign.program_backend if campaign.program_backend in campaign.backends else None
    print(f"campaign {out}: backends {', '.join(f'{b} {campaign.versions[b]}' for b in live)}"
          + (f" ({programs}: torch-native programs of {len(program_specs)} torch operators, beside the ONNX graphs)"
             if programs else "") + (" (resuming)" if campaign.resumed else ""))
    display.devices = _variant_devices(campaign.variants, live)
    print(f"{_found_devices()}; {display.devices}")
    with display:
        progress = campaign.run()
    display.final(progress)
    ray_summary(args, campaign, "tests")
    print(f"{bug_summary(out)}; list them with: dlcfuzz bugs {out}")
    return 0
