"""Operator specs: one declarative OpSpec per ONNX operator, one module per operator family."""

from __future__ import annotations

import importlib

from dlcfuzz.spec.dsl import OpSpec

FAMILIES = ("elementwise", "broadcast", "reduce", "shape", "index", "conv", "pool", "norm", "nn", "quant", "rnn",
            "signal", "select")

REGISTRY: dict[str, OpSpec] = {}
for _family in FAMILIES:
    for _spec in importlib.import_module(f"dlcfuzz.spec.{_family}").SPECS:
        if _spec.op in REGISTRY:
            raise RuntimeError(f"operator {_spec.op} has two specs")
        REGISTRY[_spec.op] = _spec


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
