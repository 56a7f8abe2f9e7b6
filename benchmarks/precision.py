"""How many of a campaign's listed bugs the other compilers back up: re-runs every listed bug's case
(the reduced one where the campaign reduced it) on every installed compiler and on the baseline.  The
listed bugs are the roots ``dlcfuzz bugs`` lists (``run.roots``); the bugs folded under them are
counted per backend (``members``) and not re-run.

    python benchmarks/precision.py CAMPAIGN [--backends tvm,openvino,ort,inductor] [--category compiler]
        [--sample N [--seed S]]    # a random sample stratified by backend, each bug's evidence printed

Per backend it prints:
- listed: the roots listed in the category; members: the bugs folded under them;
- contradicted: at least one *other* compiler ran the case and contradicts the accused one (a value
  bug: its outputs match the baseline; a crash: it runs the model) — evidence the bug is real;
- against baseline: at least one other compiler agrees with the accused one's outputs against the
  baseline (the baseline is the likelier culprit: such a bug should not be listed);
- unconfirmed: no other compiler could run the case (a single-compiler claim, resting on the baseline);
- duplicate clusters: bugs that share their first diverging operator and kind (value bugs), or their
  normalized message (crashes), with more than one member.
A listed bug whose own backend no longer shows it is counted as "gone" (flaky, or fixed).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from dlcfuzz.backends import DEFAULT, load_backend
from dlcfuzz.backends.base import OK, Outcome, Test
from dlcfuzz.ir import Graph
from dlcfuzz.oracle import run_baseline
from dlcfuzz.oracle.compare import compare
from dlcfuzz.run.dedup import normalize
from dlcfuzz.run.roots import read
from dlcfuzz.run.store import StoreReader
from dlcfuzz.run.worker import PhaseLimits, WorkerPool


def case_of(bundle: Path) -> tuple[Test, Graph | None]:
    """The bug's case: reduced/ where the campaign reduced it, else the original."""
    folder = bundle / "reduced" if (bundle / "reduced" / "model.onnx").is_file() else bundle
    graph_json = (folder / "graph.json").read_text() if (folder / "graph.json").is_file() else ""
    with np.load(folder / "inputs.npz") as z:
        inputs = {k: z[k] for k in z.files}
    graph = Graph.from_json(graph_json) if graph_json else None
    return Test((folder / "model.onnx").read_bytes(), graph_json, inputs), graph


def stratified(bugs: list, n: int, seed: int) -> list:
    """About ``n`` bugs drawn at random, each backend's share as in the list (at least one each)."""
    import random

    rng = random.Random(seed)
    by: dict[str, list] = defaultdict(list)
    for b in bugs:
        by[b["backend"]].append(b)
    out = []
    for members in by.values():
        k = max(1, round(n * len(members) / len(bugs)))
        out += rng.sample(members, min(k, len(members)))
    return out


def ops_of(graph: Graph | None) -> str:
    return f"[{len(graph.nodes)} ops]" if graph is not None else "[?]"


def judge_bug(bug, mine: Outcome | None, baseline, others: dict[str, Outcome | None]) -> tuple[str, str]:
    """(verdict, evidence): contradicted / against baseline / unconfirmed / gone, and which compilers say so."""
    ran = {b: o for b, o in others.items() if o is not None}
    if bug["oracle"] == "crash":
        if mine is not None and mine.status == OK:
            return "gone", "the accused variant runs it now"
        return ("contradicted", "runs on " + ",".join(sorted(ran))) if ran else ("unconfirmed", "nobody else runs it")
    if mine is None or mine.status != OK or baseline is None:
        return "gone", "the accused variant or the baseline fails now"
    if compare(baseline, mine.outputs or []) is None and bug["oracle"] == "differential":
        return "gone", "matches the baseline now"
    if not ran:
        return "unconfirmed", "nobody else runs it"
    sides_with_me = sorted(b for b, o in ran.items() if compare(mine.outputs or [], o.outputs or []) is None
                           and compare(baseline, o.outputs or []) is not None)
    sides_with_base = sorted(b for b, o in ran.items() if compare(baseline, o.outputs or []) is None)
    if sides_with_me:
        return "against baseline", "agree with it: " + ",".join(sides_with_me)
    if sides_with_base:
        return "contradicted", "agree with the baseline: " + ",".join(sides_with_base)
    return "unconfirmed", "others differ from both: " + ",".join(sorted(ran))


