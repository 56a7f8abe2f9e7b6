"""``dlcfuzz store check`` and ``dlcfuzz store rebuild``: whether a campaign's store is sound, and
rebuilding it from what SQLite can still read and from the bug bundles (which are the truth: the store
is their index)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dlcfuzz.cli.options import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("store", help="check a campaign's store, or rebuild it from what is readable and the bug "
                                     "bundles")
    which = s.add_subparsers(dest="store_cmd", required=True, parser_class=type(s))
    c = which.add_parser("check", help="say in one line whether the store is sound (exit 0) or not (exit 1)")
    c.add_argument("campaign")
    c.set_defaults(func=cmd_check)
    r = which.add_parser("rebuild", help="rebuild the store: the old file kept aside (renamed), every readable "
                                         "row copied, then every bug bundle it lacks listed again")
    r.add_argument("campaign")
    r.add_argument("--force", action="store_true", help="rebuild a store that is sound too")
    r.set_defaults(func=cmd_rebuild)


def _campaign(text: str) -> Path:
    from dlcfuzz.run.store import STORE_FILE

    folder = Path(text)
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such campaign folder")
    if not (folder / STORE_FILE).exists() and not (folder / "bugs").is_dir():
        raise UsageError(f"{folder} is not a campaign folder (no {STORE_FILE}, no bugs/)")
    return folder


def cmd_check(args: argparse.Namespace) -> int:
    from dlcfuzz.run.store import STORE_FILE, StoreReader, store_problem

    folder = _campaign(args.campaign)
    problem = store_problem(folder, thorough=True)
    if problem is not None:
        print(f"{folder / STORE_FILE}: damaged ({problem}); rebuild it with: dlcfuzz store rebuild {folder}")
        return 1
    store = StoreReader(folder)  # a store of a later dlcfuzz is refused here (one line, exit 2)
    try:
        tests, bugs = len(store.tests()), len(store.bug_rows())
        schema = store.meta_value("schema") or "1"
    finally:
        store.close()
    print(f"{folder / STORE_FILE}: sound (integrity check ok; schema {schema}; {tests} tests, {bugs} bugs)")
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from dlcfuzz.cli.bugs import bug_summary
    from dlcfuzz.run.store import STORE_FILE, rebuild_store, store_problem

    folder = _campaign(args.campaign)
    problem = store_problem(folder, thorough=True)
    if problem is None and not args.force:
        print(f"{folder / STORE_FILE}: sound, nothing to rebuild (--force rebuilds it anyway)")
        return 0
    done = rebuild_store(folder)
    if done.kept is not None:
        print(f"kept the old store as {done.kept}")
    read = ", ".join(f"{t} {n}" for t, n in done.rows.items()) or "none"
    print(f"rows read back: {read}")
    for table, why in done.unreadable.items():
        print(f"  nothing read from the old file: {why}" if table == "*" else
              f"  {table}: a scan stopped at: {why} (the readable rows on either side were kept)")
    print(f"bugs restored from their bundles: {done.from_bundles}; bugs in the store: {done.bugs}")
    for line in done.bad_bundles:
        print(f"  unreadable bundle: {line}")
    print(f"{bug_summary(folder)}; list them with: dlcfuzz bugs {folder}")
    return 0
