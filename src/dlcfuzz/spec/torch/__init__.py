"""torch operators as specs of the constraint DSL (``TorchOpSpec``), one module per family, in a
registry of their own (``TORCH_REGISTRY``), apart from the ONNX operators' ``spec.REGISTRY``.

Operator names live in the ``torch`` namespace (``torch.narrow``, ``torch.index_put_``), so that an
operator name says which language it belongs to everywhere (support profiles, signatures, reports).
Importing this package registers each spec's interval function and input domains with the solver's
interval analysis (``solve.intervals.TRANSFER`` / ``DOMAINS``) under its name: the same
backtrack-free instantiation (``solve.Instantiator``) then builds torch programs.
"""

from __future__ import annotations

import importlib

from dlcfuzz.solve import intervals as _iv
from dlcfuzz.spec.torch.base import NAMESPACE, TORCH_DTYPES, TorchOpSpec, mutated_slots

TORCH_FAMILIES = ("pointwise", "view", "inplace", "index", "reduce", "nn", "idiom", "library")

TORCH_REGISTRY: dict[str, TorchOpSpec] = {}
for _family in TORCH_FAMILIES:
    for _spec in importlib.import_module(f"dlcfuzz.spec.torch.{_family}").SPECS:
        if _spec.op in TORCH_REGISTRY:
            raise RuntimeError(f"torch operator {_spec.op} has two specs")
        if _spec.emit is None or _spec.transfer is None:
            raise RuntimeError(f"torch operator {_spec.op} needs emit and transfer")
        TORCH_REGISTRY[_spec.op] = _spec
        _iv.TRANSFER[_spec.op] = _spec.transfer
        if _spec.vdomain is not None:
            _iv.DOMAINS[_spec.op] = _spec.vdomain
# later slots' domains read the earlier inputs' intervals and the attributes: never cached
_iv.CONTEXTUAL = _iv.CONTEXTUAL | frozenset(TORCH_REGISTRY)


class UnknownTorchOperator(KeyError):
    pass


def get_torch(op: str) -> TorchOpSpec:
    """A torch operator's spec by name, with or without the namespace (``narrow`` or ``torch.narrow``)."""
    name = op if op.startswith(NAMESPACE + ".") else f"{NAMESPACE}.{op}"
    if name not in TORCH_REGISTRY:
        raise UnknownTorchOperator(op)
    return TORCH_REGISTRY[name]


def resolve_torch_ops(names: list[str] | None) -> list[TorchOpSpec]:
    """Specs for the given torch operator names (all when None or empty); raises UnknownTorchOperator."""
    if not names:
        return list(TORCH_REGISTRY.values())
    return [get_torch(n) for n in names]


def families() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for s in TORCH_REGISTRY.values():
        out.setdefault(s.family, []).append(s.op)
    return out


__all__ = ["TORCH_DTYPES", "TORCH_FAMILIES", "TORCH_REGISTRY", "TorchOpSpec", "UnknownTorchOperator", "families",
           "get_torch", "mutated_slots", "resolve_torch_ops"]
