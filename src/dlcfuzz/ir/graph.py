"""Computation graph: values (typed edges), nodes (operator calls), topological order, JSON."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlcfuzz.ir.dtypes import DTYPES, EXTRA_DTYPES, np_dtype

# operators whose integer outputs are float results cast to the output type
COMPUTES_IN_FLOAT = frozenset({"BlackmanWindow", "HannWindow", "HammingWindow"})
# operators whose mean and variance are computed in their ``stash_type`` (an ONNX element type: 1 float,
# 10 float16, 11 double), and the float types by their precision
STASHED = frozenset({"LayerNormalization", "GroupNormalization"})
STASH_TYPES = {1: "float32", 10: "float16", 11: "float64"}
FLOAT_WIDTH = {"float16": 1, "float32": 2, "float64": 3}
# operators whose float attributes enter integer data: Shrink's bias (x - 0.633 in uint32 rounds either way)
FLOAT_ATTRIBUTES = frozenset({"Shrink"})
# operators whose integer result is real math (a square root, a mean) brought back
# to an integer in a way the spec does not state: the reference truncates, a compiler may round
ROUNDS_REAL_RESULTS = frozenset({"ReduceL2", "ReduceMean"})
# operators whose integer results involve no float math but their float inputs' (integer arithmetic,
# copies, selections, comparisons): every operator of the registry is here or in one of the three
# above (tests/test_operator_record.py)
_NO_HIDDEN_FLOAT = """
Abs Neg Ceil Floor Round Exp Log Sqrt Reciprocal Sigmoid Tanh Relu Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh
Acosh Atanh Erf Softplus Softsign Sign Identity HardSwish Not BitwiseNot Mish Gelu IsNaN IsInf HardSigmoid Elu
Selu LeakyRelu Celu ThresholdedRelu Clip Cast CastLike Add Sub Mul Div Pow Mod Equal Greater Less GreaterOrEqual
LessOrEqual And Or Xor BitShift BitwiseAnd BitwiseOr BitwiseXor Where Max Min Mean Sum ReduceSum ReduceMax
ReduceMin ReduceProd ReduceL1 ReduceSumSquare ReduceLogSumExp ReduceLogSum ArgMax ArgMin Reshape Transpose
Flatten Squeeze Unsqueeze Expand Tile DepthToSpace SpaceToDepth Shape Size Range ConstantOfShape EyeLike Concat
Split Slice Gather GatherElements GatherND Pad CumSum Trilu ReverseSequence ScatterElements ScatterND TopK
OneHot Compress Conv ConvTranspose MaxPool AveragePool LpPool GlobalAveragePool GlobalMaxPool GlobalLpPool
MaxUnpool RoiAlign MaxRoiPool BatchNormalization InstanceNormalization LayerNormalization LpNormalization
MeanVarianceNormalization RMSNormalization GroupNormalization Gemm MatMul PRelu Softmax LogSoftmax Hardmax
Resize Dropout Einsum LRN GridSample AffineGrid Attention QuantizeLinear DequantizeLinear DynamicQuantizeLinear
MatMulInteger ConvInteger QLinearMatMul QLinearConv RNN GRU LSTM NonZero Unique NonMaxSuppression
com.microsoft.FastGelu com.microsoft.BiasGelu com.microsoft.SkipLayerNormalization
com.microsoft.EmbedLayerNormalization com.microsoft.MatMulInteger16 com.microsoft.Attention
SplitToSequence+ConcatFromSequence SplitToSequence+SequenceLength SequenceConstruct+SequenceAt
SequenceConstruct+SequenceLength SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence
SequenceEmpty+SequenceInsert+SequenceAt Optional+OptionalGetElement Optional+OptionalHasElement If
"""
NO_HIDDEN_FLOAT = frozenset(_NO_HIDDEN_FLOAT.split())


# Operator names: ONNX's own operators (the default domain) go by their type ("Relu"); an operator of
# another domain is qualified by it ("com.microsoft.FastGelu"), so that one name says which schema a
# node follows (ONNX's Attention and Microsoft's contrib Attention are different operators).  ONNX
# operator types hold no dots, so the last dot splits a name.
DEFAULT_DOMAINS = ("", "ai.onnx")


def op_identity(op: str) -> tuple[str, str]:
    """(domain, op_type) of an operator name: ("", "Relu"), ("com.microsoft", "FastGelu")."""
    domain, _, op_type = op.rpartition(".")
    return domain, op_type


def op_name(domain: str, op_type: str) -> str:
    """The operator name of an ONNX node's (domain, op_type); the inverse of ``op_identity``."""
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}.{op_type}"


