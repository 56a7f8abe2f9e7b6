"""Merges the bugs of a campaign by this tree's root causes (``dedup.reduced_root``), for a campaign
recorded before them: reads each reduced bundle (reduction.json, reduced/graph.json, finding.json),
computes its root, and records it in the campaign's store as a campaign does after each reduction.
Nothing is run (a reduction's parts isolation is the campaign's own: ``signed_as`` in reduction.json).

    python benchmarks/merge_roots.py CAMPAIGN
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dlcfuzz.ir import Graph
from dlcfuzz.run.dedup import reduced_root
from dlcfuzz.run.reduce import finding_from_dict
from dlcfuzz.run.store import Store


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("campaign", type=Path)
    a = p.parse_args()
    store = Store(a.campaign)
    try:
        for bug in store.bugs() + store.bugs(merged=True):
            folder = a.campaign / bug["dir"]
            try:
                reduction = json.loads((folder / "reduction.json").read_text())
                graph = Graph.from_json((folder / "reduced" / "graph.json").read_text())
                finding = finding_from_dict(json.loads((folder / "finding.json").read_text()))
            except (OSError, ValueError):
                continue  # not reduced
            root = reduced_root(finding, graph, reduction.get("first_diverging"), reduction.get("signed_as", ""),
                                bug["signature"])
            store.merge_root(bug["signature"], root, reduction.get("title", ""))
        for bug in store.bugs(merged=True):
            print(f"{bug['signature']} {bug['title'][:100]}\n    -> same root cause as {bug['same_as']}")
        print(f"merged into a root cause: {store.merged()}")
    finally:
        store.close()


if __name__ == "__main__":
    main()
