"""ONNX Runtime (CPU execution provider)."""

from __future__ import annotations

from functools import cache

from dlcfuzz.solve.types import onnx_type_name

PROVIDER = "CPUExecutionProvider"


@cache
def type_profile(opset: int) -> dict[tuple[str, str], frozenset[str]]:
    """(op, type variable) -> dtypes that ORT's CPU kernels registered for ``opset`` implement.

    Read from ORT's own kernel registry, so it follows the installed version exactly.
    """
    from onnxruntime.capi import _pybind_state as C

    found: dict[tuple[str, str], set[str]] = {}
    for k in C.get_all_opkernel_def():
        if k.provider != PROVIDER or k.domain not in ("", "ai.onnx"):
            continue
        lo, hi = k.version_range
        if not lo <= opset <= hi:
            continue
        for var, types in k.type_constraints.items():
            names = {onnx_type_name(t) for t in types} - {None}
            found.setdefault((k.op_name, var), set()).update(names)
    return {key: frozenset(v) for key, v in found.items()}


def function_profile(op: str, opset: int, profile: dict[tuple[str, str], frozenset[str]]) -> frozenset[str] | None:
    """Dtypes of T for an operator ORT has no kernel for but runs by expanding its ONNX function
    body: those that every body operator's kernel implements.  None if it is not a function."""
    import onnx.defs

    try:
        schema = onnx.defs.get_schema(op, opset)
    except onnx.defs.SchemaError:
        return None
    if not schema.has_function:
        return None
    allowed: frozenset[str] | None = None
    for node in schema.function_body.node:
        got = profile.get((node.op_type, "T"))
        if got is not None:
            allowed = got if allowed is None else allowed & got
    return allowed if allowed is not None else frozenset()


@cache
def full_profile(opset: int, ops: tuple[str, ...]) -> dict[tuple[str, str], frozenset[str]]:
    """``type_profile`` plus function-expanded operators among ``ops``; operators ORT can run in
    no way get an empty set, so a generator for ORT leaves them out."""
    prof = dict(type_profile(opset))
    known = {op for op, _ in prof}
    for op in ops:
        if op not in known:
            got = function_profile(op, opset, prof)
            prof[(op, "T")] = got if got is not None else frozenset()
    return prof
