"""Constant-like inputs taken at run time (``GenOptions.runtime_consts``: pinned runtime inputs), with the real
compilers on tiny graphs: generation, input synthesis, JSON, intervals, the exporters, TVM's declines."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test
from dlcfuzz.backends.ort import full_profile
from dlcfuzz.cli import UsageError, build_parser
from dlcfuzz.cli.options import gen_options
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen import make_generator
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, GraphError, Node, TensorType, Value
from dlcfuzz.oracle.compare import compare
from dlcfuzz.oracle.unsupported import is_unsupported
from dlcfuzz.run.profile import ACCEPTED, DECLINED, SupportProfile, find_profile
from dlcfuzz.run.profile import test_status as status_of
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.solve import GenOptions
from dlcfuzz.solve.intervals import analyze
from dlcfuzz.spec import REGISTRY
from dlcfuzz.spec.dsl import Const
from dlcfuzz.values import synthesize
from tests.helpers import check_graph, ort_generator

HAS_TVM = importlib.util.find_spec("tvm") is not None
SHAPE_OPS = ["Slice", "Expand", "Reshape", "Tile", "Unsqueeze", "Squeeze", "Pad", "TopK"]


def const_slot_values(g: Graph) -> list[Value]:
    """The values the graph's calls read at their specs' ``Const`` slots."""
    out = []
    for n in g.nodes:
        spec = REGISTRY[n.op]
        out += [g.values[x] for k, x in enumerate(n.inputs)
                if x and k < len(spec.inputs) and isinstance(spec.inputs[k], Const)]
    return out


def one_node(op: str, x: TensorType, operands: list, outs: list[TensorType], attrs: dict | None = None,
             kind: str = INPUT_KIND) -> Graph:
    """``op(x, *operands)``, each operand (an array, or None for an omitted one) pinned at run time
    (``kind=INPUT_KIND``) or an initializer (``CONST_KIND``)."""
    g = Graph(opset=17)
    g.add_value(Value("x", x, INPUT_KIND))
    names = ["x"]
    for k, a in enumerate(operands):
        if a is None:
            names.append("")
            continue
        g.add_value(Value(f"p{k}", TensorType(a.shape, a.dtype.name), kind, a))
        names.append(f"p{k}")
    for k, t in enumerate(outs):
        g.add_value(Value(f"y{k}", t, NODE_KIND))
    g.add_node(Node(op, names, [f"y{k}" for k in range(len(outs))], attrs or {}, "n0"))
    g.outputs = [f"y{k}" for k in range(len(outs))]
    g.validate()
    return g


def i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


F32 = "float32"
# a shape-like operand taken at run time: each takes a dynamic-shape path of the compilers
CASES = {
    "Slice": lambda: one_node("Slice", TensorType((4, 5, 3), F32), [i64(1, 0), i64(3, -1), i64(0, 2), i64(1, 2)],
                              [TensorType((2, 5, 1), F32)]),
    "Expand": lambda: one_node("Expand", TensorType((3, 1), F32), [i64(2, 3, 4)], [TensorType((2, 3, 4), F32)]),
    "Reshape": lambda: one_node("Reshape", TensorType((2, 3, 4), F32), [i64(4, 0, -1)], [TensorType((4, 3, 2), F32)]),
}
# TVM 0.27 fails on a runtime Reshape shape ("TypeError: Reshape requires the input new shape to be Shape.
# However, the given one is relax.TensorType"): a bug of its ONNX frontend that the fuzzer is meant to meet
TAKES = {"tvm": ("Slice", "Expand"), "openvino": tuple(CASES), "inductor": tuple(CASES), "tvm-relax": tuple(CASES)}


def feeds_of(g: Graph) -> dict[str, np.ndarray]:
    return synthesize(g, np.random.default_rng(0))


def ort_outputs(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = load_backend("ort")
    test = Test(to_bytes(g), g.to_json(), feeds)
    return ort.run(ort.compile(ort.load(test), ort.variants()[0]), feeds)


# -- generation ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_the_rate_decides_the_form_and_models_stay_valid(rate: float) -> None:
    """At rate 0 every constant-like input is an initializer (as before the option); at 1 each is a
    runtime input holding the value the spec chose, and ONNX Runtime (fed that value by model_error)
    runs the model with exactly the types the specs inferred."""
    gen = ort_generator([REGISTRY[o] for o in SHAPE_OPS], op_range=(3, 3), runtime_consts=rate)
    seen = 0
    for seed in range(12):
        g = gen.generate(seed)
        consts = const_slot_values(g)
        seen += len(consts)
        assert all(v.kind == (INPUT_KIND if rate else CONST_KIND) and v.data is not None for v in consts)
        assert set(g.pinned) == ({v.name for v in consts} if rate else set())
        check_graph(g)
    assert seen >= 12


def test_the_default_rate_mixes_both_forms() -> None:
    assert GenOptions().runtime_consts == 0.25
    gen = ort_generator([REGISTRY[o] for o in SHAPE_OPS], op_range=(5, 5))
    consts = [v for seed in range(40) for v in const_slot_values(gen.generate(seed))]
    share = sum(v.pinned for v in consts) / len(consts)
    assert len(consts) > 150 and 0.15 < share < 0.35, (len(consts), share)


def test_the_command_line_sets_the_rate() -> None:
    parse = build_parser().parse_args
    assert gen_options(parse(["gen", "--out", "x", "--runtime-consts", "0.5"])).runtime_consts == 0.5
    assert gen_options(parse(["gen", "--out", "x"])).runtime_consts == 0.25
    with pytest.raises(UsageError):
        gen_options(parse(["gen", "--out", "x", "--runtime-consts", "1.5"]))


# -- input synthesis, JSON, intervals -------------------------------------------------------------------
def test_synthesis_feeds_pinned_values_on_every_attempt() -> None:
    gen = ort_generator([REGISTRY["Reshape"], REGISTRY["Slice"], REGISTRY["Add"]], op_range=(4, 4),
                        runtime_consts=1.0, dtypes=("float32",), picking_rate=0.5)
    def drawn_after_pinned(g: Graph) -> bool:
        kinds = [v.pinned for v in g.inputs]
        return True in kinds and False in kinds[kinds.index(True):]

    g = next(g for seed in range(50) if drawn_after_pinned(g := gen.generate(seed)) and len(g.pinned) >= 2)
    same = Graph.from_json(g.to_json())  # the same graph with its pinned inputs as initializers
    for name in g.pinned:
        same.values[name].kind = CONST_KIND
    for attempt in range(6):
        feeds = synthesize(g, np.random.default_rng([1, attempt]), attempt)
        assert set(feeds) == {v.name for v in g.inputs}
        for name, data in g.pinned.items():
            assert feeds[name].dtype == data.dtype
            np.testing.assert_array_equal(feeds[name], data)
        # no draw is spent on a pinned input: the other inputs get what they would get without it
        others = synthesize(same, np.random.default_rng([1, attempt]), attempt)
        for name, a in others.items():
            np.testing.assert_array_equal(feeds[name], a)
    name, data = max(g.pinned.items(), key=lambda kv: kv[1].size)
    kept = data.copy()
    synthesize(g, np.random.default_rng(0))[name][...] = 7  # a fed value is a copy: the graph keeps its own
    np.testing.assert_array_equal(g.values[name].data, kept)


def test_json_round_trip_keeps_pinned_inputs() -> None:
    g = CASES["Slice"]()
    h = Graph.from_json(g.to_json())
    assert h == g and [v.name for v in h.inputs] == ["x", "p0", "p1", "p2", "p3"]
    assert set(h.pinned) == {"p0", "p1", "p2", "p3"} and not h.initializers
    for name, data in g.pinned.items():
        v = h.values[name]
        assert v.kind == INPUT_KIND and v.pinned and v.data.dtype == data.dtype
        np.testing.assert_array_equal(v.data, data)
    h.validate()


def test_validate_rejects_pinned_data_of_another_type() -> None:
    g = CASES["Reshape"]()
    g.values["p0"].data = g.values["p0"].data.astype(np.int32)
    with pytest.raises(GraphError, match="p0"):
        g.validate()


def test_intervals_take_a_pinned_input_exactly() -> None:
    """Clip reads its bounds' values: pinned ones are their data, not the default runtime range."""
    lo, hi = np.array(0.5, np.float32), np.array(1.25, np.float32)
    g = one_node("Clip", TensorType((3,), F32), [lo, hi], [TensorType((3,), F32)])
    ivs = analyze(g)
    assert ivs["p0"] == (0.5, 0.5) and ivs["p1"] == (1.25, 1.25)
    assert ivs["y0"][0] >= 0.5 and ivs["y0"][1] <= 1.25


