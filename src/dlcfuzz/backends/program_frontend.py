"""torch-native programs (``gen/torch_program.py``) through a compiler's PyTorch frontend: the half that
``tvm-torch`` (``backends/tvm.py``) and ``openvino-torch`` (``backends/openvino.py``) share.  Each backend
keeps its own frontend, compile and run; this module holds what is the same for both:

- ``load_program``: the program's source (from its graph), its eager run and eager float64 run (the
  tie-breaker), then ``torch.export.export`` of ``Model`` on ``make_inputs()`` (inputs in the program's
  layouts) and torch's core-ATen decomposition.  Eager's refusal is the generator's decline
  (``EagerRejects``); a failure of torch.export (or of its decompositions) is the exporter's decline
  (``TorchExportError``, an ``oracle/unsupported.py`` rule): neither is the compiler's bug.
- ``dense_inputs``: the inputs the compiled program runs on, contiguous copies of ``make_inputs()``
  (the frontends take dense tensors only: TVM's and OpenVINO's runtimes have no strides).
- ``judge_run``: the compiled outputs against eager by ``backends/torch_compare.compare_tensors`` (the
  torch-program oracle's rule: ``same`` at per-dtype tolerances, float64 as the tie-breaker, integers
  exactly unless float64 agrees, tie indices never; no strides: the runtimes return dense tensors).  A
  divergence is re-checked on the exported program itself (``ep.module()``): where it diverges too, the
  finding's layer is torch.export's, not the compiler's.  The variant hands over ``verdict-<variant>.json``
  and raises ``ProgramDivergence``, as ``inductor-program`` does, so that ``oracle/torch_program``'s
  judge makes the findings.

Out of scope here: in-place writes to the inputs (the frontends compile a functional graph and run on
copies: the outputs are compared, the inputs after the run are not), backward (the program's forward
only) and dynamic shapes (the static shapes of ``make_inputs()``; OpenVINO's ``f32-dynamic`` variant
compiles with dynamic dims and runs at these shapes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test
from dlcfuzz.backends.torch_compare import EXPORT, VALUE, ProgramDivergence, ProgramVerdict, compare_tensors


def is_program_test(test: Test) -> bool:
    """Whether ``test`` carries a torch-native program (its graph's language is torch), not a migrated call."""
    if not test.graph_json:
        return False
    try:
        return json.loads(test.graph_json).get("meta", {}).get("language") == "torch"
    except ValueError:
        return False


@dataclass
class FrontendProgram:
    source: str
    namespace: dict[str, Any]
    eager: list[Any]  # eager outputs
    fp64: list[Any] | None  # eager float64 outputs (None where float64 eager fails)
    not_compared: list[int]
    ep: Any  # the ExportedProgram (decomposed where asked)
    user_outputs: list[int]  # which of the exported program's outputs are the Model's (not input mutations)


def load_program(test: Test, decompose: bool = True) -> FrontendProgram:
    """The program of ``test``, run eagerly (and in float64) and exported (``torch.export.export``, then
    ``run_decompositions`` where ``decompose``)."""
    import torch

    from dlcfuzz.backends.torch_library import TorchExportError, first_line, torch_export
    from dlcfuzz.backends.torch_program import eager_runs
    from dlcfuzz.export.torch_program import build, to_program_source
    from dlcfuzz.ir import Graph

    torch.set_num_threads(1)
    source = to_program_source(Graph.from_json(test.graph_json))
    ns = build(source)
    eager, _, fp64, _ = eager_runs(ns)
    ep = torch_export(ns["Model"](), ns["make_inputs"]())
    if decompose:
        try:
            ep = ep.run_decompositions()
        except Exception as e:  # torch's own decompositions: not the compiler's code
            raise TorchExportError(f"torch.export failed in run_decompositions: {type(e).__name__}: "
                                   f"{first_line(e)}") from e
    specs = ep.graph_signature.output_specs
    user = [i for i, s in enumerate(specs) if s.kind.name == "USER_OUTPUT"]
    return FrontendProgram(source, ns, eager, fp64, list(ns.get("NOT_COMPARED", [])), ep, user)


def dense_inputs(p: FrontendProgram) -> list[Any]:
    """The program's inputs as contiguous copies (the frontends' runtimes take dense tensors only)."""
    import torch

    return [a.detach().clone(memory_format=torch.contiguous_format) for a in p.namespace["make_inputs"]()]


def model_outputs(p: FrontendProgram, outs: list[Any]) -> list[Any]:
    """The Model's own outputs among a compiled program's (a frontend that also returns the exported
    program's input-mutation outputs has them at their positions in the output specs)."""
    n = len(p.ep.graph_signature.output_specs)
    if len(outs) == n and len(p.user_outputs) != n:
        return [outs[i] for i in p.user_outputs]
    return outs


def judge_run(backend: Backend, variant: str, p: FrontendProgram, outs: list[Any], layer: str) -> list[np.ndarray]:
    """The compiled outputs (torch tensors) against eager; the outputs as arrays, or ``ProgramDivergence``
    (with ``verdict-<variant>.json``: the divergence, its layer) where they diverge."""
    outs = model_outputs(p, outs)
    d = compare_tensors(VALUE, "output", p.eager, outs, p.fp64, p.not_compared)
    verdict = ProgramVerdict()
    if d is not None:
        d.layer = EXPORT if _export_diverges(p) else layer
        verdict.divergence = d.__dict__
    backend.artifact(f"verdict-{variant}.json", verdict.to_json())
    if d is not None:
        raise ProgramDivergence(d.message(variant))
    return [_numpy(o) for o in outs]


def _export_diverges(p: FrontendProgram) -> bool:
    """Whether the exported (and decomposed) program, run by torch, diverges from eager itself."""
    import torch

    try:
        with torch.no_grad():
            got = list(p.ep.module()(*p.namespace["make_inputs"]()))
    except Exception:
        return False
    return compare_tensors(VALUE, "output", p.eager, [g.detach() for g in got], p.fp64, p.not_compared) is not None


def _numpy(o: Any) -> np.ndarray:
    import torch

    t = o.detach().cpu() if isinstance(o, torch.Tensor) else torch.as_tensor(o)
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.contiguous().numpy()


def repro_tail(title: str, backend: str, variant: str, options: dict[str, Any], run_source: str) -> str:
    """The lines a program bug's repro.py adds after the program (``Model``, ``make_inputs``, ``NOT_COMPARED``):
    ``run_source`` defines ``run_compiled(ep, args) -> list of torch tensors`` (the frontend on the
    ExportedProgram, compile, run on the contiguous copies ``args``); the check compares with eager,
    float64 eager as the tie-breaker, exiting 1 while the bug is present."""
    return f'''

# ---- dlcfuzz: {title}
# {backend} ({variant}: {options!r}): torch.export -> the frontend -> compile -> run, against eager torch
# (float64 eager as the tie-breaker).  Exits 1 while the bug is present, 0 once it is gone.
import sys

import torch
import torch._dynamo.utils

OPTIONS = {options!r}
{run_source}

def check():
    torch.set_num_threads(1)
    with torch.no_grad():
        ref = [o.detach() for o in Model()(*make_inputs())]
        m64 = Model().double()
        ref64 = [o.detach() for o in m64(*[a.double() if a.dtype.is_floating_point else a for a in make_inputs()])]
    ep = torch.export.export(Model(), make_inputs())
    try:
        res = run_compiled(ep, [a.contiguous() for a in make_inputs()])
    except Exception as e:
        print(f"reproduced: {{type(e).__name__}}: {{e}}"[:600])
        return 1
    if len(res) != len(ref):
        print(f"reproduced: {{len(res)}} outputs, eager gives {{len(ref)}}")
        return 1
    for i, (a, b, c) in enumerate(zip(ref, res, ref64)):
        if i in NOT_COMPARED:
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            print(f"reproduced: output {{i}}: {{b.dtype}}{{tuple(b.shape)}}, eager {{a.dtype}}{{tuple(a.shape)}}")
            return 1
        tol = {{torch.float16: 1e-3, torch.bfloat16: 1e-2}}.get(a.dtype, 1e-4)
        if a.dtype.is_floating_point and not torch._dynamo.utils.same(a, b, c, tol=tol, equal_nan=True):
            gap = (a.double() - b.double()).abs().max().item()
            print(f"reproduced: output {{i}}: values differ, max |eager - compiled| = {{gap:.4g}}")
            return 1
        if not a.dtype.is_floating_point and not bool((a == b).all()) and not bool((b == c.to(b.dtype)).all()):
            print(f"reproduced: output {{i}}: {{int((a != b).sum())}} elements differ")
            return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(check())
'''


def repro_script(source: str, tail: str) -> str:
    """The program's source (without its own main) followed by ``tail`` (``repro_tail``)."""
    return source.split('\n\nif __name__ == "__main__":')[0] + tail