class GraphError(ValueError):
    """A graph breaks a structural rule (dangling input, cycle, type mismatch...)."""


@dataclass(frozen=True, slots=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


INPUT_KIND, CONST_KIND, NODE_KIND = "input", "const", "node"
# how a constant is written in the model besides an initializer (``meta["constant_nodes"]``): a Constant
# node's attribute, or this form, the Shape of the tensor ``meta["shape_of"]`` names (export/onnx.py)
SHAPE_FORM = "shape"
# the attributes a Constant node holds its value in (value_float(s) and value_int(s) since opset 12)
CONSTANT_FORMS = ("value", "value_float", "value_floats", "value_int", "value_ints")


def constant_forms(t: TensorType) -> tuple[str, ...]:
    """The Constant attributes that can hold a constant of type ``t``: ``value`` (any tensor), and for
    float32 / int64 scalars and 1-D tensors (non-empty: an empty list attribute is no value) the
    typed forms, which hold exactly those types."""
    forms = ["value"]
    if t.rank == 0 or (t.rank == 1 and t.numel > 0):
        if t.dtype == "float32":
            forms.append("value_float" if t.rank == 0 else "value_floats")
        elif t.dtype == "int64":
            forms.append("value_int" if t.rank == 0 else "value_ints")
    return tuple(forms)


@dataclass(slots=True)
class Value:
    """A tensor: a runtime graph input, a constant (initializer), or a node's output.

    ``hint`` says which runtime values keep the operator that consumes it defined
    (e.g. ``{"min": 0}`` for a variance); input synthesis reads it.

    A runtime input with ``data`` is *pinned*: a constant-like operand (a Reshape shape, Slice
    starts ...) that the model takes at run time, so that compilers meet it as a graph input,
    yet it is always fed exactly ``data`` (input synthesis, the reducer and the exporters that
    need its value read it there).
    """

    name: str
    type: TensorType
    kind: str
    data: np.ndarray | None = None
    hint: dict[str, Any] | None = None

    @property
    def pinned(self) -> bool:
        """A runtime input whose value is fixed (see the class doc)."""
        return self.kind == INPUT_KIND and self.data is not None


@dataclass(slots=True)
class Node:
    op: str
    inputs: list[str]  # value names; "" marks an omitted optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""


@dataclass
class Graph:
    """A DAG of nodes; ``nodes`` is kept in topological order (generation appends in that order)."""

    values: dict[str, Value] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    opset: int = 17
    meta: dict[str, Any] = field(default_factory=dict)

    # -- construction -------------------------------------------------------------------------
    def add_value(self, value: Value) -> Value:
        if value.name in self.values:
            raise GraphError(f"value {value.name!r} defined twice")
        self.values[value.name] = value
        return value

    def add_node(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    @property
    def inputs(self) -> list[Value]:
        return [v for v in self.values.values() if v.kind == INPUT_KIND]

    @property
    def initializers(self) -> list[Value]:
        return [v for v in self.values.values() if v.kind == CONST_KIND]

    @property
    def pinned(self) -> dict[str, np.ndarray]:
        """The pinned runtime inputs' values (what every run feeds them), by name."""
        return {v.name: v.data for v in self.values.values() if v.pinned}

    def consumers(self) -> dict[str, list[int]]:
        """Value name -> indices of the nodes that read it."""
        users: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for name in node.inputs:
                if name:
                    users.setdefault(name, []).append(i)
        return users

    def rounded_from_floats(self) -> set[str]:
        """Integer values computed from float math (a float value upstream, or an operator that
        computes in float: ONNX's window functions compute the window, then cast it to
        ``output_datatype``; Shrink subtracts a float bias; ReduceL2 of integers is a real number
        brought back to an integer): one ulp of float difference upstream, or another rounding, can
        move them by one unit."""
        floaty = {n for n, v in self.values.items() if v.type.dtype.startswith("float")}
        out: set[str] = set()
        for n in self.toposort():
            if n.op in COMPUTES_IN_FLOAT | FLOAT_ATTRIBUTES | ROUNDS_REAL_RESULTS or any(
                    x in floaty or x in out for x in n.inputs if x):
                out.update(o for o in n.outputs if o in self.values and not self.values[o].type.dtype.startswith(
                    ("float", "bool")))
        return out

    def computed_in_narrower_float(self) -> dict[str, str]:
        """Float values whose computation passes through a narrower float type than their own, as the
        spec defines it, and that type: ONNX's window functions compute the window in float and cast it
        to ``output_datatype``; LayerNormalization and GroupNormalization compute their mean and
        variance in ``stash_type`` (float by default; GroupNormalization's may be float16).  Such values
        carry that type's rounding, and are compared with its tolerance."""
        out: dict[str, str] = {}
        for n in self.toposort():
            through = [out[x] for x in n.inputs if x in out]
            if n.op in COMPUTES_IN_FLOAT:
                through.append("float32")
            stash = STASH_TYPES.get(int(n.attrs.get("stash_type", 1))) if n.op in STASHED else None
            if stash:
                through.append(stash)
            if not through:
                continue
            narrowest = min(through, key=FLOAT_WIDTH.__getitem__)
            for o in n.outputs:
                dtype = self.values[o].type.dtype if o in self.values else ""
                if FLOAT_WIDTH.get(dtype, -1) > FLOAT_WIDTH[narrowest]:
                    out[o] = narrowest
        return out

    def onnx_nodes(self) -> list[Node]:
        """The nodes as ONNX operators: a composite operator's node (spec/sequence.py) as its chain, whose
        values in between are not values of the graph; every other node as itself."""
        from dlcfuzz.spec import expand  # the specs say how a composite is written (spec imports ir)

        types = {name: v.type for name, v in self.values.items()}
        return [m for n in self.nodes for m in expand(n, types)]

    def parts(self) -> list[list[int]]:
        """The node indices of each part that shares no intermediate value with another (graph inputs
        shared between parts do not join them), in node order."""
        made_by = {o: i for i, n in enumerate(self.nodes) for o in n.outputs}
        root = list(range(len(self.nodes)))

        def find(i: int) -> int:
            while root[i] != i:
                i = root[i]
            return i

        for i, n in enumerate(self.nodes):
            for x in n.inputs:
                if x in made_by:
                    root[find(i)] = find(made_by[x])
        parts: dict[int, list[int]] = {}
        for i in range(len(self.nodes)):
            parts.setdefault(find(i), []).append(i)
        return list(parts.values())

    def set_leaf_outputs(self) -> None:
        """Make every node output that no node reads a graph output (Isra's convention)."""
        used = self.consumers()
        self.outputs = [o for n in self.nodes for o in n.outputs if o not in used]

    # -- checks -------------------------------------------------------------------------------
    def toposort(self) -> list[Node]:
        """Nodes in a topological order (Kahn); raises GraphError on a cycle or a dangling input."""
        producer = {o: i for i, n in enumerate(self.nodes) for o in n.outputs}
        indeg = [0] * len(self.nodes)
        succ: list[list[int]] = [[] for _ in self.nodes]
        for i, n in enumerate(self.nodes):
            for name in n.inputs:
                if not name:
                    continue
                if name in producer:
                    indeg[i] += 1
                    succ[producer[name]].append(i)
                elif name not in self.values or self.values[name].kind == NODE_KIND:
                    raise GraphError(f"node {i} ({n.op}) reads undefined value {name!r}")
        ready = [i for i, d in enumerate(indeg) if d == 0]
        order: list[int] = []
        while ready:
            i = ready.pop()
            order.append(i)
            for j in succ[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    ready.append(j)
        if len(order) != len(self.nodes):
            raise GraphError("graph has a cycle")
        return [self.nodes[i] for i in order]

    def validate(self) -> None:
        """Structural validity: single definitions, typed values, acyclic, outputs defined."""
        seen: set[str] = set()
        for n in self.nodes:
            for o in n.outputs:
                if o in seen:
                    raise GraphError(f"value {o!r} produced twice")
                seen.add(o)
                if o not in self.values or self.values[o].kind != NODE_KIND:
                    raise GraphError(f"output {o!r} of {n.op} has no type")
        for v in self.values.values():
            if v.type.dtype not in DTYPES and v.type.dtype not in EXTRA_DTYPES:
                raise GraphError(f"value {v.name!r} has unknown dtype {v.type.dtype!r}")
            if any(d < 0 for d in v.type.shape):
                raise GraphError(f"value {v.name!r} has a negative dimension")
            if v.kind == CONST_KIND and v.data is None:
                raise GraphError(f"constant {v.name!r} has no data")
            if v.kind in (CONST_KIND, INPUT_KIND) and v.data is not None and (
                    tuple(v.data.shape) != v.type.shape or v.data.dtype != np_dtype(v.type.dtype)):
                raise GraphError(f"{v.kind} {v.name!r} data does not match its type {v.type}")
            if v.kind == NODE_KIND and v.name not in seen:
                raise GraphError(f"value {v.name!r} is marked as a node output but no node produces it")
        for o in self.outputs:
            if o not in self.values:
                raise GraphError(f"graph output {o!r} is undefined")
        self.toposort()

    # -- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "opset": self.opset,
            "meta": self.meta,
            "values": [_value_to_dict(v) for v in self.values.values()],
            "nodes": [
                {"op": n.op, "name": n.name, "inputs": n.inputs, "outputs": n.outputs,
                 "attrs": {k: _encode(a) for k, a in n.attrs.items()}}
                for n in self.nodes
            ],
            "outputs": self.outputs,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Graph:
        g = cls(opset=d["opset"], meta=d.get("meta", {}))
        for vd in d["values"]:
            g.add_value(_value_from_dict(vd))
        for nd in d["nodes"]:
            g.add_node(Node(nd["op"], list(nd["inputs"]), list(nd["outputs"]),
                            {k: _decode(a) for k, a in nd["attrs"].items()}, nd.get("name", "")))
        g.outputs = list(d["outputs"])
        return g

    @classmethod
    def from_json(cls, text: str) -> Graph:
        return cls.from_dict(json.loads(text))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Graph) and self.to_json() == other.to_json()


def _array_to_dict(a: np.ndarray) -> dict[str, Any]:
    return {"dtype": a.dtype.name, "shape": list(a.shape),
            "b64": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes(order="C")).decode()}


def _array_from_dict(d: dict[str, Any]) -> np.ndarray:
    dt = np_dtype(d["dtype"]).newbyteorder("<")
    a = np.frombuffer(base64.b64decode(d["b64"]), dtype=dt).reshape(d["shape"])
    return a.astype(np_dtype(d["dtype"]))


def _value_to_dict(v: Value) -> dict[str, Any]:
    out: dict[str, Any] = {"name": v.name, "shape": list(v.type.shape), "dtype": v.type.dtype, "kind": v.kind}
    if v.data is not None:
        out["data"] = _array_to_dict(v.data)
    if v.hint:
        out["hint"] = v.hint
    return out


def _value_from_dict(d: dict[str, Any]) -> Value:
    data = _array_from_dict(d["data"]) if "data" in d else None
    return Value(d["name"], TensorType(tuple(d["shape"]), d["dtype"]), d["kind"], data, d.get("hint"))


def _encode(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return {"tensor": _array_to_dict(a)}
    if isinstance(a, tuple):
        return list(a)
    return a


def _decode(a: Any) -> Any:
    if isinstance(a, dict) and "tensor" in a:
        return _array_from_dict(a["tensor"])
    return a


# graph.meta["language"] of a torch-native program (gen/torch_program.py); an ONNX graph has none
TORCH_LANGUAGE = "torch"


def is_torch_program(graph: Graph) -> bool:
    """Whether ``graph`` is a torch-native program (torch operators, spec/torch) rather than an ONNX graph."""
    return graph.meta.get("language") == TORCH_LANGUAGE
