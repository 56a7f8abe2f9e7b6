"""Oracles: crash, differential (vs the reference) and metamorphic (across a backend's variants).

``judge`` turns the outcomes of one test into findings and unsupported records:

- crash: an exception, a signal, a timeout or a memory blow-up in import/compile/run, unless
  ``unsupported.is_unsupported`` says the compiler merely declined the operator or dtype;
- differential: a variant's outputs differ from the baseline (the reference evaluator, or ORT
  without optimizations when the reference itself failed).  When every variant of the backend
  and at least one other backend agree with each other against the baseline, the finding is
  marked ``reference_suspect``: the reference is the likelier culprit;
- metamorphic: a variant's outputs differ from the backend's first successful variant, or from
  the variant its options name in ``compare_with`` (e.g. cuda-inductor with cuda-eager: Inductor's
  GPU code alone; cuda-eager with eager: the cross-device oracle).  When that variant ran and
  failed, there is nothing to compare with; when it did not run, the first successful one serves.

``judge_migrated`` judges a single-operator test migrated from a library's tests (OPERA §III-C):
a crash that is not "unsupported", or outputs whose Chebyshev distance to the library's own
outputs exceeds ``compare.CHEBYSHEV`` (integers exactly), is a finding.

``judge_invalid`` judges a disruptive test (a model that breaks one named constraint on
purpose, HirGen §3.1.5): rejecting it with an error is right; a fatal signal, a hang, a memory
blow-up, or accepting it with garbage outputs is a finding of the ``disruptive`` oracle.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlcfuzz.backends.base import OK, Outcome
from dlcfuzz.oracle.compare import REDUCED_PRECISION, Mismatch, all_finite, chebyshev, compare
from dlcfuzz.oracle.unsupported import is_unsupported

CRASH, DIFFERENTIAL, METAMORPHIC, DISRUPTIVE = "crash", "differential", "metamorphic", "disruptive"
INCONSISTENT = "inconsistent"  # an invalid model accepted, with outputs its variants disagree on


@dataclass
class Finding:
    oracle: str
    kind: str  # exception / signal / timeout / oom / value / shape / dtype
    backend: str
    variant: str
    phase: str
    message: str
    error_type: str = ""
    traceback: str = ""
    other: str = ""  # the variant or baseline it was compared with
    output: int = -1  # index of the differing output
    reference_suspect: bool = False
    details: dict = field(default_factory=dict)


@dataclass
class Verdict:
    findings: list[Finding]
    unsupported: list[tuple[str, str, str]]  # (backend, variant, message)


def _crash(backend: str, variant: str, o: Outcome) -> Finding:
    kind = {"crash": "signal" if o.signal else "exit", "timeout": "timeout", "oom": "oom"}.get(o.status, "exception")
    message = f"[{o.step}] {o.message}" if o.step else o.message  # the step (e.g. the pass) is part of the bug
    return Finding(CRASH, kind, backend, variant, o.phase, message, o.error_type, o.traceback)


def _failed(backend: str, variant: str, o: Outcome, findings: list[Finding],
            unsupported: list[tuple[str, str, str]]) -> None:
    """A variant that did not run: an error meaning "unsupported" is counted apart, anything else
    (exception, signal, hang, memory blow-up) is a crash finding."""
    if o.status == "error" and is_unsupported(backend, o.phase, o.error_type, o.message):
        unsupported.append((backend, variant, f"{o.error_type}: {o.message}"[:300]))
    else:
        findings.append(_crash(backend, variant, o))


def compare_targets(variants: dict[str, dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(backend, variant) -> the variant it is compared with, for the variants whose options name
    one (``compare_with``); ``variants``: backend -> name -> Variant."""
    return {(b, n): v.options["compare_with"] for b, vs in variants.items() for n, v in vs.items()
            if v.options.get("compare_with")}


