"""The ``dlcfuzz`` command: wires the packages together, nothing more.

One module per command (``gen``, ``metrics``, ``fuzz``, ``probe``, ``migrate`` with ``migrate record`` and
``migrate apfd``, ``reduce``, ``report``, ``backends``, ``bugs``), each registering its own subparser;
``options`` holds the option parsing and checks they share, ``display`` what a running command shows."""

from __future__ import annotations

import argparse
import sys

from dlcfuzz.cli import backends, bugs, fuzz, gen, metrics, migrate, probe, reduce, report
from dlcfuzz.cli.options import Parser, UsageError

__all__ = ["UsageError", "build_parser", "main"]

# the order of `dlcfuzz --help`
COMMANDS = (gen, metrics, fuzz, probe, migrate, reduce, report, backends, bugs)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dlcfuzz", description="Find bugs in deep learning compilers.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["migrate"] and argv[1:2] and argv[1] in ("record", "apfd"):
        argv = [f"migrate-{argv[1]}", *argv[2:]]  # 'migrate record' and 'migrate apfd' are commands of their own
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "n", 1) < 0:
            raise UsageError("-n must be >= 0")
        return args.func(args)
    except UsageError as e:
        print(f"dlcfuzz: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `dlcfuzz bugs X | head`
        sys.stderr.close()
        return 0
    except OSError as e:
        print(f"dlcfuzz: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
