"""A/B of whole campaigns: the default campaign of an earlier commit (main before a change) against this
tree's defaults, on this machine, one after the other, each ``dlcfuzz fuzz --budget B --jobs J``.

For each it prints per backend the distinct compiler bugs (as each campaign's own triage classified
them: baseline issues, exporter issues, noise and declines are not counted), the CPU seconds inside that
compiler, and the bugs per CPU-hour; overall, the bugs per CPU-hour of the whole campaign (the campaign
process and all its workers, from the kernel's accounting of reaped children).

    python benchmarks/ab_campaign.py --before 8a8988f --budget 30m --jobs 2 --out /tmp/ab [-- extra fuzz args]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from dlcfuzz.run.store import StoreReader

ROOT = Path(__file__).resolve().parent.parent


def run_campaign(src: Path, out: Path, budget: str, jobs: int, extra: list[str]) -> float:
    """Runs ``dlcfuzz fuzz`` from the source tree ``src`` into ``out``; returns the CPU seconds it used
    (user + system, itself and every worker it reaped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, "-c", "import sys; from dlcfuzz.cli import main; sys.exit(main(sys.argv[1:]))",
           "fuzz", "--budget", budget, "--jobs", str(jobs), "--out", str(out), *extra]
    print("$", " ".join(cmd), f"(PYTHONPATH={src})", flush=True)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def summary(out: Path) -> dict:
    """Per backend: compiler bugs, tests, CPU seconds inside it, useful tests (not all declines)."""
    store = StoreReader(out)
    bugs = Counter(b["backend"] for b in store.listed_bugs("compiler"))  # merged into a root cause: not listed
    per = {}
    for backend, _, _, seconds, declined, n in store.backend_test_totals():
        b = per.setdefault(backend, {"tests": 0, "useful": 0, "seconds": 0.0, "bugs": 0})
        b["tests"] += 1
        b["useful"] += declined < n  # some variant took it (ran, or failed in a way that is a finding)
        b["seconds"] += seconds
    for backend, n in bugs.items():
        per.setdefault(backend, {"tests": 0, "useful": 0, "seconds": 0.0, "bugs": 0})["bugs"] = n
    tests = store.time_split()[0]
    store.close()
    return {"tests": tests, "backends": per, "bugs": sum(bugs.values())}


def show(name: str, s: dict, cpu: float) -> None:
    print(f"\n{name}: {s['tests']} tests, {s['bugs']} distinct compiler bugs, {cpu:.0f} CPU s, "
          f"{3600 * s['bugs'] / cpu:.1f} bugs per CPU-hour")
    print(f"  {'backend':<10} {'tests':>6} {'useful':>7} {'CPU s':>8} {'bugs':>5} {'bugs/CPU-h':>11}")
    for b, r in sorted(s["backends"].items()):
        rate = 3600 * r["bugs"] / r["seconds"] if r["seconds"] else 0.0
        useful = 100 * r["useful"] / r["tests"] if r["tests"] else 0.0
        print(f"  {b:<10} {r['tests']:>6} {useful:>6.1f}% {r['seconds']:>8.0f} {r['bugs']:>5} {rate:>11.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="8a8988f", help="the commit whose defaults are the baseline")
    ap.add_argument("--budget", default="30m")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", choices=["before", "after"], help="run one side (the other's store is re-read)")
    ap.add_argument("extra", nargs="*", help="more fuzz arguments for both sides (after --)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cpu: dict[str, float] = {}
    for side in ("before", "after"):
        folder = args.out / side
        if args.only and args.only != side:
            cpu[side] = float((args.out / f"{side}.cpu").read_text())
            continue
        if side == "before":
            tree = Path(tempfile.mkdtemp(prefix="ab-before-"))
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.before],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            src = tree / "src"
        else:
            tree, src = None, ROOT / "src"
        try:
            cpu[side] = run_campaign(src, folder, args.budget, args.jobs, args.extra)
        finally:
            if tree is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        (args.out / f"{side}.cpu").write_text(f"{cpu[side]}\n")
    sums = {side: summary(args.out / side) for side in ("before", "after")}
    for side in ("before", "after"):
        show(f"{side} ({args.before if side == 'before' else 'this tree'})", sums[side], cpu[side])
    rate = {side: sums[side]["bugs"] / cpu[side] for side in sums}
    print(f"\nbugs per CPU-hour, after / before: {rate['after'] / rate['before']:.2f}x" if rate["before"] else
          "\nbefore found no compiler bug")
    for b in sorted(set(sums["before"]["backends"]) | set(sums["after"]["backends"])):
        r = {s: sums[s]["backends"].get(b, {"bugs": 0, "seconds": 0.0}) for s in sums}
        per = {s: r[s]["bugs"] / cpu[s] for s in r}  # per CPU-hour of the whole campaign
        ratio = f"{per['after'] / per['before']:.2f}x" if per["before"] else "n/a (before: 0)"
        print(f"  {b:<10} bugs before {r['before']['bugs']:>4}, after {r['after']['bugs']:>4}; per campaign "
              f"CPU-hour {3600 * per['before']:.1f} -> {3600 * per['after']:.1f} ({ratio})")


if __name__ == "__main__":
    main()
