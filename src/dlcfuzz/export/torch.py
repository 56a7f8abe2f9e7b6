"""A dlcfuzz Graph (or an ONNX model) as a torch.nn.Module, through generated Python source.

The source is ``torch_ops.py`` (one torch function per ONNX operator, ONNX semantics) followed
by a ``Model`` class whose ``forward(*runtime inputs)`` calls them node by node and returns the
graph outputs in order; initializers become buffers, and the constant inputs that torch needs as
Python values (shapes, axes, pads, slice bounds...) are written into the calls as literals.

This file and ``torch_ops.py`` are embedded verbatim in repro scripts, which must not import
dlcfuzz: so only the standard library and numpy at module level, nothing that clashes with
``torch_ops``'s names, and a Graph is read by duck typing.
"""

import base64
import hashlib
import keyword
import linecache
import math
import re
from typing import Any, NamedTuple

import numpy as np


class Rule(NamedTuple):
    """How a node of one operator type becomes a call to its torch_ops function."""

    static: tuple[int, ...] = ()  # inputs passed as Python values (shapes, axes, pads...): constants only
    multi: bool = False  # several outputs: called with nout=len(outputs), returns a tuple


_PLAIN = """
Abs Neg Ceil Floor Round Exp Log Sqrt Reciprocal Sigmoid Tanh Relu Sin Cos Tan Asin Acos Atan Sinh Cosh
Asinh Acosh Atanh Erf Softplus Softsign Sign Identity HardSwish Not IsNaN IsInf HardSigmoid Elu Selu
LeakyRelu Celu ThresholdedRelu Shrink Clip Cast
Add Sub Mul Div Pow Mod Equal Greater Less GreaterOrEqual LessOrEqual And Or Xor Where Max Min Sum Mean
ArgMax ArgMin Softmax LogSoftmax Hardmax MatMul Gemm PRelu Einsum LRN
Transpose Flatten DepthToSpace SpaceToDepth Shape Size Concat Gather GatherElements GatherND
Conv ConvTranspose AveragePool LpPool GlobalAveragePool GlobalMaxPool GlobalLpPool
BatchNormalization InstanceNormalization LpNormalization MeanVarianceNormalization RMSNormalization
CastLike BitwiseNot Mish Gelu BitShift BitwiseAnd BitwiseOr BitwiseXor ScatterElements ScatterND EyeLike GridSample
QuantizeLinear DequantizeLinear MatMulInteger ConvInteger QLinearMatMul QLinearConv
HannWindow HammingWindow BlackmanWindow Range ConstantOfShape GroupNormalization
"""
_REDUCE = ("ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSumExp ReduceSumSquare "
           "ReduceLogSum")

# The op table: every ONNX operator type the exporter writes, and how (see Rule).
OPS: dict[str, Rule] = {
    **{op: Rule() for op in _PLAIN.split()},
    **{op: Rule((1,)) for op in _REDUCE.split()},  # axes (an input since opset 13 / 18)
    **{op: Rule((1,)) for op in ("Reshape", "Squeeze", "Unsqueeze", "Expand", "Tile", "CumSum", "Trilu",
                                 "ReverseSequence")},
    "Split": Rule((1,), multi=True),
    "Slice": Rule((1, 2, 3, 4)),
    "Pad": Rule((1, 2, 3)),
    "Dropout": Rule((1, 2), multi=True),
    "MaxPool": Rule(multi=True),
    "LayerNormalization": Rule(multi=True),
    "Resize": Rule((1, 2, 3)),  # roi, scales, sizes
    "TopK": Rule((1,), multi=True),
    "OneHot": Rule((1,)),
    "Compress": Rule((1,)),
    "AffineGrid": Rule((1,)),  # size
    "Attention": Rule(multi=True),
    "NonZero": Rule(),
    "Unique": Rule(multi=True),
    "NonMaxSuppression": Rule(),
    "MaxUnpool": Rule((2,)),  # output_shape
    **{op: Rule((4,), multi=True) for op in ("RNN", "GRU", "LSTM")},  # sequence_lens
    "DynamicQuantizeLinear": Rule(multi=True),
    # sequences and optionals (the chains of spec/sequence.py's composite operators): positions and
    # split lengths are Python values
    **{op: Rule() for op in ("SequenceConstruct", "SequenceEmpty", "SequenceLength", "ConcatFromSequence",
                             "Optional", "OptionalHasElement", "OptionalGetElement")},
    "SequenceAt": Rule((1,)),
    "SequenceInsert": Rule((2,)),
    "SequenceErase": Rule((1,)),
    "SplitToSequence": Rule((1,)),
}

