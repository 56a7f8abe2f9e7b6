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
