"""Shared checks: a generated graph must pass the ONNX checker, agree with ONNX shape inference,
and run on ONNX Runtime with outputs of exactly the types the specs inferred."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from dlcfuzz.backends.ort import full_profile
from dlcfuzz.export.onnx import to_onnx
from dlcfuzz.gen.isra import IsraGenerator
from dlcfuzz.ir import Graph
from dlcfuzz.ir.hints import random_array
from dlcfuzz.solve import Limits
from dlcfuzz.spec import REGISTRY, OpSpec

SESSION_OPTIONS = ort.SessionOptions()
SESSION_OPTIONS.intra_op_num_threads = 1  # tiny graphs: thread pools cost more than they give
SESSION_OPTIONS.inter_op_num_threads = 1

_DTYPE_OF_ELEM = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
    10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
}


def ort_generator(specs: list[OpSpec], op_range=(1, 1), **limits) -> IsraGenerator:
    lim = Limits(**limits)
    return IsraGenerator(specs, lim, op_range, full_profile(lim.opset, tuple(REGISTRY)))


def check_graph(g: Graph, run: bool = True, seed: int = 0) -> None:
    g.validate()
    model = to_onnx(g)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    for vi in inferred.graph.output:
        t = g.values[vi.name].type
        tt = vi.type.tensor_type
        assert _DTYPE_OF_ELEM[tt.elem_type] == t.dtype, f"{vi.name}: onnx infers {tt.elem_type}, spec {t}"
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if tt.HasField("shape") and None not in dims:
            assert tuple(dims) == t.shape, f"{vi.name}: onnx infers {dims}, spec {t}"
    if not run:
        return
    sess = ort.InferenceSession(model.SerializeToString(), SESSION_OPTIONS, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    feeds = {v.name: random_array(rng, v.type, v.hint) for v in g.inputs}
    outs = sess.run(None, feeds)
    for name, o in zip(g.outputs, outs, strict=True):
        t = g.values[name].type
        assert tuple(o.shape) == t.shape and o.dtype.name == t.dtype, f"{name}: ORT gives {o.dtype}{o.shape}, spec {t}"


# -- shared by the backend tests ----------------------------------------------------------------
# operators that every compiler here gets right in every variant (their bugs are elsewhere)
SAFE_OPS = ["Add", "Mul", "Sub", "Relu", "Sigmoid", "Tanh", "MatMul", "Transpose", "Concat", "ReduceMean",
            "Softmax", "Exp", "Abs", "Neg", "Where", "Greater", "Cast"]


def make_model(nodes, inputs, outputs, inits=()) -> bytes:
    """A hand-written ONNX model (opset 17): inputs/outputs as (name, elem type, shape)."""
    from onnx import helper, numpy_helper

    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def run_variants(backend, model: bytes, feeds: dict[str, np.ndarray], graph_json: str = "") -> dict[str, list]:
    """Outputs of every variant of ``backend``, in process."""
    from dlcfuzz.backends.base import Test

    imported = backend.load(Test(model, graph_json, feeds))
    return {v.name: backend.run(backend.compile(imported, v), feeds) for v in backend.variants()}


def generated_case(seed: int, ops=SAFE_OPS, op_range=(3, 6), **limits):
    """(graph, model bytes, inputs) of a generated test."""
    g = ort_generator([REGISTRY[op] for op in ops], op_range=op_range, **limits).generate(seed)
    feeds = {x.name: random_array(np.random.default_rng(seed), x.type, x.hint) for x in g.inputs}
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
