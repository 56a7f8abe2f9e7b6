"""``dlcfuzz bugs``: the distinct compiler bugs of a campaign (or its other issues), and the one-line
summary that ``fuzz`` and ``probe`` print at their end."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from dlcfuzz.cli.options import UsageError

if TYPE_CHECKING:
    from dlcfuzz.run.store import Store


def register(sub: argparse._SubParsersAction) -> None:
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


def _open_store(folder: Path) -> Store:
    from dlcfuzz.run.store import Store, bundle_folders

    if not (folder / "campaign.sqlite").is_file() and not bundle_folders(folder):
        raise UsageError(f"{folder} is not a campaign folder (no campaign.sqlite)")
    # a damaged store (or bug bundles without one): StoreDamaged, one line; an archived campaign on a
    # read-only file system is read as it is
    return Store(folder, read_only=folder.is_dir() and not os.access(folder, os.W_OK))


def bug_summary(folder: Path) -> str:
    """One line: the compiler bugs per backend first, then baseline issues, exporter issues and
    declines, each counted apart."""
    store = _open_store(folder)
    try:
        per_backend = Counter(b["backend"] for b in store.bugs("compiler"))
        other = store.categories()
        merged = store.merged()
        declines = store.declines()
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
        rows = store.unclassified_errors()
    finally:
        store.close()
    counts = Counter((b, ph, normalize(e, lines=1)) for b, ph, e in rows)
    if not counts:
        print("no unclassified errors")
    for (backend, phase, message), n in counts.most_common():
        print(f"{n:>6}  {backend:<10} {phase:<8} {message[:160]}")
    return 0
