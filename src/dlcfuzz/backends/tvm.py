"""Apache TVM (Relax): ONNX frontend, ``tvm.compile``, the Relax VM on CPU.

Variants are settings x targets:

- settings: ``unfused`` is what ``tvm.compile`` does by default on CPU (LegalizeOps and VM
  lowering only) with LLVM at -O0; ``fused`` is the CPU backend's own pipeline
  (``relax.get_default_pipeline``: FoldConstant, FuseOps, FuseTIR) with LLVM at -O3.  The two
  share the frontend and little else, so they make a useful metamorphic pair.
- targets: ``generic`` (plain ``llvm``) and ``native`` (``llvm`` with this machine's ``-mcpu``, so
  LLVM may use AVX-512 etc.; only when LLVM knows the host CPU), and ``cuda`` when a GPU exists.

Each variant reports (``Backend.fired``) the passes of its compile, Relax and TIR, that changed the
module: ``tvm:pass:<name>``, found by a pass instrument comparing the module before and after each pass
structurally (about 5% of a tiny model's compile time).

Targets are TVM 0.27 JSON dicts: the ``"llvm -mcpu=..."`` string form is no longer accepted.

``tvm-torch`` (``TvmTorchBackend``) is the same compiler behind TVM's PyTorch frontend: a migrated
torch call, or a torch-native program (``gen/torch_program.py``: ``Model`` on ``make_inputs()``), goes
through ``torch.export`` and ``from_exported_program``.  A program's compiled run takes contiguous copies of
its inputs (TVM's tensors are dense) and is judged against eager torch in the worker
(``backends/program_frontend.py``: float64 eager as the tie-breaker; outputs only: in-place writes to the
inputs and backward are out of this path's scope).  Both backends hand over the
artifact ``conversion``: the frontend conversion functions that handle the model (for dedup).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant

# the repro scripts' copy of ``_flatten`` (they may import nothing of dlcfuzz)
FLATTEN_SOURCE = '''def flatten(out):
    if isinstance(out, tvm.runtime.Tensor):
        return [out.numpy()]
    if isinstance(out, tvm.runtime.ShapeTuple):
        return [np.array(list(out), dtype=np.int64)]
    return [a for o in out for a in flatten(o)]
'''

SETTINGS = {
    "unfused": {"pipeline": "default", "opt_level": 0},
    "fused": {"pipeline": "cpu", "opt_level": 3},
}


# passes that only run other passes: they change the module whenever one inside does
WRAPPER_PASSES = frozenset({"sequential", "_pipeline"})


def pass_watch() -> Any:
    """A pass instrument whose ``changed`` collects the names of the passes that returned a module
    structurally different from the one they got (tensor contents ignored: a folded constant also
    changes the module's structure)."""
    import tvm
    import tvm_ffi

    @tvm.instrument.pass_instrument
    class PassWatch:
        def __init__(self) -> None:
            self.before: list[Any] = []  # a stack: passes nest (a Sequential runs its passes inside)
            self.changed: set[str] = set()

        def run_before_pass(self, mod: Any, info: Any) -> None:
            self.before.append(mod)

        def run_after_pass(self, mod: Any, info: Any) -> None:
            before = self.before.pop()
            if info.name in WRAPPER_PASSES or info.name in self.changed or before.same_as(mod):
                return
            if not tvm_ffi.structural_equal(before, mod, skip_tensor_content=True):
                self.changed.add(info.name)

    return PassWatch()


@cache
def host_cpu() -> str:
    """LLVM's name for this machine's CPU ("" if LLVM does not know it)."""
    import tvm

    cpu = str(tvm.target.codegen.llvm_get_system_cpu())
    return "" if cpu in ("", "generic") else cpu


@cache
def has_cuda() -> bool:
    import tvm

    return bool(tvm.cuda().exist)


def target_dict(variant: Variant) -> dict[str, Any]:
    return dict(variant.options["target"])


@dataclass
class Compiled:
    vm: Any  # tvm.relax.VirtualMachine
    device: Any  # tvm.runtime.Device
    input_names: list[str]  # the Relax main's parameters, in order


class TvmBackend(Backend):
    """TVM's Relax ONNX frontend, compiled by ``tvm.compile``, run on the Relax VM."""

    name = "tvm"
    package = "tvm"
    pip = "apache-tvm"
    frontend_modules = ("tvm/relax/frontend/onnx/",)
    # tvm_ffi imports torch (2 of a worker's 5.6 s of start-up CPU) for DLPack exchange with torch tensors,
    # which the ONNX path never makes
    unused_imports: tuple[str, ...] = ("torch",)
    # Which targets to try; each is used only where it exists (a subclass may narrow this).
    targets: tuple[str, ...] = ("generic", "native", "cuda")

    def variants(self) -> list[Variant]:
        found: dict[str, dict[str, Any]] = {}
        if "generic" in self.targets:
            found["generic"] = {"kind": "llvm"}
        if "native" in self.targets and host_cpu():
            found["native"] = {"kind": "llvm", "mcpu": host_cpu()}
        out = []
        for tname, target in found.items():
            for sname, setting in SETTINGS.items():
                llvm = {**target, "opt-level": setting["opt_level"]}
                out.append(Variant(f"{sname}-{tname}", {"pipeline": setting["pipeline"], "target": llvm}))
        if "cuda" in self.targets and has_cuda():
            # tvm.compile's "default" picks the GPU pipeline with DLight schedules; compared with the first
            # CPU variant that ran (the cross-device oracle)
            cuda = {"kind": "cuda", "host": {"kind": "llvm"}}
            out.append(Variant("default-cuda", {"pipeline": "default", "target": cuda, "device": "cuda"}))
        return out

    def device_notes(self) -> dict[str, str]:
        if "cuda" not in self.targets or has_cuda():
            return {}
        import tvm

        if str(tvm.support.libinfo().get("USE_CUDA", "OFF")).upper() in ("OFF", "", "NONE"):
            return {"cuda": f"{self.name}: this TVM is built without CUDA"}
        return {"cuda": f"{self.name}: TVM finds no CUDA device (tvm.cuda().exist is False)"}

    def load(self, test: Test) -> Any:
        import onnx
        from tvm.relax.frontend.onnx import from_onnx

        model = onnx.load_model_from_string(test.model)
        # before the frontend runs, so that a crash in it still names the converters involved
        self.artifact("conversion", onnx_conversion(model))
        # initializers become constants; every graph input stays a runtime parameter of main
        try:
            return from_onnx(model, keep_params_in_input=False), _input_names(model)
        except Exception as e:
            # TVM's converter errors rarely name their operator ("Only constant axes currently supported"):
            # the support profile needs to know which node was refused
            op = _converting(e.__traceback__)
            if op:
                e.add_note(f"while converting onnx.{op}")
            raise

    def compile(self, imported: Any, variant: Variant) -> Compiled:
        import tvm
        from tvm import relax

        mod, names = imported
        target = tvm.target.Target(target_dict(variant))
        pipeline = relax.get_default_pipeline(target) if variant.options["pipeline"] == "cpu" else "default"
        if not self.report_fired:
            ex = tvm.compile(mod, target, relax_pipeline=pipeline)
        else:
            watch, ctx = pass_watch(), tvm.transform.PassContext.current()
            # the current context (TVM's defaults in a worker) with the watch added
            watched = tvm.transform.PassContext(ctx.opt_level, list(ctx.required_pass), list(ctx.disabled_pass),
                                                [*ctx.instruments, watch], dict(ctx.config))
            try:
                with watched:
                    ex = tvm.compile(mod, target, relax_pipeline=pipeline)
            finally:  # the passes that changed the module before an error count too
                self.fired([f"tvm:pass:{name}" for name in sorted(watch.changed)])
        device = tvm.cuda() if target.kind.name == "cuda" else tvm.cpu()
        return Compiled(relax.VirtualMachine(ex, device), device, names)

    def run(self, compiled: Compiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        import tvm

        args = [tvm.runtime.tensor(np.asarray(inputs[n], order="C"), compiled.device) for n in compiled.input_names]
        return _flatten(compiled.vm["main"](*args))

    def repro_source(self, variant: Variant) -> str:
        return f'''
import numpy as np
import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

TARGET = {target_dict(variant)!r}
PIPELINE = {variant.options["pipeline"]!r}  # "cpu": relax.get_default_pipeline(target); else tvm.compile's default


{FLATTEN_SOURCE}

def run_model(model_path, inputs):
    model = onnx.load(model_path)
    mod = from_onnx(model, keep_params_in_input=False)
    target = tvm.target.Target(TARGET)
    pipeline = relax.get_default_pipeline(target) if PIPELINE == "cpu" else "default"
    ex = tvm.compile(mod, target, relax_pipeline=pipeline)
    dev = tvm.cuda() if target.kind.name == "cuda" else tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    inits = {{t.name for t in model.graph.initializer}}
    names = [i.name for i in model.graph.input if i.name not in inits]
    return flatten(vm["main"](*[tvm.runtime.tensor(np.asarray(inputs[n], order="C"), dev) for n in names]))
'''


@dataclass
class ProgramImport:
    """A torch-native program as TVM's PyTorch frontend imported it (``backends/program_frontend.py``)."""

    program: Any  # program_frontend.FrontendProgram
    mod: Any  # tvm.IRModule


@dataclass
class ProgramCompiled:
    program: Any  # program_frontend.FrontendProgram
    compiled: Compiled
    variant: str


def _torch_outputs(out: Any) -> list[Any]:
    """The VM's result as torch tensors (by DLPack, so that bfloat16 stays bfloat16), in output order."""
    import torch
    import tvm

    if isinstance(out, tvm.runtime.ShapeTuple):
        return [torch.tensor(list(out), dtype=torch.int64)]
    if isinstance(out, tvm.runtime.Tensor):
        return [torch.from_dlpack(out.copyto(tvm.cpu())).clone()]
    return [a for o in out for a in _torch_outputs(o)]


def _input_names(model: Any) -> list[str]:
    """The graph inputs that are not initializers, in order: the frontend's parameters of main."""
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def _flatten(out: Any) -> list[np.ndarray]:
    """The VM's result (one tensor, or a tuple for several graph outputs) as arrays in output order."""
    import tvm

    if isinstance(out, tvm.runtime.Tensor):
        return [out.numpy()]
    if isinstance(out, tvm.runtime.ShapeTuple):  # a shape folded to a value, e.g. Shape of a static tensor
        return [np.array(list(out), dtype=np.int64)]
    return [a for o in out for a in _flatten(o)]


# ---------------------------------------------------------------------------------------------
def _converting(tb: Any) -> str:
    """The ONNX operator TVM's importer was converting when it raised (its innermost
    ``_convert_operator`` frame's ``op_name``), or ""."""
    op = ""
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_convert_operator":
            op = str(tb.tb_frame.f_locals.get("op_name", op))
        tb = tb.tb_next
    return op


# Which frontend conversion functions handle a model (OPERA dedups bugs by them)
# ---------------------------------------------------------------------------------------------
def _graph_ops(graph: Any) -> set[str]:
    """The op types of an ONNX graph's nodes, including those in subgraphs (If/Loop/Scan bodies)."""
    ops: set[str] = set()
    for node in graph.node:
        ops.add(node.op_type)
        for attr in node.attribute:
            for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                ops |= _graph_ops(g)
    return ops


def onnx_conversion(model: Any) -> str:
    """"onnx:<converter class>,..." (sorted, unique) of the Relax ONNX frontend's converters for the
    model's op types; "onnx:missing:<op>" for an op type the frontend has no converter for."""
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

    table = _get_convert_map()
    names = {f"onnx:{table[op].__name__}" if op in table else f"onnx:missing:{op}" for op in _graph_ops(model.graph)}
    return ",".join(sorted(names))


def converter_name(key: str, fn: Any) -> str:
    """A readable name of the ExportedProgram frontend's converter ``fn`` of the aten op ``key``:
    a method by its name ("_conv2d"), a converter made by a factory by the factory and the Relax op
    it wraps ("_binary_op(add)"), a lambda or partial by the op key."""
    import functools
    import types

    if isinstance(fn, types.MethodType):
        return fn.__func__.__name__
    name = getattr(fn, "__name__", "")
    qualname = getattr(fn, "__qualname__", "")
    if isinstance(fn, functools.partial) or not name or name == "<lambda>":
        return key
    if "<locals>" in qualname:  # a closure made by a factory such as _unary_op(relax.op.abs)
        factory = qualname.split(".<locals>")[0].rsplit(".", 1)[-1]
        cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ()), strict=False))
        for var in ("relax_op", "op", "intrinsic_op"):
            op = cells.get(var)
            op = op.func if isinstance(op, functools.partial) else op
            if getattr(op, "__name__", ""):
                return f"{factory}({op.__name__})"
        return f"{factory}:{key}"
    return name


