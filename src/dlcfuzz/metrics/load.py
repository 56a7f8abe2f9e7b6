"""Read any ONNX model (ours, NNSmith's, ...) into the small form the metrics need."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from dlcfuzz.ir import DTYPE_OF_CODE, op_name

_CONSTANT_FORMS = {"value": None, "value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
                   "value_ints": np.int64}
SMALL_CONST = 16  # integer constant inputs up to this size count as attributes (axes, pads, shape...)


class ModelError(ValueError):
    """A file that is not a readable ONNX model."""


@dataclass
class OpNode:
    op: str
    in_shapes: tuple[Any, ...]  # one shape tuple per non-empty input ("?" for unknown dims)
    in_types: tuple[Any, ...]  # (shape, dtype) per non-empty input
    attrs: tuple[tuple[str, Any], ...]  # sorted, hashable; small constant inputs as "in<k>"
    indegree: int
    succ: list[int] = field(default_factory=list)  # consumer node indices, one per edge
    outdegree: int = 0


def _freeze(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return (v.dtype.name, v.shape, tuple(v.ravel().tolist()))
    if isinstance(v, onnx.TensorProto):
        return _freeze(numpy_helper.to_array(v))
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, float):
        return round(v, 6)
    return v


def _type_of(vi: onnx.ValueInfoProto) -> tuple[tuple[Any, ...], str]:
    tt = vi.type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else "?" for d in tt.shape.dim)
    return dims, DTYPE_OF_CODE.get(tt.elem_type, str(tt.elem_type))


def load_model(path: str | Path) -> onnx.ModelProto:
    try:
        model = onnx.load(str(path))
    except Exception as e:  # protobuf raises several types for corrupt bytes
        raise ModelError(f"{path}: not a valid ONNX model ({type(e).__name__})") from None
    if not model.graph.node and not model.graph.input:
        raise ModelError(f"{path}: not a valid ONNX model (no graph)")
    return model


def op_nodes(model: onnx.ModelProto) -> list[OpNode]:
    """The model's nodes with input types (via ONNX shape inference), attributes and edges."""
    with contextlib.suppress(Exception):  # metrics still work without intermediate shapes
        model = shape_inference.infer_shapes(model)
    g = model.graph
    types: dict[str, tuple[tuple[Any, ...], str]] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        types[vi.name] = _type_of(vi)
    consts: dict[str, np.ndarray] = {}
    for init in g.initializer:
        arr = numpy_helper.to_array(init)
        consts[init.name] = arr
        types[init.name] = (tuple(arr.shape), arr.dtype.name)
    nodes: list[OpNode] = []
    producer: dict[str, int] = {}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name in _CONSTANT_FORMS:
            a = n.attribute[0]  # value, or the typed forms (value_ints ...): one constant either way
            arr = numpy_helper.to_array(a.t) if a.name == "value" else np.array(
                helper.get_attribute_value(a), dtype=_CONSTANT_FORMS[a.name])
            consts[n.output[0]] = arr
            types[n.output[0]] = (tuple(arr.shape), arr.dtype.name)
        ins = [i for i in n.input if i]
        attrs = [(a.name, _freeze(helper.get_attribute_value(a))) for a in n.attribute]
        for k, name in enumerate(n.input):
            arr = consts.get(name)
            if arr is not None and arr.size <= SMALL_CONST and arr.dtype.kind in "iub":
                attrs.append((f"in{k}", _freeze(arr)))
        in_types = tuple(types.get(i, (("?",), "?")) for i in ins)
        # a contrib operator by its qualified name, as dlcfuzz's specs name it (ir.op_name)
        node = OpNode(op_name(n.domain, n.op_type), tuple(t[0] for t in in_types), in_types, tuple(sorted(attrs)),
                      len(ins))
        idx = len(nodes)
        for i in ins:
            if i in producer:
                nodes[producer[i]].succ.append(idx)
        for o in n.output:
            if o:
                producer[o] = idx
        nodes.append(node)
    for node in nodes:
        node.outdegree = len(node.succ)
    return nodes
