"""Apache TVM (Relax): ONNX frontend, ``tvm.compile``, the Relax VM on CPU.

Variants are settings x targets:

- settings: ``unfused`` is what ``tvm.compile`` does by default on CPU (LegalizeOps and VM
  lowering only) with LLVM at -O0; ``fused`` is the CPU backend's own pipeline
  (``relax.get_default_pipeline``: FoldConstant, FuseOps, FuseTIR) with LLVM at -O3.  The two
  share the frontend and little else, so they make a useful metamorphic pair.
- targets: ``generic`` (plain ``llvm``) and ``native`` (``llvm`` with this machine's ``-mcpu``, so
  LLVM may use AVX-512 etc.; only when LLVM knows the host CPU), and ``cuda`` when a GPU exists.

Targets are TVM 0.27 JSON dicts: the ``"llvm -mcpu=..."`` string form is no longer accepted.
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
            # untested here (no GPU): tvm.compile's "default" picks the GPU pipeline with DLight schedules
            cuda = {"kind": "cuda", "host": {"kind": "llvm"}}
            out.append(Variant("default-cuda", {"pipeline": "default", "target": cuda}))
        return out

    def load(self, test: Test) -> Any:
        import onnx
        from tvm.relax.frontend.onnx import from_onnx

        model = onnx.load_model_from_string(test.model)
        # initializers become constants; every graph input stays a runtime parameter of main
        return from_onnx(model, keep_params_in_input=False), _input_names(model)

    def compile(self, imported: Any, variant: Variant) -> Compiled:
        import tvm
        from tvm import relax

        mod, names = imported
        target = tvm.target.Target(target_dict(variant))
        pipeline = relax.get_default_pipeline(target) if variant.options["pipeline"] == "cpu" else "default"
        ex = tvm.compile(mod, target, relax_pipeline=pipeline)
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
