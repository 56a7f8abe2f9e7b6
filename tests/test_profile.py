"""Support profiles (run/profile.py), targeted generation and the CPU allocation, on the real compilers."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends.base import ERROR, OK, Outcome, Test
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen import make_generator
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, Graph, Node, TensorType, Value
from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.run.probe import probe
from dlcfuzz.run.profile import (
    ACCEPTED,
    DECLINED,
    FAILED,
    SupportProfile,
    find_profile,
    load_profile,
    node_keys,
    profile_path,
    save_profile,
)
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import synthesize
from tests.helpers import ort_generator

HAS_TVM = importlib.util.find_spec("tvm") is not None
# TVM 0.27's Relax ONNX frontend: "TopK sorted must be 1 for Relax frontend" (onnx_frontend.py), and no
# converter for Celu ("The following operators are not supported for frontend ONNX: Celu")
TVM_DECLINES = "ValueError", "TopK sorted must be 1 for Relax frontend"


def topk(sorted_: int, dtype: str = "float32") -> Graph:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2, 3), dtype), INPUT_KIND))
    g.add_value(Value("k", TensorType((1,), "int64"), CONST_KIND, np.array([2], np.int64)))
    g.add_value(Value("y", TensorType((2, 2), dtype), "node"))
    g.add_value(Value("i", TensorType((2, 2), "int64"), "node"))
    g.add_node(Node("TopK", ["x", "k"], ["y", "i"], {"axis": 1, "largest": 1, "sorted": sorted_}, "n0"))
    g.set_leaf_outputs()
    return g


def ran() -> dict[str, Outcome]:
    return {"a": Outcome(OK, outputs=[]), "b": Outcome(ERROR, "compile", error_type="RuntimeError", message="x")}


def declined() -> dict[str, Outcome]:
    kind, text = TVM_DECLINES
    return {"a": Outcome(ERROR, "import", error_type=kind, message=text)}


def test_keys_name_the_features_a_compiler_declines():
    keys = node_keys(topk(0).nodes[0], topk(0).values)
    assert set(keys) == {"*", "dtype=float32", "rank=2", "axis=1", "largest=1", "sorted=0", "in1=const", "outputs=2",
                         "out=float32"}
    # in a model of opset 21, TopK is TopK-11 (its latest version by then)
    assert "version=11" in node_keys(topk(0).nodes[0], topk(0).values, 21)


def test_a_feature_declined_and_never_accepted_is_declined():
    p = SupportProfile("tvm", "0.27")
    assert p.learn(topk(1), ran()) == ACCEPTED  # one variant ran it: taken
    assert p.learn(topk(0), declined()) == DECLINED
    g = topk(0)
    assert not p.admits(g.nodes[0], g.values)
    assert p.declined_keys("TopK") == ["sorted=0"]  # the others were vouched for by the accepted test
    assert p.admits(topk(1).nodes[0], topk(1).values) and p.admits_op("TopK")


def test_an_operator_never_accepted_is_declined_and_a_crash_is_not_a_decline():
    p = SupportProfile("tvm", "0.27")
    crash = {"a": Outcome("crash", "compile", error_type="SIGSEGV", signal=11)}
    assert p.learn(topk(0), crash) == FAILED
    assert p.admits_op("TopK")
    p.learn(topk(0), declined())
    assert not p.admits_op("TopK")


def test_a_declined_multi_operator_test_debits_only_its_one_unproven_node():
    p = SupportProfile("tvm", "0.27")
    g = topk(0)
    relu = Node("Relu", ["y"], ["r"], {}, "n1")
    g.add_value(Value("r", TensorType((2, 2), "float32"), "node"))
    g.add_node(relu)
    g.set_leaf_outputs()
    single = Graph(opset=17)
    single.add_value(Value("y", TensorType((2, 2), "float32"), INPUT_KIND))
    single.add_value(Value("r", TensorType((2, 2), "float32"), "node"))
    single.add_node(Node("Relu", ["y"], ["r"], {}, "n0"))
    p.learn(single, ran())  # Relu is vouched for
    p.learn(g, declined())
    assert p.declined_keys("Relu") == []
    assert not p.admits_op("TopK")
    q = SupportProfile("tvm", "0.27")  # nothing vouched for: two suspects, nothing learned
    q.learn(g, declined())
    assert q.counts == {}


def test_a_profile_of_one_version_is_never_used_for_another(tmp_path: Path):
    p = SupportProfile("tvm", "0.27.0")
    p.learn(topk(0), declined())
    save_profile(p, tmp_path)
    assert load_profile("tvm", "0.27.0", tmp_path).counts == p.counts
    assert load_profile("tvm", "0.28.0", tmp_path) is None
    # a file of the right name that holds another version's profile is refused too
    profile_path("tvm", "0.28.0", tmp_path).write_text(p.to_json())
    warned: list[str] = []
    assert load_profile("tvm", "0.28.0", tmp_path, warned.append) is None
    assert len(warned) == 1 and "0.27.0" in warned[0] and "rebuilt" in warned[0]


def test_a_corrupt_profile_gives_one_line_and_is_rebuilt(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path))
    path = profile_path("ort", "9.9")
    path.parent.mkdir(parents=True)
    short = json.dumps({"format": 1, "backend": "ort", "version": "9.9", "counts": {"A": {"*": [1]}}})
    for bad in ("{not json", short):
        path.write_text(bad)
        warned: list[str] = []
        assert find_profile("ort", "9.9", warned.append) is None
        assert len(warned) == 1 and "\n" not in warned[0] and str(path) in warned[0]


def test_cli_rebuilds_a_corrupt_profile_cache(tmp_path: Path, monkeypatch, capsys):
    from dlcfuzz.backends import load_backend
    from dlcfuzz.cli import main

    monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path / "cache"))
    version = load_backend("ort").version()
    path = profile_path("ort", version)
    path.parent.mkdir(parents=True)
    path.write_text("\x00garbage")
    rc = main(["fuzz", "--backends", "ort", "--max-tests", "3", "--budget", "60s", "--op-set", "Relu,Add",
               "--probe-per-op", "1", "--reduce-budget", "0", "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert rc == 0
    assert "unreadable" in err and "rebuilt" in err
    assert load_profile("ort", version) is not None  # probed again and cached


@pytest.mark.skipif(not HAS_TVM, reason="apache-tvm is not installed (pip install apache-tvm)")
def test_probing_tvm_marks_its_known_declines(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path / "cache"))
    specs = [REGISTRY[op] for op in ("Celu", "Relu", "TopK")]
    campaigns, profiles = probe(["tvm"], tmp_path, specs, GenOptions(), per_op=8, jobs=1)
    tvm = profiles["tvm"]
    assert not tvm.admits_op("Celu")
    assert tvm.admits_op("Relu") and tvm.admits_op("TopK")
    assert "sorted=0" in tvm.declined_keys("TopK")
    assert "in1=shape" in tvm.declined_keys("TopK")  # "Node cannot handle ShapeExpr inputs": K as a Shape
    assert load_profile("tvm", tvm.version).counts == tvm.counts  # cached for this version
    assert "TopK" in tvm.mixed() and len(campaigns) == 2  # a second round probed it again
    assert sum(tvm.counts["TopK"]["*"]) > 8  # more TopK tests than the first round had


@pytest.mark.skipif(not HAS_TVM, reason="apache-tvm is not installed (pip install apache-tvm)")
def test_graphs_generated_for_tvm_import_into_tvm(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path / "cache"))
    # operators TVM 0.27 declines, whole or in part, among ones it takes
    ops = ("Celu", "TopK", "ReverseSequence", "Relu", "Add", "MaxPool", "Transpose", "Pow", "LpNormalization")
    specs = [REGISTRY[op] for op in ops]
    _, profiles = probe(["tvm"], tmp_path, specs, GenOptions(), per_op=8, jobs=1)
    from dlcfuzz.backends.ort import full_profile

    gen = make_generator("isra", specs, GenOptions(), (3, 6), full_profile(17, ops), admit=profiles["tvm"])
    pool = WorkerPool(PhaseLimits(), 200, tmp_path / "logs")
    statuses = []
    try:
        for i in range(30):
            g = gen.generate(i)
            test = Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(i), 0))
            got = pool.run("tvm", test, ["unfused-generic"])["unfused-generic"]
            statuses.append((got.status, got.message[:100]))
    finally:
        pool.close()
    print(statuses)
    assert "Celu" in gen.unavailable
    declines = [s for s in statuses if s[0] == ERROR and ("not supported" in s[1] or "sorted must be 1" in s[1])]
    assert not declines
    assert sum(s == OK for s, _ in statuses) >= 27  # a few may be real TVM bugs, never declines


def test_an_unknown_key_is_a_decline_until_probed_and_is_run_to_learn_it():
    """A generator for the compiler writes only keys some test carried to it and it took; a campaign
    still runs tests with unknown keys there (that is how they are learned), not known declines."""
    p = SupportProfile("tvm", "0.27")
    assert not p.admits_op("TopK") and p.unknown_ops(["TopK", "Relu"]) == ["Relu", "TopK"]
    assert p.learn(topk(1), ran()) == ACCEPTED
    assert p.admits_op("TopK") and p.admits(topk(1).nodes[0], topk(1).values) and p.unknown_ops(["TopK"]) == []
    fp16 = topk(1, "float16")  # dtype=float16 and out=float16: never carried to the compiler
    assert not p.admits(fp16.nodes[0], fp16.values) and not p.admits_graph(fp16) and not p.declines_graph(fp16)
    assert p.learn(topk(0), declined()) == DECLINED
    assert p.declines_graph(topk(0)) and not p.admits_graph(topk(0))
    given = topk(1)  # a number or list attribute given: judged by its declines alone (see SupportProfile._taken)
    given.nodes[0].attrs["axis"] = 1
    given.nodes[0].attrs["largest"] = 1
    given.nodes[0].attrs["k_hint"] = [2, 3]
    assert "k_hint=given" in node_keys(given.nodes[0], given.values) and p.admits(given.nodes[0], given.values)
    crashed = SupportProfile("tvm", "0.27")  # a crash is a compiler taking the test (a finding), not a decline
    crashed.learn(topk(1), {"a": Outcome(ERROR, "compile", error_type="RuntimeError", message="segfault")})
    assert crashed.admits_graph(topk(1))


PROFILED = ("ort", "tvm", "openvino", "inductor", "iree")  # the backends with a packaged profile


def _taken_by(name: str, graphs: list[Graph]) -> None:
    """Every graph passes the backend's own ``supports()`` and the writer it reads (ONNX; the torch
    exporter for Inductor)."""
    from dlcfuzz.backends import load_backend

    backend = load_backend(name)
    for i, g in enumerate(graphs):
        assert backend.supports({n.op for n in g.nodes}, g), f"graph {i}: {sorted({n.op for n in g.nodes})}"
        assert to_bytes(g)
        if name == "inductor":
            from dlcfuzz.export.torch import to_torch_source, unsupported

            assert unsupported(g) is None and to_torch_source(g)


def _available(name: str) -> None:
    from dlcfuzz.backends import load_backend

    ok, why = load_backend(name).available()
    if not ok:
        pytest.skip(why)


@pytest.mark.parametrize("name", [b for b in PROFILED if b != "inductor"])  # gen --for inductor: torch programs
def test_graphs_generated_for_a_backend_are_all_taken_by_it(name: str, tmp_path: Path, monkeypatch):
    """``dlcfuzz gen --for NAME`` writes only graphs the backend takes.  Before profiles admitted only what
    was probed, 22 of 100 graphs for IREE were refused (contrib operators, If, sequences, NonZero ...)."""
    from dlcfuzz.cli import main

    _available(name)
    monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path / "cache"))  # the packaged profile, not this machine's
    assert main(["gen", "--for", name, "-n", "30", "--ops", "10:10", "--seed", "1", "--out", str(tmp_path)]) == 0
    graphs = [Graph.from_json(f.read_text()) for f in sorted(tmp_path.glob("g*.json"))]
    assert len(graphs) == 30
    _taken_by(name, graphs)


@pytest.mark.parametrize("name", PROFILED)
def test_a_campaigns_targeted_graphs_are_all_taken_by_their_target(name: str, tmp_path: Path, monkeypatch):
    """The campaign's targeted generation (``campaign_generator`` with ``JointProfile(target, ORT)``, over
    the default opsets 13-23) writes only graphs the target takes.  Before, 40 of 100 ONNX graphs targeted
    at Inductor were refused (contrib operators, If, MaxRoiPool, unsigned types)."""
    from dlcfuzz.backends import load_backend
    from dlcfuzz.run.campaign import campaign_generator
    from dlcfuzz.run.profile import JointProfile

    _available(name)
    monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path / "cache"))  # the packaged profiles
    target = find_profile(name, load_backend(name).version())
    baseline = find_profile("ort", load_backend("ort").version())
    assert target is not None and baseline is not None
    cfg = CampaignConfig(tmp_path / "c", [name], list(REGISTRY.values()), budget_seconds=None, max_tests=1,
                         ops=(10, 10), opsets=tuple(range(13, 24)))
    gen = campaign_generator(cfg, None, JointProfile(target, baseline))
    _taken_by(name, [gen.generate(seed) for seed in range(30)])


def test_allocation_shifts_cpu_toward_a_planted_high_yield_backend(tmp_path: Path):
    specs = [REGISTRY[op] for op in ("Add", "Mul", "Sub", "Abs", "Neg", "Sigmoid", "Tanh", "Exp")]
    cfg = CampaignConfig(tmp_path / "c", ["ort", "tests.fake_backends:Prolific"], specs, budget_seconds=None,
                         max_tests=40, ops=(1, 3), seed=random.Random(3).randrange(1000))
    c = Campaign(cfg)
    c.start_backends()
    p = c.run()
    prolific, ort = p.backends["tests.fake_backends:Prolific"], p.backends["ort"]
    assert prolific.bugs >= 20 and ort.bugs == 0
    assert prolific.targeted > 0.75 * 40
    assert prolific.tests >= 36 and ort.tests < 0.6 * 40  # ort only votes now and then


def test_a_divergence_calls_in_one_variant_of_each_backend_the_allocation_left_out(tmp_path: Path):
    """The baseline-vs-compiler vote needs the other compilers; a test the allocation ran on one backend
    only calls the others in when it diverges, each with one variant (a vote needs no more)."""
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2, 3), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType((2, 3), "float32"), "node"))
    g.add_node(Node("Sigmoid", ["x"], ["y"], {}, "n0"))  # Planted adds 1 to the outputs of Sigmoid graphs
    g.set_leaf_outputs()
    planted = "tests.fake_backends:Planted"
    c = Campaign(CampaignConfig(tmp_path / "c", [planted, "ort"], [REGISTRY["Sigmoid"]], budget_seconds=None))
    c.start_backends()
    try:
        test = Test(to_bytes(g), g.to_json(), {"x": np.zeros((2, 3), np.float32)})
        e = c.tester.evaluate(g, test, plan={planted: ["basic", "all"]})
        assert any(f.diverges and f.backend == planted for f in e.verdict.findings)
        assert list(e.outcomes["ort"]) == ["disable_all"]  # called in, on one variant
        g.nodes[0].op = "Relu"  # no divergence: nobody is called in
        g.values["x"].hint = None
        test = Test(to_bytes(g), g.to_json(), {"x": np.zeros((2, 3), np.float32)})
        e = c.tester.evaluate(g, test, plan={planted: ["basic", "all"]})
        assert "ort" not in e.outcomes
    finally:
        c.pool.close()


def test_a_decline_of_one_operator_version_is_learned_for_that_version_alone():
    """ONNX Runtime 1.31 runs RoiAlign-16 and has no kernel for RoiAlign-22 (measured): a model at opset
    22 is declined, the same model at opset 21 runs, and the profile keeps the two apart."""
    g = ort_generator([REGISTRY["RoiAlign"]], opset=21).generate(0)
    pool = WorkerPool(PhaseLimits())
    p = SupportProfile("ort", "test")
    try:
        for opset in (21, 22):
            g.opset = opset
            test = Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(0), 0))
            got = pool.run("ort", test, ["disable_all"])
            assert p.learn(g, got) == (ACCEPTED if opset == 21 else DECLINED), got
    finally:
        pool.close()
    node = g.nodes[0]
    assert p.admits(node, g.values, 21) and p.admits(node, g.values, 16)
    assert not p.admits(node, g.values, 22) and not p.admits(node, g.values, 23)
    assert p.declined_keys("RoiAlign") == ["version=22"]


def test_a_decline_that_names_its_operator_is_learned_for_that_operator():
    """IREE 3.13 declines float32 Softsign by name ("does not lower onnx.Softsign") and lowers Shrink: in a
    two-operator graph where neither node is vouched for, only Softsign's keys are debited."""
    pytest.importorskip("iree.compiler")
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2, 3), "float32"), INPUT_KIND))
    g.add_value(Value("s", TensorType((2, 3), "float32"), "node"))
    g.add_value(Value("y", TensorType((2, 3), "float32"), "node"))
    g.add_node(Node("Shrink", ["x"], ["s"], {"lambd": 0.5}, "n0"))
    g.add_node(Node("Softsign", ["s"], ["y"], {}, "n1"))
    g.set_leaf_outputs()
    pool = WorkerPool(PhaseLimits())
    try:
        test = Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(0), 0))
        from dlcfuzz.backends import load_backend

        got = pool.run("iree", test, [load_backend("iree").variants()[0].name])
    finally:
        pool.close()
    p = SupportProfile("iree", "test")
    assert p.learn(g, got) == DECLINED, got
    # Shrink is not debited (nothing is known of it: it stays to probe, not declined)
    assert not p.admits_op("Softsign") and p.declined_keys("Shrink") == [] and p.unknown_ops(["Shrink"]) == ["Shrink"]
    assert p.counts.get("Shrink") is None


