"""The TVM (Relax) backend on tiny graphs, with the real compiler."""

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
from dlcfuzz.backends.tvm import TvmBackend
from dlcfuzz.export.onnx import to_onnx
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.spec import REGISTRY
from tests.helpers import SAFE_OPS, assert_repro_replays, make_model, ort_generator, run_variants

pytest.importorskip("tvm", reason="tvm is not installed (pip install apache-tvm)")

BE = TvmBackend()



def test_registered_and_available() -> None:
    import tvm

    assert isinstance(load_backend("tvm"), TvmBackend)
    assert BE.available() == (True, "")
    assert BE.version() == tvm.__version__ and BE.version().startswith("0.")
    names = [v.name for v in BE.variants()]
    assert names[:2] == ["unfused-generic", "fused-generic"]
    # the native variants exist exactly when LLVM knows this CPU (asked of TVM itself), for that CPU
    cpu = str(tvm.target.codegen.llvm_get_system_cpu())
    native = [v for v in BE.variants() if v.name.endswith("-native")]
    if cpu in ("", "generic"):
        assert not native
    else:
        assert [v.name for v in native] == ["unfused-native", "fused-native"]
        assert all(v.options["target"]["mcpu"] == cpu for v in native)
    # CUDA only with a GPU: this machine has one when the NVIDIA driver shows a device
    gpu = any(Path("/dev").glob("nvidia[0-9]*"))
    assert ("default-cuda" in names) == gpu
    for v in BE.variants():
        assert v.options["target"]["kind"] in ("llvm", "cuda")


def test_cuda_variant_only_when_a_gpu_exists(monkeypatch) -> None:
    import dlcfuzz.backends.tvm as m

    monkeypatch.setattr(m, "has_cuda", lambda: False)
    assert all(v.options["target"]["kind"] == "llvm" for v in m.TvmBackend().variants())
    monkeypatch.setattr(m, "has_cuda", lambda: True)
    assert m.TvmBackend().variants()[-1].options["target"]["kind"] == "cuda"
    assert m.TvmBackend().variants()[-1].name == "default-cuda"
    only_cpu = m.TvmBackend()
    only_cpu.targets = ("generic",)
    assert [v.name for v in only_cpu.variants()] == ["unfused-generic", "fused-generic"]


def test_module_does_not_import_tvm() -> None:
    code = "import sys, dlcfuzz.backends.tvm as m; m.TvmBackend().available(); assert 'tvm' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_worker_runs_tvm_without_loading_torch() -> None:
    """tvm_ffi imports torch when it is installed, for DLPack exchange the ONNX path never makes: the
    worker keeps it out, since every fresh worker (a reduction confirms in one) paid 2 s of CPU for it."""
    pytest.importorskip("torch", reason="torch is not installed: nothing to keep out")
    from dlcfuzz.run.worker import PhaseLimits, Worker

    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [3])],
                       [("y", TensorProto.FLOAT, [3])])
    w = Worker("tvm", PhaseLimits())
    try:
        got = w.execute(Test(model, "", {"x": np.array([-1.0, 0.0, 2.0], np.float32)}), ["unfused-generic"])
        maps = Path(f"/proc/{w.proc.pid}/maps").read_text()
    finally:
        w.close()
    np.testing.assert_array_equal(got["unfused-generic"].outputs[0], [0.0, 0.0, 2.0])
    assert "libtorch" not in maps and "tvm" in maps