# -- exporters and compilers ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend,case", [(b, c) for b, cases in TAKES.items() for c in cases])
def test_compilers_take_a_runtime_shape_operand_and_agree_with_ort(backend: str, case: str) -> None:
    """The ONNX model takes the operand as a graph input (TVM's and OpenVINO's frontends see it at run
    time); the torch and Relax models bake its value in.  Every variant gives ORT's outputs, except where
    it declines by a rule (OpenVINO's dynamic variant makes the operand's length, hence the output rank,
    dynamic: "CPU plug-in doesn't support Reshape operation with dynamic rank")."""
    be = load_backend(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    g = CASES[case]()
    assert {v.name for v in g.inputs} == {"x", *g.pinned} and not g.initializers
    feeds = feeds_of(g)
    expected = ort_outputs(g, feeds)
    imported = be.load(Test(to_bytes(g), g.to_json(), feeds))
    ran = 0
    for v in be.variants():
        if v.options.get("device", "cpu") != "cpu":
            continue
        try:
            got = be.run(be.compile(imported, v), feeds)
        except Exception as e:
            assert is_unsupported(backend, "compile", type(e).__name__, str(e)), (v.name, e)
            continue
        assert compare(expected, got) is None, (v.name, compare(expected, got))
        ran += 1
    assert ran >= 1


def test_tvm_expand_with_a_shorter_runtime_shape_is_a_known_tvm_bug() -> None:
    """Why the cases above keep to shapes TVM handles: its dynamic Expand path does not right-align a
    target shape shorter than the input (ONNX's bidirectional broadcast), a TVM bug the fuzzer finds."""
    if not HAS_TVM:
        pytest.skip("tvm is not installed")
    g = one_node("Expand", TensorType((2, 3, 1), F32), [i64(1, 4)], [TensorType((2, 3, 4), F32)])
    check_graph(g)  # a valid model: ORT runs it
    be = load_backend("tvm")
    with pytest.raises(Exception, match="broadcast_to expects the input shape to have the number of ndim"):
        be.load(Test(to_bytes(g), g.to_json(), feeds_of(g)))


def test_inductor_repro_bakes_pinned_inputs_from_its_inputs(tmp_path: Path) -> None:
    """The repro script rebuilds the torch model from the ONNX file, where the pinned operand is a graph
    input: it takes the value from the inputs it is given, as the fuzzer's model took it from the graph."""
    be = load_backend("inductor")
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    g = CASES["Reshape"]()
    feeds = feeds_of(g)
    variant = next(v for v in be.variants() if not v.options.get("backend"))  # eager: no compile needed
    ours = be.run(be.compile(be.load(Test(to_bytes(g), g.to_json(), feeds)), variant), feeds)
    (tmp_path / "model.onnx").write_bytes(to_bytes(g))
    namespace: dict = {}
    exec(compile(be.repro_source(variant), "repro", "exec"), namespace)
    theirs = namespace["run_model"](str(tmp_path / "model.onnx"), feeds)
    assert len(theirs) == len(ours) == 1
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[0], ort_outputs(g, feeds)[0])


