"""A migration campaign (OPERA): harvest instances, order them, run each through the frontends under test.

Per instance, in prioritized order:

1. the library's own run, isolated: a torch call runs eagerly twice in a ``torch-library`` worker
   (a call that fails, is nondeterministic or returns no tensor is discarded, counted); that worker
   also exports it to ONNX for the ONNX frontends.  The export is run by the ONNX reference evaluator
   (else ORT): where it differs from torch, or no baseline runs it, that is one ``EXPORTER`` finding
   of backend ``torch.onnx.export``, and the ONNX frontends are judged by that run, not by torch.
   An ONNX node test carries the outputs its ``expect`` computed, and was checked by the ONNX
   checker when harvested.
2. every frontend under test imports, compiles and runs the single-operator model in its workers:
   ONNX models go to the ONNX frontends (TVM, OpenVINO, ONNX Runtime), torch calls to the torch
   frontends (TVM's exported-program importer, OpenVINO's torch frontend, Inductor).
3. ``judge_migrated``: crashes (unsupported operators and dtypes counted apart) and outputs whose
   Chebyshev distance to the baseline's exceeds the bound; one signature per conversion function
   (``dedup.migrated_signature``).

The campaign store is the fuzzing campaign's (same tables, bundles and repro scripts); a test's id
is its instance's id, so killed campaigns resume, and ``apfd`` can replay any order offline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlcfuzz.backends import Backend, load_backend
from dlcfuzz.backends.base import ERROR, OK, Outcome, Test, Variant
from dlcfuzz.migrate.instances import ONNX, TORCH, Instance, InstanceSet
from dlcfuzz.oracle import (
    BASELINE,
    CRASH,
    DIFFERENTIAL,
    EXPORTER,
    FALLBACK,
    Finding,
    Verdict,
    all_finite,
    judge_migrated,
    run_confirmed,
)
from dlcfuzz.oracle.compare import CHEBYSHEV, chebyshev
from dlcfuzz.oracle.judge import REFERENCE_RUN
from dlcfuzz.run.bundle import write_bundle
from dlcfuzz.run.campaign import Driver, Progress, outcome_rows, run_in_threads
from dlcfuzz.run.dedup import migrated_signature, normalize, root_cause
from dlcfuzz.run.known import KNOWN, NEW
from dlcfuzz.run.store import Store, StoreError, TestRecord
from dlcfuzz.run.worker import PhaseLimits, WorkerPool

LIBRARY = "torch-library"  # the torch library itself, run in a worker: pre-check, reference outputs, ONNX export
# the exporter of torch calls to ONNX, named as the backend of its own findings (category EXPORTER)
EXPORT = "torch.onnx.export"
# what runs an exported model to check the export and judge the ONNX frontends: the ONNX reference
# evaluator, else (it lacks the operator, or fails: never a finding) ONNX Runtime without optimizations
EXPORT_BASELINES = (REFERENCE_RUN, FALLBACK)
# a compiler as the user names it -> its frontend backend per library of the migrated instance
FRONTENDS: dict[str, dict[str, str]] = {
    "tvm": {ONNX: "tvm", TORCH: "tvm-torch"},
    "openvino": {ONNX: "openvino", TORCH: "openvino-torch"},
    "ort": {ONNX: "ort"},
    "inductor": {TORCH: "inductor-torch"},
}
TORCH_FRONTENDS = {"tvm-torch", "openvino-torch", "inductor-torch"}
# the variant each frontend runs: the model-loading stage is under test, so one compile per frontend
# (the first variant: no optimization where the compiler has that), except Inductor, which only compiles
VARIANT = {"inductor-torch": "inductor"}


def frontends(names: list[str]) -> list[str]:
    """The frontend backends behind compiler names (``tvm`` -> ``tvm``, ``tvm-torch``); frontend
    backend names pass through."""
    out: list[str] = []
    for n in names:
        for fe in FRONTENDS.get(n, {"": n}).values():
            if fe not in out:
                out.append(fe)
    return out


@dataclass
class MigrationConfig:
    out: Path
    sources: list[str]  # "onnx-node", "torch-opinfo", or the path of a set recorded by ``migrate record``
    backends: list[str]  # frontend backends (see ``frontends``)
    prioritize: str = "opera"
    seed: int = 0
    budget_seconds: float | None = None
    max_tests: int | None = None
    jobs: int = 1
    limit_per_op: dict[str, int] = field(default_factory=dict)  # source -> instances kept per operator ("*": any)
    phases: PhaseLimits = field(default_factory=lambda: PhaseLimits(compile=60.0, run=30.0))
    via_onnx: bool = True  # torch instances also reach the ONNX frontends, exported by torch.onnx
    measure_coverage: bool = False  # statement coverage of the frontends' Python code (for the cov orders)
    coverage_from: Path | None = None  # a campaign whose measured coverage drives total-/additional-cov
    tolerances: dict[str, float] = field(default_factory=dict)
    known_bugs: list[Path] = field(default_factory=list)  # known-bug lists besides the packaged one
    executor: str = "local"  # "local": threads in this process; "ray": one Ray actor per job
    ray_address: str | None = None  # ray: the cluster to join (None: start a local Ray instance)

    def identity(self) -> dict:
        return {"kind": "migrate", "sources": self.sources, "backends": sorted(self.backends),
                "prioritize": self.prioritize, "seed": self.seed, "limit_per_op": self.limit_per_op,
                "via_onnx": self.via_onnx, "tolerances": self.tolerances}


@dataclass
class InstanceResult:
    """Everything the driver needs to record one instance, made without the store (picklable)."""

    inst: Instance
    record: TestRecord
    discarded: str | None = None  # why the library's own run discarded it (then nothing else is set)
    tests: dict[str, Test] = field(default_factory=dict)
    outcomes: dict[str, dict[str, Outcome]] = field(default_factory=dict)
    verdict: Verdict | None = None
    expected: list[np.ndarray] | None = None
    export: ExportCheck | None = None  # torch instances exported to ONNX: the export's baseline run


@dataclass
class ExportCheck:
    """An exported torch call run by an ONNX baseline: the reference the ONNX frontends are judged by,
    and the evidence of an exporter finding."""

    backend: str  # the baseline that ran it (``EXPORT_BASELINES``), or the first that failed
    variant: str
    test: Test  # the exported model and the call's inputs
    outcome: Outcome
    failed: list[str] = field(default_factory=list)  # "baseline: error" of each baseline that could not run it

    @property
    def ran(self) -> bool:
        return self.outcome.status == OK

    @property
    def name(self) -> str:
        return f"{self.backend}:{self.variant}" if self.backend != "reference" else self.backend


class InstanceRunner:
    """The execute half of a migrated test: (instance id, instance) -> ``InstanceResult``, in its own
    worker pool; never touches the store.  Local campaigns share one among threads; a Ray actor
    builds its own from a ``MigrationSpec``."""

    def __init__(self, cfg: MigrationConfig, backends: dict[str, Backend], variants: dict[str, dict[str, Variant]],
                 pool: WorkerPool) -> None:
        self.cfg, self.backends, self.variants, self.pool = cfg, backends, variants, pool

    def share(self, items: list) -> None:
        pass  # migration shares no state between executors

    def close(self) -> None:
        self.pool.close()

    def execute(self, iid: int, inst: Instance) -> InstanceResult:
        t_start = time.perf_counter()
        lib_seconds = 0.0
        onnx_model: bytes | None = inst.model if inst.library == ONNX else None
        expected = inst.expected
        if inst.library == TORCH:
            if LIBRARY not in self.backends:
                return _discarded(inst, "torch-library is not available", t_start)
            lib = self.pool.run(LIBRARY, Test(inst.model, "", inst.inputs), ["eager"])["eager"]
            lib_seconds = sum(lib.seconds.values())
            if lib.status != OK:
                return _discarded(inst, f"{lib.error_type}: {normalize(lib.message, 1)}", t_start)
            expected = lib.outputs
            exported = lib.artifacts.get("model.onnx")
            onnx_model = exported if self.cfg.via_onnx and isinstance(exported, bytes) else None
        if expected is None:
            return _discarded(inst, "no library outputs", t_start)
        # the library's own run is each torch instance's pre-check and reference, never a frontend under
        # test: named in --backends, it runs that way (fed the ONNX export, it raised a false crash bug)
        under_test = [n for n in self.backends if n in self.cfg.backends and n != LIBRARY]
        export = None
        if inst.library == TORCH and onnx_model is not None and any(n not in TORCH_FRONTENDS for n in under_test):
            export = self._run_export(Test(onnx_model, "", inst.inputs))
            lib_seconds += sum(export.outcome.seconds.values()) if export is not None else 0.0
        tests: dict[str, Test] = {}
        for name in under_test:
            if name in TORCH_FRONTENDS:
                if inst.library == TORCH:
                    tests[name] = Test(inst.model, "", inst.inputs)
            elif onnx_model is not None:
                tests[name] = Test(onnx_model, "", inst.inputs)
        outcomes: dict[str, dict[str, Outcome]] = {}
        late: list[Finding] = []
        compiler_s = 0.0
        for name, test in tests.items():
            variant = VARIANT.get(name, next(iter(self.variants[name])))
            outcomes[name], unconfirmed, seconds = run_confirmed(self.pool, name, test, [variant])
            late += unconfirmed
            compiler_s += seconds
        t0 = time.perf_counter()
        model_of = {name: TORCH if name in TORCH_FRONTENDS else ONNX for name in outcomes}
        baseline = LIBRARY if inst.library == TORCH else "onnx-expect"
        baselines = {TORCH: (LIBRARY, expected), ONNX: (baseline, expected)}
        if export is not None and export.ran:  # the ONNX frontends read the export: judged by what it computes
            baselines[ONNX] = (export.name, export.outcome.outputs or [])
        verdict = judge_migrated(outcomes, baselines, self.cfg.tolerances, model_of)
        if export is not None:
            verdict.findings += judge_export(export, expected, self.cfg.tolerances)
            if not export.ran:  # an export no ONNX baseline runs is suspect: a frontend's error on it is no bug,
                # nor, where the checker rejects the model, what a lenient frontend computes from it
                invalid = export.outcome.error_type == "InvalidModel"
                verdict.findings = [f for f in verdict.findings
                                    if not (model_of.get(f.backend) == ONNX and (
                                        (f.oracle == CRASH and f.kind == "exception") or (invalid and f.diverges)))]
        verdict.findings += late
        record = TestRecord(iid, 0, [inst.op], baseline if export is None else f"{baseline}, {export.name}",
                            all_finite(expected), 1, True, time.perf_counter() - t_start, 0.0, lib_seconds,
                            compiler_s, time.perf_counter() - t0)
        return InstanceResult(inst, record, None, tests, outcomes, verdict, expected, export)

    def _run_export(self, test: Test) -> ExportCheck | None:
        """The exported model on the first ONNX baseline that runs it, else the first failure (None: no
        baseline available)."""
        import onnx

        from dlcfuzz.export.onnx import checker_error

        model = onnx.load_model_from_string(test.model)
        invalid = checker_error(model)
        if invalid is not None:  # torch.onnx.export wrote an invalid model (BatchNormalization-15 with 5
            # outputs, Tile with float repeats): a frontend's refusal of it is right, its leniency no bug
            o = Outcome(ERROR, "export", error_type="InvalidModel", message=invalid)
            return ExportCheck(EXPORT_BASELINES[0][0], EXPORT_BASELINES[0][1], test, o,
                               [f"the ONNX checker: {normalize(invalid, 1)}"])
        ops = {n.op_type for n in model.graph.node}
        check: ExportCheck | None = None
        for backend, variant in EXPORT_BASELINES:
            if backend not in self.backends or not self.backends[backend].supports(ops):
                continue  # e.g. an operator the reference evaluator is known to get wrong
            o = self.pool.run(backend, test, [variant])[variant]
            if o.status == OK:
                return ExportCheck(backend, variant, test, o, check.failed if check else [])
            check = check or ExportCheck(backend, variant, test, o)
            check.failed.append(f"{backend}: {o.error_type or o.status}: {normalize(o.message, 1)}")
        return check


def _discarded(inst: Instance, reason: str, t_start: float) -> InstanceResult:
    record = TestRecord(inst.id, 0, [inst.op], f"discarded: {reason}"[:300], False, 1, False,
                        time.perf_counter() - t_start, 0.0, 0.0, 0.0, 0.0)
    return InstanceResult(inst, record, reason)


@dataclass
class MigrationSpec:
    """What a Ray actor needs to build its own ``InstanceRunner`` (picklable)."""

    cfg: MigrationConfig
    variants: dict[str, dict[str, Variant]]  # backend -> variants, as the driver's workers described them

    def build(self) -> InstanceRunner:
        import tempfile

        pool = WorkerPool(self.cfg.phases, 200, Path(tempfile.gettempdir()) / "dlcfuzz-actor-logs",
                          frontend_coverage=self.cfg.measure_coverage)
        return InstanceRunner(self.cfg, {n: load_backend(n) for n in self.variants}, self.variants, pool)


class Migration(Driver):
    def __init__(self, cfg: MigrationConfig, on_progress: Callable[[Progress], None] | None = None) -> None:
        self.cfg = cfg
        super().__init__(cfg.out, cfg.identity(),
                         WorkerPool(cfg.phases, 200, cfg.out / "logs", frontend_coverage=cfg.measure_coverage),
                         cfg.known_bugs, on_progress)
        self.instances = InstanceSet(cfg.out / "campaign.sqlite")
        self._runner: InstanceRunner | None = None

    # -- set-up ------------------------------------------------------------------------------------------
    def harvest(self, on_source: Callable[[dict], None] | None = None) -> dict[str, dict]:
        """Harvests every source not yet in the store (a source cut short is harvested again);
        returns the stats per source."""
        from dlcfuzz.migrate.sources import harvest

        done: dict[str, dict] = self.store.get_meta("harvest") or {}
        for source in self.cfg.sources:
            if source in done:
                continue
            self._forget(source)
            if Path(source).suffix == ".sqlite":
                stats = self._copy_recorded(Path(source))
            else:
                limit = self.cfg.limit_per_op.get(source, self.cfg.limit_per_op.get("*"))
                stats = harvest(source, self.cfg.out / "campaign.sqlite", limit)
            done[source] = stats
            self.store.set_meta("harvest", done)
            if on_source:
                on_source(stats)
        return done

    def _forget(self, source: str) -> None:
        """Drops the instances a cut-short harvest of ``source`` left (none of them has run yet)."""
        tag = "pytest" if Path(source).suffix == ".sqlite" else source
        self.instances.forget_unrun(tag)

    def _copy_recorded(self, path: Path) -> dict:
        if not path.is_file():
            from dlcfuzz.migrate.sources import SourceError

            raise SourceError(f"recorded instance set {path} does not exist (make one with 'dlcfuzz migrate record')")
        other = InstanceSet(path)
        try:
            n = self.instances.extend(other.get(i.id) for i in list(other))
            ops = len({i.op for i in other})
        finally:
            other.close()
        return {"source": str(path), "instances": n, "operators": ops, "skipped": {}}

    def start_backends(self) -> None:
        needed = [n for n in self.cfg.backends if n != LIBRARY]
        if any(i.library == TORCH for i in self._peek()):
            needed.insert(0, LIBRARY)
            if self.cfg.via_onnx and any(n not in TORCH_FRONTENDS for n in needed[1:]):
                needed += [b for b, _ in EXPORT_BASELINES if b not in needed]  # to check each export
        self._start(needed)

    def _peek(self) -> list[Instance]:
        return list(self.instances)

    # -- ordering ------------------------------------------------------------------------------------------
    def order(self) -> list[int]:
        from dlcfuzz.migrate.prioritize import prioritize

        coverage = None
        if self.cfg.prioritize in ("total-cov", "additional-cov"):
            coverage = self._coverage_from()
        return prioritize(self.cfg.prioritize, self._peek(), seed=self.cfg.seed, coverage=coverage)

    def _coverage_from(self) -> dict[int, set[str]]:
        """Frontend coverage per instance id, measured by an earlier campaign over the same instances
        (matched by source and provenance)."""
        folder = self.cfg.coverage_from
        if folder is None or not (folder / "campaign.sqlite").is_file():
            raise StoreError("total-cov and additional-cov order by frontend coverage measured before: "
                             "give --coverage-from CAMPAIGN (a migration run with --measure-coverage)")
        other = Store(folder)
        try:
            rows = other.migrated_frontend_coverage()
        finally:
            other.close()
        by_key: dict[tuple[str, str], set[str]] = {}
        for source, provenance, lines in rows:
            by_key.setdefault((source, provenance), set()).update(lines.split("\n") if lines else ())
        return {i.id: by_key[(i.source, i.provenance)] for i in self._peek() if (i.source, i.provenance) in by_key}

    # -- one instance ----------------------------------------------------------------------------------------
    @property
    def runner(self) -> InstanceRunner:
        """The local execute half, sharing this campaign's worker pool."""
        if self._runner is None:
            self._runner = InstanceRunner(self.cfg, self.backends, self.variants, self.pool)
        return self._runner

    def run_instance(self, iid: int) -> None:
        with self.lock:
            inst = self.instances.get(iid)
        self.record(self.runner.execute(iid, inst))

    def record(self, ex: InstanceResult) -> None:
        """The record half, on the driver only."""
        if ex.discarded is not None:
            return self._discard(ex.record)
        self._record(ex)

    def record_lost(self, iid: int, reason: str) -> None:
        """An instance whose executor died twice (Ray: the actor; not a frontend, that is a finding):
        a tests row with valid = 0 and baseline "lost: ...", counted and not run again on resume."""
        with self.lock:
            op = self.instances.get(iid).op
        self._discard(TestRecord(iid, 0, [op], f"lost: {reason}"[:300], False, 0, False, 0.0, 0.0, 0.0, 0.0, 0.0))
        self.lost += 1

    def _discard(self, record: TestRecord) -> None:
        """An instance the library itself cannot run (OPERA's validity pre-check): kept as a test
        row with valid = 0 and the reason, so that it is counted and never run again."""
        with self.lock:
            self.store.commit(record, [], [], [])
            self.progress.tests += 1
        self.on_progress(self.progress)

    def _record(self, ex: InstanceResult) -> None:
        inst, outcomes, verdict = ex.inst, ex.outcomes, ex.verdict
        rows, new_bugs, known, roots = [], [], [], []
        described = json.dumps({"op": inst.op, "source": inst.source, "provenance": inst.provenance,
                                "params": inst.params, "tensors": inst.tensors}, indent=1, default=str)
        for f in verdict.findings:
            on_export = f.backend == EXPORT and ex.export is not None
            o = ex.export.outcome if on_export else outcomes.get(f.backend, {}).get(f.variant)
            test = ex.export.test if on_export else ex.tests[f.backend]
            conversion = str(o.artifacts.get("conversion", "")) if o is not None and not on_export else ""
            onnx_test = test if f.backend not in TORCH_FRONTENDS else None
            sig = migrated_signature(f, inst.op, conversion, names=_names(onnx_test, inst))
            rows.append((sig, f.oracle, f.kind, f.backend, f.variant, f.phase, f.message[:2000]))
            fate = self.reporting.classify(sig, f.backend)
            if fate == KNOWN:
                known.append(f.backend)  # counted, not re-reported
                continue
            if fate != NEW:
                continue
            head = migrated_title(f, inst.op, conversion)
            folder = self.cfg.out / "bugs" / sig
            actual = o.outputs if o is not None and o.status == OK else None
            artifacts = {**(o.artifacts if o is not None else {}), "instance.json": described}
            # an exporter finding replays the exported model on the baseline that ran it, against torch's outputs
            runner = ex.export.backend if on_export else f.backend
            write_bundle(folder, sig, head, f, test, self.backends[runner],
                         self.versions[LIBRARY if on_export else runner], self.variants[runner],
                         _expected_for(f, ex), actual, int(self.cfg.phases.compile + self.cfg.phases.run), artifacts,
                         model_file="call.pt" if f.backend in TORCH_FRONTENDS else "model.onnx",
                         chebyshev=CHEBYSHEV | self.cfg.tolerances)
            new_bugs.append((sig, f.oracle, f.kind, f.backend, f.variant, f.phase, head,
                             f.category, str(folder.relative_to(self.cfg.out))))
            if inst.library == ONNX and f.backend != EXPORT:  # a single ONNX operator: its trigger is at hand
                roots.append((sig, root_cause(f, inst.op, _opset(inst), {k: v for k, v in inst.params.items()
                                                                       if not k.startswith("input.")},
                                              [t["shape"] for t in inst.tensors])))
        covered = [(b, "\n".join(o.covered)) for b, vs in outcomes.items() for o in vs.values() if o.covered]
        with self.lock:
            self.store.commit(ex.record, outcome_rows(outcomes), rows, new_bugs, frontend_coverage=covered)
            for sig, root in roots:  # e.g. TVM's Reduce* over an empty axis: one bug, not one per operator
                if root:
                    self.store.merge_root(sig, root)
            self.progress.count(ex.record, verdict, new_bugs, known)
        self.on_progress(self.progress)

    # -- the loop -----------------------------------------------------------------------------------------------
    def run(self, order: list[int] | None = None) -> Progress:
        """Runs the instances not yet in the store, in ``order`` (default: ``self.order()``)."""
        cfg = self.cfg
        if not self.backends:
            self.start_backends()
        done = self.store.test_ids()
        todo = [i for i in (self.order() if order is None else order) if i not in done]
        if cfg.max_tests is not None:
            todo = todo[:max(0, cfg.max_tests - len(done))]
        self.progress.resumed_from = len(done)
        deadline = None if cfg.budget_seconds is None else time.monotonic() + cfg.budget_seconds
        try:
            if cfg.executor == "ray":
                self._run_ray(todo, deadline)
            else:
                run_in_threads(todo, self.run_instance, cfg.jobs, deadline)
        finally:
            self.close()
        return self.progress

    def _run_ray(self, todo: list[int], deadline: float | None) -> None:
        """One Ray actor per job; the driver reads each instance from the store and ships it with its id."""
        from dlcfuzz.run.ray_executor import RayExecutor

        def record(ex: InstanceResult) -> list:
            self.record(ex)
            return []

        self.executor = RayExecutor(MigrationSpec(self.cfg, self.variants), self.cfg.jobs, self.cfg.ray_address)
        self.executor.run(((iid, self.instances.get(iid)) for iid in todo), deadline, record, self.record_lost)

    def close(self) -> None:
        self.pool.close()
        self.instances.close()
        self.store.close()


