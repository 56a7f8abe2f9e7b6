"""onnx's ReferenceEvaluator: slow, independent of every compiler, the differential oracle's baseline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant
from dlcfuzz.ir import op_identity


# ---------------------------------------------------------------------------------------------
# Where onnx 1.23.2's evaluator is not a baseline.  Evidence: benchmarks/baseline_trust.py (20
# single-operator graphs per spec, opset 17) -- a graph is against the reference when ONNX Runtime
# (no optimizations) and OpenVINO (CPU, f32) agree with each other and the reference differs, or
# when the reference raises on a graph both run.  Each rule names what it matched there.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """The reference is wrong on ``op`` where ``applies(node, graph)`` holds (always: op-wide)."""

    op: str
    why: str
    applies: Callable[[Any, Any], bool] | None = None
    # ONNX Runtime, the baseline in the reference's place, computes it the same wrong way: no baseline is
    # right there, and the graph is judged without one (crashes and the variants' agreement only)
    ort_too: bool = False


def _x(node, graph):
    """The first input's type."""
    return graph.values[node.inputs[0]].type


def _in(node, i: int) -> bool:
    """Whether optional input i is given."""
    return len(node.inputs) > i and node.inputs[i] != ""


def _const(node, graph, i: int) -> np.ndarray | None:
    """Input i's value when it is a constant (None: a runtime input, or absent)."""
    if not _in(node, i):
        return None
    v = graph.values[node.inputs[i]]
    return None if v.data is None else np.asarray(v.data)


def _auto_pad(node) -> str:
    return node.attrs.get("auto_pad") or "NOTSET"


def _kernel_over_input(node, graph) -> bool:
    """Some effective (dilated) kernel is longer than its unpadded input."""
    dil = node.attrs.get("dilations") or [1] * len(node.attrs["kernel_shape"])
    return any((k - 1) * d + 1 > n for k, d, n in zip(node.attrs["kernel_shape"], dil, _x(node, graph).shape[2:],
                                                       strict=False))


def _pads_negative_or_unknown(node, graph) -> bool:
    pads = _const(node, graph, 1)
    return pads is None or bool((pads < 0).any())


def _pads_paired(node, graph) -> bool:
    """Explicit pads that read otherwise as (begin, end) pairs per axis than ONNX's begins-then-ends."""
    pads = list(node.attrs.get("pads") or [])
    n = len(pads) // 2
    return any(pads[2 * i] != pads[i] or pads[2 * i + 1] != pads[n + i] for i in range(n))


def _gather_elements_off(node, graph) -> bool:
    """A negative axis, or indices shorter than data on an axis other than ``axis``."""
    axis = node.attrs.get("axis") or 0
    data, idx = _x(node, graph).shape, graph.values[node.inputs[1]].type.shape
    return axis < 0 or any(a != b for k, (a, b) in enumerate(zip(data, idx, strict=True)) if k != axis)


def _rnn_extras(node, graph) -> bool:
    """RNN/GRU/LSTM: sequence_lens given (ignored), activations given (ignored or rejected), clip given (ignored)."""
    return _in(node, 4) or node.attrs.get("activations") is not None or node.attrs.get("clip") is not None


def _fractional_width(node, graph) -> bool:
    """Resize where some scaled length n * scale is not a whole number, or the scales are not constant:
    from scales, or from sizes under a keep_aspect_ratio_policy (one scale for every axis, the smallest or
    largest of sizes / lengths)."""
    shape = _x(node, graph).shape
    axes = node.attrs.get("axes") or range(len(shape))
    policy = node.attrs.get("keep_aspect_ratio_policy", "stretch")
    if _in(node, 3):
        if policy not in ("not_larger", "not_smaller"):
            return False
        sizes = _const(node, graph, 3)
        if sizes is None:
            return True
        ratios = [float(s) / shape[a] for a, s in zip(axes, sizes, strict=False) if shape[a]]
        scales = np.full(len(ratios), (min if policy == "not_larger" else max)(ratios or [1.0]))
    elif _in(node, 2):
        scales = _const(node, graph, 2)
        if scales is None:
            return True
    else:
        return False
    widths = [shape[a] * float(sc) for a, sc in zip(axes, scales.astype(np.float32), strict=False)]
    return any(w != int(w) for w in widths)