# The registry's operators (dlcfuzz.spec.REGISTRY) with no torch rule, and why: a graph holding one is
# not given to Inductor or the torch frontends (``unsupported``).  tests/test_operator_record.py fails on
# an operator that is neither in OPS (a composite: every operator of its chain) nor here.
NO_TORCH_RULE: dict[str, str] = {
    "If": "its branches are ONNX subgraphs; the exporter writes straight-line modules only",
    "RoiAlign": "no torch operator computes ONNX's RoiAlign (torchvision's roi_align samples differently and "
                "is not a dependency); a composition of gathers is not written yet",
    "MaxRoiPool": "no torch operator (torchvision's roi_pool is not a dependency); not written yet",
    **{f"com.microsoft.{op}": "a Microsoft contrib operator: ONNX Runtime's, which the torch frontends never emit"
       for op in ("FastGelu", "BiasGelu", "SkipLayerNormalization", "EmbedLayerNormalization", "MatMulInteger16",
                  "Attention")},
}

# element types torch computes with (it has uint16/32/64 tensors, but almost no kernels for them)
TORCH_DTYPES = frozenset({"float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"})

_RESERVED = {"self", "torch", "F", "np", "math", "base64", "tensor_of", "Model", "forward", "super"}


class ExportError(ValueError):
    """The graph uses something the op table cannot write."""


# ---------------------------------------------------------------------------------------------
# reading a model: (runtime input names, constants, nodes, output names)
# ---------------------------------------------------------------------------------------------
Parts = tuple[list[str], dict[str, np.ndarray], list[tuple[str, list[str], list[str], dict[str, Any]]], list[str]]


def _attr(v: Any) -> Any:
    """An attribute value as the ONNX model holds it: floats rounded to float32, plain Python; a tensor
    as a numpy array."""
    if isinstance(v, np.ndarray):
        return v
    if type(v).__name__ == "TensorProto":  # read from an ONNX model
        from onnx import numpy_helper

        return numpy_helper.to_array(v)
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        return float(np.float32(v))
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple)) or type(v).__name__.startswith("Repeated"):
        return [_attr(x) for x in v]
    return v


def _onnx_nodes(graph) -> list:
    """A dlcfuzz Graph's nodes as ONNX operators, as its ONNX model holds them (a composite operator's
    node as its chain: ``Graph.onnx_nodes``); duck typing, so that this file imports no dlcfuzz."""
    return graph.onnx_nodes() if hasattr(graph, "onnx_nodes") else list(graph.nodes)


def graph_parts(graph) -> Parts:
    """The parts of a dlcfuzz Graph (read by duck typing: no dlcfuzz import), its nodes as ONNX
    operators (a composite operator's chain: sequences are lists, optionals tensors).  A pinned runtime input
    (a Reshape shape, Slice starts ... that the ONNX model takes at run time, always fed the value it
    holds) stays a parameter of ``forward``, and its value is also a constant: where torch needs a
    Python value it is baked in (the torch model is dlcfuzz's own rendering of the graph, not a
    compiler's frontend), elsewhere the fed tensor is read."""
    consts = {v.name: v.data for v in graph.initializers}
    consts.update({v.name: v.data for v in graph.inputs if v.data is not None})
    return ([v.name for v in graph.inputs], consts,
            [(n.op, list(n.inputs), list(n.outputs), {k: _attr(a) for k, a in n.attrs.items()})
             for n in _onnx_nodes(graph)],
            list(graph.outputs))


