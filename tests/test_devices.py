"""Devices as variants, without a GPU: the variant lists with and without one, which variant each GPU
variant is compared with, ONNX Runtime's silent CPU fallback caught for real, ``--devices``, and
the reasons the GPU variants are skipped here."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

from dlcfuzz.backends.base import ERROR, OK, Outcome, Test, Variant
from dlcfuzz.backends.devices import cuda_gpus, device_of, keep, parse_devices
from dlcfuzz.oracle import METAMORPHIC, criteria_for, judge
from tests.helpers import make_model

RELU = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [3])],
                  [("y", TensorProto.FLOAT, [3])])
NO_GPU = not cuda_gpus()[0]


# -- variant lists ------------------------------------------------------------------------------------
def test_inductor_variants_with_and_without_a_gpu() -> None:
    pytest.importorskip("torch")
    from dlcfuzz.backends.inductor import variants_for

    assert [v.name for v in variants_for(cuda=False)] == ["eager", "inductor", "inductor-dynamic"]
    gpu = {v.name: v.options for v in variants_for(cuda=True)}
    assert list(gpu) == ["eager", "inductor", "inductor-dynamic", "cuda-eager", "cuda-inductor",
                         "cuda-inductor-dynamic"]
    assert [device_of(o) for o in gpu.values()] == ["cpu"] * 3 + ["cuda"] * 3
    # torch's CUDA kernels against its CPU kernels; Inductor's Triton code against torch's CUDA kernels
    assert {n: o.get("compare_with") for n, o in gpu.items() if n.startswith("cuda")} == {
        "cuda-eager": "eager", "cuda-inductor": "cuda-eager", "cuda-inductor-dynamic": "cuda-eager"}
    assert gpu["cuda-inductor"]["backend"] == "inductor" and gpu["cuda-inductor-dynamic"]["dynamic"] is True


def test_ort_variants_with_and_without_gpu_providers() -> None:
    from dlcfuzz.backends.ort import ort_variants

    cpu = ["disable_all", "basic", "extended", "all"]
    assert [v.name for v in ort_variants([])] == cpu
    only_cuda = {v.name: v.options for v in ort_variants(["CUDAExecutionProvider"])}
    assert list(only_cuda) == [*cpu, "cuda"]
    assert only_cuda["cuda"]["providers"] == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert only_cuda["cuda"]["compare_with"] == "all" and device_of(only_cuda["cuda"]) == "cuda"
    both = {v.name: v.options for v in ort_variants(["CUDAExecutionProvider", "TensorrtExecutionProvider"])}
    assert both["tensorrt"]["providers"][0] == "TensorrtExecutionProvider"
    assert both["tensorrt"]["compare_with"] == "cuda"


def test_tvm_cuda_variant_runs_on_cuda(monkeypatch) -> None:
    pytest.importorskip("tvm")
    import dlcfuzz.backends.tvm as m

    monkeypatch.setattr(m, "has_cuda", lambda: True)
    cuda = m.TvmBackend().variants()[-1]
    assert cuda.name == "default-cuda" and device_of(cuda.options) == "cuda"
    assert all(device_of(v.options) == "cpu" for v in m.TvmBackend().variants()[:-1])
    import dlcfuzz.backends.tvm_relax as r

    monkeypatch.setattr(r, "has_cuda", lambda: True)
    relax = r.TvmRelaxBackend().variants()
    assert relax[-1].name == "original-cuda" and device_of(relax[-1].options) == "cuda"
    assert all(device_of(v.options) == "cpu" for v in relax[:-1])


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU: the reasons for skipping do not apply")
def test_without_a_gpu_each_backend_says_why() -> None:
    from dlcfuzz.backends.ort import OrtBackend

    assert "no CUDA driver" in cuda_gpus()[1] or "no GPU" in cuda_gpus()[1] or "cuInit" in cuda_gpus()[1]
    b = OrtBackend()
    if "CUDAExecutionProvider" not in __import__("onnxruntime").get_available_providers():
        assert "has no CUDAExecutionProvider" in b.device_notes()["cuda"]
    assert all(device_of(v.options) == "cpu" for v in b.variants())
    torch = pytest.importorskip("torch")
    from dlcfuzz.backends.inductor import InductorBackend

    why = InductorBackend().device_notes()["cuda"]
    assert ("CPU-only build" if torch.version.cuda is None else "finds no GPU") in why
    assert [v.name for v in InductorBackend().variants()] == ["eager", "inductor", "inductor-dynamic"]


def test_the_worker_reports_device_notes() -> None:
    """The notes come from the backend's worker process (only it imports the compiler)."""
    import onnxruntime as ort

    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    pool = WorkerPool(PhaseLimits())
    try:
        notes = pool.device_notes("ort")
    finally:
        pool.close()
    works = "CUDAExecutionProvider" in ort.get_available_providers() and not NO_GPU
    assert ("cuda" in notes) == (not works)


# -- oracle pairing -------------------------------------------------------------------------------------
def _ok(*values: float) -> Outcome:
    return Outcome(OK, "run", outputs=[np.array(values, np.float32)])


