"""Shared checks: a generated graph must pass the ONNX checker, agree with ONNX shape inference,
and run on ONNX Runtime with outputs of exactly the types the specs inferred."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from dlcfuzz.backends.ort import full_profile, model_error
from dlcfuzz.export.onnx import to_onnx
from dlcfuzz.gen.isra import IsraGenerator
from dlcfuzz.ir import Graph
from dlcfuzz.ir.hints import random_array
from dlcfuzz.solve import Limits
from dlcfuzz.spec import REGISTRY, OpSpec

SESSION_OPTIONS = ort.SessionOptions()
SESSION_OPTIONS.intra_op_num_threads = 1  # tiny graphs: thread pools cost more than they give
SESSION_OPTIONS.inter_op_num_threads = 1

def ort_generator(specs: list[OpSpec], op_range=(1, 1), **limits) -> IsraGenerator:
    lim = Limits(**limits)
    return IsraGenerator(specs, lim, op_range, full_profile(lim.opset, tuple(REGISTRY)))


def check_graph(g: Graph, run: bool = True, seed: int = 0) -> None:
    err = model_error(g, run, seed)
    assert err is None, err


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


def expected_outputs(g: Graph, feeds: dict[str, np.ndarray], by_ort: bool, ref_error: str | None = None):
    """What the graph should compute: ONNX's reference evaluator, or ONNX Runtime where the
    reference is known to be wrong (``by_ort``); None when the reference fails with the known
    ``ref_error`` message."""
    import warnings

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