@pytest.mark.skipif(not HAS_TVM, reason="apache-tvm is not installed (pip install apache-tvm)")
def test_a_declined_number_attribute_is_learned_as_given(tmp_path: Path):
    """TVM 0.27 asserts "custom scale is not currently supported" for com.microsoft.Attention: a float
    attribute, which no string or flag key names.  Learned from single-operator tests on TVM, the key
    ``scale=given`` is declined, the operator itself is not."""
    from dlcfuzz.backends import load_backend

    gen = ort_generator([REGISTRY["com.microsoft.Attention"]], opset=17)
    variant = load_backend("tvm").variants()[0].name
    p = SupportProfile("tvm", "test")
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    seen = {ACCEPTED: 0, DECLINED: 0}
    try:
        for seed in range(40):
            g = gen.generate(seed)
            scaled = g.nodes[0].attrs.get("scale") is not None
            assert "scale=given" in node_keys(g.nodes[0], g.values) if scaled else True
            out = pool.run("tvm", Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(seed), 0)),
                           [variant])
            status = p.learn(g, out)
            if scaled:
                assert status == DECLINED, out[variant].message
            seen[status] = seen.get(status, 0) + 1
            if seen[ACCEPTED] and seen[DECLINED] >= 2:
                break
    finally:
        pool.close()
    assert seen[ACCEPTED] and seen[DECLINED]
    assert "scale=given" in p.declined_keys("com.microsoft.Attention")
    assert p.admits_op("com.microsoft.Attention")


