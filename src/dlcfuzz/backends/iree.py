"""IREE (MLIR): IREE's ONNX importer (ONNX -> MLIR in torch-mlir's ``torch`` dialect),
``iree.compiler`` (``iree-compile``), and the IREE runtime.

Phases:

- import: ``onnx.shape_inference`` (as ``iree-import-onnx`` does) and the importer
  (``iree.compiler.extras.onnx_importer``), which writes every ONNX node as an opaque
  ``torch.operator "onnx.X"``; its result is MLIR text.
- compile: ``iree-compile`` lowers ``torch.operator`` to torch ops (TorchOnnxToTorch), then to
  linalg, and compiles for a target.  An ONNX operator (or a form of one) that the lowering does
  not handle stays a ``torch.operator`` and fails to legalize: that is a decline, re-raised as
  ``IreeUnsupported`` naming the operator (see ``oracle/unsupported.py``).
- run: the compiled module on IREE's runtime; inputs are fed by position in the order of the
  function's arguments, which is the model's graph inputs without its initializers.

Variants are settings x targets: ``O0``/``O3`` (``--iree-opt-level``) x ``generic``/``host``
(``--iree-llvmcpu-target-cpu``), and ``O3-cuda`` (``--iree-cuda-target=sm_80``) where a CUDA
device exists.  f64 is kept f64 (``iree-compile`` may otherwise demote it to f32, which would
make every float64 test a dtype mismatch by design).
"""

from __future__ import annotations

import inspect
import re
import signal
import sys
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant

SETTINGS = {"O0": "--iree-opt-level=O0", "O3": "--iree-opt-level=O3"}
CPUS = ("generic", "host")
# IREE 3.13 names Hopper "sm_90" but fails on it with "missing GPU target"; sm_80 code runs on H100 too
CUDA_ARCH = "sm_80"
COMMON_FLAGS = ("--iree-input-demote-f64-to-f32=false",)


# ---- standalone: repro_source copies this section verbatim (it may use only re, signal, dataclass,
# numpy, onnx and IREE), so that a bundle's repro.py imports, compiles, runs and fails exactly as here
class IreeImportError(Exception):
    """IREE's ONNX importer rejected the model (its Python code raised)."""


class IreeUnsupported(Exception):
    """The model uses an ONNX operator (or a form of it) that IREE's ONNX lowering leaves alone."""


class IreeCompileError(Exception):
    """``iree-compile`` failed: the message is its first diagnostics, without source locations."""


class IreeCompilerCrash(Exception):
    """``iree-compile`` died of a signal: the message names it and the innermost compiler frames."""


@dataclass
class Imported:
    mlir: str
    function: str  # the MLIR function the importer made (named after the ONNX graph)
    input_names: list[str]  # ONNX graph inputs in the function's argument order
    output_dtypes: list  # numpy dtypes the ONNX graph declares for its outputs (None: not a tensor)


def import_model(model_bytes: bytes) -> Imported:
    import onnx
    from iree.compiler import ir
    from iree.compiler.extras import onnx_importer

    model = onnx.load_model_from_string(model_bytes)
    # iree-import-onnx infers shapes first, with data propagation: the importer needs typed values
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    info = onnx_importer.ModelInfo(model)
    module = info.create_module(context=ir.Context()).operation
    try:
        onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
        module.verify()
    except onnx_importer.OnnxImportError as e:
        raise IreeImportError(str(e)) from e
    declared = [_numpy_dtype(o.type.tensor_type.elem_type) for o in model.graph.output]
    # the function's arguments: the graph inputs that are not initializers, in order
    return Imported(module.get_asm(), model.graph.name, list(info.main_graph.input_map), declared)


def _numpy_dtype(elem_type: int) -> np.dtype | None:
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def compile_module(imported: Imported, targets: list[str], flags: list[str], driver: str) -> Any:
    """The imported model compiled by iree-compile and loaded on ``driver``: a callable function."""
    import iree.compiler as ic
    import iree.runtime as rt

    try:
        vmfb = ic.compile_str(imported.mlir, target_backends=targets, input_type="onnx", extra_args=flags)
    except ic.CompilerToolError as e:
        raise compile_error(str(e)) from None
    ctx = rt.SystemContext(config=rt.Config(driver))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    return ctx.modules.module[imported.function]


