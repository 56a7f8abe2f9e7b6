"""torch-native programs on the command line: ``dlcfuzz gen --for inductor`` writes standalone programs
(``gNNNNN.py``: ``Model`` and ``make_inputs()``), and ``dlcfuzz fuzz --backends inductor`` runs a
campaign of them (``run/torch_campaign.py``).  ``--op-set`` then names torch operators (``narrow``,
``torch.index_put_``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from dlcfuzz.cli.options import UsageError, split_names, unknown_names

PROGRAM_TARGETS = ("inductor", "inductor-program")
PROGRAM_STRATEGIES = ("isra", "feedback")  # uniform draws, or compiler-feedback guidance (gen/torch_program.py)


def resolve_torch_op_set(text: str | None) -> list:
    """The torch operators named in ``--op-set`` (all when absent); an unknown one is a usage error."""
    from dlcfuzz.spec.torch import TORCH_REGISTRY, UnknownTorchOperator, get_torch, resolve_torch_ops

    names = split_names(text) if text else None
    unknown = unknown_names(names, get_torch, UnknownTorchOperator)
    if unknown:
        raise UsageError(f"unknown torch operator(s) in --op-set: {', '.join(unknown)} (known: {len(TORCH_REGISTRY)} "
                         f"torch operators, e.g. {', '.join(sorted(TORCH_REGISTRY)[:4])}, ...)")
    return resolve_torch_ops(names)


def cmd_gen_programs(args: argparse.Namespace) -> int:
    """``gen --for inductor``: n standalone torch programs, each runnable without dlcfuzz."""
    from dlcfuzz.export.torch_program import to_program_source
    from dlcfuzz.gen.torch_program import TorchProgramGenerator
    from dlcfuzz.seeds import derive_seed

    specs = resolve_torch_op_set(args.op_set)
    gen = TorchProgramGenerator(specs, args.ops)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ops: Counter[str] = Counter()
    start = time.perf_counter()
    for i in range(args.n):
        g = gen.generate(derive_seed(args.seed, i))
        ops.update(n.op for n in g.nodes)
        (out / f"g{i:05d}.py").write_text(to_program_source(g))
    st = gen.stats
    (out / "summary.json").write_text(json.dumps({
        "programs": args.n, "language": "torch", "seed": args.seed, "ops": list(args.ops),
        "insertions": st.insertions, "retries": st.retries, "operators": dict(sorted(ops.items()))}, indent=1))
    print(f"wrote {args.n} torch programs ({st.insertions} calls, {len(ops)} operators, {st.retries} retries) "
          f"to {out} in {time.perf_counter() - start:.1f}s; run one with: python {out}/g00000.py")
    return 0


def cmd_fuzz_programs(args: argparse.Namespace, backends: list[str] | None = None) -> int:
    """``fuzz --backends inductor``: a torch-program campaign against torch.compile; with the PyTorch
    frontends (``--backends tvm-torch``, ``openvino-torch``, with ``inductor`` or not), each program on each of
    them (``run/program_frontends.py``)."""
    from dlcfuzz.cli.bugs import bug_summary
    from dlcfuzz.cli.display import Display
    from dlcfuzz.cli.options import known_bug_files, phase_limits
    from dlcfuzz.gen.torch_program import TORCH_LIMITS
    from dlcfuzz.run.campaign import CampaignConfig
    from dlcfuzz.run.program_frontends import FrontendProgramCampaign, frontends_only, program_backends
    from dlcfuzz.run.store import StoreError
    from dlcfuzz.run.torch_campaign import BACKEND, TorchProgramCampaign

    specs = resolve_torch_op_set(args.op_set)
    if args.strategy not in PROGRAM_STRATEGIES:
        raise UsageError(f"--strategy {args.strategy} makes ONNX graphs; torch-native programs take "
                         f"{' or '.join(PROGRAM_STRATEGIES)}")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    out = Path(args.out)
    frontends = backends is not None and frontends_only(backends)
    names = program_backends(backends) if frontends and backends is not None else [BACKEND]
    cfg = CampaignConfig(out, names, specs, args.budget, args.max_tests, args.jobs, args.seed, args.ops,
                         TORCH_LIMITS, phase_limits(args), strategy=args.strategy, known_bugs=known_bug_files(args),
                         reduce_seconds=args.reduce_budget, targeted=False)
    display = Display()
    try:
        campaign = (FrontendProgramCampaign if frontends else TorchProgramCampaign)(cfg, display.update, specs)
    except StoreError as e:
        raise UsageError(str(e)) from None
    campaign.start_backends()
    for why in campaign.disabled.values():
        print(f"disabled: {why}", file=sys.stderr)
    started = [b for b in names if b in campaign.backends]
    if not started:
        raise UsageError(f"{' nor '.join(names)} could start (see the reason above)")
    print(f"campaign {out}: torch-native programs ({len(specs)} torch operators) on "
          f"{', '.join(f'{b} {campaign.versions[b]}' for b in started)}" + (" (resuming)" if campaign.resumed else ""))
    display.devices = "; ".join(f"{b} variants: {', '.join(campaign.variants[b])}" for b in started)
    with display:
        progress = campaign.run()
    display.final(progress)
    print(f"{bug_summary(out)}; list them with: dlcfuzz bugs {out}")
    return 0
