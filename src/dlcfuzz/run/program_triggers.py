"""Trigger analysis of a reduced torch-program bug: is it a bug of a mechanism of torch.compile's own,
shared by every operator that goes through it, or of the operators the program calls?

A program's calls go through mechanisms beyond their values (``TorchOpSpec.mechanism``): an in-place
write is functionalized by AOTAutograd (made out of place, with the write copied back), and
``torch.cond`` is a higher-order operator traced branch by branch.  Each call has a plain spelling with
the same values (``TorchOpSpec.plain``: the write out of place, in the written tensor's dtype; the two
branches inline and a select).  The analysis spells every call of one mechanism plainly and runs the
reduced program again on the bug's variant, judged as the campaign judges it: when the bug is gone, the
mechanism is its *trigger*.  It costs one run per mechanism the program goes through, none for most.

The trigger names the root, whichever operators met it: functionalization gives every written operator
(``scatter_``, ``index_add_``, ``masked_fill_``) the same out-of-place replacement, so a stride lost in
it shows once for each of them; ``torch.cond`` checks its operands' layouts the same way whatever made
them.  A value bug's root is the backend, its kind and the layer that shows it (aot_eager or Inductor)
and the trigger; a crash's is the backend, the error's type and the head of its message (numbers
dropped) and the trigger, since one mechanism fails in several ways.  Without a trigger the root stays
the operators' (``run.torch_campaign.program_root``).
"""

from __future__ import annotations

from collections.abc import Callable

from dlcfuzz.gen.torch_program import mutated_inputs
from dlcfuzz.ir import Graph
from dlcfuzz.oracle.findings import CRASH, Finding
from dlcfuzz.oracle.triggers import message_head
from dlcfuzz.spec.torch import TORCH_REGISTRY

__all__ = ["analyze", "mechanisms", "root_name", "spelled_plainly_in", "triggers"]

BACKEND_NAMES = {"inductor-program": "torch.compile", "tvm-torch": "TVM's PyTorch frontend",
                 "openvino-torch": "OpenVINO's PyTorch frontend"}
_HEAD_CHARS = 60  # of a crash's message: what failed, before the values it failed on


def mechanisms(graph: Graph) -> list[str]:
    """The mechanisms the program's calls go through that have a plain spelling, in the order met."""
    out: list[str] = []
    for n in graph.nodes:
        spec = TORCH_REGISTRY.get(n.op)
        if spec is not None and spec.mechanism and spec.plain is not None and spec.mechanism not in out:
            out.append(spec.mechanism)
    return out


def spelled_plainly_in(graph: Graph, mechanism: str) -> Graph:
    """The program with every call of ``mechanism`` spelled plainly (``meta["plain"]``), and its inputs
    that some call still writes in place recomputed."""
    g = Graph.from_json(graph.to_json())
    plain = list(g.meta.get("plain", []))
    for n in g.nodes:
        spec = TORCH_REGISTRY.get(n.op)
        if spec is not None and spec.mechanism == mechanism and n.outputs and n.outputs[0] not in plain:
            plain.append(n.outputs[0])
    g.meta["plain"] = plain
    g.meta["mutated"] = mutated_inputs(g)
    return g


VANISHED, SHOWS, DECLINED = "vanished", "shows", "declined"


def analyze(graph: Graph, shows: Callable[[Graph], bool | None]) -> dict[str, str]:
    """Each mechanism the program goes through -> what its plain spelling did to the bug: VANISHED (the
    mechanism is a trigger), SHOWS, or DECLINED (eager torch or the compiler refused the program, which
    says nothing of the cause).  ``shows(program)``: whether the bug shows on that program, judged on the
    bug's variant (None: declined)."""
    out = {}
    for m in mechanisms(graph):
        got = shows(spelled_plainly_in(graph, m))
        out[m] = DECLINED if got is None else SHOWS if got else VANISHED
    return out


def triggers(results: dict[str, str]) -> list[str]:
    """The mechanisms whose plain spelling made the bug vanish."""
    return [m for m, r in results.items() if r == VANISHED]


def root_name(f: Finding, causes: list[str]) -> str:
    """The readable root of a bug whose triggers (``causes``) were found (see the module doc); "" without
    one."""
    if not causes:
        return ""
    who = BACKEND_NAMES.get(f.backend, f.backend)
    through = " and ".join(causes)
    if f.oracle == CRASH:
        return f"{who}: {f.error_type} through {through}: {message_head(f.message, _HEAD_CHARS)}"
    return f"{who}: {f.kind} mismatch through {through} ({f.details.get('layer', '')})"
