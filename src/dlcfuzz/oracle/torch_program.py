"""The judging rule of torch-native programs (``gen/torch_program.py``), after PyTorch's rules for
fuzzer reports (its pt2 issue template):

- compiled against eager at default tolerances (``torch._dynamo.utils.same``), with an eager float64 run
  as the tie-breaker (``fp64_ref``): a compiled result no farther from float64 than eager's (times
  ``same``'s multiplier) is rounding, not a bug; a float16 or bfloat16 divergence that no float64 run
  could judge (eager rejects the program's float64 copy) is counted as noise, never listed;
- integer and bool outputs exactly, except where the compiled value equals the float64 run's (a
  comparison of float results that rounding flipped);
- never the indices chosen among ties (max/min/sort/topk's indices: ``NOT_COMPARED``);
- the program's inputs after the run too (in-place writes through views reach them);
- a stride difference from eager (significant strides: dims longer than 1) is its own kind, ``stride``;
- a graph break under ``fullgraph=True`` or an explicit "not supported" is a decline, not a bug; so is
  a program that eager torch itself rejects (the generator's decline, counted);
- the layer is named as PyTorch's triage does: a divergence (or crash) that ``backend="aot_eager"`` also
  shows is Dynamo's or AOTAutograd's, not Inductor's, and says so;
- a finding under Inductor flags (``inductor-cpp-wrapper``, ``inductor-freezing``, ``inductor-config``) is
  keyed and titled by the fewest flags that still show it (the worker's bisection), or as a default-config
  bug where it shows with none;
- the same values in another layout must give the same values (``inductor-layout``): kind ``layout``;
- a crash is keyed on where Inductor failed (``crash_site``): the innermost frames inside torch/_inductor,
  torch/_dynamo or torch/_functorch of the root error (not the wrappers that re-raise it), the lowering that
  failed, and the flags, beside the normalized message, so that one Inductor bug reached by many programs
  is one bug.

Two halves.  ``backends/torch_compare.compare_tensors`` (in the worker, on torch tensors) finds the
first divergence of a compiled run from eager.  ``judge_outcomes`` (here, in the driver) turns what the
worker reported (``ProgramDivergence`` errors and each variant's ``verdict-<variant>.json`` artifact)
into ``Finding``s and declines; the torch-program campaign (``run/torch_campaign.py``) calls it in place
of the ONNX differential and metamorphic rules of ``oracle.judge``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from dlcfuzz.backends.base import ERROR, OK, Outcome
from dlcfuzz.backends.torch_compare import (
    AOT,
    DECLINE_TEXT,
    DECLINE_TYPES,
    DIVERGENCE_ERROR,
    DYNAMO,
    EXPORT,
    INDUCTOR,
    VALUE,
    WRAPPED_TYPE,
    is_decline,
)
from dlcfuzz.oracle import COMPILER, CRASH, METAMORPHIC, NOISE, Finding, Verdict


def _register_declines(backend: str = "inductor-program") -> None:
    """The same declines as ``is_decline``, as a rule of ``oracle.unsupported`` (which the store's outcome
    rows and the support profiles read), for the torch-program backend."""
    import re

    from dlcfuzz.oracle.unsupported import RULES

    types = "|".join(sorted(DECLINE_TYPES))
    text = "|".join(re.escape(t) for t in DECLINE_TEXT)
    rule = (backend, "*", rf"(?i)^{WRAPPED_TYPE}*(?:(?:{types}):|.*(?:{text}))")
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


_FRAME = re.compile(r'File "([^"]+)", line \d+, in (\S+)')
# torch.compile's own code: where a crash's site is read
SITE_DIRS = ("/torch/_inductor/", "/torch/_dynamo/", "/torch/_functorch/")
# how Python's traceback joins the errors of a chain (the root cause is listed first)
_CHAIN = re.compile(r"\n\s*(?:The above exception was the direct cause of the following exception:"
                    r"|During handling of the above exception, another exception occurred:)\s*\n")
# Inductor's LoweringException names the operator it failed to lower ("target: aten.index_put_.default")
_LOWERING = re.compile(r"\btarget: ((?:aten|prims|torch|quantized|_c10d_functional|inductor)\.[\w.]+)")
SITE_FRAMES = 3  # as many as run/dedup.compiler_frames reads where a finding has no site
# the first error of a C++ compiler's output in Inductor's CppCompileError (whose first lines are the same
# for every C++ compile error)
_CXX_ERROR = re.compile(r"\berror: (.+)")


def _word(text: str) -> str:
    """``text`` as one frame-like word: numbers and temporaries (tmp12) as N, spaces as _."""
    text = re.sub(r"\b\w*\d\w*\b", "N", text.strip())
    return re.sub(r"\s+", "_", text)[:100]


def crash_site(traceback: str, message: str, flags: Mapping[str, Any] | None = None) -> list[str]:
    """Where torch.compile failed, as ``file:function`` entries: the innermost frames inside
    torch/_inductor, torch/_dynamo or torch/_functorch of the root error of the traceback's chain (the first
    error listed that has such frames; else of torch's own code), the lowering that failed
    (``lowering:aten.x``), a C++ compile error's first ``error:`` line, and the Inductor flags the finding
    needs (``config:a=1,b=2``); ``SITE_FRAMES`` entries at most, those after the frames kept first."""
    frames: list[str] = []
    for dirs in (SITE_DIRS, ("/torch/",)):  # torch.compile's own frames; else torch's (autograd, a kernel)
        for block in _CHAIN.split(traceback or ""):
            found = [f"{path.rsplit('/', 1)[-1]}:{fn}" for path, fn in _FRAME.findall(block)
                     if any(d in path.split("site-packages")[-1] for d in dirs)]
            if found:
                frames = found
                break
        if frames:
            break
    extra = []
    lowering = _LOWERING.search(message or "")
    if lowering:
        extra.append(f"lowering:{lowering.group(1)}")
    cxx = _CXX_ERROR.search(message or "") if "CppCompileError" in (message or "") else None
    if cxx:
        extra.append(f"c++:{_word(cxx.group(1))}")
    if flags:
        extra.append("config:" + ",".join(f"{k}={v!r}" for k, v in sorted(flags.items())).replace(" ", ""))
    keep = max(SITE_FRAMES - len(extra), 0)
    return (frames[-keep:] if keep else []) + extra


def padded_site(site: list[str]) -> list[str]:
    """The crash's site as exactly ``SITE_FRAMES`` entries (``-:-`` before a shorter one): a finding's
    ``details["site"]``, which the campaign's signature reads in place of the traceback's frames."""
    return (["-:-"] * SITE_FRAMES + site)[-SITE_FRAMES:]


def flags_of(v: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Inductor flags a finding needs: the bisection's fewest ({}: none, a default-config bug), the
    variant's flags where no bisection ran, None for a variant without flags."""
    if v.get("minimal") is not None:
        return dict(v["minimal"])
    return dict(v["config"]) if v.get("config") else None


