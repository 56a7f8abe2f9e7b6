"""Sources of operator instances: the tests of DL libraries, migrated into single-operator instances.

``onnx-node``
    ONNX's node tests.  The wheel ships no test data, only the generator scripts
    (``onnx/backend/test/case/node/*.py``) whose classes call ``expect(node, inputs, outputs, name)``
    when they are defined.  A recorder replaces ``expect`` before the case modules are imported and
    each call becomes a single-node model (built as ONNX's own ``expect`` builds it), down-versioned
    to what ONNX Runtime accepts, checked with the full checker.
``torch-opinfo``
    PyTorch's OpInfo database (every sample input of every operator that supports float32 on CPU)
    and ModuleInfo database (every module input), as call specs of ``dlcfuzz.export.torch_call``.

``harvest`` runs a source in a child process (``python -m dlcfuzz.migrate.sources NAME DB``): the
ONNX instrumentation must be in place before the case modules are imported, and the OpInfo
database is heavy to import and may crash.  The child commits instances in batches, so a child
that dies keeps what it committed; its last stdout line is the stats, as JSON.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import itertools
import json
import pkgutil
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from dlcfuzz.migrate.instances import ONNX, TORCH, Instance, InstanceSet, jsonable, tensor_info

SOURCES = ("onnx-node", "torch-opinfo")
NEEDS = {"onnx-node": ("onnx",), "torch-opinfo": ("torch", "expecttest")}
STATS_PREFIX = "DLCFUZZ-STATS "
BATCH = 200

# what ONNX Runtime 1.31 loads (ONNX 1.23 writes IR 14 / opset 28 for the newest operator versions)
MAX_IR, MAX_OPSET = 13, 26
# integer inputs (shapes, axes, pads, ...) this small become initializers, see ``_onnx_model``
CONST_MAX_ELEMENTS = 16

# a sample whose tensors hold more elements than this (OpInfo's grid_sampler_3d: 5.5 MB each) is skipped
MAX_ELEMENTS = 1 << 20

# operators random by nature (their outputs cannot be compared), or reading uninitialized memory
# (``empty*``); not poisson_nll_loss, normalize, set_flush_denormal, native_dropout_backward, __rand__
RANDOM_OP = re.compile(r"(?<![a-z])(rand|dropout(?!_backward)|bernoulli|multinomial|poisson(?!_?nll)|cauchy"
                       r"|geometric|uniform|normal(?!ize)|empty|rrelu|fractional_?max_?pool|gumbel"
                       r"|(?<!windows\.)exponential)")


class SourceError(Exception):
    """A source cannot be harvested (one line, naming the cause)."""


def is_random_op(name: str) -> bool:
    """Whether an operator (``bernoulli``, ``nn.functional.dropout``, ``FractionalMaxPool2d``) is random."""
    name = name.lower()
    return not name.rsplit(".", 1)[-1].startswith("__") and RANDOM_OP.search(name) is not None


def harvest(name: str, out: Path, limit_per_op: int | None = None) -> dict[str, Any]:
    """Harvests source ``name`` into the instance set at ``out`` (appending) in a child process.

    Returns {"source", "instances", "operators", "skipped": {reason: count}, "seconds"}."""
    if name not in SOURCES:
        raise SourceError(f"unknown source {name!r} (known: {', '.join(SOURCES)})")
    for module in NEEDS[name]:
        if importlib.util.find_spec(module) is None:
            raise SourceError(f"source {name} needs {module}, which is not installed (pip install {module})")
    cmd = [sys.executable, "-m", "dlcfuzz.migrate.sources", name, str(out)]
    if limit_per_op is not None:
        cmd += ["--limit-per-op", str(limit_per_op)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(STATS_PREFIX):
            return json.loads(line[len(STATS_PREFIX):])
    lines = [x.strip() for x in proc.stderr.splitlines() if x.strip()]
    cause = lines[-1] if lines else "no output"
    raise SourceError(f"harvesting {name} failed (child exit code {proc.returncode}): {cause}; "
                      f"the instances it committed stay in {out}")


# -- ONNX node tests ----------------------------------------------------------------------------


def _onnx_calls(skipped: Counter) -> list[tuple[Any, list, list, str, dict]]:
    """Every ``expect(node, inputs, outputs, name, **kwargs)`` call of ONNX's node test generators."""
    import onnx
    import onnx.backend.test.case.node as cases

    calls: list[tuple[Any, list, list, str, dict]] = []

    def recorder(node: Any, inputs: Any, outputs: Any, name: str, **kwargs: Any) -> None:
        calls.append((copy.deepcopy(node), list(inputs), list(outputs), name, copy.deepcopy(kwargs)))

    cases.expect = recorder  # the case modules do ``from onnx.backend.test.case.node import expect``

    def import_all(package: Any) -> None:  # onnx's import_recursive, one failing module skipped only
        for _, modname, ispkg in pkgutil.iter_modules(package.__path__):
            full = f"{package.__name__}.{modname}"
            if not onnx.ONNX_ML and full.startswith("onnx.backend.test.case.node.ai_onnx_ml"):
                continue
            try:
                module = importlib.import_module(full)
            except Exception:
                skipped["case module failed to import"] += 1
                continue
            if ispkg:
                import_all(module)

    import_all(cases)
    return calls


