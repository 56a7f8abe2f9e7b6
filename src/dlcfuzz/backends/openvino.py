"""OpenVINO (CPU plugin), reading the ONNX model through its ONNX frontend (``openvino``), or a migrated
torch call through its PyTorch frontend (``openvino-torch``)."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant

DEVICE = "CPU"
# One thread, one stream: workers run side by side and the graphs are tiny.
QUIET = {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}
F32 = {"INFERENCE_PRECISION_HINT": "f32"}
# name -> (plugin config, compile with every input dimension dynamic).
# "default" keeps the plugin's own INFERENCE_PRECISION_HINT: bf16 on CPUs with avx512_bf16 or AMX (f16 on some
# ARM), so float32 graphs run in low precision there and need a loose tolerance.  "f32-dynamic" takes the
# CPU plugin's dynamic-shape kernels and skips the frontend's shape-driven constant folding.
# (EXECUTION_MODE_HINT=ACCURACY is left out: on x86 it gave bit-identical results to "f32".)
VARIANTS: dict[str, tuple[dict[str, Any], bool]] = {
    "f32": (F32, False),
    "default": ({}, False),
    "f32-dynamic": (F32, True),
}


@cache
def _core():
    import openvino as ov

    return ov.Core()


class DroppedInput(Exception):
    """The compiled model lacks a graph input: whatever the input holds, the outputs cannot depend on it."""


def parameter_names(model: Any, graph_inputs: list[str], pinned: Collection[str] = ()) -> list[str]:
    """The graph input that each of the model's Parameters holds, in Parameter order: by tensor name,
    and by position for a Parameter that lost its name (a Dropout reading an input renames it to its
    output).  A graph input without a Parameter is an error of its own (``DroppedInput``), except a
    ``pinned`` one: a constant-like operand taken at run time, which the ONNX semantics may ignore
    (Dropout's ratio outside training) and OpenVINO then drops like any unused input; OpenVINO never
    sees its value, so a converter that drops one it needs shows in the outputs."""
    params = [set(p.get_names()) for p in model.inputs]
    named = {n for names in params for n in names}
    dropped = [n for n in graph_inputs if n not in named]
    needed = [n for n in graph_inputs if n in named or n not in pinned]
    if len(params) < len(needed):
        raise DroppedInput(f"OpenVINO's model has {len(params)} inputs for the graph's {len(graph_inputs)}: "
                           f"it dropped {', '.join(dropped) or 'an input'}")
    unnamed = iter([n for n in dropped if n not in pinned] + [n for n in dropped if n in pinned])
    return [next((n for n in graph_inputs if n in names), None) or next(unnamed) for names in params]


def pinned_inputs(graph_json: str) -> set[str]:
    """The names of a dlcfuzz graph's pinned runtime inputs (graph inputs that carry their value)."""
    if not graph_json:
        return set()
    return {v["name"] for v in json.loads(graph_json)["values"] if v["kind"] == "input" and "data" in v}


class OpenVinoBackend(Backend):
    """OpenVINO's CPU plugin at full float precision, at the machine's default precision, and with dynamic shapes."""

    name = "openvino"
    package = "openvino"
    pip = "openvino"
    _declared: tuple[list[int], ...] = ()  # the last loaded model's declared output sizes (0: unknown)
    _spoiled = False  # the last run swallowed an error (``spoiled``)
    # OpenVINO's converter package sends a telemetry event from a thread of its own at import (its fallback
    # stub takes over where the package cannot be imported): a worker neither phones home once per process
    # nor holds a thread, so a fork server can import OpenVINO once for all its workers
    unused_imports: tuple[str, ...] = ("openvino_telemetry",)

    def variants(self) -> list[Variant]:
        # the CPU plugin has no float64 kernels and runs float64 models in float32 (Log of a float64
        # 1.0000001234 gives float32's 1.19209282e-07, not 1.23399992e-07): their outputs carry float32 rounding
        return [Variant(name, {"config": {**QUIET, **hints}, "dynamic": dynamic, "low_precision": not hints,
                               "float64_in_float32": True})
                for name, (hints, dynamic) in VARIANTS.items()]

    def load(self, test: Test) -> tuple[Any, list[str]]:
        import onnx

        graph = onnx.load_model_from_string(test.model).graph
        names = [i.name for i in graph.input]
        # the outputs' declared sizes (0 where unknown): an output emptied where none is empty is unwritten
        self._declared = tuple([d.dim_value for d in o.type.tensor_type.shape.dim] for o in graph.output)
        self._spoiled = False
        model = _core().read_model(test.model)
        return model, parameter_names(model, names, pinned_inputs(test.graph_json))

    def compile(self, imported: tuple[Any, list[str]], variant: Variant) -> tuple[Any, list[str]]:
        model, names = imported
        if variant.options["dynamic"]:
            import openvino as ov

            model = model.clone()  # reshape works in place and the imported model serves every variant
            model.reshape({p: ov.PartialShape.dynamic(p.get_partial_shape().rank) for p in model.inputs})
        return _core().compile_model(model, DEVICE, dict(variant.options["config"])), names

    def run(self, compiled: tuple[Any, list[str]], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        model, names = compiled  # names: the graph input each Parameter holds, in Parameter order
        result = model.create_infer_request().infer([inputs[n] for n in names])
        # Outputs come in graph-output order; return OpenVINO's dtypes as they are (a changed dtype is a finding).
        outputs = [np.array(result[o]) for o in model.outputs]
        # on one inference thread the CPU plugin swallows a node's error and returns empty, unwritten outputs;
        # the process is corrupt from then on (a later run segfaults): its worker serves no more tests
        self._spoiled = self._spoiled or any(a.size == 0 and len(want) == a.ndim and all(want)
                                             for a, want in zip(outputs, self._declared, strict=False))
        return outputs

    def spoiled(self) -> bool:
        return self._spoiled

    def repro_source(self, variant: Variant) -> str:
        reshape = ("    model.reshape({p: ov.PartialShape.dynamic(p.get_partial_shape().rank) for p in model.inputs})\n"
                   if variant.options["dynamic"] else "")
        return f'''
import json
import pathlib

import numpy as np
import onnx
import openvino as ov


class DroppedInput(Exception):
    """The compiled model lacks a graph input: the outputs cannot depend on it."""


def run_model(model_path, inputs):
    graph_inputs = [i.name for i in onnx.load(model_path).graph.input]
    # dlcfuzz's graph beside the model names its pinned inputs (constant-like operands fed at run time),
    # which OpenVINO may drop where the ONNX semantics ignore them
    graph_json = pathlib.Path(model_path).with_name("graph.json")
    pinned = set()
    if graph_json.is_file():
        pinned = {{v["name"] for v in json.loads(graph_json.read_text())["values"]
                  if v["kind"] == "input" and "data" in v}}
    core = ov.Core()
    with open(model_path, "rb") as f:  # from bytes, as dlcfuzz reads it: OpenVINO can differ from a path
        model = core.read_model(f.read())
    # each Parameter is fed the graph input of its name (by position where OpenVINO lost the name)
    params = [set(p.get_names()) for p in model.inputs]
    dropped = [n for n in graph_inputs if not any(n in p for p in params)]
    if len(params) < len([n for n in graph_inputs if n not in dropped or n not in pinned]):
        raise DroppedInput(f"OpenVINO's model has {{len(params)}} inputs for the graph's {{len(graph_inputs)}}: "
                           f"it dropped {{', '.join(dropped) or 'an input'}}")
    unnamed = iter([n for n in dropped if n not in pinned] + [n for n in dropped if n in pinned])
    names = [next((n for n in graph_inputs if n in p), None) or next(unnamed) for p in params]
{reshape}    compiled = core.compile_model(model, "{DEVICE}", {variant.options["config"]!r})
    result = compiled.create_infer_request().infer([inputs[n] for n in names])
    return [np.array(result[o]) for o in compiled.outputs]
'''


@dataclass
class ProgramImport:
    """A torch-native program as OpenVINO's PyTorch frontend converted it (``backends/program_frontend.py``)."""

    program: Any  # program_frontend.FrontendProgram
    model: Any  # openvino.Model


@dataclass
class ProgramCompiled:
    program: Any  # program_frontend.FrontendProgram
    compiled: Any  # openvino.CompiledModel
    variant: str


def _ov_tensor(a: Any) -> Any:
    """A torch tensor as OpenVINO takes it: its array, or (numpy has no bfloat16) its bits typed bf16."""
    import torch

    if a.dtype == torch.bfloat16:
        import openvino as ov

        return ov.Tensor(a.view(torch.int16).numpy(), list(a.shape), ov.Type.bf16)
    return a.numpy()


def _torch_of(value: Any, element_type: str) -> Any:
    """An OpenVINO output as a torch tensor (a bf16 output comes back as 16-bit values holding its bits)."""
    import torch

    v = np.array(value)
    if "bfloat16" in element_type:
        return torch.from_numpy(v.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(v)


class OpenVinoTorchBackend(OpenVinoBackend):
    """OpenVINO's PyTorch frontend on a migrated torch call (a call spec, see
    ``dlcfuzz.export.torch_call``): ``ov.convert_model(module, example_input=...)`` with the inputs'
    static shapes, then the same plugin variants as ``openvino``; inputs and outputs by position.

    The frontend takes the module through TorchScript tracing, OpenVINO's documented path for an
    ``nn.Module``, rather than through an ExportedProgram: on the latter
    (OpenVINO 2026.4) every input becomes fully dynamic whatever the program's static shapes, so the
    CPU plugin rejects e.g. conv2d with its weight as an input ("dynamic weights"), the ``f32-dynamic``
    variant would test nothing new, and fewer ops have converters (aten._unique2 has none), while
    torch.export itself refuses data-dependent shapes (one_hot) that tracing records.  torch's own
    trace is tried first, so that a call torch cannot trace is a TorchExportError, not OpenVINO's."""

    name = "openvino-torch"
    checks_models = False  # the model is a torch call: torch validates it, not OpenVINO
    # no frontend_modules: coverage.py measuring openvino.frontend.pytorch breaks its imports ("No module named
    # openvino._pyopenvino.util"), and its converters are C++ anyway

    def available(self) -> tuple[bool, str]:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return False, f"{self.name}: package 'torch' is not installed (pip install torch)"
        return super().available()

    def load(self, test: Test) -> Any:
        import warnings

        import openvino as ov
        import torch

        from dlcfuzz.backends.program_frontend import is_program_test
        from dlcfuzz.backends.torch_library import TorchExportError, example_args, first_line, load_call

        if is_program_test(test):
            return self.load_program(test)
        module, names = load_call(test)
        args = example_args(names, test.inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings
            try:
                torch.jit.trace(module, args, strict=False)
            except Exception as e:
                raise TorchExportError(f"torch.jit.trace failed: {type(e).__name__}: {first_line(e)}") from e
            model = ov.convert_model(module, example_input=args, input=[ov.PartialShape(list(a.shape)) for a in args])
        return model, names

    def load_program(self, test: Test) -> ProgramImport:
        """A torch-native program: ``torch.export.export`` (OpenVINO's frontend decomposes the
        ExportedProgram itself), then ``ov.convert_model`` with the inputs' static shapes."""
        import warnings

        import openvino as ov

        from dlcfuzz.backends.program_frontend import load_program

        program = load_program(test, decompose=False)
        args = program.namespace["make_inputs"]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ov.convert_model(program.ep, input=[ov.PartialShape(list(a.shape)) for a in args])
        return ProgramImport(program, model)

    def compile(self, imported: Any, variant: Variant) -> Any:
        if isinstance(imported, ProgramImport):
            compiled, _ = super().compile((imported.model, []), variant)
            return ProgramCompiled(imported.program, compiled, variant.name)
        return super().compile(imported, variant)

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """A migrated call: the call's inputs by position.  A torch-native program: its own inputs as
        contiguous copies (OpenVINO's tensors are dense; bfloat16 as its bits), judged against eager."""
        if not isinstance(compiled, ProgramCompiled):
            return super().run(compiled, inputs)
        from dlcfuzz.backends.program_frontend import dense_inputs, judge_run

        model = compiled.compiled
        result = model.create_infer_request().infer([_ov_tensor(a) for a in dense_inputs(compiled.program)])
        outs = [_torch_of(result[o], str(o.get_element_type())) for o in model.outputs]
        return judge_run(self, compiled.variant, compiled.program, outs, "openvino")

    def program_repro(self, source: str, variant: Variant, title: str) -> str:
        """repro.py of a torch-native program's bug: the program, then this variant's compile and the check."""
        from dlcfuzz.backends.program_frontend import repro_script, repro_tail

        reshape = ("    model.reshape({p: ov.PartialShape.dynamic(p.get_partial_shape().rank) for p in model.inputs})\n"
                   if variant.options["dynamic"] else "")
        run = f'''
import numpy as np
import openvino as ov


def feed(a):
    if a.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits, typed for OpenVINO
        return ov.Tensor(a.view(torch.int16).numpy(), list(a.shape), ov.Type.bf16)
    return a.numpy()


def run_compiled(ep, args):
    """The exported program through OpenVINO's frontend, compiled, run on the (contiguous) args."""
    model = ov.convert_model(ep, input=[ov.PartialShape(list(a.shape)) for a in args])
{reshape}    compiled = ov.Core().compile_model(model, "{DEVICE}", {variant.options["config"]!r})
    result = compiled.create_infer_request().infer([feed(a) for a in args])
    outs = []
    for o in compiled.outputs:
        v = np.array(result[o])
        bf16 = str(o.get_element_type()) == "<Type: 'bfloat16'>"
        outs.append(torch.from_numpy(v.view(np.int16)).view(torch.bfloat16) if bf16 else torch.from_numpy(v))
    return outs
'''
        return repro_script(source, repro_tail(title, self.name, variant.name, variant.options, run))

    def repro_source(self, variant: Variant) -> str:
        from dlcfuzz.backends.torch_library import call_source

        reshape = ("    model.reshape({p: ov.PartialShape.dynamic(p.get_partial_shape().rank) for p in model.inputs})\n"
                   if variant.options["dynamic"] else "")
        return call_source() + f'''

import numpy as np
import openvino as ov
import torch


def run_model(model_path, inputs):
    with open(model_path, "rb") as f:  # the torch call: module(x0, x1, ...) makes it
        module, names = build_module(decode_call(f.read()))
    args = tuple(torch.from_numpy(np.array(inputs[n])) for n in names)
    model = ov.convert_model(module, example_input=args, input=[ov.PartialShape(list(a.shape)) for a in args])
{reshape}    compiled = ov.Core().compile_model(model, "{DEVICE}", {variant.options["config"]!r})
    result = compiled.create_infer_request().infer([inputs[n] for n in names])  # by position, as dlcfuzz does
    return [np.array(result[o]) for o in compiled.outputs]
'''
