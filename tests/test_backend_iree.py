"""The IREE backend on tiny graphs, with the real importer, iree-compile and runtime."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import COMPILE, ERROR, IMPORT, OK, Test, Variant
from dlcfuzz.backends.iree import IreeBackend, IreeUnsupported
from dlcfuzz.backends.iree_profile import lowered_ops, profile
from dlcfuzz.oracle.unsupported import is_unsupported
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from tests.helpers import make_model

pytest.importorskip("iree.compiler", reason="IREE is not installed (pip install iree-base-compiler==3.13.0 "
                                            "iree-base-runtime==3.13.0)")
pytest.importorskip("iree.runtime", reason="IREE's runtime is not installed (pip install iree-base-runtime==3.13.0)")

BE = IreeBackend()
CPU_VARIANTS = ["O0-generic", "O0-host", "O3-generic", "O3-host"]
SRC = str(Path(__file__).resolve().parents[1] / "src")


def variant(name: str) -> Variant:
    return next(v for v in BE.variants() if v.name == name)


def test_registered_with_settings_and_cpu_targets() -> None:
    assert isinstance(load_backend("iree"), IreeBackend)
    assert BE.available() == (True, "")
    assert BE.version() == "3.13.0"
    assert [v.name for v in BE.variants()][:4] == CPU_VARIANTS
    assert "--iree-llvmcpu-target-cpu=host" in variant("O3-host").options["flags"]
    assert "--iree-opt-level=O0" in variant("O0-generic").options["flags"]


def test_module_does_not_import_iree() -> None:
    # finding iree.compiler imports the namespace package "iree" (empty), not the compiler
    code = ("import sys, dlcfuzz.backends.iree as m; m.IreeBackend().available(); "
            "assert not {'iree.compiler', 'iree.runtime'} & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def run_all(model: bytes, feeds: dict[str, np.ndarray], names=CPU_VARIANTS) -> dict[str, list[np.ndarray]]:
    imported = BE.load(Test(model, "", feeds))
    return {n: BE.run(BE.compile(imported, variant(n)), feeds) for n in names}


def test_inputs_fed_by_name_and_outputs_in_graph_order() -> None:
    """Inputs declared as (b, a) with an initializer listed among the graph inputs too (IR 3 style):
    fed by position, Sub would come out negated, or the initializer would take an argument's place.
    The scalar input k stays 0-d (IREE checks the rank of every argument)."""
    w = np.array([10.0, 20.0, 30.0], np.float64)
    nodes = [helper.make_node("Sub", ["a", "b"], ["d"]), helper.make_node("Add", ["d", "w"], ["t"]),
             helper.make_node("Mul", ["t", "k"], ["s"]),
             helper.make_node("Greater", ["a", "b"], ["g"]), helper.make_node("Shape", ["a"], ["shape"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("b", TensorProto.DOUBLE, [3]),
         helper.make_tensor_value_info("w", TensorProto.DOUBLE, [3]),
         helper.make_tensor_value_info("a", TensorProto.DOUBLE, [3]),
         helper.make_tensor_value_info("k", TensorProto.DOUBLE, [])],
        [helper.make_tensor_value_info("shape", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("s", TensorProto.DOUBLE, [3]),
         helper.make_tensor_value_info("g", TensorProto.BOOL, [3])],
        initializer=[helper.make_tensor("w", TensorProto.DOUBLE, [3], w)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    feeds = {"a": np.array([1.0, 5.0, -2.0]), "b": np.array([4.0, 1.0, -3.0]), "k": np.array(2.0)}
    for name, outs in run_all(model, feeds, ["O0-generic", "O3-host"]).items():
        assert [o.dtype for o in outs] == [np.int64, np.float64, np.bool_], name  # f64 is not demoted
        np.testing.assert_array_equal(outs[0], [3], err_msg=name)
        np.testing.assert_array_equal(outs[1], [14.0, 48.0, 62.0], err_msg=name)
        np.testing.assert_array_equal(outs[2], [False, True, True], err_msg=name)


def test_variants_agree_with_reference_on_a_small_network() -> None:
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["r"]),
         helper.make_node("Softmax", ["r"], ["y"], axis=-1), helper.make_node("ReduceMean", ["x"], ["mean"], axes=[1])],
        [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 4]), ("mean", TensorProto.FLOAT, [2, 1])],
        inits=[("w", np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))])
    feeds = {"x": np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32)}
    expected = ReferenceEvaluator(model).run(None, feeds)
    for name, outs in run_all(model, feeds).items():
        for o, e in zip(outs, expected, strict=True):
            np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-6, err_msg=name)


CONV_TRANSPOSE = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], pads=[0, 1])],
                            [("x", TensorProto.FLOAT, [1, 1, 3]), ("w", TensorProto.FLOAT, [1, 1, 2])],
                            [("y", TensorProto.FLOAT, [1, 1, 3])])


# found by the 10-minute campaign (reduced): iree-compile 3.13 dies of SIGSEGV lowering it (AtenPadOp::create)
QLINEAR_CONV_SAME_LOWER = make_model(
    [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], auto_pad="SAME_LOWER")],
    [("x", TensorProto.INT8, [1, 1, 1])], [("y", TensorProto.INT8, [1, 1, 1])],
    inits=[("xs", np.array([0.5], np.float32)), ("xz", np.array([0], np.int8)),
           ("w", np.array([[[2]]], np.int8)), ("ws", np.array(0.25, np.float32)), ("wz", np.array(0, np.int8)),
           ("ys", np.array(0.5, np.float32)), ("yz", np.array(0, np.int8))])


def test_unlowered_operator_is_a_decline_naming_it() -> None:
    """IREE 3.13's ONNX lowering leaves ConvTranspose with asymmetric pads alone (every probed one had
    them, so the profile leaves ConvTranspose out): the compile error becomes IreeUnsupported naming
    onnx.ConvTranspose, which the decline rules recognize."""
    imported = BE.load(Test(CONV_TRANSPOSE, "", {}))
    with pytest.raises(IreeUnsupported, match=r"does not lower onnx\.ConvTranspose"):
        BE.compile(imported, variant("O3-generic"))
    assert "ConvTranspose" not in lowered_ops()
    assert is_unsupported("iree", COMPILE, "IreeUnsupported",
                          "IREE's ONNX importer does not lower onnx.ConvTranspose: error: failed to legalize")
    # a real compile error (seen in campaigns) is not a decline
    assert not is_unsupported("iree", COMPILE, "IreeCompileError",
                              "error: 'tensor.cast' op operand type 'tensor<?xf32>' and result type "
                              "'tensor<2xf32>' are cast incompatible")


def test_profile_is_measured_data_with_provenance() -> None:
    prov = profile()["provenance"]
    assert prov["iree-base-compiler"] == "3.13.0" and prov["opset"] == 17
    assert "benchmarks/iree_profile.py" in prov["generated_by"]
    assert {"Add", "MatMul", "Relu", "Softmax"} <= lowered_ops()
    assert BE.supports({"Add", "Relu"}) and not BE.supports({"Add", "ConvTranspose"})


def test_repro_source_reproduces_standalone(tmp_path: Path) -> None:
    """The repro script runs in a fresh interpreter, imports nothing of dlcfuzz, computes b - a, and
    fails with the exception type the backend raises (the bundle's repro.py compares its name)."""
    model = make_model([helper.make_node("Sub", ["b", "a"], ["y"])],
                       [("a", TensorProto.FLOAT, [2]), ("b", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, [2])])
    (tmp_path / "model.onnx").write_bytes(model)
    (tmp_path / "crash.onnx").write_bytes(QLINEAR_CONV_SAME_LOWER)
    script = BE.repro_source(variant("O3-host")) + (
        "\nprint(run_model('model.onnx', {'a': np.array([1, 2], np.float32), "
        "'b': np.array([10, 30], np.float32)})[0].tolist())\n"
        "try:\n    run_model('crash.onnx', {'x': np.array([[[3]]], np.int8)})\n"
        "except Exception as e:\n    print(type(e).__name__)\n"
        "import sys\nassert not any(m.startswith('dlcfuzz') for m in sys.modules)\n")
    (tmp_path / "repro.py").write_text(script)
    out = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[9.0,", "28.0]", "IreeCompilerCrash"]


def test_corrupt_model_and_compiler_crash_are_findings_and_the_worker_goes_on(tmp_path: Path) -> None:
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        bad = pool.run("iree", Test(b"\x08\x07not an onnx model", "", {}), ["O0-generic"])["O0-generic"]
        assert (bad.status, bad.phase) == (ERROR, IMPORT)
        assert not is_unsupported("iree", bad.phase, bad.error_type, bad.message)
        feeds = {"x": np.array([[[3]]], np.int8)}
        crash = pool.run("iree", Test(QLINEAR_CONV_SAME_LOWER, "", feeds), ["O0-generic"])["O0-generic"]
        assert (crash.status, crash.phase, crash.error_type) == (ERROR, COMPILE, "IreeCompilerCrash")
        assert crash.message.startswith("iree-compile killed by SIGSEGV in mlir::torch::")
        assert not is_unsupported("iree", crash.phase, crash.error_type, crash.message)
        model = make_model([helper.make_node("Neg", ["x"], ["y"])], [("x", TensorProto.FLOAT, [2])],
                           [("y", TensorProto.FLOAT, [2])])
        good = pool.run("iree", Test(model, "", {"x": np.array([1, -2], np.float32)}), ["O0-generic"])["O0-generic"]
        assert good.status == OK
        np.testing.assert_array_equal(good.outputs[0], [-1, 2])
    finally:
        pool.close()


def test_missing_package_disables_it_with_the_pip_line(tmp_path: Path) -> None:
    """A package 'iree' without 'compiler' on the path hides the installed IREE from the process."""
    (tmp_path / "iree").mkdir()
    (tmp_path / "iree" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{SRC}"}
    code = "from dlcfuzz.backends.iree import IreeBackend; print(IreeBackend().available())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "False" in out.stdout and "pip install iree-base-compiler==3.13.0 iree-base-runtime==3.13.0" in out.stdout
    cli = subprocess.run([sys.executable, "-m", "dlcfuzz.cli", "fuzz", "--backends", "iree", "--budget", "5s",
                          "--out", str(tmp_path / "c")], env=env, capture_output=True, text=True)
    assert cli.returncode == 2
    assert cli.stderr.count("\n") == 1 and "pip install iree-base-compiler" in cli.stderr


def test_compile_error_keeps_the_first_most_specific_error() -> None:
    """IREE 3.13 cannot link f64 cos on llvm-cpu: the linker's "undefined symbol: cos" comes before
    iree-compile's generic "failed to link executable", and it is what the finding says (not a decline)."""
    model = make_model([helper.make_node("Cos", ["x"], ["y"])], [("x", TensorProto.DOUBLE, [2])],
                       [("y", TensorProto.DOUBLE, [2])])
    with pytest.raises(Exception, match=r"^iree-lld: error: undefined symbol: cos") as info:
        BE.compile(BE.load(Test(model, "", {})), variant("O0-generic"))
    assert type(info.value).__name__ == "IreeCompileError"
    assert not is_unsupported("iree", COMPILE, "IreeCompileError", str(info.value))


def test_unsigned_outputs_keep_their_type() -> None:
    """IREE's integers are signless (uint8 comes back as int8, same bits): outputs are viewed as the
    declared unsigned type, so 200 + 100 is 44 (mod 256) as uint8, not -56 as int8."""
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                       [("a", TensorProto.UINT8, [2]), ("b", TensorProto.UINT8, [2])], [("y", TensorProto.UINT8, [2])])
    feeds = {"a": np.array([200, 7], np.uint8), "b": np.array([100, 250], np.uint8)}
    (out,) = run_all(model, feeds, ["O3-generic"])["O3-generic"]
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [44, 1])


