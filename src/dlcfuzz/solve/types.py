"""Type-variable domains: the ONNX schema's allowed types, narrowed by the spec, the chosen
dtype set and, optionally, a target's kernel profile (so that a generator for ONNX Runtime
does not waste tests on kernels that do not exist)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache

import onnx.defs

from dlcfuzz.ir import DTYPES
from dlcfuzz.ir.dtypes import element_type_name, onnx_type_name
from dlcfuzz.spec.dsl import In, OpSpec

# TypeProfile: (op, type variable) -> dtypes a target implements; absent keys do not narrow.
TypeProfile = Mapping[tuple[str, str], frozenset[str]]

def composite_types(spec: OpSpec, var: str, opset: int) -> set[str]:
    """The dtypes a composite's type variable may take at ``opset``: those of the element types that
    every (ONNX operator, type variable) carrying it allows (none if an operator does not exist yet)."""
    assert spec.composite is not None
    out: set[str] | None = None
    for op, tv in spec.composite.types[var]:
        sch = schema(op, opset)
        allowed = set() if sch is None else {
            name for tc in sch.type_constraints if tc.type_param_str == tv
            for t in tc.allowed_type_strs if (name := element_type_name(t)) is not None}
        out = allowed if out is None else out & allowed
    return out or set()


@cache
def schema(op: str, opset: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op, opset)
    except onnx.defs.SchemaError:
        return None


def input_type_vars(spec: OpSpec, opset: int) -> list[str]:
    """The type variable of each spec input (explicit ``In.T`` or the schema's, by position)."""
    sch = schema(spec.op, opset)
    out = []
    for k, inp in enumerate(spec.inputs):
        if isinstance(inp, In) and inp.T:
            out.append(inp.T)
        elif sch is not None and sch.inputs:
            out.append(sch.inputs[min(k, len(sch.inputs) - 1)].type_str)
        else:
            out.append("T")
    return out


def type_domains(spec: OpSpec, opset: int, dtypes: Iterable[str] = DTYPES,
                 profile: TypeProfile | None = None) -> dict[str, tuple[str, ...]]:
    """Type variable -> allowed dtypes (kept in the canonical DTYPES order for determinism)."""
    allowed_set = set(dtypes)
    sch = schema(spec.op, opset)
    doms: dict[str, tuple[str, ...]] = {}
    names = set(input_type_vars(spec, opset)) | set(spec.types)
    schema_types = {}
    if sch is not None:
        for tc in sch.type_constraints:
            schema_types[tc.type_param_str] = {onnx_type_name(t) for t in tc.allowed_type_strs} - {None}
    for var in names:
        if spec.composite is not None and var in spec.composite.types:
            cands = composite_types(spec, var, opset)
        elif var in schema_types:
            cands = schema_types[var]
        elif var.startswith("tensor("):  # a fixed type written in the schema, e.g. tensor(int64)
            cands = {onnx_type_name(var)} - {None}
        else:
            cands = set(DTYPES)
        if var in spec.types:
            cands = cands & set(spec.types[var])
        if profile is not None and (spec.op, var) in profile:
            cands = cands & profile[(spec.op, var)]
        if not var.startswith("tensor("):
            cands = cands & allowed_set
        doms[var] = tuple(d for d in DTYPES if d in cands)
    return doms
