"""Distinct compiler bugs per CPU-hour by graph size: the default (targeted) campaign at 5, 10, 20 and
40 operators per graph, each ``dlcfuzz fuzz --ops N:N --budget B --jobs J``, one after the other.

    python benchmarks/graph_size.py --budget 5m --jobs 2 --out /tmp/sizes [--sizes 5,10,20,40] [-- fuzz args]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ab_campaign import ROOT, run_campaign, show, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5,10,20,40")
    ap.add_argument("--budget", default="5m")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("extra", nargs="*", help="more fuzz arguments (after --)")
    args = ap.parse_args()
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        folder = args.out / f"ops{n}"
        cpu = run_campaign(ROOT / "src", folder, args.budget, args.jobs, ["--ops", f"{n}:{n}", *args.extra])
        s = summary(folder)
        show(f"{n} operators per graph", s, cpu)
        rows.append((n, s["tests"], s["bugs"], cpu))
    print(f"\n{'ops':>4} {'tests':>6} {'bugs':>5} {'CPU s':>7} {'bugs/CPU-h':>11}")
    for n, tests, bugs, cpu in rows:
        print(f"{n:>4} {tests:>6} {bugs:>5} {cpu:>7.0f} {3600 * bugs / cpu:>11.1f}")


if __name__ == "__main__":
    main()