def _same_length_other_scale(node, graph) -> bool:
    """Resize from scales where an axis keeps its length under a scale that is not 1 (or the scales
    are not constant)."""
    if _in(node, 3) or not _in(node, 2):
        return False
    scales = _const(node, graph, 2)
    if scales is None:
        return True
    shape, out = _x(node, graph).shape, graph.values[node.outputs[0]].type.shape
    axes = node.attrs.get("axes") or range(len(shape))
    return any(shape[a] == out[a] and float(sc) != 1.0 for a, sc in zip(axes, scales, strict=False))


_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

RULES: tuple[Rule, ...] = (
    # no implementation: every graph raises (20/20 each)
    Rule("GlobalLpPool", "no registered implementation"),
    Rule("MaxRoiPool", "no registered implementation"),
    Rule("DequantizeLinear", "no implementation below version 19 (20/20 at opset 17)",
         lambda n, g: g.opset < 19),
    # whole-operator errors
    Rule("GlobalMaxPool", "drops/keeps the wrong spatial dims: wrong output rank (16/20; the rest by chance)"),
    Rule("LayerNormalization", "raises on stash_type 16, returns Mean/InvStdDev in X's type (7/8)"),
    # narrower: the feature named, bad/with vs bad/without in the sweep
    Rule("RNN", "ignores sequence_lens and clip, raises on non-default activations (Elu ...): 12/18, all "
         "with one of them", _rnn_extras),
    Rule("GRU", "ignores sequence_lens, activations and clip (6/8, all with one of them)", _rnn_extras),
    Rule("LSTM", "ignores sequence_lens, activations, clip (clip: 3/4 elements off) and input_forget (2/2 "
         "size-1 corners of benchmarks/spec_corners.py)",
         lambda n, g: _rnn_extras(n, g) or bool(n.attrs.get("input_forget"))),
    Rule("QLinearMatMul", "wrong output shape when a or b is 1-D (keeps the dim numpy's matmul drops; 2/2 "
         "size-1 corners)", lambda n, g: _x(n, g).rank == 1 or g.values[n.inputs[3]].type.rank == 1),
    Rule("LpNormalization", "p=1 sums x, not |x| (p=1 10/10 vs 0/10)", lambda n, g: n.attrs.get("p") == 1),
    Rule("ReduceSumSquare", "int32 sums into int64 (int32 6/6 vs 0/14)",
         lambda n, g: _x(n, g).dtype == "int32"),
    Rule("ReduceLogSum", "rejects integer inputs (3/3 integer)", lambda n, g: _x(n, g).dtype in _INTS),
    Rule("ReduceLogSumExp", "rejects integer inputs and rank 0 (7/7 one or the other)",
         lambda n, g: _x(n, g).dtype in _INTS or _x(n, g).rank == 0),
    Rule("Softsign", "rejects rank-0 inputs (rank 0 3/3 vs 0/17)", lambda n, g: _x(n, g).rank == 0),
    Rule("MaxPool", "SAME_LOWER: floor(n/s) outputs (4/4 vs 1/14); a kernel longer than the unpadded input "
         "raises (NOTSET: 'output shape cannot be null', SAME: 'tuple index out of range'); wrong Indices",
         lambda n, g: _auto_pad(n) == "SAME_LOWER" or len(n.outputs) > 1 or _kernel_over_input(n, g)),
    Rule("MaxPool", "ceil_mode with explicit pads: output length and windows wrong (kernel 4, pads [3,3], length 5: "
         "5 outputs, ORT and OpenVINO 8; kernel 3, pads [2,0]: the unpadded windows' maxima), seen in a 10-minute "
         "ORT campaign",
         lambda n, g: bool(n.attrs.get("ceil_mode")) and any(n.attrs.get("pads") or [])),
    Rule("MaxPool", "auto_pad VALID with ceil_mode: ONNX gives two formulas, VALID's ceil((n - k + 1) / s) "
         "and explicit pads' ceil((n + 0 - k) / s) + 1, which differ where s does not divide n - k; the reference "
         "takes the first, ORT, OpenVINO and TVM all the second (kernel [2,4], strides [2,4] on 2x5: 1x1 vs 1x2), "
         "seen in a 5-minute ORT campaign",
         lambda n, g: bool(n.attrs.get("ceil_mode")) and _auto_pad(n) == "VALID"),
    Rule("MaxPool", "reads explicit pads as (begin, end) per axis where ONNX lists every begin, then every end "
         "(kernel 3x3, pads [2,2,1,0] on 3x4: 5x3 where ORT, OpenVINO, TVM and IREE give 4x4; AveragePool reads "
         "them right), seen in a 10-minute ORT campaign", _pads_paired),
    Rule("MaxPool", "1-D with explicit pads: wrong output length or IndexError (9/9 pads of kernels 2-4 on lengths "
         "4-6, at opsets 13, 17, 18 and 22; kernel 3, pads [0,2], length 4: 2 outputs, ORT 4), seen in a "
         "10-minute ORT campaign", lambda n, g: _x(n, g).rank == 3 and any(n.attrs.get("pads") or [])),
    Rule("AveragePool", "ceil_mode: asserts with auto_pad, misplaces windows with explicit pads, 0 or NaN for a "
         "kernel longer than the input, and wrong partial windows in 3-D (kernel [1,4,1], strides [2,3,3]) where "
         "ORT, OpenVINO and TVM agree; benchmarks/baseline_trust.py: ceil_mode 10/16 bad vs 0/22 at opset 22, "
         "6/11 vs 0/28 at 19; seen in 5- and 10-minute ORT campaigns",
         lambda n, g: bool(n.attrs.get("ceil_mode"))),
    Rule("AveragePool", "auto_pad VALID with dilations: wrong output shape (kernel [2,2,1], dilations [1,3,3] on "
         "4x4x1: 3x3x1, ORT, OpenVINO, TVM and IREE 3x1x1), seen in a 10-minute ORT campaign",
         lambda n, g: _auto_pad(n) == "VALID" and any(d > 1 for d in n.attrs.get("dilations") or [])),
    Rule("LpPool", "averages instead of summing windows that hold padding, and ceil_mode's partial windows "
         "(benchmarks/baseline_trust.py: ceil_mode 9/9 bad vs 1/31 at opset 22; 0/20 at opset 17, where "
         "LpPool-11 draws no ceil_mode or dilations: kept for opset 18+)",
         lambda n, g: g.opset >= 18 and (_auto_pad(n) != "NOTSET" or any(n.attrs.get("pads") or [])
                                         or bool(n.attrs.get("ceil_mode")))),
    Rule("ConvTranspose", "mixes up W slices with group > 1 (reshape errors), SAME outputs in*stride, col2im "
         "raises on an explicit output_shape (9/9 one of them)",
         lambda n, g: (n.attrs.get("group") or 1) > 1 or _auto_pad(n).startswith("SAME")
         or n.attrs.get("output_shape") is not None),
    Rule("LRN", "loops its window over N instead of C (index out of bounds with N=5, C=2)",
         lambda n, g: _x(n, g).shape[0] != _x(n, g).shape[1]),
    Rule("Mean", "fails to broadcast into its first input (10/10 where it has fewer elements than the output)",
         lambda n, g: any(g.values[i].type.shape != _x(n, g).shape for i in n.inputs[1:])),
    Rule("GatherElements", "wants indices as large as data off the axis, and reads a negative axis as a "
         "dimension index of its own (19/19 one or the other)", _gather_elements_off),
    Rule("Pad", "rejects negative pads ('index can't contain negative values', 15/15)", _pads_negative_or_unknown),
    Rule("Slice", "clamps the start of a negative step wrongly: empty where one element is due (2/2, both with "
         "a negative step)", lambda n, g: _in(n, 4) and ((st := _const(n, g, 4)) is None or bool((st < 0).any()))),
    Rule("Trilu", "overflows on k near the int64 limits (2/2)",
         lambda n, g: _in(n, 1) and ((k := _const(n, g, 1)) is None or abs(int(k.reshape(-1)[0])) > 2**40)),
    Rule("OneHot", "raises on depth given as a 1-element vector (12/12)",
         lambda n, g: g.values[n.inputs[1]].type.rank == 1),
    Rule("GridSample", "rejects the opset-16 mode names bilinear/bicubic (10/10)",
         lambda n, g: n.attrs.get("mode") in ("bilinear", "bicubic")),
    Rule("GridSample", "computes float64 in float32 (1e-7 relative errors on a 3-D border sample where ORT and "
         "torch agree to 1e-15), seen in a 10-minute ORT campaign", lambda n, g: _x(n, g).dtype == "float64"),
    Rule("MaxUnpool", "reads I against the inferred shape when output_shape is given (7/7 index out of bounds)",
         lambda n, g: _in(n, 2)),
    Rule("QLinearConv", "fails on 1-D and 3-D convolutions (broadcast errors with per-channel scales, 7/7), "
         "wrong 3-D SAME_UPPER shapes", lambda n, g: _x(n, g).rank != 4),
    Rule("QuantizeLinear", "divides float16 in float16 (off by 1; ORT and torch in float32)",
         lambda n, g: _x(n, g).dtype == "float16"),
    Rule("Resize", "pytorch_half_pixel ignores ONNX's 'x_original = 0 if length_resized == 1' (length 1 output: "
         "ORT and OpenVINO take element 0, the reference another), seen in a 10-minute ORT campaign",
         lambda n, g: n.attrs.get("coordinate_transformation_mode") == "pytorch_half_pixel"
         and 1 in g.values[n.outputs[0]].type.shape),
    Rule("Resize", "tf_crop_and_resize and align_corners from scales: the reference maps coordinates with the "
         "fractional width n * scale where ONNX says length_resized, the integer output length (length 4, scale "
         "1.3, crop roi [0.1,0.9]: ORT and the spec's formula 3,9,15,21,27, the reference 3,8.71,...; "
         "align_corners: ORT 0,7.5,...,30, the reference 0,7.14,...,28.57), seen in a 5-minute ORT campaign; "
         "the same from sizes under keep_aspect_ratio_policy not_smaller (one scale, 1.92, for lengths 25, 1, 2, "
         "2 to 48, 2, 4, 4: ORT and torch agree, the reference not), seen in a 10-minute ORT campaign",
         lambda n, g: n.attrs.get("coordinate_transformation_mode") in ("tf_crop_and_resize", "align_corners")
         and _fractional_width(n, g)),
    Rule("Resize", "an axis resized from a scale other than 1 to its own length: ONNX defines scale = "
         "length_resized / length_original (1 there: the identity, as ORT and OpenVINO give), the reference "
         "maps with the given scale (length 3, scale 1.2, nearest: ORT 0,10,20, the reference 0,0,10), seen in a "
         "5-minute ORT campaign", lambda n, g: _same_length_other_scale(n, g)),
    Rule("NonMaxSuppression", "indexes max_output_boxes_per_class / iou_threshold / score_threshold with [0], so "
         "it raises on the scalars ONNX describes (ORT takes both forms), and raises when iou_threshold is omitted "
         "(200 generated single-op graphs: 129 raise, every one with a scalar or no iou_threshold; the others match "
         "ORT)", lambda n, g: not _in(n, 3) or any(g.values[x].type.rank == 0 for x in n.inputs[2:] if x)),
    Rule("Attention", "qk_matmul_output_mode 0 (the QK product) with a softcap: returns the softcapped scores, "
         "which ONNX defines as mode 1 (200 generated single-op graphs: 10 of 11 such calls off, the one other "
         "had softcap 0; ORT and torch agree with ONNX's text)",
         lambda n, g: len(n.outputs) > 3 and not n.attrs.get("qk_matmul_output_mode") and bool(n.attrs.get("softcap"))),
    Rule("AffineGrid", "returns float32 whatever theta's type (float64 theta: a float32 grid; ORT and torch "
         "float64)", lambda n, g: _x(n, g).dtype != "float32"),
    Rule("Unique", "sorted=0: returns the sorted values when Y is the only output, and rebuilds Y with np.take on "
         "axis 0 of the unflattened input whatever the axis (wrong or IndexError); 400 generated single-op graphs: "
         "106 of the 153 with sorted=0 off or raising, the 247 with sorted=1 right, ORT right on all 400 against a "
         "by-hand reading of the ONNX text", lambda n, g: n.attrs.get("sorted") == 0),
    Rule("RoiAlign", "mode=max takes the max of each sample's four weighted corner terms where ONNX takes the max "
         "of the bilinear samples; ONNX Runtime does the same and warns that its max mode is incorrect (with "
         "sampling_ratio 1 a bin's max is its one sample, its average: both give other values for max and avg; "
         "c46: OpenVINO's max matched a hand computation and was listed against them, TVM's listed too)",
         lambda n, g: n.attrs.get("mode") == "max", ort_too=True),
    Rule("Resize", "negative axes, float64 data; integer data with linear/cubic rounds differently (1/10)",
         lambda n, g: any(a < 0 for a in n.attrs.get("axes") or []) or _x(n, g).dtype == "float64"
         or (_x(n, g).dtype in _INTS and (n.attrs.get("mode") or "nearest") != "nearest")),
)
# the sequence and optional patterns (spec/sequence.py): onnx 1.23's SequenceInsert takes its position
# modulo the sequence's length, and Optional wraps its input in a list that OptionalGetElement returns
RULES += (
    Rule("Optional+OptionalGetElement", "Optional holds [x], which OptionalGetElement returns as is: one leading "
         "dimension too many (60/60 generated single-pattern graphs; ORT returns x)"),
    Rule("SequenceEmpty+SequenceInsert+SequenceAt", "SequenceInsert computes a given position modulo the length: "
         "into an empty sequence, ZeroDivisionError (every graph with the position)", lambda n, g: _in(n, 1)),
    Rule("SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence", "SequenceInsert at position n "
         "(ONNX: [-n, n], n appends) inserts at (n + n) % n = 0, the front (ORT appends)",
         lambda n, g: _in(n, 1) and ((p := _const(n, g, 1)) is None or int(p) == len(n.inputs) - 3)),
)
# The registry's operators the reference is trusted on whole: no rule, no disagreement seen in the sweeps of
# benchmarks/baseline_trust.py or in campaigns.  Every operator is in RULES, of another domain (``foreign``)
# or here (tests/test_operator_record.py): a new one is swept and classified.
_TRUSTED = """
Abs Neg Ceil Floor Round Exp Log Sqrt Reciprocal Sigmoid Tanh Relu Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh
Acosh Atanh Erf Softplus Sign Identity HardSwish Not BitwiseNot Mish Gelu IsNaN IsInf HardSigmoid Elu Selu
LeakyRelu Celu ThresholdedRelu Shrink Clip Cast CastLike Add Sub Mul Div Pow Mod Equal Greater Less
GreaterOrEqual LessOrEqual And Or Xor BitShift BitwiseAnd BitwiseOr BitwiseXor Where Max Min Sum ReduceSum
ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ArgMax ArgMin Reshape Transpose Flatten Squeeze
Unsqueeze Expand Tile DepthToSpace SpaceToDepth Shape Size Range ConstantOfShape EyeLike Concat Split Gather
GatherND CumSum ReverseSequence ScatterElements ScatterND TopK Compress Conv GlobalAveragePool
BatchNormalization InstanceNormalization MeanVarianceNormalization RMSNormalization GroupNormalization Gemm
MatMul PRelu Softmax LogSoftmax Hardmax Dropout Einsum DynamicQuantizeLinear MatMulInteger ConvInteger
HannWindow HammingWindow BlackmanWindow NonZero SplitToSequence+ConcatFromSequence
SplitToSequence+SequenceLength SequenceConstruct+SequenceAt SequenceConstruct+SequenceLength
Optional+OptionalHasElement If
"""
TRUSTED = frozenset(_TRUSTED.split())
BY_OP: dict[str, tuple[Rule, ...]] = {}
for _r in RULES:
    BY_OP[_r.op] = (*BY_OP.get(_r.op, ()), _r)


