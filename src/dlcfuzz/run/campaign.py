"""The fuzzing campaign: generate -> choose inputs -> run every backend in workers -> judge -> store.

Tests are numbered; test i uses the seed derived from (campaign seed, i), so a campaign is
reproducible and a resumed one re-runs exactly the tests it had not committed.  ``jobs`` tests
run at once (threads in this process driving separate worker processes), or on a Ray cluster
(``executor="ray"``, ``run/ray_executor.py``).

A test has two halves: ``Tester.execute`` (test id -> ``Executed``: generate, choose inputs, run the
backends in isolated workers, judge; no store, picklable result) and ``Campaign.record`` (bundles,
the store transaction, progress, reduction), which only the driver runs.  Both executors call the
same two halves, so the store is written by one process in one way.

A test is an ONNX graph run by the ONNX compilers, or (``CampaignConfig.program_specs``) a torch-native
program run by torch.compile alone (``run/torch_campaign.py``: its execute half, its bundle and its
reducer): the program backend is one more arm of the allocation, which decides each test's kind by the
arms' yields of new bugs per CPU-second.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from dlcfuzz.backends import Backend, load_backend
from dlcfuzz.backends.base import OK, Outcome, Test, Variant
from dlcfuzz.backends.devices import DEVICES, keep
from dlcfuzz.export.onnx import checker_error, to_bytes, to_onnx
from dlcfuzz.gen import UNTARGETED, make_generator
from dlcfuzz.gen.feedback import STRATEGY as FEEDBACK
from dlcfuzz.gen.guided import STRATEGIES as GUIDED
from dlcfuzz.gen.guided import Coverage
from dlcfuzz.gen.opsets import OpsetMix
from dlcfuzz.gen.torch_program import ProgramOptions, is_program
from dlcfuzz.ir import Graph
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.oracle import (
    BASELINE,
    COMPILER,
    DIFFERENTIAL,
    FALLBACK,
    REFERENCE,
    REFERENCE_RUN,
    Baseline,
    Finding,
    Verdict,
    all_finite,
    compare,
    criteria_for,
    explain,
    judge,
    judge_invalid,
    run_baseline,
    run_confirmed,
)
from dlcfuzz.oracle.unsupported import is_unsupported
from dlcfuzz.run.allocate import Allocator
from dlcfuzz.run.bundle import write_bundle
from dlcfuzz.run.dedup import (
    graph_signature,
    join_roots,
    producer,
    record_triggers,
    reduced_root,
    refused_root,
    root_keys,
    same_roots,
    title,
    trigger_root,
)
from dlcfuzz.run.known import KNOWN, NEW, KnownBugs, Reporting
from dlcfuzz.run.profile import DECLINED, JointProfile, SupportProfile, find_profile, save_profile, test_status
from dlcfuzz.run.reduce import Case, ReduceError, reduce_case, write_reduction
from dlcfuzz.run.store import Store, TestRecord
from dlcfuzz.run.worker import PhaseLimits, WorkerDied, WorkerPool
from dlcfuzz.seeds import derive_seed
from dlcfuzz.solve import Admission, GenOptions
from dlcfuzz.spec import OpSpec
from dlcfuzz.values import synthesize


@dataclass
class CampaignConfig:
    out: Path
    backends: list[str]
    specs: list[OpSpec]
    budget_seconds: float | None = 600.0
    max_tests: int | None = None
    jobs: int = 1
    seed: int = 0
    ops: tuple[int, int] = (1, 10)
    limits: GenOptions = field(default_factory=GenOptions)
    phases: PhaseLimits = field(default_factory=PhaseLimits)
    input_attempts: int = 8
    recycle: int = 200
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    strategy: str = "isra"
    strategy_options: dict = field(default_factory=dict)  # e.g. p_rej, temperature, paths
    coverage_from: list[Path] = field(default_factory=list)  # campaigns whose coverage guidance starts from
    known_bugs: list[Path] = field(default_factory=list)  # known-bug lists besides the packaged one
    reduce_seconds: float = 0.0  # search budget to reduce each new distinct bug right away (0: do not)
    executor: str = "local"  # "local": threads in this process; "ray": one Ray actor per job
    ray_address: str | None = None  # ray: the cluster to join (None: start a local Ray instance)
    devices: tuple[str, ...] = DEVICES  # the devices whose variants run (backends.devices)
    # each test is generated for one target compiler, from its support profile (run/profile.py), and
    # the others run it where their profiles admit it
    targeted: bool = True
    # the target, the other backends that run a test and their variants follow each one's yield of new
    # bugs per CPU-second (run/allocate.py); False: every backend and variant runs every test
    allocate: bool = True
    # compiled variants per backend (0: all); the uncompiled anchors always run (probing needs one)
    variants_per_backend: int = 0
    # probing: the cached profiles forget what they knew of this campaign's operators (the rest is kept)
    fresh_profiles: bool = False
    # each test's opset is drawn from these (gen/opsets.py); empty: limits.opset alone
    opsets: tuple[int, ...] = ()
    # torch-native programs beside the ONNX graphs (run/torch_campaign.py): their torch operators (empty:
    # none), the backend that runs them (an arm of the allocation: it runs the programs, and only them) and
    # what programs do beyond their graphs (layouts, backward, dynamic dims)
    program_specs: list[OpSpec] = field(default_factory=list)
    program_backend: str = "inductor-program"
    program_options: ProgramOptions | None = None

    def identity(self) -> dict:
        """What must match for a rerun to resume this campaign."""
        out = {"seed": self.seed, "ops": list(self.ops), "backends": sorted(self.backends),
               "operators": sorted(s.op for s in self.specs), "limits": asdict(self.limits),
               "strategy": self.strategy, "strategy_options": self.strategy_options, "tolerances": self.tolerances,
               "opsets": list(self.opsets)}
        if self.program_specs:
            out["programs"] = {"backend": self.program_backend, "operators": sorted(s.op for s in self.program_specs),
                               "options": asdict(self.program_options or ProgramOptions())}
        return out


@dataclass
class BackendStats:
    """One backend's share of a campaign: tests it ran, useful ones (it took the test: imported and
    ran it, or failed on it, which is a finding; not a decline), seconds inside it, new bugs."""

    tests: int = 0
    useful: int = 0
    seconds: float = 0.0
    bugs: int = 0
    targeted: int = 0  # tests generated for it

    @property
    def useful_rate(self) -> float:
        return self.useful / self.tests if self.tests else 0.0


@dataclass
class Progress:
    started: float = field(default_factory=time.monotonic)
    tests: int = 0
    valid: int = 0
    finite: int = 0
    findings: Counter = field(default_factory=Counter)  # (backend, oracle) -> findings
    bugs: Counter = field(default_factory=Counter)  # (backend, oracle) -> distinct bugs
    unsupported: Counter = field(default_factory=Counter)  # backend -> unsupported outcomes
    known: Counter = field(default_factory=Counter)  # backend -> findings of bugs known upstream (not re-reported)
    reduced: int = 0  # new bugs reduced automatically
    reduce_seconds: float = 0.0  # time spent reducing them
    compiler_seconds: float = 0.0
    resumed_from: int = 0
    crash_only: int = 0  # valid tests without a baseline: only crashes and variant disagreements count
    backends: dict[str, BackendStats] = field(default_factory=dict)

    def count(self, record: TestRecord, verdict, new_bugs: list[tuple], known: list[str]) -> None:
        """Adds one committed test: its findings, new distinct bugs ((signature, oracle, kind, backend, ...)),
        unsupported outcomes and findings of bugs known upstream (their backends)."""
        self.tests += 1
        self.valid += record.valid
        self.finite += record.finite
        self.compiler_seconds += record.t_compilers
        for f in verdict.findings:
            self.findings[(f.backend, f.oracle)] += 1
        for b in new_bugs:
            self.bugs[(b[3], b[1])] += 1
        for b, _, _ in verdict.unsupported:
            self.unsupported[b] += 1
        self.known.update(known)

    @property
    def rate(self) -> float:
        return self.tests / max(1e-9, time.monotonic() - self.started)


@dataclass
class Executed:
    """Everything the driver needs to record one test, made without the store (picklable: it comes
    back from a Ray actor on another machine)."""

    record: TestRecord
    graph: Graph
    test: Test
    outcomes: dict[str, dict[str, Outcome]]
    verdict: Verdict
    baseline: list[np.ndarray] | None
    reference: Outcome | None
    covered: list[tuple[str, str]]  # coverage keys the graph added first (as the generator saw coverage)


@dataclass
class Evaluation:
    """One test's inputs run on every backend under test and judged."""

    outcomes: dict[str, dict[str, Outcome]]
    verdict: Verdict
    baseline: list[np.ndarray] | None  # the baseline's outputs
    baseline_name: str  # which baseline computed them ("reference/default", "ort/disable_all", "none")
    finite: bool
    compiler_seconds: float
    oracle_seconds: float


