"""ONNX Runtime: the CPU execution provider at each optimization level and, where onnxruntime-gpu
finds a GPU, the CUDA and TensorRT providers.

ONNX Runtime falls back to the CPU silently (a provider it cannot load is dropped with a warning;
a provider that fails is replaced by the CPU and the call retried).  A GPU variant therefore turns
both fallbacks off and checks that its provider heads the session's list: a session that fell back
raises ``ProviderFallback`` (an error outcome that says so), never passes as a GPU result.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from functools import cache

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant, without
from dlcfuzz.export.onnx import checker_error, to_onnx
from dlcfuzz.ir import DTYPE_OF_CODE, ONNX_CODE, Graph, op_identity
from dlcfuzz.ir.dtypes import element_type_name, onnx_type_name
from dlcfuzz.ir.hints import feed_array

PROVIDER = "CPUExecutionProvider"


@cache
def type_profile(opset: int) -> dict[tuple[str, str], frozenset[str]]:
    """(op, type variable) -> dtypes that ORT's CPU kernels registered for ``opset`` implement.

    Read from ORT's own kernel registry, so it follows the installed version exactly.
    """
    found: dict[tuple[str, str], set[str]] = {}
    for k in _kernels(opset):
        for var, types in k.type_constraints.items():
            names = {onnx_type_name(t) for t in types} - {None}
            found.setdefault((k.op_name, var), set()).update(names)
    return {key: frozenset(v) for key, v in found.items()}


@cache
def _kernels(opset: int) -> tuple:
    """ORT's CPU kernel definitions of the default domain that run the operator versions of ``opset``.

    ORT matches a node by its schema's since-version, not by the model's opset: an open-ended
    kernel ("since 16") runs only version 16, a closed one (10..15) the versions inside it.  So
    RoiAlign's "16 and later" kernel does not run RoiAlign-22, the version of opsets 22 and up.
    """
    from onnxruntime.capi import _pybind_state as C

    def runs(k) -> bool:
        since = _since(k.op_name, opset)
        lo, hi = k.version_range
        return since is not None and (since == lo or lo < since <= hi < _OPEN)

    return tuple(k for k in C.get_all_opkernel_def() if k.provider == PROVIDER and k.domain in ("", "ai.onnx")
                 and runs(k))


_OPEN = 2**31 - 1  # the end of an open-ended kernel's version range


@cache
def _since(op: str, opset: int) -> int | None:
    """The since-version of the operator's schema at ``opset`` (None: none)."""
    import onnx.defs

    try:
        return onnx.defs.get_schema(op, opset).since_version
    except onnx.defs.SchemaError:
        return None


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
def context_function_profile(op: str, opset: int) -> dict[tuple[str, str], frozenset[str]] | None:
    """(op, type variable) -> dtypes for an operator whose ONNX function body depends on its node
    (GroupNormalization-21, CastLike): ORT expands the body at session creation, so a session of one
    node tells whether ORT runs a dtype.  Each variable is tried over its allowed dtypes, the others
    held at their first float type.  None if the operator has no such body."""
    import onnx
    import onnx.defs
    from onnx import helper

    try:
        schema = onnx.defs.get_schema(op, opset)
    except onnx.defs.SchemaError:
        return None
    if not schema.has_context_dependent_function:
        return None
    allowed = {c.type_param_str: [n for t in c.allowed_type_strs if (n := element_type_name(t)) is not None]
               for c in schema.type_constraints}
    if not allowed or not all(allowed.values()):
        return None
    # required attributes get a harmless value of their type: the body needs them to be built
    placeholder = {onnx.AttributeProto.INT: 1, onnx.AttributeProto.FLOAT: 1.0, onnx.AttributeProto.INTS: [1],
                   onnx.AttributeProto.STRING: ""}
    attrs = {a.name: placeholder[a.type] for a in schema.attributes.values() if a.required and a.type in placeholder}
    inputs = [f for f in schema.inputs if f.option != onnx.defs.OpSchema.FormalParameterOption.Optional]
    base = {var: next((d for d in names if d.startswith("float")), names[0]) for var, names in allowed.items()}

    def runs(types: dict[str, str]) -> bool:
        def info(name: str, var: str):
            return helper.make_tensor_value_info(name, ONNX_CODE[types[var]] if var in types else ONNX_CODE["float32"],
                                                 None)

        node = helper.make_node(op, [f.name for f in inputs], [f.name + "_out" for f in schema.outputs[:1]], **attrs)
        graph = helper.make_graph([node], op, [info(f.name, f.type_str) for f in inputs],
                                  [info(f.name + "_out", f.type_str) for f in schema.outputs[:1]])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
        return session_error(model.SerializeToString()) is None

    return {(op, var): frozenset(d for d in names if runs({**base, var: d})) for var, names in allowed.items()}