def test_an_operator_newer_than_the_opset_is_probed_at_its_own(tmp_path: Path, monkeypatch):
    """GroupNormalization exists from opset 18 on (version 21 is the one specified): probing at the
    default opset 17 probes it at 21, and the other operators at 17."""
    monkeypatch.setenv("DLCFUZZ_CACHE", str(tmp_path / "cache"))
    specs = [REGISTRY[op] for op in ("GroupNormalization", "Relu")]
    campaigns, profiles = probe(["ort"], tmp_path, specs, GenOptions(), per_op=3, jobs=1)
    ort = profiles["ort"]
    assert ort.counts["GroupNormalization"]["version=21"][0] == 3
    assert ort.counts["Relu"]["version=14"][0] == 3  # Relu-14 is the version of opset 17
    assert {c.cfg.limits.opset for c in campaigns} == {17, 21}


@pytest.mark.skipif(not HAS_TVM, reason="apache-tvm is not installed (pip install apache-tvm)")
def test_a_constant_written_as_a_shape_is_its_consumers_key(tmp_path: Path):
    """TVM 0.27 converts Expand(x, Shape(y)) and says "Node cannot handle ShapeExpr inputs" for
    TopK(x, Shape(y)): the profile learns ``in1=shape`` per consumer, and still admits TopK's constant K."""
    from dlcfuzz.backends import load_backend

    def graph(op: str) -> Graph:
        x, y = ((3, 4), (2,)) if op == "TopK" else ((1, 4), (3, 4))
        c = np.array(y, np.int64)
        g = Graph(opset=17, meta={"constant_nodes": {"c": "shape"}, "shape_of": {"c": ["y", None, None]}})
        g.add_value(Value("x", TensorType(x, "float32"), INPUT_KIND))
        g.add_value(Value("y", TensorType(y, "float32"), INPUT_KIND))
        g.add_value(Value("c", TensorType(c.shape, "int64"), CONST_KIND, c))
        outs = [("z", (3, 2), "float32"), ("i", (3, 2), "int64")] if op == "TopK" else [("z", (3, 4), "float32")]
        for name, shape, dtype in outs:
            g.add_value(Value(name, TensorType(shape, dtype), "node"))
        g.add_node(Node(op, ["x", "c"], [o for o, _, _ in outs], {}, "n0"))
        g.set_leaf_outputs()
        return g

    variant = load_backend("tvm").variants()[0].name
    p = SupportProfile("tvm", "test")
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        for op, shaped in (("Expand", True), ("TopK", False), ("TopK", True)):
            g = graph(op)
            if not shaped:  # K as an initializer: TVM takes it, which vouches for TopK's other keys
                del g.meta["shape_of"]
            got = pool.run("tvm", Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(0), 0)),
                           [variant])
            want = DECLINED if op == "TopK" and shaped else ACCEPTED
            assert p.learn(g, got) == want, got[variant].message
    finally:
        pool.close()
    assert p.declined_keys("TopK") == ["in1=shape"] and p.declined_keys("Expand") == []
    topk = graph("TopK")
    assert not p.admits(topk.nodes[0], topk.values, 17, {"c"}) and p.admits(topk.nodes[0], topk.values, 17)


