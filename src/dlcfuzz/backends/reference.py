"""onnx's ReferenceEvaluator: slow, independent of every compiler, the differential oracle's baseline."""

from __future__ import annotations

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant

# Operators for which onnx 1.23.2's evaluator is wrong or raises on valid graphs (measured against
# ORT, TVM, OpenVINO and torch, which agree with each other): wrong output rank (GlobalMaxPool),
# no implementation (GlobalLpPool), channel loop over N (LRN), |x| missing for p=1
# (LpNormalization), stats dtype / stash_type (LayerNormalization), SAME_LOWER with strides and
# indices (MaxPool), grouped/SAME ConvTranspose, int32 ReduceSumSquare -> int64, broadcasting
# Mean, negative pads (Pad), smaller indices (GatherElements), huge k (Trilu), ceil_mode with
# auto_pad (AveragePool), padded windows (LpPool), negative axes and float64 scales (Resize).
UNRELIABLE = frozenset({
    "GlobalMaxPool", "GlobalLpPool", "LRN", "LpNormalization", "LayerNormalization", "MaxPool", "ConvTranspose",
    "ReduceSumSquare", "Mean", "Pad", "GatherElements", "Trilu", "AveragePool", "LpPool", "Resize",
})


class ReferenceBackend(Backend):
    name = "reference"
    package = "onnx"
    pip = "onnx"

    def supports(self, ops: set[str], graph=None) -> bool:
        """Graphs with an operator the evaluator gets wrong take another baseline."""
        return not ops & UNRELIABLE

    def load(self, test: Test):
        import onnx

        return onnx.load_model_from_string(test.model)

    def compile(self, imported, variant: Variant):
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(imported)

    def run(self, compiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o) for o in compiled.run(None, inputs)]

    def repro_source(self, variant: Variant) -> str:
        return '''
from onnx.reference import ReferenceEvaluator


def run_model(model_path, inputs):
    return ReferenceEvaluator(model_path).run(None, inputs)
'''