# -- TVM's declines of runtime operands: classified, learned, and avoided by targeted generation --------------
def topk(kind: str) -> Graph:
    return one_node("TopK", TensorType((2, 3), F32), [i64(2)], [TensorType((2, 2), F32), TensorType((2, 2), "int64")],
                    {"axis": 1}, kind)


def split(kind: str) -> Graph:
    return one_node("Split", TensorType((4, 2), F32), [i64(1, 3)], [TensorType((1, 2), F32), TensorType((3, 2), F32)],
                    {"axis": 0}, kind)


@pytest.mark.skipif(not HAS_TVM, reason="tvm is not installed")
def test_tvm_declines_runtime_operands_and_targeted_generation_keeps_them_constant(tmp_path: Path) -> None:
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        variants = [name for name, _ in pool.describe("tvm")[1]]
        version = pool.describe("tvm")[0]

        def outcomes(g: Graph):
            return pool.run("tvm", Test(to_bytes(g), g.to_json(), feeds_of(g)), variants)

        runs = {(name, kind): outcomes(make(kind)) for name, make in (("topk", topk), ("split", split))
                for kind in (INPUT_KIND, CONST_KIND)}
    finally:
        pool.close()
    # "TopK k must be a constant", "Dynamic Split not yet supported": the frontend's own declines
    for name, wording in (("topk", "must be a constant"), ("split", "Dynamic Split not yet supported")):
        o = next(iter(runs[(name, INPUT_KIND)].values()))
        assert o.phase == "import" and wording in o.message, o.message
        assert status_of("tvm", runs[(name, INPUT_KIND)]) == DECLINED
        assert status_of("tvm", runs[(name, CONST_KIND)]) == ACCEPTED

    # the profile learns that the runtime form is what TVM declines, not the operator
    profile = SupportProfile("tvm", version)
    profile.learn(topk(CONST_KIND), runs[("topk", CONST_KIND)])
    profile.learn(topk(INPUT_KIND), runs[("topk", INPUT_KIND)])
    assert profile.declined_keys("TopK") == ["in1=runtime"]
    assert profile.admits_op("TopK")
    for kind, admitted in ((CONST_KIND, True), (INPUT_KIND, False)):
        g = topk(kind)
        assert profile.admits(g.nodes[0], g.values) == admitted

    # generated for TVM with every constant-like input at run time: TopK still comes, with a constant K
    # a generator writes only what was probed: the packaged profile's keys (TopK's dtypes, ranks ...) and these
    admit = (find_profile("tvm", profile.version) or SupportProfile("tvm", profile.version)).merged(profile)
    gen = make_generator("isra", [REGISTRY["TopK"]], GenOptions(runtime_consts=1.0), (1, 1),
                         full_profile(17, ("TopK",)), admit=admit)
    for seed in range(10):
        g = gen.generate(seed)
        [node] = g.nodes
        assert node.op == "TopK" and g.values[node.inputs[1]].kind == CONST_KIND
        assert admit.admits_graph(g) and not profile.declines_graph(g)


