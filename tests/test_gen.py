from __future__ import annotations

from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.spec import REGISTRY
from tests.helpers import check_graph, ort_generator

ALL = list(REGISTRY.values())


def test_same_seed_same_bytes() -> None:
    a = ort_generator(ALL, op_range=(1, 30))
    b = ort_generator(ALL, op_range=(1, 30))
    for seed in range(20):
        assert to_bytes(a.generate(seed)) == to_bytes(b.generate(seed))
    assert to_bytes(a.generate(1)) != to_bytes(a.generate(2))


def test_op_count_in_range_and_valid() -> None:
    gen = ort_generator(ALL, op_range=(5, 12))
    for seed in range(30):
        g = gen.generate(seed)
        assert 5 <= len(g.nodes) <= 12
        check_graph(g, seed=seed)
    assert gen.stats.retried_insertions <= 0.01 * gen.stats.insertions


def test_picking_rate_controls_reuse() -> None:
    """Isra §4.4.4: a higher picking rate reuses more tensors, so graphs have fewer inputs."""
    def inputs_per_op(rate: float) -> float:
        gen = ort_generator(ALL, op_range=(40, 40), picking_rate=rate)
        graphs = [gen.generate(s) for s in range(20)]
        return sum(len(g.inputs) + len(g.initializers) for g in graphs) / sum(len(g.nodes) for g in graphs)

    assert inputs_per_op(0.97) < inputs_per_op(0.5) < inputs_per_op(0.0)


def test_runtime_inputs_and_initializer_rate() -> None:
    """Graphs have runtime inputs; new weight tensors become initializers at the configured rate."""
    from dlcfuzz.spec.dsl import In, OpSpec

    add_weight = OpSpec("Add", "test", [In("A", rank=(1, 3)), In("B", shape=lambda c: c.s, weight=True)],
                        lambda c: [c.x])
    for rate in (0.0, 0.5, 1.0):
        gen = ort_generator([add_weight], op_range=(20, 20), init_rate=rate, picking_rate=0.0)
        graphs = [gen.generate(s) for s in range(10)]
        consts = sum(len(g.initializers) for g in graphs)
        runtime = sum(len(g.inputs) for g in graphs)
        assert runtime >= 200  # every first input is a new runtime input at picking rate 0
        share = consts / 200  # one new weight per node
        assert abs(share - rate) < 0.1, (rate, share)
        check_graph(graphs[0])


def test_operator_subset_and_dtypes_respected() -> None:
    gen = ort_generator([REGISTRY["Add"], REGISTRY["Relu"]], op_range=(10, 20), dtypes=("float32",))
    for seed in range(10):
        g = gen.generate(seed)
        assert {n.op for n in g.nodes} <= {"Add", "Relu"}
        assert {v.type.dtype for v in g.values.values()} == {"float32"}


def test_target_onnx_covers_the_full_spec_and_stays_valid() -> None:
    """Without ORT's narrowing, graphs use dtypes/forms ORT lacks, and remain valid ONNX."""
    from dlcfuzz.gen.isra import IsraGenerator
    from dlcfuzz.solve import GenOptions

    gen = IsraGenerator(ALL, GenOptions(target="onnx"), (10, 30))
    dtypes = set()
    for seed in range(60):
        g = gen.generate(seed)
        check_graph(g, run=False)
        dtypes |= {v.type.dtype for v in g.values.values()}
    assert {"float16", "uint16", "uint32"} <= dtypes
    assert gen.stats.retried_insertions <= 0.01 * gen.stats.insertions


def test_opset_mix_draws_each_graph_opset_from_its_seed_and_stays_valid() -> None:
    """Compilers convert each operator version with its own code: a campaign over opsets 13-23 makes
    graphs at each of them, each valid at its own opset, the same graph for the same seed."""
    from dlcfuzz.gen.opsets import OpsetMix, parse_opsets

    opsets = parse_opsets("13-15,18,21-23", 13, 23)
    assert opsets == (13, 14, 15, 18, 21, 22, 23)
    mix = OpsetMix(lambda v: ort_generator(ALL, op_range=(3, 6), opset=v), opsets)
    seen = set()
    for seed in range(60):
        g = mix.generate(seed)
        seen.add(g.opset)
        if seed < 12:
            check_graph(g, run=g.opset < 22, seed=seed)  # ORT lacks a few opset-22 kernels (RoiAlign-22)
        assert to_bytes(g) == to_bytes(mix.generate(seed))
    assert seen == set(opsets)
    # Gelu (opset 20) is in the mix; every opset's generator counts into one Stats
    assert "Gelu" in {s.op for s in mix.specs} and "Gelu" not in mix.unavailable
    assert all(g.stats is mix.stats for g in mix.gens.values())


def test_parse_opsets_refuses_what_is_out_of_range() -> None:
    import pytest

    from dlcfuzz.gen.opsets import parse_opsets

    assert parse_opsets("17", 13, 23) == (17,)
    for bad in ("9", "13-30", "x", "21-17"):
        with pytest.raises(ValueError):
            parse_opsets(bad, 13, 23)
