"""ONNX Runtime's contrib operators (spec/contrib.py, domain com.microsoft): registered under qualified
names, exported as nodes of their domain (the model importing com.microsoft 1), valid and run by ONNX
Runtime, judged against it (the reference evaluator has no com.microsoft operator), imported by TVM's
Relax frontend, and declined, never reported as bugs, by the compilers that lack them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test
from dlcfuzz.backends.ort import full_profile, type_profile
from dlcfuzz.backends.reference import ReferenceBackend, distrusted
from dlcfuzz.export.onnx import to_bytes, to_onnx
from dlcfuzz.ir import Graph, op_identity
from dlcfuzz.oracle.unsupported import is_unsupported
from dlcfuzz.run import profile
from dlcfuzz.spec import REGISTRY, get
from dlcfuzz.values import synthesize
from tests.helpers import check_graph, ort_generator

MS = "com.microsoft"
CONTRIB = sorted(op for op in REGISTRY if op_identity(op)[0] == MS)
FILLERS = ("Relu", "Add", "Mul", "Tanh", "Cast", "Reshape", "MatMul")


def _graphs(op: str, n: int, **kw):
    gen = ort_generator([REGISTRY[op]], **{"opset": 17, **kw})
    return gen, [gen.generate(seed) for seed in range(n)]


def _ort(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(to_bytes(g), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_contrib_specs_go_by_qualified_names() -> None:
    names = ("Attention", "BiasGelu", "EmbedLayerNormalization", "FastGelu", "MatMulInteger16",
             "SkipLayerNormalization")
    assert [f"{MS}.{t}" for t in names] == CONTRIB
    for op in CONTRIB:
        assert (REGISTRY[op].domain, REGISTRY[op].op_type) == op_identity(op)
    # ONNX's Attention (opset 23) and the contrib one are two operators
    assert REGISTRY["Attention"].domain == "" and REGISTRY["Attention"].since == 23
    assert get("Attention") is REGISTRY["Attention"]
    assert get("FastGelu") is REGISTRY[f"{MS}.FastGelu"]  # a type alone where it is unambiguous


@pytest.mark.parametrize("op", CONTRIB)
def test_contrib_graphs_are_valid_and_run_on_ort(op: str) -> None:
    """20 single-call graphs each: the ONNX checker and strict shape inference accept them, ONNX Runtime
    runs them with outputs of exactly the declared types, the spec's checks hold; the node is of
    domain com.microsoft, which the model imports at version 1 besides the default domain."""
    gen = ort_generator([REGISTRY[op]], opset=17)
    assert gen.unavailable == []
    for seed in range(20):
        g = gen.generate(seed)
        check_graph(g, seed=seed)
        for name, check in REGISTRY[op].checks.items():
            assert check(gen.last_ctx), f"{op} seed {seed}: check {name!r} fails for {g.nodes[0].attrs}"
        model = to_onnx(g)
        assert [(n.domain, n.op_type) for n in model.graph.node if n.op_type != "Constant"] == [op_identity(op)]
        assert sorted((o.domain, o.version) for o in model.opset_import) == [("", 17), (MS, 1)]
        assert Graph.from_json(g.to_json()).nodes[0].op == op


@pytest.mark.parametrize("opset", [13, 23])
def test_contrib_outputs_feed_onnx_operators(opset: int) -> None:
    """In graphs with ONNX operators, contrib outputs that other nodes read are typed in the model's
    value_info (ONNX's shape inference cannot infer them), and every graph stays valid at opsets 13 and
    23 (23: ONNX's own Attention beside the contrib one)."""
    specs = [REGISTRY[o] for o in (*CONTRIB, *FILLERS, *(("Attention",) if opset >= 23 else ()))]
    gen = ort_generator(specs, op_range=(6, 10), opset=opset)
    fed = 0
    for seed in range(25):
        g = gen.generate(seed)
        check_graph(g, seed=seed)
        model = to_onnx(g)
        typed = {vi.name for vi in model.graph.value_info}
        read = {x for n in g.nodes for x in n.inputs if x}
        for n in g.nodes:
            if op_identity(n.op)[0]:
                inner = [o for o in n.outputs if o in read and o not in g.outputs]
                assert set(inner) <= typed
                fed += len(inner)
        if not any(op_identity(n.op)[0] for n in g.nodes):
            assert [o.domain for o in model.opset_import] == [""]
    assert fed >= 5


def test_export_refuses_a_domain_without_a_known_version() -> None:
    g = Graph.from_json(_graphs(f"{MS}.FastGelu", 1)[1][0].to_json())
    g.nodes[0].op = "org.example.FastGelu"
    with pytest.raises(ValueError, match=r"org\.example"):
        to_onnx(g)


def test_ort_profile_holds_the_contrib_kernels() -> None:
    """A generator for ONNX Runtime narrows the schema's types to its CPU kernels: float32 for the Gelu
    family (the schema also has float64 and float16), int16 for MatMulInteger16."""
    prof = full_profile(17, tuple(CONTRIB))
    assert prof[(f"{MS}.FastGelu", "T")] == prof[(f"{MS}.Attention", "T")] == frozenset({"float32"})
    assert prof[(f"{MS}.MatMulInteger16", "T1")] == frozenset({"int16"})
    assert {"float32", "float16"} <= prof[(f"{MS}.SkipLayerNormalization", "T")]
    _, graphs = _graphs(f"{MS}.BiasGelu", 10)
    assert {g.values[g.nodes[0].inputs[0]].type.dtype for g in graphs} == {"float32"}
    # ONNX's Attention keeps its own kernels' profile beside the contrib one
    both = full_profile(23, ("Attention", f"{MS}.Attention"))
    assert both[("Attention", "T1")] == type_profile(23)[("Attention", "T1")] != both[(f"{MS}.Attention", "T")]


def test_the_reference_is_no_baseline_for_contrib_graphs() -> None:
    """The reference evaluator refuses graphs with a contrib node (by the graph or by operator names),
    so the campaign's baseline is ONNX Runtime; graphs without one stay the reference's."""
    ref = ReferenceBackend()
    gen = ort_generator([REGISTRY[o] for o in (f"{MS}.FastGelu", "Relu", "Neg")], op_range=(3, 5))
    seen = {True: 0, False: 0}
    for seed in range(20):
        g = gen.generate(seed)
        ops = {n.op for n in g.nodes}
        contrib = any(op_identity(op)[0] for op in ops)
        assert ref.supports(ops, g) is not contrib and ref.supports(ops) is not contrib
        if contrib:
            node = next(n for n in g.nodes if op_identity(n.op)[0])
            assert "com.microsoft" in distrusted(node, g).why
        seen[contrib] += 1
    assert seen[True] and seen[False]


def test_compilers_without_the_contrib_operators_leave_them_out() -> None:
    """Inductor (its torch op table), IREE (its lowering profile) and TVM's Relax exporter take no
    contrib operator: they refuse the graph before a test runs, which a campaign counts as no finding."""
    _, graphs = _graphs(f"{MS}.SkipLayerNormalization", 1)
    g = graphs[0]
    ops = {n.op for n in g.nodes}
    for name in ("inductor", "iree", "tvm-relax"):
        assert not load_backend(name).supports(ops, g), name
    assert load_backend("iree").supports({"Relu"}) and load_backend("inductor").supports({"Relu"})


# ---------------------------------------------------------------------------------------------
# TVM's Relax ONNX frontend (tvm/relax/frontend/onnx/onnx_frontend.py) has converters for all six
# ---------------------------------------------------------------------------------------------
# TVM 0.27's own bugs on calls it takes (what a campaign reports; left out here)
TVM_BUGS = {
    "placeholder outputs": "SkipLayerNormalization's mean / inv_std_var and Attention's present come back as a "
                           "scalar 0 (the converters return placeholders)",
    "2-D / 3-D mask alone": "Attention with a 2-D or 3-D mask_index and no attention_bias passes that mask to "
                            "relax.nn.attention as the bias, which must be 4-D (ValueError)",
}


def _tvm_bug(g: Graph) -> str | None:
    n = g.nodes[0]
    if n.op == f"{MS}.SkipLayerNormalization" and len(n.outputs) in (2, 3):
        return "placeholder outputs"
    if n.op == f"{MS}.Attention":
        if len(n.outputs) == 2:
            return "placeholder outputs"
        mask = g.values[n.inputs[3]].type if len(n.inputs) > 3 and n.inputs[3] else None
        if mask is not None and mask.rank >= 2 and not (len(n.inputs) > 5 and n.inputs[5]):
            return "2-D / 3-D mask alone"
    return None


@pytest.mark.parametrize("op", CONTRIB)
def test_tvm_imports_and_runs_contrib_operators(op: str) -> None:
    """Every contrib operator imports into TVM and computes what ONNX Runtime computes, where TVM takes
    the call; the forms it declines are declines by oracle/unsupported.py (never bugs)."""
    pytest.importorskip("tvm", reason="tvm is not installed (pip install apache-tvm)")
    import warnings

    tvm = load_backend("tvm")
    variant = tvm.variants()[0]
    ran = declined = 0
    gen = ort_generator([REGISTRY[op]], opset=17)
    for seed in range(200):  # until four ran (Attention: a fifth of its calls are forms TVM takes)
        g = gen.generate(seed)
        if _tvm_bug(g):
            continue
        feeds = synthesize(g, np.random.default_rng(seed), 0)
        test = Test(to_bytes(g), g.to_json(), feeds)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                imported = tvm.load(test)
            except Exception as e:  # a converter's refusal must read as one
                assert is_unsupported("tvm", "import", type(e).__name__, str(e)), f"seed {seed}: {e!r}"
                declined += 1
                continue
            got = tvm.run(tvm.compile(imported, variant), feeds)
        f16 = g.values[g.outputs[0]].type.dtype == "float16"
        for a, b in zip(got, _ort(g, feeds), strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype, f"{op} seed {seed}"
            np.testing.assert_allclose(a, b, rtol=1e-2 if f16 else 1e-4, atol=1e-2 if f16 else 1e-5,
                                       err_msg=f"{op} seed {seed} {g.nodes[0].attrs}")
        ran += 1
        if ran == 4:
            break
    assert ran >= 1, f"{op}: TVM ran no graph ({declined} declined)"


def test_tvm_declines_are_declines_in_a_worker(tmp_path: Path) -> None:
    """Forms TVM's converters refuse (SkipLayerNormalization without beta or bias, an Attention with a
    custom scale, EmbedLayerNormalization's third output), run in a TVM worker: every variant fails
    at import with an error oracle/unsupported.py calls a decline, so the support profile learns it."""
    pytest.importorskip("tvm", reason="tvm is not installed (pip install apache-tvm)")
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    wanted = {
        f"{MS}.SkipLayerNormalization": lambda n: len(n.inputs) < 5 or not n.inputs[3],
        f"{MS}.Attention": lambda n: "scale" in n.attrs,
        f"{MS}.EmbedLayerNormalization": lambda n: len(n.outputs) == 3,
    }
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        variants = [name for name, _ in pool.describe("tvm")[1]]
        for op, pick in wanted.items():
            gen = ort_generator([REGISTRY[op]], opset=17)
            g = next(g for g in (gen.generate(s) for s in range(60)) if pick(g.nodes[0]))
            test = Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(0)))
            outcomes = pool.run("tvm", test, variants)
            why = [o.message for o in outcomes.values()]
            assert profile.test_status("tvm", outcomes) == profile.DECLINED, (op, why)
    finally:
        pool.close()


def test_openvino_declines_embed_layer_normalizations_third_output(tmp_path: Path) -> None:
    """OpenVINO's contrib EmbedLayerNormalization makes two outputs: one asking for the third
    (embedding_sum) is refused in its words ("Expected output number ... is 3 while the implementation
    provides 2 outputs"), which is a decline, as TVM's "Missing outputs during conversion" is."""
    pytest.importorskip("openvino", reason="openvino is not installed (pip install openvino)")
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    gen = ort_generator([REGISTRY[f"{MS}.EmbedLayerNormalization"]], opset=17)
    g = next(g for g in (gen.generate(s) for s in range(60)) if len(g.nodes[0].outputs) == 3)
    test = Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(0)))
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        outcomes = pool.run("openvino", test, [name for name, _ in pool.describe("openvino")[1]])
    finally:
        pool.close()
    assert all("while the implementation provides 2 outputs" in o.message for o in outcomes.values()), outcomes
    assert profile.test_status("openvino", outcomes) == profile.DECLINED


