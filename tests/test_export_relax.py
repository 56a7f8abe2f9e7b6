"""The Relax exporter: each operator of its table on generated single-op graphs, written with the
BlockBuilder, compiled by TVM for llvm and run on the Relax VM, against ONNX's ReferenceEvaluator
(ONNX Runtime where the reference is known to be wrong)."""

from __future__ import annotations

import numpy as np
import pytest

from dlcfuzz.export.relax_ops import OPS, UNSUPPORTED_DTYPES, unsupported_call
from dlcfuzz.gen.isra import IsraGenerator
from dlcfuzz.ir import DTYPE_OF_CODE, Graph, Node, TensorType, Value
from dlcfuzz.ir.hints import feed_array, random_array
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from tests.helpers import expected_outputs, ort_generator

tvm = pytest.importorskip("tvm", reason="tvm is not installed (pip install apache-tvm)")

from dlcfuzz.export.relax import Layout, supported, to_relax  # noqa: E402 -- after the tvm check

TABLE_OPS = sorted(op for op in REGISTRY if op in OPS)
SEEDS = 3  # graphs checked per operator: compilation (~0.1-0.8 s a graph) dominates the run time

# reference failures on valid graphs: those graphs are skipped



# checked against ONNX Runtime here only: the torch exporter's Slice agrees with the reference (a backward
# slice from below -d comes out empty), and torch has no MaxRoiPool
RELAX_ONLY_WRONG = {
    'Slice': 'reference empties a backward slice whose start is below -d (ONNX clamps it to 0)',
    'MaxRoiPool': 'no reference implementation',
}

def _unsigned(dtype: str) -> bool:
    return dtype.startswith("uint")


def _types(node: Node, g: Graph) -> list[TensorType | None]:
    return [g.values[x].type if x else None for x in node.inputs]


def _all_extreme(lowest: bool):
    """ArgMax/ArgMin: some reduced slice holds only the dtype's lowest (highest) value."""
    def case(node: Node, g: Graph, feeds: dict) -> bool:
        x = feeds.get(node.inputs[0])
        if x is None or x.dtype.kind not in "iu":
            return False
        info = np.iinfo(x.dtype)
        return bool(np.any(np.all(x == (info.min if lowest else info.max), axis=node.attrs.get("axis") or 0)))
    return case


def _scatter_smaller_indices(node: Node, g: Graph, feeds: dict) -> bool:
    """indices differ from data in a dim the flat offsets are not independent of (TVM's topi
    scatter_elements assumes equal shapes: it offsets data by the indices' strides)."""
    data, idx = g.values[node.inputs[0]].type.shape, g.values[node.inputs[1]].type.shape
    ax = (node.attrs.get("axis") or 0) % len(data)
    return idx[1:ax] != data[1:ax] or idx[ax + 2:] != data[ax + 2:]


def _roi_empty_grid(node: Node, g: Graph, feeds: dict) -> bool:
    """RoiAlign half_pixel (roi_align aligned=True) with adaptive sampling and a box of zero width
    or height: no sample at all."""
    boxes = g.values[node.inputs[1]].data
    return (not node.attrs.get("sampling_ratio") and node.attrs.get("coordinate_transformation_mode",
            "half_pixel") == "half_pixel" and bool(np.any((boxes[:, 2] == boxes[:, 0]) | (boxes[:, 3] == boxes[:, 1]))))


def _nms_nonpositive_candidate(node: Node, g: Graph, feeds: dict) -> bool:
    """NonMaxSuppression: a score <= 0 that passes the score threshold."""
    scores = g.values[node.inputs[1]].data
    low = float(g.values[node.inputs[4]].data.reshape(-1)[0]) if len(node.inputs) > 4 else -np.inf
    return bool(np.any((scores <= 0) & (scores > low)))


