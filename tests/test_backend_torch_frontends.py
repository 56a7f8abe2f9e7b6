"""OPERA's torch frontends (tvm-torch, openvino-torch, inductor-torch) and the torch library itself
(torch-library) on tiny migrated calls, with the real compilers in real isolated workers."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import ERROR, IMPORT, OK, Test
from dlcfuzz.oracle.unsupported import is_unsupported
from dlcfuzz.run.worker import PhaseLimits, WorkerPool

torch = pytest.importorskip("torch", reason="the torch frontends need torch")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from dlcfuzz.export.torch_call import encode_call  # noqa: E402  (needs torch)

PACKAGES = {"tvm-torch": "tvm", "openvino-torch": "openvino", "inductor-torch": "torch", "torch-library": "torch",
            "tvm": "tvm"}


def need(backend: str) -> None:
    pytest.importorskip(PACKAGES[backend], reason=f"{backend} needs the package {PACKAGES[backend]}")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _call(target: str, *args, **kwargs) -> Test:
    spec, inputs = encode_call(target, args, kwargs)
    return Test(spec, "", inputs)


def _linear() -> Test:
    lin = torch.nn.Linear(3, 4)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(4, 3, generator=_gen(1)))
        lin.bias.copy_(torch.randn(4, generator=_gen(2)))
    spec, inputs = encode_call("torch.nn.Linear", (torch.randn(2, 3, generator=_gen(3)),), {}, module_args=(3, 4),
                               state=lin.state_dict())
    return Test(spec, "", inputs)


CASES = {
    "relu": _call("torch.nn.functional.relu", torch.randn(2, 3, generator=_gen(0))),
    "conv2d": _call("torch.nn.functional.conv2d", torch.randn(1, 2, 5, 5, generator=_gen(4)),
                    torch.randn(3, 2, 3, 3, generator=_gen(5)), padding=1),
    "linear": _linear(),
}
# which cases and variants each frontend runs (Inductor compiles slowly: two cases, static shapes)
PLAN = {
    "tvm-torch": (["relu", "conv2d", "linear"], None),  # None: every variant
    "openvino-torch": (["relu", "conv2d", "linear"], ["f32"]),
    "inductor-torch": (["relu", "linear"], ["inductor"]),
}


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(PhaseLimits())
    yield p
    p.close()


@pytest.fixture(scope="module")
def eager(pool) -> dict[str, list[np.ndarray]]:
    """The library's own outputs of every case, from the torch-library worker."""
    need("torch-library")
    out = {}
    for name, test in CASES.items():
        o = pool.run("torch-library", test, ["eager"])["eager"]
        assert o.status == OK, (name, o.error_type, o.message)
        out[name] = o.outputs
    return out


def _variants(pool, backend: str, wanted: list[str] | None) -> list[str]:
    names = [n for n, _ in pool.describe(backend)[1]]
    return names if wanted is None else [n for n in wanted if n in names]


@pytest.mark.parametrize("backend", list(PLAN))
def test_frontend_agrees_with_the_library(pool, eager, backend: str) -> None:
    need(backend)
    cases, wanted = PLAN[backend]
    variants = _variants(pool, backend, wanted)
    assert variants
    for case in cases:
        got = pool.run(backend, CASES[case], variants)
        for v, o in got.items():
            assert o.status == OK, (case, v, o.error_type, o.message)
            assert len(o.outputs) == len(eager[case]), (case, v)
            for a, e in zip(o.outputs, eager[case], strict=True):
                assert a.shape == e.shape and a.dtype == e.dtype, (case, v)
                assert np.allclose(a, e, rtol=1e-4, atol=1e-5), (case, v)