class ProgramTester(Protocol):
    """The execute half of a torch-native program test (``run.torch_campaign.TorchProgramTester``)."""

    backend: str

    def execute(self, test_id: int, payload: None = None) -> Executed: ...


def program_tester(cfg: CampaignConfig, pool: WorkerPool, variants: dict[str, dict[str, Variant]],
                   coverage: Coverage | None = None) -> ProgramTester | None:
    """The execute half of the campaign's torch-native program tests: None where it has none (no torch
    operators, or the program backend did not start)."""
    if not cfg.program_specs or cfg.program_backend not in variants:
        return None
    from dlcfuzz.run.torch_campaign import TorchProgramTester

    return TorchProgramTester.of(cfg, pool, list(variants[cfg.program_backend]), coverage)


class Tester:
    """The execute half of a test: test id -> ``Executed``.  Holds the generator, its coverage and a
    worker pool, and never touches the store.  A local campaign shares one among its threads; each Ray
    actor holds its own (its own worker processes: the same isolation as locally)."""

    def __init__(self, cfg: CampaignConfig, backends: dict[str, Backend], variants: dict[str, dict[str, Variant]],
                 pool: WorkerPool, coverage: Coverage | None, gen=None,
                 profiles: dict[str, SupportProfile] | None = None, allocator: Allocator | None = None,
                 programs: ProgramTester | None = None) -> None:
        self.cfg = cfg
        self.backends, self.variants = backends, variants
        # the execute half of torch-native program tests (run/torch_campaign.py), where the campaign has them
        self.programs = programs if programs is not None else program_tester(cfg, pool, variants, coverage)
        # what every test is judged by: the tolerances and the variants' traits (low precision,
        # uncompiled, float64 in float32, compare_with), from the variants' options (oracle/judge.py)
        self.criteria = criteria_for({b: vs for b, vs in variants.items() if b != self.program_backend},
                                     cfg.tolerances)
        self.anchors = self.criteria.anchors  # the variants others are compared with
        self.pool = pool
        self.coverage = coverage
        self.profiles = profiles or {}
        self.allocator = allocator if cfg.allocate else None
        self.gen = gen or campaign_generator(cfg, coverage)
        # one generator per target compiler, each making only calls that its target and the baseline take
        self.gens = {"": self.gen}
        if cfg.targeted and cfg.strategy not in UNTARGETED:
            baseline = self.profiles.get(FALLBACK[0])
            for name in self.compilers:
                if name in self.profiles:
                    # a profile admits only what was probed; a compiler with none yet (nothing probed) gets
                    # the calls the baseline takes: its targeted tests are its first probes
                    probed = self.profiles[name] if self.profiles[name].counts else None
                    admit = (JointProfile(probed, baseline) if probed is not None and baseline is not None
                             else probed or baseline)
                    if admit is None or any(admit.admits_op(s.op) for s in cfg.specs):
                        self.gens[name] = campaign_generator(cfg, coverage, admit)
        self.lock = threading.Lock()

    @property
    def compilers(self) -> list[str]:
        """The compilers of the ONNX tests."""
        return [b for b in self.backends if b not in (REFERENCE, self.program_backend)]

    @property
    def program_backend(self) -> str | None:
        """The backend of the torch-native program tests, where the campaign has them."""
        return self.programs.backend if self.programs is not None else None

    def plan(self, test_id: int) -> tuple[str, dict[str, list[str]]]:
        """(the target compiler of a test, "" for none; the variants each backend runs it on): by the
        allocator's draws, else targets in turn and every backend on every variant.  A test targeted at
        the program backend is a torch-native program, which it runs alone (on the variants the program
        asks for: ``run/torch_campaign.plan``)."""
        names = self.compilers
        solo = [b for b in [self.program_backend] if b is not None]
        if self.allocator is None or not (names + solo):
            targets = [b for b in names if b in self.gens] + solo
            target = targets[test_id % len(targets)] if targets else ""
            if target in solo:
                return target, {target: []}
            return target, {b: self._variants(b) for b in names}
        target, runs = self.allocator.choose(names + solo, alone=solo)
        if target in solo:
            return str(target), {str(target): []}
        if target not in self.gens:
            target = ""
        return str(target), {b: self._variants(b) for b in names if runs[b]}

    def voter(self, backend: str) -> list[str]:
        """The variant of ``backend`` that votes on a divergence: its anchor, else its first."""
        names = list(self.variants[backend])
        return [next((v for v in names if (backend, v) in self.anchors), names[0])]

    def _variants(self, backend: str) -> list[str]:
        """The variants of ``backend`` a test runs on: its anchors (what others are compared with), and
        of the compiled ones the first ``variants_per_backend``, or those the allocator draws (two variants
        at least, anchors included: variants judge each other where there is no baseline)."""
        names = list(self.variants[backend])
        anchors = [v for v in names if (backend, v) in self.anchors]
        compiled = [v for v in names if (backend, v) not in self.anchors]
        if self.cfg.variants_per_backend:
            compiled = compiled[:self.cfg.variants_per_backend]
        elif self.allocator is not None and len(compiled) > max(1, 2 - len(anchors)):
            best, runs = self.allocator.choose([(backend, v) for v in compiled])
            if len(anchors) + sum(runs.values()) < 2:
                runs[max((k for k in runs if k != best), key=lambda k: self.allocator.rate(k))] = True
            compiled = [v for v in compiled if runs[(backend, v)]]
        return [v for v in names if v in anchors or v in compiled]

    def share(self, keys: list[tuple[str, str]]) -> None:
        """Coverage merged at the driver from other executors' tests (guided strategies)."""
        if self.coverage is not None:
            self.coverage.load(keys)

    def close(self) -> None:
        self.pool.close()

    def execute(self, test_id: int, payload: None = None) -> Executed:
        cfg = self.cfg
        t_start = time.perf_counter()
        seed = derive_seed(cfg.seed, test_id)
        target, plan = self.plan(test_id)
        if self.programs is not None and target == self.programs.backend:
            return self.programs.execute(test_id)
        with self.lock:
            graph = self.gens[target].generate(seed)
            covered = self.coverage.take_new() if self.coverage is not None else []
        if target:
            graph.meta["target"] = target
        model = to_bytes(graph)
        graph_json = graph.to_json()
        t_generate = time.perf_counter() - t_start
        ops = {n.op for n in graph.nodes}
        violation = graph.meta.get("violation")
        if violation is not None:
            return self._run_invalid(test_id, seed, graph, model, violation, covered, t_start, t_generate, plan)

        # inputs whose baseline outputs are finite (bounded retries); the baseline is the reference
        # evaluator where it is trusted for every node of the graph, else (or where it fails) ORT
        # without optimizations, whether or not ORT is under test
        t0 = time.perf_counter()
        attempts = 0
        test = Test(model, graph_json, {})
        base = Baseline(None, None)
        for attempt in range(cfg.input_attempts):
            attempts = attempt + 1
            test = Test(model, graph_json, synthesize(graph, np.random.default_rng([seed, attempt]), attempt))
            base = self._baseline(test, graph)
            if base.outcome is None or all_finite(base.outputs or []):
                break
        t_inputs = time.perf_counter() - t0
        e = self.evaluate(graph, test, base, plan)
        gen = self.gens[target]
        if hasattr(gen, "feedback"):  # compiler-feedback guidance: what this test made the compilers do
            fired = [k for vs in e.outcomes.values() for o in vs.values() for k in o.fired]
            with self.lock:
                covered = covered + gen.feedback(graph, fired)
        record = TestRecord(test_id, seed, sorted(ops), e.baseline_name, e.finite, attempts, e.baseline is not None,
                            time.perf_counter() - t_start, t_generate, t_inputs, e.compiler_seconds, e.oracle_seconds)
        return Executed(record, graph, test, e.outcomes, e.verdict, e.baseline, base.outcome, covered)

    def evaluate(self, graph: Graph, test: Test, baseline: Baseline | None = None,
                 plan: dict[str, list[str]] | None = None) -> Evaluation:
        """Every backend under test on ``test`` (a valid graph with its inputs; ``plan``: the variants
        each backend runs, default all), judged against the baseline (``baseline``: the one chosen for
        these inputs, else it runs now), with every value divergence located and blamed."""
        ops = {n.op for n in graph.nodes}
        base = baseline or self._baseline(test, graph)
        outcomes, late, compiler_s = self._run_backends(test, ops, graph, plan=plan)
        t0 = time.perf_counter()
        outputs = base.outputs
        baseline_name = base.name
        finite = outputs is not None and all_finite(outputs)
        criteria = self.criteria.for_graph(graph, baseline_name)

        def judged():
            return judge(outcomes, outputs if finite else None, criteria)

        verdict = judged()
        # a divergence calls in the backends the allocation left out: whether it is the compiler's bug or
        # the baseline's is decided by the other compilers' vote, and a vote needs one variant of each (its
        # anchor, e.g. Inductor's eager, else its first): all of a slow compiler's would cost its compiles
        absent = {b: self.voter(b) for b in self.compilers if b not in outcomes and plan and b not in plan}
        if absent and any(f.diverges for f in verdict.findings):
            t1 = time.perf_counter()
            more, more_late, more_s = self._run_backends(test, ops, graph, plan=absent)
            t0 += time.perf_counter() - t1  # their time is the compilers', not the oracle's
            outcomes.update(more)
            late += more_late
            compiler_s += more_s
            verdict = judged()
        verdict.unsupported += base.failed  # a baseline that cannot run the model is no compiler's bug
        explain(graph, test, verdict.findings, outcomes, self.backends, self.pool, base.which, criteria)
        verdict.findings += late
        return Evaluation(outcomes, verdict, outputs, baseline_name, finite, compiler_s, time.perf_counter() - t0)

    def _baseline(self, test: Test, graph: Graph) -> Baseline:
        """The judge's baseline for ``test`` (``oracle/judge.py``), with the reference evaluator where
        it started."""
        return run_baseline(self.pool, test, graph, reference=REFERENCE in self.backends)

    def _run_backends(self, test: Test, ops: set[str], graph: Graph, invalid: bool = False,
                      plan: dict[str, list[str]] | None = None):
        """The backends under test on ``test`` (``plan``: which, on which variants; default all), in their
        workers, leaving out those that cannot take the graph: (outcomes, unconfirmed crashes, seconds
        inside the compilers)."""
        outcomes: dict[str, dict[str, Outcome]] = {}
        late: list[Finding] = []  # crashes that a fresh worker did not reproduce
        compiler_s = 0.0
        if plan is None:
            plan = {b: list(self.variants[b]) for b in self.compilers}
        for name, variants in plan.items():
            backend = self.backends[name]
            if (invalid and not backend.checks_models) or not backend.supports(ops, graph):
                continue
            # a compiler known to decline a valid graph is not run on it: that test would be wasted (one
            # with keys its profile does not know yet runs: that is how the profile learns them)
            if (self.cfg.targeted and not invalid and name in self.profiles
                    and self.profiles[name].declines_graph(graph)):
                continue
            outcomes[name], unconfirmed, seconds = run_confirmed(self.pool, name, test, variants)
            late += unconfirmed
            compiler_s += seconds
        return outcomes, late, compiler_s

    def _run_invalid(self, test_id: int, seed: int, graph: Graph, model: bytes, violation: dict,
                     covered: list, t_start: float, t_generate: float, plan: dict[str, list[str]]) -> Executed:
        """A disruptive test: the model breaks one constraint on purpose; the compilers that check
        the models they are handed must reject it with an error."""
        rng = np.random.default_rng(seed)
        test = Test(model, graph.to_json(), {v.name: feed_array(rng, v) for v in graph.inputs})
        outcomes, late, compiler_s = self._run_backends(test, {n.op for n in graph.nodes}, graph, invalid=True,
                                                        plan=plan)
        t0 = time.perf_counter()
        confirmed = _checker_error(graph) is not None
        verdict = judge_invalid(outcomes, violation, confirmed, self.criteria)
        verdict.findings += late
        record = TestRecord(test_id, seed, sorted({n.op for n in graph.nodes}), "invalid", False, 1, False,
                            time.perf_counter() - t_start, t_generate, 0.0, compiler_s, time.perf_counter() - t0)
        return Executed(record, graph, test, outcomes, verdict, None, None, covered)