# cases whose results are implementation-defined: skipped rather than compared
# (op, case) -> reason; CASES[case] is a predicate on (node, graph, feeds)
UNDEFINED = {
    ("ReduceLogSumExp", "int"): "integer LogSumExp (ORT truncates each exp)",
    ("Pow", "int"): "integer Pow with negative exponents",
    ("ReduceLogSum", "int"): "integer LogSum (the reference rejects it, ORT truncates)",
    ("Cast", "float to unsigned"): "negative floats cast to an unsigned type (undefined in C, ORT)",
    ("Resize", "int antialias"): "integer antialiased Resize: sums within rounding error of .5 round either way",
}
# TVM computes these wrong or crashes on them (docs/discrepancies.md, "TVM Relax"); they stay in the
# table (the fuzzer should meet them) and are skipped here
TVM_BUGS = {
    ("EyeLike", "dtype"): "eye_like's legalization ignores dtype: the result has the input's dtype",
    ("ArgMax", "all lowest"): "argmax gives -1 for a slice holding only the dtype's lowest value",
    ("ArgMin", "all highest"): "argmin gives -1 for a slice holding only the dtype's highest value",
    ("Equal", "bool"): "equal on bool tensors: LLVM verification fails (fcmp on i1)",
    ("Sign", "unsigned"): "sign on unsigned integers: legalization makes a uint -1 and fails",
    ("DepthToSpace", "CRD"): "nn.pixel_shuffle legalizes to topi.nn.pixel_shuffle, which does not exist",
    ("ScatterElements", "smaller indices"): "scatter_elements with indices smaller than data scatters to "
                                             "wrong places",
    ("GridSample", "reflection, align_corners, length 1"): "grid_sample fails to compile: divide by zero",
    ("RoiAlign", "empty grid"): "roi_align returns uninitialized memory for a box without samples",
    ("Resize", "align_corners to length 1"): "resize2d align_corners to an output length 1: divide by zero",
    ("RMSNormalization", "all axes"): "rms_norm over every axis fails to compile ('Tensor dimension mismatch in "
                                      "read ndim = 1, indices.size=0')",
    ("Unique", "inverse of a flattened N-D input"): "relax.run.unique returns numpy 2's inverse_indices, shaped like "
                                                    "X for a flattened X, where ONNX's is 1-D (match_cast fails)",
    ("NonMaxSuppression", "iou 0"): "all_class_non_max_suppression with iou_threshold 0 selects nothing (ONNX: "
                                    "the top box, and every box that overlaps no kept one)",
    ("NonMaxSuppression", "score <= 0"): "all_class_non_max_suppression never suppresses a box whose score is <= 0",
    ("NonMaxSuppression", "vector limit"): "all_class_non_max_suppression's legalization reads a constant "
                                           "max_output_boxes_per_class with int(array): a 1-element vector raises "
                                           "under numpy 2.4 ('only 0-dimensional arrays can be converted')",
    ("NonMaxSuppression", "runtime limit"): "all_class_non_max_suppression with max_output_boxes_per_class a "
                                            "runtime tensor selects the wrong boxes (found with pinned runtime "
                                            "inputs: match_cast of the result fails, 12 rows vs 6)",
}
CASES = {
    "int": lambda node, g, feeds: _types(node, g)[0].dtype.startswith(("int", "uint")),
    "float to unsigned": lambda node, g, feeds: _types(node, g)[0].dtype.startswith("float") and _unsigned(
        DTYPE_OF_CODE[node.attrs["to"]]),
    "dtype": lambda node, g, feeds: node.attrs.get("dtype") is not None and DTYPE_OF_CODE[
        node.attrs["dtype"]] != _types(node, g)[0].dtype,
    "all lowest": _all_extreme(True),
    "all highest": _all_extreme(False),
    "bool": lambda node, g, feeds: _types(node, g)[0].dtype == "bool",
    "unsigned": lambda node, g, feeds: _unsigned(_types(node, g)[0].dtype),
    "CRD": lambda node, g, feeds: node.attrs.get("mode") == "CRD",
    "smaller indices": _scatter_smaller_indices,
    "reflection, align_corners, length 1": lambda node, g, feeds: node.attrs.get("padding_mode") == "reflection"
    and bool(node.attrs.get("align_corners")) and 1 in _types(node, g)[0].shape[2:],
    "empty grid": _roi_empty_grid,
    "int antialias": lambda node, g, feeds: bool(node.attrs.get("antialias")) and not _types(node, g)[
        0].dtype.startswith("float"),
    "all axes": lambda node, g, feeds: node.attrs.get("axis", -1) % _types(node, g)[0].rank == 0,
    "inverse of a flattened N-D input": lambda node, g, feeds: node.attrs.get("axis") is None
    and _types(node, g)[0].rank > 1 and len(node.outputs) > 2,
    "iou 0": lambda node, g, feeds: len(node.inputs) < 4 or not node.inputs[3]
    or float(g.values[node.inputs[3]].data.reshape(-1)[0]) == 0.0,
    "score <= 0": _nms_nonpositive_candidate,
    "vector limit": lambda node, g, feeds: len(node.inputs) > 2 and _types(node, g)[2].rank == 1,
    "runtime limit": lambda node, g, feeds: len(node.inputs) > 2 and bool(node.inputs[2])
    and g.values[node.inputs[2]].kind == "input",
    "align_corners to length 1": lambda node, g, feeds: node.attrs.get("coordinate_transformation_mode")
    == "align_corners" and g.values[node.outputs[0]].type.rank == 4 and 1 in g.values[node.outputs[0]].type.shape[2:],
}