def test_compile_error_without_a_source_line() -> None:
    """iree-compile's output for a RoiAlign model (campaign, reduced): the location is "<unknown>:0:"."""
    from dlcfuzz.backends.iree import IreeCompileError, compile_error

    text = ("Error invoking IREE compiler tool iree-compile\nError code: 1\nDiagnostics:\n<unknown>:0: error: failed "
            "to legalize operation 'torch.constant.bool': %3 = \"torch.constant.bool\"() <{value = true}> : () -> "
            "!torch.bool loc(unknown)\n\n\nInvoked with:\n iree-compile ...")
    e = compile_error(text)
    assert isinstance(e, IreeCompileError)
    assert str(e).startswith("error: failed to legalize operation 'torch.constant.bool'")


def test_campaign_draws_only_operators_iree_lowers(tmp_path: Path) -> None:
    """--backends iree alone: ConvTranspose (outside the profile) is left out of generation, and the
    test runs on every CPU variant; an op set with nothing IREE lowers is a one-line error."""
    import sqlite3

    env = {**os.environ, "PYTHONPATH": SRC}
    base = [sys.executable, "-m", "dlcfuzz.cli", "fuzz", "--backends", "iree", "--reduce-budget", "0", "--ops", "1:2",
            "--budget", "60s", "--no-allocation"]  # every variant on every test
    none = subprocess.run([*base, "--op-set", "ConvTranspose", "--out", str(tmp_path / "n")], env=env,
                          capture_output=True, text=True)
    assert none.returncode == 2 and none.stderr.count("\n") == 1, none.stderr
    run = subprocess.run([*base, "--op-set", "Add,Neg,ConvTranspose", "--max-tests", "1", "--dtypes", "float32",
                          "--out", str(tmp_path / "c")], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "operators: 2 of 3" in run.stderr
    db = sqlite3.connect(tmp_path / "c" / "campaign.sqlite")
    (ops,) = db.execute("SELECT ops FROM tests").fetchone()
    assert set(ops.split(",")) <= {"Add", "Neg"}
    ran = db.execute("SELECT variant, status FROM outcomes WHERE backend = 'iree' ORDER BY variant").fetchall()
    assert ran == [(v, OK) for v in sorted(CPU_VARIANTS)]


def test_quantized_tensors_the_torch_lowering_lacks_are_a_decline() -> None:
    """QLinearMatMul imports as a torch.aten.bmm of !torch.qint8 tensors, which IREE 3.13's torch lowering
    has no pattern for: a gap in quantized support. The same failure on plain types stays a bug."""
    model = make_model([helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
                       [("a", TensorProto.INT8, [1, 1, 1, 1])], [("y", TensorProto.INT8, [1, 1, 1, 1])],
                       inits=[("as", np.array(0.77, np.float32)), ("az", np.array(-7, np.int8)),
                              ("b", np.zeros((1, 1, 1, 1), np.int8)), ("bs", np.array(0.5, np.float32)),
                              ("bz", np.array(-38, np.int8)), ("ys", np.array(0.3, np.float32)),
                              ("yz", np.array(2, np.int8))])
    with pytest.raises(Exception) as info:
        BE.compile(BE.load(Test(model, "", {})), variant("O0-generic"))
    e = info.value
    assert "failed to legalize operation 'torch.aten.bmm'" in str(e) and "!torch.qint8" in str(e)
    assert is_unsupported("iree", COMPILE, type(e).__name__, str(e))
    assert not is_unsupported("iree", COMPILE, "IreeCompileError",
                              "error: failed to legalize operation 'torch.aten.broadcast_to' that was explicitly "
                              "marked "
                              "illegal: %110 = \"torch.aten.broadcast_to\"(%108, %109) : (!torch.vtensor<[4,1,3],f32>, "
                              "!torch.list<int>) -> !torch.vtensor<[4,2,3],f32>")


def _compile_error(model: bytes) -> Exception:
    with pytest.raises(Exception) as info:
        BE.compile(BE.load(Test(model, "", {})), variant("O0-generic"))
    return info.value


def test_a_fatal_error_names_the_crash_not_the_stack_frames() -> None:
    """iree-compile 3.13 aborts on a uint16 Sign and on a uint16 ConstantOfShape with LLVM's fatal error
    "Unhandled type in getScalarTypeForType: ui16", from other frames of torch-mlir's (c48's 660a48ba and
    1888612a, hand-checked one defect): both crashes say that error, in the same words."""
    from dlcfuzz.oracle.findings import CRASH, Finding
    from dlcfuzz.run.dedup import signature

    sign = make_model([helper.make_node("Sign", ["x"], ["y"])], [("x", TensorProto.UINT16, [2])],
                      [("y", TensorProto.UINT16, [2])])
    filled = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"],
                                          value=numpy_helper.from_array(np.array([2], np.uint16), "v"))],
                        [("s", TensorProto.INT64, [2])], [("y", TensorProto.UINT16, [1, 1])])
    errors = [_compile_error(m) for m in (sign, filled)]
    assert [type(e).__name__ for e in errors] == ["IreeCompilerCrash"] * 2
    words = "iree-compile killed by SIGABRT: LLVM ERROR: Unhandled type in getScalarTypeForType: ui16"
    assert [str(e) for e in errors] == [words] * 2
    sigs = {signature(Finding(CRASH, "signal", "iree", "O0-generic", "compile", str(e), "IreeCompilerCrash"))
            for e in errors}
    assert len(sigs) == 1


