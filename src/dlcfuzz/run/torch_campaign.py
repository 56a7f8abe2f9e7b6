"""torch-native programs against torch.compile in a campaign: the execute half of a program test
(``TorchProgramTester``) and what a new program bug adds to its bundle (``finish_program_bugs``), both
called by ``run.campaign``'s one driver.  A campaign whose backends include Inductor
(``CampaignConfig.program_specs``) runs programs as one more arm of its allocation beside its ONNX
graphs; ``dlcfuzz fuzz --backends inductor`` (``TorchProgramCampaign``) runs programs only.

Each test is a program of ``gen/torch_program.py`` run by the backend ``inductor-program``
(``backends/torch_program.py``) on some of its variants (always one plain or backward compile; the
dynamic-shape one for most dynamic programs, the multi-threaded one for a few, one under Inductor flags
for a fifth, the layout oracle for some: ``plan``), judged by
``oracle/torch_program.judge_outcomes``.  A new distinct bug's bundle holds ``program.py`` (the
standalone program) and a ``repro.py`` that is the program plus a few lines comparing the compiled
variant with eager; the reduction drops calls while the same signature shows, and rewrites both.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dlcfuzz.backends.base import Test, Variant
from dlcfuzz.export.torch_program import to_program_source
from dlcfuzz.gen.feedback import STRATEGY as FEEDBACK
from dlcfuzz.gen.guided import Coverage
from dlcfuzz.gen.torch_program import ProgramOptions, TorchProgramGenerator, mutated_inputs
from dlcfuzz.ir import Graph
from dlcfuzz.oracle import COMPILER, CRASH, Finding, Verdict
from dlcfuzz.oracle.torch_program import judge_outcomes
from dlcfuzz.oracle.triggers import Analysis
from dlcfuzz.run import program_triggers as pt
from dlcfuzz.run.bugreport import write_report
from dlcfuzz.run.campaign import Campaign, CampaignConfig, Executed, Progress
from dlcfuzz.run.dedup import graph_signature, record_triggers
from dlcfuzz.run.store import TestRecord
from dlcfuzz.run.worker import PhaseLimits
from dlcfuzz.seeds import derive_seed
from dlcfuzz.spec.torch import TorchOpSpec

BACKEND = "inductor-program"
PROGRAM_REDUCTION = "program_reduction.json"  # a program bug's reduction and trigger analysis, in its bundle
REDUCED_PROGRAM = "reduced_program.json"  # its smallest program's graph
VARIANT_NAMES = ("inductor", "inductor-dynamic", "inductor-threads", "inductor-backward", "inductor-cpp-wrapper",
                 "inductor-freezing", "inductor-config", "inductor-layout", "inductor-autotune", "inductor-fx-passes",
                 "inductor-cache", "inductor-aoti", "inductor-halide", "inductor-halide-backward")
# the variants under Inductor flags, one of which runs on CONFIG_SHARE of the programs (the sampled one for half)
CONFIG_VARIANTS = ("inductor-config", "inductor-config", "inductor-cpp-wrapper", "inductor-freezing")
CONFIG_SHARE = 0.3
LAYOUT_SHARE = 0.15  # the metamorphic layout oracle
# A dynamic-shape compile, and its second call at other sizes, costs twice a static one: in a 30-minute
# campaign it took 39 % of the compilers' time and was the only variant of 2 of its 17 roots, while the
# backward compile took 24 % and was the only one of 6 (``gen/torch_program.py``'s backward_rate)
DYNAMIC_SHARE = 0.5
# the configurations aimed at what a program holds (an operator's name, split at "_", holding one of the words):
# max_autotune's C++ GEMM template (with freezing) where it multiplies matrices or convolves, the split/cat and
# batch-fusion passes where it splits, concatenates, stacks or unbinds; the FX graph cache for any
GEMM_WORDS = frozenset({"linear", "mm", "bmm", "addmm", "baddbmm", "matmul", "einsum", "attention", "sdpa", "dot",
                        "conv", "conv1d", "conv2d", "conv3d"})
SPLIT_CAT_WORDS = frozenset({"split", "cat", "stack", "unbind", "chunk", "hstack", "vstack"})
AUTOTUNE_SHARE = 0.3
FX_PASSES_SHARE = 0.3
CACHE_SHARE = 0.1
# AOTInductor (torch.export, then a compiled package loaded back) for programs that run forward and write no
# input: a package's compile costs about three times a torch.compile's
AOTI_SHARE = 0.1
# the Halide CPU backend: Inductor's SIMD codegen and tiling, which the C++ backend never runs (backward too,
# for a program that runs backward); a program's Halide kernels take about three times its C++ ones to build
HALIDE_SHARE = 0.15
# `--backends inductor` alone runs torch-native programs on this backend (with others beside it, besides ONNX graphs)
PROGRAM_BACKENDS = {"inductor": BACKEND, BACKEND: BACKEND, "inductor-torch": BACKEND}
# of those, the ones that take no ONNX graph (Inductor's torch path): in a campaign of programs only
PROGRAMS_ONLY = frozenset(PROGRAM_BACKENDS) - {"inductor"}


def wants_programs(backends: list[str]) -> bool:
    """Whether a campaign over these backends is a campaign of torch programs only (Inductor alone)."""
    return len(backends) == 1 and backends[0] in PROGRAM_BACKENDS


def runs_programs(backends: list[str]) -> bool:
    """Whether a campaign over these backends runs torch-native programs (beside ONNX graphs or alone)."""
    return any(b in PROGRAM_BACKENDS for b in backends)


def plan(graph: Graph, rng: random.Random, known: list[str] | None = None) -> list[str]:
    """The variants one program runs on: its forward (with backward where the program asks for it), the
    dynamic-shape compile for ``DYNAMIC_SHARE`` of the programs that may be dynamic, the threaded one for a
    few, one under Inductor flags for ``CONFIG_SHARE`` of them (cpp_wrapper, freezing, or flags sampled from
    the test's seed: ``meta["inductor_config"]``), the layout oracle for ``LAYOUT_SHARE``, max_autotune's
    GEMM template for ``AUTOTUNE_SHARE`` of those that multiply matrices or convolve, the split/cat passes
    for ``FX_PASSES_SHARE`` of those that split or concatenate, the FX graph cache for ``CACHE_SHARE`` (of
    the ``known`` variants of the backend, where given), AOTInductor for ``AOTI_SHARE`` of the forward programs
    that write no input, the Halide backend for ``HALIDE_SHARE`` (in the program's direction); on a GPU, each
    of these that has a CUDA form (``inductor-cuda``, ``inductor-cuda-dynamic``, ``inductor-cuda-backward``)
    runs there too."""
    out = ["inductor-backward" if graph.meta.get("backward") else "inductor"]
    if graph.meta.get("dynamic") and rng.random() < DYNAMIC_SHARE:
        out.append("inductor-dynamic")
    if rng.random() < 0.15:
        out.append("inductor-threads")
    if rng.random() < CONFIG_SHARE:
        out.append(rng.choice(CONFIG_VARIANTS))
        if out[-1] == "inductor-config":  # its flags, drawn from the test's seed, travel with the program
            from dlcfuzz.backends.torch_program import sample_config

            graph.meta["inductor_config"] = sample_config(rng.getrandbits(32))
    if rng.random() < LAYOUT_SHARE:
        out.append("inductor-layout")
    words = {w for n in graph.nodes for w in n.op.rsplit(".", 1)[-1].split("_")}
    if rng.random() < AUTOTUNE_SHARE and words & GEMM_WORDS:
        out.append("inductor-autotune")
    if rng.random() < FX_PASSES_SHARE and words & SPLIT_CAT_WORDS:
        out.append("inductor-fx-passes")
    if rng.random() < CACHE_SHARE:
        out.append("inductor-cache")
    if rng.random() < AOTI_SHARE and not graph.meta.get("backward") and not graph.meta.get("mutated"):
        out.append("inductor-aoti")
    if rng.random() < HALIDE_SHARE:
        out.append("inductor-halide-backward" if graph.meta.get("backward") else "inductor-halide")
    if known is not None:
        on_gpu = [v.replace("inductor", "inductor-cuda", 1) for v in out]
        out = [v for v in out + on_gpu if v in known] or known[:1]
    return out


def ops_index(graph: Graph) -> tuple[dict[int, str], dict[int, str]]:
    """(output index -> the operator that made it, input index -> the first operator that reads it)."""
    made = {o: n.op for n in graph.nodes for o in n.outputs}
    outs = {i: made.get(o, "") for i, o in enumerate(graph.outputs)}
    first: dict[str, str] = {}
    for n in graph.nodes:
        for x in n.inputs:
            first.setdefault(x, n.op)
    ins = {i: first.get(v.name, "") for i, v in enumerate(graph.inputs)}
    return outs, ins


def judge_program(graph: Graph, outcomes, backend: str = BACKEND) -> Verdict:
    """The torch-program rule of the judge on one backend's outcomes of ``graph``."""
    outs, ins = ops_index(graph)
    if backend in ("tvm-torch", "openvino-torch"):  # the PyTorch frontends (run/program_frontends.py)
        from dlcfuzz.oracle.program_frontend import judge_frontend_outcomes

        return judge_frontend_outcomes(backend, outcomes, outs, ins)
    return with_variant_flags(graph, judge_outcomes(backend, outcomes, outs, ins))


def with_variant_flags(graph: Graph, verdict: Verdict) -> Verdict:
    """A finding under Inductor flags whose worker bisected nothing (it died): the variant's flags, all of
    them (the sampled ones are the program's ``meta["inductor_config"]``)."""
    from dlcfuzz.backends.torch_program import VARIANTS

    for f in verdict.findings:
        flags = VARIANTS.get(f.variant, {}).get("config")
        if flags and "config" not in f.details:
            flags = dict(graph.meta.get("inductor_config") or {}) if flags == "sampled" else dict(flags)
            f.details.update(config=flags, variant_config=flags)
    return verdict


def program_generator(cfg: CampaignConfig, specs: list[TorchOpSpec] | None, options: ProgramOptions | None,
                      coverage: Coverage | None) -> TorchProgramGenerator:
    """The campaign's program generator: guided by the Inductor optimizations programs fire under
    ``--strategy feedback`` (sharing the campaign's coverage of them), else Isra's uniform draws."""
    return TorchProgramGenerator(specs, cfg.ops, options=options, guided=cfg.strategy == FEEDBACK,
                                 coverage=coverage)


class TorchProgramTester:
    """The execute half of a torch-program test (test id -> ``Executed``)."""

    def __init__(self, cfg: CampaignConfig, gen: TorchProgramGenerator, pool, backend: str = BACKEND) -> None:
        self.cfg, self.gen, self.pool, self.backend = cfg, gen, pool, backend
        self.compilers = [backend]
        self.lock = threading.Lock()  # the generator (and its guidance) is shared by the campaign's threads

    @classmethod
    def of(cls, cfg: CampaignConfig, pool, variants: list[str], coverage: Coverage | None = None) -> TorchProgramTester:
        """The program half of a campaign with ONNX graphs too: ``cfg.program_specs`` on
        ``cfg.program_backend`` (whose ``variants`` started)."""
        gen = program_generator(cfg, cfg.program_specs, cfg.program_options, coverage)  # type: ignore[arg-type]
        tester = cls(cfg, gen, pool, cfg.program_backend)
        tester._variants = list(variants) or None
        return tester

    def execute(self, test_id: int, payload: None = None) -> Executed:
        t_start = time.perf_counter()
        seed = derive_seed(self.cfg.seed, test_id)
        with self.lock:
            graph = self.gen.generate(seed)
        graph.meta["target"] = self.backend
        variants = plan(graph, random.Random(seed), self.variants)  # may add the sampled flags to the meta
        test = Test(b"", graph.to_json(), {})
        t_generate = time.perf_counter() - t_start
        got = self.pool.run(self.backend, test, variants)
        compiler_s = sum(sum(o.seconds.values()) for o in got.values())
        with self.lock:  # compiler-feedback guidance: the Inductor optimizations this program fired
            covered = self.gen.feedback(graph, [k for o in got.values() for k in o.fired])
        t0 = time.perf_counter()
        verdict = judge_program(graph, got, self.backend)
        oracle_s = time.perf_counter() - t0
        eager_ok = not any(o.error_type == "EagerRejects" for o in got.values())
        record = TestRecord(test_id, seed, sorted({n.op for n in graph.nodes}), "eager" if eager_ok else "none",
                            eager_ok, 1, eager_ok, time.perf_counter() - t_start, t_generate, 0.0, compiler_s,
                            oracle_s)
        return Executed(record, graph, test, {self.backend: got}, verdict, None, None, covered)

    @property
    def variants(self) -> list[str]:
        return list(self._variants) if self._variants is not None else list(VARIANT_NAMES)

    _variants: list[str] | None = None

    def close(self) -> None:
        self.pool.close()


class TorchProgramCampaign(Campaign):
    """``Campaign`` with torch-native programs: no ONNX reference, no support profiles to probe (the
    generator makes only what eager torch runs; what it does not is counted as eager's decline)."""

    def __init__(self, cfg: CampaignConfig, on_progress: Callable[[Progress], None] | None = None,
                 specs: list[TorchOpSpec] | None = None, options: ProgramOptions | None = None) -> None:
        super().__init__(cfg, on_progress)
        self.program_gen = program_generator(cfg, specs, options, self.coverage)

    @property
    def backend(self) -> str:
        return self.cfg.backends[0] if self.cfg.backends else BACKEND

    def start_backends(self) -> None:
        self._start([self.backend])

    def load_profiles(self) -> None:
        self.unprofiled, self.unprobed = [], {}

    @property
    def tester(self) -> TorchProgramTester:  # type: ignore[override]
        if self._tester is None:
            tester = TorchProgramTester(self.cfg, self.program_gen, self.pool, self.backend)
            tester._variants = list(self.variants.get(self.backend, {})) or None
            self._tester = tester  # type: ignore[assignment]
        return self._tester  # type: ignore[return-value]
    # record: ``Campaign.record``, which knows a program test by its graph (program bundles, program reducer)



def finish_program_bugs(campaign: Campaign, graph: Graph, new: list[tuple[Path, Finding]]) -> None:
    """After the commit of a program test (``Campaign.record``), each new bug's bundle (``folder``):
    program.py and repro.py; the program reducer within the campaign's reduce budget (its time is the
    program backend's cost in the allocation, as an ONNX reduction's is its compiler's); the root the bug
    merges by."""
    budget = campaign.cfg.reduce_seconds
    for folder, f in new:
        if not folder.is_dir() or (folder / "program.py").exists():
            continue
        base = campaign.variants[f.backend][f.variant]
        write_program_bundle(folder, graph, f, finding_variant(base, f, graph))
        smallest, analysis = graph, None
        if budget and f.category == COMPILER:
            t0 = time.monotonic()
            got = reduce_program(with_flags(graph, f), f, campaign.pool, budget)
            reduced = got[0] if got is not None else None
            if got is not None:
                smallest = reduced
                write_program_bundle(folder, got[0], f, finding_variant(base, got[1], got[0]), "reduced")
            spent = time.monotonic() - t0
            analysis = program_triggers(campaign.pool, f, with_flags(smallest, f))
            write_program_reduction(folder, graph, reduced, spent, analysis)
            campaign.allocator.credit(f.backend, spent + analysis.seconds, 0, tests=0)
            with campaign.lock:
                campaign.progress.reduced += reduced is not None
                campaign.progress.reduce_seconds += spent
                record_triggers(campaign.store, None, analysis)
        with campaign.lock:  # bugs whose smallest programs call the same operators the same way are one
            campaign.store.merge_root(graph_signature(f, graph), program_root(f, smallest, analysis),
                                      program_title(f))


def finding_variant(variant: Variant, f: Finding, graph: Graph | None = None) -> Variant:
    """The variant as the finding needs it: with only the Inductor flags that still show it (the worker's
    bisection; none for a default-config bug; else the program's sampled flags) and the layout variant's
    other layouts."""
    options = dict(variant.options)
    if "config" in f.details:
        options["config"] = dict(f.details["config"])
    elif options.get("config") == "sampled":
        options["config"] = dict((graph.meta if graph is not None else {}).get("inductor_config") or {})
    if f.details.get("relayout"):
        options["relayout"] = list(f.details["relayout"])
    elif not isinstance(options.get("relayout"), list):  # found at the first call: no other layouts to replay
        options.pop("relayout", None)
    return Variant(variant.name, options)


def with_flags(graph: Graph, f: Finding) -> Graph:
    """For the sampled-config variant, the program carrying only the flags its finding needs (so that
    the reduction's runs set those)."""
    if f.variant.endswith("inductor-config") and "config" in f.details and f.details["config"]:
        graph = Graph.from_json(graph.to_json())
        graph.meta["inductor_config"] = dict(f.details["config"])
    return graph


def shows_again(pool, f: Finding, graph: Graph) -> bool | None:
    """Whether ``graph`` (a variation of the bug's program) still shows the bug on its variant: a finding
    of the same oracle and kind (a crash: of the same error type); None where eager torch or the compiler
    declined it."""
    got = pool.run(f.backend, Test(b"", graph.to_json(), {}), [f.variant])
    verdict = judge_program(graph, got, f.backend)
    if any(x.oracle == f.oracle and x.kind == f.kind and (f.oracle != CRASH or x.error_type == f.error_type)
           for x in verdict.findings):
        return True
    return None if verdict.unsupported else False


def program_triggers(pool, f: Finding, graph: Graph) -> Analysis:
    """The trigger analysis of a program bug's smallest program (``run/program_triggers.py``)."""
    t0 = time.monotonic()
    results = pt.analyze(graph, lambda g: shows_again(pool, f, g))  # one run per mechanism
    trigger = pt.triggers(results)
    return Analysis(root=pt.root_name(f, trigger), trigger=trigger, kinds=["mechanism"] * len(trigger),
                    runs=len(results),
                    seconds=time.monotonic() - t0,
                    tried=[{"kind": "mechanism", "cause": m, "result": r} for m, r in results.items()])


def write_program_reduction(folder: Path, graph: Graph, reduced: Graph | None, seconds: float,
                            analysis: Analysis) -> None:
    """The bundle's record of its program's reduction (``program_reduction.json``: calls before and after,
    seconds, the trigger analysis) and the smallest program's graph as ``reduced_program.json`` (what
    retriage reads; not ``reduced/``, which holds an ONNX reducer's model)."""
    if reduced is not None:
        (folder / REDUCED_PROGRAM).write_text(reduced.to_json())
    record = {"calls_before": len(graph.nodes), "calls_after": len((reduced or graph).nodes),
              "reproduced": reduced is not None, "seconds": round(seconds, 2), "triggers": analysis.summary()}
    (folder / PROGRAM_REDUCTION).write_text(json.dumps(record, indent=1))


def retriage_program(pool, folder: Path, f: Finding, graph: Graph, recorded_root: str) -> tuple[str, Analysis]:
    """A recorded program bug's root as today's dlcfuzz gives it (``dlcfuzz retriage``): the trigger
    analysis of its smallest program (``reduced_program.json``, else the program that found it); without a
    trigger, its operators' root where the smallest program is kept, else the root it was recorded under
    (an older bundle keeps no reduced program, and the found program's operators would split its root)."""
    try:
        smallest, kept = Graph.from_json((folder / REDUCED_PROGRAM).read_text()), True
    except (OSError, ValueError, KeyError, TypeError):
        smallest, kept = graph, False
    analysis = program_triggers(pool, f, with_flags(smallest, f))
    if analysis.root or kept or not recorded_root:
        return program_root(f, smallest, analysis), analysis
    return recorded_root, analysis


def program_root(f: Finding, graph: Graph, analysis: Analysis | None = None) -> str:
    """The root cause a program bug merges by: the mechanism whose plain spelling makes it vanish, where
    the trigger analysis found one (``run/program_triggers.py``); else its kind and layer (and crash
    type), the Inductor flags it needs, and the operators its smallest program still calls."""
    import hashlib

    if analysis is not None and analysis.root:
        return analysis.root
    parts = [f.backend, f.oracle, f.kind, f.details.get("layer", ""), f.error_type,
             *sorted({n.op for n in graph.nodes})]
    if f.details.get("config"):  # the Inductor flags it needs
        parts.append(repr(sorted(f.details["config"].items())))
    return "program:" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def program_title(f: Finding) -> str:
    from dlcfuzz.oracle.torch_program import title

    return title(f)


def write_program_bundle(folder: Path, graph: Graph, f: Finding, variant: Variant, label: str = "") -> None:
    """program.py (the standalone program) and repro.py (it, plus the check of ``variant`` against eager);
    a reduced program replaces both and keeps the original as original_program.py."""
    from dlcfuzz.backends.torch_program import repro_script
    from dlcfuzz.oracle.torch_program import title

    source = to_program_source(graph)
    if label and (folder / "program.py").exists():
        (folder / "original_program.py").write_text((folder / "program.py").read_text())
    (folder / "program.py").write_text(source)
    if f.backend in ("tvm-torch", "openvino-torch"):  # a PyTorch frontend's own export-convert-compile check
        from dlcfuzz.backends import load_backend

        frontend = load_backend(f.backend)
        (folder / "repro.py").write_text(frontend.program_repro(source, variant, title(f)))  # type: ignore[attr-defined]
    else:
        (folder / "repro.py").write_text(repro_script(source, variant, title(f)))
    model = folder / "model.onnx"
    if model.exists() and model.stat().st_size == 0:
        model.unlink()  # a torch program has no ONNX model
    # the generic bundle's finding.json and report.md were written for an ONNX model: the program's title
    # and report replace them
    found = folder / "finding.json"
    if found.exists():
        found.write_text(json.dumps(json.loads(found.read_text()) | {"title": title(f)}, indent=1, default=str))
    write_report(folder)


def _without(graph: Graph, drop: set[int]) -> Graph:
    """The program without the calls ``drop`` and those that read their outputs (transitively)."""
    g = Graph.from_json(graph.to_json())
    gone: set[str] = set()
    keep = []
    for i, n in enumerate(g.nodes):
        if i in drop or any(x in gone for x in n.inputs if x):
            gone.update(n.outputs)
            continue
        keep.append(n)
    g.nodes = keep
    for name in gone:
        g.values.pop(name, None)
    used = {x for n in keep for x in n.inputs if x}
    for name in [v.name for v in g.values.values() if v.kind != "node" and v.name not in used]:
        g.values.pop(name)
    g.set_leaf_outputs()
    g.meta["ties"] = [t for t in graph.meta.get("ties", []) if t in g.values]
    g.meta["mutated"] = mutated_inputs(g)
    g.meta["layouts"] = {k: v for k, v in graph.meta.get("layouts", {}).items() if k in g.values}
    return g


def reduce_program(graph: Graph, f: Finding, pool, budget: float) -> tuple[Graph, Finding] | None:
    """Drops calls (each with what reads it) while the finding's signature still shows on its variant; the
    smallest program with the finding it showed (its details are the reduced program's own: the layout
    variant's other layouts are one per input *it* has); None where nothing could be dropped within
    ``budget`` seconds."""
    sig = graph_signature(f, graph)
    deadline = time.monotonic() + budget
    current, found = graph, None
    i = len(current.nodes) - 1
    while i >= 0 and time.monotonic() < deadline:
        cand = _without(current, {i})
        if cand.nodes and cand.outputs:
            got = pool.run(f.backend, Test(b"", cand.to_json(), {}), [f.variant])
            same = [x for x in judge_program(cand, got, f.backend).findings if graph_signature(x, cand) == sig]
            if same:
                current, found = cand, same[0]
        i = min(i - 1, len(current.nodes) - 1)
    return (current, found) if found is not None else None


def reduce_program_bundle(folder: Path, budget: float, phases: PhaseLimits | None = None) -> tuple[int, int]:
    """``dlcfuzz reduce`` of a program bug's bundle (it has ``program.py``): the program reducer on the
    bundle's program and finding, rewriting program.py and repro.py (original_program.py keeps the first,
    if not already kept); (calls before, calls after).  ReduceError (one line) where the bundle cannot be
    read or the bug does not show again."""
    import json
    from dataclasses import fields

    from dlcfuzz.backends import load_backend
    from dlcfuzz.run.reduce import ReduceError
    from dlcfuzz.run.worker import WorkerPool

    try:
        info = json.loads((folder / "finding.json").read_text())
        graph = Graph.from_json((folder / "graph.json").read_text())
        f = Finding(**{k.name: info[k.name] for k in fields(Finding) if k.name in info})
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = f"{type(e).__name__}: {e}".splitlines()[0]
        raise ReduceError(f"{folder}: cannot read the program bundle: {why}") from None
    base = next((v for v in load_backend(f.backend).variants() if v.name == f.variant), None)
    if base is None:
        raise ReduceError(f"{folder}: {f.backend} has no variant {f.variant} here")
    sig = graph_signature(f, graph)
    pool = WorkerPool(phases or PhaseLimits())
    try:
        got = pool.run(f.backend, Test(b"", graph.to_json(), {}), [f.variant])
        if not any(graph_signature(x, graph) == sig for x in judge_program(graph, got, f.backend).findings):
            raise ReduceError(f"{folder}: the bug ({sig}) does not show again on {f.backend} {f.variant}")
        got = reduce_program(graph, f, pool, budget)
    finally:
        pool.close()
    if got is None:
        return len(graph.nodes), len(graph.nodes)
    reduced, found = got
    if (folder / "original_program.py").exists():  # keep the program the campaign found, not a reduced one
        (folder / "program.py").unlink()
    write_program_bundle(folder, reduced, f, finding_variant(base, found, reduced), "reduced")
    return len(graph.nodes), len(reduced.nodes)