def onnx_parts(model, feeds: dict | None = None) -> Parts:
    """The parts of an onnx.ModelProto; ``feeds`` (input name -> value) gives runtime inputs values
    to bake in where torch needs a Python value, as ``graph_parts`` does with pinned inputs."""
    from onnx import helper, numpy_helper

    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    # Constant nodes are constants like initializers: their value, in whichever attribute holds it
    typed = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64, "value_ints": np.int64}
    for n in g.node:
        if n.op_type == "Constant" and len(n.attribute) == 1:
            a = n.attribute[0]
            v = helper.get_attribute_value(a)
            consts[n.output[0]] = numpy_helper.to_array(v) if a.name == "value" else np.array(v, dtype=typed[a.name])
    # a Shape of a tensor whose shape the model states is a constant too (dlcfuzz writes constants that
    # equal a tensor's shape so, as exporters do): torch needs K, axes or a target shape as Python values
    static = _static_shapes(model)
    for n in g.node:
        if n.op_type == "Shape" and n.input[0] in static:
            bounds = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            consts[n.output[0]] = np.array(static[n.input[0]][bounds.get("start", 0):bounds.get("end")], np.int64)
    inputs = [i.name for i in g.input if i.name not in consts]
    consts.update({name: np.asarray(feeds[name]) for name in inputs if feeds is not None and name in feeds})
    # a node of another domain goes by its qualified name, as in a Graph (dlcfuzz.ir.op_name)
    nodes = [(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}", list(n.input),
              list(n.output), {a.name: _attr(helper.get_attribute_value(a)) for a in n.attribute}) for n in g.node
             if not (n.op_type in ("Constant", "Shape") and n.output[0] in consts)]
    return inputs, consts, nodes, [o.name for o in g.output]


def _static_shapes(model) -> dict[str, tuple[int, ...]]:
    """The tensors of ``model`` whose shape its graph states in full (inputs, value_info, outputs, and
    what ONNX's shape inference adds)."""
    import onnx

    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # inference has its own bugs: what the model states is enough
        graph = model.graph
    out = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            out[vi.name] = tuple(d.dim_value for d in dims)
    return out


# ---------------------------------------------------------------------------------------------
# writing the Model class
# ---------------------------------------------------------------------------------------------
def _literal(v: Any) -> str:
    if isinstance(v, np.ndarray):  # a tensor attribute (ConstantOfShape's value): [flat values, dtype name]
        return _literal([v.reshape(-1).tolist(), v.dtype.name])
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    if isinstance(v, (bool, int, float, str)) or v is None:
        return repr(v)
    raise ExportError(f"cannot write attribute value {v!r} as a literal")


def _array_expr(a: np.ndarray) -> str:
    data = base64.b64encode(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()).decode()
    return f"tensor_of({data!r}, {a.dtype.name!r}, {list(a.shape)!r})"


class _Names:
    """Python identifiers for value names: the name itself when it is a safe one."""

    def __init__(self) -> None:
        self.used = set(_RESERVED) | set(OPS)

    def new(self, name: str, prefix: str = "") -> str:
        ident = prefix + re.sub(r"\W", "_", name)
        if not ident.isidentifier() or keyword.iskeyword(ident) or ident in self.used:
            base, i = "t_" + ident.lstrip("_"), 0
            ident = base
            while ident in self.used or not ident.isidentifier():
                i += 1
                ident = f"{base}_{i}"
        self.used.add(ident)
        return ident


