"""One torch call as a module: OPERA's PyTorch template.

A *call spec* records one call of a torch API with concrete arguments: the target (an importable
name such as ``torch.nn.functional.conv2d`` or ``torch.Tensor.add``, an OpInfo ``opinfo:NAME:VARIANT``
whose ``op`` is not importable by name, or an ``nn.Module`` class with its constructor arguments
and state), and the arguments with every tensor replaced by a placeholder.  The tensors become the
module's forward arguments ``x0, x1, ...`` (so frontends see them as graph inputs), everything else
is closed over (so the module runs on whatever device its inputs and weights are moved to).  The
spec travels as bytes (``torch.save``), so workers rebuild the same module.
"""

from __future__ import annotations

import importlib
import io
from functools import cache
from typing import Any

import numpy as np

PLACEHOLDER = "__dlcfuzz_tensor__"


def encode_call(target: str, args: tuple | list, kwargs: dict[str, Any], *, module_args: tuple = (),
                module_kwargs: dict[str, Any] | None = None, state: dict | None = None,
                ) -> tuple[bytes, dict[str, np.ndarray]]:
    """(call spec bytes, input arrays by name ``x0, x1, ...``) of ``target(*args, **kwargs)``.

    With ``module_kwargs``/``module_args`` given (or ``state``), ``target`` is an ``nn.Module``
    class built with them (and ``state`` loaded), and ``args``/``kwargs`` go to its forward."""
    import torch

    arrays: dict[str, np.ndarray] = {}

    def strip(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            name = f"x{len(arrays)}"
            arrays[name] = v.detach().cpu().resolve_conj().resolve_neg().numpy().copy()
            return {PLACEHOLDER: name}
        if isinstance(v, list | tuple) and not isinstance(v, torch.Size):
            out = [strip(x) for x in v]
            return out if isinstance(v, list) else tuple(out)
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items()}
        return v

    spec = {"target": target, "args": strip(tuple(args)), "kwargs": strip(dict(kwargs)),
            "module": module_kwargs is not None or bool(module_args) or state is not None,
            "module_args": tuple(module_args), "module_kwargs": dict(module_kwargs or {}),
            "state": {k: v.detach().clone() for k, v in (state or {}).items()}}
    buf = io.BytesIO()
    torch.save(spec, buf)
    return buf.getvalue(), arrays


def decode_call(data: bytes) -> dict[str, Any]:
    import torch

    return torch.load(io.BytesIO(data), weights_only=False)


@cache
def _opinfo(name: str, variant: str) -> Any:
    from torch.testing._internal.common_methods_invocations import op_db

    for info in op_db:
        if info.name == name and info.variant_test_name == variant:
            return info.op
    raise LookupError(f"no OpInfo {name!r} (variant {variant!r}) in this torch")


def resolve(target: str) -> Any:
    """The callable (or module class) a target names."""
    if target.startswith("opinfo:"):
        _, name, variant = target.split(":", 2)
        return _opinfo(name, variant)
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):  # the longest importable prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise LookupError(f"cannot resolve {target!r}")


def build_module(spec: dict[str, Any]) -> tuple[Any, list[str]]:
    """(an ``nn.Module`` in eval mode whose forward(x0, x1, ...) makes the call, input names)."""
    import torch

    names: list[str] = []

    def collect(v: Any) -> None:
        if isinstance(v, dict) and PLACEHOLDER in v:
            names.append(v[PLACEHOLDER])
        elif isinstance(v, list | tuple):
            for x in v:
                collect(x)
        elif isinstance(v, dict):
            for x in v.values():
                collect(x)

    collect(spec["args"])
    collect(spec["kwargs"])
    fn = resolve(spec["target"])
    if spec["module"]:
        fn = fn(*spec["module_args"], **spec["module_kwargs"])
        if spec["state"]:
            fn.load_state_dict(spec["state"])
        fn.eval()

    class Call(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if isinstance(fn, torch.nn.Module):
                self.inner = fn  # registered, so its parameters are the model's weights

        def forward(self, *tensors: Any) -> Any:
            given = dict(zip(names, tensors, strict=True))

            def fill(v: Any) -> Any:
                if isinstance(v, dict) and PLACEHOLDER in v:
                    return given[v[PLACEHOLDER]]
                if isinstance(v, list | tuple):
                    out = [fill(x) for x in v]
                    return out if isinstance(v, list) else tuple(out)
                if isinstance(v, dict):
                    return {k: fill(x) for k, x in v.items()}
                return v

            return fn(*fill(spec["args"]), **fill(spec["kwargs"]))

    return Call().eval(), names


def tensor_outputs(result: Any) -> list[Any]:
    """The tensors of a call's result, flattened in order (tuples, lists, named tuples)."""
    import torch

    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, list | tuple):
        return [t for r in result for t in tensor_outputs(r)]
    return []


def run_eager(module: Any, names: list[str], inputs: dict[str, np.ndarray], device: str = "cpu") -> list[np.ndarray]:
    """The library's own outputs: the module run eagerly on ``inputs``, module and inputs on ``device``."""
    import torch

    with torch.no_grad():
        result = module.to(device)(*[torch.from_numpy(np.array(inputs[n])).to(device) for n in names])
    return [t.detach().cpu().resolve_conj().resolve_neg().numpy() for t in tensor_outputs(result)]