@dataclass
class TesterSpec:
    """What a remote executor (a Ray actor) needs to build its own ``Tester``: picklable (operator
    specs travel by name: they hold closures), and the backends as the driver described them."""

    cfg: CampaignConfig  # without specs (nor program_specs)
    ops: list[str]
    backends: list[str]
    variants: dict[str, dict[str, Variant]]
    coverage: list[tuple[str, str]] | None  # the driver's coverage when the executor started (None: unguided)
    # the support profiles when the executor started (an actor targets its tests by them; they are not
    # refined there, and an actor's allocation stays at its prior: the yields are counted at the driver)
    profiles: dict[str, SupportProfile] = field(default_factory=dict)
    program_ops: list[str] = field(default_factory=list)  # the torch operators of program tests

    def build(self) -> Tester:
        import tempfile

        from dlcfuzz.spec import REGISTRY
        from dlcfuzz.spec.torch import TORCH_REGISTRY

        cfg = replace(self.cfg, specs=[REGISTRY[op] for op in self.ops],
                      program_specs=[TORCH_REGISTRY[op] for op in self.program_ops])
        coverage = None
        if self.coverage is not None:
            coverage = Coverage()
            coverage.load(self.coverage)
        pool = WorkerPool(cfg.phases, cfg.recycle, Path(tempfile.gettempdir()) / "dlcfuzz-actor-logs")
        return Tester(cfg, {n: load_backend(n) for n in self.backends}, self.variants, pool, coverage,
                      profiles=self.profiles, allocator=Allocator(cfg.seed))


