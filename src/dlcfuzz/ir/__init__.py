"""Typed computation graphs: the one data structure every other package speaks."""

from dlcfuzz.ir.dtypes import (
    DTYPE_OF_CODE,
    DTYPES,
    FLOATS,
    INTS,
    NUMERIC,
    ONNX_CODE,
    SIGNED,
    UNSIGNED,
    np_dtype,
)
from dlcfuzz.ir.graph import (
    CONST_KIND,
    DEFAULT_DOMAINS,
    INPUT_KIND,
    NODE_KIND,
    Graph,
    GraphError,
    Node,
    TensorType,
    Value,
    op_identity,
    op_name,
)

__all__ = [
    "CONST_KIND",
    "DEFAULT_DOMAINS",
    "DTYPES",
    "DTYPE_OF_CODE",
    "FLOATS",
    "INPUT_KIND",
    "INTS",
    "NODE_KIND",
    "NUMERIC",
    "ONNX_CODE",
    "SIGNED",
    "UNSIGNED",
    "Graph",
    "GraphError",
    "Node",
    "TensorType",
    "Value",
    "np_dtype",
    "op_identity",
    "op_name",
]