def _close(got: np.ndarray, want: np.ndarray, dtype: str, loose: bool = False) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, f"{got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if dtype in ("float32", "float64") and not loose:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    elif dtype.startswith("float"):
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)
    else:
        np.testing.assert_array_equal(got, want)


def _expected(op: str, g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    return expected_outputs(g, feeds, op, RELAX_ONLY_WRONG)


def _run_relax(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from tvm import relax

    ex = tvm.compile(to_relax(g), tvm.target.Target({"kind": "llvm"}))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(np.array(feeds[v.name])) for v in g.inputs])
    outs = [out] if hasattr(out, "numpy") else list(out)
    return [o.numpy() for o in outs]


def _loose(op: str, g: Graph) -> bool:
    """Computed in float16 (GroupNormalization's stash_type 10): float16 tolerance."""
    return op == "GroupNormalization" and g.nodes[0].attrs.get("stash_type") == 10


def _skip_reason(op: str, g: Graph, feeds: dict[str, np.ndarray]) -> str | None:
    node = g.nodes[0]
    why = unsupported_call(op, _types(node, g), node.attrs)
    if why:
        return why
    for (bug_op, case), reason in (UNDEFINED | TVM_BUGS).items():
        if bug_op == op and CASES[case](node, g, feeds):
            return reason
    return None


def generator(op: str) -> IsraGenerator:
    """Single-op graphs as ONNX Runtime runs them; an operator ORT cannot run (GroupNormalization's
    context-dependent function) is generated for the ONNX spec, checked against the reference."""
    spec = REGISTRY[op]
    try:
        return ort_generator([spec], opset=max(17, spec.since))
    except ValueError:
        return IsraGenerator([spec], GenOptions(opset=max(17, spec.since), target="onnx"), (1, 1))


@pytest.mark.parametrize("op", TABLE_OPS)
def test_op_matches_onnx(op: str) -> None:
    gen = generator(op)
    checked = 0
    for seed in range(4 * SEEDS):  # seeds whose graph is skipped do not count: SEEDS graphs checked
        if checked == SEEDS:
            break
        g = gen.generate(seed)
        rng = np.random.default_rng(seed)
        feeds = {v.name: feed_array(rng, v) for v in g.inputs}
        if _skip_reason(op, g, feeds):
            continue
        want = _expected(op, g, feeds)
        if want is None:
            continue
        where = f"{op} seed {seed} {g.nodes[0].attrs} {[str(v.type) for v in g.inputs]}"
        try:
            got = _run_relax(g, feeds)
        except Exception as e:
            raise AssertionError(f"{where}: {e}") from e
        assert len(got) == len(g.outputs)
        for name, o, w in zip(g.outputs, got, want, strict=True):
            try:
                _close(o, np.asarray(w), g.values[name].type.dtype, _loose(op, g))
            except AssertionError as e:
                raise AssertionError(f"{where} output {name}: {e}") from e
        checked += 1
    if not checked:
        pytest.skip(f"{op}: every generated graph uses a dtype TVM lacks or an excluded case")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_on_resize2d(mode: str) -> None:
    """Resize of a 4-D float input on H and W is TVM's image.resize2d (the generator rarely draws
    it): by sizes and by whole scales, for each coordinate transformation it takes."""
    for ctm, by in (("half_pixel", "sizes"), ("align_corners", "scales"), ("asymmetric", "sizes"),
                    ("pytorch_half_pixel", "scales")):
        g = Graph(opset=19)
        g.add_value(Value("x", TensorType((1, 2, 3, 4), "float32"), "input"))
        target = np.array([1, 2, 6, 2]) if by == "sizes" else np.array([1, 1, 2, 0.5], np.float32)
        g.add_value(Value("s", TensorType((4,), target.dtype.name), "const", target.astype(
            np.int64 if by == "sizes" else np.float32)))
        g.add_value(Value("y", TensorType((1, 2, 6, 2), "float32"), "node"))
        g.add_node(Node("Resize", ["x", "", "s"] if by == "scales" else ["x", "", "", "s"], ["y"],
                        {"mode": mode, "coordinate_transformation_mode": ctm, "nearest_mode": "round_prefer_ceil"}))
        g.outputs = ["y"]
        feeds = {"x": random_array(np.random.default_rng(0), g.values["x"].type)}
        assert "resize2d" in str(to_relax(g))
        _close(_run_relax(g, feeds)[0], _expected("Resize", g, feeds)[0], "float32")


