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


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype of an element type name."""
    try:
        return _NP[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None
