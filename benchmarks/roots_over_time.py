"""How fast a campaign keeps finding distinct bugs: its compiler roots (as ``dlcfuzz bugs`` lists them)
by the time their root was first found, in bins of the campaign's wall time, as roots per hour (issue 29:
a long campaign's rate per half-hour).

    python benchmarks/roots_over_time.py CAMPAIGN [--bin 30m]

A root's time is its own ``first_seen`` (the first found of the bugs folded under it); the campaign's start
is its first test's start (``finished - seconds``).  Members folded under a root are counted apart, per
bin, as the duplicates the triage kept off the list.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path

from dlcfuzz.cli.options import duration
from dlcfuzz.oracle import COMPILER
from dlcfuzz.run.roots import read
from dlcfuzz.run.store import StoreReader


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("campaign", type=Path)
    p.add_argument("--bin", default="30m", help="bin width (a duration: 30m, 1h)")
    a = p.parse_args()
    width = duration(a.bin)
    store = StoreReader(a.campaign)
    try:
        tests = store.tests()  # (id, ops, baseline, finite, valid, finished, seconds)
        bugs = read(store, a.campaign)
    finally:
        store.close()
    if not tests:
        raise SystemExit(f"{a.campaign}: no tests recorded")
    start, end = min(t[5] - t[6] for t in tests), max(t[5] for t in tests)
    roots = bugs.of(COMPILER)
    n_bins = max(1, math.ceil((end - start) / width - 0.02))  # a tail under 2 % of a bin joins the last one
    found = Counter(min(n_bins - 1, int((r.first_seen - start) // width)) for r in roots)
    folded = Counter(min(n_bins - 1, int((m.first_seen - start) // width)) for r in roots for m in r.members)
    print(f"{a.campaign}: {len(roots)} compiler roots, {sum(folded.values())} members folded under them, "
          f"{(end - start) / 3600:.2f} h of tests")
    for i in range(n_bins):
        lo, hi = i * width, (i + 1) * width if i < n_bins - 1 else end - start
        hours = max(hi - lo, 1e-9) / 3600
        per_backend = Counter(r.backend for r in roots if min(n_bins - 1, int((r.first_seen - start) // width)) == i)
        backends = ", ".join(f"{b} {n}" for b, n in sorted(per_backend.items()))
        print(f"  {lo / 60:5.0f}-{hi / 60:4.0f} min: {found[i]:4d} new roots ({found[i] / hours:6.1f}/h), "
              f"{folded[i]:4d} folded; {backends}")


if __name__ == "__main__":
    main()