def module_source(inputs: list[str], consts: dict[str, np.ndarray],
                  nodes: list[tuple[str, list[str], list[str], dict[str, Any]]], outputs: list[str]) -> str:
    """Source of ``class Model(torch.nn.Module)`` over torch_ops' functions; raises ExportError."""
    names = _Names()
    env: dict[str, str] = {}  # value name -> Python expression
    init: list[str] = []
    params = [names.new(v) for v in inputs]
    env.update(zip(inputs, params, strict=True))

    def tensor(name: str) -> str:
        if name not in env:
            if name not in consts:
                raise ExportError(f"value {name!r} is used before it is defined")
            attr = names.new(name, "c_")
            init.append(f"self.register_buffer({attr!r}, {_array_expr(consts[name])}, persistent=False)")
            env[name] = f"self.{attr}"
        return env[name]

    body: list[str] = []
    for op, ins, outs, attrs in nodes:
        rule = OPS.get(op)
        if rule is None:
            raise ExportError(f"no torch rule for operator {op}")
        args = []
        for i, name in enumerate(ins):
            if not name:
                args.append("None")
            elif i in rule.static:
                if name not in consts:
                    raise ExportError(f"{op} input {i} ({name!r}) must be a constant")
                args.append(_literal(consts[name].tolist()))
            else:
                args.append(tensor(name))
        args += [f"{k}={_literal(v)}" for k, v in sorted(attrs.items())]
        if rule.multi:
            args.append(f"nout={len(outs)}")
        targets = []
        for o in outs:
            targets.append(names.new(o) if o else "_")
            if o:
                env[o] = targets[-1]
        lhs = ", ".join(targets) + ("," if rule.multi and len(targets) == 1 else "")
        body.append(f"{lhs} = {op}({', '.join(args)})")
    ret = ", ".join(tensor(o) for o in outputs) + ("," if len(outputs) == 1 else "")
    lines = ["class Model(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
    lines += [f"        {s}" for s in init]
    lines += ["", f"    def forward(self, {', '.join(params)}):"]
    lines += [f"        {s}" for s in body]
    lines += [f"        return ({ret})", ""]
    return "\n".join(lines)


def build_namespace(source: str) -> dict[str, Any]:
    """Executes generated source; the namespace holds ``Model`` and torch_ops' functions.  The
    source is registered with linecache so that tracebacks (and torch.compile) can show it."""
    filename = f"<dlcfuzz-torch-{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": "dlcfuzz_torch_model"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


# ---------------------------------------------------------------------------------------------
# dlcfuzz entry points (need the package: unused by repro scripts)
# ---------------------------------------------------------------------------------------------
def _text(module: str) -> str:
    from importlib import resources

    return resources.files("dlcfuzz.export").joinpath(module).read_text()


# the one dlcfuzz import in torch_ops.py: its text replaces it in generated sources, which import no dlcfuzz
_RESIZE_IMPORT = "from dlcfuzz.export.resize_taps import resize_taps  # noqa: E402 (inlined by torch.ops_source)\n"


def ops_source() -> str:
    """The text of torch_ops.py, with resize_taps.py's text in place of its import: the operator
    functions every generated source starts with."""
    return _text("torch_ops.py").replace(_RESIZE_IMPORT, _text("resize_taps.py"))


def exporter_source() -> str:
    """The text of this file, for repro scripts that rebuild the model from an ONNX file."""
    return _text("torch.py")


def unsupported(graph) -> str | None:
    """Why the exporter (or torch) cannot take the graph, or None."""
    for n in _onnx_nodes(graph):
        if n.op not in OPS:
            return f"operator {n.op} is not in the torch op table"
    for v in graph.values.values():
        if v.type.dtype not in TORCH_DTYPES:
            return f"torch has no kernels for {v.type.dtype} (value {v.name})"
    return None


def to_torch_source(graph) -> str:
    """The whole standalone source: torch_ops' functions, then the Model class."""
    return ops_source() + "\n\n" + module_source(*graph_parts(graph))


def to_torch(graph):
    """A torch.nn.Module computing the graph: forward(*runtime inputs in graph.inputs order)
    returns the tuple of graph outputs."""
    return build_namespace(to_torch_source(graph))["Model"]()
