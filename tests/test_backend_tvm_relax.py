"""tvm-relax: Relax modules written from dlcfuzz graphs, function rewrites, pass sequences and
the HirGen oracles, with the real TVM."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

pytest.importorskip("tvm", reason="apache-tvm is not installed")

import tvm
from tvm import relax

from dlcfuzz.backends.base import Test
from dlcfuzz.backends.tvm_relax import TvmRelaxBackend, make_plan, passes
from dlcfuzz.export.relax import REWRITES, Layout, from_tvmscript, rewrite, to_relax, to_tvmscript
from dlcfuzz.oracle import judge
from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from tests.helpers import SESSION_OPTIONS, generated_case, make_model
from tests.test_campaign import run_repro

OPS = ["Add", "Mul", "Sub", "Relu", "Sigmoid", "Tanh", "MatMul", "Neg", "Abs", "Exp"]
WEIGHTED = ["Gemm", "PRelu", "Add", "Relu", "Tanh"]  # Gemm's and PRelu's weights become constants


def build_and_run(mod, g, feeds, lift: bool = False) -> list[np.ndarray]:
    if lift:
        mod = relax.transform.LambdaLift()(mod)
    vm = relax.VirtualMachine(tvm.compile(mod, tvm.target.Target({"kind": "llvm"})), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(feeds[v.name]) for v in g.inputs])
    return [out.numpy()] if isinstance(out, tvm.runtime.Tensor) else [o.numpy() for o in out]


def hand_made():
    g, _, feeds = generated_case(5, ops=WEIGHTED, op_range=(6, 6), dtypes=("float32",), init_rate=1.0,
                                 picking_rate=0.6)
    assert g.initializers
    return g, feeds, to_relax(g, Layout([2, 4], [True, False, True, True]))


def test_module_has_functions_calls_and_tuples() -> None:
    mod = hand_made()[2]
    names = sorted(gv.name_hint for gv in mod.functions)
    assert names == ["f0", "f1", "f2", "main"]
    text = mod.script()
    assert "cls.f0(" in text and "R.dataflow()" in text and "[0]" in text  # calls, dataflow, tuple indexing
    relax.analysis.well_formed(mod)


@pytest.mark.parametrize("form", REWRITES)
def test_each_rewrite_preserves_outputs(form: str) -> None:
    g, feeds, mod = hand_made()
    want = build_and_run(mod, g, feeds)
    for fname in ("f0", "f1", "f2"):
        got = rewrite(mod, fname, form)
        relax.analysis.well_formed(got)
        assert f"{fname}_{form}" in [gv.name_hint for gv in got.functions]
        if form == "closure":
            # valid Relax that TVM 0.27's default pipeline rejects (a finding of the rewritten variant);
            # lifted to a global first, it must still compute the same
            with pytest.raises(Exception, match="VMShapeLower do not work for local functions"):
                build_and_run(got, g, feeds)
        for a, b in zip(want, build_and_run(got, g, feeds, lift=form == "closure"), strict=True):
            np.testing.assert_array_equal(a, b)


def test_tvmscript_round_trip_with_constants() -> None:
    mod = hand_made()[2]
    for m in (mod, rewrite(rewrite(mod, "f0", "wrap"), "f2", "call")):
        text, consts = to_tvmscript(m)
        assert consts and "metadata" not in text
        tvm.ir.assert_structural_equal(from_tvmscript(text, consts), m)


def test_plans_draw_passes_the_installed_tvm_has() -> None:
    groups = passes()
    assert {"FoldConstant", "DeadCodeElimination", "LambdaLift"} <= set(groups["high"])
    assert groups["lowering"] == ("LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR")
    g, _, _ = generated_case(1, ops=OPS, op_range=(6, 6))
    plan = make_plan(g)
    assert plan == make_plan(g)  # drawn from the graph's seed
    assert plan.passes and all(hasattr(relax.transform, p) for p in plan.passes)


def test_variants_agree_with_each_other_and_the_reference() -> None:
    backend = TvmRelaxBackend()
    names = [v.name for v in backend.variants()]
    assert names[:4] == ["original-generic", "optimized-generic", "pipeline-generic", "rewritten-generic"]
    for seed in range(3):
        g, model, feeds = generated_case(seed, ops=OPS, op_range=(4, 8))
        want = ort.InferenceSession(model, SESSION_OPTIONS).run(None, feeds)
        imported = backend.load(Test(model, g.to_json(), feeds))
        for v in backend.variants():
            try:
                got = backend.run(backend.compile(imported, v), feeds)
            except Exception as e:
                assert v.name == "rewritten-generic" and "local functions" in str(e), (v.name, e)
                continue
            for a, b in zip(want, got, strict=True):
                np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_a_planted_constant_change_is_caught_and_replayed(tmp_path: Path) -> None:
    out = tmp_path / "c"
    cfg = CampaignConfig(out, ["tests.fake_backends:PlantedRelax"], [REGISTRY[o] for o in WEIGHTED],
                         budget_seconds=300, max_tests=4, ops=(2, 4), limits=GenOptions(init_rate=1.0, picking_rate=0.5,
                                                                                   dtypes=("float32",)),
                         allocate=False)  # every variant of every test: the planted one included
    Campaign(cfg).run()
    db = sqlite3.connect(out / "campaign.sqlite")
    bugs = list(db.execute("SELECT oracle, variant, dir FROM bugs WHERE oracle = 'metamorphic'"))
    db.close()
    assert bugs and all(b[1] == "optimized-generic" for b in bugs), bugs
    folder = out / bugs[0][2]
    assert json.loads((folder / "relax_plan.json").read_text())["passes"]
    assert (folder / "relax_module.py").read_text().startswith("# from tvm.script")
    r = run_repro(folder)
    assert r.returncode == 1 and "reproduced" in r.stdout, (r.stdout, r.stderr[-2000:])


def test_a_crash_names_the_step_it_happened_in(tmp_path: Path) -> None:
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        feeds = {"x": np.ones((2, 2), np.float32)}
        for op, status in (("Neg", "crash"), ("Relu", "error")):
            model = make_model([helper.make_node(op, ["x"], ["y"])], [("x", 1, [2, 2])], [("y", 1, [2, 2])])
            got = pool.run("tests.fake_backends:StepCrash", Test(model, "", feeds), ["basic"])["basic"]
            assert got.status == status and got.step == "pass Boom", got
            finding = judge({"stepcrash": {"basic": got}}, None).findings[0]
            assert finding.message.startswith("[pass Boom]")
    finally:
        pool.close()