def _plain_arrays(values: list) -> tuple[list[np.ndarray] | None, str]:
    """(the values as numpy arrays, "") or (None, why the first that is not a plain tensor is not)."""
    arrays = []
    for v in values:
        a, why = _plain_array(v)
        if a is None:
            return None, why
        arrays.append(a)
    return arrays, ""


def _plain_array(value: Any) -> tuple[np.ndarray | None, str]:
    """(value as a numpy array, "") or (None, the reason it is not a plain tensor)."""
    from onnx import TensorProto, numpy_helper

    if value is None:
        return None, "optional input/output"
    if isinstance(value, list | tuple):
        return None, "sequence input/output"
    if isinstance(value, TensorProto):
        try:
            value = numpy_helper.to_array(value)
        except Exception:
            return None, "unconvertible TensorProto"
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        return None, f"{type(value).__name__} input/output"
    if value.dtype.kind in "OUS":
        return None, "string tensor"
    if not numpy_native(value.dtype):
        return None, f"dtype {value.dtype} (no numpy equivalent)"
    return value, ""


def numpy_native(dtype: np.dtype) -> bool:
    """Whether a dtype survives ``np.save``/``np.load`` (not an ``ml_dtypes`` float8, int4, bfloat16...)."""
    if dtype.kind not in "biufc":
        return False
    try:
        return np.dtype(dtype.str) == dtype
    except TypeError:
        return False


def _attr_value(attr: Any) -> Any:
    """A node attribute's value, JSON-able (strings decoded, tensors and graphs summarized)."""
    from onnx import AttributeProto, GraphProto, TensorProto, helper, numpy_helper

    value = helper.get_attribute_value(attr)

    def one(v: Any) -> Any:
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        if isinstance(v, TensorProto):
            try:
                return jsonable(numpy_helper.to_array(v))
            except Exception:
                return f"tensor{list(v.dims)}"
        if isinstance(v, GraphProto):
            return f"graph({len(v.node)} nodes)"
        if attr.type in (AttributeProto.SPARSE_TENSOR, AttributeProto.SPARSE_TENSORS):
            return "sparse_tensor"
        if attr.type in (AttributeProto.TYPE_PROTO, AttributeProto.TYPE_PROTOS):
            return helper.printable_type(v)
        return jsonable(v)

    return [one(v) for v in value] if isinstance(value, list) else one(value)


def _default_opset(model: Any) -> Any:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o
    return None


def _down_version(model: Any, node: Any) -> tuple[Any, str]:
    """(the model at IR <= 13 and default opset <= 26, "") or (None, reason)."""
    from onnx import defs, version_converter

    opset = _default_opset(model)
    if opset is not None and opset.version > MAX_OPSET:
        same = True  # a node of another domain only needs a default opset the runtime knows
        if node.domain in ("", "ai.onnx"):
            try:
                old = defs.get_schema(node.op_type, MAX_OPSET, "")
                new = defs.get_schema(node.op_type, opset.version, "")
            except Exception:
                return None, f"needs opset > {MAX_OPSET}"
            same = old.since_version == new.since_version or _only_types_widened(old, new, model)
        if same:
            opset.version = MAX_OPSET
        else:
            try:
                converted = version_converter.convert_version(model, MAX_OPSET)
            except Exception:
                return None, f"needs opset > {MAX_OPSET}"
            cnodes = converted.graph.node
            if (len(cnodes) != 1 or cnodes[0].op_type != node.op_type
                    or list(cnodes[0].input) != list(node.input)):
                return None, f"needs opset > {MAX_OPSET}"
            model = converted
    if model.ir_version > MAX_IR:
        model.ir_version = MAX_IR
    return model, ""