def ep_conversion(exported_program: Any, convert_map: dict[str, Any]) -> str:
    """"ep:<converter>,..." (sorted, unique) for the call_function nodes of an ExportedProgram, as
    the importer looks them up (by ``node.target.__name__``); "ep:missing:<op>" where it has none."""
    names = set()
    for node in exported_program.graph.nodes:
        if node.op != "call_function":
            continue
        key = getattr(node.target, "__name__", str(node.target))
        names.add(f"ep:{converter_name(key, convert_map[key])}" if key in convert_map else f"ep:missing:{key}")
    return ",".join(sorted(names))


# ---------------------------------------------------------------------------------------------
# TVM's PyTorch frontend (torch.export -> from_exported_program), for migrated torch calls
# ---------------------------------------------------------------------------------------------
def _decompose(exported_program: Any) -> Any:
    """What ``from_exported_program`` does first by default (core-ATen decomposition, skipped when
    the program holds sparse tensors), done here so the conversion names see the decomposed graph."""
    import torch

    from dlcfuzz.backends.torch_library import TorchExportError, first_line

    tensors = [*(t for _, t in exported_program.named_buffers()), *(t for _, t in exported_program.named_parameters()),
               *exported_program.constants.values(), *exported_program.tensor_constants.values()]
    if any(isinstance(t, torch.Tensor) and t.layout != torch.strided for t in tensors):
        return exported_program
    try:
        return exported_program.run_decompositions()
    except Exception as e:  # torch's own decompositions: not TVM's code
        raise TorchExportError(f"torch.export failed in run_decompositions: {type(e).__name__}: {first_line(e)}") from e


