"""Oracles: crash, differential (vs the reference) and metamorphic (across a backend's variants).

``judge`` turns the outcomes of one test into findings and unsupported records:

- crash: an exception, a signal, a timeout or a memory blow-up in import/compile/run, unless
  ``unsupported.is_unsupported`` says the compiler merely declined the operator or dtype;
- differential: a variant's outputs differ from the baseline (the reference evaluator, or ORT
  without optimizations where the reference is not trusted or failed);
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlcfuzz.backends.base import OK, Outcome
from dlcfuzz.oracle.compare import REDUCED_PRECISION, Mismatch, all_finite, chebyshev, compare
from dlcfuzz.oracle.unsupported import is_unsupported

CRASH, DIFFERENTIAL, METAMORPHIC, DISRUPTIVE = "crash", "differential", "metamorphic", "disruptive"
INCONSISTENT = "inconsistent"  # an invalid model accepted, with outputs its variants disagree on
# whose fault a finding is: the compiler's (listed as its bug), the baseline's, or dlcfuzz's exporter's
COMPILER, BASELINE, EXPORTER, NOISE, UNDEFINED = "compiler", "baseline", "exporter", "noise", "undefined"
UNCONFIRMED = "unconfirmed"  # a process death that a fresh process, running the model alone, did not repeat
CATEGORIES = (COMPILER, BASELINE, EXPORTER, NOISE, UNDEFINED, UNCONFIRMED)
VALUE_KINDS = ("value", "shape", "dtype")


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
    category: str = COMPILER
    # e.g. "first_diverging": {node, op, output, kind, dtype, detail}, where a value divergence starts
    details: dict = field(default_factory=dict)

    @property
    def diverges(self) -> bool:
        """A value, shape or dtype divergence between outputs (not a crash, not a disruptive finding)."""
        return self.oracle in (DIFFERENTIAL, METAMORPHIC) and self.kind in VALUE_KINDS


def unconfirmed(backend: str, variant: str, o: Outcome) -> Finding:
    """A crash that a fresh worker did not repeat: no model reproduces it, so it is counted apart."""
    return Finding(CRASH, "unconfirmed", backend, variant, o.phase, f"{o.message}; not reproduced in a fresh process",
                   o.error_type, o.traceback, category=UNCONFIRMED)


@dataclass
class Verdict:
    findings: list[Finding]
    unsupported: list[tuple[str, str, str]]  # (backend, variant, message)


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


def compare_targets(variants: dict[str, dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(backend, variant) -> the variant it is compared with, for the variants whose options name
    one (``compare_with``); ``variants``: backend -> name -> Variant."""
    return {(b, n): v.options["compare_with"] for b, vs in variants.items() for n, v in vs.items()
            if v.options.get("compare_with")}