def test_compile_crash_without_a_fatal_error_is_named_by_its_frames() -> None:
    from dlcfuzz.backends.iree import compile_error

    text = ("Error invoking IREE compiler tool iree-compile\nError code: -11\nDiagnostics:\nStack dump:\n"
            " #3 0x00007f mlir::torch::Torch::AtenPadOp::create(mlir::OpBuilder&) (/x/libIREECompiler.so+0x1)\n"
            " #4 0x00007f mlir::torch::onnx_c::populateDefaultDomainAtoF(x) (/x/libIREECompiler.so+0x2)\n")
    assert str(compile_error(text)) == ("iree-compile killed by SIGSEGV in mlir::torch::Torch::AtenPadOp::create <- "
                                        "mlir::torch::onnx_c::populateDefaultDomainAtoF")


def test_variadic_operators_folded_pairwise_are_one_family() -> None:
    """IREE types each partial result of a variadic Sum, Mean or Max as the whole output: with operands of lower
    ranks, each fails a tensor.cast (c48's 7e8b9e98, 03a1fa6c and e66e2b1d, hand-checked one defect). Their
    crashes share the family's root, which an Einsum's crash does not."""
    from dlcfuzz.oracle.findings import CRASH, Finding
    from dlcfuzz.run.dedup import family_crash_root

    roots = set()
    for op in ("Sum", "Mean", "Max"):
        model = make_model([helper.make_node(op, ["a", "b", "c"], ["y"])],
                           [("a", TensorProto.FLOAT, [3, 2]), ("b", TensorProto.FLOAT, []),
                            ("c", TensorProto.FLOAT, [5, 4, 3, 2])], [("y", TensorProto.FLOAT, [5, 4, 3, 2])])
        e = _compile_error(model)
        assert "cast incompatible" in str(e) and f'"onnx.{op}"' in str(e), str(e)
        roots.add(family_crash_root(Finding(CRASH, "exception", "iree", "O0-generic", "compile", str(e),
                                            type(e).__name__)))
    assert len(roots) == 1 and "" not in roots


def test_a_lowering_that_says_unimplemented_declines_the_case() -> None:
    """IREE's Slice of axes fed at run time: "unimplemented: dim is not constant", the lowering's own words
    for a case it leaves out (c48's d75e038a)."""
    model = make_model([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])],
                       [("x", TensorProto.FLOAT, [4, 4]), ("s", TensorProto.INT64, [1]), ("e", TensorProto.INT64, [1]),
                        ("a", TensorProto.INT64, [1])], [("y", TensorProto.FLOAT, [None, None])])
    e = _compile_error(model)
    assert str(e).startswith("error: unimplemented: "), str(e)
    assert is_unsupported("iree", COMPILE, type(e).__name__, str(e))