def first_ok(outcomes: dict[str, Outcome]) -> Outcome | None:
    return next((o for o in outcomes.values() if o.status == OK), None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("campaign")
    p.add_argument("--backends", default=",".join(DEFAULT))
    p.add_argument("--category", default="compiler", help="which list to check (compiler, baseline, exporter)")
    p.add_argument("--sample", type=int, help="check a random sample of this many bugs, stratified by backend, and "
                                              "print each one's evidence (for a hand check)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    folder = Path(a.campaign)
    store = StoreReader(folder)
    rows = {r["signature"]: r for r in store.bug_rows()}
    roots = read(store, folder).of(a.category)  # what dlcfuzz bugs lists: one entry per root cause
    store.close()
    bugs = [rows[r.signature] for r in roots]
    members = Counter({r.signature: len(r.members) for r in roots})
    if a.sample:
        bugs = stratified(bugs, a.sample, a.seed)
    installed = [b for b in a.backends.split(",") if load_backend(b).available()[0]]
    stats: dict[str, Counter] = defaultdict(Counter)
    clusters: dict[tuple[str, str], list[str]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as logs:
        pool = WorkerPool(PhaseLimits(compile=60, run=20), log_dir=Path(logs))
        try:
            variants = {b: [n for n, _ in pool.describe(b)[1]] for b in installed}
            for bug in bugs:
                bundle = folder / bug["dir"]
                info = json.loads((bundle / "finding.json").read_text())
                accused = bug["backend"]
                stats[accused]["members"] += members[bug["signature"]]
                if not (bundle / "model.onnx").is_file():  # a migrated torch call (call.pt): no ONNX model
                    stats[accused]["listed"] += 1
                    stats[accused]["no ONNX model"] += 1
                    if a.sample:
                        print(f"{bug['signature']} {accused:<9} {'no ONNX model':<17} "
                              f"{'torch call, see report.md':<40} [-] {bug['title'][:110]}", flush=True)
                    continue
                test, graph = case_of(bundle)
                s = stats[accused]
                s["listed"] += 1
                first = (info.get("details") or {}).get("first_diverging") or {}
                key = (f"{first.get('op', '?')}/{first.get('kind', bug['kind'])}" if bug["oracle"] != "crash"
                       else normalize(info.get("message", ""), lines=1))
                clusters[(accused, key)].append(bug["signature"])
                baseline = run_baseline(pool, test, graph).outputs  # as the campaign chooses it
                runs = {b: pool.run(b, test, variants[b]) for b in installed if b in variants}
                mine = runs.get(accused, {}).get(bug["variant"])
                verdict = judge_bug(bug, mine, baseline, {b: first_ok(runs[b]) for b in runs if b != accused})
                s[verdict[0]] += 1
                if a.sample:
                    print(f"{bug['signature']} {accused:<9} {verdict[0]:<17} {verdict[1]:<40} "
                          f"{ops_of(graph)} {bug['title'][:110]}", flush=True)
        finally:
            pool.close()
    for (backend, _key), members in clusters.items():
        if len(members) > 1:
            stats[backend]["duplicate clusters"] += 1
            stats[backend]["in duplicate clusters"] += len(members)
    cols = ("listed", "members", "contradicted", "against baseline", "unconfirmed", "gone", "no ONNX model",
            "duplicate clusters", "in duplicate clusters")
    print(f"{a.category} bugs of {folder}, re-run on {', '.join(installed)}")
    print(f"{'backend':<12}" + "".join(f"{c:>22}" for c in cols))
    total: Counter = Counter()
    for backend in sorted(stats):
        total.update(stats[backend])
        print(f"{backend:<12}" + "".join(f"{stats[backend][c]:>22}" for c in cols))
    print(f"{'all':<12}" + "".join(f"{total[c]:>22}" for c in cols))


if __name__ == "__main__":
    main()