def test_coverage_guidance_tells_the_runtime_form_from_the_constant_one() -> None:
    """GenCoG's vertex identity counts small integer constants as attributes, pinned runtime ones too,
    and a value taken at run time is another vertex than the same constant: coverage-guided generation
    seeks both forms, and each value in both."""
    from dlcfuzz.gen.guided import vertex_key
    from dlcfuzz.solve.instantiate import Proposal

    keys = set()
    for kind in (INPUT_KIND, CONST_KIND):
        for k in (1, 2):
            g = topk(kind)
            g.values["p0"].data = i64(k)
            keys.add(vertex_key(Proposal(REGISTRY["TopK"], g.nodes[0], [], [], [], None), g))
    assert len(keys) == 4  # each form, each K


def test_openvino_may_drop_a_pinned_input_its_semantics_ignore(tmp_path: Path) -> None:
    """OpenVINO's ONNX frontend drops graph inputs nothing reads; Dropout's ratio outside training is
    ignored by the ONNX semantics, so a pinned one goes: not a DroppedInput finding (the outputs still
    say whether it mattered), in the backend and in its repro script (which reads graph.json beside the
    model for the pinned names)."""
    pytest.importorskip("openvino", reason="openvino is not installed")
    from dlcfuzz.backends.openvino import DroppedInput, parameter_names

    g = one_node("Dropout", TensorType((2, 3), F32), [np.array(0.5, np.float32)], [TensorType((2, 3), F32)])
    feeds = feeds_of(g)
    expected = ort_outputs(g, feeds)
    be = load_backend("openvino")
    imported = be.load(Test(to_bytes(g), g.to_json(), feeds))
    variant = be.variants()[0]
    np.testing.assert_array_equal(be.run(be.compile(imported, variant), feeds)[0], expected[0])
    with pytest.raises(DroppedInput):  # the same input, not pinned: a finding
        parameter_names(imported[0], ["x", "p0"])

    (tmp_path / "model.onnx").write_bytes(to_bytes(g))
    (tmp_path / "graph.json").write_text(g.to_json())
    namespace: dict = {}
    exec(compile(be.repro_source(variant), "repro", "exec"), namespace)
    np.testing.assert_array_equal(namespace["run_model"](str(tmp_path / "model.onnx"), feeds)[0], expected[0])


@pytest.mark.skipif(not HAS_TVM, reason="tvm is not installed")
def test_a_tvm_converter_decline_names_its_operator_for_the_profile(tmp_path: Path) -> None:
    """TVM's "TopK k must be a constant" names no operator; with a Relu before the TopK both nodes were
    suspects, and the profile learned nothing (so that 15 of 156 TVM tests of a 15-minute campaign were
    declined for runtime axes).  The backend notes the operator being converted, and the profile blames
    the TopK's runtime input alone."""
    g = topk(INPUT_KIND)
    g.values["x0"] = Value("x0", g.values["x"].type, INPUT_KIND)
    g.values["x"] = Value("x", g.values["x"].type, NODE_KIND)
    g.nodes.insert(0, Node("Relu", ["x0"], ["x"], {}, "n_relu"))
    g.validate()
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        version = pool.describe("tvm")[0]
        got = pool.run("tvm", Test(to_bytes(g), g.to_json(), feeds_of(g)), ["unfused-generic"])
    finally:
        pool.close()
    o = got["unfused-generic"]
    assert "while converting onnx.TopK" in o.traceback, o.traceback[-500:]
    profile = SupportProfile("tvm", version)
    assert profile.learn(g, got) == DECLINED
    assert "in1=runtime" in profile.declined_keys("TopK") and profile.declined_keys("Relu") == []
