"""The OpenVINO backend on tiny graphs, with the real CPU plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test
from dlcfuzz.backends.openvino import OpenVinoBackend
from dlcfuzz.export.onnx import to_onnx
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.oracle.unsupported import is_unsupported
from dlcfuzz.spec import REGISTRY
from tests.helpers import SAFE_OPS, assert_repro_replays, make_model, ort_generator, run_variants

pytest.importorskip("openvino", reason="openvino is not installed (pip install openvino)")

BE = OpenVinoBackend()



def test_registered_and_available() -> None:
    assert isinstance(load_backend("openvino"), OpenVinoBackend)
    assert BE.available() == (True, "")
    assert BE.version().startswith("20")
    names = [v.name for v in BE.variants()]
    assert names == ["f32", "default", "f32-dynamic"]
    for v in BE.variants():
        assert v.options["config"]["INFERENCE_NUM_THREADS"] == 1


def test_module_does_not_import_openvino() -> None:
    code = ("import sys, dlcfuzz.backends.openvino as m; m.OpenVinoBackend().available(); "
            "assert 'openvino' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_outputs_in_graph_order_with_graph_dtypes() -> None:
    """Outputs come back in ONNX graph-output order with the declared dtypes, including int64 / f64 / bool."""
    model = make_model(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Greater", ["x", "d"], ["b"]),
         helper.make_node("Add", ["d", "d"], ["dd"]), helper.make_node("Cast", ["i"], ["i2"], to=TensorProto.INT64)],
        [("x", TensorProto.DOUBLE, [2, 3]), ("d", TensorProto.DOUBLE, [3]), ("i", TensorProto.INT32, [2])],
        [("dd", TensorProto.DOUBLE, [3]), ("b", TensorProto.BOOL, [2, 3]), ("i2", TensorProto.INT64, [2]),
         ("s", TensorProto.INT64, [2])])
    feeds = {"x": np.arange(6.0).reshape(2, 3), "d": np.array([0.5, 2.5, 4.5]), "i": np.array([7, -7], np.int32)}
    expected = ReferenceEvaluator(model).run(None, feeds)
    for name, outs in run_variants(BE, model, feeds).items():
        assert [o.dtype for o in outs] == [np.float64, np.bool_, np.int64, np.int64], name
        for o, e in zip(outs, expected, strict=True):
            np.testing.assert_array_equal(o, e, err_msg=name)


def test_inputs_fed_by_position() -> None:
    """Dropout reading a graph input makes OpenVINO rename that input after Dropout's output: by name it would fail."""
    model = make_model([helper.make_node("Dropout", ["x"], ["y"]), helper.make_node("Neg", ["z"], ["w"])],
                       [("z", TensorProto.FLOAT, [2]), ("x", TensorProto.FLOAT, [3])],
                       [("w", TensorProto.FLOAT, [2]), ("y", TensorProto.FLOAT, [3])])
    feeds = {"x": np.array([1, 2, 3], np.float32), "z": np.array([4, 5], np.float32)}
    for outs in run_variants(BE, model, feeds).values():
        np.testing.assert_array_equal(outs[0], [-4, -5])
        np.testing.assert_array_equal(outs[1], [1, 2, 3])


def test_generated_graphs_agree_with_reference() -> None:
    gen = ort_generator([REGISTRY[op] for op in SAFE_OPS], op_range=(2, 6), dtypes=("float32",))
    for seed in range(8):
        g = gen.generate(seed)
        rng = np.random.default_rng(seed)
        feeds = {v.name: feed_array(rng, v) for v in g.inputs}
        model = to_onnx(g)
        expected = ReferenceEvaluator(model).run(None, feeds)
        for variant, outs in run_variants(BE, model.SerializeToString(), feeds).items():
            # "default" computes in bf16 on CPUs that have it
            tol = {"rtol": 5e-2, "atol": 5e-2} if variant == "default" else {"rtol": 1e-4, "atol": 1e-5}
            for o, e in zip(outs, expected, strict=True):
                assert o.dtype == e.dtype and o.shape == e.shape
                np.testing.assert_allclose(o, e, **tol, err_msg=f"seed {seed} {variant}")


def test_compiler_errors_are_not_caught() -> None:
    """Resizing the batch dimension is refused by the CPU plugin at compile time; the error must escape."""
    model = make_model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"])],
                       [("x", TensorProto.FLOAT, [1, 1, 2, 2])], [("y", TensorProto.FLOAT, [2, 1, 2, 2])],
                       inits=[("sizes", np.array([2, 1, 2, 2], np.int64))])
    imported = BE.load(Test(model, "", {}))
    with pytest.raises(RuntimeError, match="only supports resize on spatial dimensions"):
        BE.compile(imported, BE.variants()[0])