def run_function(function: Any, imported: Imported, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    # np.asarray, not np.ascontiguousarray: that makes a 0-d input 1-d, which IREE rejects
    args = [np.asarray(inputs[n], order="C") for n in imported.input_names]
    return as_declared(_host(function(*args)), imported.output_dtypes)


def _host(x: Any) -> list[np.ndarray]:
    if isinstance(x, list | tuple):
        return [a for item in x for a in _host(item)]
    return [np.asarray(x.to_host() if hasattr(x, "to_host") else x)]


def as_declared(outputs: list[np.ndarray], declared: list) -> list[np.ndarray]:
    """IREE's ABI has signless integers: a uint8 output comes back as int8 with the same bits.  Such
    an output is viewed as the declared type (bits unchanged); any other dtype is left as it is."""
    out = []
    for o, want in zip(outputs, declared + [None] * (len(outputs) - len(declared)), strict=False):
        same_bits = (want is not None and o.dtype != want and o.dtype.kind in "iu" and want.kind in "iu"
                     and o.dtype.itemsize == want.itemsize)
        out.append(o.view(want) if same_bits else o)
    return out


_SIGNAL = re.compile(r"^Error code: -(\d+)$", re.M)
# a stack frame's function in IREE's or torch-mlir's own code (not LLVM's signal handler, MLIR's core)
_OWN_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ .*?((?:mlir::)?(?:torch|iree_compiler)::[\w:]+)\(", re.M)
# LLVM's fatal error ("LLVM ERROR: Unhandled type in getScalarTypeForType: ui16") or a failed assertion
_FATAL = re.compile(r"^(?:LLVM ERROR: .+|.*Assertion `.+' failed\.?)$", re.M)
_LOCATION = re.compile(r"^(?:\S+:\d+:\d+: |<[^>]*>:\d+(?::\d+)?: |loc\([^)]*\): )")  # "<unknown>:0: " too
_ERROR = re.compile(r"^(?:[\w-]+: )?error: ")
_ILLEGAL = re.compile(r"failed to legalize operation 'torch\.operator'")
_ONNX_OP = re.compile(r'torch\.operator "onnx\.(\w+)"')


def compile_error(text: str) -> Exception:
    """The exception for iree-compile's output ``text``: ``IreeUnsupported`` naming the ONNX operator
    left unlowered, else ``IreeCompileError`` with the first error and the note after it (the
    diagnostics carry the MLIR location and the op, which dedup normalizes)."""
    crashed = _SIGNAL.search(text)
    if crashed:
        number = int(crashed.group(1))
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        # what the compiler said before it died names the defect; the frames a stack dump lists do not always
        # (one crash is dumped with one frame of torch-mlir's in one run and two in another: c48)
        said = _FATAL.search(text)
        if said:
            return IreeCompilerCrash(f"iree-compile killed by {name}: {said.group(0).strip()}")
        frames = " <- ".join(_OWN_FRAME.findall(text)[:2]) or "no frame of IREE or torch-mlir"
        return IreeCompilerCrash(f"iree-compile killed by {name} in {frames}")
    lines = [_LOCATION.sub("", ln.strip()) for ln in text.splitlines()]
    # the first error is the most specific one (the linker's "iree-lld: error: undefined symbol: cos"
    # comes before "error: failed to link executable")
    errors = [i for i, ln in enumerate(lines) if _ERROR.match(ln)]
    if not errors:
        return IreeCompileError(next((ln for ln in lines if ln), "iree-compile failed"))
    first = errors[0]
    if _ILLEGAL.search(lines[first]):
        op = next((m.group(1) for ln in lines[first:first + 4] if (m := _ONNX_OP.search(ln))), "?")
        return IreeUnsupported(f"IREE's ONNX importer does not lower onnx.{op}: {lines[first]}")
    note = next((ln for ln in lines[first + 1:first + 3] if ln.startswith("note:") or ln.startswith("%")), "")
    return IreeCompileError("\n".join(x for x in (lines[first], note) if x))


# ---- end of the standalone section


@cache
def has_cuda() -> bool:
    """Whether IREE's CUDA driver finds a device (False where the driver or a GPU is missing)."""
    try:
        import iree.runtime as rt

        return bool(rt.get_driver("cuda").query_available_devices())
    except Exception:  # no libcuda, no device: IREE raises RuntimeError/ValueError
        return False


def standalone_source() -> str:
    """This module's standalone section, as the repro scripts' copy."""
    text = inspect.getsource(sys.modules[__name__])
    start = text.index("# ---- standalone:")
    return text[start:text.index("# ---- end of the standalone section", start)]


class IreeBackend(Backend):
    """IREE: its ONNX importer, iree-compile for llvm-cpu (and cuda), the IREE runtime."""

    name = "iree"
    package = "iree.compiler"
    pip = "iree-base-compiler==3.13.0 iree-base-runtime==3.13.0"

    def available(self) -> tuple[bool, str]:
        import importlib.util

        for module in ("iree.compiler", "iree.runtime"):
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:  # the parent package "iree" is missing
                found = False
            if not found:
                return False, f"{self.name}: package '{module}' is not installed (pip install {self.pip})"
        return True, ""

    def version(self) -> str:
        from importlib.metadata import version

        return version("iree-base-compiler")

    def variants(self) -> list[Variant]:
        out = [Variant(f"{s}-{cpu}", {"targets": ["llvm-cpu"], "driver": "local-task",
                                      "flags": [*COMMON_FLAGS, flag, f"--iree-llvmcpu-target-cpu={cpu}"]})
               for s, flag in SETTINGS.items() for cpu in CPUS]
        if has_cuda():
            cuda = [*COMMON_FLAGS, SETTINGS["O3"], f"--iree-cuda-target={CUDA_ARCH}"]
            out.append(Variant("O3-cuda", {"targets": ["cuda"], "driver": "cuda", "flags": cuda}))
        return out

    def supports(self, ops: set[str], graph: Any = None) -> bool:
        from dlcfuzz.backends.iree_profile import lowered_ops

        return ops <= lowered_ops()

    def load(self, test: Test) -> Imported:
        imported = import_model(test.model)
        self.artifact("model.mlir", imported.mlir)
        return imported

    def compile(self, imported: Imported, variant: Variant) -> tuple[Any, Imported]:
        o = variant.options
        return compile_module(imported, list(o["targets"]), list(o["flags"]), o["driver"]), imported

    def run(self, compiled: tuple[Any, Imported], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        function, imported = compiled
        return run_function(function, imported, inputs)

    def repro_source(self, variant: Variant) -> str:
        o = variant.options
        return f'''
from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Any

import numpy as np

TARGETS = {list(o["targets"])!r}
FLAGS = {list(o["flags"])!r}
DRIVER = {o["driver"]!r}


{standalone_source()}
def run_model(model_path, inputs):
    with open(model_path, "rb") as f:
        imported = import_model(f.read())
    return run_function(compile_module(imported, TARGETS, FLAGS, DRIVER), imported, inputs)
'''
