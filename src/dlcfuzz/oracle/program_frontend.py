"""The torch-program rule (``oracle/torch_program.py``) for the PyTorch frontends of other compilers
(``tvm-torch``, ``openvino-torch``: ``backends/program_frontend.py``).

The same findings as ``judge_outcomes`` gives, with two differences that belong to these backends:

- declines are theirs too: an error that ``oracle/unsupported.py``'s rules for the backend call a decline
  (a frontend's "no conversion rule", "Unsupported function types", its "not supported" wording; a failure
  of torch.export itself, ``TorchExportError``: the exporter's decline, counted apart by its type) is a
  decline, never a crash finding;
- a crash's layer is the compiler's (``tvm``/``openvino``; ``... frontend`` for one in the import phase:
  the conversion of the exported program), not Inductor's.  A divergence's layer comes from the worker:
  the compiler's, or ``torch.export`` where the exported program itself diverges from eager.
"""

from __future__ import annotations

from collections.abc import Mapping

from dlcfuzz.backends.base import ERROR, Outcome
from dlcfuzz.oracle import CRASH, Verdict
from dlcfuzz.oracle.torch_program import judge_outcomes, verdict_of
from dlcfuzz.oracle.unsupported import is_unsupported

# the frontend backend -> the compiler its findings name
COMPILER = {"tvm-torch": "tvm", "openvino-torch": "openvino"}


def judge_frontend_outcomes(backend: str, outcomes: Mapping[str, Outcome],
                            ops_of_output: Mapping[int, str] | None = None,
                            ops_of_input: Mapping[int, str] | None = None) -> Verdict:
    """Findings and declines of one torch program on one frontend backend's variants."""
    declined = {v: o for v, o in outcomes.items()
                if o.status == ERROR and is_unsupported(backend, o.phase, o.error_type, o.message)}
    verdict = judge_outcomes(backend, {v: o for v, o in outcomes.items() if v not in declined}, ops_of_output,
                             ops_of_input)
    verdict.unsupported += [(backend, v, f"{o.error_type}: {o.message}"[:300]) for v, o in declined.items()]
    compiler = COMPILER.get(backend, backend)
    for f in verdict.findings:
        if f.oracle == CRASH and not verdict_of(outcomes[f.variant], f.variant).get("layer"):
            f.details["layer"] = f"{compiler} frontend" if f.phase == "import" else compiler
    return verdict