def _keys(cov: Coverage):
    for criterion, keys in cov.sets.items():
        for k in keys:
            yield criterion, k



class Driver:
    """What the driver of a campaign (fuzzing or migration) holds: the store (its only writer), the
    worker pool, progress, the backends under test, and which bug signatures it reports."""

    def __init__(self, out: Path, identity: dict, pool: WorkerPool, known_bugs: list[Path],
                 on_progress: Callable[[Progress], None] | None) -> None:
        self.store = Store(out, lock=True)  # the only writer: a second campaign on the folder is refused
        self.resumed = self.store.bind(identity)
        self.pool = pool
        self.progress = Progress()
        self.on_progress = on_progress or (lambda p: None)
        self.lock = threading.Lock()
        self.backends: dict[str, Backend] = {}
        self.variants: dict[str, dict[str, Variant]] = {}
        self.versions: dict[str, str] = {}
        self.disabled: dict[str, str] = {}
        self.devices: tuple[str, ...] = DEVICES  # variants on other devices are left out
        self.device_notes: dict[str, str] = {}  # "backend/device" -> why the backend has no variants there
        self.reporting = Reporting(self.store.bug_signatures(), KnownBugs.load(known_bugs), self.versions)
        self.profiles: dict[str, SupportProfile] = {}  # what each compiler takes, learned as tests run
        self.lost = 0  # tests whose executor died twice (Ray: the actor), recorded as lost

    def _start(self, names: list[str]) -> None:
        """Asks each backend's worker for its version and variants; a backend whose package is missing
        or whose worker cannot start is disabled with the reason."""
        for name in names:
            backend = load_backend(name)
            ok, why = backend.available()
            if not ok:
                self.disabled[name] = why
                continue
            try:
                version, described = self.pool.describe(name)
            except WorkerDied as e:
                self.disabled[name] = str(e).splitlines()[0]
                continue
            for device, why in self.pool.device_notes(name).items():
                if device in self.devices:
                    self.device_notes[f"{name}/{device}"] = why
            # --devices restricts the compilers under test; the baseline runs where it runs
            kept = described if name == REFERENCE else keep(described, self.devices)
            if not kept:
                self.disabled[name] = f"{name}: no variant runs on {', '.join(self.devices)}"
                continue
            self.backends[name], self.versions[name] = backend, version
            self.variants[name] = {n: Variant(n, o) for n, o in kept}
        self.store.set_meta("versions", self.versions)  # for reports


