"""Write a Graph as an ONNX model with an explicit opset and the lowest IR version it needs."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from dlcfuzz import __version__
from dlcfuzz.ir import ONNX_CODE, Graph, TensorType

DEFAULT_OPSET = 17
# ONNX Runtime 1.31 accepts IR <= 13 and opset <= 26 (with no kernel for a few opset-22 versions:
# RoiAlign, MaxRoiPool, GlobalLpPool); TVM 0.27, OpenVINO 2026.4 and IREE 3.13 load 13-23 (measured).
# Generated graphs were checked valid at every opset 13-21 (400 single-operator graphs each) and at 22
# and 23 (300 graphs of 10 operators each), where Attention and RMSNormalization begin.
MIN_OPSET, MAX_OPSET = 13, 23



def value_info(name: str, t: TensorType) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, ONNX_CODE[t.dtype], list(t.shape))


def _attr(v):
    if isinstance(v, np.ndarray):
        return numpy_helper.from_array(v)
    return v


def to_onnx(g: Graph, opset: int | None = None) -> onnx.ModelProto:
    opset = opset or g.opset
    nodes = [
        helper.make_node(n.op, n.inputs, n.outputs, name=n.name or None,
                         **{k: _attr(v) for k, v in sorted(n.attrs.items())})
        for n in g.nodes
    ]
    graph = helper.make_graph(
        nodes,
        "dlcfuzz",
        [value_info(v.name, v.type) for v in g.inputs],
        [value_info(o, g.values[o].type) for o in g.outputs],
        initializer=[numpy_helper.from_array(v.data, v.name) for v in g.initializers],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="dlcfuzz", producer_version=__version__)
    model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    return model


def to_bytes(g: Graph, opset: int | None = None) -> bytes:
    return to_onnx(g, opset).SerializeToString(deterministic=True)


def checker_error(model: onnx.ModelProto) -> str | None:
    """Why the ONNX checker with strict shape inference rejects ``model`` (None: it accepts)."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # ValidationError, InferenceError, and bare ValueErrors (e.g. Cast to=0)
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return None
