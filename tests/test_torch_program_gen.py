"""What the torch-program generator writes beyond plain calls: data-dependent sizes (nonzero, unique,
unique_consecutive, a scalar read with .item() feeding a later call), dims of length 0 and 1, and
torch.cond.  Each feature shows in generated programs, which eager torch runs (outputs of the types
the specs computed) and Inductor compiles (real torch.compile, fullgraph, on a few tiny programs) to the
same values."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from dlcfuzz.export.torch_program import build, to_program_source  # noqa: E402
from dlcfuzz.gen.torch_program import ProgramOptions, TorchProgramGenerator  # noqa: E402
from dlcfuzz.ir import Graph  # noqa: E402
from dlcfuzz.spec.torch import TORCH_REGISTRY  # noqa: E402

PLAIN = ProgramOptions(layout_rate=0.5, backward_rate=0.0, dynamic_rate=0.0)
TOL = {torch.float16: 1e-2, torch.bfloat16: 5e-2}


def _gen(ops: tuple[str, ...], op_range: tuple[int, int] = (2, 4), options: ProgramOptions = PLAIN
         ) -> TorchProgramGenerator:
    return TorchProgramGenerator([TORCH_REGISTRY[f"torch.{o}"] for o in ops], op_range, options=options)


def _eager(g: Graph) -> list:
    """Runs the program eagerly; every output has the shape and dtype its spec computed."""
    ns = build(to_program_source(g))
    with torch.no_grad():
        outs = ns["Model"]()(*ns["make_inputs"]())
    for o, name in zip(outs, g.outputs, strict=True):
        t = g.values[name].type
        assert (tuple(o.shape), str(o.dtype)) == (t.shape, f"torch.{t.dtype}"), (name, g.nodes)
    return list(outs)


def _inductor_agrees(g: Graph) -> None:
    """The program compiled by Inductor (fullgraph) gives eager's outputs."""
    from dlcfuzz.backends.torch_program import configure

    configure()  # data-dependent shapes and scalars captured, as the campaign's worker sets them
    torch._dynamo.reset()
    ns = build(to_program_source(g))
    model = ns["Model"]()
    with torch.no_grad():
        ref = model(*ns["make_inputs"]())
        got = torch.compile(model, backend="inductor", fullgraph=True)(*ns["make_inputs"]())
    assert len(ref) == len(got)
    for r, o in zip(ref, got, strict=True):
        tol = TOL.get(r.dtype, 1e-4)
        torch.testing.assert_close(o, r, rtol=tol, atol=tol, equal_nan=True, check_stride=False)


def _ops(g: Graph) -> set[str]:
    return {n.op for n in g.nodes}


# ---------------------------------------------------------------------------------------------
# data-dependent sizes
# ---------------------------------------------------------------------------------------------
DATA_DEPENDENT = ("nonzero", "unique", "unique_consecutive", "item")


def test_data_dependent_sizes_appear_and_eager_runs_them():
    gen = _gen((*DATA_DEPENDENT, "add", "sin"), (3, 6))
    seen: set[str] = set()
    pinned = variants = 0
    for seed in range(30):
        g = gen.generate(seed)
        _eager(g)
        seen |= _ops(g)
        for n in g.nodes:
            if n.op in ("torch.nonzero", "torch.unique", "torch.unique_consecutive"):
                pinned += g.values[n.inputs[0]].pinned  # drawn data taken at run time
                variants += bool(n.attrs.get("as_tuple") or n.attrs.get("return_inverse")
                                 or n.attrs.get("return_counts"))
    assert {f"torch.{o}" for o in DATA_DEPENDENT} <= seen
    assert pinned > 0 and variants > 0


def test_data_dependent_sizes_compile_under_inductor():
    gen = _gen(DATA_DEPENDENT, (4, 4))
    g = next(g for g in map(gen.generate, range(50))
             if {"torch.nonzero", "torch.unique", "torch.item"} <= _ops(g))
    _inductor_agrees(g)


def test_item_feeds_a_later_call():
    gen = _gen(("item", "relu"), (2, 3))
    sources = [to_program_source(gen.generate(seed)) for seed in range(12)]
    assert any(".item())" in s or ".item()," in s or ".item()\n" in s or ".item()  #" in s for s in sources)
    assert any("clamp(" in s and ".item()" in s for s in sources)


# ---------------------------------------------------------------------------------------------
# dims of length 0 and 1
# ---------------------------------------------------------------------------------------------
def _empty_inputs(g: Graph) -> bool:
    return any(0 in v.type.shape for v in g.inputs if not v.pinned)


def test_programs_have_empty_and_size_one_dims_that_eager_takes():
    gen = TorchProgramGenerator(op_range=(5, 10), options=PLAIN)
    empty = one = ran = 0
    for seed in range(80):
        g = gen.generate(seed)
        empty += _empty_inputs(g)
        one += any(1 in v.type.shape for v in g.inputs if not v.pinned)
        try:
            _eager(g)
        except RuntimeError:
            continue  # eager's own refusal: the generator's decline
        ran += 1
    assert empty >= 4 and one >= 40
    assert ran >= 76  # >= 95% (benchmarks/torch_program_validity.py measures it on 300)


def test_empty_tensors_flow_through_calls_and_compile():
    gen = _gen(("add", "mul", "sum", "transpose", "softmax", "cumsum", "relu_"), (3, 5),
               ProgramOptions(layout_rate=0.5, backward_rate=0.0, dynamic_rate=0.0, empty_rate=0.6))
    graphs = [gen.generate(seed) for seed in range(10)]
    with_empty = [g for g in graphs if _empty_inputs(g)]
    assert len(with_empty) >= 5
    for g in with_empty:
        _eager(g)
    # an empty tensor read by a later call (an earlier call's empty output)
    assert any(g.values[n.inputs[0]].kind == "node" and 0 in g.values[n.inputs[0]].type.shape
               for g in with_empty for n in g.nodes)
    _inductor_agrees(with_empty[0])


# ---------------------------------------------------------------------------------------------
# torch.cond
# ---------------------------------------------------------------------------------------------
def _conds(g: Graph) -> list:
    return [n for n in g.nodes if n.op == "torch.cond"]


def test_cond_branches_are_calls_of_the_operands_type():
    gen = _gen(("cond", "sin", "mul", "cumsum", "softmax"), (2, 4))
    found = 0
    for seed in range(8):
        g = gen.generate(seed)
        for n in _conds(g):
            found += 1
            x = g.values[n.inputs[1]].type
            assert g.values[n.outputs[0]].type == x
            assert len(n.attrs["branches"]) == 2 and all(1 <= len(b) <= 3 for b in n.attrs["branches"])
            assert {c["op"] for b in n.attrs["branches"] for c in b} <= {"torch.sin", "torch.mul", "torch.cumsum",
                                                                        "torch.softmax"}
        src = to_program_source(g)
        if _conds(g):
            assert "torch.cond(" in src and "_true(" in src and "_false(" in src
        assert to_program_source(Graph.from_json(g.to_json())).split("def make_inputs")[0] == \
            src.split("def make_inputs")[0]  # the branches survive the worker's JSON
        _eager(g)
    assert found >= 3


def test_cond_alone_takes_branches_from_the_registry_and_compiles():
    gen = _gen(("cond",), (1, 1))
    g = gen.generate(0)
    assert _conds(g)
    _eager(g)
    _inductor_agrees(g)
