"""Where a recorded campaign's time went: the compilers' own calls, generation, input synthesis and the
reference, the oracle, reductions and the trigger analysis of reduced bugs (issue 29).

    python benchmarks/cpu_breakdown.py CAMPAIGN --jobs 2 --wall 1800

Reads the store (each test's ``t_generate``, ``t_inputs``, ``t_compilers``, ``t_oracle`` and its whole
``seconds``; the trigger analysis's ``triggers`` meta) and each bundle's ``reduction.json``
(a reduction's seconds, its confirmed runs included) or ``program_reduction.json`` (a torch
program's).  Shares are of the campaign's worker time: its jobs times its wall time (the store records
neither: say them).  Tests run in parallel; reductions
and trigger analyses run in the driver, beside them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dlcfuzz.run.store import StoreReader


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("campaign", type=Path)
    p.add_argument("--jobs", type=int, required=True, help="the campaign's --jobs")
    p.add_argument("--wall", type=float, required=True, help="the campaign's wall seconds (its --budget)")
    a = p.parse_args()
    store = StoreReader(a.campaign)
    tests, whole, gen, inputs, compilers, oracle = store.time_split()
    triggers = json.loads(store.meta_value("triggers") or "{}")
    store.close()
    jobs, wall = a.jobs, a.wall
    # ONNX bugs' reductions (reduction.json) and torch programs' (program_reduction.json: its trigger
    # analysis is in the store's ``triggers`` meta with the ONNX ones')
    reductions = [json.loads(f.read_text()) for name in ("reduction.json", "program_reduction.json")
                  for f in sorted((a.campaign / "bugs").glob(f"*/{name}"))]
    reduce_s = sum(float(r.get("seconds", 0.0)) for r in reductions)
    trigger_s = float(triggers.get("seconds", 0.0))
    # inside the bug's compiler during reductions and trigger analyses (recorded since session 34: a campaign
    # recorded earlier shows 0 here)
    reduce_compiler_s = sum(float(r.get("compiler_seconds", 0.0)) for r in reductions)
    trigger_compiler_s = float(triggers.get("compiler_seconds", 0.0))
    total = jobs * wall
    rows = [("compilers (import, compile, run)", compilers or 0.0),
            ("generation", gen or 0.0),
            ("inputs and the reference", inputs or 0.0),
            ("oracle", oracle or 0.0),
            ("rest of the tests (workers, IPC, store)", (whole or 0.0) - sum(x or 0.0 for x in (gen, inputs,
                                                                                                compilers, oracle))),
            (f"reductions ({len(reductions)})", reduce_s),
            (f"trigger analysis ({triggers.get('bugs', 0)} bugs, {triggers.get('runs', 0)} runs)", trigger_s)]
    print(f"{a.campaign}: {tests} tests, {jobs} jobs x {wall:.0f} s wall = {total:.0f} worker-seconds")
    for name, s in rows:
        print(f"  {name:<52} {s:9.1f} s  {100 * s / total:5.1f} %")
    left = total - sum(s for _, s in rows)
    print(f"  {'idle or unaccounted':<52} {left:9.1f} s  {100 * left / total:5.1f} %")
    print("inside the compilers, beside the tests' own calls:")
    for name, s in (("  in reductions", reduce_compiler_s), ("  in trigger analyses", trigger_compiler_s),
                    ("  all compiler calls (tests, reductions, analyses)",
                     (compilers or 0.0) + reduce_compiler_s + trigger_compiler_s)):
        print(f"  {name:<52} {s:9.1f} s  {100 * s / total:5.1f} %")


if __name__ == "__main__":
    main()
