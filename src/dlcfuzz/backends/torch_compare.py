"""The worker's half of the torch-program oracle (``oracle/torch_program.py`` is the driver's): what a
divergence of a compiled run from eager is, found on torch tensors where they live, in the worker.

``compare_tensors`` finds the first divergence (``torch._dynamo.utils.same`` with an eager float64 run
as the tie-breaker; integers exactly unless float64 agrees with the compiled value; significant strides
as their own kind).  ``is_decline`` says what Dynamo, Inductor or eager torch say when they decline a
program.  It lives in ``backends`` because the backend runs it in its worker, and the oracle may import
backends but not the reverse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# the kinds of a torch program's divergence
VALUE, SHAPE, DTYPE, STRIDE, MUTATION, GRAD = "value", "shape", "dtype", "stride", "mutation", "grad"
LAYOUT = "layout"  # the same values in another layout give other results (the metamorphic layout oracle)
KINDS = (VALUE, SHAPE, DTYPE, STRIDE, MUTATION, GRAD, LAYOUT)
# the layer a finding belongs to (what its title names)
INDUCTOR, AOT, DYNAMO = "inductor", "dynamo/aot_autograd", "dynamo"
EXPORT = "torch.export"  # a finding that the exported program (ep.module()) shows too
DIVERGENCE_ERROR = "ProgramDivergence"  # the error type a worker reports a divergence under
EAGER_REJECTS = "EagerRejects"  # eager torch refused the program: the generator's decline
# a variant's code generator said that it lacks an operation, in the exception its variant names as its gaps
# (``VARIANTS[...]["gaps"]``: the Halide backend's NotImplementedError("log2")): that variant's decline
CODEGEN_GAP = "CodegenGap"
# same()'s tolerance per output dtype (torch's inductor accuracy checks: 1e-4 for float32, looser for
# the 16-bit types), before the float64 tie-breaker
TOLERANCE = {"float64": 1e-4, "float32": 1e-4, "float16": 1e-3, "bfloat16": 1e-2}
# what Dynamo or Inductor say when they decline a program (a graph break under fullgraph=True, an
# operator or dtype they do not support): not bugs
DECLINE_TYPES = frozenset({"Unsupported", "UserError", "UncapturedHigherOrderOpError", "ObservedException",
                           EAGER_REJECTS, "TorchExportError", CODEGEN_GAP})
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
    # a half-precision divergence that no float64 run could tie-break (a program whose float64 copy eager
    # rejects: quantize_per_tensor takes float32 only): rounding as likely as a bug, not claimed as one
    untied: bool = False

    def message(self, variant: str) -> str:
        return (f"{self.kind} mismatch at {self.where} ({self.dtype}) under {variant}: {self.detail} "
                f"[layer: {self.layer}]")


@dataclass
class ProgramVerdict:
    """What one variant of a program showed, as the worker reports it (an artifact)."""

    divergence: dict[str, Any] | None = None
    layer: str = ""  # of a crash: which backend still crashes (inductor, aot_eager, eager)
    notes: list[str] = field(default_factory=list)  # e.g. "second call skipped: eager rejects the other sizes"
    config: dict[str, Any] = field(default_factory=dict)  # the Inductor flags the variant ran under
    minimal: dict[str, Any] | None = None  # of a finding under flags: the fewest that still show it ({}: none)
    relayout: list[str] = field(default_factory=list)  # the layout variant's other layout of each input

    def to_json(self) -> str:
        return json.dumps({"divergence": self.divergence, "layer": self.layer, "notes": self.notes,
                           "config": self.config, "minimal": self.minimal, "relayout": self.relayout},
                          default=repr)


class ProgramDivergence(Exception):
    """Raised in the worker when a compiled run diverges from eager (the outcome's error type)."""


# Inductor wraps what a compile raised in its own exception (InductorError, LoweringException) whose message
# begins with the wrapped one's type: "InductorError: Unsupported: halide backend does not support: copysign"
WRAPPED_TYPE = r"(?:[A-Za-z_]\w*: )"  # one wrapper's "Type: " (the store's decline rule reads them too)
WRAPPED_TYPES = re.compile(rf"^{WRAPPED_TYPE}+")


def raised_types(error_type: str, message: str) -> set[str]:
    """The exception's type and those Inductor's wrappers name at the head of its message."""
    wrapped = WRAPPED_TYPES.match(message or "")
    return {error_type, *(wrapped.group(0).split(": ")[:-1] if wrapped else ())}


def is_decline(error_type: str, message: str) -> bool:
    """A graph break under fullgraph=True, an explicit "not supported", or eager's own refusal, raised or
    wrapped by Inductor."""
    if raised_types(error_type, message) & DECLINE_TYPES:
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
            return Divergence(kind, where, i, detail, str(a.dtype)[6:],
                              untied=c is None and a.dtype in (torch.float16, torch.bfloat16))
    if strides:
        for i, (a, b) in enumerate(zip(ref, res, strict=True)):
            if i in skip or not isinstance(a, torch.Tensor) or a.numel() <= 1:
                continue
            same_strides, _ = check_significant_strides(a, b, only_cuda=False)
            if not same_strides:
                return Divergence(STRIDE, f"{label} {i}", i, f"strides {b.stride()}, eager {a.stride()}",
                                  str(a.dtype)[6:])
    return None