def _only_types_widened(old: Any, new: Any, model: Any) -> bool:
    """Whether the newer schema differs from the older one only by admitting more types (same
    attributes and defaults, same inputs and outputs, strictly wider type constraints: a version
    that changed semantics without changing types, like Mod 28, does not qualify), and this model
    is valid under the older one."""
    from onnx import checker

    def attrs(schema: Any) -> dict[str, bytes]:
        return {k: a.default_value.SerializeToString() for k, a in schema.attributes.items()}

    def formals(schema: Any) -> list[tuple[str, int]]:
        return [(f.name, int(f.option)) for f in [*schema.inputs, *schema.outputs]]

    def types(schema: Any) -> dict[str, set[str]]:
        return {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}

    told, tnew = types(old), types(new)
    if (attrs(old) != attrs(new) or formals(old) != formals(new) or told.keys() != tnew.keys()
            or told == tnew or any(not told[k] <= tnew[k] for k in told)):
        return False
    lowered = copy.deepcopy(model)
    _default_opset(lowered).version = MAX_OPSET
    lowered.ir_version = min(lowered.ir_version, MAX_IR)
    try:
        checker.check_model(lowered, full_check=True)
    except Exception:
        return False
    return True


def _make_model(graph: Any, opset_imports: list) -> Any:
    """The model ONNX's ``expect`` makes (``_make_test_model_gen_version``)."""
    from onnx import helper

    latest_onnx, latest_ml, latest_training = helper.VERSION_TABLE[-1][2:5]
    for o in opset_imports:
        if ((o.domain in ("", "ai.onnx") and o.version == latest_onnx + 1)
                or (o.domain == "ai.onnx.ml" and o.version == latest_ml + 1)
                or (o.domain in ("ai.onnx.training version", "ai.onnx.preview.training")
                    and o.version == latest_training + 1)):
            return helper.make_model(graph, producer_name="backend-test", opset_imports=opset_imports)
    return helper.make_model_gen_version(graph, producer_name="backend-test", opset_imports=opset_imports)


def _onnx_instance(node: Any, inputs: list, outputs: list, name: str, kwargs: dict
                   ) -> tuple[Instance | None, str]:
    """(the instance of one ``expect`` call, "") or (None, the reason it is skipped)."""
    from onnx import checker, defs, helper, numpy_helper

    node = copy.deepcopy(node)
    present_in = [x for x in node.input if x]
    present_out = [x for x in node.output if x]
    arrays_in, why = _plain_arrays(inputs)
    if arrays_in is None:
        return None, why
    arrays_out, why = _plain_arrays(outputs)
    if arrays_out is None:
        return None, why
    if len(arrays_in) != len(present_in) or len(arrays_out) != len(present_out):
        return None, "inputs/outputs do not match the node"
    in_types = kwargs.get("input_type_protos") or [None] * len(arrays_in)
    out_types = kwargs.get("output_type_protos") or [None] * len(arrays_out)

    def value_info(a: np.ndarray, vname: str, tp: Any) -> Any:
        if tp is None:
            tp = helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        return helper.make_value_info(vname, tp)

    # TVM's ONNX frontend needs small integer inputs (shapes, axes, pads, repeats, ...) to be
    # constants: an integer input at node position >= 1 with at most CONST_MAX_ELEMENTS elements
    # becomes an initializer rather than a graph input (the node and its semantics are unchanged).
    position = {n: i for i, n in reversed(list(enumerate(node.input))) if n}
    graph_inputs, initializers, runtime, consts = [], [], {}, {}
    for a, vname, tp in zip(arrays_in, present_in, in_types, strict=False):
        if (position.get(vname, 0) >= 1 and a.dtype.kind in "iu" and a.size <= CONST_MAX_ELEMENTS
                and vname not in runtime):
            initializers.append(numpy_helper.from_array(a, vname))
            consts[vname] = a
        else:
            graph_inputs.append(value_info(a, vname, tp))
            runtime[vname] = a
    graph = helper.make_graph([node], name, graph_inputs,
                              [value_info(a, n, tp) for a, n, tp in zip(arrays_out, present_out, out_types,
                                                                        strict=False)],
                              initializer=initializers)
    opsets = kwargs.get("opset_imports")
    if opsets is None:
        try:
            since = defs.get_schema(node.op_type, domain=node.domain).since_version
        except Exception:
            return None, "no schema"
        opsets = [helper.make_operatorsetid(node.domain, since)]
    opsets = [copy.deepcopy(o) for o in opsets]
    try:
        model = _make_model(graph, opsets)
    except Exception:
        return None, "invalid"
    if "ir_version" in kwargs:
        model.ir_version = int(kwargs["ir_version"])
    if initializers and model.ir_version < 4:  # before IR 4 every initializer had to be a graph input
        model.ir_version = 4
    model, why = _down_version(model, node)
    if model is None:
        return None, why
    try:
        checker.check_model(model, full_check=True)
    except Exception:
        return None, "invalid"
    params = {a.name: _attr_value(a) for a in model.graph.node[0].attribute}  # as down-versioned
    params.update({f"input.{n}": jsonable(a) for n, a in consts.items()})
    return Instance(library=ONNX, op=node.op_type, source="onnx-node", provenance=name, params=params,
                    tensors=[tensor_info(n, a) for n, a in runtime.items()], model=model.SerializeToString(),
                    inputs=runtime, expected=arrays_out), ""


