"""Where a value divergence starts: the first diverging operator (GenCoG), for every value finding.

A finding's differing *graph output* says little: one wrong Conv makes every downstream output
differ, and each would name another producer.  ``localize`` exposes every intermediate value of
the test's graph as an output, runs the accused variant and what it was compared with (the
baseline, or the backend's anchor variant) on that graph, and records in the finding's
``details["first_diverging"]`` the first node, in topological order, whose output differs beyond
the tolerance.  The judge calls it (``oracle/judge.py``: ``explain``).  Signatures and titles use
it (``run/dedup.py``), and the reducer keeps that node
and drops everything downstream of it (``run/reduce.py``).

A divergence that starts at a discontinuous operator (a comparison, a rounding, a selection) whose
float inputs already differed within tolerance is rounding noise: such findings get category NOISE,
counted apart and never listed.

Exposing intermediates can change what a compiler fuses, so the divergence may vanish in the
exposed graph; the finding then keeps no location and is signed by the producer of its output.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from dlcfuzz.backends.base import OK, Outcome, Test
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import Graph, Node, Value
from dlcfuzz.ir.dtypes import ONNX_CODE
from dlcfuzz.oracle.compare import compare
from dlcfuzz.oracle.findings import DIFFERENTIAL, METAMORPHIC, NOISE, UNDEFINED, Finding
from dlcfuzz.spec import expand

if TYPE_CHECKING:  # the judge calls localize: its types, not the module, are needed here
    from dlcfuzz.oracle.judge import Criteria, Runner

# Operators whose outputs jump under an arbitrarily small change of a float input (comparisons, signs,
# rounding, selection by rank): where one of them is the first to diverge and its inputs already
# differed by rounding, the divergence is that rounding (a tie broken the other way), not a bug of the op.
DISCONTINUOUS = frozenset({
    "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal", "Sign", "Floor", "Ceil", "Round", "Cast",
    "CastLike", "ArgMax", "ArgMin", "TopK", "Hardmax", "NonZero", "Mod", "QuantizeLinear", "DynamicQuantizeLinear",
    "Shrink", "ThresholdedRelu",
})

# Integer arithmetic that can leave its type's range, where ONNX leaves the result undefined (wrap,
# saturate, anything): recomputed in float64 to tell an overflow from a wrong result.
WRAPPING = frozenset({"Add", "Sub", "Mul", "Neg", "Abs", "Pow", "Sum", "ReduceProd", "ReduceSum",
                      "ReduceSumSquare", "MatMul", "Gemm", "CumSum", "Einsum", "ReduceL2", "ReduceLogSum"})
# reductions whose result fits where an intermediate need not: checked through the intermediate's op
# (int32 ReduceL2 of -52801: its square leaves int32, the reference wraps it, ORT gives 52801)
THROUGH = {"ReduceL2": "ReduceSumSquare", "ReduceLogSum": "ReduceSum"}
CASTS = frozenset({"Cast", "CastLike"})
# The other operators of the registry, classified explicitly (tests/test_operator_record.py checks that
# every operator is in DISCONTINUOUS or CONTINUOUS, and in WRAPPING or NON_WRAPPING): outputs that move
# continuously with float inputs, and results that never leave their type's range (selections, copies,
# float arithmetic, integer operators bounded by their inputs, saturating quantizers).
_CONTINUOUS = """
Abs Neg Exp Log Sqrt Reciprocal Sigmoid Tanh Relu Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh Erf
Softplus Softsign Identity HardSwish Not BitwiseNot Mish Gelu IsNaN IsInf HardSigmoid Elu Selu LeakyRelu Celu
Clip Add Sub Mul Div Pow And Or Xor BitShift BitwiseAnd BitwiseOr BitwiseXor Where Max Min Mean Sum ReduceSum
ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSumExp ReduceLogSum Reshape
Transpose Flatten Squeeze Unsqueeze Expand Tile DepthToSpace SpaceToDepth Shape Size Range ConstantOfShape
EyeLike Concat Split Slice Gather GatherElements GatherND Pad CumSum Trilu ReverseSequence ScatterElements
ScatterND OneHot Compress Conv ConvTranspose MaxPool AveragePool LpPool GlobalAveragePool GlobalMaxPool
GlobalLpPool MaxUnpool RoiAlign MaxRoiPool BatchNormalization InstanceNormalization LayerNormalization
LpNormalization MeanVarianceNormalization RMSNormalization GroupNormalization Gemm MatMul PRelu Softmax
LogSoftmax Resize Dropout Einsum LRN GridSample AffineGrid Attention DequantizeLinear MatMulInteger ConvInteger
QLinearMatMul QLinearConv RNN GRU LSTM HannWindow HammingWindow BlackmanWindow Unique NonMaxSuppression
com.microsoft.FastGelu com.microsoft.BiasGelu com.microsoft.SkipLayerNormalization
com.microsoft.EmbedLayerNormalization com.microsoft.MatMulInteger16 com.microsoft.Attention
SplitToSequence+ConcatFromSequence SplitToSequence+SequenceLength SequenceConstruct+SequenceAt
SequenceConstruct+SequenceLength SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence
SequenceEmpty+SequenceInsert+SequenceAt Optional+OptionalGetElement Optional+OptionalHasElement If
"""
CONTINUOUS = frozenset(_CONTINUOUS.split())
_NON_WRAPPING = """
Ceil Floor Round Exp Log Sqrt Reciprocal Sigmoid Tanh Relu Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh
Atanh Erf Softplus Softsign Sign Identity HardSwish Not BitwiseNot Mish Gelu IsNaN IsInf HardSigmoid Elu Selu
LeakyRelu Celu ThresholdedRelu Shrink Clip Cast CastLike Div Mod Equal Greater Less GreaterOrEqual LessOrEqual
And Or Xor BitShift BitwiseAnd BitwiseOr BitwiseXor Where Max Min Mean ReduceMean ReduceMax ReduceMin ReduceL1
ReduceLogSumExp ArgMax ArgMin Reshape Transpose Flatten Squeeze Unsqueeze Expand Tile DepthToSpace SpaceToDepth
Shape Size Range ConstantOfShape EyeLike Concat Split Slice Gather GatherElements GatherND Pad Trilu
ReverseSequence ScatterElements ScatterND TopK OneHot Compress Conv ConvTranspose MaxPool AveragePool LpPool
GlobalAveragePool GlobalMaxPool GlobalLpPool MaxUnpool RoiAlign MaxRoiPool BatchNormalization
InstanceNormalization LayerNormalization LpNormalization MeanVarianceNormalization RMSNormalization
GroupNormalization PRelu Softmax LogSoftmax Hardmax Resize Dropout LRN GridSample AffineGrid Attention
QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger ConvInteger QLinearMatMul QLinearConv RNN
GRU LSTM HannWindow HammingWindow BlackmanWindow NonZero Unique NonMaxSuppression com.microsoft.FastGelu
com.microsoft.BiasGelu com.microsoft.SkipLayerNormalization com.microsoft.EmbedLayerNormalization
com.microsoft.MatMulInteger16 com.microsoft.Attention SplitToSequence+ConcatFromSequence
SplitToSequence+SequenceLength SequenceConstruct+SequenceAt SequenceConstruct+SequenceLength
SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence SequenceEmpty+SequenceInsert+SequenceAt
Optional+OptionalGetElement Optional+OptionalHasElement If
"""
NON_WRAPPING = frozenset(_NON_WRAPPING.split())


def exposed(g: Graph) -> Graph:
    """A copy of ``g`` whose outputs are every node output, in topological order."""
    out = Graph(opset=g.opset, meta=copy.deepcopy(g.meta))
    out.values = {k: Value(v.name, v.type, v.kind, v.data, dict(v.hint) if v.hint else v.hint)
                  for k, v in g.values.items()}
    out.nodes = [Node(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.name) for n in g.toposort()]
    out.outputs = [o for n in out.nodes for o in n.outputs if o in out.values]
    return out


def rounded_outputs(g: Graph) -> list[int]:
    """Indices of the graph outputs that are integers computed from float math."""
    rounded = g.rounded_from_floats()
    return [i for i, o in enumerate(g.outputs) if o in rounded]


def single_outputs(g: Graph) -> dict[int, str]:
    """The graph outputs that the spec computes through a narrower float type (their index -> that
    type): compared with its tolerance."""
    narrow = g.computed_in_narrower_float()
    return {i: narrow[o] for i, o in enumerate(g.outputs) if o in narrow}


def first_divergence(g: Graph, expected: list[np.ndarray], actual: list[np.ndarray],
                     tolerances: dict[str, tuple[float, float]] | None,
                     inputs: dict[str, np.ndarray] | None = None, runner: Runner | None = None
                     ) -> dict[str, str] | None:
    """The first node of ``g`` (whose outputs are every node output, as ``exposed`` makes them)
    whose output differs between ``expected`` and ``actual``: {node, op, output, kind, dtype, detail}.
    With the graph's ``inputs``, a node whose inputs already differed within tolerance is recomputed
    on the accused side's inputs (``amplified``)."""
    if len(expected) != len(g.outputs) or len(actual) != len(g.outputs):
        return None
    where = {o: n for n in g.nodes for o in n.outputs}
    index = {name: k for k, name in enumerate(g.outputs)}
    rounded, single = g.rounded_from_floats(), g.computed_in_narrower_float()
    for k, name in enumerate(g.outputs):
        m = compare([expected[k]], [actual[k]], tolerances, [0] if name in rounded else [],
                    {0: single[name]} if name in single else {})
        if m is not None:
            n = where[name]
            first = {"node": n.name, "op": n.op, "output": name, "kind": m.kind,
                     "dtype": g.values[name].type.dtype, "detail": m.detail}
            # inputs that already differed (within tolerance): the jump is their rounding; so are integers
            # computed from floats, within their unit (OpenVINO's Shrink of an integer subtracts the bias cast
            # to the integer type, as ONNX's function body does, ONNX Runtime the float bias: the MatMul that
            # reads it multiplies that unit)
            nudged = [x for x in n.inputs if x in index and (g.values[x].type.dtype.startswith("float") or x in rounded)
                      and not np.array_equal(expected[index[x]], actual[index[x]], equal_nan=True)]
            if nudged and m.kind == "value" and (n.op in DISCONTINUOUS or (inputs is not None and amplified(
                    g, n, {**inputs, **dict(zip(g.outputs, actual, strict=True))}, tolerances, runner))):
                first["tie"] = f"{n.op} of {', '.join(nudged)}, which differ by rounding only"
            return first
    return None


