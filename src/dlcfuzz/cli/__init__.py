"""The ``dlcfuzz`` command: wires the packages together, nothing more.

One module per command (``gen``, ``metrics``, ``fuzz``, ``probe``, ``migrate`` with ``migrate record`` and
``migrate apfd``, ``reduce``, ``retriage``, ``report``, ``backends``, ``bugs``,
``store check`` and ``store rebuild``), each registering its own subparser; ``options`` holds the option parsing
and checks they share, ``display`` what a running command shows."""

from __future__ import annotations

import argparse
import faulthandler
import sqlite3
import sys
from pathlib import Path

from dlcfuzz.cli import backends, bugs, fuzz, gen, metrics, migrate, probe, reduce, report, retriage, store
from dlcfuzz.cli.options import Parser, UsageError
from dlcfuzz.run.store import StoreError

__all__ = ["UsageError", "build_parser", "main"]

# the order of `dlcfuzz --help`
COMMANDS = (gen, metrics, fuzz, probe, migrate, reduce, retriage, report, backends, bugs, store)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dlcfuzz", description="Find bugs in deep learning compilers.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from dlcfuzz.cli import supervise

    # run as a program, a campaign runs in a child that is started again where it dies of a crash signal
    # (cli/supervise.py); called with its arguments (a test, a script), it runs here
    as_program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["migrate"] and argv[1:2] and argv[1] in ("record", "apfd"):
        argv = [f"migrate-{argv[1]}", *argv[2:]]  # 'migrate record' and 'migrate apfd' are commands of their own
    args = None
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "n", 1) < 0:
            raise UsageError("-n must be >= 0")
        if as_program and args.cmd == "fuzz" and not supervise.supervised():
            return supervise.supervise([sys.executable, "-m", "dlcfuzz.cli", *argv], args.budget, args.out)
        if supervise.supervised():
            # where a crash in native code ends the child, its Python stack says what the campaign was doing
            faulthandler.enable(file=sys.stderr, all_threads=False)
        return args.func(args)
    except (UsageError, StoreError) as e:  # a damaged, busy or too new store: one line too
        return _fail(str(e).splitlines()[0] if str(e) else type(e).__name__, args, e)
    except BrokenPipeError:  # e.g. `dlcfuzz bugs X | head`
        sys.stderr.close()
        return 0
    except OSError as e:
        return _fail(f"{e.strerror or e}: {e.filename or ''}".rstrip(": "), args, e)
    except sqlite3.DatabaseError as e:  # the store failed under a running command
        folder = _campaign_of(args)
        if any(s in str(e) for s in ("malformed", "not a database")) and folder is not None:
            return _fail(f"the campaign store {folder / 'campaign.sqlite'} is damaged ({e}); rebuild it from what "
                         f"is readable and the bug bundles with: dlcfuzz store rebuild {folder}", args, e)
        return _fail(f"{folder / 'campaign.sqlite' if folder else 'the campaign store'}: {e}", args, e)


def _campaign_of(args: argparse.Namespace | None) -> Path | None:
    """The campaign folder a command works on (``--out`` or its CAMPAIGN argument), if any."""
    text = getattr(args, "out", None) or getattr(args, "campaign", None)
    return Path(text) if isinstance(text, str) else None


def _fail(line: str, args: argparse.Namespace | None, e: BaseException) -> int:
    """One line on stderr, exit 2; a full (or read-only) file system says what to free, and that the
    same command resumes."""
    from dlcfuzz.run.guard import is_full, space_line

    folder = _campaign_of(args)
    if is_full(e) and folder is not None:
        line = space_line(folder, e)
    print(f"dlcfuzz: error: {line}", file=sys.stderr)
    return 2
