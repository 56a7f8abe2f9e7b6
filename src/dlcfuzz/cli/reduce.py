"""``dlcfuzz reduce``: reduce a bug bundle to a minimal case that keeps its signature."""

from __future__ import annotations

import argparse
from pathlib import Path

from dlcfuzz.cli.options import UsageError, duration


def register(sub: argparse._SubParsersAction) -> None:
    rd = sub.add_parser("reduce", help="reduce a bug bundle to a minimal case that keeps its signature")
    rd.add_argument("bug_dir", help="a bug bundle: CAMPAIGN/bugs/SIGNATURE")
    rd.add_argument("--budget", type=duration, default=300.0, help="search time, e.g. 60s, 5m (default 5m)")
    rd.add_argument("-v", "--verbose", action="store_true", help="print each step")
    rd.set_defaults(func=cmd_reduce)


def cmd_reduce(args: argparse.Namespace) -> int:
    from dlcfuzz.run.reduce import ReduceError, reduce_bundle

    folder = Path(args.bug_dir)
    if (folder / "program.py").is_file():  # a torch-native program's bug: the program reducer
        return _reduce_program(folder, args.budget)
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


def _reduce_program(folder: Path, budget: float) -> int:
    from dlcfuzz.run.reduce import ReduceError
    from dlcfuzz.run.torch_campaign import reduce_program_bundle

    try:
        before, after = reduce_program_bundle(folder, budget)
    except ReduceError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    print(f"reduced {folder}: {before} -> {after} torch calls; program in {folder / 'program.py'}"
          + (f" (the campaign's in {folder / 'original_program.py'})" if after < before else " (nothing to drop)"))
    return 0
