"""Upstream-ready bug reports: ``report.md`` in a bug bundle, written for the compiler's issue tracker.

The report says what goes wrong in one line, describes the (reduced, when a reduction exists)
model in words, gives a short self-contained script that builds it (``onnx.helper`` for ONNX
models, a ``torch.nn.Module`` for migrated torch calls, the TVMScript module for Relax tests),
the repro command, expected vs actual, and the environment.  It is rewritten whenever the bundle
changes (after a reduction).
"""

from __future__ import annotations

import contextlib
import json
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from dlcfuzz.ir import op_name

INLINE_VALUES = 64  # initializers up to this many elements are written out; larger ones get seeded random values


def _case_files(folder: Path) -> tuple[Path, Path | None]:
    """(folder holding the model to report, reduction.json or None): the reduced case when there is one."""
    reduced = folder / "reduced"
    if (reduced / "model.onnx").exists() and (folder / "reduction.json").exists():
        return reduced, folder / "reduction.json"
    return folder, None


def _array_literal(a: np.ndarray) -> str:
    if a.size <= INLINE_VALUES:
        return f"np.array({a.tolist()!r}, dtype=np.{a.dtype.name}).reshape({list(a.shape)})"
    if a.dtype.kind == "f":
        return f"rng.standard_normal({list(a.shape)}).astype(np.{a.dtype.name})"
    if a.dtype.kind == "b":
        return f"rng.integers(0, 2, {list(a.shape)}).astype(np.bool_)"
    return f"rng.integers(0, 4, {list(a.shape)}).astype(np.{a.dtype.name})"


def onnx_script(model: Any, valid: bool = True) -> str:
    """Python that rebuilds ``model`` (an onnx.ModelProto) with onnx.helper and saves it as model.onnx
    (checked by the ONNX checker unless the model is invalid on purpose)."""
    from onnx import helper, numpy_helper

    g = model.graph
    lines = ["import numpy as np", "import onnx", "from onnx import TensorProto, helper, numpy_helper", "",
             "rng = np.random.default_rng(0)"]

    def value_info(v: Any) -> str:
        t = v.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim] \
            if t.HasField("shape") else None
        dtype = helper.tensor_dtype_to_string(t.elem_type).removeprefix("TensorProto.")
        return f"helper.make_tensor_value_info({v.name!r}, TensorProto.{dtype}, {shape!r})"

    lines.append("inputs = [")
    inits = {t.name for t in g.initializer}
    lines += [f"    {value_info(v)}," for v in g.input if v.name not in inits]
    lines.append("]")
    lines.append("outputs = [")
    lines += [f"    {value_info(v)}," for v in g.output]
    lines.append("]")
    lines.append("initializers = [")
    for t in g.initializer:
        lines.append(f"    numpy_helper.from_array({_array_literal(numpy_helper.to_array(t))}, {t.name!r}),")
    lines.append("]")
    lines.append("nodes = [")
    for n in g.node:
        attrs = "".join(f", {a.name}={helper.get_attribute_value(a)!r}" for a in n.attribute
                        if a.type not in (a.GRAPH, a.GRAPHS, a.TENSOR, a.TENSORS))
        tensor_attrs = "".join(
            f", {a.name}=numpy_helper.from_array({_array_literal(numpy_helper.to_array(a.t))})"
            for a in n.attribute if a.type == a.TENSOR)
        domain = f", domain={n.domain!r}" if n.domain else ""
        lines.append(f"    helper.make_node({n.op_type!r}, {list(n.input)!r}, {list(n.output)!r}{attrs}{tensor_attrs}"
                     f"{domain}),")
    lines.append("]")
    opsets = ", ".join(f"helper.make_opsetid({o.domain!r}, {o.version})" for o in model.opset_import)
    lines += ["graph = helper.make_graph(nodes, 'bug', inputs, outputs, initializers)",
              f"model = helper.make_model(graph, opset_imports=[{opsets}], ir_version={model.ir_version})",
              "onnx.checker.check_model(model)" if valid else "# invalid on purpose: the checker rejects it",
              "onnx.save(model, 'model.onnx')"]
    return "\n".join(lines) + "\n"