def test_outputs_in_graph_order_with_graph_dtypes() -> None:
    """Several outputs come back from the VM as a tuple: flattened in graph-output order, with the graph's
    dtypes; a 0-d input stays 0-d; inputs are fed by position, whatever order the graph lists them in."""
    model = make_model(
        [helper.make_node("Greater", ["x", "d"], ["b"]), helper.make_node("Add", ["d", "s"], ["dd"]),
         helper.make_node("Cast", ["i"], ["i2"], to=TensorProto.INT64), helper.make_node("Mul", ["x", "w"], ["xw"])],
        [("s", TensorProto.DOUBLE, []), ("x", TensorProto.DOUBLE, [2, 3]), ("d", TensorProto.DOUBLE, [3]),
         ("i", TensorProto.INT32, [2])],
        [("dd", TensorProto.DOUBLE, [3]), ("b", TensorProto.BOOL, [2, 3]), ("i2", TensorProto.INT64, [2]),
         ("xw", TensorProto.DOUBLE, [2, 3])],
        inits=[("w", np.array([1.0, -2.0, 3.0]))])
    feeds = {"x": np.arange(6.0).reshape(2, 3), "d": np.array([0.5, 2.5, 4.5]), "i": np.array([7, -7], np.int32),
             "s": np.array(10.0)}
    expected = ReferenceEvaluator(model).run(None, feeds)
    for name, outs in run_variants(BE, model, feeds).items():
        assert [o.dtype for o in outs] == [np.float64, np.bool_, np.int64, np.float64], name
        for o, e in zip(outs, expected, strict=True):
            np.testing.assert_array_equal(o, e, err_msg=name)


def test_single_output_and_passthrough() -> None:
    """One graph output is a bare tensor, not a tuple; an output that is a graph input passes through."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [4])],
                       [("y", TensorProto.FLOAT, [4])])
    feeds = {"x": np.array([-1, 2, -3, 4], np.float32)}
    for outs in run_variants(BE, model, feeds).values():
        assert len(outs) == 1
        np.testing.assert_array_equal(outs[0], [0, 2, 0, 4])
    model = make_model([helper.make_node("Neg", ["x"], ["y"])], [("x", TensorProto.FLOAT, [2])],
                       [("y", TensorProto.FLOAT, [2]), ("x", TensorProto.FLOAT, [2])])
    outs = run_variants(BE, model, {"x": np.array([1, 2], np.float32)})["unfused-generic"]
    np.testing.assert_array_equal(outs[0], [-1, -2])
    np.testing.assert_array_equal(outs[1], [1, 2])


def test_generated_graphs_agree_with_reference() -> None:
    gen = ort_generator([REGISTRY[op] for op in SAFE_OPS], op_range=(2, 6), dtypes=("float32",))
    for seed in range(6):
        g = gen.generate(seed)
        rng = np.random.default_rng(seed)
        feeds = {v.name: feed_array(rng, v) for v in g.inputs}
        model = to_onnx(g)
        expected = ReferenceEvaluator(model).run(None, feeds)
        for variant, outs in run_variants(BE, model.SerializeToString(), feeds).items():
            for o, e in zip(outs, expected, strict=True):
                assert o.dtype == e.dtype and o.shape == e.shape
                np.testing.assert_allclose(o, e, rtol=1e-4, atol=1e-5, err_msg=f"seed {seed} {variant}")


def test_compiler_errors_are_not_caught() -> None:
    """An operator the frontend lacks raises from load (phase "import"); an integer Pow from compile."""
    celu = make_model([helper.make_node("Celu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [2])],
                      [("y", TensorProto.FLOAT, [2])])
    with pytest.raises(Exception, match="not supported for frontend ONNX: Celu"):
        BE.load(Test(celu, "", {}))
    pow_int = make_model([helper.make_node("Pow", ["x", "x"], ["y"])], [("x", TensorProto.INT32, [2])],
                         [("y", TensorProto.INT32, [2])])
    imported = BE.load(Test(pow_int, "", {}))
    with pytest.raises(Exception, match="power only applies to float"):
        BE.compile(imported, BE.variants()[0])


@pytest.mark.parametrize("variant", [v.name for v in BE.variants()])
def test_repro_source_replays_the_variant(tmp_path, variant: str) -> None:
    v = next(x for x in BE.variants() if x.name == variant)
    assert_repro_replays(BE, v, tmp_path)