def flag_details(v: Mapping[str, Any]) -> dict[str, Any]:
    """What a finding's details say of the flags and layouts it ran under."""
    out: dict[str, Any] = {}
    flags = flags_of(v)
    if flags is not None:
        out["config"] = flags
        out["variant_config"] = dict(v.get("config") or {})
    if v.get("relayout"):
        out["relayout"] = list(v["relayout"])
    return out


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
            flags = flags_of(v)
            keyed = f"{kind}:{layer}" + (f":config:{','.join(f'{k}={x!r}' for k, x in sorted(flags.items()))}"
                                         if flags else "")
            f = Finding(METAMORPHIC, kind, backend, variant, o.phase, o.message, o.error_type, o.traceback,
                        other="", output=-1 if on_input else index, category=NOISE if d.get("untied") else COMPILER,
                        details={"first_diverging": {"op": op, "kind": keyed, "dtype": d.get("dtype", "")},
                                 "layer": layer, "where": where, **flag_details(v)})
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
        details = {"layer": layer or INDUCTOR, **flag_details(v)}
        if kind == "exception":  # keyed on where torch.compile failed, not on the program that led there
            details["site"] = padded_site(crash_site(o.traceback, o.message, flags_of(v)))
        findings.append(Finding(CRASH, kind, backend, variant, o.phase, message, o.error_type, o.traceback,
                                details=details))
    return Verdict(findings, unsupported)


def title(f: Finding) -> str:
    """A one-line summary that names the layer (PyTorch's triage: aot_eager shows it too -> not Inductor)."""
    layer = f.details.get("layer", INDUCTOR)
    who = {INDUCTOR: "Inductor", AOT: "Dynamo/AOTAutograd (aot_eager shows it too)",
           DYNAMO: "Dynamo (backend='eager' shows it too)",
           EXPORT: "torch.export (the exported program shows it too)"}.get(layer, layer)
    under = f.variant
    if "config" in f.details:  # the fewest flags that show it, or none
        flags = f.details["config"]
        under = (f"{f.variant} with {', '.join(f'{k}={v!r}' for k, v in sorted(flags.items()))}" if flags
                 else f"{f.variant} (default config: shows with no flags)")
    if f.oracle == CRASH:
        return f"{who}: {f.phase} {f.kind} under {under}: {f.error_type}: {f.message.splitlines()[0][:120]}"[:240]
    op = (f.details.get("first_diverging") or {}).get("op", "")
    return f"{who}: {f.kind} mismatch against eager under {under} at {f.details.get('where', '')}" \
           f"{f' ({op})' if op else ''}"[:240]


_register_declines()
