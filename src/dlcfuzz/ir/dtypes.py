"""Element types, named as numpy names them; ONNX enums live in the exporter."""

import numpy as np

FLOATS = ("float32", "float64", "float16")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
DTYPES = (*NUMERIC, "bool")

_NP = {name: np.dtype(name) for name in DTYPES}
# element types of torch-native programs only (spec/torch): no ONNX graph holds them
EXTRA_DTYPES = ("bfloat16",)
try:  # numpy has no bfloat16: ml_dtypes (an onnx dependency) gives it a numpy dtype
    import ml_dtypes

    _NP["bfloat16"] = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    pass

# ONNX TensorProto.DataType codes (stable protobuf enum values), for attributes such as Cast.to
ONNX_CODE = {
    "float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7,
    "bool": 9, "float16": 10, "float64": 11, "uint32": 12, "uint64": 13,
}
DTYPE_OF_CODE = {v: k for k, v in ONNX_CODE.items()}


_ONNX_TO_NP = {
    "float": "float32", "double": "float64", "float16": "float16", "int8": "int8", "int16": "int16",
    "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
    "uint64": "uint64", "bool": "bool",
}


def onnx_type_name(type_str: str) -> str | None:
    """An ONNX schema's type string as an element type name: 'tensor(float)' -> 'float32'; None for types
    dlcfuzz does not generate."""
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        return _ONNX_TO_NP.get(type_str[7:-1])
    return None


def element_type_name(type_str: str) -> str | None:
    """The element type of a tensor, sequence or optional type: 'seq(tensor(float))' -> 'float32'."""
    for wrapper in ("optional(", "seq("):
        if type_str.startswith(wrapper) and type_str.endswith(")"):
            type_str = type_str[len(wrapper):-1]
    return onnx_type_name(type_str)


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype of an element type name."""
    try:
        return _NP[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None