def onnx_node_instances(skipped: Counter, limit_per_op: int | None = None) -> Iterator[Instance]:
    """The instances of ONNX's node tests (run in the child: it patches ``expect`` before the imports)."""
    seen: Counter = Counter()
    per_op: Counter = Counter()
    for node, inputs, outputs, name, kwargs in _onnx_calls(skipped):
        if not hasattr(node, "op_type"):
            skipped["not a NodeProto"] += 1
            continue
        seen[name] += 1
        prov = name if seen[name] == 1 else f"{name}#{seen[name]}"
        if is_random_op(node.op_type):  # Bernoulli, RandomNormal..., Multinomial, Dropout
            skipped["random op"] += 1
            continue
        if limit_per_op is not None and per_op[node.op_type] >= limit_per_op:
            skipped["over the per-op limit"] += 1
            continue
        try:
            inst, why = _onnx_instance(node, inputs, outputs, prov, kwargs)
        except Exception as e:
            inst, why = None, f"error: {type(e).__name__}"
        if inst is None:
            skipped[why] += 1
            continue
        per_op[node.op_type] += 1
        yield inst


# -- PyTorch OpInfo / ModuleInfo ----------------------------------------------------------------


def _tensors_in(value: Any) -> Iterator[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)


@cache
def _numpy_holds(dtype: Any) -> bool:
    import torch

    try:
        torch.zeros(1, dtype=dtype).numpy()
    except Exception:
        return False
    return True


def tensor_problem(values: Iterable[Any]) -> str:
    """Why the tensors among ``values`` cannot become instance inputs ("" if they can)."""
    import torch

    tensors = list(_tensors_in(list(values)))
    for t in tensors:
        if t.layout != torch.strided:
            return "sparse layout"
        if t.is_quantized:
            return "quantized tensor"
        if t.dtype.is_complex:
            return "complex dtype"
        if t.dtype == torch.bfloat16:
            return "bfloat16 dtype"
        if not _numpy_holds(t.dtype):
            return f"dtype {t.dtype} (no numpy equivalent)"
    if sum(t.numel() for t in tensors) > MAX_ELEMENTS:
        return "tensors too large"
    return ""