def foreign(op: str) -> Rule | None:
    """The rule for an operator outside ONNX's domains (com.microsoft's contrib operators): the
    evaluator implements ONNX's operators only."""
    domain = op_identity(op)[0]
    return Rule(op, f"no implementation: an operator of domain {domain}") if domain else None


def distrusted(node, graph) -> Rule | None:
    """The first rule that says the reference is wrong on this node, or None."""
    if (rule := foreign(node.op)) is not None:
        return rule
    for rule in BY_OP.get(node.op, ()):
        if rule.applies is None or rule.applies(node, graph):
            return rule
    return None


def no_baseline(graph) -> Rule | None:
    """The first rule that says neither the reference nor ONNX Runtime computes a node of ``graph`` right."""
    return next((r for n in graph.nodes if (r := distrusted(n, graph)) is not None and r.ort_too), None)


class ReferenceBackend(Backend):
    name = "reference"
    package = "onnx"
    pip = "onnx"

    def supports(self, ops: set[str], graph=None) -> bool:
        """Graphs with a node the evaluator gets wrong take another baseline; without the graph, any
        operator with a rule is refused (its features cannot be checked)."""
        if graph is None:
            return not ops & BY_OP.keys() and not any(foreign(op) for op in ops)
        return all(distrusted(n, graph) is None for n in graph.nodes)

    def load(self, test: Test):
        import onnx

        return onnx.load_model_from_string(test.model)

    def compile(self, imported, variant: Variant):
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(imported)

    def run(self, compiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o) for o in compiled.run(None, inputs)]

    def repro_source(self, variant: Variant) -> str:
        return '''
from onnx.reference import ReferenceEvaluator


def run_model(model_path, inputs):
    return ReferenceEvaluator(model_path).run(None, inputs)
'''
