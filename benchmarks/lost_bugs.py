"""What became of each bug of one campaign in another run of the same seeds (e.g. main before a
change against after it): listed as which bug, merged into which, moved to which category, declined,
or gone.

    python benchmarks/lost_bugs.py BEFORE AFTER

Both campaigns must have run the same test ids with the same seed and generator; a bug of BEFORE is
followed through the test that first showed it.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from dlcfuzz.run.store import StoreReader


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    a = p.parse_args()
    before, after = StoreReader(a.before), StoreReader(a.after)
    columns = after.columns("bugs")
    listed = {r["signature"]: r for r in after.bug_rows()}
    fates: Counter = Counter()
    for bug in before.bug_rows():
        test, backend = bug["first_test"], bug["backend"]
        if not after.has_test(test):
            fate = "test not run in AFTER"
        else:
            sigs = after.finding_signatures(test, backend)
            rows = [listed[s] for s in sigs if s in listed]
            declined = after.declines_of(test, backend)
            if rows:
                fate = "; ".join(sorted({f"{r['category'] if 'category' in columns else 'compiler'} "
                                         f"{r['signature']} ({r['title'][:70]})"
                                         + ("" if r["first_test"] == test else f" [merged: first seen in test "
                                            f"{r['first_test']}]")
                                         + (f" [same root cause as {r['same_as']}]" if "same_as" in columns
                                            and r["same_as"] else "") for r in rows}))
            elif declined:
                fate = "declined"
            elif sigs:
                fate = "finding of a known upstream bug"
            elif after.finding_signatures(test, "torch.onnx.export"):
                fate = "exporter: torch.onnx.export's finding on that test (the ONNX frontends read its export)"
            else:
                fate = "gone (no finding on that test)"
        fates[fate.split(" ")[0]] += 1
        print(f"{bug['signature']} {backend:<9} {bug['title'][:90]}\n    -> {fate}")
    print("fates:", dict(fates))


if __name__ == "__main__":
    main()