def call_params(args: Iterable[Any], kwargs: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The non-tensor arguments of a call, JSON-able, by name (positional ones as ``argN``)."""
    import torch

    def has_tensor(v: Any) -> bool:
        return next(_tensors_in(v), None) is not None

    def strip(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return "tensor"
        if isinstance(v, list | tuple) and not isinstance(v, torch.Size):
            return [strip(x) for x in v]
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items()}
        return v

    def only_tensors(v: Any) -> bool:
        if isinstance(v, torch.Tensor):
            return True
        if isinstance(v, list | tuple):
            return all(only_tensors(x) for x in v)
        if isinstance(v, dict):
            return all(only_tensors(x) for x in v.values())
        return False

    params: dict[str, Any] = {}
    for name, v in itertools.chain(((f"arg{i}", v) for i, v in enumerate(args)), kwargs.items()):
        if has_tensor(v):
            if only_tensors(v):
                continue
            v = strip(v)
        params[f"{prefix}{name}"] = jsonable(v)
    return params


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


def opinfo_target(op: Any) -> str:
    """A dotted name ``resolve`` maps back to ``op.op``, else ``opinfo:NAME:VARIANT``."""
    import torch

    from dlcfuzz.export.torch_call import resolve

    fn, name = op.op, op.name
    candidates = [f"torch.{name}", f"torch.Tensor.{name}"]
    if isinstance(fn, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        candidates.insert(0, f"torch.ops.{fn}")
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        candidates += [f"{module}.{qualname}", f"torch.{qualname}", f"torch.Tensor.{qualname.split('.')[-1]}"]
    for target in candidates:
        try:
            if _same(resolve(target), fn):
                return target
        except Exception:
            continue
    return f"opinfo:{name}:{op.variant_test_name}"


def _torch_instance(op_name: str, target: str, provenance: str, args: tuple, kwargs: dict,
                    params: dict[str, Any], **module: Any) -> Instance:
    from dlcfuzz.export.torch_call import encode_call

    spec, arrays = encode_call(target, args, kwargs, **module)
    return Instance(library=TORCH, op=op_name, source="torch-opinfo", provenance=provenance, params=params,
                    tensors=[tensor_info(n, a) for n, a in arrays.items()], model=spec, inputs=arrays,
                    expected=None)


def opinfo_instances(skipped: Counter, limit_per_op: int | None = None) -> Iterator[Instance]:
    """One instance per float32 CPU sample input of every OpInfo (after the skips); ``limit_per_op``
    counts per OpInfo entry (an operator's variants, e.g. interpolate's modes, count separately)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    for op in op_db:
        try:
            if torch.float32 not in op.supported_dtypes("cpu"):
                continue
        except Exception:
            skipped["supported_dtypes failed"] += 1
            continue
        full = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
        if is_random_op(op.name):
            skipped["random op"] += 1
            continue
        if op.name.startswith("jiterator"):
            skipped["CUDA-only op"] += 1
            continue
        target = opinfo_target(op)
        torch.manual_seed(0)
        try:
            samples = iter(op.sample_inputs("cpu", torch.float32, requires_grad=False))
        except Exception:
            skipped["sample_inputs failed"] += 1
            continue
        kept = 0
        for k in itertools.count():
            if limit_per_op is not None and kept >= limit_per_op:
                break
            try:
                sample = next(samples)
            except StopIteration:
                break
            except Exception:
                skipped["sample_inputs failed"] += 1
                break
            first = sample.input
            if not (isinstance(first, torch.Tensor) or (isinstance(first, list | tuple) and first
                                                        and all(isinstance(t, torch.Tensor) for t in first))):
                skipped["input not a tensor"] += 1
                continue
            args, kwargs = (first, *sample.args), dict(sample.kwargs)
            why = tensor_problem([args, kwargs])
            if why:
                skipped[why] += 1
                continue
            params = call_params(args, kwargs)
            if op.variant_test_name:
                params["variant"] = op.variant_test_name
            try:
                inst = _torch_instance(f"torch.{op.name}", target, f"OpInfo:{full}#{k}", args, kwargs, params)
            except Exception:
                skipped["unserializable arguments"] += 1
                continue
            kept += 1
            yield inst


def module_target(cls: type) -> str:
    from dlcfuzz.export.torch_call import resolve

    short = f"torch.nn.{cls.__name__}"
    try:
        if resolve(short) is cls:
            return short
    except Exception:
        pass
    return f"{cls.__module__}.{cls.__qualname__}"


def moduleinfo_instances(skipped: Counter, limit_per_op: int | None = None) -> Iterator[Instance]:
    """One instance per float32 CPU (eval mode) module input of every ModuleInfo."""
    import torch
    from torch.testing._internal.common_modules import module_db

    for info in module_db:
        cls = info.module_cls
        if is_random_op(cls.__name__):
            skipped["random op"] += 1
            continue
        try:
            if torch.float32 not in info.dtypes:
                continue
        except Exception:
            pass
        torch.manual_seed(0)
        try:
            module_inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=False,
                                                    training=False)
        except Exception:
            skipped["module_inputs_func failed"] += 1
            continue
        target = module_target(cls)
        kept = 0
        for k, mi in enumerate(module_inputs):
            if limit_per_op is not None and kept >= limit_per_op:
                break
            if mi.forward_input is None:
                skipped["no forward input"] += 1
                continue
            c_args, c_kwargs = tuple(mi.constructor_input.args), dict(mi.constructor_input.kwargs)
            f_args, f_kwargs = tuple(mi.forward_input.args), dict(mi.forward_input.kwargs)
            if not any(True for _ in _tensors_in([f_args, f_kwargs])):
                skipped["input not a tensor"] += 1
                continue
            why = tensor_problem([c_args, c_kwargs, f_args, f_kwargs])
            if why:
                skipped[why] += 1
                continue
            torch.manual_seed(0)
            try:
                m = cls(*c_args, **c_kwargs).eval()
                if info.is_lazy:  # materializes the lazy parameters
                    with torch.no_grad():
                        m(*f_args, **f_kwargs)
                state = m.state_dict()
            except Exception:
                skipped["module construction failed"] += 1
                continue
            why = tensor_problem([state])
            if why:
                skipped[why] += 1
                continue
            params = call_params(f_args, f_kwargs)
            params.update(call_params(c_args, c_kwargs, prefix="init."))
            try:
                inst = _torch_instance(f"torch.nn.{cls.__name__}", target, f"ModuleInfo:{info.name}#{k}", f_args,
                                       f_kwargs, params, module_args=c_args, module_kwargs=c_kwargs, state=state)
            except Exception:
                skipped["unserializable arguments"] += 1
                continue
            kept += 1
            yield inst


