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