def test_a_decline_naming_the_op_type_is_learned_for_the_contrib_node() -> None:
    """TVM names the converter that declined by op_type ("while converting onnx.Attention"): in a graph
    with a contrib Attention and a Relu, neither vouched for, the support profile debits the Attention."""
    from dlcfuzz.backends.base import ERROR, Outcome

    gen = ort_generator([REGISTRY[f"{MS}.Attention"], REGISTRY["Relu"]], op_range=(2, 2))
    g = next(g for g in (gen.generate(s) for s in range(50)) if {n.op for n in g.nodes} == {f"{MS}.Attention", "Relu"})
    why = "custom scale is not currently supported"
    declined = Outcome(ERROR, "import", error_type="AssertionError", message=why,
                       traceback=f"AssertionError: {why}\nwhile converting onnx.Attention")
    p = profile.SupportProfile("tvm", "test")
    assert p.learn(g, {"v": declined}) == profile.DECLINED
    assert not p.admits_op(f"{MS}.Attention") and p.counts.get("Relu") is None


# ---------------------------------------------------------------------------------------------
# campaigns
# ---------------------------------------------------------------------------------------------
def _campaign(out: Path, backends: list[str], ops: list[str], tests: int, size: tuple[int, int]):
    from dlcfuzz.run.campaign import Campaign, CampaignConfig

    cfg = CampaignConfig(out, backends, [REGISTRY[o] for o in ops], budget_seconds=300, max_tests=tests, ops=size,
                         targeted=False, allocate=False)
    c = Campaign(cfg)
    c.run()
    db = sqlite3.connect(out / "campaign.sqlite")
    try:
        rows = {k: list(db.execute(q)) for k, q in (
            ("tests", "SELECT ops, baseline FROM tests ORDER BY id"),
            ("outcomes", "SELECT backend, status, unsupported FROM outcomes"),
            ("bugs", "SELECT backend, title FROM bugs"))}
    finally:
        db.close()
    return c, rows


