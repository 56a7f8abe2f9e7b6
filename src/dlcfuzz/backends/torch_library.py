"""The torch library itself, run in an isolated worker: OPERA's validity pre-check of a migrated call.

A migrated torch test is a *call spec* (``dlcfuzz.export.torch_call``).  This backend rebuilds the
call as a module and runs it eagerly twice: a call that fails, has no tensor outputs, or gives two
different results (a random op, uninitialized memory) is no test; otherwise its outputs are the
reference every frontend is compared with.  It also exports the module to ONNX with torch's legacy
TorchScript exporter (no onnxscript needed) and hands the bytes over as the artifact ``model.onnx``,
so that ONNX frontends can run the same call; when that export fails, the artifact
``onnx_export_error`` says why instead (the eager outputs stay valid).

Shared with the torch frontend backends (``tvm-torch``, ``openvino-torch``, ``inductor-torch``):
``TorchExportError`` (torch itself could not capture the call: not the compiler's fault) and
``call_source()``, the text of ``torch_call`` that their standalone repro scripts embed.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant


class TorchExportError(Exception):
    """torch could not capture the call (``torch.export``, ``torch.jit.trace``): not the compiler's fault."""


class NondeterministicError(Exception):
    """Two eager runs of the same call on the same inputs gave different outputs."""


class NoTensorOutput(Exception):
    """The call returns no tensor: nothing for a compiler to compute."""


@cache
def call_source() -> str:
    """The text of ``dlcfuzz.export.torch_call`` (stdlib, numpy and torch only), for repro scripts:
    it defines ``decode_call``, ``build_module``, ``tensor_outputs`` and ``run_eager``."""
    from importlib import resources

    text = resources.files("dlcfuzz.export").joinpath("torch_call.py").read_text()
    # repro sources are concatenated: a __future__ import is only legal at the very top
    return "\n".join(line for line in text.splitlines() if line.strip() != "from __future__ import annotations")


def load_call(test: Test) -> tuple[Any, list[str]]:
    """(module, input names) of a test whose model is a call spec."""
    from dlcfuzz.export.torch_call import build_module, decode_call

    return build_module(decode_call(test.model))


def example_args(names: list[str], inputs: dict[str, np.ndarray]) -> tuple:
    import torch

    return tuple(torch.from_numpy(np.array(inputs[n])) for n in names)


def torch_export(module: Any, args: tuple) -> Any:
    """``torch.export.export(module, args)``, its failures as TorchExportError."""
    import torch

    try:
        ep = torch.export.export(module, args)
    except Exception as e:
        raise TorchExportError(f"torch.export failed: {type(e).__name__}: {first_line(e)}") from e
    return ep


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:500] if text else ""


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical arrays, except that any NaN equals any NaN."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.tobytes() == b.tobytes():
        return True
    if a.dtype.kind not in "fc":
        return False
    if a.dtype.kind == "c":  # compare real and imaginary parts as floats
        a, b = a.view(a.real.dtype), b.view(b.real.dtype)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return False
    return np.where(nan_a, 0, a).tobytes() == np.where(nan_b, 0, b).tobytes()


@dataclass
class Loaded:
    module: Any
    input_names: list[str]


class TorchLibraryBackend(Backend):
    """The call run eagerly by torch: the library's reference outputs, and its ONNX export."""

    name = "torch-library"
    package = "torch"
    pip = "torch"
    checks_models = False  # not a compiler under test: the library's own reference run

    def variants(self) -> list[Variant]:
        return [Variant("eager")]

    def load(self, test: Test) -> Loaded:
        return Loaded(*load_call(test))

    def compile(self, imported: Loaded, variant: Variant) -> Loaded:
        return imported

    def run(self, compiled: Loaded, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        from dlcfuzz.export.torch_call import run_eager

        first = run_eager(compiled.module, compiled.input_names, inputs)
        second = run_eager(compiled.module, compiled.input_names, inputs)
        if not first:
            raise NoTensorOutput("the call returns no tensor")
        if len(first) != len(second) or not all(same_bits(a, b) for a, b in zip(first, second, strict=True)):
            differ = [i for i, (a, b) in enumerate(zip(first, second, strict=False)) if not same_bits(a, b)]
            raise NondeterministicError(f"two eager runs differ (outputs {differ} of {len(first)})")
        self._export_onnx(compiled, inputs, len(first))
        return first

    def _export_onnx(self, compiled: Loaded, inputs: dict[str, np.ndarray], n_outputs: int) -> None:
        """Hands over ``model.onnx`` (the legacy exporter's model) or ``onnx_export_error``."""
        try:
            data = export_onnx(compiled.module, compiled.input_names, inputs, n_outputs)
        except Exception as e:
            self.artifact("onnx_export_error", f"{type(e).__name__}: {first_line(e)}")
            return
        self.artifact("model.onnx", data)

    def repro_source(self, variant: Variant) -> str:
        return call_source() + '''


def run_model(model_path, inputs):
    with open(model_path, "rb") as f:
        module, names = build_module(decode_call(f.read()))
    return run_eager(module, names, inputs)
'''


class OnnxExportError(Exception):
    pass


def export_onnx(module: Any, names: list[str], inputs: dict[str, np.ndarray], n_outputs: int) -> bytes:
    """The module as ONNX (opset 17) by torch's TorchScript exporter, graph inputs exactly ``names``
    in order and ``n_outputs`` outputs ``y0, y1, ...`` (else OnnxExportError)."""
    import onnx
    import torch

    buf = io.BytesIO()
    outputs = [f"y{i}" for i in range(n_outputs)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example_args(names, inputs), buf, dynamo=False, opset_version=17,
                          input_names=list(names), output_names=outputs)
    data = buf.getvalue()
    graph = onnx.load_model_from_string(data).graph
    got = [i.name for i in graph.input]
    if got != list(names):  # e.g. an input only read for its shape, folded into a constant
        raise OnnxExportError(f"the exported graph's inputs are {got}, not {list(names)}")
    if len(graph.output) != n_outputs:
        raise OnnxExportError(f"the exported graph has {len(graph.output)} outputs, not {n_outputs}")
    return data