def judge_export(export: ExportCheck, expected: list[np.ndarray], tolerances: dict[str, float]) -> list[Finding]:
    """The exporter's finding, if the exported model does not compute what the torch call did, or no
    ONNX baseline can run it: one ``EXPORTER`` finding, instead of one per ONNX frontend that read the
    wrong model."""
    if not export.ran:
        o = export.outcome
        return [Finding(CRASH, "exception", EXPORT, export.variant, "export",
                        "no ONNX baseline runs the export: " + "; ".join(export.failed), o.error_type, o.traceback,
                        category=EXPORTER)]
    m = chebyshev(expected, export.outcome.outputs or [], tolerances)
    if m is None:
        return []
    return [Finding(DIFFERENTIAL, m.kind, EXPORT, export.variant, "export",
                    f"{m.detail} (the export run by {export.name} vs torch eager)", other=LIBRARY, output=m.output,
                    category=EXPORTER, details={"max_abs": m.max_abs})]


def _expected_for(f: Finding, ex: InstanceResult) -> list[np.ndarray] | None:
    """The outputs a finding was judged by: the library's, or, for an ONNX frontend reading a
    torch call's export, the export's run by its baseline."""
    if ex.export is not None and ex.export.ran and f.backend not in TORCH_FRONTENDS and f.backend != EXPORT:
        return ex.export.outcome.outputs
    return ex.expected