def torch_script(call_spec: bytes, inputs: dict[str, np.ndarray]) -> str:
    """Python that builds the migrated torch call as a module and runs it on random inputs of the case's types."""
    from dlcfuzz.export.torch_call import PLACEHOLDER, decode_call

    spec = decode_call(call_spec)

    def code(v: Any) -> str:
        if isinstance(v, dict) and PLACEHOLDER in v:
            return v[PLACEHOLDER]
        if isinstance(v, list | tuple):
            inner = ", ".join(code(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {code(x)}" for k, x in v.items()) + "}"
        return repr(v)  # numbers, strings, torch dtypes ("torch.float32") and layouts print as code

    args = [code(a) for a in spec["args"]] + [f"{k}={code(v)}" for k, v in spec["kwargs"].items()]
    names = sorted(inputs, key=lambda n: int(n[1:]) if n[1:].isdigit() else 0)
    target = spec["target"]
    if target.startswith("opinfo:"):
        target = f"OPINFO_{target.split(':')[1].replace('.', '_')}  # an OpInfo op without a public name"
    lines = ["import torch", ""]
    if spec["module"]:
        ctor = [code(a) for a in spec["module_args"]] + [f"{k}={code(v)}" for k, v in spec["module_kwargs"].items()]
        lines += [f"op = {target}({', '.join(ctor)}).eval()  # weights: see call.pt (state dict)", ""]
        call = f"op({', '.join(args)})"
    else:
        call = f"{target}({', '.join(args)})"
    lines += ["class Model(torch.nn.Module):", f"    def forward(self, {', '.join(names)}):", f"        return {call}",
              "", "", "torch.manual_seed(0)"]
    for n in names:
        a = inputs[n]
        if a.dtype.kind == "f":
            lines.append(f"{n} = torch.randn({list(a.shape)}, dtype=torch.{a.dtype.name})")
        elif a.dtype.kind == "b":
            lines.append(f"{n} = torch.randint(0, 2, {list(a.shape)}).bool()")
        else:
            lines.append(f"{n} = torch.randint(0, 4, {list(a.shape)}, dtype=torch.{a.dtype.name})")
    lines.append(f"print(Model().eval()({', '.join(names)}))")
    return "\n".join(lines) + "\n"


def describe_onnx(model: Any) -> str:
    """The model in words: its operators in order, with attributes and the types flowing in and out."""
    from onnx import helper, shape_inference

    with contextlib.suppress(Exception):  # a model invalid on purpose (disruptive) can defeat inference
        model = shape_inference.infer_shapes(model)
    g = model.graph
    def written(ty: Any) -> str:
        """A type in words: dtype[dims], sequence of ..., optional ... (a composite operator's chain)."""
        if ty.HasField("sequence_type"):
            return f"sequence of {written(ty.sequence_type.elem_type)}"
        if ty.HasField("optional_type"):
            return f"optional {written(ty.optional_type.elem_type)}"
        t = ty.tensor_type
        dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(t.elem_type).name if t.elem_type else "?"
        return f"{dtype}[{', '.join(dims)}]"

    types = {v.name: written(v.type) for v in [*g.input, *g.value_info, *g.output]}
    for t in g.initializer:
        types[t.name] = f"{helper.tensor_dtype_to_np_dtype(t.data_type).name}[{', '.join(map(str, t.dims))}] (constant)"
    ops = [op_name(n.domain, n.op_type) for n in g.node]
    out = [f"{len(ops)} operator{'s' if len(ops) != 1 else ''} ({' → '.join(ops)}), opset "
           f"{', '.join(str(o.version) for o in model.opset_import)}:", ""]
    for n in g.node:
        attrs = ", ".join(f"{a.name}={helper.get_attribute_value(a)!r}" for a in n.attribute
                          if a.type not in (a.GRAPH, a.GRAPHS, a.TENSOR, a.TENSORS))
        ins = ", ".join(f"`{i}`: {types.get(i, '?')}" if i else "(omitted)" for i in n.input) or "no inputs"
        outs = ", ".join(f"`{o}`: {types.get(o, '?')}" for o in n.output)
        out.append(f"- **{op_name(n.domain, n.op_type)}**{f' ({attrs})' if attrs else ''}: {ins} → {outs}")
    return "\n".join(out)


def _outputs(path: Path) -> list[np.ndarray]:
    with np.load(path) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k[1:]))]


def _expected_vs_actual(folder: Path, finding: dict) -> str:
    if finding["oracle"] == "disruptive":
        broken = finding.get("details", {}).get("violation", {}).get("constraint", "an ONNX rule")
        return (f"**Expected**: the model breaks '{broken}' on purpose; the compiler rejects it with an error.\n\n"
                f"**Actual** ({finding['phase']} phase, variant `{finding['variant']}`): {finding['message'][:1500]}")
    if finding["oracle"] == "crash" or (finding["kind"] in ("signal", "exit", "timeout", "oom", "exception")):
        head = f"{finding.get('error_type') or finding['kind']}: {finding['message']}".strip()
        return ("**Expected**: the model imports, compiles and runs (the ONNX checker and the reference accept it).\n\n"
                f"**Actual** ({finding['phase']} phase, variant `{finding['variant']}`):\n\n```\n{head[:1500]}\n```")
    parts = [f"**Actual** ({finding['variant']}): {finding['message']}"]
    for name, label in (("expected.npz", "Expected (reference)"), ("actual.npz", "Actual")):
        path = folder / name if (folder / name).exists() else folder.parent / name
        if folder.name == "reduced" and name == "actual.npz" and not (folder / name).exists():
            continue  # the original case's actual outputs do not belong to the reduced model
        if path.exists():
            outs = _outputs(path)
            k = max(0, finding.get("output", 0))
            if k < len(outs):
                a = np.asarray(outs[k])
                shown = np.array2string(a.ravel()[:8], precision=5, separator=", ")
                parts.append(f"- {label}: output {k}, {a.dtype}{list(a.shape)}, first values {shown}")
    return "\n".join(parts)


