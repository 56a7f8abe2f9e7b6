"""The judging rule of torch-native programs (``gen/torch_program.py``), after PyTorch's rules for
fuzzer reports (its pt2 issue template):

- compiled against eager at default tolerances (``torch._dynamo.utils.same``), with an eager float64 run
  as the tie-breaker (``fp64_ref``): a compiled result no farther from float64 than eager's (times
  ``same``'s multiplier) is rounding, not a bug;
- integer and bool outputs exactly, except where the compiled value equals the float64 run's (a
  comparison of float results that rounding flipped);
- never the indices chosen among ties (max/min/sort/topk's indices: ``NOT_COMPARED``);
- the program's inputs after the run too (in-place writes through views reach them);
- a stride difference from eager (significant strides: dims longer than 1) is its own kind, ``stride``;
- a graph break under ``fullgraph=True`` or an explicit "not supported" is a decline, not a bug; so is
  a program that eager torch itself rejects (the generator's decline, counted);
- the layer is named as PyTorch's triage does: a divergence (or crash) that ``backend="aot_eager"`` also
  shows is Dynamo's or AOTAutograd's, not Inductor's, and says so.

Two halves.  ``backends/torch_compare.compare_tensors`` (in the worker, on torch tensors) finds the
first divergence of a compiled run from eager.  ``judge_outcomes`` (here, in the driver) turns what the
worker reported (``ProgramDivergence`` errors and each variant's ``verdict-<variant>.json`` artifact)
into ``Finding``s and declines; the torch-program campaign (``run/torch_campaign.py``) calls it in place
of the ONNX differential and metamorphic rules of ``oracle.judge``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dlcfuzz.backends.base import ERROR, OK, Outcome
from dlcfuzz.backends.torch_compare import (
    AOT,
    DECLINE_TEXT,
    DECLINE_TYPES,
    DIVERGENCE_ERROR,
    DYNAMO,
    INDUCTOR,
    VALUE,
    is_decline,
)
from dlcfuzz.oracle import COMPILER, CRASH, METAMORPHIC, Finding, Verdict


def _register_declines(backend: str = "inductor-program") -> None:
    """The same declines as ``is_decline``, as a rule of ``oracle.unsupported`` (which the store's outcome
    rows and the support profiles read), for the torch-program backend."""
    import re

    from dlcfuzz.oracle.unsupported import RULES

    types = "|".join(sorted(DECLINE_TYPES))
    text = "|".join(re.escape(t) for t in DECLINE_TEXT)
    rule = (backend, "*", rf"(?i)^(?:(?:{types}):|.*(?:{text}))")
    if rule not in RULES:
        RULES.append(rule)



# ---------------------------------------------------------------------------------------------
# In the driver: outcomes -> findings
# ---------------------------------------------------------------------------------------------
def verdict_of(o: Outcome, variant: str) -> dict[str, Any]:
    raw = (o.artifacts or {}).get(f"verdict-{variant}.json")
    if not raw:
        return {}
    try:
        return json.loads(raw if isinstance(raw, str) else raw.decode())
    except ValueError:
        return {}


def judge_outcomes(backend: str, outcomes: Mapping[str, Outcome], ops_of_output: Mapping[int, str] | None = None,
                   ops_of_input: Mapping[int, str] | None = None) -> Verdict:
    """Findings and declines of one torch program on one backend's variants.  ``ops_of_output``: output
    index -> the operator that made it; ``ops_of_input``: input index -> the first operator that reads it
    (where a divergence of an input after the run, or of its gradient, is keyed)."""
    findings: list[Finding] = []
    unsupported: list[tuple[str, str, str]] = []
    for variant, o in outcomes.items():
        if o.status == OK or o.status == "skipped":
            continue
        v = verdict_of(o, variant)
        if o.status == ERROR and o.error_type == DIVERGENCE_ERROR:
            d = v.get("divergence") or {}
            layer = d.get("layer", INDUCTOR)
            where = d.get("where", "")
            index = int(d.get("index", -1))
            kind = d.get("kind", VALUE)
            on_input = "input" in where
            op = ((ops_of_input or {}).get(index, "") if on_input else (ops_of_output or {}).get(index, ""))
            f = Finding(METAMORPHIC, kind, backend, variant, o.phase, o.message, o.error_type, o.traceback,
                        other="", output=-1 if on_input else index, category=COMPILER,
                        details={"first_diverging": {"op": op, "kind": f"{kind}:{layer}", "dtype": d.get("dtype", "")},
                                 "layer": layer, "where": where})
            findings.append(f)
            continue
        if o.status == ERROR and is_decline(o.error_type, o.message):
            unsupported.append((backend, variant, f"{o.error_type}: {o.message}"[:300]))
            continue
        kind = {"crash": "signal" if o.signal else "exit", "timeout": "timeout", "oom": "oom"}.get(o.status,
                                                                                                    "exception")
        layer = v.get("layer", "")
        message = f"[{o.step}] {o.message}" if o.step else o.message
        if layer and layer != INDUCTOR:
            message = f"{message} [layer: {layer}]"
        findings.append(Finding(CRASH, kind, backend, variant, o.phase, message, o.error_type, o.traceback,
                                details={"layer": layer or INDUCTOR}))
    return Verdict(findings, unsupported)


def title(f: Finding) -> str:
    """A one-line summary that names the layer (PyTorch's triage: aot_eager shows it too -> not Inductor)."""
    layer = f.details.get("layer", INDUCTOR)
    who = {INDUCTOR: "Inductor", AOT: "Dynamo/AOTAutograd (aot_eager shows it too)",
           DYNAMO: "Dynamo (backend='eager' shows it too)"}.get(layer, layer)
    if f.oracle == CRASH:
        return f"{who}: {f.phase} {f.kind} under {f.variant}: {f.error_type}: {f.message.splitlines()[0][:120]}"[:200]
    op = (f.details.get("first_diverging") or {}).get("op", "")
    return f"{who}: {f.kind} mismatch against eager at {f.details.get('where', '')}{f' ({op})' if op else ''} " \
           f"under {f.variant}"[:200]


_register_declines()
