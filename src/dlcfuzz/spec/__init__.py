"""Operator specs: one declarative OpSpec per ONNX operator, one module per operator family."""

from __future__ import annotations

import importlib

from dlcfuzz.ir import Node
from dlcfuzz.spec.dsl import Composite, OpSpec

FAMILIES = ("elementwise", "broadcast", "reduce", "shape", "index", "conv", "pool", "norm", "nn", "quant", "rnn",
            "signal", "select", "sequence")

REGISTRY: dict[str, OpSpec] = {}
for _family in FAMILIES:
    for _spec in importlib.import_module(f"dlcfuzz.spec.{_family}").SPECS:
        if _spec.op in REGISTRY:
            raise RuntimeError(f"operator {_spec.op} has two specs")
        REGISTRY[_spec.op] = _spec


# composite operators (spec/sequence.py): IR operator -> how it is written as a chain of ONNX operators
COMPOSITES: dict[str, Composite] = {op: s.composite for op, s in REGISTRY.items() if s.composite is not None}


def onnx_ops(op: str) -> tuple[str, ...]:
    """The ONNX operators an IR operator is written as: itself, or a composite's chain."""
    comp = COMPOSITES.get(op)
    return comp.ops if comp is not None else (op,)


def expand(node: Node) -> list[Node]:
    """An IR node as nodes of ONNX operators: itself, or its composite's chain."""
    comp = COMPOSITES.get(node.op)
    return [node] if comp is None else comp.nodes(node)


class UnknownOperator(KeyError):
    pass


def get(op: str) -> OpSpec:
    try:
        return REGISTRY[op]
    except KeyError:
        raise UnknownOperator(op) from None


def resolve_ops(names: list[str] | None) -> list[OpSpec]:
    """Specs for the given operator names (all when None); raises UnknownOperator."""
    if not names:
        return list(REGISTRY.values())
    return [get(n) for n in names]
