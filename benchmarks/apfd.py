"""OPERA's RQ2 on an executed migration campaign: APFD of every prioritization strategy per backend.

    python benchmarks/apfd.py CAMPAIGN [--runs 5] [--seed 0] [--plot curves.png]

CAMPAIGN is the folder of a finished ``dlcfuzz migrate`` run (its campaign.sqlite: the executed tests
with their durations, findings and, with --measure-coverage, frontend coverage).  Replays opera, random,
fast, total-cov and additional-cov over those facts (random and fast over --runs seeds) and prints the
APFD table (OPERA's Table II), the time each strategy needs to find all (and half of the) bugs, and the
improvement of opera over each baseline.  The logic lives in ``dlcfuzz.migrate.apfd``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dlcfuzz.migrate.apfd import plot_curves, report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("campaign", type=Path)
    p.add_argument("--runs", type=int, default=5, help="seeds for random and fast (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--library", choices=("onnx", "torch"), help="only this library's instances (OPERA orders "
                   "each frontend's own migrated set)")
    p.add_argument("--plot", type=Path, default=None, help="also draw bugs over time (needs matplotlib)")
    a = p.parse_args()
    if a.runs < 1:
        p.error("--runs must be at least 1")
    try:
        print(report(a.campaign, runs=a.runs, seed=a.seed, library=a.library))
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"apfd: {e}") from None
    if a.plot is not None:
        out = plot_curves(a.campaign, a.plot, seed=a.seed, library=a.library)
        print(f"\nplot: {out}" if out else "\nplot skipped: matplotlib is not installed")


if __name__ == "__main__":
    main()
