"""What user code adds to torch (custom operators, torch.optim's foreach steps) and loops (while_loop, scan)
as torch program calls (``spec/torch/library.py``, ``spec/torch/nn.py``), compiled by real Inductor."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dlcfuzz.backends.base import Test, Variant  # noqa: E402
from dlcfuzz.backends.torch_program import VARIANTS, TorchProgramBackend  # noqa: E402
from dlcfuzz.export.torch_program import build, to_program_source  # noqa: E402
from dlcfuzz.gen.torch_program import ProgramOptions, TorchProgramGenerator  # noqa: E402
from dlcfuzz.spec.torch import TORCH_REGISTRY  # noqa: E402

NEW = ("torch.custom_scale_tanh", "torch.custom_row_sum", "torch.custom_add_into_", "torch.foreach_step",
       "torch.while_loop", "torch.scan")


def _program(op: str, seed: int = 0, backward: bool = False, **attrs):
    """A one-call program of ``op`` (the first seed from ``seed`` whose call has ``attrs``)."""
    options = ProgramOptions(layout_rate=0.5, backward_rate=1.0 if backward else 0.0, dynamic_rate=0.0)
    gen = TorchProgramGenerator([TORCH_REGISTRY[op]], (1, 1), options=options)
    for s in range(seed, seed + 200):
        g = gen.generate(s)
        if all(g.nodes[0].attrs.get(k) == v for k, v in attrs.items()):
            return g
    raise AssertionError(f"no {op} call with {attrs}")


def _compile(g, variant: str):
    b = TorchProgramBackend()
    b.artifact = lambda *a: None
    ran = b.compile(b.load(Test(b"", g.to_json(), {})), Variant(variant, dict(VARIANTS[variant])))
    assert ran.divergence is None, (variant, ran.divergence)


@pytest.mark.parametrize("op", NEW)
def test_each_call_compiles_and_agrees_with_eager(op):
    """Forward on real Inductor, and backward where the call carries gradients (the custom operators'
    registered autograd formulas, foreach's own)."""
    _compile(_program(op), "inductor")
    if TORCH_REGISTRY[op].grad:
        g = _program(op, backward=True)
        assert g.meta["backward"]
        _compile(g, "inductor-backward")


def _code(g) -> str:
    from torch._inductor.utils import run_and_get_code

    ns = build(to_program_source(g))
    torch._dynamo.reset()
    with torch.no_grad():
        _, code = run_and_get_code(torch.compile(ns["Model"](), fullgraph=True), *ns["make_inputs"]())
    return "\n".join(code)


def test_a_custom_operator_stays_an_opaque_call_in_the_compiled_code():
    """Inductor cannot see into a custom operator: it calls it (a fallback kernel), where the plain spelling
    of the same values is generated C++."""
    code = _code(_program("torch.custom_scale_tanh"))
    assert "torch.ops.dlcfuzz.scale_tanh.default(" in code, code[-3000:]
    g = _program("torch.custom_scale_tanh")
    g.meta["plain"] = list(g.nodes[0].outputs)
    assert "dlcfuzz.scale_tanh" not in _code(g)


def test_while_loop_and_scan_compile_to_a_loop_in_the_wrapper():
    for op in ("torch.while_loop", "torch.scan"):
        code = _code(_program(op))
        assert "while should_loop:" in code and "subgraph: while_loop_body_graph_0" in code, (op, code[-3000:])


def test_the_mutating_calls_write_the_programs_inputs_as_their_definition_says():
    """add_into_ writes x + alpha * y into its first operand; an in-place foreach SGD step writes
    p - 0.1 * g into both parameters.  Computed here from the inputs, not by the code under test."""
    g = _program("torch.custom_add_into_")
    node = g.nodes[0]
    assert g.meta["mutated"] == [node.inputs[0]]
    ns = build(to_program_source(g))
    args = ns["make_inputs"]()
    names = [v.name for v in g.inputs]
    x = args[names.index(node.inputs[0])].detach().double().clone()
    y = args[names.index(node.inputs[1])].detach().double()
    ns["Model"]()(*args)
    got = args[names.index(node.inputs[0])].double()
    np.testing.assert_allclose(got.numpy(), (x + node.attrs["alpha"] * y).numpy(), rtol=1e-2, atol=1e-2)

    g = _program("torch.foreach_step", rule="sgd", inplace=True)
    node = g.nodes[0]
    names = [v.name for v in g.inputs]
    assert set(g.meta["mutated"]) == {node.inputs[0], node.inputs[1]}
    ns = build(to_program_source(g))
    args = ns["make_inputs"]()
    before = {n: args[names.index(n)].detach().double().clone() for n in node.inputs}
    ns["Model"]()(*args)
    for p, grad in ((node.inputs[0], node.inputs[2]), (node.inputs[1], node.inputs[3])):
        want = before[p] - 0.1 * before[grad]
        np.testing.assert_allclose(args[names.index(p)].double().numpy(), want.numpy(), rtol=1e-2, atol=1e-2)
    _compile(g, "inductor")  # and compiled, the inputs written alike (they are compared after the run)


@pytest.mark.parametrize("op", [o for o in NEW if TORCH_REGISTRY[o].plain is not None])
def test_the_plain_spelling_gives_the_calls_values(op):
    """A mechanism's plain spelling (what the trigger analysis swaps in) computes the same values."""
    g = _program(op)
    ns = build(to_program_source(g))
    with torch.no_grad():
        want = ns["Model"]()(*ns["make_inputs"]())
    g.meta["plain"] = list(g.nodes[0].outputs)
    plain_source = to_program_source(g)
    marks = {"torch.while_loop": "while_loop(", "torch.foreach_step": "torch._foreach_"}
    mechanism = marks.get(op, "torch.ops.dlcfuzz")
    forward = plain_source.split("def forward")[1].split("return")[0]
    assert mechanism not in forward, forward
    ns = build(plain_source)
    with torch.no_grad():
        got = ns["Model"]()(*ns["make_inputs"]())
    for w, o in zip(want[:1], got[:1], strict=True):
        np.testing.assert_allclose(o.double().numpy(), w.double().numpy(), rtol=1e-2, atol=1e-2)