def judge(outcomes: dict[str, dict[str, Outcome]], baseline: list[np.ndarray] | None,
          tolerances: dict[str, tuple[float, float]] | None = None,
          reduced: Collection[tuple[str, str]] = (),
          compare_with: Mapping[tuple[str, str], str] | None = None) -> Verdict:
    """Findings for one test.  ``outcomes``: backend -> variant -> outcome (variants in order);
    ``reduced``: (backend, variant) pairs that compute in reduced precision on purpose;
    ``compare_with``: (backend, variant) -> the variant it is compared with (``compare_targets``)."""
    compare_with = compare_with or {}
    loose = (tolerances or {}) | REDUCED_PRECISION
    findings: list[Finding] = []
    unsupported: list[tuple[str, str, str]] = []
    agree_with_baseline: dict[str, bool] = {}
    diff_findings: list[Finding] = []
    for backend, variants in outcomes.items():
        first_ok: tuple[str, Outcome] | None = None
        all_disagree = True
        for variant, o in variants.items():
            if o.status == "skipped":
                continue
            if o.status != OK:
                _failed(backend, variant, o, findings, unsupported)
                continue
            outs = o.outputs or []
            if baseline is not None:
                m = compare(baseline, outs, loose if (backend, variant) in reduced else tolerances)
                if m is not None:
                    diff_findings.append(_mismatch(DIFFERENTIAL, backend, variant, "baseline", m))
                else:
                    all_disagree = False
            other = compare_with.get((backend, variant))
            if other in variants and other != variant:  # the variant it is paired with ran
                mate = (other, variants[other]) if variants[other].status == OK else None
            else:
                mate = first_ok
            if first_ok is None:
                first_ok = (variant, o)
            if mate is not None and mate[0] != variant:
                pair_reduced = (backend, variant) in reduced or (backend, mate[0]) in reduced
                m = compare(mate[1].outputs or [], outs, loose if pair_reduced else tolerances)
                if m is not None:
                    findings.append(_mismatch(METAMORPHIC, backend, variant, mate[0], m))
        if first_ok is not None and baseline is not None:
            agree_with_baseline[backend] = not all_disagree
    for f in diff_findings:
        # the backend's own variants all disagree with the baseline; does another backend side with it?
        if not agree_with_baseline.get(f.backend, True):
            mine = outcomes[f.backend][f.variant].outputs or []
            f.reference_suspect = any(
                o.status == OK and compare(mine, o.outputs or [], tolerances) is None
                for b, vs in outcomes.items() if b != f.backend for o in vs.values())
        findings.append(f)
    return Verdict(findings, unsupported)


def judge_invalid(outcomes: dict[str, dict[str, Outcome]], violation: dict, confirmed: bool,
                  tolerances: dict[str, tuple[float, float]] | None = None,
                  reduced: Collection[tuple[str, str]] = ()) -> Verdict:
    """Findings for a model that breaks ``violation`` on purpose.  Rejecting it with an error is
    right, and so is accepting it leniently (many frontends ignore an extra input or compute a
    dtype ONNX excludes); a finding is a fatal signal, hang or memory blow-up, or, when the ONNX
    checker confirms the model is invalid (``confirmed``), garbage: variants of one backend that
    accept it and disagree on its outputs ("inconsistent")."""
    loose = (tolerances or {}) | REDUCED_PRECISION
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
                pair_reduced = (backend, variant) in reduced or (backend, first_ok[0]) in reduced
                m = compare(first_ok[1].outputs or [], o.outputs or [], loose if pair_reduced else tolerances)
                if m is not None:
                    why = f"accepts a model that breaks '{what}' and its variants disagree: {m.detail}"
                    findings.append(Finding(DISRUPTIVE, INCONSISTENT, backend, variant, "run", why, other=first_ok[0],
                                            output=m.output, details={"violation": violation}))
    return Verdict(findings, [])


def judge_migrated(outcomes: dict[str, dict[str, Outcome]], expected: list[np.ndarray],
                   tolerances: dict[str, float] | None = None, model_of: dict[str, str] | None = None) -> Verdict:
    """Findings for one migrated test: crashes, and outputs inconsistent with the library's (``expected``).
    A finding is ``reference_suspect`` when another frontend that read the same model (``model_of``:
    backend -> which model it was given, e.g. the torch call or its ONNX export) matches its outputs:
    then the library's output or that model, not the frontend, is the likelier culprit."""
    model_of = model_of or {}
    findings: list[Finding] = []
    unsupported: list[tuple[str, str, str]] = []
    for backend, variants in outcomes.items():
        for variant, o in variants.items():
            if o.status == "skipped":
                continue
            if o.status != OK:
                _failed(backend, variant, o, findings, unsupported)
                continue
            m = chebyshev(expected, o.outputs or [], tolerances)
            if m is not None:
                f = _mismatch(DIFFERENTIAL, backend, variant, "baseline", m)
                f.reference_suspect = any(
                    ot.status == OK and chebyshev(o.outputs or [], ot.outputs or [], tolerances) is None
                    for b, vs in outcomes.items() if b != backend and model_of.get(b) == model_of.get(backend)
                    for ot in vs.values())
                findings.append(f)
    return Verdict(findings, unsupported)


def _mismatch(oracle: str, backend: str, variant: str, other: str, m: Mismatch) -> Finding:
    return Finding(oracle, m.kind, backend, variant, "run", m.detail, other=other, output=m.output,
                   details={"max_abs": m.max_abs})


__all__ = [
    "CRASH",
    "DIFFERENTIAL",
    "DISRUPTIVE",
    "INCONSISTENT",
    "METAMORPHIC",
    "Finding",
    "Verdict",
    "all_finite",
    "compare",
    "compare_targets",
    "judge",
    "judge_invalid",
    "judge_migrated",
]