def test_a_decline_that_names_a_node_is_learned_for_that_node():
    """TVM's "Node n1 cannot handle ShapeExpr inputs." names a node, not an operator: in a two-operator
    graph where neither node is vouched for, only that node's keys are debited (before, nothing was learned:
    two suspects)."""
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2, 3), "float32"), INPUT_KIND))
    g.add_value(Value("r", TensorType((2, 3), "float32"), "node"))
    g.add_value(Value("k", TensorType((1,), "int64"), CONST_KIND, np.array([2], np.int64)))
    g.add_value(Value("y", TensorType((2, 2), "float32"), "node"))
    g.add_value(Value("i", TensorType((2, 2), "int64"), "node"))
    g.add_node(Node("Relu", ["x"], ["r"], {}, "n0"))
    g.add_node(Node("TopK", ["r", "k"], ["y", "i"], {"axis": 1}, "n1"))
    g.set_leaf_outputs()
    p = SupportProfile("tvm", "test")
    text = "Node n1 cannot handle ShapeExpr inputs."
    declined = {"a": Outcome(ERROR, "import", error_type="ValueError", message=text)}
    assert p.learn(g, declined) == DECLINED
    assert p.counts.get("Relu") is None and p.declined_keys("TopK")


def layer_norm(scale: tuple[int, ...], axis: int = -1) -> Graph:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((3, 4), "float32"), INPUT_KIND))
    g.add_value(Value("s", TensorType(scale, "float32"), CONST_KIND, np.full(scale, 1.5, np.float32)))
    g.add_value(Value("y", TensorType((3, 4), "float32"), "node"))
    g.add_node(Node("LayerNormalization", ["x", "s"], ["y"], {"axis": axis}, "n0"))
    g.set_leaf_outputs()
    return g


