"""onnx's ReferenceEvaluator: slow, independent of every compiler, the differential oracle's baseline."""

from __future__ import annotations

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant


class ReferenceBackend(Backend):
    name = "reference"
    package = "onnx"
    pip = "onnx"

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