def test_tvm_torch_ignores_divisor_override(pool) -> None:
    """A known TVM bug, documented here (the test passes while the bug is present): TVM's PyTorch
    frontend converts avg_pool2d without its divisor_override, so windows are divided by the
    window size (4) instead of 3."""
    need("tvm-torch")
    need("torch-library")
    test = _call("torch.nn.functional.avg_pool2d", torch.rand(1, 1, 4, 4, generator=_gen(6)) + 1, 2,
                 divisor_override=3)
    want = pool.run("torch-library", test, ["eager"])["eager"]
    got = pool.run("tvm-torch", test, ["unfused-generic"])["unfused-generic"]
    assert want.status == OK and got.status == OK
    assert got.outputs[0].shape == want.outputs[0].shape
    diff = np.abs(got.outputs[0] - want.outputs[0]).max()
    assert diff > 1e-3  # divided by 4, not 3: a quarter of the expected value missing
    np.testing.assert_allclose(got.outputs[0] * 4 / 3, want.outputs[0], rtol=1e-5)


def test_conversion_functions_are_named(pool) -> None:
    need("tvm")
    from onnx import TensorProto, helper

    from tests.helpers import make_model

    f32 = TensorProto.FLOAT
    conv = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                      [("x", f32, [1, 2, 5, 5]), ("w", f32, [3, 2, 3, 3])], [("y", f32, [1, 3, 5, 5])])
    feeds = {"x": np.ones((1, 2, 5, 5), np.float32), "w": np.ones((3, 2, 3, 3), np.float32)}
    o = pool.run("tvm", Test(conv, "", feeds), ["unfused-generic"])["unfused-generic"]
    assert o.status == OK and o.artifacts["conversion"] == "onnx:Conv"
    # handed over before the frontend runs: an op it cannot convert still names what it tried
    odd = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NoSuchOp", ["r"], ["y"])],
                     [("x", f32, [2])], [("y", f32, [2])])
    o = pool.run("tvm", Test(odd, "", {"x": np.ones(2, np.float32)}), ["unfused-generic"])["unfused-generic"]
    assert o.status == ERROR and o.phase == IMPORT
    assert o.artifacts["conversion"] == "onnx:Relu,onnx:missing:NoSuchOp"

    need("tvm-torch")
    o = pool.run("tvm-torch", CASES["conv2d"], ["unfused-generic"])["unfused-generic"]
    assert o.status == OK and o.artifacts["conversion"] == "ep:_convolution"
    o = pool.run("tvm-torch", CASES["relu"], ["unfused-generic"])["unfused-generic"]
    assert o.artifacts["conversion"] == "ep:_unary_op(relu)"  # a factory's converter, by factory and Relax op
    o = pool.run("tvm-torch", _call("torch.frexp", torch.randn(3, generator=_gen(7))), ["unfused-generic"])
    o = o["unfused-generic"]
    assert o.status == ERROR and "ep:missing:frexp.Tensor" in o.artifacts["conversion"].split(",")
    assert is_unsupported("tvm-torch", o.phase, o.error_type, o.message)  # the frontend has no converter


def test_torch_library_outputs_and_onnx_export(pool, eager) -> None:
    import onnx
    import onnxruntime as ort

    o = pool.run("torch-library", CASES["conv2d"], ["eager"])["eager"]
    assert o.status == OK
    for a, e in zip(o.outputs, eager["conv2d"], strict=True):
        np.testing.assert_array_equal(a, e)  # eager twice, bit for bit
    direct = torch.nn.functional.conv2d(*[torch.from_numpy(CASES["conv2d"].inputs[n]) for n in ("x0", "x1")],
                                        padding=1)
    np.testing.assert_allclose(o.outputs[0], direct.numpy(), rtol=1e-6)
    model = o.artifacts["model.onnx"]
    assert isinstance(model, bytes)
    onnx.checker.check_model(onnx.load_model_from_string(model))
    assert [i.name for i in onnx.load_model_from_string(model).graph.input] == ["x0", "x1"]
    got = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, CASES["conv2d"].inputs)
    np.testing.assert_allclose(got[0], o.outputs[0], rtol=1e-5, atol=1e-5)

    # an input read only for its shape disappears from the export: an export error, the outputs stay
    o = pool.run("torch-library", _call("torch.zeros_like", torch.ones(2, 3)), ["eager"])["eager"]
    assert o.status == OK and "model.onnx" not in o.artifacts
    assert "inputs are []" in o.artifacts["onnx_export_error"]