def _names(test: Test | None, inst: Instance) -> set[str]:
    """The names a test's ONNX model (if any) gives its values and nodes, and its operator's parameter
    names: they stand for nothing across tests."""
    names = set(inst.inputs) | {str(k) for k in inst.params}
    if test is not None:
        import onnx

        try:
            g = onnx.load_model_from_string(test.model).graph
        except Exception:  # a model the frontend could not read either: no names to strip
            return names
        names |= {v.name for v in [*g.input, *g.output, *g.initializer]}
        names |= {n for node in g.node for n in [node.name, *node.input, *node.output] if n}
    return names


def migrated_title(f: Finding, op: str, conversion: str) -> str:
    """A one-line human summary of a migrated test's bug."""
    via = f" ({conversion})" if conversion else ""
    if f.oracle == CRASH:
        what = f"{f.error_type}: {normalize(f.message)}" if f.kind == "exception" else f.message
        return f"{f.backend} {f.phase} {f.kind} on {op}{via}: {what}"[:200]
    if f.category == BASELINE:
        return f"{f.other} disagrees with {f.backend} and a frontend reading the same model on {op}{via}: " \
               f"{f.kind} mismatch ({f.message})"[:200]
    # names the baseline actually used: torch eager, the ONNX test's expect, or the export's reference run
    return f"{f.backend} vs {f.other} on {op}{via}: {f.kind} mismatch ({f.message})"[:200]


def summary(folder: Path) -> dict:
    """What a migration campaign harvested, ran and found (for the CLI and the closing notes)."""
    store = Store(folder)
    instances = InstanceSet(folder / "campaign.sqlite")
    try:
        harvested = store.get_meta("harvest") or {}
        discarded = store.discarded_by_reason()
        return {"harvested": harvested, "instances": len(instances), "operators": instances.operators(),
                "tests": store.valid_tests(),
                "discarded": sum(discarded.values()), "discarded_reasons": discarded,
                # every category, as listed: a bug merged into another's root cause is not counted
                "unsupported": store.declines_per_backend(), "bugs": store.listed_bugs_per_backend(),
                "known_upstream": store.known_upstream_findings()}
    finally:
        instances.close()
        store.close()


def _opset(inst: Instance) -> int:
    """The default-domain opset an ONNX instance's model imports."""
    import onnx

    model = onnx.load_model_from_string(inst.model)
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), onnx.defs.onnx_opset_version())
