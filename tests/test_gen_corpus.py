"""``dlcfuzz gen`` writes corpora that run without dlcfuzz: each ``gNNNNN.onnx`` has its runtime inputs beside
it, ``gNNNNN.npz``, exactly the values a campaign feeds it (pinned runtime shapes, axes, indices included)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends.base import Test
from dlcfuzz.cli import main
from dlcfuzz.ir import Graph, np_dtype
from dlcfuzz.values import synthesize

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

SEED = 3


def gen(out: Path, *args: str) -> list[tuple[Path, Graph]]:
    assert main(["gen", "--seed", str(SEED), "--out", str(out), *args]) == 0
    return [(p, Graph.from_json(p.with_suffix(".json").read_text())) for p in sorted(out.glob("g*.onnx"))]


def npz_of(model: Path) -> dict[str, np.ndarray]:
    with np.load(model.with_suffix(".npz"), allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def plain_ort(model: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """ONNX Runtime on the model file alone, as a tool without dlcfuzz runs it (no graph optimization: the
    same session as dlcfuzz's baseline variant, so that the outputs compare bit for bit)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    return ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def dlcfuzz_run(pool, model: Path, g: Graph, index: int) -> list[np.ndarray]:
    """dlcfuzz's own run of the model: the campaign's first draw of inputs for the graph of test ``index``
    (``run.campaign.Tester.execute``), on ORT's baseline variant in a worker."""
    from dlcfuzz.seeds import derive_seed

    feeds = synthesize(g, np.random.default_rng([derive_seed(SEED, index), 0]), 0)
    o = pool.run("ort", Test(model.read_bytes(), g.to_json(), feeds), ["disable_all"])["disable_all"]
    assert o.status == "ok", o.message
    return o.outputs


def generic_inputs(model: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """What a tool that knows only the model feeds it: random values in [0, 1] of each declared input."""
    m = onnx.load(str(model))
    given = {t.name for t in m.graph.initializer}
    feeds = {}
    for i in m.graph.input:
        if i.name in given:
            continue
        t = i.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        shape = [d.dim_value for d in t.shape.dim]
        feeds[i.name] = (rng.random(shape) if dtype.kind == "f" else rng.integers(0, 2, shape)).astype(dtype)
    return feeds


def test_each_model_has_its_inputs_and_runs_in_plain_ort_as_in_dlcfuzz(tmp_path: Path, pool) -> None:
    models = gen(tmp_path, "-n", "24", "--ops", "4:10")
    assert len(models) == 24
    pinned = 0
    for i, (model, g) in enumerate(models):
        feeds = npz_of(model)
        m = onnx.load(str(model))
        declared = [x.name for x in m.graph.input if x.name not in {t.name for t in m.graph.initializer}]
        assert sorted(feeds) == sorted(declared) == sorted(v.name for v in g.inputs), model.name
        for v in g.inputs:
            assert feeds[v.name].dtype == np_dtype(v.type.dtype) and feeds[v.name].shape == tuple(v.type.shape)
            if v.pinned:
                pinned += 1
                np.testing.assert_array_equal(feeds[v.name], v.data)
        got = plain_ort(model, feeds)
        want = dlcfuzz_run(pool, model, g, i)
        assert len(got) == len(want) == len(g.outputs)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=model.name)
    assert pinned >= 5  # the defaults' runtime constants are there to be fed


def test_a_runtime_shape_or_axes_model_runs_with_its_npz_and_not_with_generic_inputs(tmp_path: Path, pool) -> None:
    models = gen(tmp_path, "-n", "8", "--ops", "1:2", "--op-set", "Reshape,Unsqueeze", "--runtime-consts", "1")
    for i, (model, g) in enumerate(models):
        assert any(v.pinned for v in g.inputs), model.name  # the shape / axes are taken at run time
        feeds = npz_of(model)
        got = plain_ort(model, feeds)
        assert [o.shape for o in got] == [g.values[n].type.shape for n in g.outputs], model.name
        for a, b in zip(got, dlcfuzz_run(pool, model, g, i), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=model.name)
        try:  # the same model on what a tool without the npz would feed it: it fails, or computes another model
            other = plain_ort(model, generic_inputs(model, np.random.default_rng(i)))
        except Exception:  # any of ORT's refusals
            continue
        assert any(a.shape != b.shape or not np.array_equal(a, b) for a, b in zip(other, got, strict=True)), model.name