@cache
def domain_profile(op: str) -> dict[tuple[str, str], frozenset[str]]:
    """(op, type variable) -> dtypes for an operator of another domain (a qualified name such as
    com.microsoft.FastGelu): its CPU kernels of version 1, the version ``export.onnx`` imports."""
    from onnxruntime.capi import _pybind_state as C

    domain, op_type = op_identity(op)
    found: dict[tuple[str, str], set[str]] = {}
    for k in C.get_all_opkernel_def():
        if k.provider == PROVIDER and k.domain == domain and k.op_name == op_type and k.version_range[0] <= 1:
            for var, types in k.type_constraints.items():
                found.setdefault((op, var), set()).update({onnx_type_name(t) for t in types} - {None})
    return {key: frozenset(v) for key, v in found.items()}


@cache
def full_profile(opset: int, ops: tuple[str, ...]) -> dict[tuple[str, str], frozenset[str]]:
    """``type_profile`` plus function-expanded operators among ``ops``, composites (by their chains) and
    those of other domains (ORT's contrib kernels); operators ORT can run in no way get an empty set, so
    a generator for ORT leaves them out."""
    from dlcfuzz.spec import COMPOSITES

    prof = dict(type_profile(opset))
    for op in ops:
        if op_identity(op)[0]:
            prof.update(domain_profile(op))
    # a kernel without type constraints (NonMaxSuppression: fixed float inputs) narrows nothing
    known = {op for op, _ in prof} | {k.op_name for k in _kernels(opset)}
    for op in ops:
        if op in COMPOSITES:
            for var in COMPOSITES[op].types:
                prof[(op, var)] = composite_profile(op, var, opset)
        elif op not in known:
            got = function_profile(op, opset, prof) if not op_identity(op)[0] else None
            if got is not None:
                prof[(op, "T")] = got
            elif not op_identity(op)[0] and (ctx := context_function_profile(op, opset)) is not None:
                prof.update(ctx)
            else:  # no way to run it: every type variable empty (RoiAlign's are T1 and T2)
                for var in _type_vars(op, opset) | {"T"}:
                    prof[(op, var)] = frozenset()
    return prof


def composite_profile(op: str, var: str, opset: int) -> frozenset[str]:
    """The dtypes of a composite operator's type variable (spec/sequence.py) that ORT runs: the element
    types that the kernel of every (operator, type variable) carrying it implements (sequence kernels
    constrain S to seq(tensor(...)), optional ones O to optional(...))."""
    from dlcfuzz.spec import COMPOSITES

    out: set[str] | None = None
    for part, tv in COMPOSITES[op].types[var]:
        got = {name for k in _kernels(opset) if k.op_name == part for t in k.type_constraints.get(tv, ())
               if (name := element_type_name(t)) is not None}
        out = got if out is None else out & got
    return frozenset(out or ())


def _type_vars(op: str, opset: int) -> set[str]:
    import onnx.defs

    if op_identity(op)[0]:  # no ONNX schema: the spec names them
        from dlcfuzz.spec import REGISTRY

        spec = REGISTRY.get(op)
        return set(spec.types) | {i.T for i in spec.data_inputs if i.T} if spec is not None else set()
    try:
        return {tc.type_param_str for tc in onnx.defs.get_schema(op, opset).type_constraints}
    except onnx.defs.SchemaError:
        return set()