def test_campaign_judges_contrib_graphs_against_ort(tmp_path: Path) -> None:
    c, rows = _campaign(tmp_path / "c", ["ort"], [f"{MS}.FastGelu", f"{MS}.BiasGelu", "Relu", "Neg"], 8, (1, 3))
    assert c.progress.tests == 8
    judged = [baseline for ops, baseline in rows["tests"] if MS in ops]
    assert judged and set(judged) == {"ort/disable_all"}, rows["tests"]
    others = [baseline for ops, baseline in rows["tests"] if MS not in ops]
    assert set(others) <= {"reference/default"}, rows["tests"]


def test_openvino_declines_matmulinteger16_and_lists_no_bug(tmp_path: Path) -> None:
    """OpenVINO's ONNX frontend has converters for five of the six, not for MatMulInteger16: every such
    test is a decline, counted as unsupported, and no bug."""
    pytest.importorskip("openvino", reason="openvino is not installed (pip install openvino)")
    c, rows = _campaign(tmp_path / "c", ["openvino"], [f"{MS}.MatMulInteger16"], 3, (1, 1))
    assert c.progress.tests == 3 and c.progress.unsupported["openvino"] >= 3
    assert rows["outcomes"] and all(r == ("openvino", "error", 1) for r in rows["outcomes"]), rows["outcomes"]
    assert rows["bugs"] == []
    assert {b for _, b in rows["tests"]} == {"ort/disable_all"}