def _environment(finding: dict) -> str:
    packages = []
    for pkg in ("numpy", "onnx", "onnxruntime", "apache-tvm", "openvino", "torch"):
        try:
            packages.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            continue
    return (f"- {finding['backend']} {finding.get('compiler_version', '?')}, variant `{finding['variant']}`\n"
            f"- Python {sys.version.split()[0]} on {platform.platform()} ({platform.machine()})\n"
            f"- {', '.join(packages)}\n- found by dlcfuzz (signature `{finding['signature']}`)")


def write_report(folder: Path) -> Path:
    """Writes (or rewrites) ``folder/report.md`` from the bundle's files; returns its path."""
    finding = json.loads((folder / "finding.json").read_text())
    case, reduction = _case_files(folder)
    sections = [f"# {finding['title']}", ""]
    sections += [f"**Compiler**: {finding['backend']} {finding.get('compiler_version', '?')} · **symptom**: "
                 f"{finding['oracle']} / {finding['kind']} in the {finding['phase']} phase", ""]
    if reduction is not None:
        r = json.loads(reduction.read_text())
        sections += [f"Reduced automatically from {r['ops_before']} to {r['ops_after']} operators "
                     f"(the original is `model.onnx` next to this report)."]
        if r.get("first_diverging"):
            d = r["first_diverging"]
            sections += [f"The first operator whose output diverges from the reference: **{d.get('op')}** "
                         f"(`{d.get('node')}`): {d.get('detail', '')}"]
        sections.append("")
    sections += ["## The model", ""]
    script, lang = "", "python"
    torch_call = (folder / "call.pt").exists()
    program = folder / "program.py"  # a torch-native program (run/torch_campaign.py): no ONNX model
    if program.exists():
        sections += ["A torch program: `Model` (a `torch.nn.Module`) and `make_inputs()` (its arguments, in "
                     "the layouts the program chose). `repro.py` compiles it as the finding's variant did and "
                     "compares it with eager torch, float64 eager as the tie-breaker.", ""]
        script = program.read_text()
    elif (case / "model.onnx").exists() and finding["backend"] != "tvm-relax" and not torch_call:
        import onnx

        model = onnx.load(str(case / "model.onnx"))
        sections += [describe_onnx(model), ""]
        script = onnx_script(model, valid=finding["oracle"] != "disruptive")
    elif torch_call:
        inst = json.loads((folder / "instance.json").read_text()) if (folder / "instance.json").exists() else {}
        with np.load(folder / "inputs.npz") as f:
            arrays = {k: f[k] for k in f.files}
        shapes = ", ".join(f"{n}: {a.dtype}{list(a.shape)}" for n, a in arrays.items())
        sections += [f"One call of `{inst.get('op', '?')}` (migrated from {inst.get('source', '?')}: "
                     f"`{inst.get('provenance', '?')}`) on {shapes}.", ""]
        script = torch_script((folder / "call.pt").read_bytes(), arrays)
    if (folder / "relax_module.py").exists():
        script, lang = (folder / "relax_module.py").read_text(), "python"
        sections += ["The Relax module as TVMScript (constants in `relax_module_consts.json`):", ""]
    if script:
        sections += ["Build it:", "", f"```{lang}", script.rstrip(), "```", ""]
    sections += ["## Reproduce", "", "```sh", f"python {'reduced/' if reduction else ''}repro.py"
                 if (case / "repro.py").exists() else "python repro.py", "```", "",
                 f"`repro.py` needs only {'torch' if program.exists() else 'numpy, onnx and the compiler'}; it "
                 "exits 1 while the bug is present, 0 once it is fixed.", "", "## Expected vs actual", "",
                 finding.get("message", "") if program.exists() else _expected_vs_actual(case, finding), "",
                 "## Environment", "", _environment(finding), ""]
    path = folder / "report.md"
    path.write_text("\n".join(sections))
    return path