@pytest.mark.parametrize("variant", [v.name for v in BE.variants()])
def test_repro_source_replays_the_variant(tmp_path, variant: str) -> None:
    v = next(x for x in BE.variants() if x.name == variant)
    assert_repro_replays(BE, v, tmp_path)


def _error(call) -> Exception:
    with pytest.raises(Exception) as info:
        call()
    return info.value


def test_stated_limits_of_the_cpu_plugin_are_declines() -> None:
    """Two limits OpenVINO states in its own words, seen in campaigns, are declines:
    - a per-axis QuantizeLinear compiles static, and the dynamic model's FakeQuantize "doesn't support non
      per-tensor quantization";
    - a column-major MaxPool (storage_order=1) "is supported only for inputs with static rank" (after a
      LayerNormalization's Mean output, whose rank the frontend leaves unknown)."""
    variants = {v.name: v for v in BE.variants()}
    quantize = make_model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=-2)],
                          [("x", TensorProto.FLOAT, [1, 1, 5, 1])], [("y", TensorProto.UINT8, [1, 1, 5, 1])],
                          inits=[("s", np.array([0.4, 0.1, 0.9, 0.3, 0.2], np.float32)),
                                 ("z", np.array([45, 87, 250, 159, 154], np.uint8))])
    BE.compile(BE.load(Test(quantize, "", {})), variants["f32"])
    e = _error(lambda: BE.compile(BE.load(Test(quantize, "", {})), variants["f32-dynamic"]))
    assert "doesn't support non per-tensor quantization" in str(e)
    assert is_unsupported("openvino", "compile", type(e).__name__, str(e))
    pool = make_model([helper.make_node("LayerNormalization", ["x", "g"], ["y", "mean", "inv"]),
                       helper.make_node("MaxPool", ["mean"], ["p", "i"], kernel_shape=[1, 1, 1], storage_order=1)],
                      [("x", TensorProto.FLOAT, [1, 1, 1, 1, 2])], [("p", TensorProto.FLOAT, [1, 1, 1, 1, 1])],
                      inits=[("g", np.array([[[-1.3]]], np.float32))])
    e = _error(lambda: BE.load(Test(pool, "", {})))
    assert "supported only for inputs with static rank" in str(e)
    assert is_unsupported("openvino", "import", type(e).__name__, str(e))
    # an int32 ReduceL2 whose axes come at run time: the plugin has no kernel for it and no reference to
    # fall back on, and says so (a 30-minute campaign listed it as a bug)
    reduce = make_model([helper.make_node("ReduceL2", ["x", "axes"], ["y"], keepdims=1)],
                        [("x", TensorProto.INT32, [2, 3]), ("axes", TensorProto.INT64, [1])],
                        [("y", TensorProto.INT32, [2, 1])], opset=18)
    e = _error(lambda: BE.compile(BE.load(Test(reduce, "", {})), variants["f32"]))
    assert "Cannot fallback on ngraph reference implementation" in str(e)
    assert is_unsupported("openvino", "compile", type(e).__name__, str(e))
    # a check that fails without saying it is a limit stays a bug
    assert not is_unsupported("openvino", "compile", "RuntimeError",
                              "ROIAlign node with name 'r' has invalid shape on 1 input: [0,4]")


