"""Compiler feedback: what the real compilers report firing (Inductor counters, TVM passes that
changed the module), its way through the worker and the campaign store, and the generator that
steers toward operators credited with new keys."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends.base import OK, Test
from dlcfuzz.backends.ort import full_profile
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen import make_generator
from dlcfuzz.gen.feedback import CRITERION, FeedbackGenerator, edges, reward
from dlcfuzz.gen.guided import Coverage
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from tests.helpers import check_graph, make_model, ort_generator

UNARY = ["Relu", "Sigmoid", "Tanh", "Abs"]
F32 = GenOptions(dtypes=("float32",))


def _graph(ops: list[str], seed: int = 0, n: int = 3):
    return ort_generator([REGISTRY[o] for o in ops], op_range=(n, n), dtypes=("float32",)).generate(seed)


def _test(g, seed: int = 0) -> Test:
    rng = np.random.default_rng(seed)
    return Test(to_bytes(g), g.to_json(), {v.name: feed_array(rng, v) for v in g.inputs})


# -- the generator ---------------------------------------------------------------------------------
def test_reward_grows_with_new_keys() -> None:
    assert [reward(n) for n in range(4)] == [0.0, 0.5, 0.75, 0.875]


def test_choice_shifts_toward_an_operator_credited_with_new_keys() -> None:
    gen = FeedbackGenerator([REGISTRY[o] for o in UNARY], F32, (3, 3))
    draws = random.Random(0)
    before = sum(gen.choose_op(gen.specs, draws).op == "Relu" for _ in range(4000)) / 4000
    assert 0.2 < before < 0.3  # every value at the prior: uniform over the four
    # planted feedback: the Relu-only test fires two keys nobody fired, the others nothing
    assert gen.feedback(_graph(["Relu"]), ["tvm:pass:A", "tvm:pass:B"]) == [(CRITERION, "tvm:pass:A"),
                                                                            (CRITERION, "tvm:pass:B")]
    for op in ("Sigmoid", "Tanh", "Abs"):
        assert gen.feedback(_graph([op]), []) == []
    # Relu: 1 + 0.3 (0.75 - 1) = 0.925; the rest 1 + 0.3 (0 - 1) = 0.7; weights exp(v / 0.25)
    assert gen.value["Relu"] == pytest.approx(0.925) and gen.value["Tanh"] == pytest.approx(0.7)
    share = np.exp(0.925 / 0.25) / (np.exp(0.925 / 0.25) + 3 * np.exp(0.7 / 0.25))
    after = sum(gen.choose_op(gen.specs, draws).op == "Relu" for _ in range(4000)) / 4000
    assert after == pytest.approx(share, abs=0.03) and after > before + 0.15
    # the same keys again are not new: no reward, and Relu's value falls back
    assert gen.feedback(_graph(["Relu"], seed=1), ["tvm:pass:A"]) == []
    assert gen.value["Relu"] == pytest.approx(0.925 * 0.7)
    assert gen.rewarded == 1


def test_pairs_are_credited_along_edges() -> None:
    g = _graph(["Relu", "Tanh"], seed=2, n=4)
    made = {o: n.op for n in g.nodes for o in n.outputs}
    want = {(made.get(x, "-"), n.op) for n in g.nodes for x in n.inputs}
    assert edges(g) == want and any(p != "-" for p, _ in want)
    gen = FeedbackGenerator([REGISTRY[o] for o in UNARY], F32, (3, 3))
    gen.feedback(g, ["k"])
    assert all(gen.pair_value[e] == pytest.approx(1 + 0.3 * (0.5 - 1)) for e in want)


def test_known_keys_from_a_stored_coverage_are_not_new() -> None:
    cov = Coverage()
    cov.load([(CRITERION, "inductor:inductor:extern_calls")])
    gen = make_generator("feedback", [REGISTRY[o] for o in UNARY], F32, (3, 3), coverage=cov)
    assert gen.feedback(_graph(["Abs"]), ["inductor:inductor:extern_calls"]) == []
    assert gen.value["Abs"] == pytest.approx(0.7)


def test_graphs_are_valid_and_deterministic() -> None:
    ops = [REGISTRY[o] for o in ("Conv", "Add", "MatMul", "Relu", "Reshape", "Concat", "ReduceSum")]
    profile = full_profile(17, tuple(REGISTRY))  # what ONNX Runtime implements: check_graph runs it
    a = make_generator("feedback", ops, GenOptions(), (3, 8), profile)
    b = make_generator("feedback", ops, GenOptions(), (3, 8), profile)
    for seed in range(6):
        g = a.generate(seed)
        check_graph(g, seed=seed)
        assert g.meta["strategy"] == "feedback"
        assert b.generate(seed).to_json() == g.to_json()
        a.feedback(g, [f"k{seed}"])
        b.feedback(g, [f"k{seed}"])


# -- the compilers ------------------------------------------------------------------------------------
def test_inductor_reports_its_counters_through_the_worker(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        conv = pool.run("inductor", _test(_graph(["Conv"], n=1)), ["eager", "inductor", "inductor-dynamic"])
        relu = pool.run("inductor", _test(_graph(["Relu"], n=2)), ["inductor"])
    finally:
        pool.close()
    assert all(o.status == OK for o in conv.values())
    assert conv["eager"].fired == []  # eager torch compiles nothing
    # a convolution is an extern kernel call in Inductor's CPU code, static shapes or dynamic
    for v in ("inductor", "inductor-dynamic"):
        assert "inductor:inductor:extern_calls" in conv[v].fired
        assert all(k.startswith("inductor:") and "cache" not in k for k in conv[v].fired)
    assert relu["inductor"].status == OK and relu["inductor"].fired == []  # one pointwise kernel, no rewrite


def _onnx_add_relu(fused: bool) -> bytes:
    """Add then Relu (two injective operators: FuseOps fuses them), or Relu alone."""
    from onnx import TensorProto, helper

    f32 = TensorProto.FLOAT
    if fused:
        nodes = [helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["out"])]
        return make_model(nodes, [("x", f32, [2, 3]), ("y", f32, [2, 3])], [("out", f32, [2, 3])])
    return make_model([helper.make_node("Relu", ["x"], ["out"])], [("x", f32, [2, 3])], [("out", f32, [2, 3])])


def test_tvm_reports_the_passes_that_changed_the_module() -> None:
    pytest.importorskip("tvm")
    from dlcfuzz.backends.tvm import TvmBackend

    be = TvmBackend()
    got: list[str] = []
    be.fired = got.extend
    x = np.ones((2, 3), np.float32)
    fired = {}
    for name, model in (("two", _onnx_add_relu(True)), ("one", _onnx_add_relu(False))):
        imported = be.load(Test(model, "", {"x": x, "y": x}))
        for v in be.variants():
            got.clear()
            be.compile(imported, v)
            fired[name, v.name] = set(got)
    for (model, variant), keys in fired.items():
        assert "tvm:pass:LegalizeOps" in keys  # every Relax operator becomes a TIR call
        assert not keys & {"tvm:pass:sequential", "tvm:pass:_pipeline"}  # wrappers are not passes
        # FuseOps runs only in the fused pipeline, and changes the module only when two operators fuse
        assert ("tvm:pass:FuseOps" in keys) == (model == "two" and variant.startswith("fused")), (model, variant)
    be.report_fired = False  # measuring off: nothing reported
    got.clear()
    be.compile(be.load(Test(_onnx_add_relu(True), "", {})), be.variants()[1])
    assert got == []


def test_feedback_campaign_stores_compiler_keys_and_resumes(tmp_path: Path) -> None:
    pytest.importorskip("tvm")
    ops = [REGISTRY[o] for o in ("Add", "Relu", "MatMul", "Reshape", "Transpose")]

    def run(tests: int) -> Campaign:
        c = Campaign(CampaignConfig(tmp_path, ["tvm"], ops, budget_seconds=300, max_tests=tests, ops=(2, 4),
                                    strategy="feedback"))
        c.run()
        return c

    first = run(2)
    # the first test fires passes nobody fired before (its generator: the one targeting tvm)
    assert sum(g.rewarded for g in first.tester.gens.values()) >= 1

    def stored() -> dict[str, int]:
        db = sqlite3.connect(tmp_path / "campaign.sqlite")
        rows = dict(db.execute("SELECT key, test_id FROM coverage WHERE criterion = ?", (CRITERION,)))
        db.close()
        return rows

    keys = stored()
    assert "tvm:pass:LegalizeOps" in keys and keys["tvm:pass:LegalizeOps"] == 0
    assert all(k.startswith("tvm:pass:") for k in keys)
    resumed = run(3)
    assert resumed.progress.tests == 1
    assert resumed.coverage.has(CRITERION, "tvm:pass:LegalizeOps")  # loaded from the store: not new again
    assert {k: t for k, t in stored().items() if t < 2} == keys