def test_torch_library_rejects_what_is_no_test(pool) -> None:
    need("torch-library")
    x = torch.ones(64, 64)
    o = pool.run("torch-library", _call("torch.nn.functional.dropout", x, p=0.5, training=True), ["eager"])["eager"]
    assert o.status == ERROR and o.error_type == "NondeterministicError"
    o = pool.run("torch-library", _call("torch.Tensor.size", x), ["eager"])["eager"]
    assert o.status == ERROR and o.error_type == "NoTensorOutput"


def test_torch_export_failure_is_unsupported(pool) -> None:
    """one_hot without num_classes has a data-dependent shape: torch.export refuses it (eager runs it)."""
    need("tvm-torch")
    test = _call("torch.nn.functional.one_hot", torch.tensor([1, 2, 2, 3]))
    assert pool.run("torch-library", test, ["eager"])["eager"].status == OK
    o = pool.run("tvm-torch", test, ["unfused-generic"])["unfused-generic"]
    assert o.status == ERROR and o.phase == IMPORT and o.error_type == "TorchExportError"
    assert o.message.startswith("torch.export failed: GuardOnDataDependentSymNode")
    assert is_unsupported("tvm-torch", o.phase, o.error_type, o.message)
    assert is_unsupported("openvino-torch", o.phase, o.error_type, o.message)
    assert not is_unsupported("tvm", o.phase, o.error_type, o.message)


_RUNNER = textwrap.dedent('''
    import json, sys
    import numpy as np
    namespace = {}
    exec(open(sys.argv[1]).read(), namespace)
    with np.load(sys.argv[3]) as f:
        inputs = {k: f[k] for k in f.files}
    outs = namespace["run_model"](sys.argv[2], inputs)
    np.savez(sys.argv[4], *[np.asarray(o) for o in outs])
    print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "dlcfuzz")))
''')


def test_repro_sources_run_standalone(eager, tmp_path: Path) -> None:
    """Each backend's repro source, in a fresh python, rebuilds the call from call.pt alone."""
    runs = {"tvm-torch": ("unfused-generic", "conv2d"), "openvino-torch": ("f32", "linear"),
            "inductor-torch": ("inductor", "relu"), "torch-library": ("eager", "linear")}
    runner = tmp_path / "runner.py"
    runner.write_text(_RUNNER)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(tempfile.gettempdir()) / "dlcfuzz-inductor-cache"))
    procs = {}
    for backend, (variant, case) in runs.items():
        if importlib.util.find_spec(PACKAGES[backend]) is None:
            continue
        b = load_backend(backend)
        folder = tmp_path / backend
        folder.mkdir()
        (folder / "call.pt").write_bytes(CASES[case].model)
        np.savez(folder / "inputs.npz", **CASES[case].inputs)
        (folder / "repro.py").write_text(b.repro_source(next(v for v in b.variants() if v.name == variant)))
        procs[backend] = subprocess.Popen(
            [sys.executable, str(runner), str(folder / "repro.py"), str(folder / "call.pt"),
             str(folder / "inputs.npz"), str(folder / "out.npz")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder, env=env)
    assert procs
    for backend, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, (backend, err[-3000:])
        assert json.loads(out.strip().splitlines()[-1]) == [], backend  # no dlcfuzz import
        with np.load(tmp_path / backend / "out.npz") as f:
            got = [f[f"arr_{i}"] for i in range(len(f.files))]
        want = eager[runs[backend][1]]
        assert len(got) == len(want), backend
        for a, e in zip(got, want, strict=True):
            assert a.shape == e.shape and np.allclose(a, e, rtol=1e-4, atol=1e-5), backend