class TvmTorchBackend(TvmBackend):
    """TVM's Relax PyTorch frontend (``from_exported_program``) on a migrated torch call (a call
    spec, see ``dlcfuzz.export.torch_call``), compiled and run like ``tvm``.  Parameters and buffers
    become constants; main's parameters are the call's tensors x0, x1, ... in order."""

    name = "tvm-torch"
    unused_imports = ()
    checks_models = False  # the model is a torch call: torch.export validates it, not TVM
    frontend_modules = ("tvm/relax/frontend/torch/",)

    def available(self) -> tuple[bool, str]:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return False, f"{self.name}: package 'torch' is not installed (pip install torch)"
        return super().available()

    def load(self, test: Test) -> Any:
        from tvm.relax.frontend.torch import from_exported_program
        from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

        from dlcfuzz.backends.program_frontend import is_program_test, load_program
        from dlcfuzz.backends.torch_library import example_args, load_call, torch_export

        if is_program_test(test):  # a torch-native program: exported and decomposed by load_program
            program = load_program(test)
            self.artifact("conversion", ep_conversion(program.ep, ExportedProgramImporter().convert_map))
            return ProgramImport(program, from_exported_program(program.ep, keep_params_as_input=False,
                                                                run_ep_decomposition=False))
        module, names = load_call(test)
        ep = _decompose(torch_export(module, example_args(names, test.inputs)))
        self.artifact("conversion", ep_conversion(ep, ExportedProgramImporter().convert_map))
        mod = from_exported_program(ep, keep_params_as_input=False, run_ep_decomposition=False)
        return mod, names

    def compile(self, imported: Any, variant: Variant) -> Any:
        if isinstance(imported, ProgramImport):
            return ProgramCompiled(imported.program, super().compile((imported.mod, []), variant), variant.name)
        return super().compile(imported, variant)

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """A migrated call: the call's inputs.  A torch-native program: its own inputs as contiguous copies
        (TVM's tensors are dense), handed over by DLPack (bfloat16 included), judged against eager."""
        if not isinstance(compiled, ProgramCompiled):
            return super().run(compiled, inputs)
        import tvm

        from dlcfuzz.backends.program_frontend import dense_inputs, judge_run

        c = compiled.compiled
        args = [tvm.runtime.from_dlpack(a) for a in dense_inputs(compiled.program)]
        if c.device.dlpack_device_type() != tvm.cpu().dlpack_device_type():
            args = [a.copyto(c.device) for a in args]
        return judge_run(self, compiled.variant, compiled.program, _torch_outputs(c.vm["main"](*args)), "tvm")

    def program_repro(self, source: str, variant: Variant, title: str) -> str:
        """repro.py of a torch-native program's bug: the program, then this variant's compile and the check."""
        from dlcfuzz.backends.program_frontend import repro_script, repro_tail

        run = f'''
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program

TARGET = {target_dict(variant)!r}
PIPELINE = {variant.options["pipeline"]!r}  # "cpu": relax.get_default_pipeline(target); else tvm.compile's default


def flatten(out):
    if isinstance(out, tvm.runtime.ShapeTuple):
        return [torch.tensor(list(out), dtype=torch.int64)]
    if isinstance(out, tvm.runtime.Tensor):
        return [torch.from_dlpack(out.copyto(tvm.cpu())).clone()]
    return [a for o in out for a in flatten(o)]


def run_compiled(ep, args):
    """The exported program through TVM's frontend, compiled, run on the (contiguous) args."""
    ep = ep.run_decompositions()  # as dlcfuzz does before the frontend (its conversion names see this graph)
    mod = from_exported_program(ep, keep_params_as_input=False, run_ep_decomposition=False)
    target = tvm.target.Target(TARGET)
    pipeline = relax.get_default_pipeline(target) if PIPELINE == "cpu" else "default"
    dev = tvm.cuda() if target.kind.name == "cuda" else tvm.cpu()
    vm = relax.VirtualMachine(tvm.compile(mod, target, relax_pipeline=pipeline), dev)
    outs = flatten(vm["main"](*[tvm.runtime.from_dlpack(a).copyto(dev) for a in args]))
    specs = ep.graph_signature.output_specs  # the Model's outputs, not input mutations
    return [outs[i] for i, s in enumerate(specs) if s.kind.name == "USER_OUTPUT"] if len(outs) == len(specs) else outs
'''
        return repro_script(source, repro_tail(title, self.name, variant.name, variant.options, run))

    def repro_source(self, variant: Variant) -> str:
        from dlcfuzz.backends.torch_library import call_source

        return call_source() + f'''

import numpy as np
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program

TARGET = {target_dict(variant)!r}
PIPELINE = {variant.options["pipeline"]!r}  # "cpu": relax.get_default_pipeline(target); else tvm.compile's default


{FLATTEN_SOURCE}

def run_model(model_path, inputs):
    with open(model_path, "rb") as f:  # the torch call: module(x0, x1, ...) makes it
        module, names = build_module(decode_call(f.read()))
    ep = torch.export.export(module, tuple(torch.from_numpy(np.array(inputs[n])) for n in names))
    mod = from_exported_program(ep, keep_params_as_input=False)  # parameters become constants
    target = tvm.target.Target(TARGET)
    pipeline = relax.get_default_pipeline(target) if PIPELINE == "cpu" else "default"
    ex = tvm.compile(mod, target, relax_pipeline=pipeline)
    dev = tvm.cuda() if target.kind.name == "cuda" else tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    return flatten(vm["main"](*[tvm.runtime.tensor(np.asarray(inputs[n], order="C"), dev) for n in names]))
'''
