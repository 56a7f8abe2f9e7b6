"""Operator specs: one declarative OpSpec per ONNX operator, one module per operator family.

Specs are registered by operator name: ONNX's operators by their type, those of other domains
(``contrib``: ONNX Runtime's com.microsoft operators) qualified by their domain, e.g.
``com.microsoft.Attention`` beside ONNX's ``Attention``."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from dlcfuzz.ir import Node, TensorType
from dlcfuzz.spec.dsl import Composite, OpSpec

FAMILIES = ("elementwise", "broadcast", "reduce", "shape", "index", "conv", "pool", "norm", "nn", "quant", "rnn",
            "signal", "select", "contrib", "sequence", "control")

REGISTRY: dict[str, OpSpec] = {}
for _family in FAMILIES:
    for _spec in importlib.import_module(f"dlcfuzz.spec.{_family}").SPECS:
        if _spec.op in REGISTRY:
            raise RuntimeError(f"operator {_spec.op} has two specs")
        REGISTRY[_spec.op] = _spec


# composite operators (spec/sequence.py, spec/control.py): IR operator -> how it is written as ONNX operators
COMPOSITES: dict[str, Composite] = {op: s.composite for op, s in REGISTRY.items() if s.composite is not None}


def onnx_ops(op: str) -> tuple[str, ...]:
    """The ONNX operators an IR operator is written as: itself, or a composite's chain."""
    comp = COMPOSITES.get(op)
    return comp.ops if comp is not None else (op,)


def expand(node: Node, types: Mapping[str, TensorType] | None = None) -> list[Node]:
    """An IR node as nodes of ONNX operators: itself, or its composite's chain (``types``: the graph's
    value types, for a chain that types what it writes inside)."""
    comp = COMPOSITES.get(node.op)
    return [node] if comp is None else comp.nodes(node, types or {})


class UnknownOperator(KeyError):
    pass


def get(op: str) -> OpSpec:
    """The spec of an operator name; an operator of another domain may also go by its type alone
    (FastGelu for com.microsoft.FastGelu) where no other spec has that type."""
    if op in REGISTRY:
        return REGISTRY[op]
    found = [s for s in REGISTRY.values() if s.op_type == op]
    if len(found) == 1:
        return found[0]
    raise UnknownOperator(op)


def resolve_ops(names: list[str] | None) -> list[OpSpec]:
    """Specs for the given operator names (all when None); raises UnknownOperator."""
    if not names:
        return list(REGISTRY.values())
    return [get(n) for n in names]
