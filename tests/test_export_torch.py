"""The torch exporter: each operator of its table on generated single-op graphs, eager torch against
ONNX's ReferenceEvaluator (ONNX Runtime where the reference is known to be wrong); the generated
source is the same from the graph and from its ONNX model, and is standalone."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from dlcfuzz.export import torch as export_torch
from dlcfuzz.export.onnx import to_onnx
from dlcfuzz.export.torch import OPS, ExportError, graph_parts, module_source, onnx_parts, to_torch, unsupported
from dlcfuzz.ir import Graph, Node, TensorType, Value
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import synthesize
from tests.helpers import expected_outputs, ort_generator

torch = pytest.importorskip("torch")

TABLE_OPS = sorted(op for op in REGISTRY if op in OPS)

# reference failures on valid graphs: those graphs are skipped
# dtypes whose results are implementation-defined: skipped rather than compared
UNDEFINED = {
    ("ReduceLogSumExp", "int"): "integer LogSumExp (ORT truncates each exp)",
    ("Pow", "int"): "integer Pow with negative exponents",
    ("ReduceLogSum", "int"): "integer LogSum (the reference rejects it, ORT truncates)",
    ("Resize", "int"): "integer linear/cubic Resize: ONNX does not say how interpolated values round (ORT and "
                       "the reference differ)",
}


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, f"{got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if dtype in ("float32", "float64"):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    elif dtype == "float16":  # numpy accumulates float16 in float16, torch in float32
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)
    else:
        np.testing.assert_array_equal(got, want)


def _expected(op: str, g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    return expected_outputs(g, feeds, op)


def _run_torch(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    module = to_torch(g)
    outs = module(*[torch.from_numpy(np.array(feeds[v.name])) for v in g.inputs])
    return [o.numpy() for o in outs]


@pytest.mark.parametrize("op", TABLE_OPS)
def test_op_matches_onnx(op: str) -> None:
    checked = 0
    for opset, seeds in ((17, range(5)), (21, range(100, 103))):
        try:
            gen = ort_generator([REGISTRY[op]], opset=max(opset, REGISTRY[op].since))
        except ValueError:  # ORT runs no version of it at this opset (CastLike-21)
            continue
        for seed in seeds:
            g = gen.generate(seed)
            kind = "int" if g.inputs and g.inputs[0].type.dtype.startswith(("int", "uint")) else ""
            if unsupported(g) or (op, kind) in UNDEFINED:
                continue
            rng = np.random.default_rng(seed)
            feeds = {v.name: feed_array(rng, v) for v in g.inputs}
            want = _expected(op, g, feeds)
            if want is None:
                continue
            got = _run_torch(g, feeds)
            # GroupNormalization's stash_type 10 computes in float16 (numpy accumulates it in float16, torch
            # in float32): float16's tolerance, as the Relax tests
            in_half = op == "GroupNormalization" and g.nodes[0].attrs.get("stash_type") == 10
            for name, o, w in zip(g.outputs, got, want, strict=True):
                try:
                    _close(o, np.asarray(w), "float16" if in_half else g.values[name].type.dtype)
                except AssertionError as e:
                    raise AssertionError(f"{op} opset {opset} seed {seed} {g.nodes[0].attrs} output {name}: {e}") from e
            checked += 1
    if not checked:
        pytest.skip(f"{op}: every generated graph uses a dtype torch lacks")


def test_torch_only_dtypes_are_refused() -> None:
    g = Graph()
    g.add_value(Value("x", TensorType((2,), "uint32"), "input"))
    g.add_value(Value("y", TensorType((2,), "uint32"), "node"))
    g.add_node(Node("Relu", ["x"], ["y"]))
    g.outputs = ["y"]
    assert "uint32" in unsupported(g)
    g.nodes[0].op = "MaxRoiPool"  # export.torch.NO_TORCH_RULE
    assert "MaxRoiPool" in unsupported(g)


def test_graph_and_onnx_give_the_same_source() -> None:
    """repro scripts rebuild the module from the ONNX file and the test's inputs (which hold the pinned
    runtime inputs' values): it must be the very same source (floats attributes rounded to float32 as
    ONNX stores them)."""
    gen = ort_generator([REGISTRY[op] for op in TABLE_OPS], op_range=(3, 10))
    pinned = 0
    for seed in range(15):
        g = gen.generate(seed)
        pinned += len(g.pinned)
        feeds = synthesize(g, np.random.default_rng(seed))
        assert module_source(*graph_parts(g)) == module_source(*onnx_parts(to_onnx(g), feeds)), seed
    assert pinned


def test_module_takes_inputs_in_order_and_holds_initializers() -> None:
    gen = ort_generator([REGISTRY["Conv"], REGISTRY["Add"], REGISTRY["Gemm"]], op_range=(3, 5), init_rate=1.0,
                        dtypes=("float32",))
    g = next(g for g in map(gen.generate, range(50)) if g.initializers and len(g.inputs) >= 2)
    module = to_torch(g)
    assert len(list(module.buffers())) == sum(1 for _ in g.initializers)
    rng = np.random.default_rng(0)
    feeds = {v.name: feed_array(rng, v) for v in g.inputs}
    outs = module(*[torch.from_numpy(feeds[v.name]) for v in g.inputs])
    assert [tuple(o.shape) for o in outs] == [g.values[o].type.shape for o in g.outputs]


def test_export_errors() -> None:
    with pytest.raises(ExportError, match="no torch rule"):
        module_source(["x"], {}, [("MaxRoiPool", ["x"], ["y"], {})], ["y"])
    with pytest.raises(ExportError, match="must be a constant"):
        module_source(["x", "s"], {}, [("Reshape", ["x", "s"], ["y"], {})], ["y"])


def test_table_matches_torch_ops_and_sources_are_standalone() -> None:
    from dlcfuzz.export import torch_ops

    for op in OPS:
        assert callable(getattr(torch_ops, op, None)), op
    ops_tree = ast.parse(export_torch.ops_source())
    exp_tree = ast.parse(export_torch.exporter_source())
    g = ort_generator([REGISTRY["Conv"], REGISTRY["Add"], REGISTRY["Relu"]], op_range=(3, 5)).generate(0)
    whole_tree = ast.parse(export_torch.to_torch_source(g))  # what a bug bundle's model.py holds
    for tree in (ops_tree, exp_tree, whole_tree):  # no dlcfuzz import anywhere, not even inside functions
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("dlcfuzz") for a in node.names)
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("dlcfuzz") and node.module != "__future__"

    def top_names(tree: ast.Module) -> set[str]:
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
        return names

    # both texts are concatenated into one repro script: no name may be defined twice
    assert not top_names(ops_tree) & top_names(exp_tree)


def _resize_graph(n: int, out: int, scale: float, **attrs) -> Graph:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((1, 1, n), "float32"), "input"))
    g.add_value(Value("s", TensorType((3,), "float32"), "const", np.array([1, 1, scale], dtype=np.float32)))
    g.add_value(Value("y", TensorType((1, 1, out), "float32"), "node"))
    g.add_node(Node("Resize", ["x", "", "s"], ["y"], attrs))
    g.outputs = ["y"]
    return g


def test_resize_takes_the_output_length_as_onnx_length_resized() -> None:
    """ONNX's formulas use length_resized, the output's (whole) length, not the fractional n * scale
    that onnx's reference evaluator uses (ORT follows ONNX)."""
    x = np.array([[[0.0, 10.0, 20.0, 30.0]]], dtype=np.float32)
    # pytorch_half_pixel, floor(4 * 0.301) = 1 output: x_original = 0 (not (0.5 / 0.301) - 0.5 = 1.16)
    g = _resize_graph(4, 1, 0.301, coordinate_transformation_mode="pytorch_half_pixel", mode="nearest",
                      nearest_mode="floor")
    np.testing.assert_array_equal(_run_torch(g, {"x": x})[0].ravel(), [0.0])
    # align_corners, floor(4 * 1.3) = 5 outputs: x_original = i * 3 / 4 -> 0, 7.5, 15, 22.5, 30
    g = _resize_graph(4, 5, 1.3, coordinate_transformation_mode="align_corners", mode="linear")
    np.testing.assert_allclose(_run_torch(g, {"x": x})[0].ravel(), [0, 7.5, 15, 22.5, 30], rtol=1e-6)
