"""``dlcfuzz retriage``: the triage of today's dlcfuzz, in place, on a campaign an earlier one recorded.

From each compiler bug's bundle (finding.json, graph.json) and reduced case (reduced/, reduction.json)
and no new generated test, it signs the bug again (``dedup.graph_signature``), runs the trigger
analysis of its reduced case (``oracle/triggers.py``, a few confirmed runs each), and records its root
(``dedup.reduced_root``, ``Store.merge_root``): bugs with one root are one entry.  A torch program's
bug gets the analysis of its mechanisms (``run/program_triggers.py``) on its smallest program.  It prints the number
of roots before and after as ``dlcfuzz bugs`` counts them (``run.roots``), and which bugs merged.
A reduced case whose reduction did not confirm the bug is analyzed too (its control run says whether
the bug shows there: a metamorphic bug whose reduced case both variants now get wrong alike still shows
to the baseline), but only a root its analysis names merges it.  It takes the campaign's writer lock.
Categories stay as recorded, unless ``--rejudge``: then each value bug's reduced case is judged again as a
campaign of today's dlcfuzz judges it, with the campaign's backends together (its noise, trust and
low-precision rules, the other compilers' vote and the reference at the first diverging node:
``Campaign._outvoted``), and a bug that its backend's variant now gives only as another category's
finding (rounding noise, a baseline issue, undefined behaviour) moves there; so does a differential bug
whose reduced case no baseline computes right (``Rule.ort_too``): to the baseline issues.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from dlcfuzz.cli.options import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("retriage", help="sign, analyze the triggers of and re-root a recorded campaign's bugs, "
                                        "in place (no new tests)")
    r.add_argument("campaign")
    r.add_argument("--max-runs", type=int, default=None,
                   help="confirmed runs of each bug's trigger analysis (default: oracle/triggers.py's MAX_RUNS)")
    r.add_argument("--jobs", type=int, default=2, help="bugs analyzed at once (default: 2)")
    r.add_argument("--rejudge", action="store_true",
                   help="judge each value bug's reduced case again, with the campaign's backends, and move the "
                        "bugs that are now another category's (noise, the baseline's)")
    r.set_defaults(func=cmd_retriage)


def _read(bundle: Path) -> tuple[Any, Any, dict] | None:
    """(finding, graph, finding.json) of a bundle; None when it cannot be read."""
    from dlcfuzz.ir import Graph
    from dlcfuzz.run.reduce import finding_from_dict

    try:
        info = json.loads((bundle / "finding.json").read_text())
        return finding_from_dict(info), Graph.from_json((bundle / "graph.json").read_text()), info
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _reduced(bundle: Path, reproduced: bool = True) -> tuple[Any, dict, dict] | None:
    """(graph, inputs, reduction.json) of a bundle's reduced case that reproduced (any reduced case, without
    ``reproduced``); None without one."""
    import numpy as np

    from dlcfuzz.ir import Graph

    try:
        summary = json.loads((bundle / "reduction.json").read_text())
        if reproduced and not summary.get("reproduced"):
            return None
        graph = Graph.from_json((bundle / "reduced" / "graph.json").read_text())
        with np.load(bundle / "reduced" / "inputs.npz") as f:
            inputs = {k: f[k] for k in f.files}
        return graph, inputs, summary
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _roots(store: Any, folder: Path) -> dict[str, list[str]]:
    """The compiler bugs' roots as ``dlcfuzz bugs`` lists them (``run.roots.read``): root -> its bugs."""
    from dlcfuzz.oracle import COMPILER
    from dlcfuzz.run.roots import read

    return {r.signature: [r.signature, *(m.signature for m in r.members)] for r in read(store, folder).of(COMPILER)}