def session_error(model: bytes) -> str | None:
    """Why ONNX Runtime refuses to create a session for ``model`` (None: it loads)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4
    try:
        ort.InferenceSession(model, so, providers=[PROVIDER])
    except Exception as e:  # ORT raises its own Fail/InvalidGraph/NotImplemented types
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return None


def graph_error(g: Graph) -> str | None:
    """Why ``g`` is not a valid model: the ONNX checker's or ONNX Runtime's refusal (None: valid)."""
    try:
        model = to_onnx(g)
    except ValueError as e:  # e.g. an empty list attribute: not even writable
        return f"cannot write the model: {e}"
    return checker_error(model) or session_error(model.SerializeToString())


def model_error(g: Graph, run: bool = True, seed: int = 0) -> str | None:
    """Why ``g`` is not a valid model whose types are what the graph declares (None: it is):
    the ONNX checker (full), strict ONNX shape inference (graph outputs' types must match), and,
    with ``run``, a run on ONNX Runtime with random inputs (outputs' types must match again).
    Some rules ORT only enforces when a node runs (LRN rank, a PRelu slope that broadcasts both
    ways), so only a run confirms a model."""
    import onnx

    try:
        g.validate()
        model = to_onnx(g)
    except ValueError as e:
        return f"cannot write the model: {e}"
    err = checker_error(model)
    if err is not None:
        return err
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception:
        # data propagation has bugs of its own (Unsqueeze with negative axes, docs/discrepancies.md):
        # a model is invalid only if plain strict inference rejects it too
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        except Exception as e:
            return f"shape inference: {e}"
    for vi in inferred.graph.output:
        t = g.values[vi.name].type
        tt = vi.type.tensor_type
        if DTYPE_OF_CODE.get(tt.elem_type) != t.dtype:
            return f"{vi.name}: onnx infers element type {tt.elem_type}, the graph declares {t}"
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if tt.HasField("shape") and None not in dims and tuple(dims) != t.shape:
            return f"{vi.name}: onnx infers shape {dims}, the graph declares {t}"
    if not run:
        return None
    import onnxruntime as ort

    ort.set_default_logger_severity(4)  # failures come back as exceptions; kernels also log (RoiAlign)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 4
    # no graph optimizations: a model is valid by what it means, not by whether ORT's optimizer
    # copes with it (FuseReluClip throws on some valid graphs: a lead, not an invalid model)
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    rng = np.random.default_rng(seed)
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=[PROVIDER])
        outs = sess.run(None, {v.name: feed_array(rng, v) for v in g.inputs})
    except Exception as e:
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    for name, o in zip(g.outputs, outs, strict=True):
        t = g.values[name].type
        if tuple(o.shape) != t.shape or o.dtype.name != t.dtype:
            return f"{name}: ORT gives {o.dtype}{tuple(o.shape)}, the graph declares {t}"
    return None


# ``fired`` keys: the graph transformers that changed the model, as ORT's verbose log reports them
FIRED = "ort:transformer:"
_MODIFIED = re.compile(r"GraphTransformer (\S+) modified: 1")


@contextmanager
def stderr_lines(into: list[str]) -> Iterator[None]:
    """Collects what native code writes to file descriptor 2 inside the block (lines, into ``into``)."""
    with tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            into.extend(tmp.read().decode(errors="replace").splitlines())


LEVELS = {"disable_all": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
          "all": "ORT_ENABLE_ALL"}


# GPU variants: name -> (providers in priority order, the variant it is compared with).  CUDA against
# the CPU at the same optimization level (the cross-device oracle); TensorRT (its engines for the
# subgraphs it takes, CUDA for the rest) against CUDA, so that a finding is TensorRT's
GPU_VARIANTS = {
    "cuda": (["CUDAExecutionProvider", PROVIDER], "all"),
    "tensorrt": (["TensorrtExecutionProvider", "CUDAExecutionProvider", PROVIDER], "cuda"),
}


class ProviderFallback(RuntimeError):
    """The session does not run on the provider the variant asked for."""


def make_session(model, level, providers, disabled=(), verbose=False):
    """The session a variant runs (the repro scripts embed this function's source), with both of
    ORT's silent fallbacks off; raises ProviderFallback when it does not run on ``providers[0]``.
    ``disabled``: graph transformers turned off; ``verbose``: ORT logs each transformer's effect."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if verbose:
        so.log_severity_level = 0
    # enable_fallback=0: a provider that fails to build the session raises instead of being replaced by the CPU
    sess = ort.InferenceSession(model, so, providers=providers, enable_fallback=0, disabled_optimizers=list(disabled))
    sess.disable_fallback()  # and a provider failing in run() is not retried on the CPU
    got = sess.get_providers()
    if got[:1] != providers[:1]:  # a provider ORT cannot load is dropped with only a warning
        raise ProviderFallback(f"ONNX Runtime fell back to {', '.join(got)}: asked for {providers[0]}, which "
                               f"this onnxruntime {ort.__version__} cannot use here")
    return sess


def ort_variants(providers: Collection[str]) -> list[Variant]:
    """The variants, given the providers that work here (see ``gpu_providers``): the CPU's levels,
    then a GPU variant for each of its providers that works."""
    out = [Variant(level, {"level": enum}) for level, enum in LEVELS.items()]
    for name, (chain, mate) in GPU_VARIANTS.items():
        if chain[0] in providers:
            out.append(Variant(name, {"level": "ORT_ENABLE_ALL", "providers": chain, "device": "cuda",
                                      "compare_with": mate}))
    return out


@cache
def gpu_providers() -> dict[str, str]:
    """GPU provider -> why it cannot run here ("" when a session really runs on it): a tiny model's
    session must list it first."""
    import warnings

    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    available = ort.get_available_providers()
    found = {}
    for chain, _ in GPU_VARIANTS.values():
        if chain[0] not in available:
            found[chain[0]] = (f"onnxruntime {ort.__version__} has no {chain[0]} "
                               f"(pip install onnxruntime-gpu, or dlcfuzz[gpu])")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make_session(model.SerializeToString(), "ORT_DISABLE_ALL", chain)
            found[chain[0]] = ""
        except Exception as e:  # ProviderFallback, or the provider's own failure (no GPU, no cuDNN...)
            found[chain[0]] = f"{chain[0]} does not run: {str(e).strip().splitlines()[0] if str(e).strip() else e!r}"
    return found


class OrtBackend(Backend):
    """ONNX Runtime's CPU execution provider at each graph optimization level; CUDA and TensorRT
    providers where they run."""

    name = "ort"
    package = "onnxruntime"
    pip = "onnxruntime"
    report_fired = False  # see compile()

    def variants(self) -> list[Variant]:
        return ort_variants([p for p, why in gpu_providers().items() if not why])

    def device_notes(self) -> dict[str, str]:
        found = gpu_providers()
        if any(not why for why in found.values()):
            return {}
        return {"cuda": f"{self.name}: {found[GPU_VARIANTS['cuda'][0][0]]}"}

    def load(self, test: Test) -> bytes:
        return test.model  # ORT's frontend runs inside InferenceSession: compile phase

    def compile(self, imported: bytes, variant: Variant):
        args = (imported, variant.options["level"], variant.options.get("providers", [PROVIDER]),
                variant.options.get("disabled", ()))
        # the verbose log costs ~1.5 ms a session (a quarter of an ORT-only campaign's CPU): only the
        # blame of a pass (oracle/blame.py), whose variants turn passes off, asks for it
        if not (self.report_fired or "disabled" in variant.options):
            return make_session(*args)
        log: list[str] = []
        try:
            with stderr_lines(log):  # ORT's C++ logger writes to file descriptor 2
                return make_session(*args, verbose=True)
        finally:  # the transformers that changed the graph before an error count too
            self.fired(sorted({f"{FIRED}{m}" for line in log for m in _MODIFIED.findall(line)}))

    def disabling(self, variant: Variant, keys: list[str]) -> Variant | None:
        """(no keys: the variant itself, reporting the transformers that changed the model)"""
        names = [k.removeprefix(FIRED) for k in keys if k.startswith(FIRED)]
        if len(names) != len(keys):
            return None
        return Variant(without(variant.name, keys), {**variant.options, "disabled": names})

    def run(self, compiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o) for o in compiled.run(None, inputs)]

    def repro_source(self, variant: Variant) -> str:
        import inspect

        return f'''
class ProviderFallback(RuntimeError):
    pass


{inspect.getsource(make_session)}

LEVEL = {variant.options["level"]!r}
PROVIDERS = {variant.options.get("providers", [PROVIDER])!r}
DISABLED = {list(variant.options.get("disabled", ()))!r}  # graph transformers turned off


def run_model(model_path, inputs):
    return make_session(model_path, LEVEL, PROVIDERS, DISABLED).run(None, inputs)
'''
