"""The pass behind an optimization bug.

A metamorphic finding says one variant of a compiler disagrees with another of the same compiler
(ONNX Runtime's basic level against disable_all; so does a differential one whose baseline was the
compiler's own unoptimized variant).  The accused variant reports the passes that
changed the model (``Outcome.fired``); turning each off in turn (``Backend.disabling``), the first
whose absence makes the divergence vanish is blamed, recorded as ``details["blamed_pass"]``
(``blamed_pass`` reads it, and the ``"culprit"`` key of bundles written before the rename).

One pass's bug shows up at whatever operator the pass rewrote: ORT's QDQPropagationTransformer moved
a DequantizeLinear without zero point past a Reshape, a Slice, an Unsqueeze and a Transpose in a
10-minute campaign, four "first diverging operators" for one defect.  Such findings are signed by
their blamed pass (``run/dedup.py``), not by the operator.  The judge calls ``blame`` after
localization (``oracle/judge.py``: ``explain``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dlcfuzz.backends.base import OK, Backend, Outcome, Test, Variant, without
from dlcfuzz.ir import Graph
from dlcfuzz.oracle.compare import compare
from dlcfuzz.oracle.findings import METAMORPHIC, Finding
from dlcfuzz.oracle.localize import rounded_outputs, single_outputs

if TYPE_CHECKING:  # the judge calls blame: its types, not the module, are needed here
    from dlcfuzz.oracle.judge import Runner

MAX_CANDIDATES = 8  # passes tried per finding (ORT's basic level changes a model with 1-3 of them)
BLAMED_PASS = "blamed_pass"  # the key of ``Finding.details`` that names the pass
OLD_KEY = "culprit"  # the same key in bundles written before the rename


def blamed_pass(f: Finding) -> str:
    """The compiler pass blamed for ``f``'s divergence ("" for none), from a finding made now or read
    from an older bundle."""
    return f.details.get(BLAMED_PASS) or f.details.get(OLD_KEY) or ""


def blame(graph: Graph, test: Test, findings: list[Finding], outcomes: Mapping[str, Mapping[str, Outcome]],
          backends: Mapping[str, Backend], runner: Runner,
          tolerances: Mapping[str, tuple[float, float]] | None = None) -> None:
    """Sets ``details["blamed_pass"]`` (the pass's name) of each value finding against its own backend
    whose divergence one pass of its variant explains; ``runner`` runs the variants with a pass off."""
    rounded, single = rounded_outputs(graph), single_outputs(graph)
    tolerances = dict(tolerances or {})
    for f in findings:
        if not f.diverges or blamed_pass(f) or f.backend not in backends:
            continue
        # the variant it was compared with: another of its own (metamorphic), or its own unoptimized
        # variant standing in as the baseline ("ort/disable_all" where the reference is not trusted)
        owner, _, variant = f.other.partition("/")
        anchor_variant = f.other if f.oracle == METAMORPHIC else variant if owner == f.backend else ""
        backend = backends[f.backend]
        if not anchor_variant or backend.disabling(Variant(f.variant), []) is None:
            continue
        accused, anchor = outcomes.get(f.backend, {}).get(f.variant), outcomes.get(f.backend, {}).get(anchor_variant)
        if anchor is None:
            anchor = runner.run(f.backend, test, [anchor_variant])[anchor_variant]
        if accused is None or anchor.status != OK or not 0 <= f.output < len(anchor.outputs or []):
            continue
        fired = accused.fired
        if not fired:  # not reported on every compile (ORT's costs): the variant with nothing off reports them
            name = without(f.variant, [])
            fired = runner.run(f.backend, test, [name])[name].fired
        candidates = [k for k in fired if backend.disabling(Variant(f.variant), [k]) is not None]
        k = f.output
        for key in candidates[:MAX_CANDIDATES]:
            name = without(f.variant, [key])
            got = runner.run(f.backend, test, [name])[name]
            if got.status != OK or len(got.outputs or []) != len(anchor.outputs or []):
                continue
            if compare([anchor.outputs[k]], [got.outputs[k]], tolerances,
                       [0] if k in rounded else [], [0] if k in single else []) is None:
                f.details[BLAMED_PASS] = key.rsplit(":", 1)[-1]
                break