def _triage(pool: Any, folder: Path, row: dict, tolerances: dict, max_runs: int | None
            ) -> tuple[str, Any, bool, list[str], str] | None:
    """One bug's root as today's dlcfuzz gives it: (root, its trigger analysis or None, whether the
    analysis belongs in the bundle's reduction.json, the root keys one with it: ``dedup.same_roots``, the
    refusal root its words name: ``dedup.refused_root``);
    None where its bundle cannot be read.  Runs the compilers only (the caller writes the store): bugs are
    triaged in parallel."""
    from dataclasses import replace

    from dlcfuzz.ir.graph import is_torch_program
    from dlcfuzz.oracle import CRASH
    from dlcfuzz.run.dedup import analyze_triggers, graph_signature, reduced_root, refused_root, same_roots
    from dlcfuzz.run.torch_campaign import retriage_program

    bundle = folder / str(row.get("dir") or f"bugs/{row['signature']}")
    got = _read(bundle)
    if got is None:
        return None
    finding, graph, _ = got
    signature = graph_signature(finding, graph)  # the signature today's dlcfuzz gives it
    runs = {"max_runs": max_runs} if max_runs else {}
    if is_torch_program(graph):  # a torch program's bug: the analysis of its mechanisms
        root, analysis = retriage_program(pool, bundle, finding, graph, str(row.get("root") or signature))
        return root, analysis, False, [], ""
    reduced = _reduced(bundle)
    if reduced is not None:
        rgraph, inputs, summary = reduced
        first = summary.get("first_diverging")
        # the reduced case shows the signature its reduction recorded, as today's dlcfuzz signs it: where the
        # signing changed (a message's list of names is one placeholder now), the bug's own signature today
        signatures = (summary.get("signature", signature), signature)
        analysis = analyze_triggers(pool, finding, rgraph, inputs, first, signatures, tolerances, recorded=True,
                                    **runs)
        if analysis.reworded is not None:  # the crash in today's words: signed and rooted by them
            finding = replace(finding, message=analysis.reworded.message, traceback=analysis.reworded.traceback)
            signature = graph_signature(finding, graph)
        return (reduced_root(finding, rgraph, first, summary.get("signed_as", ""), signature, analysis), analysis,
                # a crash's signature today too: two crashes that sign alike today are one (IREE's SIGABRT, worded by
                # its frames before, by LLVM's fatal error now); not wrong values', whose signature (the operator
                # and kind where they start) is no root of a bug the analysis rooted elsewhere: it would join an
                # error swallowed on one thread, which shows as a wrong Resize shape, to Resize's own root (c48)
                True, [*same_roots(finding, rgraph, inputs, analysis), *([signature] if finding.oracle == CRASH
                                                                          else [])], refused_root(finding, rgraph))
    unconfirmed = _reduced(bundle, reproduced=False)
    if unconfirmed is not None:
        rgraph, inputs, summary = unconfirmed
        analysis = analyze_triggers(pool, finding, rgraph, inputs, summary.get("first_diverging"),
                                    (summary.get("signature", signature), signature), tolerances, **runs)
        return analysis.root or signature, analysis, True, [], ""
    return signature, None, False, [], ""


def _rejudge(store: Any, folder: Path, config: dict, rows: list[dict]) -> dict[str, str]:
    """``--rejudge``: each value bug's reduced case judged again as today's campaign judges it, each crash's words
    read again by today's rules of declines (``oracle/unsupported.py``); the bugs that moved, with their
    category now.  A case its variant now gives no finding on stays (one run is no
    verdict on a case that once showed the bug)."""
    import tempfile
    from types import SimpleNamespace

    from dlcfuzz.backends import load_backend
    from dlcfuzz.backends.base import Test
    from dlcfuzz.backends.reference import no_baseline
    from dlcfuzz.export.onnx import to_bytes
    from dlcfuzz.oracle import BASELINE, COMPILER, CRASH, DECLINED, DIFFERENTIAL
    from dlcfuzz.oracle.unsupported import is_unsupported
    from dlcfuzz.run.campaign import Campaign, CampaignConfig
    from dlcfuzz.spec import REGISTRY

    backends = [b for b in config.get("backends", []) if load_backend(b).available()[0]]
    moved: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        c = Campaign(CampaignConfig(Path(tmp) / "c", backends, list(REGISTRY.values()), targeted=False,
                                    allocate=False))
        c.start_backends()
        try:
            for row in rows:
                bundle = folder / str(row.get("dir") or f"bugs/{row['signature']}")
                got, reduced = _read(bundle), _reduced(bundle)
                if got is not None and got[0].oracle == CRASH and is_unsupported(
                        got[0].backend, got[0].phase, got[0].error_type, got[0].message):
                    # a crash in words today's rules read as the compiler declining the case (IREE's "unimplemented:")
                    store.set_category(row["signature"], DECLINED)
                    moved[row["signature"]] = DECLINED
                    print(f"{row['signature']}: now {DECLINED} ({got[0].backend} {got[0].variant})", flush=True)
                    continue
                if got is None or reduced is None or got[0].oracle == CRASH or got[0].backend not in c.backends:
                    continue
                f, (g, inputs, summary) = got[0], reduced
                if f.oracle == DIFFERENTIAL and no_baseline(g) is not None:
                    # no baseline computes the case right (RoiAlign's max mode): a claim against the baseline's
                    store.set_category(row["signature"], BASELINE)
                    moved[row["signature"]] = BASELINE
                    print(f"{row['signature']}: now {BASELINE} ({f.backend} {f.variant}: no baseline)", flush=True)
                    continue
                feeds = {v.name: (v.data if v.pinned else inputs[v.name]) for v in g.inputs}
                plan = {b: ([f.variant, *([f.other] if f.other in c.variants[b] else [])] if b == f.backend
                            else c.tester.voter(b)) for b in c.tester.compilers}
                e = c.tester.evaluate(g, Test(to_bytes(g), g.to_json(), feeds), plan=plan)
                mine = [x for x in e.verdict.findings if (x.backend, x.variant, x.oracle) == (f.backend, f.variant,
                                                                                               f.oracle)]
                if mine and all(x.category != COMPILER for x in mine):
                    category = mine[0].category
                elif c._referee_sides_with(f, SimpleNamespace(graph=g, inputs=feeds,
                                                              first_diverging=summary.get("first_diverging"))):
                    category = BASELINE
                else:
                    continue
                store.set_category(row["signature"], category)
                moved[row["signature"]] = category
                print(f"{row['signature']}: now {category} ({f.backend} {f.variant})", flush=True)
        finally:
            c.pool.close()
            c.store.close()
    return moved


