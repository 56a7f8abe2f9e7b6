"""The judge: how one test's runs become findings, for the campaign, the reducer, migration and the
benchmarks alike (none of them re-derives any of it).

It owns:

- the *baseline*: the reference evaluator where it is trusted for every node of the graph
  (``backends/reference.py``), else, or where it fails, ONNX Runtime without optimizations
  (``FALLBACK``) — ``baseline_chain`` / ``run_baseline``;
- *confirmed runs*: a backend's outcomes, where a crash is run again alone in a fresh process
  (``CONFIRM_RUNS`` times) before it counts — ``run_confirmed``;
- what a test is judged by: one ``Criteria`` (tolerances, and each variant's traits: low precision,
  uncompiled, float64 computed in float32, its ``compare_with`` mate; per graph the rounded and
  single-precision outputs and the baseline's name), built once per set of backends by
  ``criteria_for`` from the variants' options;
- *comparison* and *categories* — ``judge``, ``judge_invalid``, ``judge_migrated``;
- *localization* of the first diverging operator and *blame* of a compiler pass — ``explain``
  (``oracle/localize.py``, ``oracle/blame.py``).

Runs go through a ``Runner`` (``run/worker.py``'s ``WorkerPool`` is one): the oracle never imports
``run``.

``judge`` turns the outcomes of one test into findings and unsupported records:

- crash: an exception, a signal, a timeout or a memory blow-up in import/compile/run, unless
  ``unsupported.is_unsupported`` says the compiler merely declined the operator or dtype;
- differential: a variant's outputs differ from the baseline;
- metamorphic: a variant's outputs differ from the backend's anchor variant (its uncompiled one,
  else its first successful one).

Each finding has a *category*, whose fault it is (``CATEGORIES``); only ``COMPILER`` findings are a
compiler team's bugs:

- ``BASELINE``: every variant of the backend and at least one other compiler agree with each
  other against the baseline (two independent compilers outvote it);
- ``EXPORTER``: a backend's *uncompiled* variant (``Variant.options["uncompiled"]``, e.g. Inductor's
  eager torch: dlcfuzz's own exporter plus the library's kernels, no compiler) disagrees with the
  baseline, or fails.  That backend's compiled variants are judged against that variant only: an
  Inductor bug is compiled vs eager;
- ``NOISE``: rounding, not a bug: a comparison or rounding operator whose inputs already differed
  within tolerance broke a tie the other way (set where the divergence is located, ``oracle/localize.py``);
- ``UNDEFINED``: the divergence starts where ONNX leaves the result undefined (integer overflow);
- ``UNCONFIRMED``: a crash that a fresh process running the model alone (several times) did not
  repeat: what an earlier test corrupted, with no model that reproduces it (``run_confirmed``).
- metamorphic pairing: a variant whose options name another in ``compare_with`` is compared with
  that one (e.g. cuda-inductor with cuda-eager: Inductor's GPU code alone; cuda-eager with eager: the
  cross-device oracle).  When that variant ran and failed, there is nothing to compare with; when it
  did not run, the anchor serves.

``judge_migrated`` judges a single-operator test migrated from a library's tests (OPERA §III-C):
a crash that is not "unsupported", or outputs whose Chebyshev distance to the library's own
outputs exceeds ``compare.CHEBYSHEV`` (integers exactly), is a finding.

``judge_invalid`` judges a disruptive test (a model that breaks one named constraint on
purpose, HirGen §3.1.5): rejecting it with an error is right; a fatal signal, a hang, a memory
blow-up, or accepting it with garbage outputs is a finding of the ``disruptive`` oracle.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from dlcfuzz.backends.base import CRASH as CRASHED
from dlcfuzz.backends.base import OK, Backend, Outcome, Test, Variant
from dlcfuzz.backends.devices import device_of
from dlcfuzz.backends.reference import ReferenceBackend, no_baseline
from dlcfuzz.ir import Graph
from dlcfuzz.oracle.blame import blame
from dlcfuzz.oracle.compare import GPU_TOLERANCES, LOW_PRECISION, Mismatch, chebyshev, compare, pair_tolerances
from dlcfuzz.oracle.findings import (
    BASELINE,
    COMPILER,
    CRASH,
    DIFFERENTIAL,
    DISRUPTIVE,
    EXPORTER,
    INCONSISTENT,
    METAMORPHIC,
    Finding,
    Verdict,
    unconfirmed,
)
from dlcfuzz.oracle.localize import localize, rounded_outputs, single_outputs
from dlcfuzz.oracle.unsupported import is_unsupported

REFERENCE = "reference"
REFERENCE_RUN = (REFERENCE, "default")  # the reference evaluator, the baseline where it is trusted
FALLBACK = ("ort", "disable_all")  # the baseline where the reference evaluator is not trusted, or fails
CONFIRM_RUNS = 3  # runs of a crashed test in a fresh worker before the crash counts as unconfirmed

Pair = tuple[str, str]  # (backend, variant)


@runtime_checkable
class Runner(Protocol):
    """What runs tests for the judge: ``run/worker.py``'s ``WorkerPool`` (isolated worker processes).
    ``fresh``: a new process, untouched by earlier tests, which runs the test up to ``runs`` times."""

    def run(self, backend: str, test: Test, variants: list[str], fresh: bool = False,
            runs: int = 1) -> dict[str, Outcome]: ...


@dataclass(frozen=True)
class Criteria:
    """What a test is judged by: the tolerances and the traits of the variants under test (built once
    per set of backends by ``criteria_for``), and per graph (``for_graph``) which outputs are rounded
    or single-precision and what computed the baseline."""

    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # (backend, variant)s that compute in low precision on purpose (compared with ``LOW_PRECISION``)
    low_precision: frozenset[Pair] = frozenset()
    # (backend, variant)s that run the model without the compiler under test (their findings are the
    # exporter's, and the backend's other variants are judged against them)
    uncompiled: frozenset[Pair] = frozenset()
    # (backend, variant)s that compute float64 in float32 (all their outputs get float32's tolerance)
    in_float32: frozenset[Pair] = frozenset()
    # (backend, variant)s that run on a GPU (compared with their mates at ``GPU_TOLERANCES``)
    on_gpu: frozenset[Pair] = frozenset()
    # (backend, variant) -> the variant it is compared with (``Variant.options["compare_with"]``)
    compare_with: Mapping[Pair, str] = field(default_factory=dict)
    baseline_name: str = "baseline"  # what computed the baseline (named in the findings)
    # the integer outputs computed from float math (``Graph.rounded_from_floats``): one unit of slack
    rounded: tuple[int, ...] = ()
    # the float outputs the spec computes through a narrower float type, and that type
    # (``Graph.computed_in_narrower_float``)
    single: Mapping[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("low_precision", "uncompiled", "in_float32", "on_gpu"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        object.__setattr__(self, "rounded", tuple(self.rounded))
        single = self.single
        object.__setattr__(self, "single", dict(single) if isinstance(single, Mapping) else dict.fromkeys(single,
                                                                                                          "float32"))
        object.__setattr__(self, "tolerances", dict(self.tolerances or {}))
        object.__setattr__(self, "compare_with", dict(self.compare_with or {}))

    @property
    def anchors(self) -> frozenset[Pair]:
        """The variants others are compared with: the uncompiled ones and every ``compare_with`` mate."""
        return self.uncompiled | {(b, mate) for (b, _), mate in self.compare_with.items()}

    def for_graph(self, graph: Graph, baseline_name: str | None = None) -> Criteria:
        """These criteria for one test's graph (its rounded and single-precision outputs), and the
        baseline that computed its expected outputs."""
        return replace(self, rounded=tuple(rounded_outputs(graph)), single=single_outputs(graph),
                       baseline_name=self.baseline_name if baseline_name is None else baseline_name)

    def pair_tolerances(self, pair: Collection[Pair]) -> dict[str, tuple[float, float]]:
        """The tolerances for comparing the (backend, variant)s of ``pair`` node by node."""
        return pair_tolerances(self.tolerances, pair, self.low_precision, self.in_float32)


def criteria_for(variants: Mapping[str, Mapping[str, Variant]],
                 tolerances: Mapping[str, tuple[float, float]] | None = None) -> Criteria:
    """The criteria of a set of backends, from their variants' options (``variants``: backend -> name
    -> Variant).  A variant computes in low precision when its options set ``low_precision`` (or
    ``reduced_precision``, as backends written before the rename still say)."""
    def having(*keys: str) -> frozenset[Pair]:
        return frozenset((b, n) for b, vs in variants.items() for n, v in vs.items()
                         if any(v.options.get(k) for k in keys))

    return Criteria(tolerances=dict(tolerances or {}), low_precision=having("low_precision", "reduced_precision"),
                    uncompiled=having("uncompiled"), in_float32=having("float64_in_float32"),
                    on_gpu=frozenset((b, n) for b, vs in variants.items() for n, v in vs.items()
                                     if device_of(v.options) == "cuda"),
                    compare_with={(b, n): v.options["compare_with"] for b, vs in variants.items()
                                  for n, v in vs.items() if v.options.get("compare_with")})


# -- the baseline ------------------------------------------------------------------------------------
def reference_trusted(graph: Graph | None) -> bool:
    """Whether the reference evaluator is trusted for every node of ``graph`` (None: no graph known,
    the model alone: trusted unless ``ReferenceBackend`` distrusts one of no operators)."""
    ops = {n.op for n in graph.nodes} if graph is not None else set()
    return ReferenceBackend().supports(ops, graph)


def baseline_chain(graph: Graph | None, reference: bool = True) -> list[Pair]:
    """The baselines in the order they are tried: the reference evaluator where it is trusted for the
    graph (and ``reference``: it is available), then ONNX Runtime without optimizations; none where both
    compute a node of it wrong (``backends/reference.py``: ``Rule.ort_too``)."""
    if graph is not None and no_baseline(graph) is not None:
        return []
    return [REFERENCE_RUN, FALLBACK] if reference and reference_trusted(graph) else [FALLBACK]


@dataclass
class Baseline:
    """The baseline of one test: which ran, its outcome, and the ones that failed before it."""

    which: Pair | None
    outcome: Outcome | None
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (backend, variant, why)

    @property
    def outputs(self) -> list[np.ndarray] | None:
        return self.outcome.outputs if self.outcome is not None else None

    @property
    def name(self) -> str:
        """As findings and the store name it: "reference/default", "ort/disable_all", or "none"."""
        return "/".join(self.which) if self.which is not None else "none"


def run_baseline(runner: Runner, test: Test, graph: Graph | None, reference: bool = True,
                 fallback: Outcome | None = None) -> Baseline:
    """The first baseline of ``baseline_chain`` that runs ``test``; ``fallback``: ONNX Runtime's
    outcome where it already ran (the reducer's validity check), not run again."""
    failed: list[tuple[str, str, str]] = []
    for backend, variant in baseline_chain(graph, reference):
        if (backend, variant) == FALLBACK and fallback is not None:
            o = fallback
        else:
            o = runner.run(backend, test, [variant])[variant]
        if o.status == OK:
            return Baseline((backend, variant), o, failed)
        failed.append((backend, variant, f"baseline failed: {o.error_type or o.status}: {o.message}"[:300]))
    return Baseline(None, None, failed)


# -- confirmed runs ----------------------------------------------------------------------------------
class Confirmed(NamedTuple):
    outcomes: dict[str, Outcome]
    unconfirmed: list[Finding]  # crashes that the fresh process did not repeat
    seconds: float  # inside the compiler


def run_confirmed(runner: Runner, backend: str, test: Test, variants: list[str], fresh: bool = False,
                  runs: int = 1) -> Confirmed:
    """One backend's outcomes on ``test`` (``fresh``, ``runs``: as ``Runner.run`` takes them); a crash
    in a pooled worker is judged again in a fresh one (up to ``CONFIRM_RUNS`` runs there, as the bug's
    repro.py tries), because a process can die of what an earlier test corrupted."""
    got = runner.run(backend, test, variants, fresh=fresh, runs=runs)
    seconds = sum(sum(o.seconds.values()) for o in got.values())
    crashed = [(v, o) for v, o in got.items() if o.status == CRASHED]
    late: list[Finding] = []
    if crashed and not fresh:
        got = runner.run(backend, test, variants, fresh=True, runs=CONFIRM_RUNS)
        seconds += sum(sum(o.seconds.values()) for o in got.values())
        if not any(o.status == CRASHED for o in got.values()):
            late.append(unconfirmed(backend, *crashed[0]))
    return Confirmed(got, late, seconds)


# -- comparison and categories -----------------------------------------------------------------------
def _crash(backend: str, variant: str, o: Outcome) -> Finding:
    kind = {"crash": "signal" if o.signal else "exit", "timeout": "timeout", "oom": "oom"}.get(o.status, "exception")
    message = f"[{o.step}] {o.message}" if o.step else o.message  # the step (e.g. the pass) is part of the bug
    return Finding(CRASH, kind, backend, variant, o.phase, message, o.error_type, o.traceback)


def _failed(backend: str, variant: str, o: Outcome, findings: list[Finding],
            unsupported: list[tuple[str, str, str]], category: str = COMPILER) -> None:
    """A variant that did not run: an error meaning "unsupported" is counted apart, anything else
    (exception, signal, hang, memory blow-up) is a crash finding."""
    if o.status == "error" and is_unsupported(backend, o.phase, o.error_type, o.message):
        unsupported.append((backend, variant, f"{o.error_type}: {o.message}"[:300]))
    else:
        f = _crash(backend, variant, o)
        f.category = category
        findings.append(f)


def judge(outcomes: dict[str, dict[str, Outcome]], baseline: list[np.ndarray] | None,
          criteria: Criteria | None = None) -> Verdict:
    """Findings for one test.  ``outcomes``: backend -> variant -> outcome (variants in order);
    ``baseline``: the baseline's outputs (None: no baseline, only crashes and the variants' agreement
    count); ``criteria``: what the test is judged by (default: the default tolerances, no traits)."""
    c = criteria or Criteria()
    tolerances = dict(c.tolerances)
    loose = tolerances | LOW_PRECISION
    findings: list[Finding] = []
    unsupported: list[tuple[str, str, str]] = []
    agree_with_baseline: dict[str, bool] = {}
    diff_findings: list[Finding] = []
    for backend, variants in outcomes.items():
        ran = {v: o for v, o in variants.items() if o.status == OK}
        anchor = next((v for v in ran if (backend, v) in c.uncompiled), next(iter(ran), None))
        exporter_anchor = anchor is not None and (backend, anchor) in c.uncompiled
        all_disagree = True
        for variant, o in variants.items():
            if o.status == "skipped":
                continue
            own = EXPORTER if (backend, variant) in c.uncompiled else COMPILER
            if o.status != OK:
                _failed(backend, variant, o, findings, unsupported, own)
                continue
            outs = o.outputs or []
            own_low = (backend, variant) in c.low_precision
            tol = loose if own_low else tolerances
            # float64 computed in float32 has float32's tolerance; an output the spec computes narrower keeps
            # that type's (a float16 stash_type in a float32 graph, on OpenVINO's f32)
            as_single = c.single if (backend, variant) not in c.in_float32 else {
                i: c.single.get(i, "float32") for i, x in enumerate(outs)
                if i in c.single or np.asarray(x).dtype == np.float64}
            if baseline is not None and (variant == anchor or not exporter_anchor):
                m = compare(baseline, outs, tol, c.rounded, as_single, low_precision=own_low)
                if m is not None:
                    f = _mismatch(DIFFERENTIAL, backend, variant, c.baseline_name, m)
                    f.category = own
                    diff_findings.append(f)
                else:
                    all_disagree = False
            other = c.compare_with.get((backend, variant))
            if other in variants and other != variant:  # the variant it is paired with ran
                mate = other if variants[other].status == OK else None
            else:
                mate = anchor
            if mate is not None and mate != variant:
                low = (backend, variant) in c.low_precision or (backend, mate) in c.low_precision
                gpu = (backend, variant) in c.on_gpu or (backend, mate) in c.on_gpu
                pair_tol = loose if low else GPU_TOLERANCES | tolerances if gpu else tolerances
                m = compare(ran[mate].outputs or [], outs, pair_tol, c.rounded, as_single, low_precision=low)
                if m is not None:
                    findings.append(_mismatch(METAMORPHIC, backend, variant, mate, m))
        if anchor is not None and baseline is not None:
            agree_with_baseline[backend] = not all_disagree
    judged_by = c.baseline_name.split("/")[0]
    for f in diff_findings:
        # the backend's own variants all disagree with the baseline: if another compiler sides with
        # them, and none with the baseline, two independent implementations outvote the baseline
        if not agree_with_baseline.get(f.backend, True):
            mine = outcomes[f.backend][f.variant].outputs or []
            others = [(b, o) for b, vs in outcomes.items() if b not in (f.backend, judged_by) for o in vs.values()
                      if o.status == OK]
            if (any(compare(mine, o.outputs or [], tolerances, c.rounded, c.single) is None for _, o in others)
                    and not any(agree_with_baseline.get(b, False) for b, _ in others)):
                f.category = BASELINE
        findings.append(f)
    # a variant compared with a mate that is itself wrong there, by the baseline: their difference is no
    # evidence of the variant's own (each one's divergence from the baseline is): OpenVINO's LRN with a
    # bias off 1 is wrong alike in float32 and in bfloat16, whose rounding of the wrong values differs
    wrong = {(f.backend, f.variant, f.output) for f in findings if f.oracle == DIFFERENTIAL and f.category == COMPILER}
    findings = [f for f in findings if not (f.oracle == METAMORPHIC and (f.backend, f.other, f.output) in wrong)]
    return Verdict(findings, unsupported)


def judge_invalid(outcomes: dict[str, dict[str, Outcome]], violation: dict, confirmed: bool,
                  criteria: Criteria | None = None) -> Verdict:
    """Findings for a model that breaks ``violation`` on purpose.  Rejecting it with an error is
    right, and so is accepting it leniently (many frontends ignore an extra input or compute a
    dtype ONNX excludes); a finding is a fatal signal, hang or memory blow-up, or, when the ONNX
    checker confirms the model is invalid (``confirmed``), garbage: variants of one backend that
    accept it and disagree on its outputs ("inconsistent")."""
    c = criteria or Criteria()
    tolerances = dict(c.tolerances)
    loose = tolerances | LOW_PRECISION
    findings: list[Finding] = []
    what = f"{violation.get('op')}: {violation.get('constraint')}"
    for backend, variants in outcomes.items():
        first_ok: tuple[str, Outcome] | None = None
        for variant, o in variants.items():
            if o.status in ("skipped", "error"):
                continue
            if o.status != OK:
                f = _crash(backend, variant, o)
                f.oracle, f.details = DISRUPTIVE, {"violation": violation}
                f.message = f"{f.message} (model breaks '{what}')"
                findings.append(f)
            elif first_ok is None:
                first_ok = (variant, o)
            elif confirmed:
                low = (backend, variant) in c.low_precision or (backend, first_ok[0]) in c.low_precision
                m = compare(first_ok[1].outputs or [], o.outputs or [], loose if low else tolerances)
                if m is not None:
                    why = f"accepts a model that breaks '{what}' and its variants disagree: {m.detail}"
                    findings.append(Finding(DISRUPTIVE, INCONSISTENT, backend, variant, "run", why, other=first_ok[0],
                                            output=m.output, details={"violation": violation}))
    return Verdict(findings, [])


def judge_migrated(outcomes: dict[str, dict[str, Outcome]],
                   expected: list[np.ndarray] | dict[str, tuple[str, list[np.ndarray]]],
                   tolerances: dict[str, float] | None = None, model_of: dict[str, str] | None = None) -> Verdict:
    """Findings for one migrated test: crashes, and outputs inconsistent with the baseline's.

    ``expected``: the library's outputs, or per model (``model_of``: backend -> which model it was
    given, e.g. the torch call or its ONNX export) the name and outputs of the baseline that ran that
    model (an export is judged by what the export computes, not by torch: the exporter's own errors
    are not the ONNX frontends').  A finding is the ``BASELINE``'s when another frontend that read
    the same model matches its outputs: then the baseline, not the frontend, is the likelier cause."""
    model_of = model_of or {}
    by_model = expected if isinstance(expected, dict) else None
    findings: list[Finding] = []
    unsupported: list[tuple[str, str, str]] = []
    for backend, variants in outcomes.items():
        name, baseline = by_model[model_of.get(backend, "")] if by_model is not None else ("baseline", expected)
        for variant, o in variants.items():
            if o.status == "skipped":
                continue
            if o.status != OK:
                _failed(backend, variant, o, findings, unsupported)
                continue
            m = chebyshev(baseline, o.outputs or [], tolerances)
            if m is not None:
                f = _mismatch(DIFFERENTIAL, backend, variant, name, m)
                if any(
                    ot.status == OK and chebyshev(o.outputs or [], ot.outputs or [], tolerances) is None
                    for b, vs in outcomes.items() if b != backend and model_of.get(b) == model_of.get(backend)
                    for ot in vs.values()):
                    f.category = BASELINE
                findings.append(f)
    return Verdict(findings, unsupported)


def _mismatch(oracle: str, backend: str, variant: str, other: str, m: Mismatch) -> Finding:
    return Finding(oracle, m.kind, backend, variant, "run", m.detail, other=other, output=m.output,
                   details={"max_abs": m.max_abs})


# -- where a divergence starts, and which pass causes it ----------------------------------------------
def explain(graph: Graph, test: Test, findings: list[Finding], outcomes: Mapping[str, Mapping[str, Outcome]],
            backends: Mapping[str, Backend], runner: Runner, baseline: Pair | None, criteria: Criteria) -> None:
    """Locates the first diverging operator of each value finding (and with it NOISE and UNDEFINED,
    ``oracle/localize.py``), then blames the compiler pass whose absence makes the divergence vanish
    (``oracle/blame.py``).  ``baseline``: the (backend, variant) differential findings were judged
    against; ``backends``: those whose passes may be blamed."""
    localize(graph, test, findings, runner, baseline, criteria, outcomes)
    blame(graph, test, findings, outcomes, backends, runner, criteria.tolerances)
