"""What became of each bug of one campaign in another run of the same seeds (e.g. main before a
change against after it): listed as which bug, merged into which, moved to which category, declined,
or gone.

    python benchmarks/lost_bugs.py BEFORE AFTER

Both campaigns must have run the same test ids with the same seed and generator; a bug of BEFORE is
followed through the test that first showed it.
"""

from __future__ import annotations

import argparse
import sqlite3
from collections import Counter
from pathlib import Path


def _db(folder: Path) -> sqlite3.Connection:
    db = sqlite3.connect(folder / "campaign.sqlite")
    db.row_factory = sqlite3.Row
    return db


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    a = p.parse_args()
    before, after = _db(a.before), _db(a.after)
    columns = {r[1] for r in after.execute("PRAGMA table_info(bugs)")}
    category = "category" if "category" in columns else "'compiler'"
    listed = {r["signature"]: r for r in after.execute(f"SELECT *, {category} AS cat FROM bugs")}
    fates: Counter = Counter()
    for bug in before.execute("SELECT * FROM bugs ORDER BY first_seen"):
        test, backend = bug["first_test"], bug["backend"]
        if after.execute("SELECT 1 FROM tests WHERE id = ?", (test,)).fetchone() is None:
            fate = "test not run in AFTER"
        else:
            sigs = {r[0] for r in after.execute("SELECT signature FROM findings WHERE test_id = ? AND backend = ?",
                                                (test, backend))}
            rows = [listed[s] for s in sigs if s in listed]
            declined = after.execute("SELECT COUNT(*) FROM outcomes WHERE test_id = ? AND backend = ? AND "
                                     "unsupported = 1", (test, backend)).fetchone()[0]
            if rows:
                fate = "; ".join(sorted({f"{r['cat']} {r['signature']} ({r['title'][:70]})"
                                         + ("" if r["first_test"] == test else f" [merged: first seen in test "
                                            f"{r['first_test']}]")
                                         + (f" [same root cause as {r['same_as']}]" if "same_as" in columns
                                            and r["same_as"] else "") for r in rows}))
            elif declined:
                fate = "declined"
            elif sigs:
                fate = "finding of a known upstream bug"
            elif after.execute("SELECT 1 FROM findings WHERE test_id = ? AND backend = 'torch.onnx.export'",
                               (test,)).fetchone():
                fate = "exporter: torch.onnx.export's finding on that test (the ONNX frontends read its export)"
            else:
                fate = "gone (no finding on that test)"
        fates[fate.split(" ")[0]] += 1
        print(f"{bug['signature']} {backend:<9} {bug['title'][:90]}\n    -> {fate}")
    print("fates:", dict(fates))


if __name__ == "__main__":
    main()
