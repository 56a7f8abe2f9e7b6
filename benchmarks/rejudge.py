"""Judges a campaign's listed bugs again with this tree's triage, so that two campaigns recorded by
different versions of dlcfuzz (main before a change, and after it) are counted by one classification.

For every listed compiler bug it evaluates the bug's case (the reduced one where the campaign reduced
it, else the original test) on every variant of every backend of the campaign, as a campaign of this
tree would (``oracle/judge.py``, through the campaign's ``Tester.evaluate``): baseline choice, trust
rules, declines, noise, the cross-compiler vote, localization and blamed passes.  A bug still counts
when its backend has a compiler finding on the case; the findings' keys (signature, and root cause
where the case is a single diverging operator) are then merged across bugs, so that one root cause
counts once.

    python benchmarks/rejudge.py CAMPAIGN [--limit N] [--seed S] [--backend B]   # N: a random sample of N bugs

Prints per backend: listed, still a compiler bug, and distinct after merging; and the fates of the
others (no finding now: a decline, noise, a baseline issue or trust rule, or gone).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from dlcfuzz.backends import load_backend
from dlcfuzz.oracle import COMPILER
from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.run.dedup import graph_root_cause, graph_signature
from dlcfuzz.run.store import StoreReader
from dlcfuzz.run.worker import PhaseLimits
from dlcfuzz.spec import REGISTRY

sys.path.insert(0, str(Path(__file__).resolve().parent))
from precision import case_of  # benchmarks/ is not a package


def components(sets: list[set[str]]) -> int:
    """How many groups the bugs form when two that share a key are one."""
    groups: list[set[str]] = []
    for keys in sets:
        touching = [g for g in groups if g & keys]
        merged = set(keys).union(*touching)
        groups = [g for g in groups if not g & keys] + [merged]
    return len(groups)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("campaign", type=Path)
    p.add_argument("--limit", type=int, help="judge a random sample of this many bugs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", help="judge only the bugs listed for this backend")
    a = p.parse_args()
    store = StoreReader(a.campaign)
    bugs = [b for b in store.listed_bugs("compiler") if a.backend in (None, b["backend"])]
    config = json.loads(store.meta_value("config"))
    store.close()
    if a.limit and a.limit < len(bugs):
        bugs = random.Random(a.seed).sample(bugs, a.limit)
    backends = [b for b in config.get("backends", []) if load_backend(b).available()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        # the fixed phase limits: a hang found under a paced limit must hang as long as the user's would
        c = Campaign(CampaignConfig(Path(tmp) / "c", backends, list(REGISTRY.values()), targeted=False,
                                    allocate=False, phases=PhaseLimits(pace=0)))
        c.start_backends()
        listed: Counter = Counter()
        found: dict[str, list[set[str]]] = defaultdict(list)  # backend -> each still-listed bug's keys
        fates: Counter = Counter()
        try:
            for bug in bugs:
                backend = bug["backend"]
                listed[backend] += 1
                test, graph = case_of(a.campaign / bug["dir"])
                if graph is None:
                    fates["no graph"] += 1
                    continue
                e = c.tester.evaluate(graph, test)
                mine = [f for f in e.verdict.findings if f.backend == backend and f.category == COMPILER]
                if not mine:
                    other = sorted({f.category for f in e.verdict.findings if f.backend == backend})
                    declined = any(b == backend for b, _, _ in e.verdict.unsupported)
                    fate = "declined" if declined else f"now {'/'.join(other)}" if other else "no finding"
                    fates[fate] += 1
                    print(f"  {bug['signature']} {backend:<9} {fate:<14} {bug['title'][:90]}", flush=True)
                    continue
                found[backend].append({graph_signature(f, graph) for f in mine} | {
                    r for f in mine if (r := graph_root_cause(f, graph, f.details.get("first_diverging")))})
        finally:
            c.pool.close()
            c.store.close()
    distinct = {b: components(sets) for b, sets in found.items()}
    print(f"\n{'backend':<10} {'listed':>7} {'still':>6} {'distinct':>9}")
    for b in sorted(listed):
        print(f"{b:<10} {listed[b]:>7} {len(found.get(b, [])):>6} {distinct.get(b, 0):>9}")
    print(f"{'all':<10} {sum(listed.values()):>7} {sum(map(len, found.values())):>6} {sum(distinct.values()):>9}")
    print("others:", dict(fates))


if __name__ == "__main__":
    main()