def _known(g: Graph, *values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every value of ``g`` known: its constants, then ``values`` (graph inputs, node outputs) over them."""
    known = {n: v.data for n, v in g.values.items() if v.data is not None}
    for more in values:
        known.update(more)
    return known


def amplified(g: Graph, node: Node, values: dict[str, np.ndarray],
              tolerances: dict[str, tuple[float, float]] | None, runner: Runner | None = None) -> bool:
    """Whether ``node``, recomputed by the reference evaluator on the values its inputs had on the
    accused side (``values``: graph inputs and node outputs), gives what the accused side gave: the
    node then computed right, and only amplified its inputs' tolerated rounding (Sin of a Pow whose
    float32 result is near 1e7 turns one ulp into a different sine)."""
    known = _known(g, values)
    if any(o not in known for o in node.outputs):
        return False
    got = recompute(g, node, known, runner)
    return got is not None and compare([np.asarray(known[o]) for o in node.outputs], got, tolerances) is None


# how far ``unstable`` moves a float input: a few units in the last place, as rounding upstream would
NUDGE_ULPS = 4


def unstable(g: Graph, node: Node, values: dict[str, np.ndarray],
             tolerances: dict[str, tuple[float, float]] | None, runner: Runner | None = None) -> bool:
    """Whether ``node``'s result, computed in its own float type by the reference evaluator (the
    spec's function bodies), moves beyond the tolerance when its data input moves by a few units in
    the last place: the expected values there are rounding, not a reference.  MeanVarianceNormalization
    of two close values is E[X^2] - E[X]^2 in float32, which cancels (c44, c43: [3, 3.0001] gives NaN,
    [1000, 1000.01] +-5e6, where float64 gives +-1).  Only the first input moves: the others are
    mostly lengths, scales and indices, where a nudge is a different question.  The ulps are those of
    the narrowest float type the input or the node's result passes through (``computed_in_narrower_float``):
    GroupNormalization with stash_type float16 has float16's rounding in a float32 tensor (c45: [4.07 ..
    6.29] in groups of two, whose float16 E[X^2] - E[X]^2 Inductor rightly computes wider)."""
    known = _known(g, values)
    data = node.inputs[0] if node.inputs else ""
    if not data or data not in known or g.values[data].data is not None:  # a constant is exact
        return False
    x = np.asarray(known[data])
    if x.dtype.kind != "f" or not x.size or node.op not in CONTINUOUS:
        return False
    base = recompute(g, node, known, runner)
    if base is None:
        return False
    rng = np.random.default_rng(0)
    narrow = g.computed_in_narrower_float()
    carried = [np.dtype(t) for t in (narrow.get(data), *(narrow.get(o) for o in node.outputs)) if t]
    eps = max((np.finfo(t).eps for t in [x.dtype, *carried]), key=float) * NUDGE_ULPS
    for _ in range(3):
        nudged = (x * (1 + eps * rng.choice([-1.0, 1.0], size=x.shape))).astype(x.dtype)
        got = recompute(g, node, {**known, data: nudged}, runner)
        if got is not None and compare(base, got, tolerances) is not None:
            return True
    return False


def recompute(g: Graph, node: Node, known: dict[str, np.ndarray], runner: Runner | None = None
              ) -> list[np.ndarray] | None:
    """``node``'s outputs by the reference evaluator, else (it has no implementation of the node at the
    graph's opset: DequantizeLinear before 19) by the baseline's fallback, ONNX Runtime, in ``runner``'s
    isolated workers, on the values ``known`` gives its inputs (None: an input unknown, or neither
    computes the node)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    if any(x and x not in known for x in node.inputs):
        return None
    feeds = {x: np.asarray(known[x]) for x in node.inputs if x}
    types = {k: v.type for k, v in g.values.items()}
    one = helper.make_graph(  # a composite operator as its chain of ONNX operators
        [helper.make_node(n.op, list(n.inputs), list(n.outputs), **n.attrs) for n in expand(node, types)], "one",
        [helper.make_tensor_value_info(x, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for x, a in feeds.items()],
        [helper.make_tensor_value_info(o, ONNX_CODE.get(g.values[o].type.dtype, 0) if o in g.values else 0, None)
         for o in node.outputs])  # the graph's types (ORT needs them), else as the node infers them
    model = helper.make_model(one, opset_imports=[helper.make_opsetid("", g.opset)])
    model.ir_version = helper.find_min_ir_version_for(list(model.opset_import))  # as the exporter's, for ORT
    try:
        with np.errstate(all="ignore"):  # NaN and inf included
            got = ReferenceEvaluator(model).run(None, feeds)
    except Exception:
        if runner is None:
            return None
        from dlcfuzz.oracle.judge import FALLBACK  # the judge imports this module

        o = runner.run(FALLBACK[0], Test(model.SerializeToString(), "{}", feeds), [FALLBACK[1]]).get(FALLBACK[1])
        if o is None or o.status != OK or o.outputs is None:
            return None
        got = o.outputs
    return [np.asarray(x) for x in got]


def overflows(g: Graph, output: str, inputs: dict[str, np.ndarray], computed: dict[str, np.ndarray]) -> bool:
    """Whether integer ``output``'s node, recomputed in float64 (the reference evaluator) on the values
    its inputs had, leaves the range of the output's integer type; or casts a float out of that range."""
    node = next((n for n in g.nodes if output in n.outputs), None)
    dtype = g.values[output].type.dtype
    if node is None or "int" not in dtype or node.op not in WRAPPING | CASTS:
        return False
    values = _known(g, inputs, computed)
    if any(x and x not in values for x in node.inputs):
        return False
    if node.op in CASTS:  # ONNX: a float cast to a fixed-point type out of its range is undefined
        x = np.asarray(values[node.inputs[0]])
        if x.dtype.kind != "f":
            return False  # between integer types the higher bits are dropped, as defined
        info = np.iinfo(np.dtype(dtype))
        with np.errstate(invalid="ignore"):
            return bool(np.any(~np.isfinite(x) | (np.trunc(x) > info.max) | (np.trunc(x) < info.min)))
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    # the data in float64; axes (the second input of reductions and CumSum) stay as they are
    keep = set(node.inputs[1:]) if node.op.startswith("Reduce") or node.op == "CumSum" else set()
    feeds = {x: np.asarray(values[x]) if x in keep else np.asarray(values[x]).astype(np.float64)
             for x in node.inputs if x}
    wide = helper.make_node(THROUGH.get(node.op, node.op), list(node.inputs), [output], **node.attrs)
    graph = helper.make_graph(
        [wide], "wide",
        [helper.make_tensor_value_info(x, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for x, a in feeds.items()],
        [helper.make_tensor_value_info(output, TensorProto.DOUBLE, None)])
    try:
        with np.errstate(all="ignore"):  # a product beyond float64's range is inf: an overflow, not a warning
            result = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", g.opset)])).run(
                None, feeds)[0]
    except Exception:  # no float64 form of the node: no verdict
        return False
    info = np.iinfo(np.dtype(dtype))
    known = np.asarray(result)[~np.isnan(result)]  # an infinite product overflows too
    return bool(known.size and (known.max() > info.max or known.min() < info.min))


def localize(graph: Graph, test: Test, findings: list[Finding], runner: Runner, baseline: tuple[str, str] | None,
             criteria: Criteria, outcomes: Mapping[str, Mapping[str, Outcome]] | None = None) -> None:
    """Sets ``details["first_diverging"]`` of each value finding in ``findings`` that can be located.
    ``runner``: runs the exposed graph (the campaign's worker pool); ``baseline``: the (backend,
    variant) whose outputs differential findings were judged against; ``criteria``: what the test was
    judged by (``oracle/judge.py``: tolerances, low-precision and float32 variants); ``outcomes``: the
    test's own runs, where the judge has them (backend -> variant -> outcome: not run again)."""
    todo = [f for f in findings if f.diverges]
    for f in todo:  # a low-precision variant: what rounding its inputs explains is noise
        against = (f.backend, f.other) if f.oracle == METAMORPHIC else baseline
        if (f.backend, f.variant) in criteria.low_precision and against is not None and (
                against not in criteria.low_precision):
            ran = (outcomes or {}).get(f.backend, {}).get(f.variant)
            why = rounded_inputs(test, f, runner, against, criteria.pair_tolerances({(f.backend, f.variant), against}),
                                 ran)
            if why:
                f.category, f.details["rounded_inputs"] = NOISE, why
    todo = [f for f in todo if f.category != NOISE]
    if not todo or len(graph.nodes) < 2:  # one node: the divergence can only start there
        for f in todo:
            if graph.nodes:
                n = graph.nodes[0]
                _found(f, {"node": n.name, "op": n.op, "output": n.outputs[0], "kind": f.kind,
                           "dtype": graph.values[n.outputs[0]].type.dtype, "detail": f.message}, graph, test, {},
                       criteria.pair_tolerances({(f.backend, f.variant), (f.backend, f.other)}), runner)
        return
    g = exposed(graph)
    try:
        probe = Test(to_bytes(g), g.to_json(), test.inputs)
    except (ValueError, KeyError, TypeError):
        return
    wanted: dict[str, set[str]] = {}
    for f in todo:
        wanted.setdefault(f.backend, set()).add(f.variant)
        if f.oracle != DIFFERENTIAL:
            wanted[f.backend].add(f.other)
    if baseline is not None and any(f.oracle == DIFFERENTIAL for f in todo):
        wanted.setdefault(baseline[0], set()).add(baseline[1])
    got: dict[str, dict[str, Outcome]] = {b: runner.run(b, probe, sorted(vs)) for b, vs in wanted.items()}

    def outputs(backend: str, variant: str) -> list[np.ndarray] | None:
        o = got.get(backend, {}).get(variant)
        return o.outputs if o is not None and o.status == OK else None

    for f in todo:
        expected = outputs(*baseline) if f.oracle == DIFFERENTIAL and baseline else outputs(f.backend, f.other)
        actual = outputs(f.backend, f.variant)
        if expected is None or actual is None:
            continue
        tolerances = criteria.pair_tolerances({(f.backend, f.variant), (f.backend, f.other)})
        first = first_divergence(g, expected, actual, tolerances, test.inputs, runner)
        if first is not None:
            _found(f, first, g, test, dict(zip(g.outputs, expected, strict=True)), tolerances, runner)


# the narrower float types a low-precision variant may compute in (OpenVINO's default: bfloat16 where the CPU
# has it, float16 elsewhere); ml_dtypes (onnx's own dependency) rounds to bfloat16
NARROWER = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


def rounded_initializers(model: bytes, narrow: type) -> bytes | None:
    """The model with its float32 initializers rounded to ``narrow`` (and stored as float32 again); None where it
    has none."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load_model_from_string(model)
    floats = [i for i, t in enumerate(m.graph.initializer) if t.data_type == onnx.TensorProto.FLOAT]
    for i in floats:
        t = m.graph.initializer[i]
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(narrow).astype(np.float32), t.name))
    return m.SerializeToString() if floats else None


def rounded_inputs(test: Test, f: Finding, runner: Runner, against: tuple[str, str],
                   tolerances: dict[str, tuple[float, float]], mine: Outcome | None = None) -> str:
    """Why a low-precision variant's divergence from what it was compared with (``against``: its mate, or the
    baseline) is the rounding of its float32 inputs: that, on the inputs rounded to a narrower type, gives the
    variant's outputs (c49: OpenVINO's bfloat16 default rounds a MaxRoiPool's ROI edge 2.497 to 2.5, which
    falls in another bin); "" where it does not.  ``mine``: the variant's outcome on the test, where known."""
    floats = {k: v for k, v in test.inputs.items() if np.asarray(v).dtype == np.float32}
    # the model's own float32 constants too: the variant rounds them as it rounds what it is fed (c51's
    # MaxRoiPool of constant ROIs)
    models = {name: rounded_initializers(test.model, narrow) for name, narrow in NARROWER.items()}
    constants = any(m is not None for m in models.values())
    if (floats or constants) and (mine is None or mine.outputs is None):
        mine = runner.run(f.backend, test, [f.variant]).get(f.variant)
    if not (floats or constants) or mine is None or mine.status != OK or mine.outputs is None:
        return ""
    for name, narrow in NARROWER.items():
        rounded = Test(models[name] or test.model, test.graph_json, {
            **test.inputs, **{k: np.asarray(v).astype(narrow).astype(np.float32) for k, v in floats.items()}})
        o = runner.run(against[0], rounded, [against[1]]).get(against[1])
        if o is not None and o.status == OK and o.outputs is not None and compare(
                mine.outputs, o.outputs, tolerances) is None:
            return f"{'/'.join(against)} on the inputs rounded to {name} gives {f.variant}'s outputs"
    return ""


def _found(f: Finding, first: dict[str, str], g: Graph, test: Test, computed: dict[str, np.ndarray],
           tolerances: dict[str, tuple[float, float]] | None, runner: Runner | None = None) -> None:
    """Records where ``f``'s divergence starts, and whether that makes it noise or undefined behaviour."""
    f.details["first_diverging"] = first
    node = next((n for n in g.nodes if first["output"] in n.outputs), None)
    if not first.get("tie") and first.get("kind") == "value" and node is not None and unstable(
            g, node, {**test.inputs, **computed}, tolerances, runner):
        first["tie"] = f"{node.op} moves beyond the tolerance when its input moves by {NUDGE_ULPS} ulps"
    if first.get("tie"):
        f.category = NOISE
    elif overflows(g, first["output"], test.inputs, computed):
        first["undefined"] = f"{first['op']} overflows {first['dtype']}"
        f.category = UNDEFINED
