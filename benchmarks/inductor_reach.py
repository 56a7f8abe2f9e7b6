"""How much of Inductor do dlcfuzz's two kinds of tests reach?  (issue 28)

    python benchmarks/inductor_reach.py [-n 300] [--seed 0] [--ops 10:10] [--timeout 180] [--out DIR]
        [--native-variants NAME,...] [--sides onnx,native] [--cpu-seconds S] [--jobs 1|2] [--first K]

    python benchmarks/inductor_reach.py -n 100000 --cpu-seconds 900 --sides native,guided --jobs 2
        (coverage guidance against unguided generation in equal time, issue 28)

Two sides, the same seeds (``derive_seed(seed, i)``, i < n), each in a process of its own (its own
``coverage.Coverage`` data file, counters and Dynamo state; neither inherits the other's lazy imports):

- ``onnx``: graphs of the ONNX generator targeted at ``inductor`` as a campaign targets it (its support
  profile joined with the baseline ORT's, ``run.campaign.campaign_generator``), written as torch modules and
  compiled by ``backends/inductor.InductorBackend`` on each of its compiled CPU variants (inductor,
  inductor-dynamic: a campaign without allocation runs them all);
- ``native``: torch-native programs (``gen.torch_program.TorchProgramGenerator``) compiled by
  ``backends/torch_program.TorchProgramBackend`` on the variants a campaign gives each
  (``run.torch_campaign.plan``: forward or backward, dynamic for three in four, threads for 15%, and since
  the Inductor-configuration variants also cpp-wrapper / freezing / sampled flags and the layout oracle for
  some, and for some of those that multiply matrices / split or concatenate, max_autotune's C++ GEMM template
  on a frozen model / the split-cat and batch-fusion passes, and the FX graph cache); ``--native-variants``
  keeps only the named ones (e.g.
  ``inductor,inductor-backward,inductor-dynamic,inductor-threads``: the mix before those);
- ``guided``: the native side under compiler-feedback guidance (``--strategy feedback``: operators drawn by
  the Inductor optimizations their programs fired first, ``gen/feedback.py``'s ``Rewards``); its rewards
  start afresh in the process that goes on after a program that took the process down.

Per side: distinct lines of ``torch/_inductor/**/*.py`` covered (coverage.py, measuring only that package,
started after an identical warm-up compile in both processes, so that the core both import anyway is not
counted for whichever side comes first), distinct optimizations fired (keys of
``counters["inductor"]`` that grew, and pattern-matcher patterns by name, counted by Inductor under
``TORCHINDUCTOR_PATTERN_MATCH_DEBUG``), programs compiled / declined / crashed, CPU seconds (the
measured loop with its compiler subprocesses, coverage's tracing included).  Then the ratios
native/ONNX, and the files (and folders) of Inductor each side reaches that the other does not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

SIDES = ("onnx", "native", "guided")
TARGET_LINES, TARGET_OPTS = 2.0, 3.0  # the target for native/ONNX


class Hang(Exception):
    """A program ran past the per-program time limit."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"over {seconds}s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def cpu_seconds() -> float:
    """User + system time of this process and its waited-for children (Inductor's C++ compiler runs)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def inductor_dir() -> str:
    import torch._inductor

    return os.path.dirname(torch._inductor.__file__)


# ---------------------------------------------------------------------------------------------
# One side, in its own process
# ---------------------------------------------------------------------------------------------
def snapshot() -> dict[tuple[str, str], int]:
    from torch._dynamo.utils import counters

    from dlcfuzz.backends.inductor import FIRED_GROUPS

    return {(g, k): v for g in FIRED_GROUPS for k, v in counters[g].items()}


def warm_up() -> None:
    """The same small compile in both processes before measuring: Inductor's core imports and one-time
    setup (pattern registration, C++ toolchain probing) count for neither side."""
    import torch
    from torch._dynamo.utils import counters
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    inductor_config.compile_threads = 1  # no compile worker pool, as both backends set it
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w + 1).sum(0)

    torch.compile(f, backend="inductor", fullgraph=True)(torch.randn(4, 4), torch.randn(4, 4))
    torch._dynamo.reset()
    counters.clear()


Outcome = str  # "ok", "declined", "crashed" or "hung"
RAN: Counter[str] = Counter()  # variant -> compiles run
CRASHES: list[str] = []  # "variant: error" of the program in flight's crashes


def crashed(variant: str, e: Exception) -> Outcome:
    CRASHES.append(f"{variant}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:240])
    return "crashed"


def worst(outcomes: list[Outcome]) -> Outcome:
    """A program's outcome from its compiles': a crash or hang in any; declined only where all declined."""
    for o in ("hung", "crashed"):
        if o in outcomes:
            return o
    return "ok" if "ok" in outcomes else "declined"


def onnx_side(seed: int, ops: tuple[int, int]) -> tuple[Callable[[int], list[Outcome]], str]:
    """One ONNX-derived test (seed -> its compiles' outcomes), as a targeted campaign makes and compiles it."""
    import numpy as np

    from dlcfuzz.backends.base import Test
    from dlcfuzz.backends.inductor import InductorBackend
    from dlcfuzz.cli.gen import _target_profile  # what `gen --for inductor` admits on the ONNX path
    from dlcfuzz.oracle.unsupported import is_unsupported
    from dlcfuzz.run.campaign import CampaignConfig, campaign_generator
    from dlcfuzz.spec import resolve_ops
    from dlcfuzz.values import synthesize

    cfg = CampaignConfig(Path(tempfile.gettempdir()), ["inductor"], resolve_ops(None), seed=seed, ops=ops)
    gen = campaign_generator(cfg, None, _target_profile("inductor"))
    backend = InductorBackend()
    variants = [v for v in backend.variants() if v.options.get("backend") and "device" not in v.options]

    def one(test_seed: int) -> list[Outcome]:
        graph = gen.generate(test_seed)
        if not backend.supports({x.op for x in graph.nodes}, graph):
            return ["declined"]
        test = Test(b"", graph.to_json(), synthesize(graph, np.random.default_rng(test_seed)))

        def judged(phase: str, e: Exception) -> Outcome:
            return "declined" if is_unsupported("inductor", phase, type(e).__name__, str(e)) else crashed(phase, e)

        try:
            imported = backend.load(test)
        except Hang:
            raise
        except Exception as e:
            return [judged("import", e)]
        got = []
        for v in variants:  # no reset between them: the backend shares the import among its variants
            RAN[v.name] += 1
            try:
                backend.compile(imported, v)
                got.append("ok")
            except Hang:
                raise
            except Exception as e:
                got.append(judged(v.name, e))
        return got

    return one, ", ".join(v.name for v in variants)


def native_side(seed: int, ops: tuple[int, int], only: str = "",
                guided: bool = False) -> tuple[Callable[[int], list[Outcome]], str]:
    """One torch-native program (seed -> its compiles' outcomes), as a torch-program campaign runs it;
    ``guided``: generated under compiler-feedback guidance (``--strategy feedback``), each program's fired
    Inductor keys credited to its operators as the campaign credits them."""
    from dlcfuzz.backends.base import Test, Variant
    from dlcfuzz.backends.torch_compare import is_decline
    from dlcfuzz.backends.torch_program import VARIANTS, TorchProgramBackend
    from dlcfuzz.gen.torch_program import TorchProgramGenerator
    from dlcfuzz.run.torch_campaign import BACKEND, VARIANT_NAMES, plan

    gen = TorchProgramGenerator(None, ops, guided=guided)
    backend = TorchProgramBackend()
    fired: list[str] = []
    backend.fired = fired.extend  # as a campaign's worker collects them
    here = {v.name for v in backend.variants()}  # inductor-halide where the Halide package is installed
    known = [v for v in VARIANT_NAMES if v in here and (not only or v in only.split(","))]

    def one(test_seed: int) -> list[Outcome]:
        graph = gen.generate(test_seed)
        graph.meta["target"] = BACKEND
        names = plan(graph, random.Random(test_seed), known)  # the same draws whatever is kept
        try:
            program = backend.load(Test(b"", graph.to_json(), {}))
        except Hang:
            raise
        except Exception as e:  # EagerRejects: the generator's decline
            return ["declined" if is_decline(type(e).__name__, str(e)) else crashed("import", e)]
        got = []
        fired.clear()
        for name in names:
            RAN[name] += 1
            try:
                backend.compile(program, Variant(name, dict(VARIANTS[name])))
                got.append("ok")
            except Hang:
                raise
            except Exception as e:
                got.append("declined" if is_decline(type(e).__name__, str(e)) else crashed(name, e))
        gen.feedback(graph, fired)
        return got

    return one, ("guided, " if guided else "") + "plan(): " + ", ".join(known)


def measure(side: str, n: int, seed: int, ops: tuple[int, int], timeout: int, out: Path, start: int,
            native_variants: str = "", cpu_budget: float = 0.0, first: int = 0) -> None:
    """Runs programs ``start``..n-1 of one side under coverage.  After each program it saves the state
    (``out/SIDE.json``) and the coverage data (``out/SIDE.coverage.START``): a program that takes the
    process down (a segfault, or a hang in native code, which the watchdog ends) loses nothing before it,
    and the driver goes on after it in a fresh process."""
    import faulthandler

    from dlcfuzz.backends.inductor import PATTERN_DEBUG

    os.environ.setdefault(*PATTERN_DEBUG)  # Inductor counts matches per pattern name only with it set
    import warnings

    import coverage
    import torch

    from dlcfuzz.backends.inductor import fired_keys, name_pattern_handlers

    warnings.filterwarnings("ignore", category=FutureWarning)  # Inductor's deprecation notes, once per program
    from dlcfuzz.seeds import derive_seed

    name_pattern_handlers()
    one, variants = onnx_side(seed, ops) if side == "onnx" else \
        native_side(seed, ops, native_variants, guided=side == "guided")
    warm_up()
    state_file = out / f"{side}.json"
    if start == first:  # a kept folder's earlier run must not add its lines
        for old in out.glob(f"{side}.coverage.*"):
            old.unlink()
    state = json.loads(state_file.read_text()) if start > first else {
        "side": side, "variants": variants, "root": inductor_dir(), "done": 0, "cpu_s": 0.0, "wall_s": 0.0,
        "programs": {}, "compiles": {}, "ran": {}, "fired": {}, "died": [], "crashes": []}
    programs, compiles = Counter(state["programs"]), Counter(state["compiles"])
    fired = Counter(state["fired"])  # key -> programs it fired in
    RAN.update(state["ran"])
    cov = coverage.Coverage(data_file=str(out / f"{side}.coverage.{start}"), source=[inductor_dir()],
                            config_file=False)
    cpu0, wall0 = cpu_seconds() - state["cpu_s"], time.monotonic() - state["wall_s"]
    cov.start()
    try:
        for i in range(start, n):
            before = snapshot()
            # the alarm interrupts Python; the watchdog ends the process where native code never returns
            faulthandler.dump_traceback_later(2 * timeout, exit=True)
            try:
                with time_limit(timeout):
                    got = one(derive_seed(seed, i))
            except Hang:
                got = ["hung"]
                CRASHES.append(f"hung: over {timeout}s")
            except Exception as e:  # the generator's own failure: no test to compile
                print(f"{side} #{i}: no test: {type(e).__name__}: {e}"[:300], file=sys.stderr)
                got = ["declined"]
            finally:
                faulthandler.cancel_dump_traceback_later()
            fired.update(fired_keys(before, snapshot()))
            programs[worst(got)] += 1
            compiles.update(got)
            torch._dynamo.reset()  # each program starts from a clean Dynamo (no recompile limits, no stale caches)
            cov.save()
            state["crashes"] += [f"#{i} {c}" for c in CRASHES]
            CRASHES.clear()
            state.update(done=i + 1, programs=dict(programs), compiles=dict(compiles), ran=dict(RAN), fired=dict(fired),
                         cpu_s=cpu_seconds() - cpu0, wall_s=time.monotonic() - wall0)
            state_file.write_text(json.dumps(state, indent=1))
            if (i + 1) % 10 == 0 or i + 1 == n:
                print(f"{side}: {i + 1}/{n} programs, {state['wall_s']:.0f}s", file=sys.stderr, flush=True)
            if cpu_budget and state["cpu_s"] >= cpu_budget:  # equal time: the side's CPU budget is spent
                print(f"{side}: {i + 1} programs in {state['cpu_s']:.0f} CPU s", file=sys.stderr, flush=True)
                break
    finally:
        cov.stop()
        cov.save()


def run_side(side: str, a: argparse.Namespace, out: Path) -> None:
    """One side in child processes: a fresh one after a program that took the process down (counted as
    crashed, under "died"; its own CPU time is not counted)."""
    start = a.first
    # a cache of its own, empty at the start: a C++ kernel or an autotuning choice that an earlier run left
    # in the default cache would skip its compile and benchmark (and their lines) on one side only
    cache = out / f"{side}.inductor-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    try:
        while True:
            r = subprocess.run([sys.executable, __file__, "--side", side, "-n", str(a.n), "--seed", str(a.seed),
                                "--ops", f"{a.ops[0]}:{a.ops[1]}", "--timeout", str(a.timeout), "--out", str(out),
                                "--start", str(start), "--first", str(a.first), "--native-variants", a.native_variants,
                                "--cpu-seconds", str(a.cpu_seconds)], env=env)
            state_file = out / f"{side}.json"
            if r.returncode == 0:
                return
            if not state_file.exists():
                raise SystemExit(f"{side}: the measuring process failed before its first program (exit {r.returncode})")
            state = json.loads(state_file.read_text())
            if state["done"] < start:  # it died before finishing the program after the last restart: no state yet
                state["done"] = start
            print(f"{side}: program #{state['done']} took the process down (exit {r.returncode}); going on after it",
                  file=sys.stderr)
            state["died"].append(state["done"])
            state["programs"]["crashed"] = state["programs"].get("crashed", 0) + 1
            state["done"] += 1
            state_file.write_text(json.dumps(state, indent=1))
            if state["done"] >= a.n:
                return
            start = state["done"]
    finally:
        shutil.rmtree(cache, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The driver: both sides, then the comparison
# ---------------------------------------------------------------------------------------------
def covered_lines(out: Path, side: str, root: str) -> dict[str, set[int]]:
    """file (relative to torch/_inductor) -> lines executed, over the side's processes' data files."""
    import coverage

    got: dict[str, set[int]] = {}
    for path in sorted(out.glob(f"{side}.coverage.*")):
        data = coverage.CoverageData(basename=str(path))
        data.read()
        for f in data.measured_files():
            got.setdefault(os.path.relpath(f, root), set()).update(data.lines(f) or ())
    return got


def folder_of(rel: str) -> str:
    """A file's kind of Inductor code: its top folder (codegen/, fx_passes/, kernel/...), else the file."""
    return rel.split(os.sep)[0] + "/" if os.sep in rel else rel


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def compare(res: dict[str, dict], lines: dict[str, dict[str, set[int]]], top: int, a: str = "onnx",
            b: str = "native") -> None:
    """Side ``b`` against side ``a`` (the baseline)."""
    sides = (a, b)
    o, nat = res[a], res[b]
    total = {s: sum(len(v) for v in lines[s].values()) for s in sides}

    def keys(s: str, group: str) -> set[str]:
        return {k for k in res[s]["fired"] if k.split(":")[1] == group}

    counter_keys = {s: keys(s, "inductor") for s in sides}
    patterns = {s: keys(s, "inductor_pattern_matcher_per_pattern") for s in sides}
    opts = {s: counter_keys[s] | patterns[s] for s in sides}
    rows: list[tuple[str, Any, Any, str]] = []
    for what in ("ok", "declined", "crashed", "hung"):
        rows.append((f"programs {what}", o["programs"].get(what, 0), nat["programs"].get(what, 0), ""))
    rows.append(("  of which killed the process", len(o["died"]), len(nat["died"]), ""))
    rows.append(("compiles (variants run)", sum(o["compiles"].values()), sum(nat["compiles"].values()), ""))
    rows.append(("CPU s (measured loop)", f"{o['cpu_s']:.0f}", f"{nat['cpu_s']:.0f}", ratio(nat["cpu_s"], o["cpu_s"])))
    rows.append(("wall s", f"{o['wall_s']:.0f}", f"{nat['wall_s']:.0f}", ""))
    rows.append(("files of _inductor reached", *(sum(bool(v) for v in lines[s].values()) for s in sides), ""))
    rows.append(("lines of _inductor covered", total[a], total[b], ratio(total[b], total[a])))
    rows.append(('counters["inductor"] keys', len(counter_keys[a]), len(counter_keys[b]),
                 ratio(len(counter_keys[b]), len(counter_keys[a]))))
    rows.append(("patterns matched (by name)", len(patterns[a]), len(patterns[b]),
                 ratio(len(patterns[b]), len(patterns[a]))))
    rows.append(("optimizations fired (both)", len(opts[a]), len(opts[b]),
                 ratio(len(opts[b]), len(opts[a]))))
    print(f"\n{'':<30}{a:>10}{b:>10}{' ' + b + '/' + a:>14}")
    for name, left, right, r in rows:
        print(f"{name:<30}{left!s:>10}{right!s:>10}{r:>13}")
    for s in sides:
        ran = ", ".join(f"{k} {v}" for k, v in Counter(res[s].get("ran", {})).most_common())
        print(f"{s} compiles by variant: {ran}")
        for c in res[s].get("crashes", []):
            print(f"  {s} crash {c}")

    both = sum(len(lines[a].get(f, set()) & v) for f, v in lines[b].items())
    print(f"\nlines: both {both}, {a} only {total[a] - both}, {b} only {total[b] - both}, "
          f"union {total[a] + total[b] - both}")
    if sides == ("onnx", "native"):  # the targets
        for label, got, need, target in (("lines", total[b], total[a], TARGET_LINES),
                                         ("optimizations", len(opts[b]), len(opts[a]), TARGET_OPTS)):
            short = target * need - got
            verdict = "met" if short <= 0 else f"missed by {short:.0f} ({got / max(need, 1):.2f}x of {target:.0f}x)"
            print(f"target native >= {target:.0f}x onnx {label}: {verdict}")

    files = set(lines[a]) | set(lines[b])

    def only(x: str, y: str) -> Counter[str]:
        return Counter({f: len(lines[x].get(f, set()) - lines[y].get(f, set())) for f in files})

    for x, y in ((a, b), (b, a)):
        diff = only(x, y)
        folders: Counter[str] = Counter()
        for f, c in diff.items():
            folders[folder_of(f)] += c
        print(f"\nlines {x} reaches that {y} does not, by folder: " +
              ", ".join(f"{k} {v}" for k, v in folders.most_common(top) if v))
        print(f"top files ({x} only lines / {x} lines / {y} lines):")
        for f, c in diff.most_common(top):
            if c:
                print(f"  {c:>6} {len(lines[x].get(f, ())):>6} {len(lines[y].get(f, ())):>6}  {f}")
    for x, y in ((a, b), (b, a)):
        extra = sorted(opts[x] - opts[y])
        print(f"\noptimizations only {x} fired ({len(extra)}): " +
              ", ".join(k.split(":", 2)[2] for k in extra))


def main() -> None:
    from dlcfuzz.cli.options import op_range

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=300, help="programs per side")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ops", type=op_range, default=(10, 10), help="operators per program LB:UB")
    p.add_argument("--timeout", type=int, default=180, help="seconds per program before it counts as hung")
    p.add_argument("--top", type=int, default=12, help="files and folders listed per direction")
    p.add_argument("--out", help="keep each side's JSON and coverage data here (default: a temporary folder)")
    p.add_argument("--native-variants", default="",
                   help="comma-separated: keep only these of the campaign's torch-program variants (default: all)")
    p.add_argument("--sides", default="onnx,native",
                   help="the two sides compared, baseline first: onnx, native, guided (native programs under "
                        "compiler-feedback guidance); e.g. native,guided")
    p.add_argument("--cpu-seconds", type=float, default=0.0,
                   help="equal time: each side stops once its measured loop used this many CPU seconds (or at -n)")
    p.add_argument("--jobs", type=int, default=1, choices=(1, 2), help="2: both sides at once, one core each")
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # internal: run one side in this process
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)  # internal: resume after a dead process
    p.add_argument("--first", type=int, default=0,
                   help="begin at program K (a shard: shards' coverage data files together make the side's)")
    a = p.parse_args()
    with contextlib.ExitStack() as stack:
        out = Path(a.out) if a.out else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        out.mkdir(parents=True, exist_ok=True)
        if a.side:
            measure(a.side, a.n, a.seed, a.ops, a.timeout, out, a.start, a.native_variants, a.cpu_seconds, a.first)
            return
        sides = a.sides.split(",")
        if len(sides) != 2 or not set(sides) <= set(SIDES) or sides[0] == sides[1]:
            raise SystemExit(f"--sides takes two different sides of {', '.join(SIDES)}, e.g. native,guided")
        print(f"inductor reach: {a.n} programs per side" + (f" or {a.cpu_seconds:.0f} CPU s" if a.cpu_seconds else "")
              + f", ops {a.ops[0]}:{a.ops[1]}, seed {a.seed}: {sides[1]} against {sides[0]}", flush=True)
        if a.jobs == 2:  # one core each; with one, one after the other (the machine's cores are shared)
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda side: run_side(side, a, out), sides))
        else:
            for side in sides:
                run_side(side, a, out)
        res = {s: json.loads((out / f"{s}.json").read_text()) for s in sides}
        lines = {s: covered_lines(out, s, res[s]["root"]) for s in sides}
        compare(res, lines, a.top, *sides)


if __name__ == "__main__":
    main()