def test_a_conversion_report_is_keyed_on_its_root_failure() -> None:
    """OpenVINO's conversion report lists every operation it failed to convert: a LayerNormalization whose
    Scale broadcasts to X (as ONNX allows) fails, and the Reduce* reading it then fails on the unknown
    element type. The bug is the LayerNormalization's, whichever Reduce* follows; a Pad in opset 19's wrap
    mode is refused in OpenVINO's words, a decline."""
    from dlcfuzz.oracle import CRASH as CRASH_ORACLE
    from dlcfuzz.oracle import Finding
    from dlcfuzz.run.dedup import signature

    def failure(nodes: list, x_shape: list[int], opset: int = 17, inits: tuple = ()) -> Exception:
        from onnx import numpy_helper

        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for n, a in inits])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
        return _error(lambda: BE.load(Test(model.SerializeToString(), "", {})))

    def sig(e: Exception) -> str:
        return signature(Finding(CRASH_ORACLE, "exception", "openvino", "f32", "import", str(e), type(e).__name__))

    norm = helper.make_node("LayerNormalization", ["x", "x"], ["n"])
    after = [failure([norm, helper.make_node(op, ["n"], ["y"])], [2, 1, 1]) for op in ("ReduceMax", "ReduceMin")]
    assert all("Unsupported input type dynamic" in str(e) for e in after)
    assert sig(after[0]) == sig(after[1])
    # a report of one failure and one of it and another read alike: Compress of a 1-element condition
    # "Accessing out-of-range dimension", alone and before a reflect Pad of int32 that OpenVINO refuses
    cond = (("cond", np.array([True])),)
    compress = helper.make_node("Compress", ["x", "cond"], ["c"])
    alone = failure([compress, helper.make_node("Identity", ["c"], ["y"])], [1, 1], 18, cond)
    then_pad = failure([compress, helper.make_node("Pad", ["c", "pads"], ["y"], mode="reflect")], [1], 18,
                       (*cond, ("pads", np.array([0, 0], np.int64))))
    assert "Accessing out-of-range dimension" in str(alone) and "-- Pad-18" in str(then_pad)
    assert sig(alone) == sig(then_pad)
    assert not any(is_unsupported("openvino", "import", type(e).__name__, str(e)) for e in after)
    pad = helper.make_node("Pad", ["x", "pads"], ["p"], mode="wrap")
    wrap = failure([pad, helper.make_node("ReduceSum", ["p"], ["y"])], [1, 1], 21,
                   (("pads", np.array([3, 0, 0, 1], np.int64)),))
    assert "Unsupported padding mode" in str(wrap)
    assert is_unsupported("openvino", "import", type(wrap).__name__, str(wrap))


def test_a_dropped_input_is_the_same_error_in_the_repro_source(tmp_path) -> None:
    """OpenVINO drops an LSTM's peephole input P (it ignores it): the backend raises ``DroppedInput``, and
    the bundle's standalone source raises an error of that name and words, so that its repro.py says
    "reproduced" (a reduced case of a campaign, tests/data/roots/a1d509e1ed33e1df)."""
    from dlcfuzz.backends.openvino import DroppedInput
    from dlcfuzz.export.onnx import to_bytes
    from dlcfuzz.ir import Graph

    data = Path(__file__).parent / "data" / "roots" / "a1d509e1ed33e1df"
    model = to_bytes(Graph.from_json((data / "graph.json").read_text()))
    with np.load(data / "inputs.npz") as f:
        feeds = {k: f[k] for k in f.files}
    variant = BE.variants()[0]
    with pytest.raises(DroppedInput) as ours:
        BE.run(BE.compile(BE.load(Test(model, "", feeds)), variant), feeds)
    path = tmp_path / "model.onnx"
    path.write_bytes(model)
    namespace: dict = {}
    exec(compile(BE.repro_source(variant), "repro", "exec"), namespace)
    with pytest.raises(Exception) as theirs:
        namespace["run_model"](str(path), feeds)
    assert type(theirs.value).__name__ == "DroppedInput" and str(theirs.value) == str(ours.value)


def test_a_run_that_swallowed_an_error_retires_its_worker() -> None:
    """A Resize of the batch axis on one inference thread: the CPU plugin swallows its refusal and returns
    an empty output where the graph declares none (a reduced case of a campaign, tests/data/threads); the
    process is corrupt after it (a third such run segfaulted), so the backend says so and the pool does not
    keep the worker.  A run with right outputs keeps it.  (Only in workers: run here, the swallowing case
    left this process to segfault at its next run.)"""
    from dlcfuzz.export.onnx import to_bytes
    from dlcfuzz.ir import Graph
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    data = Path(__file__).parent / "data" / "threads" / "dd616b4172927c74"
    g = Graph.from_json((data / "graph.json").read_text())
    with np.load(data / "inputs.npz") as f:
        feeds = {v.name: (v.data if v.pinned else f[v.name]) for v in g.inputs}
    test = Test(to_bytes(g), g.to_json(), feeds)
    benign = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [2, 3])],
                        [("y", TensorProto.FLOAT, [2, 3])])
    x = {"x": np.ones((2, 3), np.float32)}
    pool = WorkerPool(PhaseLimits())
    try:
        assert pool.run("openvino", Test(benign, "", x), ["f32"])["f32"].status == "ok"
        assert len(pool.idle.get("openvino", [])) == 1
        got = pool.run("openvino", test, ["f32"])["f32"]
        assert got.status == "ok" and got.outputs[0].size == 0
        assert pool.idle.get("openvino", []) == []  # retired, not pooled
    finally:
        pool.close()