def cmd_retriage(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from dlcfuzz.oracle.triggers import MAX_RUNS
    from dlcfuzz.run.dedup import ALIASES_META, join_roots, record_triggers, root_keys
    from dlcfuzz.run.store import Store
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    folder = Path(args.campaign)
    if not (folder / "campaign.sqlite").is_file():
        raise UsageError(f"{folder} is not a campaign folder (no campaign.sqlite)")
    if args.max_runs is not None and args.max_runs < 1:
        raise UsageError("--max-runs must be >= 1")
    if args.jobs < 1:
        raise UsageError("--jobs must be >= 1")
    store = Store(folder, lock=True)  # the writer's lock: a campaign running there refuses it (one line)
    pool = WorkerPool(PhaseLimits())
    try:
        config = store.get_meta("config") or {}
        tolerances = {k: tuple(v) for k, v in (config.get("tolerances") or {}).items()}
        before = _roots(store, folder)
        store.set_meta(ALIASES_META, {})  # every root is found again: so are the keys one with each
        named: dict[str, str] = {}
        rows = [r for r in sorted(store.bug_entries(), key=lambda r: (r["first_seen"], r["signature"]))
                if r.get("category") == "compiler"]
        with ThreadPoolExecutor(args.jobs) as jobs:  # in the order found: the first found of a root stays its root
            for row, got in zip(rows, jobs.map(lambda r: _triage(pool, folder, r, tolerances, args.max_runs), rows),
                                strict=True):
                if got is None:
                    print(f"{row['signature']}: bundle unreadable, root kept")
                    continue
                root, analysis, in_bundle, same, refused = got
                if analysis is not None:
                    record_triggers(store, folder / str(row.get("dir") or f"bugs/{row['signature']}") if in_bundle
                                    else None, analysis)
                root = join_roots(store, root, root_keys(store, same, row["signature"], refused))
                store.merge_root(row["signature"], root)
                named[row["signature"]] = root
                runs = f"{analysis.runs} runs" if analysis is not None else "not reduced"
                print(f"{row['signature']}: {root if analysis is not None and analysis.root else 'root ' + root[:16]} "
                      f"({runs})", flush=True)
        moved = _rejudge(store, folder, config, rows) if args.rejudge else {}
        after = _roots(store, folder)
    finally:
        pool.close()
        store.close()
    print(f"roots: {len(before)} before, {len(after)} after (max {args.max_runs or MAX_RUNS} runs per bug)")
    if args.rejudge:
        print(f"judged again: {len(moved)} bugs moved out of the compiler bugs "
              f"({', '.join(f'{k} {v}' for k, v in sorted(Counter(moved.values()).items())) or 'none'})")
    for head, members in after.items():
        joined = [m for m in members if m in before]  # listed apart before
        if len(joined) > 1:
            print(f"merged: {named.get(head, head)}: {', '.join(joined)}")
    return 0