def test_supported_names_missing_ops() -> None:
    g = Graph()
    g.add_value(Value("x", TensorType((2, 3), "float32"), "input"))
    g.add_value(Value("y", TensorType((2, 3), "float32"), "node"))
    g.add_node(Node("Relu", ["x"], ["y"]))
    g.outputs = ["y"]
    assert supported(g) is None
    g.nodes[0].op = "DFT"  # no spec, no translation
    assert "DFT" not in OPS and "DFT" in supported(g)


def _tvm_topk_or_reduce(op: str, dtype: str) -> None:
    """Compiles and runs one TopK / ReduceMax / ReduceMin on ``dtype`` with real TVM (its ONNX
    frontend, which reaches the same kernels the Relax exporter's graphs do); raises what TVM raises."""
    from onnx import helper

    from dlcfuzz.backends.base import Test
    from dlcfuzz.backends.tvm import TvmBackend
    from dlcfuzz.ir import ONNX_CODE
    from tests.helpers import make_model

    code = ONNX_CODE[dtype]
    x = np.arange(12).reshape(4, 3).astype(dtype)
    if op == "TopK":
        model = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], [("x", code, [4, 3])],
                           [("v", code, [4, 2]), ("i", 7, [4, 2])], inits=[("k", np.array([2], np.int64))])
    else:
        model = make_model([helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0)], [("x", code, [4, 3])],
                           [("y", code, [4])])
    be = TvmBackend()
    be.run(be.compile(be.load(Test(model, "", {"x": x})), be.variants()[0]), {"x": x})


def test_unsupported_call_reads_the_dtype_table() -> None:
    # what the table must say, written out here (not read back from it)
    refused = [("TopK", "int16"), ("TopK", "uint16"), ("TopK", "uint32"), ("TopK", "uint64"),
               ("ReduceMax", "bool"), ("ReduceMin", "bool")]
    accepted = [("TopK", "int32"), ("TopK", "int64"), ("TopK", "float32"), ("ReduceMax", "float32"),
                ("ReduceMin", "int8"), ("Relu", "float32"), ("Relu", "bool")]
    for op, dtype in refused:
        why = unsupported_call(op, [TensorType((2,), dtype)])
        assert why and why.startswith(f"{op} on {dtype}: ") and why.endswith(UNSUPPORTED_DTYPES[op, dtype]), why
    for op, dtype in accepted:
        assert unsupported_call(op, [TensorType((2,), dtype)]) is None, (op, dtype)
    assert set(UNSUPPORTED_DTYPES) == set(refused)
    # the refusals are TVM's own: it fails on them and runs their neighbours
    with pytest.raises(Exception, match="Unsupported input dtype"):
        _tvm_topk_or_reduce("TopK", "uint16")
    with pytest.raises(Exception, match="Cannot decide min_value"):
        _tvm_topk_or_reduce("ReduceMax", "bool")
    _tvm_topk_or_reduce("TopK", "int32")
    _tvm_topk_or_reduce("ReduceMax", "float32")
    assert unsupported_call("RoiAlign", [TensorType((1, 1, 2, 2), "float32")], {"mode": "max"})
    assert unsupported_call("RoiAlign", [TensorType((1, 1, 2, 2), "float32")], {"mode": "avg"}) is None
    data, idx = TensorType((3,), "bool"), TensorType((2, 1), "int64")
    assert "bool" in unsupported_call("ScatterND", [data, idx, TensorType((2,), "bool")], {"reduction": "add"})
    assert unsupported_call("ScatterND", [data, idx, TensorType((2,), "bool")], {}) is None


def test_layouts_give_the_same_results() -> None:
    """Functions cut at every node and plain bindings compute what one dataflow main computes."""
    ops = ["Add", "Relu", "MatMul", "Transpose", "Softmax", "Split", "TopK"]
    g = ort_generator([REGISTRY[op] for op in ops], op_range=(4, 6), dtypes=("float32",)).generate(7)
    rng = np.random.default_rng(0)
    feeds = {v.name: feed_array(rng, v) for v in g.inputs}
    want = _run_relax(g, feeds)
    from tvm import relax

    layout = Layout(list(range(1, len(g.nodes))), [False] * (len(g.nodes) + 1))
    ex = tvm.compile(to_relax(g, layout), tvm.target.Target({"kind": "llvm"}))
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](*[tvm.runtime.tensor(feeds[v.name]) for v in g.inputs])
    got = [o.numpy() for o in ([out] if hasattr(out, "numpy") else list(out))]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
