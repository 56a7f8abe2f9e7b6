"""The reference evaluator is refused as a baseline exactly where it is wrong: tiny models run on the
real reference and the real ONNX Runtime (the expected values), with and without the feature a rule
names; ``ReferenceBackend.supports`` must refuse the first and accept the second."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator

from dlcfuzz.backends.reference import ReferenceBackend
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle.compare import compare


def _graph(op: str, inputs: list[tuple[str, tuple, str, np.ndarray | None]], outs: list[tuple[str, tuple, str]],
           opset: int = 17, **attrs) -> Graph:
    """One node; an input with data is a constant, else a runtime input ("" leaves an optional one out)."""
    g = Graph(opset=opset)
    for name, shape, dtype, data in inputs:
        if name:
            g.add_value(Value(name, TensorType(shape, dtype), INPUT_KIND if data is None else CONST_KIND, data))
    for name, shape, dtype in outs:
        g.add_value(Value(name, TensorType(shape, dtype), NODE_KIND))
    g.add_node(Node(op, [i[0] for i in inputs], [o[0] for o in outs], attrs))
    g.outputs = [o[0] for o in outs]
    return g


def _both(g: Graph, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    model = to_bytes(g)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    return expected, [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]


def _trusted(g: Graph) -> bool:
    return ReferenceBackend().supports({n.op for n in g.nodes}, g)


def _rnn(seq_lens: np.ndarray | None) -> Graph:
    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, (1, 2, 2)).astype(np.float32)
    r = rng.uniform(-1, 1, (1, 2, 2)).astype(np.float32)
    inputs = [("X", (3, 2, 2), "float32", None), ("W", (1, 2, 2), "float32", w), ("R", (1, 2, 2), "float32", r)]
    if seq_lens is not None:
        inputs += [("", (), "float32", None), ("seq", (2,), "int32", seq_lens)]
    return _graph("RNN", inputs, [("Y", (3, 1, 2, 2), "float32")], hidden_size=2)


def test_rnn_sequence_lens_is_refused_and_plain_rnn_trusted():
    x = {"X": np.random.default_rng(1).uniform(-1, 1, (3, 2, 2)).astype(np.float32)}
    with_lens = _rnn(np.array([1, 3], dtype=np.int32))  # batch 0 stops after one step: Y is 0 past it
    expected, ref = _both(with_lens, x)
    assert compare(expected, ref) is not None  # the reference runs every step of every batch
    assert not _trusted(with_lens)
    plain = _rnn(None)
    expected, ref = _both(plain, x)
    assert compare(expected, ref) is None
    assert _trusted(plain)


def _lpnorm(p: int) -> Graph:
    return _graph("LpNormalization", [("x", (2, 3), "float32", None)], [("y", (2, 3), "float32")], axis=1, p=p)


def test_lpnormalization_p1_is_refused_and_p2_trusted():
    x = {"x": np.array([[1.0, -2.0, 3.0], [-1.0, -1.0, 2.0]], dtype=np.float32)}
    expected, ref = _both(_lpnorm(1), x)
    np.testing.assert_allclose(expected[0][0], [1 / 6, -2 / 6, 3 / 6], rtol=1e-6)  # x / sum |x| (ONNX's L1)
    assert compare(expected, ref) is not None
    assert not _trusted(_lpnorm(1))
    expected, ref = _both(_lpnorm(2), x)
    assert compare(expected, ref) is None
    assert _trusted(_lpnorm(2))


def _reduce_sum_square(dtype: str) -> Graph:
    return _graph("ReduceSumSquare", [("x", (2, 2), dtype, None)], [("y", (1, 1), dtype)])


def test_reduce_sum_square_int32_is_refused_and_int64_trusted():
    for dtype, wrong in (("int32", True), ("int64", False)):
        g = _reduce_sum_square(dtype)
        expected, ref = _both(g, {"x": np.array([[1, 2], [3, 4]], dtype=dtype)})
        assert expected[0].dtype == np.dtype(dtype) and int(expected[0].item()) == 30
        assert (compare(expected, ref) is not None) == wrong  # the reference sums int32 into int64
        assert _trusted(g) != wrong


def test_without_the_graph_an_operator_with_any_rule_is_refused():
    b = ReferenceBackend()
    assert not b.supports({"LpNormalization", "Add"}) and not b.supports({"GlobalLpPool"})
    assert b.supports({"Add", "Relu"})


def _crop_resize(roi: list[float], scales: list[float] | None, sizes: list[int] | None, n: int, out: int) -> Graph:
    inputs = [("x", (1, 1, n), "float32", None), ("roi", (6,), "float32", np.array([0, 0, *roi[:1], 1, 1, *roi[1:]],
                                                                                  dtype=np.float32))]
    inputs.append(("scales", (3,), "float32", np.array(scales, dtype=np.float32)) if scales else ("", (), "", None))
    if sizes:
        inputs.append(("sizes", (3,), "int64", np.array(sizes, dtype=np.int64)))
    return _graph("Resize", inputs, [("y", (1, 1, out), "float32")], mode="linear", extrapolation_value=-9.0,
                  coordinate_transformation_mode="tf_crop_and_resize")


def test_crop_and_resize_from_a_fractional_scale_is_refused_and_from_sizes_trusted():
    x = {"x": np.array([[[0.0, 10.0, 20.0, 30.0]]], dtype=np.float32)}
    # ONNX: x_original = start (n - 1) + i (end - start) (n - 1) / (length_resized - 1), length_resized
    # = floor(4 * 1.3) = 5: 0.3 + 0.6 i, i.e. 3, 9, 15, 21, 27 on x = 0, 10, 20, 30
    g = _crop_resize([0.1, 0.9], [1, 1, 1.3], None, 4, 5)
    expected, ref = _both(g, x)
    np.testing.assert_allclose(expected[0].ravel(), [3, 9, 15, 21, 27], rtol=1e-5)
    assert compare(expected, ref) is not None  # the reference divides by 4 * 1.3 - 1, not 5 - 1
    assert not _trusted(g)
    for whole in (_crop_resize([0.1, 0.9], [1, 1, 1.25], None, 4, 5), _crop_resize([0.1, 0.9], None, [1, 1, 5], 4, 5)):
        expected, ref = _both(whole, x)
        np.testing.assert_allclose(ref[0].ravel(), [3, 9, 15, 21, 27], rtol=1e-5)
        assert compare(expected, ref) is None and _trusted(whole)


def _pool(op: str, n: tuple[int, ...], out: tuple[int, ...], **attrs) -> Graph:
    return _graph(op, [("x", (1, 1, *n), "float32", None)], [("y", (1, 1, *out), "float32")], **attrs)


def test_average_pool_ceil_mode_is_refused_and_without_it_trusted():
    x = np.arange(20, dtype=np.float32).reshape(1, 1, 5, 4)
    # kernel 5, stride 4, pads 1 all round, ceil: 2x2 windows rows [-1,4) [3,8), cols [-1,4) [3,8) (clipped
    # to the input); count_include_pad 0 averages the input elements in each
    windows = [x[0, 0, r0:r1, c0:c1].mean() for r0, r1 in ((0, 4), (3, 5)) for c0, c1 in ((0, 4), (3, 4))]
    g = _pool("AveragePool", (5, 4), (2, 2), kernel_shape=[5, 5], strides=[4, 4], pads=[1, 1, 1, 1], ceil_mode=1)
    expected, ref = _both(g, {"x": x})
    np.testing.assert_allclose(expected[0].ravel(), windows, rtol=1e-6)
    assert compare(expected, ref) is not None
    assert not _trusted(g)
    # kernel 4, stride 4 on length 1, count_include_pad 1, no pads: ceil_mode makes one window [0, 4) that
    # holds the one input element and no padding; its mean is the element (ORT, TVM, torch), the reference 0
    g = _pool("AveragePool", (1,), (1,), kernel_shape=[4], strides=[4], ceil_mode=1, count_include_pad=1)
    expected, ref = _both(g, {"x": np.array([[[0.75]]], dtype=np.float32)})
    np.testing.assert_allclose(expected[0].ravel(), [0.75])
    assert compare(expected, ref) is not None and not _trusted(g)
    plain = _pool("AveragePool", (6, 6), (2, 2), kernel_shape=[3, 3], strides=[2, 2])
    expected, ref = _both(plain, {"x": np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)})
    assert compare(expected, ref) is None and _trusted(plain)


def test_average_pool_valid_with_dilations_is_refused():
    # kernel 2 dilated by 3 on length 4, VALID: one window (elements 0 and 3); the reference makes 3
    g = _pool("AveragePool", (4,), (1,), opset=19, kernel_shape=[2], dilations=[3], auto_pad="VALID")
    expected, ref = _both(g, {"x": np.arange(4, dtype=np.float32).reshape(1, 1, 4)})
    np.testing.assert_allclose(expected[0].ravel(), [1.5])
    assert expected[0].shape != ref[0].shape and not _trusted(g)


def test_max_pool_1d_with_pads_is_refused():
    # kernel 3, pads [0, 2] on length 4: (4 + 2 - 3) + 1 = 4 outputs; the reference gives 2
    g = _graph("MaxPool", [("x", (1, 1, 4), "int8", None)], [("y", (1, 1, 4), "int8")], opset=14,
               kernel_shape=[3], pads=[0, 2])
    expected, ref = _both(g, {"x": np.array([[[1, 5, 2, 3]]], dtype=np.int8)})
    assert expected[0].ravel().tolist() == [5, 5, 3, 3]
    assert expected[0].shape != ref[0].shape and not _trusted(g)
    two = _graph("MaxPool", [("x", (1, 1, 4, 4), "float32", None)], [("y", (1, 1, 4, 4), "float32")], opset=14,
                 kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    expected, ref = _both(two, {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)})
    assert compare(expected, ref) is None and _trusted(two)


def test_max_pool_valid_with_ceil_mode_is_refused():
    # ONNX's VALID formula: ceil((5 - 4 + 1) / 4) = 1 output; its explicit-pads formula with pads 0:
    # ceil((5 - 4) / 4) + 1 = 2 (ORT, OpenVINO, TVM): the spec is ambiguous, the reference takes the first
    g = _pool("MaxPool", (5,), (1,), kernel_shape=[4], strides=[4], auto_pad="VALID", ceil_mode=1)
    expected, ref = _both(g, {"x": np.arange(5, dtype=np.float32).reshape(1, 1, 5)})
    assert expected[0].shape == (1, 1, 2) and ref[0].shape == (1, 1, 1)
    assert not _trusted(g)
    floor = _pool("MaxPool", (5,), (1,), kernel_shape=[4], strides=[4], auto_pad="VALID")
    assert _trusted(floor)


def test_resize_to_the_same_length_from_another_scale_is_refused():
    def g(scale: float, out: int) -> Graph:
        return _graph("Resize", [("x", (3,), "float32", None), ("", (), "", None),
                                 ("s", (1,), "float32", np.array([scale], dtype=np.float32))],
                      [("y", (out,), "float32")], mode="nearest", nearest_mode="floor")
    x = {"x": np.array([0.0, 10.0, 20.0], dtype=np.float32)}
    # floor(3 * 1.2) = 3: ONNX's scale = length_resized / length_original = 1, half_pixel maps i to i
    same = g(1.2, 3)
    expected, ref = _both(same, x)
    np.testing.assert_array_equal(expected[0], [0.0, 10.0, 20.0])
    assert compare(expected, ref) is not None and not _trusted(same)
    grown = g(2.0, 6)  # (i + 0.5) / 2 - 0.5, floor: 0, 0, 10, 10, 20, 20 in both
    expected, ref = _both(grown, x)
    assert compare(expected, ref) is None and _trusted(grown)


def _unique(sorted_: int, axis: int | None, y: tuple) -> Graph:
    x = np.array([[2, 1], [1, 1], [2, 1]], dtype=np.int64)
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    return _graph("Unique", [("x", (3, 2), "int64", x)], [("y", y, "int64")], **attrs)


def test_unique_unsorted_is_refused_and_sorted_trusted():
    # ONNX: sorted=0 keeps the order of first occurrence: 2 then 1 (flattened), row [2,1] then [1,1]
    flat = _unique(0, None, (2,))
    expected, ref = _both(flat, {})
    np.testing.assert_array_equal(expected[0], [2, 1])
    assert compare(expected, ref) is not None and not _trusted(flat)  # the reference sorts: [1, 2]
    rows = _unique(0, 0, (2, 2))
    expected, ref = _both(rows, {})
    np.testing.assert_array_equal(expected[0], [[2, 1], [1, 1]])
    assert compare(expected, ref) is not None and not _trusted(rows)
    plain = _unique(1, 0, (2, 2))
    expected, ref = _both(plain, {})
    assert compare(expected, ref) is None and _trusted(plain)


def _nms(limit: np.ndarray, iou: np.ndarray | None) -> Graph:
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [2, 2, 3, 3]]], dtype=np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], dtype=np.float32)
    inputs = [("b", (1, 3, 4), "float32", boxes), ("s", (1, 1, 3), "float32", scores),
              ("m", limit.shape, "int64", limit)]
    if iou is not None:
        inputs.append(("i", iou.shape, "float32", iou))
    return _graph("NonMaxSuppression", inputs, [("y", (2, 3), "int64")])


def test_nms_scalar_or_missing_threshold_is_refused_and_vectors_trusted():
    # boxes 0 and 1 overlap with IoU 0.9 / 1.1: box 1 goes; ONNX describes the thresholds as scalars
    for g in (_nms(np.array(3, dtype=np.int64), np.array(0.5, dtype=np.float32)),
              _nms(np.array([3], dtype=np.int64), None)):
        model = to_bytes(g)
        got = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {})[0]
        # with iou_threshold 0.5 and with ONNX's default 0, box 1 overlaps box 0 and goes
        np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 2]])
        with pytest.raises((IndexError, TypeError)):
            ReferenceEvaluator(model).run(None, {})
        assert not _trusted(g)
    plain = _nms(np.array([3], dtype=np.int64), np.array([0.5], dtype=np.float32))
    expected, ref = _both(plain, {})
    assert compare(expected, ref) is None and _trusted(plain)


def test_max_pool_pads_read_in_pairs_are_refused():
    # kernel 3x3, pads [2, 2, 1, 0] (ONNX: H begins 2 and ends 1, W begins 2 and ends 0) on 3x4:
    # (3 + 2 + 1 - 3) + 1 = 4 by (4 + 2 + 0 - 3) + 1 = 4 outputs; the reference reads the pads as
    # (begin, end) per axis and makes 5x3
    g = _pool("MaxPool", (3, 4), (4, 4), kernel_shape=[3, 3], pads=[2, 2, 1, 0])
    expected, ref = _both(g, {"x": np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)})
    assert expected[0].shape == (1, 1, 4, 4) and ref[0].shape == (1, 1, 5, 3)
    assert not _trusted(g)
    same = _pool("MaxPool", (3, 4), (2, 3), kernel_shape=[3, 3], pads=[1, 0, 0, 1])  # both readings agree
    expected, ref = _both(same, {"x": np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)})
    assert compare(expected, ref) is None and _trusted(same)


def test_crop_and_resize_under_an_aspect_ratio_policy_is_refused():
    # 3x4 to sizes [4, 5] under not_smaller: one scale 4/3 for both axes, outputs 4 and 5 (ONNX rounds
    # 4 * 4/3 = 5.33 to 5). The crop (roi 0.1..0.9) maps output i to 0.2 + i * 1.6 / 3 and output j to
    # 0.3 + j * 2.4 / 4 by the integer lengths; x = 10 (4 r + c) is linear, so y = 10 (4 row + col)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) * 10
    rows, cols = 0.2 + np.arange(4) * 1.6 / 3, 0.3 + np.arange(5) * 2.4 / 4
    spec = 10 * (4 * rows[:, None] + cols[None, :])

    def crop(policy: str) -> Graph:
        inputs = [("x", (3, 4), "float32", None), ("roi", (4,), "float32", np.array([0.1, 0.1, 0.9, 0.9], np.float32)),
                  ("", (), "", None), ("sizes", (2,), "int64", np.array([4, 5], np.int64))]
        return _graph("Resize", inputs, [("y", (4, 5), "float32")], opset=19, mode="linear",
                      coordinate_transformation_mode="tf_crop_and_resize", keep_aspect_ratio_policy=policy)

    expected, ref = _both(crop("not_smaller"), {"x": x})
    np.testing.assert_allclose(expected[0], spec, rtol=1e-5)
    assert compare(expected, ref) is not None and not _trusted(crop("not_smaller"))
    expected, ref = _both(crop("stretch"), {"x": x})  # sizes alone: both map by the integer lengths
    assert compare(expected, ref) is None and _trusted(crop("stretch"))



def _roi_align(mode: str) -> Graph:
    rois = np.array([[0.3, 0.2, 2.6, 2.9]], np.float32)
    return _graph("RoiAlign", [("X", (1, 1, 4, 4), "float32", None), ("rois", (1, 4), "float32", rois),
                               ("idx", (1,), "int64", np.array([0], np.int64))],
                  [("Y", (1, 1, 2, 2), "float32")], opset=16, mode=mode, output_height=2, output_width=2,
                  sampling_ratio=1)


def test_roi_align_max_has_no_baseline_and_avg_the_reference() -> None:
    """With one sample per bin (sampling_ratio=1) a bin's max is that sample, its average too: ONNX's max and
    avg give one answer.  ONNX Runtime and the reference give two (both take the max of the sample's four
    weighted corner terms): neither is a baseline for mode=max, and the graph is judged without one."""
    from dlcfuzz.oracle.judge import FALLBACK, REFERENCE_RUN, baseline_chain

    x = {"X": np.random.default_rng(0).uniform(0.5, 2.0, (1, 1, 4, 4)).astype(np.float32)}
    (ort_max,), (ref_max,) = _both(_roi_align("max"), x)
    (ort_avg,), (ref_avg,) = _both(_roi_align("avg"), x)
    np.testing.assert_allclose(ref_avg, ort_avg, rtol=1e-5)
    assert compare([ort_avg], [ort_max]) is not None and compare([ref_avg], [ref_max]) is not None
    assert baseline_chain(_roi_align("max")) == []
    assert baseline_chain(_roi_align("avg")) == [REFERENCE_RUN, FALLBACK]