def judge(outcomes: dict[str, dict[str, Outcome]], baseline: list[np.ndarray] | None,
          tolerances: dict[str, tuple[float, float]] | None = None,
          reduced: Collection[tuple[str, str]] = (), uncompiled: Collection[tuple[str, str]] = (),
          baseline_name: str = "baseline", rounded: Collection[int] = (),
          compare_with: Mapping[tuple[str, str], str] | None = None, single: Collection[int] = (),
          in_float32: Collection[tuple[str, str]] = ()) -> Verdict:
    """Findings for one test.  ``outcomes``: backend -> variant -> outcome (variants in order);
    ``reduced``: (backend, variant) pairs that compute in reduced precision on purpose;
    ``uncompiled``: (backend, variant) pairs that run the model without the compiler under test
    (their findings are the exporter's, and the backend's other variants are judged against them);
    ``baseline_name``: what computed ``baseline`` (named in the findings); ``rounded``: the integer
    outputs computed from float math (``Graph.rounded_from_floats``), compared with one unit of slack;
    ``compare_with``: (backend, variant) -> the variant it is compared with (``compare_targets``);
    ``single``: the float64 outputs the spec computes through float32 (``Graph.computed_in_float32``);
    ``in_float32``: (backend, variant) pairs that compute float64 in float32 (all their outputs are
    compared with float32's tolerance)."""
    compare_with = compare_with or {}
    loose = (tolerances or {}) | REDUCED_PRECISION
    findings: list[Finding] = []
    unsupported: list[tuple[str, str, str]] = []
    agree_with_baseline: dict[str, bool] = {}
    diff_findings: list[Finding] = []
    for backend, variants in outcomes.items():
        ran = {v: o for v, o in variants.items() if o.status == OK}
        anchor = next((v for v in ran if (backend, v) in uncompiled), next(iter(ran), None))
        exporter_anchor = anchor is not None and (backend, anchor) in uncompiled
        all_disagree = True
        for variant, o in variants.items():
            if o.status == "skipped":
                continue
            own = EXPORTER if (backend, variant) in uncompiled else COMPILER
            if o.status != OK:
                _failed(backend, variant, o, findings, unsupported, own)
                continue
            outs = o.outputs or []
            tol = loose if (backend, variant) in reduced else tolerances
            as_single = range(len(outs)) if (backend, variant) in in_float32 else single
            if baseline is not None and (variant == anchor or not exporter_anchor):
                m = compare(baseline, outs, tol, rounded, as_single)
                if m is not None:
                    f = _mismatch(DIFFERENTIAL, backend, variant, baseline_name, m)
                    f.category = own
                    diff_findings.append(f)
                else:
                    all_disagree = False
            other = compare_with.get((backend, variant))
            if other in variants and other != variant:  # the variant it is paired with ran
                mate = other if variants[other].status == OK else None
            else:
                mate = anchor
            if mate is not None and mate != variant:
                pair_reduced = (backend, variant) in reduced or (backend, mate) in reduced
                m = compare(ran[mate].outputs or [], outs, loose if pair_reduced else tolerances, rounded, as_single)
                if m is not None:
                    findings.append(_mismatch(METAMORPHIC, backend, variant, mate, m))
        if anchor is not None and baseline is not None:
            agree_with_baseline[backend] = not all_disagree
    judged_by = baseline_name.split("/")[0]
    for f in diff_findings:
        # the backend's own variants all disagree with the baseline: if another compiler sides with
        # them, and none with the baseline, two independent implementations outvote the baseline
        if not agree_with_baseline.get(f.backend, True):
            mine = outcomes[f.backend][f.variant].outputs or []
            others = [(b, o) for b, vs in outcomes.items() if b not in (f.backend, judged_by) for o in vs.values()
                      if o.status == OK]
            if (any(compare(mine, o.outputs or [], tolerances, rounded, single) is None for _, o in others)
                    and not any(agree_with_baseline.get(b, False) for b, _ in others)):
                f.category = BASELINE
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


def judge_migrated(outcomes: dict[str, dict[str, Outcome]],
                   expected: list[np.ndarray] | dict[str, tuple[str, list[np.ndarray]]],
                   tolerances: dict[str, float] | None = None, model_of: dict[str, str] | None = None) -> Verdict:
    """Findings for one migrated test: crashes, and outputs inconsistent with the baseline's.

    ``expected``: the library's outputs, or per model (``model_of``: backend -> which model it was
    given, e.g. the torch call or its ONNX export) the name and outputs of the baseline that ran that
    model (an export is judged by what the export computes, not by torch: the exporter's own errors
    are not the ONNX frontends').  A finding is the ``BASELINE``'s when another frontend that read
    the same model matches its outputs: then the baseline, not the frontend, is the likelier culprit."""
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


__all__ = [
    "BASELINE",
    "CATEGORIES",
    "COMPILER",
    "CRASH",
    "DIFFERENTIAL",
    "DISRUPTIVE",
    "EXPORTER",
    "INCONSISTENT",
    "METAMORPHIC",
    "NOISE",
    "UNCONFIRMED",
    "UNDEFINED",
    "Finding",
    "Verdict",
    "all_finite",
    "compare",
    "compare_targets",
    "judge",
    "judge_invalid",
    "judge_migrated",
    "unconfirmed",
]
