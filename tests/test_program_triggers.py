"""The trigger analysis of torch-program bugs (run/program_triggers.py): a call spelled without its
mechanism (an in-place write out of place, torch.cond as both branches and a select) computes the same
values; and on real torch.compile, bugs that vanish when their programs' writes are out of place (or
their cond is inline) get one root whichever operators they call, while a bug of one lowering keeps its
operators' root.

The programs in tests/data/programs are reduced programs of a 30-minute Inductor campaign whose bugs were
checked by hand against eager torch (the expected trigger comes from that check, not from this code):
- masked_fill_transposed: ``x.t().masked_fill_(m, -1.)`` then celu: compiled strides (4, 1) where eager's
  are (1, 2), also under aot_eager (functionalization's out-of-place masked_fill is contiguous);
- scatter_of_atan2: ``atan2(a, b).scatter_(0, i, s)``: the same stride loss through scatter_;
- cond_of_channels_last_sum: a channels_last intermediate passed to torch.cond fails the branch's
  assert_size_stride at compile time;
- batch_norm_permuted: Inductor's batch_norm keeps a permuted input's layout (eager's is contiguous): no
  mechanism, so it keeps its operators' root.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

from dlcfuzz.backends.base import Test  # noqa: E402
from dlcfuzz.export.torch_program import build, to_program_source  # noqa: E402
from dlcfuzz.ir import Graph  # noqa: E402
from dlcfuzz.run import program_triggers as pt  # noqa: E402
from dlcfuzz.run.torch_campaign import BACKEND, judge_program, program_root, program_triggers  # noqa: E402
from dlcfuzz.run.worker import PhaseLimits, WorkerPool  # noqa: E402

DATA = Path(__file__).parent / "data" / "programs"


def _program(name: str) -> Graph:
    return Graph.from_json((DATA / f"{name}.json").read_text())


def _eager(graph: Graph) -> tuple[list, list]:
    """The program's outputs and its inputs after the run, in eager torch."""
    ns = build(to_program_source(graph))
    inputs = ns["make_inputs"]()
    with torch.no_grad():
        outs = ns["Model"]()(*inputs)
    return list(outs), list(inputs)


@pytest.mark.parametrize("name, mechanism, plain_call, original_call", [
    ("masked_fill_transposed", "an in-place write", ".masked_fill(", ".masked_fill_("),
    ("scatter_of_atan2", "an in-place write", ".scatter(", ".scatter_("),
    ("cond_of_channels_last_sum", "torch.cond", "torch.where(", "torch.cond("),
])
def test_a_call_spelled_plainly_computes_the_same_values_without_its_mechanism(name, mechanism, plain_call,
                                                                              original_call):
    g = _program(name)
    assert pt.mechanisms(g) == [mechanism]
    plain = pt.spelled_plainly_in(g, mechanism)
    source = to_program_source(plain)
    assert plain_call in source and original_call not in source
    assert plain.meta["mutated"] == []  # nothing written in place: no input to compare after the run
    (got, _), (want, _) = _eager(plain), _eager(g)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_an_in_place_write_to_an_input_out_of_place_leaves_the_input_as_it_was():
    g = _program("mul_of_input_backward")  # v16.mul_(v1): writes the input v16
    assert g.meta["mutated"] == ["v16"]
    (_, after), (_, before) = _eager(pt.spelled_plainly_in(g, "an in-place write")), _eager(g)
    fresh = build(to_program_source(g))["make_inputs"]()
    torch.testing.assert_close(after[1], fresh[1], rtol=0, atol=0)  # plain: the input is untouched
    torch.testing.assert_close(before[1], fresh[1] * fresh[0], rtol=0, atol=0)  # in place: the write reached it


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(PhaseLimits())
    yield p
    p.close()


def _finding(pool, graph: Graph, variant: str):
    got = pool.run(BACKEND, Test(b"", graph.to_json(), {}), [variant])
    found = judge_program(graph, got, BACKEND).findings
    assert found, f"torch.compile no longer shows the hand-checked bug of this program under {variant}"
    return found[0]


def test_stride_bugs_through_in_place_writes_of_different_operators_have_one_root(pool):
    """masked_fill_ and scatter_ lose a stride the same way (functionalization's out-of-place op): one
    root, named by the write; batch_norm's own stride bug keeps the root of its operators."""
    roots = []
    for name in ("masked_fill_transposed", "scatter_of_atan2"):
        g = _program(name)
        f = _finding(pool, g, "inductor")
        assert f.kind == "stride"
        analysis = program_triggers(pool, f, g)
        assert analysis.trigger == ["an in-place write"], analysis.tried
        roots.append(program_root(f, g, analysis))
    assert roots[0] == roots[1] and "in-place write" in roots[0]
    g = _program("batch_norm_permuted")
    f = _finding(pool, g, "inductor")
    analysis = program_triggers(pool, f, g)
    assert analysis.trigger == [] and analysis.runs == 0  # batch_norm goes through no mechanism
    assert program_root(f, g, analysis).startswith("program:")


def test_a_cond_operand_layout_crash_is_rooted_in_torch_cond(pool):
    g = _program("cond_of_channels_last_sum")
    f = _finding(pool, g, "inductor")
    assert f.oracle == "crash"
    analysis = program_triggers(pool, f, g)
    assert analysis.trigger == ["torch.cond"], analysis.tried
    root = program_root(f, g, analysis)
    assert "torch.cond" in root and f.error_type in root


def test_retriage_roots_a_recorded_program_bug_by_its_mechanism_else_keeps_its_recorded_root(pool, tmp_path):
    """``dlcfuzz retriage`` on program bundles: the smallest program kept in reduced_program.json is analyzed;
    an older bundle without one keeps the root it was recorded under when no mechanism explains it."""
    from dlcfuzz.run.torch_campaign import retriage_program

    g = _program("masked_fill_transposed")
    f = _finding(pool, g, "inductor")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "reduced_program.json").write_text(g.to_json())
    root, analysis = retriage_program(pool, tmp_path / "a", f, g, "program:recorded")
    assert analysis.trigger == ["an in-place write"] and "in-place write" in root
    g = _program("batch_norm_permuted")
    f = _finding(pool, g, "inductor")
    (tmp_path / "b").mkdir()
    root, analysis = retriage_program(pool, tmp_path / "b", f, g, "program:recorded")
    assert analysis.trigger == [] and root == "program:recorded"
