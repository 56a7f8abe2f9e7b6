"""PyTorch: the dlcfuzz graph as a generated torch.nn.Module (``dlcfuzz.export.torch``), run eagerly
(the torch baseline) and through ``torch.compile`` with TorchInductor on the CPU and, where torch
sees a GPU, on CUDA (Triton kernels).

The ONNX bytes are unused: torch has no ONNX frontend, so the import phase builds the module from
the graph JSON.  Inductor compiles lazily on the first call, so compile() makes that call with
the test's inputs; run() calls again.  Each compiled variant reports (``Backend.fired``) the Inductor
counters its compile raised (``inductor:<counter group>:<name>``): pattern rewrites by name, folding,
extern kernels.

``inductor-torch`` (``InductorTorchBackend``) compiles a migrated torch call (a call spec, see
``dlcfuzz.export.torch_call``) the same way, statically and with dynamic shapes.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant

# name -> options of torch_ops.compile_module (no "backend": eager; no "device": the CPU)
VARIANTS = {
    # torch's own kernels on dlcfuzz's exported module, no compiler: what Inductor is judged against
    # (its disagreement with the ONNX baseline is the exporter's or torch's, not Inductor's)
    "eager": {"uncompiled": True},
    "inductor": {"backend": "inductor"},
    # symbolic shapes: other guards, other kernels (sizes become runtime arguments)
    "inductor-dynamic": {"backend": "inductor", "dynamic": True},
}
# with a GPU: torch's CUDA kernels, judged against its CPU kernels (the cross-device oracle), and
# Inductor's Triton code, judged against those CUDA kernels (so a finding is Inductor's GPU codegen)
CUDA_VARIANTS = {
    "cuda-eager": {"device": "cuda", "compare_with": "eager"},
    "cuda-inductor": {"backend": "inductor", "device": "cuda", "compare_with": "cuda-eager"},
    "cuda-inductor-dynamic": {"backend": "inductor", "dynamic": True, "device": "cuda", "compare_with": "cuda-eager"},
}


# torch._dynamo's counter groups that say what Inductor did to the graph (rewrites that matched, folding,
# extern kernels...); the other groups are Dynamo's capture and AOT bookkeeping
FIRED_GROUPS = ("inductor", "inductor_pattern_matcher_per_pattern")
BOOKKEEPING = ("cache", "async_compile", "triton_bundler")  # counters of caches, not of the compiler's work
# Inductor counts matches per pattern name only while this variable is set; set to a node name no graph
# has, so that its other use (logging the matches of the nodes it names) stays silent
PATTERN_DEBUG = ("TORCHINDUCTOR_PATTERN_MATCH_DEBUG", "dlcfuzz-no-such-node")


def _counters() -> dict[tuple[str, str], int]:
    from torch._dynamo.utils import counters

    return {(g, k): v for g in FIRED_GROUPS for k, v in counters[g].items()}


def fired_keys(before: dict[tuple[str, str], int], after: dict[tuple[str, str], int]) -> list[str]:
    """"inductor:<group>:<counter>" for each counter that grew between the two snapshots."""
    return sorted(f"inductor:{g}:{k}" for (g, k), v in after.items()
                  if v > before.get((g, k), 0) and not any(b in k for b in BOOKKEEPING))


@cache
def name_pattern_handlers() -> None:
    """Inductor counts a pattern by its ``pattern_name``; graph and lowering patterns have none and are
    counted as their class and matched op (one name for every handler of, say, aten.view): name them by
    their handler's function, so that distinct rewrites count distinctly.  Inductor's own counting (and
    its rollback of the matches made while tracing its patterns) is unchanged."""
    from torch._inductor import pattern_matcher as pm

    def handler_name(entry: Any) -> str | None:
        fn = getattr(entry.handler, "func", entry.handler)  # functools.partial: the function behind it
        name = getattr(fn, "__qualname__", None)
        return f"{fn.__module__.rsplit('.', 1)[-1]}.{name}" if name else None

    for cls in (pm.GraphPatternEntry, pm.LoweringPatternEntry):
        cls.pattern_name = property(handler_name)  # type: ignore[attr-defined]


@contextlib.contextmanager
def reporting_fired(backend: Backend) -> Iterator[None]:
    """Reports to ``backend.fired`` the Inductor counters that grew inside the block (a diff, not a
    reset: other variants' compiles in the same worker keep their counts)."""
    if not backend.report_fired:
        yield
        return
    os.environ.setdefault(*PATTERN_DEBUG)
    name_pattern_handlers()
    before = _counters()
    try:
        yield
    finally:
        backend.fired(fired_keys(before, _counters()))


def variants_for(cuda: bool) -> list[Variant]:
    """The variants on this machine: the CPU ones, and the CUDA ones when ``cuda``."""
    table = VARIANTS | (CUDA_VARIANTS if cuda else {})
    return [Variant(name, dict(options)) for name, options in table.items()]


def cuda_reason() -> str:
    """Why torch has no CUDA device here ("" when it has one)."""
    import torch

    if torch.cuda.is_available():
        return ""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no GPU"


@dataclass
class Loaded:
    namespace: dict[str, Any]  # the executed generated source: Model, compile_module, run_module...
    module: Any
    input_names: list[str]
    inputs: list[np.ndarray]  # the test's inputs, for the warm-up call that makes Inductor compile


@dataclass
class Compiled:
    namespace: dict[str, Any]
    fn: Any
    input_names: list[str]
    device: str = "cpu"


_REPRO_TAIL = '''

OPTIONS = {options!r}


def run_model(model_path, inputs):
    import onnx

    parts = onnx_parts(onnx.load(model_path), inputs)  # pinned inputs baked in as the fuzzer's model did
    exec(module_source(*parts), globals())
    fn = compile_module(Model(), OPTIONS)  # on OPTIONS' device, TF32 off
    args = [inputs[name] for name in parts[0]]
    device = OPTIONS.get("device", "cpu")
    if OPTIONS.get("backend"):
        run_module(fn, args, device)  # torch.compile compiles on the first call
    return run_module(fn, args, device)
'''


class InductorBackend(Backend):
    name = "inductor"
    checks_models = False  # dlcfuzz writes the torch module from the graph
    package = "torch"
    pip = "torch==2.13.0"

    def variants(self) -> list[Variant]:
        return variants_for(cuda=not cuda_reason())

    def device_notes(self) -> dict[str, str]:
        why = cuda_reason()
        return {"cuda": f"{self.name}: {why}"} if why else {}

    def supports(self, ops: set[str], graph=None) -> bool:
        """Every operator must be in the exporter's op table; given the graph, also every dtype
        (torch has uint16/32/64 tensors but almost no kernels for them)."""
        from dlcfuzz.export.torch import OPS, unsupported
        from dlcfuzz.spec import onnx_ops

        if graph is not None:
            return unsupported(graph) is None
        return {part for op in ops for part in onnx_ops(op)} <= OPS.keys()  # a composite: its chain's operators

    def load(self, test: Test) -> Loaded:
        from dlcfuzz.export.torch import ExportError, build_namespace, to_torch_source, unsupported
        from dlcfuzz.ir import Graph

        graph = Graph.from_json(test.graph_json)
        why = unsupported(graph)
        if why:  # normally filtered by supports(): say so clearly if a worker gets here anyway
            raise ExportError(why)
        namespace = build_namespace(to_torch_source(graph))
        names = [v.name for v in graph.inputs]
        return Loaded(namespace, namespace["Model"](), names, [test.inputs[n] for n in names])

    def compile(self, imported: Loaded, variant: Variant) -> Compiled:
        ns = imported.namespace
        device = variant.options.get("device", "cpu")
        # compile_module moves the module to the device in place: other variants share the import
        module = imported.module if device == "cpu" else copy.deepcopy(imported.module)
        fn = ns["compile_module"](module, variant.options)
        if variant.options.get("backend"):
            with reporting_fired(self):
                ns["run_module"](fn, imported.inputs, device)  # Inductor compiles on the first call
        return Compiled(ns, fn, imported.input_names, device)

    def run(self, compiled: Compiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return compiled.namespace["run_module"](compiled.fn, [inputs[n] for n in compiled.input_names],
                                                compiled.device)

    def repro_source(self, variant: Variant) -> str:
        """torch_ops + the exporter (which reads the ONNX file at model_path into the same Model
        source as load() writes from the graph JSON) + compile and run as compile()/run() do."""
        from dlcfuzz.export.torch import exporter_source, ops_source

        return ops_source() + "\n\n" + exporter_source() + _REPRO_TAIL.format(options=variant.options)

    def model_source(self, test: Test) -> str:
        """The standalone generated module source of one test (readable, for a bug bundle)."""
        from dlcfuzz.export.torch import to_torch_source
        from dlcfuzz.ir import Graph

        return to_torch_source(Graph.from_json(test.graph_json))


# ---------------------------------------------------------------------------------------------
# Inductor on migrated torch calls
# ---------------------------------------------------------------------------------------------
TORCH_VARIANTS = {"inductor": {"dynamic": False}, "inductor-dynamic": {"dynamic": True}}

# the settings of torch_ops.compile_module, for the call backend and its repro scripts
_CALL_COMPILE = '''
def compile_call(module, dynamic):
    import torch
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    torch.set_num_threads(1)
    inductor_config.compile_threads = 1  # no compile worker pool: tiny graphs, isolated workers
    inductor_config.fx_graph_cache = False  # every compile really compiles: a repro recompiles as the test did
    functorch_config.enable_autograd_cache = False
    return torch.compile(module, backend="inductor", dynamic=dynamic, fullgraph=True)


def call_compiled(fn, names, inputs):
    import torch

    with torch.no_grad():
        result = fn(*[torch.from_numpy(np.array(inputs[n])) for n in names])
    return [t.detach().cpu().resolve_conj().resolve_neg().numpy() for t in tensor_outputs(result)]
'''


@dataclass
class CallCompiled:
    fn: Any
    input_names: list[str]


class InductorTorchBackend(Backend):
    """``torch.compile`` with TorchInductor on a migrated torch call (a call spec, see
    ``dlcfuzz.export.torch_call``), static and dynamic shapes; ``fullgraph=True``, so a call Dynamo
    cannot capture whole is an error, not a silent eager fallback.  Compiling and calling go through
    ``_CALL_COMPILE``, the very code the repro scripts run."""

    name = "inductor-torch"
    checks_models = False
    package = "torch"
    pip = "torch==2.13.0"

    def variants(self) -> list[Variant]:
        return [Variant(name, dict(options)) for name, options in TORCH_VARIANTS.items()]

    def load(self, test: Test) -> Loaded:
        import torch

        from dlcfuzz.backends.torch_library import load_call

        # Every call's forward is the same code object (torch_call's Call.forward), and Dynamo caches
        # per code object: without a reset, a worker's 9th test would hit the recompile limit.  The
        # previous test's compiled variants are done with; this test's variants compile after this.
        torch._dynamo.reset()
        module, names = load_call(test)
        return Loaded(_call_namespace(), module, names, [test.inputs[n] for n in names])

    def compile(self, imported: Loaded, variant: Variant) -> CallCompiled:
        ns = imported.namespace
        inputs = dict(zip(imported.input_names, imported.inputs, strict=True))
        try:
            fn = ns["compile_call"](imported.module, variant.options["dynamic"])
            with reporting_fired(self):
                ns["call_compiled"](fn, imported.input_names, inputs)
        except Exception as e:
            _captures_eagerly(imported, inputs, variant.options["dynamic"], e)
            raise
        return CallCompiled(fn, imported.input_names)  # Inductor compiled on that first call

    def run(self, compiled: CallCompiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return _call_namespace()["call_compiled"](compiled.fn, compiled.input_names, inputs)

    def repro_source(self, variant: Variant) -> str:
        return _namespace_source() + f'''

DYNAMIC = {variant.options["dynamic"]!r}


def run_model(model_path, inputs):
    with open(model_path, "rb") as f:  # the torch call: module(x0, x1, ...) makes it
        module, names = build_module(decode_call(f.read()))
    fn = compile_call(module, DYNAMIC)
    call_compiled(fn, names, inputs)  # torch.compile compiles on the first call
    return call_compiled(fn, names, inputs)
'''


def _captures_eagerly(imported: Loaded, inputs: dict[str, np.ndarray], dynamic: bool, error: Exception) -> None:
    """Whether a failed ``torch.compile`` is Inductor's: the same capture with ``backend="eager"``
    (Dynamo's graph run by eager torch, no Inductor) failing too makes it Dynamo's decline (e.g. a
    guard on a data-dependent value), raised as TorchExportError; else nothing (Inductor's failure)."""
    import torch

    from dlcfuzz.backends.torch_library import TorchExportError, first_line

    torch._dynamo.reset()  # a fresh capture: not the cached failure of the inductor one
    try:
        fn = torch.compile(imported.module, backend="eager", dynamic=dynamic, fullgraph=True)
        _call_namespace()["call_compiled"](fn, imported.input_names, inputs)
    except Exception:
        raise TorchExportError(f"torch.compile failed with backend='eager' too: {type(error).__name__}: "
                               f"{first_line(error)}") from error
    finally:
        torch._dynamo.reset()


def _namespace_source() -> str:
    """torch_call's text (build_module, tensor_outputs...), then compile_call and call_compiled."""
    from dlcfuzz.backends.torch_library import call_source

    return call_source() + "\n" + _CALL_COMPILE


@cache
def _call_namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(_namespace_source(), namespace)
    return namespace
