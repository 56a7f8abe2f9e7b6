"""Constants written as Constant nodes (``GenOptions.constant_nodes``, ``graph.meta["constant_nodes"]``): the
rate and the forms (value, value_float(s), value_int(s)), exact values, the same outputs as initializers
on ONNX Runtime, TVM and OpenVINO, TVM's decline of the typed forms and the profile learning it, and the
readers of models (torch repro, bug report script, metrics, localization, JSON)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test
from dlcfuzz.backends.ort import full_profile, model_error
from dlcfuzz.cli import UsageError, build_parser
from dlcfuzz.cli.options import gen_options
from dlcfuzz.export.onnx import CONSTANT_FORMS, SHAPE_FORM, constant_forms, constant_nodes, to_bytes, to_onnx
from dlcfuzz.gen import make_generator
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle.compare import compare
from dlcfuzz.oracle.localize import exposed
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import synthesize
from tests.helpers import SESSION_OPTIONS, check_graph, ort_generator

HAS_TVM = importlib.util.find_spec("tvm") is not None
# operators with constant-like inputs (Const: shapes, axes, pads ...) and weights (initializers)
OPS = ["Reshape", "Slice", "Pad", "Clip", "TopK", "Conv", "Gemm", "Add", "Unsqueeze", "ReduceSum", "Expand"]


def generator(rate: float, **limits):
    return ort_generator([REGISTRY[o] for o in OPS], op_range=(4, 6), constant_nodes=rate, **limits)


def as_initializers(g: Graph) -> Graph:
    """The same graph with every constant an initializer."""
    h = Graph.from_json(g.to_json())
    h.meta.pop("constant_nodes", None)
    h.meta.pop("shape_of", None)
    return h


def ort_run(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(to_bytes(g), SESSION_OPTIONS, providers=["CPUExecutionProvider"]).run(None, feeds)


def constant_of(a: np.ndarray, form: str) -> Graph:
    """Identity of a constant written in ``form``."""
    g = Graph(opset=17, meta={"constant_nodes": {"c": form}})
    t = TensorType(a.shape, a.dtype.name)
    g.add_value(Value("c", t, CONST_KIND, a))
    g.add_value(Value("y", t, NODE_KIND))
    g.add_node(Node("Identity", ["c"], ["y"], {}, "n0"))
    g.outputs = ["y"]
    g.validate()
    return g


# -- generation ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_the_rate_decides_the_form_and_models_stay_valid(rate: float) -> None:
    """At rate 0 every constant is an initializer (as before the option); at 1 each is a Constant node (in a
    form its type takes), the model has no initializer, and the checker, shape inference and ORT accept it."""
    gen = generator(rate, runtime_consts=0.25)
    seen = 0
    for seed in range(12):
        g = gen.generate(seed)
        model = to_onnx(g)
        consts = {v.name for v in g.initializers}
        seen += len(consts)
        if rate == 0:
            assert "constant_nodes" not in g.meta and not any(n.op_type == "Constant" for n in model.graph.node)
            assert {t.name for t in model.graph.initializer} == consts
        else:
            forms = constant_nodes(g)
            assert set(forms) == consts and not model.graph.initializer
            assert [n.output[0] for n in model.graph.node if n.op_type == "Constant"] == [
                k for k, f in forms.items() if f != SHAPE_FORM]
            made = {o for n in model.graph.node if n.op_type == "Shape" for o in n.output}
            assert {k for k, f in forms.items() if f == SHAPE_FORM} <= made
        check_graph(g, seed=seed)
    assert seen >= 20


def test_the_default_rate_mixes_forms() -> None:
    """A fifth of the constants by default; a typed form (value_ints ...) half the time the type takes one."""
    assert GenOptions().constant_nodes == 0.2
    gen = ort_generator([REGISTRY[o] for o in OPS], op_range=(6, 6))
    graphs = [gen.generate(seed) for seed in range(40)]
    consts = sum(len(g.initializers) for g in graphs)
    forms = [f for g in graphs for f in constant_nodes(g).values()]
    constant = [f for f in forms if f != SHAPE_FORM]  # Shape nodes come on top: half the constants that can be
    assert consts > 150 and 0.12 < len(constant) / consts < 0.28, (consts, len(forms))
    assert {"value", "value_ints"} <= set(forms) <= {*CONSTANT_FORMS, SHAPE_FORM}
    for g in graphs:
        for name, form in constant_nodes(g).items():
            assert form in constant_forms(g.values[name].type) or form == SHAPE_FORM


def test_the_command_line_sets_the_rate() -> None:
    parse = build_parser().parse_args
    assert gen_options(parse(["gen", "--out", "x", "--constant-nodes", "0.5"])).constant_nodes == 0.5
    assert gen_options(parse(["gen", "--out", "x"])).constant_nodes == 0.2
    with pytest.raises(UsageError):
        gen_options(parse(["gen", "--out", "x", "--constant-nodes", "-0.1"]))


def test_the_forms_take_their_own_random_stream() -> None:
    """Choosing forms draws from a stream of its own: the graphs are what they are without Constant nodes."""
    for seed in range(8):
        a, b = generator(0.0).generate(seed), generator(0.7).generate(seed)
        assert as_initializers(b) == a


def test_forms_by_type() -> None:
    assert constant_forms(TensorType((), "float32")) == ("value", "value_float")
    assert constant_forms(TensorType((3,), "int64")) == ("value", "value_ints")
    assert constant_forms(TensorType((2, 2), "int64")) == ("value",)
    assert constant_forms(TensorType((3,), "int32")) == ("value",)  # value_ints holds int64 only
    assert constant_forms(TensorType((0,), "float32")) == ("value",)  # an empty list is no value


@pytest.mark.parametrize("a,form", [
    (np.array(0.1, np.float32), "value_float"), (np.array([1e-30, -3.5, np.inf], np.float32), "value_floats"),
    (np.array(2**62 + 1, np.int64), "value_int"), (np.array([-(2**63), 7], np.int64), "value_ints"),
    (np.array([[1.5, 2]], np.float16), "value"), (np.array([True, False]), "value")])
def test_each_form_holds_the_exact_value(a: np.ndarray, form: str) -> None:
    g = constant_of(a, form)
    [node] = [n for n in to_onnx(g).graph.node if n.op_type == "Constant"]
    assert [x.name for x in node.attribute] == [form]
    check_graph(g)
    [got] = ort_run(g, {})
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, a)


def _expand_to_shape_of(y_shape: tuple[int, ...], start: int | None = None, end: int | None = None) -> Graph:
    """Expand(x, c) where c is [3, 4], recorded as the Shape of input y (or of its slice)."""
    g = Graph(opset=17, meta={"constant_nodes": {"c": SHAPE_FORM}, "shape_of": {"c": ["y", start, end]}})
    g.add_value(Value("x", TensorType((1, 4), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType(y_shape, "int8"), INPUT_KIND))
    g.add_value(Value("c", TensorType((2,), "int64"), CONST_KIND, np.array([3, 4], np.int64)))
    g.add_value(Value("z", TensorType((3, 4), "float32"), NODE_KIND))
    g.add_node(Node("Expand", ["x", "c"], ["z"], {}, "n0"))
    g.outputs = ["z"]
    g.validate()
    return g


def test_a_shape_constant_is_written_as_the_shape_of_its_tensor_while_it_is_one() -> None:
    """Written as Shape(y) (a slice of y's shape through start/end), the model computes what the initializer
    does; once y no longer has that shape (a reduction shrank it), the constant is an initializer again."""
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    for y_shape, bounds in (((3, 4), (None, None)), ((2, 3, 4), (1, 3))):
        g = _expand_to_shape_of(y_shape, *bounds)
        [shape] = [n for n in to_onnx(g).graph.node if n.op_type == "Shape"]
        assert list(shape.input) == ["y"] and list(shape.output) == ["c"]
        assert {a.name: a.i for a in shape.attribute} == ({"start": 1, "end": 3} if bounds[0] else {})
        check_graph(g)
        feeds = {"x": x, "y": np.zeros(y_shape, np.int8)}
        np.testing.assert_array_equal(ort_run(g, feeds)[0], np.broadcast_to(x, (3, 4)))
    stale = _expand_to_shape_of((3, 5))
    model = to_onnx(stale)
    assert not any(n.op_type == "Shape" for n in model.graph.node)
    assert [t.name for t in model.graph.initializer] == ["c"]


def test_generated_shape_constants_keep_models_valid() -> None:
    """Generation writes some 1-D int64 constants as Shape nodes of tensors whose shapes they equal."""
    ops = ("Expand", "Tile", "Relu", "Reshape")
    gen = ort_generator([REGISTRY[o] for o in ops], op_range=(6, 6), constant_nodes=1.0)
    shaped = 0
    for seed in range(40):
        g = gen.generate(seed)
        shaped += sum(f == SHAPE_FORM for f in constant_nodes(g).values())
        check_graph(g, seed=seed)
    assert shaped >= 3


# -- compilers --------------------------------------------------------------------------------------------
def _same_graphs(n: int, typed: bool):
    """(graph with Constant nodes, feeds) pairs: every constant a Constant node, typed forms or not."""
    gen = generator(1.0, runtime_consts=0, dtypes=("float32", "int64"))
    for seed in range(n):
        g = gen.generate(seed)
        if not typed:
            g.meta["constant_nodes"] = dict.fromkeys(g.meta.get("constant_nodes", {}), "value")
        yield g, synthesize(g, np.random.default_rng(seed))


def test_constant_nodes_give_the_initializer_outputs_on_ort() -> None:
    for g, feeds in _same_graphs(8, typed=True):
        assert constant_nodes(g)
        assert compare(ort_run(as_initializers(g), feeds), ort_run(g, feeds)) is None


@pytest.mark.parametrize("backend", ["tvm", "openvino"])
def test_constant_nodes_give_the_initializer_outputs_on_compilers(backend: str) -> None:
    """TVM (``value`` only: it declines the typed forms, see below) and OpenVINO (every form) give, on the
    model with Constant nodes, the outputs they give on the model with initializers."""
    be = load_backend(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    variant = be.variants()[0]
    checked = 0
    for g, feeds in _same_graphs(6, typed=backend != "tvm"):
        outs = []
        for h in (as_initializers(g), g):
            try:
                outs.append(be.run(be.compile(be.load(Test(to_bytes(h), h.to_json(), feeds)), variant), feeds))
            except Exception as e:  # the compiler's own bug or decline: the same in both forms
                outs.append(type(e).__name__)
        assert (outs[0] == outs[1]) if isinstance(outs[0], str) else compare(outs[0], outs[1]) is None
        checked += not isinstance(outs[0], str)
    assert checked >= 3


@pytest.mark.skipif(not HAS_TVM, reason="tvm is not installed")
def test_tvm_declines_typed_forms_and_the_profile_learns_them(tmp_path: Path) -> None:
    """TVM 0.27's Constant converter reads ``value`` alone ("no value in Constant" otherwise): a decline,
    blamed on the pseudo-operator Constant's form, after which a generator for TVM writes no typed form."""
    from dlcfuzz.run.profile import ACCEPTED, DECLINED, SupportProfile, find_profile
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    def reshape(form: str) -> Graph:
        g = Graph(opset=17, meta={"constant_nodes": {"s": form}})
        g.add_value(Value("x", TensorType((2, 3), "float32"), INPUT_KIND))
        g.add_value(Value("s", TensorType((2,), "int64"), CONST_KIND, np.array([3, 2], np.int64)))
        g.add_value(Value("y", TensorType((3, 2), "float32"), NODE_KIND))
        g.add_node(Node("Reshape", ["x", "s"], ["y"], {}, "n0"))
        g.outputs = ["y"]
        return g

    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        version = pool.describe("tvm")[0]
        runs = {f: pool.run("tvm", Test(to_bytes(reshape(f)), reshape(f).to_json(), synthesize(
            reshape(f), np.random.default_rng(0))), ["unfused-generic"]) for f in ("value", "value_ints")}
    finally:
        pool.close()
    o = runs["value_ints"]["unfused-generic"]
    assert o.phase == "import" and "no value in Constant" in o.message and "onnx.Constant" in o.traceback
    profile = SupportProfile("tvm", version)
    assert profile.learn(reshape("value"), runs["value"]) == ACCEPTED
    assert profile.learn(reshape("value_ints"), runs["value_ints"]) == DECLINED
    assert profile.declined_keys("Constant") == ["form=value_ints"] and profile.declined_keys("Reshape") == []
    assert profile.admits_constant("value") and not profile.admits_constant("value_ints")
    assert profile.admits_graph(reshape("value")) and not profile.admits_graph(reshape("value_ints"))
    # a generator writes only what was probed: the packaged profile's keys (Reshape's dtypes, ranks ...) and these
    admit = (find_profile("tvm", version) or SupportProfile("tvm", version)).merged(profile)
    assert admit.admits_constant("value") and not admit.admits_constant("value_ints")
    gen = make_generator("isra", [REGISTRY[o] for o in OPS], GenOptions(constant_nodes=1.0), (4, 4),
                         full_profile(17, tuple(OPS)), admit=admit)
    forms = {f for seed in range(10) for f in constant_nodes(gen.generate(seed)).values()}
    assert forms and "value_ints" not in forms


# -- readers of models ---------------------------------------------------------------------------------------
def test_readers_take_constant_nodes(tmp_path: Path) -> None:
    """The torch repro's model (read from the ONNX file), the bug report's rebuilding script and the metrics
    loader read a constant the same whether it is an initializer or a Constant node in any form."""
    import onnx

    from dlcfuzz.metrics import op_nodes
    from dlcfuzz.run.bugreport import onnx_script

    for g, _ in _same_graphs(4, typed=True):
        g.meta.pop("shape_of", None)  # Constant nodes only: a constant written as a Shape is no constant to them
        model, plain = to_onnx(g), to_onnx(as_initializers(g))
        # metrics: the same operator nodes, small integer constants as attributes either way
        assert [(n.op, n.attrs) for n in op_nodes(model) if n.op != "Constant"] == [
            (n.op, n.attrs) for n in op_nodes(plain)]
        # the bug report's script rebuilds a model that computes the same
        work = tmp_path / f"g{g.meta['seed']}"
        work.mkdir()
        code = onnx_script(model)
        cwd = Path.cwd()
        try:
            import os

            os.chdir(work)
            exec(compile(code, "report", "exec"), {})
        finally:
            os.chdir(cwd)
        rebuilt = onnx.load(str(work / "model.onnx"))
        assert [n.op_type for n in rebuilt.graph.node] == [n.op_type for n in model.graph.node]
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from dlcfuzz.export.torch import build_namespace, module_source, onnx_parts, ops_source, to_torch

    for g, feeds in _same_graphs(3, typed=True):
        args = [torch.from_numpy(np.array(feeds[v.name])) for v in g.inputs]
        namespace = build_namespace(ops_source() + "\n\n" + module_source(*onnx_parts(to_onnx(g), feeds)))
        theirs = [o.numpy() for o in namespace["Model"]()(*args)]
        ours = [o.numpy() for o in to_torch(g)(*args)]
        assert compare(ours, theirs) is None


def test_json_and_localization_keep_the_forms() -> None:
    g = next(g for g in (generator(0.5).generate(s) for s in range(10)) if constant_nodes(g))
    assert to_bytes(Graph.from_json(g.to_json())) == to_bytes(g)
    e = exposed(g)
    assert constant_nodes(e) == constant_nodes(g) and model_error(e) is None
    # a constant the reducer turned into a runtime input, or dropped, is no Constant node any more
    name = next(iter(constant_nodes(g)))
    g.values[name].kind = INPUT_KIND
    assert name not in constant_nodes(g) and name in {i.name for i in to_onnx(g).graph.input}


def test_iree_declines_value_floats_only() -> None:
    """IREE 3.13's ONNX importer lowers Constant's value, value_float, value_int(s), and declines value_floats
    (an opaque onnx.Constant: a decline by oracle/unsupported.py, which the profile learns as a Constant form)."""
    from dlcfuzz.oracle.unsupported import declined_operators, is_unsupported

    be = load_backend("iree")
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    variant = be.variants()[0]
    for a, form in [(np.array(1.5, np.float32), "value_float"), (np.array([3, 4], np.int64), "value_ints"),
                    (np.array([1.5, 2], np.float32), "value_floats")]:
        g = Graph(opset=17, meta={"constant_nodes": {"c": form}})
        t = TensorType(a.shape, a.dtype.name)
        g.add_value(Value("x", t, INPUT_KIND))
        g.add_value(Value("c", t, CONST_KIND, a))
        g.add_value(Value("y", t, NODE_KIND))
        g.add_node(Node("Add", ["x", "c"], ["y"], {}, "n0"))
        g.outputs = ["y"]
        feeds = {"x": np.ones(a.shape, a.dtype)}
        try:
            got = be.run(be.compile(be.load(Test(to_bytes(g), g.to_json(), feeds)), variant), feeds)
        except Exception as e:
            assert form == "value_floats", (form, e)
            assert is_unsupported("iree", "compile", type(e).__name__, str(e))
            assert declined_operators(str(e)) == {"Constant"}
            continue
        assert form != "value_floats"
        np.testing.assert_array_equal(got[0], a + 1)