class Campaign(Driver):
    def __init__(self, cfg: CampaignConfig, on_progress: Callable[[Progress], None] | None = None) -> None:
        self.cfg = cfg
        super().__init__(cfg.out, cfg.identity(), WorkerPool(cfg.phases, cfg.recycle, cfg.out / "logs"),
                         cfg.known_bugs, on_progress)
        self.coverage = None
        # coverage guidance (and feedback keys) continue from earlier campaigns and from this one's tests
        if cfg.strategy in (*GUIDED, FEEDBACK):
            self.coverage = Coverage()
            for folder in cfg.coverage_from:
                other = Store(folder)
                self.coverage.load(other.coverage())
                other.close()
            self.coverage.load(self.store.coverage())
        self.gen = campaign_generator(cfg, self.coverage)
        self.devices = cfg.devices
        self._tester: Tester | None = None
        self.allocator = Allocator(cfg.seed)
        self.unprofiled: list[str] = []  # compilers without a profile for their version (to probe)
        self.unprobed: dict[str, list[str]] = {}  # compiler -> operators its profile never saw (to probe)
        self.warnings: list[str] = []

    # -- set-up -------------------------------------------------------------------------------------
    def start_backends(self) -> None:
        """Asks each backend's worker for its version and variants; a backend whose worker cannot
        start is disabled with the reason.  With torch operators, the program backend starts too."""
        programs = [self.cfg.program_backend] if self.cfg.program_specs else []
        self._start([REFERENCE, *self.cfg.backends, *[b for b in programs if b not in self.cfg.backends]])
        self.load_profiles()

    def load_profiles(self) -> None:
        """Each compiler's support profile for its version (and the baseline ORT's, which every targeted
        test must also suit), from the cache or dlcfuzz's package; an empty one to learn from where
        there is none (``unprofiled``: run ``probe`` to build them).  A profile admits only what was
        probed: ``unprobed`` lists, per compiler, the campaign's operators its profile has never seen
        and the backend does not refuse outright (to probe before a targeted campaign, or they are
        never generated for it)."""
        # torch-native programs have no profile: their generator makes only what eager torch runs
        names = [b for b in self.backends if b not in (REFERENCE, self.program_backend)]
        versions = dict(self.versions)
        if FALLBACK[0] not in versions:
            versions[FALLBACK[0]] = load_backend(FALLBACK[0]).version()
            names.append(FALLBACK[0])
        self.unprofiled = []
        for name in names:
            got = find_profile(name, versions[name], self.warnings.append)
            if got is None:
                self.unprofiled.append(name)
                got = SupportProfile(name, versions[name])
            elif self.cfg.fresh_profiles:
                got.forget({s.op for s in self.cfg.specs})
            self.profiles[name] = got
        backends = {name: self.backends.get(name) or load_backend(name) for name in names}
        self.unprobed = {name: ops for name in names if name not in self.unprofiled and (ops := [
            op for op in self.profiles[name].unknown_ops([s.op for s in self.cfg.specs])
            if backends[name].supports({op})])}

    def save_profiles(self) -> None:
        """Writes back what this campaign's tests taught the profiles (into the user's cache)."""
        for p in self.profiles.values():
            if p.learned:
                save_profile(p)

    @property
    def program_backend(self) -> str | None:
        """The backend of the torch-native program tests, where the campaign has them."""
        return self.cfg.program_backend if self.cfg.program_specs else None

    @property
    def tester(self) -> Tester:
        """The local execute half, sharing this campaign's generator, coverage and worker pool."""
        if self._tester is None:
            self._tester = Tester(self.cfg, self.backends, self.variants, self.pool, self.coverage,
                                  self.gen, self.profiles, self.allocator)
        return self._tester

    # -- one test -------------------------------------------------------------------------------------
    def run_test(self, test_id: int) -> None:
        self.record(self.tester.execute(test_id))

    def record(self, ex: Executed) -> None:
        """The record half, on the driver only: bundles for new distinct bugs, then the test's one store
        transaction, then progress, then the reduction of new bugs."""
        cfg = self.cfg
        record, graph, test, outcomes, verdict = ex.record, ex.graph, ex.test, ex.outcomes, ex.verdict
        rows, new_bugs, known, to_reduce = [], [], [], []
        program = is_program(graph)  # a torch-native program: its own bundle files and reducer, below
        new_programs: list[tuple[Path, Finding]] = []
        for f in verdict.findings:
            made_by = producer(graph, f.output)[0]
            sig = graph_signature(f, graph)
            rows.append((sig, f.oracle, f.kind, f.backend, f.variant, f.phase, f.message[:2000]))
            fate = self.reporting.classify(sig, f.backend)
            if fate == KNOWN:
                known.append(f.backend)  # counted, not re-reported
                continue
            if fate == NEW:
                head = title(f, made_by)
                folder = cfg.out / "bugs" / sig
                src = outcomes.get(f.backend, {}).get(f.variant) or ex.reference
                actual = src.outputs if src is not None and src.status == OK else None
                write_bundle(folder, sig, head, f, test, self.backends[f.backend], self.versions[f.backend],
                             self.variants[f.backend], ex.baseline, actual, int(cfg.phases.compile + cfg.phases.run),
                             src.artifacts if src is not None else None)
                new_bugs.append((sig, f.oracle, f.kind, f.backend, f.variant, f.phase, head,
                                 f.category, str(folder.relative_to(cfg.out))))
                if program:
                    new_programs.append((folder, f))
                # baseline issues (which need other compilers to show), noise and the like are no compiler's to reduce
                elif cfg.reduce_seconds and f.category == COMPILER:
                    to_reduce.append((folder, f, Case(graph, test.inputs, f, sig, cfg.tolerances)))
        with self.lock:
            self.store.commit(record, outcome_rows(outcomes), rows, new_bugs, ex.covered)
            self.progress.count(record, verdict, new_bugs, known)
            self._learn(graph, outcomes, new_bugs, record)
        self.on_progress(self.progress)
        for folder, f, case in to_reduce:  # after the commit: a reduction cut short loses nothing found
            self._reduce(folder, f, case)
        if new_programs:
            from dlcfuzz.run.torch_campaign import finish_program_bugs

            finish_program_bugs(self, graph, new_programs)

    def _learn(self, graph: Graph, outcomes: dict[str, dict[str, Outcome]], new_bugs: list[tuple],
               record: TestRecord) -> None:
        """What one test teaches: each compiler's profile, the allocator's yields (new compiler bugs per
        second, per backend and per variant) and the per-backend counts of the progress display."""
        p = self.progress
        if record.valid and record.baseline == "none" and graph.meta.get("violation") is None:
            p.crash_only += 1
        target = graph.meta.get("target")
        if target:
            p.backends.setdefault(target, BackendStats()).targeted += 1
        # the test's own CPU beyond the compilers' (generation, inputs, baseline, oracle) is a cost of the
        # backend it was made for: a compiler that takes 60 ms of a test that costs 300 ms is not cheap
        payers = [target] if target in outcomes else list(outcomes)
        overhead = max(0.0, record.seconds - record.t_compilers) / max(1, len(payers))
        for b, outs in outcomes.items():
            mine = [x for x in new_bugs if x[3] == b and x[7] == "compiler"]
            seconds = {v: sum(o.seconds.values()) for v, o in outs.items()}
            stats = p.backends.setdefault(b, BackendStats())
            stats.tests += 1
            stats.seconds += sum(seconds.values())
            stats.bugs += len(mine)
            status = (self.profiles[b].learn(graph, outs) if b in self.profiles and graph.meta.get("violation") is None
                      else test_status(b, outs))
            stats.useful += status != DECLINED
            self.allocator.credit(b, sum(seconds.values()) + overhead * (b in payers), len(mine))
            for v, sec in seconds.items():
                self.allocator.credit((b, v), sec, sum(x[4] == v for x in mine))

    def record_lost(self, test_id: int, reason: str) -> None:
        """A test whose executor died twice (not the compiler: that is a finding): a tests row with
        valid = 0 and baseline "lost: ...", so that it is counted and not run again on resume."""
        record = TestRecord(test_id, derive_seed(self.cfg.seed, test_id), [], f"lost: {reason}"[:300], False, 0,
                            False, 0.0, 0.0, 0.0, 0.0, 0.0)
        with self.lock:
            self.store.commit(record, [], [], [])
            self.progress.tests += 1
            self.lost += 1
        self.on_progress(self.progress)

    def _reduce(self, folder: Path, found: Finding, case: Case) -> None:
        """Reduces a new bug's case within the budget and writes reduced/ and reduction.json into its bundle."""
        t0 = time.monotonic()
        try:
            result = reduce_case(case, self.cfg.reduce_seconds, pool=self.pool, verify=False)
            write_reduction(folder, result)
            reduced = 1
            # bugs at other operators with the same trigger are this one; so are bugs whose reduction
            # found them under one signature
            triggers = trigger_root(self.pool, result.finding or found, result, self.cfg.tolerances)
            root = reduced_root(result.finding or case.finding, result.graph, result.first_diverging,
                                result.signed_as, case.signature, triggers)
            same = same_roots(result.finding or found, result.graph, result.inputs, triggers)
            refused = refused_root(result.finding or found, result.graph)
            with self.lock:
                root = join_roots(self.store, root, root_keys(self.store, same, case.signature, refused))
                self.store.merge_root(case.signature, root, result.title)
                record_triggers(self.store, folder, triggers)
            if result.reproduced and found.kind == "timeout" and found.backend in self.profiles:
                with self.lock:  # listed and reduced: hitting it again costs a limit and teaches nothing
                    self.profiles[found.backend].learn_hang(result.graph)
            if result.reproduced and self._outvoted(result.finding or case.finding, result):
                with self.lock:
                    self.store.set_category(case.signature, BASELINE)
        except ReduceError as e:  # e.g. the crash does not show again: the bundle keeps the original case
            (folder / "reduction-failed.txt").write_text(f"{e}\n")
            reduced = 0
        spent = time.monotonic() - t0
        # a bug is found to be handed over small: its backend's yield is bugs per CPU-second, reductions included
        self.allocator.credit(found.backend, spent, 0, tests=0)
        with self.lock:
            self.progress.reduced += reduced
            self.progress.reduce_seconds += spent

    def _outvoted(self, f: Finding, result) -> bool:
        """Whether the other compilers, run on the reduced case, agree with the accused one against the
        baseline: the vote on the whole test had only the compilers whose profiles took all of its
        operators (a TVM that declines one of ten is not asked), the reduced case most of them."""
        if f.oracle != DIFFERENTIAL:
            return False
        g = result.graph
        plan = {b: ([f.variant] if b == f.backend else self.tester.voter(b)) for b in self.tester.compilers}
        e = self.tester.evaluate(g, Test(to_bytes(g), g.to_json(), result.inputs), plan=plan)
        mine = [x for x in e.verdict.findings if x.backend == f.backend and x.variant == f.variant and x.diverges]
        return (bool(mine) and all(x.category == BASELINE for x in mine)) or self._referee_sides_with(f, result)

    def _referee_sides_with(self, f: Finding, result) -> bool:
        """Whether, at the first diverging node of a case that ONNX Runtime judged (the reference evaluator is
        distrusted for another node of it), the reference evaluator trusts that node and, run on it alone with
        ONNX Runtime's inputs, sides with the accused compiler against ONNX Runtime: ONNX Runtime's
        MeanVarianceNormalization of one element is NaN where the spec's is 0 (a hand check found it listed)."""
        first = result.first_diverging or {}
        node = next((n for n in result.graph.nodes if n.name and n.name == first.get("node")), None)
        if f.other != "/".join(FALLBACK) or node is None or REFERENCE not in self.backends:
            return False
        from dlcfuzz.backends.reference import distrusted
        from dlcfuzz.oracle.triggers import Trial, alone

        g, feeds = result.graph, result.inputs
        if distrusted(node, g) is not None:
            return False
        inter = Trial(self.pool, f, {}).intermediates(g, feeds)  # ONNX Runtime's, as the case's baseline
        case = alone(g, node, feeds, inter)
        if case is None or not all(o in inter for o in node.outputs if o):
            return False
        h, fd = case
        e = self.tester.evaluate(h, Test(to_bytes(h), h.to_json(), fd), plan={f.backend: [f.variant]})
        if e.baseline_name != "/".join(REFERENCE_RUN) or not e.finite:
            return False
        runtime = [inter[o] for o in node.outputs if o]
        agrees = not any(x.backend == f.backend and x.variant == f.variant and x.diverges for x in e.verdict.findings)
        criteria = self.tester.criteria.for_graph(h, e.baseline_name)
        return agrees and compare(e.baseline or [], runtime, criteria.tolerances, criteria.rounded) is not None

    # -- the loop -------------------------------------------------------------------------------------
    def run(self) -> Progress:
        cfg = self.cfg
        if not self.backends:
            self.start_backends()
        todo = self._ids()
        self.progress.resumed_from = self.store.next_test_id() if self.resumed else 0
        deadline = None if cfg.budget_seconds is None else time.monotonic() + cfg.budget_seconds
        try:
            if cfg.executor == "ray":
                self._run_ray(todo, deadline)
            else:
                run_in_threads(todo, self.run_test, cfg.jobs, deadline)
        finally:
            self.pool.close()
            self.store.close()
            self.save_profiles()
        return self.progress

    def _run_ray(self, todo, deadline: float | None) -> None:
        from dlcfuzz.run.ray_executor import RayExecutor

        cov = self.coverage
        spec = TesterSpec(replace(self.cfg, specs=[], program_specs=[]), [s.op for s in self.cfg.specs],
                          list(self.backends), self.variants, list(_keys(cov)) if cov is not None else None,
                          self.profiles, [s.op for s in self.cfg.program_specs])

        def record(ex: Executed) -> list[tuple[str, str]]:
            # coverage merges here: a key is the test's if no recorded test had it; the merged keys go
            # back to every actor with its next submission
            if cov is not None:
                ex.covered = [k for k in dict.fromkeys(ex.covered) if not cov.has(*k)]
                cov.load(ex.covered)
            self.record(ex)
            return ex.covered

        self.executor = RayExecutor(spec, self.cfg.jobs, self.cfg.ray_address)
        self.executor.run(((i, None) for i in todo), deadline, record, self.record_lost)

    def _ids(self):
        """Tests not yet committed: gaps left by a killed run first, then new ones."""
        have = self.store.test_ids()
        top = max(have, default=-1)
        gaps = [i for i in range(top + 1) if i not in have]
        limit = self.cfg.max_tests
        todo = itertools.chain(gaps, itertools.count(top + 1))
        if limit is not None:
            todo = itertools.islice(todo, max(0, limit - len(have)))
        yield from todo


