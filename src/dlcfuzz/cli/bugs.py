"""``dlcfuzz bugs``: the distinct compiler bugs of a campaign (or its other issues), and the one-line
summary that ``fuzz`` and ``probe`` print at their end.

Bugs with one root cause are one entry (a root) with the others folded under it, the roots most
different first; ``--json`` prints every bug, listed or merged, for scripts.  The folding, the order
and every count come from ``run.roots`` (its docstring defines the distance), which the HTML report
reads too, so both count the same roots."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from dlcfuzz.cli.options import UsageError

if TYPE_CHECKING:
    from dlcfuzz.run.roots import BugList
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
    b.add_argument("--json", action="store_true",
                   help="print one JSON list of every bug, listed or merged (every category, or the one asked "
                        "for), each with its signature, root, category, backend, title and bundle")
    b.add_argument("-v", "--verbose", action="store_true",
                   help="list the bugs merged into each root cause under it (default: their count)")
    b.set_defaults(func=cmd_bugs)


def _open_store(folder: Path) -> Store:
    from dlcfuzz.run.store import Store, bundle_folders

    if not (folder / "campaign.sqlite").is_file() and not bundle_folders(folder):
        raise UsageError(f"{folder} is not a campaign folder (no campaign.sqlite)")
    # a damaged store (or bug bundles without one): StoreDamaged, one line; an archived campaign on a
    # read-only file system is read as it is
    return Store(folder, read_only=folder.is_dir() and not os.access(folder, os.W_OK))


def _read(folder: Path) -> tuple[BugList, int]:
    """The campaign's bugs (``run.roots.read``: folded, ordered, counted) and its declines."""
    from dlcfuzz.run.roots import read

    store = _open_store(folder)
    try:
        return read(store, folder), store.declines()
    finally:
        store.close()


def bug_summary(folder: Path) -> str:
    """One line: the compiler bugs (roots) per backend first, the bugs merged into a root apart, then
    baseline issues, exporter issues and declines, each counted apart (``run.roots.summary_line``: the
    same count as the listing, ``--json`` and the HTML report)."""
    from dlcfuzz.run.roots import summary_line

    return summary_line(*_read(folder))


def cmd_bugs(args: argparse.Namespace) -> int:
    from dlcfuzz.run.roots import summary_line

    folder = Path(args.campaign)
    if args.unclassified:
        return _unclassified(folder)
    chosen = next((c for c in ("baseline", "exporter", "noise", "unconfirmed") if getattr(args, c)), None)
    bugs, declines = _read(folder)
    if args.json:  # every bug, listed or merged (of the category asked for, if any), roots first
        json.dump([b.as_json(folder) for b in bugs.every(chosen)], sys.stdout, indent=1)
        print()
        return 0
    category = chosen or "compiler"
    roots = bugs.of(category)
    print(summary_line(bugs, declines))
    if not roots:
        print(f"no {category} {'bugs' if category == 'compiler' else 'issues'} found")
        return 0
    members = bugs.members(category)
    print(f"{len(roots)} {category} {'bugs' if category == 'compiler' else 'issues'} (roots, most different "
          f"first){f', {members} more merged into them' if members else ''}")
    print(f"{'signature':<16}  {'backend':<10} {'oracle':<12} {'kind':<9} {'hits':>5}  title")
    for b in roots:
        print(f"{b.signature:<16}  {b.backend:<10} {b.oracle:<12} {b.kind:<9} {b.hits:>5}  {b.title}\n"
              f"{'':<18}variants: {','.join(b.variants) or b.variant}; {folder / b.dir / 'repro.py'}")
        if not b.members:
            continue
        if not args.verbose:
            print(f"{'':<18}same root cause: {len(b.members)} more (-v lists them)")
            continue
        for m in b.members:
            print(f"{'':<18}+ {m.signature:<16}  {m.backend:<10} {m.oracle:<12} {m.kind:<9} {m.hits:>5}  "
                  f"{m.title}\n{'':<20}{folder / m.dir / 'repro.py'}")
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
