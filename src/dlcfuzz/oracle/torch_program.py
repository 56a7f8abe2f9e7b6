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

Two halves.  ``compare_runs`` (in the worker, on torch tensors) finds the first divergence of a compiled
run from eager.  ``judge_outcomes`` (in the driver, on the worker's ``Outcome``s) turns what the worker
reported (``ProgramDivergence`` errors and each variant's ``verdict-<variant>.json`` artifact) into the
judge's ``Finding``s and declines: the one judge (``oracle.judge``) calls it for a test whose graph is a
torch program, in place of the ONNX differential and metamorphic rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlcfuzz.backends.base import ERROR, OK, Outcome
from dlcfuzz.oracle import COMPILER, CRASH, METAMORPHIC, Finding, Verdict

# the kinds of a torch program's divergence
VALUE, SHAPE, DTYPE, STRIDE, MUTATION, GRAD = "value", "shape", "dtype", "stride", "mutation", "grad"
KINDS = (VALUE, SHAPE, DTYPE, STRIDE, MUTATION, GRAD)
# the layer a finding belongs to (what its title names)
INDUCTOR, AOT, DYNAMO = "inductor", "dynamo/aot_autograd", "dynamo"
DIVERGENCE_ERROR = "ProgramDivergence"  # the error type a worker reports a divergence under
EAGER_REJECTS = "EagerRejects"  # eager torch refused the program: the generator's decline
# same()'s tolerance per output dtype (torch's inductor accuracy checks: 1e-4 for float32, looser for
# the 16-bit types), before the float64 tie-breaker
TOLERANCE = {"float64": 1e-4, "float32": 1e-4, "float16": 1e-3, "bfloat16": 1e-2}
# what Dynamo or Inductor say when they decline a program (a graph break under fullgraph=True, an
# operator or dtype they do not support): not bugs
DECLINE_TYPES = frozenset({"Unsupported", "UserError", "UncapturedHigherOrderOpError", "ObservedException",
                           EAGER_REJECTS})
DECLINE_TEXT = ("graph break", "not supported", "is not implemented", "unsupported operator",
                "data dependent", "data-dependent", "Could not guard on data-dependent")


@dataclass
class Divergence:
    kind: str
    where: str  # "output 2", "input 0 after the run", "gradient of input 1", "second call: output 0"
    index: int  # the output (or input) index
    detail: str
    dtype: str = ""
    layer: str = INDUCTOR

    def message(self, variant: str) -> str:
        return (f"{self.kind} mismatch at {self.where} ({self.dtype}) under {variant}: {self.detail} "
                f"[layer: {self.layer}]")


@dataclass
class ProgramVerdict:
    """What one variant of a program showed, as the worker reports it (an artifact)."""

    divergence: dict[str, Any] | None = None
    layer: str = ""  # of a crash: which backend still crashes (inductor, aot_eager, eager)
    notes: list[str] = field(default_factory=list)  # e.g. "second call skipped: eager rejects the other sizes"

    def to_json(self) -> str:
        return json.dumps({"divergence": self.divergence, "layer": self.layer, "notes": self.notes})


class ProgramDivergence(Exception):
    """Raised in the worker when a compiled run diverges from eager (the outcome's error type)."""


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


def is_decline(error_type: str, message: str) -> bool:
    """A graph break under fullgraph=True, an explicit "not supported", or eager's own refusal."""
    if error_type in DECLINE_TYPES:
        return True
    low = (message or "").lower()
    return any(t.lower() in low for t in DECLINE_TEXT)


# ---------------------------------------------------------------------------------------------
# In the worker: comparing runs (torch tensors)
# ---------------------------------------------------------------------------------------------
def _close(ref: Any, res: Any, fp64: Any) -> tuple[bool, str]:
    import torch
    from torch._dynamo.utils import same

    if ref.dtype.is_floating_point:
        errors: list[str] = []
        ok = same(ref, res, fp64 if fp64 is not None else ref, tol=TOLERANCE.get(str(ref.dtype)[6:], 1e-4),
                  equal_nan=True, log_error=lambda fmt, *a: errors.append(fmt % a if a else fmt))
        if ok:
            return True, ""
        diff = (ref.double() - res.double()).abs()
        diff = torch.where(torch.isnan(diff), torch.zeros_like(diff), diff)
        return False, f"max |eager - compiled| = {diff.max().item():.4g}; " + "; ".join(errors)[:300]
    bad = ref != res
    if not bad.any():
        return True, ""
    if fp64 is not None and fp64.shape == res.shape:  # a comparison or rounding of float results flipped
        f = fp64.to(res.dtype) if fp64.dtype != res.dtype else fp64
        if bool((res[bad] == f[bad]).all()):
            return True, ""
    return False, f"{int(bad.sum())}/{bad.numel()} elements differ"


def compare_tensors(kind: str, label: str, ref: Sequence[Any], res: Sequence[Any], fp64: Sequence[Any] | None,
                    skip: Sequence[int] = (), strides: bool = False) -> Divergence | None:
    """The first divergence of ``res`` from ``ref`` (same length, tensors or None), with the float64
    run ``fp64`` as the tie-breaker; ``strides``: also the significant strides (its own kind)."""
    import torch
    from torch._prims_common import check_significant_strides

    if len(ref) != len(res):
        return Divergence(SHAPE, label, -1, f"{len(res)} results, eager gives {len(ref)}")
    for i, (a, b) in enumerate(zip(ref, res, strict=True)):
        if i in skip or (a is None and b is None):
            continue
        where = f"{label} {i}"
        if (a is None) != (b is None):
            return Divergence(kind, where, i, "present in one run only")
        if not isinstance(a, torch.Tensor):
            continue
        if a.shape != b.shape:
            return Divergence(SHAPE, where, i, f"{tuple(b.shape)}, eager {tuple(a.shape)}", str(a.dtype)[6:])
        if a.dtype != b.dtype:
            return Divergence(DTYPE, where, i, f"{b.dtype}, eager {a.dtype}", str(a.dtype)[6:])
        c = fp64[i] if fp64 is not None and i < len(fp64) else None
        ok, detail = _close(a, b, c)
        if not ok:
            return Divergence(kind, where, i, detail, str(a.dtype)[6:])
    if strides:
        for i, (a, b) in enumerate(zip(ref, res, strict=True)):
            if i in skip or not isinstance(a, torch.Tensor) or a.numel() <= 1:
                continue
            same_strides, _ = check_significant_strides(a, b, only_cuda=False)
            if not same_strides:
                return Divergence(STRIDE, f"{label} {i}", i, f"strides {b.stride()}, eager {a.stride()}",
                                  str(a.dtype)[6:])
    return None


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
