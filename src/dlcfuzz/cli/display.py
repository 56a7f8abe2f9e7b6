"""What a running command shows: the live campaign display, the per-backend summary lines, a progress
bar on a terminal, and the Ray executor's summary."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from dlcfuzz.run.campaign import Driver, Progress

T = TypeVar("T")


def ray_summary(args: argparse.Namespace, campaign: Driver, what: str) -> None:
    if args.executor == "ray":
        ex = campaign.executor
        print(f"ray: {args.jobs} actors, {ex.replaced} replaced after dying, {ex.lost} {what} lost")


class Display:
    """Live progress: a rich table on a terminal, a line every 15 s otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.live = None
        self.last = 0.0
        self.devices = ""  # which devices the variants run on, shown under the live table

    def __enter__(self) -> Display:
        if self.tty:
            from rich.live import Live

            self.live = Live(refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    @staticmethod
    def line(p: Progress) -> str:
        n = max(1, p.tests)
        kinds = ", ".join(f"{b}/{o}: {c} ({p.bugs[(b, o)]} distinct)" for (b, o), c in sorted(p.findings.items()))
        known = f"; known upstream (not re-reported): {sum(p.known.values())}" if p.known else ""
        return (f"{p.tests} tests, {p.rate:.2f} tests/s, valid {100 * p.valid / n:.1f}%, "
                f"finite {100 * p.finite / n:.1f}%; findings: {kinds or 'none'}{known}")

    def update(self, p: Progress) -> None:
        now = time.monotonic()
        if self.live is not None:
            from rich.table import Table

            t = Table(title=self.line(p).split(";")[0], caption=self.devices or None)
            for col in ("backend", "oracle", "findings", "distinct"):
                t.add_column(col)
            for (b, o), c in sorted(p.findings.items()):
                t.add_row(b, o, str(c), str(p.bugs[(b, o)]))
            for b, c in sorted(p.unsupported.items()):
                t.add_row(b, "unsupported", str(c), "")
            for b, st in sorted(p.backends.items()):
                t.add_row(b, "tests (useful, CPU s)", f"{st.tests} ({100 * st.useful_rate:.0f}%, {st.seconds:.0f} s)",
                          str(st.bugs))
            self.live.update(t)
        elif now - self.last > 15:
            self.last = now
            print(self.line(p), flush=True)

    def final(self, p: Progress) -> None:
        print(self.line(p))
        for line in backend_lines(p):
            print(line)


def backend_lines(p: Progress) -> list[str]:
    """Per backend: tests it ran (and was the target of), CPU seconds inside it, useful-test rate and new
    compiler bugs; then the tests without a baseline."""
    lines = [f"  {b:<10} {s.tests:>6} tests ({s.targeted} targeted), {s.seconds:8.1f} s CPU, "
             f"useful {100 * s.useful_rate:5.1f}%, {s.bugs} new bugs"
             f"{f', {3600 * s.bugs / s.seconds:.1f} per CPU-hour' if s.seconds else ''}"
             for b, s in sorted(p.backends.items())]
    if p.crash_only:
        lines.append(f"  {p.crash_only} tests had no baseline that could run them (crash-only tests)")
    return lines


def progress(items: Iterable[T], label: str, total: int) -> Iterable[T]:
    if not sys.stderr.isatty():
        return items
    from rich.progress import track

    return track(items, description=label, total=total, transient=True)
