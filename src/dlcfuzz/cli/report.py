"""``dlcfuzz report``: a self-contained HTML report of a campaign."""

from __future__ import annotations

import argparse
from pathlib import Path

from dlcfuzz.cli.options import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="write a self-contained HTML report of a campaign (needs dlcfuzz[report])")
    r.add_argument("campaign")
    r.add_argument("-o", "--out", help="the HTML file to write (default: CAMPAIGN/report.html)")
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from dlcfuzz.report import ReportError, write_report

    folder = Path(args.campaign)
    try:
        path = write_report(folder, Path(args.out) if args.out else folder / "report.html")
    except ReportError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    print(f"wrote {path}")
    return 0