def _no_test_fn_lookup() -> None:
    """OpInfo's sample iterators look for the running unittest method with ``inspect.stack()``
    (debug tracking of the current sample): there is none here, and the stack walk dominates the
    harvest (it scans every loaded module per frame), so the lookup answers None right away.
    Only ever called in the harvesting child."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    common_utils.extract_test_fn = core.extract_test_fn = lambda: None
    # every sample reseeds; for each absent accelerator torch.manual_seed queues a lazy seeding
    # call together with a formatted stack trace, half the harvest's time: CPU only here
    import torch

    for device in (torch.cuda, torch.xpu, torch.mtia):
        if not device.is_available():
            device.manual_seed_all = lambda seed: None


def torch_opinfo_instances(skipped: Counter, limit_per_op: int | None = None) -> Iterator[Instance]:
    import warnings

    warnings.filterwarnings("ignore")  # deprecated ops warn on every sample
    _no_test_fn_lookup()
    yield from opinfo_instances(skipped, limit_per_op)
    yield from moduleinfo_instances(skipped, limit_per_op)


# -- the child ----------------------------------------------------------------------------------


def run_source(name: str, out: Path, limit_per_op: int | None = None) -> dict[str, Any]:
    """Harvests ``name`` into ``out`` in this process (``harvest`` runs this in a child)."""
    import time

    start = time.perf_counter()
    skipped: Counter = Counter()
    gen = {"onnx-node": onnx_node_instances, "torch-opinfo": torch_opinfo_instances}[name]
    store = InstanceSet(out)
    n, ops = 0, set()
    batch: list[Instance] = []
    try:
        for inst in gen(skipped, limit_per_op):
            batch.append(inst)
            ops.add(inst.op)
            if len(batch) >= BATCH:
                n += store.extend(batch)
                batch = []
        n += store.extend(batch)
    finally:
        store.close()
    return {"source": name, "instances": n, "operators": len(ops), "skipped": dict(skipped.most_common()),
            "seconds": round(time.perf_counter() - start, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlcfuzz.migrate.sources")
    parser.add_argument("source", choices=SOURCES)
    parser.add_argument("db", type=Path)
    parser.add_argument("--limit-per-op", type=int, default=None)
    a = parser.parse_args(argv)
    stats = run_source(a.source, a.db, a.limit_per_op)
    sys.stdout.flush()
    print(STATS_PREFIX + json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
