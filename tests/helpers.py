"""Shared checks: a generated graph must pass the ONNX checker, agree with ONNX shape inference,
and run on ONNX Runtime with outputs of exactly the types the specs inferred."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from dlcfuzz.backends.ort import full_profile, model_error
from dlcfuzz.export.onnx import SHAPE_FORM, constant_nodes, to_onnx
from dlcfuzz.gen.isra import IsraGenerator
from dlcfuzz.ir import Graph
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import COMPOSITES, REGISTRY, OpSpec

SESSION_OPTIONS = ort.SessionOptions()
SESSION_OPTIONS.intra_op_num_threads = 1  # tiny graphs: thread pools cost more than they give
SESSION_OPTIONS.inter_op_num_threads = 1

def ort_generator(specs: list[OpSpec], op_range=(1, 1), **limits) -> IsraGenerator:
    lim = GenOptions(**limits)
    return IsraGenerator(specs, lim, op_range, full_profile(lim.opset, tuple(REGISTRY)))


def check_graph(g: Graph, run: bool = True, seed: int = 0) -> None:
    err = model_error(g, run, seed)
    assert err is None, err


# -- shared by the backend tests ----------------------------------------------------------------
# operators that every compiler here gets right in every variant (their bugs are elsewhere)
SAFE_OPS = ["Add", "Mul", "Sub", "Relu", "Sigmoid", "Tanh", "MatMul", "Transpose", "Concat", "ReduceMean",
            "Softmax", "Exp", "Abs", "Neg", "Where", "Greater", "Cast"]


def make_model(nodes, inputs, outputs, inits=(), opset: int = 17) -> bytes:
    """A hand-written ONNX model (opset 17 unless said): inputs/outputs as (name, elem type, shape)."""
    from onnx import helper, numpy_helper

    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


def run_variants(backend, model: bytes, feeds: dict[str, np.ndarray], graph_json: str = "") -> dict[str, list]:
    """Outputs of every variant of ``backend``, in process."""
    from dlcfuzz.backends.base import Test

    imported = backend.load(Test(model, graph_json, feeds))
    return {v.name: backend.run(backend.compile(imported, v), feeds) for v in backend.variants()}


def generated_case(seed: int, ops=SAFE_OPS, op_range=(3, 6), **limits):
    """(graph, model bytes, inputs) of a generated test."""
    g = ort_generator([REGISTRY[op] for op in ops], op_range=op_range, **limits).generate(seed)
    feeds = {x.name: feed_array(np.random.default_rng(seed), x) for x in g.inputs}
    return g, to_onnx(g).SerializeToString(), feeds


def assert_repro_replays(backend, variant, tmp_path, seed: int = 3) -> None:
    """The backend's standalone repro source gives exactly what the backend gives."""
    from dlcfuzz.backends.base import Test

    g, model, feeds = generated_case(seed)
    ours = backend.run(backend.compile(backend.load(Test(model, g.to_json(), feeds)), variant), feeds)
    path = tmp_path / "model.onnx"
    path.write_bytes(model)
    namespace: dict = {}
    exec(compile(backend.repro_source(variant), "repro", "exec"), namespace)
    theirs = namespace["run_model"](str(path), feeds)
    assert len(theirs) == len(ours) == len(g.outputs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


# onnx 1.23's ReferenceEvaluator disagrees with the ONNX spec (and ONNX Runtime) on graphs that
# dlcfuzz generates for these operators: they are checked against ONNX Runtime instead
REFERENCE_WRONG = {
    'GlobalMaxPool': 'reference keeps the first spatial dim (wrong output rank)',
    'GlobalLpPool': 'no reference implementation',
    'LRN': 'reference loops over N instead of C',
    'LpNormalization': 'reference p=1 sums x, not |x|',
    'LayerNormalization': "reference returns Mean/InvStdDev in X's type, has no stash_type 16",
    'MaxPool': 'reference SAME_LOWER with strides: floor(n/s) outputs; wrong Indices at stride 1',
    'ConvTranspose': 'reference mixes up W slices with group > 1; SAME grows to in*stride',
    'ReduceSumSquare': 'reference returns int64 for int32',
    'ReduceLogSumExp': 'reference rejects integers',
    'Pad': 'reference rejects negative pads',
    'GatherElements': 'reference wants indices as large as data off the axis',
    'Mean': 'reference fails to broadcast into its first input',
    'Trilu': 'reference overflows on k near the int64 limits',
    'AveragePool': 'reference asserts on ceil_mode with auto_pad',
    'LpPool': 'reference averages instead of summing windows that hold padding',
    'Softsign': 'reference rejects some dtypes',
    'OneHot': 'reference fails on depth given as a 1-element vector',
    'GridSample': 'reference rejects the opset-16 mode names bilinear/bicubic',
    'MaxUnpool': 'reference reads I against the inferred shape when output_shape is larger',
    'QuantizeLinear': 'reference divides float16 in float16 (off by 1; ORT and torch in float32)',
    'DequantizeLinear': 'no reference implementation below version 19',
    'QLinearMatMul': 'reference fails on per-column scales of an N-D B, wrong shape of 1-D x 1-D',
    'QLinearConv': 'reference fails on 1-D inputs and 3-D per-channel scales, wrong 3-D SAME_UPPER shapes',
    'RNN': 'reference rejects non-default activations',
    'GRU': 'reference ignores activations',
    'LSTM': 'reference ignores activations',
}
# reference failures that are known and expected (the case is then not compared)
REFERENCE_ERRORS = {"Resize": "axes don't match array",  # negative axes
                    "ConvInteger": "non-broadcastable output operand"}  # 1-D (ORT shifts SAME windows: not an oracle)


def expected_outputs(g: Graph, feeds: dict[str, np.ndarray], op: str, also_wrong: dict[str, str] | None = None):
    """What a graph of operator ``op`` should compute: ONNX's reference evaluator, or ONNX Runtime
    where the reference is known to be wrong (``REFERENCE_WRONG``); None when the reference fails
    with the known ``REFERENCE_ERRORS`` message.  ``also_wrong``: more operators a test checks against
    ONNX Runtime."""
    import warnings

    from dlcfuzz.backends.reference import distrusted

    # the trust table's rules too: the graph uses a feature the reference gets wrong
    by_ort = op in REFERENCE_WRONG or op in (also_wrong or {}) or any(distrusted(n, g) for n in g.nodes)
    ref_error = REFERENCE_ERRORS.get(op)

    from onnx.reference import ReferenceEvaluator

    model = to_onnx(g)
    if by_ort:
        sess = ort.InferenceSession(model.SerializeToString(), SESSION_OPTIONS, providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ReferenceEvaluator(model).run(None, feeds)
        except ValueError as e:
            if ref_error and ref_error in str(e):
                return None
            raise


def assert_model_file_is_its_graph(model_path, graph_json: str) -> None:
    """The ONNX file holds the graph its JSON describes: the same nodes (operator, names, inputs,
    outputs, attributes), runtime inputs (name, dtype, shape), outputs, initializers and opset.  Read
    with onnx and the json module alone, so a mix-up in the exporter or in ``gen`` cannot hide.

    A constant named in ``meta["constant_nodes"]`` is a Constant node (first, holding it in that
    attribute) instead of an initializer; a composite operator's node ("A+B") is the chain of its ONNX
    operators (named after it, ending in its outputs, reading its inputs)."""
    import json

    import onnx
    from onnx import helper, numpy_helper

    spec = json.loads(graph_json)
    model = onnx.load(str(model_path))
    where = str(model_path)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [spec["opset"]], where
    # a node of another domain (com.microsoft) is named by it in the graph, and the model imports it
    used = {n.domain for n in model.graph.node} - {"", "ai.onnx"}
    assert {o.domain for o in model.opset_import} - {"", "ai.onnx"} == used, where
    values = {v["name"]: v for v in spec["values"]}
    forms = constant_nodes(Graph.from_json(graph_json))  # Constant nodes, and constants written as a Shape
    made = {n.output[0]: n for n in model.graph.node if n.output and n.output[0] in forms}
    assert set(made) == set(forms), where
    for name, n in made.items():
        v = values[name]
        if forms[name] == SHAPE_FORM:  # the Shape of a tensor whose shape holds the constant's data
            assert n.op_type == "Shape", where
            continue
        assert n.op_type == "Constant" and [a.name for a in n.attribute] == [forms[name]], where
        a = n.attribute[0]
        got = numpy_helper.to_array(a.t) if a.name == "value" else np.asarray(helper.get_attribute_value(a))
        assert list(got.shape) == v["shape"] and (a.name != "value" or got.dtype.name == v["dtype"]), where
    rest = iter([n for n in model.graph.node if not (n.output and n.output[0] in forms)])
    for n in spec["nodes"]:
        parts = n["op"].split("+")
        chain = [next(rest) for _ in parts]
        assert [f"{m.domain}.{m.op_type}" if m.domain in used else m.op_type for m in chain] == parts, where
        if n["op"] in COMPOSITES:  # its inputs feed the chain (If's branches read them), its outputs end it
            inner = {o for m in chain[:-1] for o in m.output}
            assert list(chain[-1].output) == n["outputs"], where
            assert {i for m in chain for i in m.input if i and i not in inner} <= set(n["inputs"]), where
            names = ([f"{n['name']}.{k}" if n.get("name") else "" for k in range(len(parts))] if len(parts) > 1
                     else [n.get("name", "")])
            assert [m.name for m in chain] == names, where
            continue
        proto = chain[0]
        assert (proto.name, list(proto.input), list(proto.output)) == (
            n.get("name", ""), n["inputs"], n["outputs"]), where
        got = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        assert sorted(got) == sorted(n["attrs"]), where
        for k, v in n["attrs"].items():
            plain = isinstance(v, list) and all(isinstance(x, (int, float)) for x in v)
            if isinstance(v, (int, float, str)) or plain:
                g = got[k].decode() if isinstance(got[k], bytes) else got[k]
                assert np.allclose(g, v, rtol=1e-6) if not isinstance(v, str) else g == v, (where, k, g, v)
    assert next(rest, None) is None, where
    inputs = [(v.name, helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name,
               [d.dim_value for d in v.type.tensor_type.shape.dim]) for v in model.graph.input]
    assert inputs == [(v["name"], v["dtype"], v["shape"]) for v in spec["values"] if v["kind"] == "input"], where
    assert [o.name for o in model.graph.output] == spec["outputs"], where
    for o in model.graph.output:
        assert helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type).name == values[o.name]["dtype"], where
    inits = sorted((t.name, helper.tensor_dtype_to_np_dtype(t.data_type).name, list(t.dims))
                   for t in model.graph.initializer)
    assert inits == sorted((v["name"], v["dtype"], v["shape"]) for v in spec["values"]
                           if v["kind"] == "const" and v["name"] not in forms), where