def run_in_threads(ids: Iterable[int], run_one: Callable[[int], None], jobs: int, deadline: float | None) -> None:
    """Runs ``run_one`` on ``ids`` in order, ``jobs`` at a time, starting none after ``deadline``
    (time.monotonic); an exception in ``run_one`` (a bug in dlcfuzz itself) is raised, not swallowed."""
    queue = iter(ids)
    running: set[Future] = set()
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        while True:
            out_of_budget = deadline is not None and time.monotonic() >= deadline
            while not out_of_budget and len(running) < jobs:
                item = next(queue, None)
                if item is None:
                    break
                running.add(ex.submit(run_one, item))
            if not running:
                break
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                fut.result()


def outcome_rows(outcomes: dict[str, dict[str, Outcome]]) -> list[tuple]:
    """The store's outcome rows of one test."""
    return [(b, v, o.status, o.phase, f"{o.error_type}: {o.message}"[:500] if o.status != OK else "",
             int(o.status == "error" and is_unsupported(b, o.phase, o.error_type, o.message)), sum(o.seconds.values()))
            for b, vs in outcomes.items() for v, o in vs.items()]


def _profile(cfg: CampaignConfig, opset: int):
    if cfg.limits.target != "ort":
        return None
    from dlcfuzz.backends.ort import full_profile

    return full_profile(opset, tuple(s.op for s in cfg.specs))


def campaign_generator(cfg: CampaignConfig, coverage: Coverage | None, admit: Admission | None = None):
    """The campaign's generator (for one target compiler with ``admit``): at ``limits.opset``, or each
    graph at an opset drawn from ``cfg.opsets``."""
    def make(opset: int):
        return make_generator(cfg.strategy, cfg.specs, replace(cfg.limits, opset=opset), cfg.ops,
                              _profile(cfg, opset), coverage, admit=admit, **cfg.strategy_options)

    if len(cfg.opsets) > 1:
        return OpsetMix(make, cfg.opsets)
    return make(cfg.opsets[0] if cfg.opsets else cfg.limits.opset)


def _checker_error(g: Graph) -> str | None:
    """The driver's validity check (the ONNX checker only: ONNX Runtime could crash the driver)."""
    return checker_error(to_onnx(g))