def test_a_scale_in_the_normalized_shape_or_broadcast_is_a_key():
    """ONNX lets LayerNormalization's Scale broadcast to X; the key tells it from X's shape past the axis."""
    def keys(g: Graph) -> list[str]:
        return [k for k in node_keys(g.nodes[0], g.values) if ".shape=" in k]

    assert keys(layer_norm((4,))) == ["in1.shape=normalized"]
    assert keys(layer_norm((3, 4), axis=0)) == ["in1.shape=normalized"]
    assert keys(layer_norm((1, 4))) == ["in1.shape=broadcast"]
    assert keys(layer_norm((4,), axis=0)) == ["in1.shape=broadcast"]


@pytest.mark.skipif(not HAS_TVM, reason="apache-tvm is not installed (pip install apache-tvm)")
def test_tvm_declines_a_broadcast_layer_norm_scale_and_the_profile_learns_it(tmp_path: Path):
    """TVM 0.27 converts LayerNormalization to Relax's layer_norm, which takes a Scale of exactly the
    normalized shape; a broadcast Scale is declined, and the profile learns that form, not the operator."""
    from dlcfuzz.backends import load_backend

    variant = load_backend("tvm").variants()[0].name
    p = SupportProfile("tvm", "test")
    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        for scale, status in (((4,), ACCEPTED), ((1, 4), DECLINED)):
            g = layer_norm(scale)
            out = pool.run("tvm", Test(to_bytes(g), g.to_json(), synthesize(g, np.random.default_rng(0), 0)),
                           [variant])
            assert p.learn(g, out) == status, out[variant].message
    finally:
        pool.close()
    assert "in1.shape=broadcast" in p.declined_keys("LayerNormalization")
    assert p.admits_op("LayerNormalization") and p.admits(layer_norm((4,)).nodes[0], layer_norm((4,)).values)


def test_a_tests_cpu_beyond_the_compilers_is_charged_to_the_backend_it_was_made_for(tmp_path: Path):
    """A compiler that takes 50 ms of a test costing 300 ms of generation, baseline and oracle is charged
    300 ms: the allocation weighs what a test for it really costs the campaign."""
    from dlcfuzz.run.store import TestRecord

    cfg = CampaignConfig(tmp_path / "c", ["ort", "tvm"], [REGISTRY["Relu"]], budget_seconds=None, max_tests=1)
    c = Campaign(cfg)
    g = topk(1)
    g.meta["target"] = "tvm"
    outs = {b: {"v": Outcome(OK, outputs=[], seconds={"compile": 0.05})} for b in ("ort", "tvm")}
    record = TestRecord(0, 0, ["TopK"], "ort", True, 1, True, 0.3, 0.1, 0.0, 0.1, 0.1)  # 0.3 s, 0.1 s compilers
    c._learn(g, outs, [], record)
    assert c.allocator.arms["tvm"].seconds == pytest.approx(0.05 + 0.2)
    assert c.allocator.arms["ort"].seconds == pytest.approx(0.05)
    assert c.allocator.arms[("tvm", "v")].seconds == pytest.approx(0.05)  # variants: their own time
    c.store.close()