def test_judge_pairs_each_variant_with_its_compare_with() -> None:
    variants = {"inductor": {"eager": Variant("eager"), "inductor": Variant("inductor"),
                             "cuda-eager": Variant("cuda-eager", {"compare_with": "eager"}),
                             "cuda-inductor": Variant("cuda-inductor", {"compare_with": "cuda-eager"})}}
    pairs = criteria_for(variants)
    assert pairs.compare_with == {("inductor", "cuda-eager"): "eager", ("inductor", "cuda-inductor"): "cuda-eager"}

    def found(outcomes: dict[str, Outcome]) -> list[tuple[str, str, str]]:
        verdict = judge({"inductor": outcomes}, None, pairs)
        return sorted((f.oracle, f.variant, f.other) for f in verdict.findings)

    # torch's CUDA kernels differ from its CPU kernels; Triton agrees with them: one cross-device finding
    assert found({"eager": _ok(1, 2), "inductor": _ok(1, 2), "cuda-eager": _ok(1, 3),
                  "cuda-inductor": _ok(1, 3)}) == [(METAMORPHIC, "cuda-eager", "eager")]
    # Triton differs from torch's CUDA kernels: Inductor's GPU code, compared with cuda-eager (not with eager)
    assert found({"eager": _ok(1, 2), "inductor": _ok(1, 2), "cuda-eager": _ok(1, 2),
                  "cuda-inductor": _ok(9, 2)}) == [(METAMORPHIC, "cuda-inductor", "cuda-eager")]
    # cuda-eager failed: its crash is the finding, and cuda-inductor has nothing to be compared with
    failed = Outcome(ERROR, "run", error_type="RuntimeError", message="CUDA error: an illegal memory access")
    assert found({"eager": _ok(1, 2), "inductor": _ok(1, 2), "cuda-eager": failed,
                  "cuda-inductor": _ok(9, 2)}) == [("crash", "cuda-eager", "")]
    # cuda-eager not run (e.g. a reduction runs only the two variants of a finding): the first that ran serves
    assert found({"eager": _ok(1, 2), "cuda-inductor": _ok(9, 2)}) == [(METAMORPHIC, "cuda-inductor", "eager")]
    # without pairs, every variant is compared with the first that ran, as before
    verdict = judge({"inductor": {"eager": _ok(1, 2), "cuda-eager": _ok(1, 2), "cuda-inductor": _ok(9, 2)}}, None)
    assert [(f.variant, f.other) for f in verdict.findings] == [("cuda-inductor", "eager")]


# -- ONNX Runtime's silent fallback, for real ---------------------------------------------------------
def test_a_session_that_fell_back_to_the_cpu_is_an_error(tmp_path) -> None:
    import onnxruntime as ort

    from dlcfuzz.backends.ort import OrtBackend, ProviderFallback, make_session, ort_variants

    if "CUDAExecutionProvider" in ort.get_available_providers() and not NO_GPU:
        pytest.skip("onnxruntime-gpu with a GPU: CUDA does run here (gpu_smoke.py checks it)")
    chain = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ORT warns that the provider is not available, and goes on on the CPU
        plain = ort.InferenceSession(RELU, providers=chain)
        assert plain.get_providers() == ["CPUExecutionProvider"]  # what ORT does by itself: a silent fallback
        with pytest.raises(ProviderFallback, match="fell back to CPUExecutionProvider: asked for CUDAExecution"):
            make_session(RELU, "ORT_ENABLE_ALL", chain)
        b = OrtBackend()
        cuda = ort_variants(["CUDAExecutionProvider"])[-1]
        with pytest.raises(ProviderFallback):
            b.compile(b.load(Test(RELU, "", {})), cuda)
        # the repro script (no dlcfuzz) says so too, and its CPU variant still runs
        path = tmp_path / "model.onnx"
        path.write_bytes(RELU)
        for variant, want in ((cuda, "ProviderFallback"), (b.variants()[0], None)):
            ns: dict = {}
            exec(compile(b.repro_source(variant), "repro.py", "exec"), ns)
            try:
                got = ns["run_model"](str(path), {"x": np.array([-1, 0, 2], np.float32)})
                assert want is None and np.array_equal(got[0], [0, 0, 2])
            except RuntimeError as e:
                assert type(e).__name__ == want, e


# -- --devices ------------------------------------------------------------------------------------------
def test_parse_and_keep_devices() -> None:
    assert parse_devices("cuda, cpu,cuda") == ("cuda", "cpu")
    for bad in ("gpu", "", "cpu,tpu"):
        with pytest.raises(ValueError, match="--devices"):
            parse_devices(bad)
    described = [("eager", {}), ("cuda-eager", {"device": "cuda"})]
    assert keep(described, ["cpu"]) == [("eager", {})]
    assert keep(described, ["cuda"]) == [("cuda-eager", {"device": "cuda"})]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlcfuzz.cli", *args], capture_output=True, text=True)


def test_devices_option(tmp_path) -> None:
    bad = _cli("fuzz", "--backends", "ort", "--devices", "cpu,gpu", "--out", str(tmp_path / "a"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown device 'gpu'" in bad.stderr
    if not NO_GPU:
        pytest.skip("this machine has a GPU: the no-GPU messages do not apply")
    none = _cli("fuzz", "--backends", "ort", "--devices", "cuda", "--out", str(tmp_path / "b"))
    assert none.returncode == 2 and none.stderr.count("\n") == 1
    assert "no GPU here" in none.stderr and "cuda variants are skipped" in none.stderr
    r = _cli("fuzz", "--backends", "ort", "--devices", "cpu,cuda", "--max-tests", "1", "--reduce-budget", "0",
             "--out", str(tmp_path / "c"))
    assert r.returncode == 0, r.stderr
    assert "skipped: cuda: no GPU here" in r.stderr and "the cuda variants are skipped" in r.stderr
    assert "devices found: cpu (cuda: none" in r.stdout and "variants by device: cpu: ort 4" in r.stdout
