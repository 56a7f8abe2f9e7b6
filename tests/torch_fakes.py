"""Test-only torch.compile backends with planted bugs, loaded by workers as ``tests.torch_fakes:Name``.

Each is a real Dynamo backend (``torch.compile(model, backend=fn)``) whose compiled function does one
thing wrong, standing for the compiler under test in the ``inductor-program`` protocol; the layer checks
(aot_eager, eager) still run the real ones, so the planted bug is named the compiler's."""

from __future__ import annotations

from typing import Any

from dlcfuzz.backends.base import Variant
from dlcfuzz.backends.torch_program import TorchProgramBackend


def _contiguous_strides(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return out[::-1]


def strides_as_contiguous(gm, example_inputs):
    """Reads every non-contiguous input as if its storage were contiguous (a codegen that assumes
    contiguous strides): the wrong elements for transposed, sliced and offset inputs."""
    import torch

    def run(*args: Any):
        fixed = []
        for a in args:
            if isinstance(a, torch.Tensor) and not a.is_contiguous() and a.numel() > 1 and 0 not in a.stride():
                a = a.as_strided(a.shape, _contiguous_strides(a.shape), a.storage_offset())
            fixed.append(a)
        return gm(*fixed)
    return run


def writes_to_copies(gm, example_inputs):
    """Runs the graph on copies of its inputs: an in-place write through a view never reaches the
    caller's tensor (a functionalization that forgets to copy back)."""
    import torch

    def run(*args: Any):
        return gm(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    return run


class _Planted(TorchProgramBackend):
    fake: Any = None

    def variants(self) -> list[Variant]:
        return [Variant("inductor", {"backend": "planted"})]

    def _compiled(self, p, backend: str, opts: dict[str, Any]):
        if backend != "planted":
            return super()._compiled(p, backend, opts)
        import torch

        torch._dynamo.reset()
        model = p.namespace["Model"]()
        return model, torch.compile(model, backend=type(self).fake, fullgraph=True)


class StridesAsContiguous(_Planted):
    name = "planted-strides"
    fake = staticmethod(strides_as_contiguous)


class WritesToCopies(_Planted):
    name = "planted-copies"
    fake = staticmethod(writes_to_copies)


# ---------------------------------------------------------------------------------------------
# Faults that show only under some Inductor flags (read from torch._inductor.config when the graph is
# compiled, as Inductor reads them), for the bisection of the config variants
# ---------------------------------------------------------------------------------------------
def _flag(name: str) -> Any:
    from torch._inductor import config

    value: Any = config
    for part in name.split("."):
        value = getattr(value, part)
    return value


def off_by_one_when(trigger: dict[str, Any]):
    """A backend that adds 1 to every float output of a graph compiled while all of ``trigger``'s flags
    have those values (``{}``: always, a default-config fault)."""

    def backend(gm, example_inputs):
        import torch

        if not all(_flag(k) == v for k, v in trigger.items()):
            return gm

        def run(*args: Any):
            outs = gm(*args)
            return type(outs)(o + 1 if isinstance(o, torch.Tensor) and o.dtype.is_floating_point else o
                              for o in outs)
        return run
    return backend


# the planted faults' triggers, by construction
ONE_FLAG = {"epilogue_fusion": False}
TWO_FLAGS = {"aggressive_fusion": True, "cpp.simdlen": 0}


class _PlantedConfigs(_Planted):
    """The config and layout variants on a planted compiler (``backend: planted``)."""

    def variants(self) -> list[Variant]:
        return [Variant("inductor", {"backend": "planted"}),
                Variant("inductor-config", {"backend": "planted", "config": "sampled"}),
                Variant("inductor-layout", {"backend": "planted", "relayout": True})]


class OffByOneUnderOneFlag(_PlantedConfigs):
    name = "planted-one-flag"
    fake = staticmethod(off_by_one_when(ONE_FLAG))


class OffByOneUnderTwoFlags(_PlantedConfigs):
    name = "planted-two-flags"
    fake = staticmethod(off_by_one_when(TWO_FLAGS))


class OffByOneAlways(_PlantedConfigs):
    name = "planted-always"
    fake = staticmethod(off_by_one_when({}))


class StridesAsContiguousLayouts(_PlantedConfigs):
    """Reads non-contiguous inputs as contiguous, run with the layout variant."""

    name = "planted-strides-layouts"
    fake = staticmethod(strides_as_contiguous)
