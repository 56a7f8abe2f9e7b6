"""Test-case reduction on real bundles of real (tiny) campaigns, with bugs planted in test backends."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends.base import Variant
from dlcfuzz.ir import INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.run.reduce import (
    Case,
    ReduceError,
    _subgraph,
    finding_from_dict,
    reduce_bundle,
    reduce_case,
    retype,
)
from dlcfuzz.run.store import Store
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.spec import REGISTRY
from tests.fake_backends import PlantedPattern, sigmoid_feeds_mul
from tests.helpers import ort_generator

PATTERN_OPS = ["Add", "Sub", "Mul", "Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Transpose", "ReduceMean", "MatMul",
               "Concat", "Where", "Greater", "Exp"]


class _Fixed:
    """A generator that always returns one graph."""

    def __init__(self, g: Graph) -> None:
        self.g = g

    def generate(self, seed: int) -> Graph:
        return copy.deepcopy(self.g)


def _bundle(out: Path, g: Graph, backend: str, **kw) -> Path:
    """Runs a one-test campaign on ``g`` and returns the bundle of its (single) bug."""
    # untargeted: the campaign's one generator is the fixed one
    cfg = CampaignConfig(out, [backend], [REGISTRY["Relu"]], budget_seconds=120, max_tests=1, targeted=False,
                         **kw)
    c = Campaign(cfg)
    c.gen = _Fixed(g)
    c.run()
    bugs = sorted((out / "bugs").iterdir())
    assert len(bugs) == 1, [json.loads((b / "finding.json").read_text())["title"] for b in bugs]
    return bugs[0]


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _pattern_edges(g: Graph) -> int:
    prod = {o: n for n in g.nodes for o in n.outputs}
    return sum(1 for n in g.nodes if n.op == "Mul" for x in set(n.inputs) if x in prod and prod[x].op == "Sigmoid")


@pytest.fixture(scope="module")
def pattern_graph() -> Graph:
    """A valid generated 30-operator float64 graph in which exactly one Sigmoid feeds a Mul (among
    other Sigmoids and Muls)."""
    gen = ort_generator([REGISTRY[o] for o in PATTERN_OPS], op_range=(30, 30), dtypes=("float64", "bool"))
    g = next(g for seed in range(200) if _pattern_edges(g := gen.generate(seed)) == 1
             and sum(n.op == "Sigmoid" for n in g.nodes) > 1)
    assert len(g.nodes) == 30
    return g


@pytest.fixture(scope="module")
def pattern_bundle(pattern_graph: Graph, tmp_path_factory) -> Path:
    """The bundle of PlantedPattern's compile exception on ``pattern_graph``."""
    return _bundle(tmp_path_factory.mktemp("pattern"), pattern_graph, "tests.fake_backends:PlantedPattern")


def test_planted_pattern_reduces_to_the_two_operators(pattern_bundle: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bug"
    shutil.copytree(pattern_bundle, folder)
    before = _hashes(folder)
    lines: list[str] = []
    result = reduce_bundle(folder, budget_seconds=120, progress=lines.append)

    g = result.graph
    assert sorted(n.op for n in g.nodes) == ["Mul", "Sigmoid"]
    sig, mul = sorted(g.nodes, key=lambda n: n.op != "Sigmoid")
    assert sig.outputs[0] in mul.inputs
    report = json.loads((folder / "reduction.json").read_text())
    assert (report["ops_before"], report["ops_after"]) == (30, 2)
    assert report["signature"] == json.loads((folder / "finding.json").read_text())["signature"]
    assert report["reproduced"] is True and report["first_diverging"] is None
    assert report["inputs_after"] <= report["inputs_before"]
    assert report["elements_after"] < report["elements_before"]  # shapes shrank too
    assert {v.type.dtype for v in g.values.values()} == {"float32"}  # and float64 became float32
    assert report["stages"]["dtypes"] == 1
    assert lines and report["candidates_tried"] > 0
    assert 0 < report["compiler_seconds"] < report["seconds"]  # the compiler's part, metered apart
    # the originals are untouched (report.md now describes the reduced case); the reduced case sits beside them
    after = _hashes(folder)
    assert {k: v for k, v in after.items() if k in before and k != "report.md"} == {
        k: v for k, v in before.items() if k != "report.md"}
    assert "Reduced automatically from 30 to 2 operators" in (folder / "report.md").read_text()
    assert set(after) - set(before) == {"reduction.json", *(f"reduced/{n}" for n in (
        "model.onnx", "graph.json", "inputs.npz", "repro.py"))}
    model = (folder / "reduced" / "model.onnx").read_bytes()
    assert sigmoid_feeds_mul(model)
    with pytest.raises(RuntimeError, match="planted: SigmoidMulFusion"):
        PlantedPattern().compile(model, Variant("all", {"level": "ORT_ENABLE_ALL"}))
    assert Graph.from_json((folder / "reduced" / "graph.json").read_text()) == g
    with np.load(folder / "reduced" / "inputs.npz") as f:
        assert sorted(f.files) == sorted(v.name for v in g.inputs)
    run = subprocess.run([sys.executable, str(folder / "reduced" / "repro.py")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr


def test_reduce_case_on_a_campaign_pool(pattern_bundle: Path) -> None:
    """The campaign's entry point: an in-memory case, the campaign's worker pool, no re-verification."""
    info = json.loads((pattern_bundle / "finding.json").read_text())
    graph = Graph.from_json((pattern_bundle / "graph.json").read_text())
    with np.load(pattern_bundle / "inputs.npz") as f:
        inputs = {k: f[k] for k in f.files}
    pool = WorkerPool(PhaseLimits())
    try:
        result = reduce_case(Case(graph, inputs, finding_from_dict(info), info["signature"]), 60, pool, verify=False)
        assert pool.idle  # the pool's workers stay up for the campaign
    finally:
        pool.close()
    assert sorted(result.nodes_after) == ["Mul", "Sigmoid"] and result.reproduced
    assert Graph.from_json((pattern_bundle / "graph.json").read_text()) == graph  # the case is not modified


def test_a_bug_that_no_longer_reproduces_leaves_the_bundle_untouched(pattern_bundle: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bug"
    shutil.copytree(pattern_bundle, folder)
    info = json.loads((folder / "finding.json").read_text())
    info["signature"] = "0123456789abcdef"  # the backend's behaviour no longer gives this signature
    (folder / "finding.json").write_text(json.dumps(info, indent=1))
    before = _hashes(folder)
    with pytest.raises(ReduceError, match=r"^bug 0123456789abcdef no longer reproduces: ") as e:
        reduce_bundle(folder, budget_seconds=30)
    assert "\n" not in str(e.value)
    assert _hashes(folder) == before


def test_a_flaky_reduction_falls_back_to_a_candidate_that_reproduces_again(
        pattern_graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bug stops showing on 2-node models just before the final confirmation (FlakyPattern):
    the smallest earlier candidate that reproduces again is the result."""
    switch = tmp_path / "switch"
    monkeypatch.setenv("DLCFUZZ_TEST_SWITCH", str(switch))  # workers inherit it
    folder = _bundle(tmp_path / "c", pattern_graph, "tests.fake_backends:FlakyPattern")

    def progress(msg: str) -> None:
        if msg.startswith("confirming"):
            switch.touch()

    result = reduce_bundle(folder, budget_seconds=120, progress=progress)
    assert result.reproduced and 2 < result.ops_after < 30
    assert sigmoid_feeds_mul((folder / "reduced" / "model.onnx").read_bytes())
    assert json.loads((folder / "reduction.json").read_text())["ops_after"] == result.ops_after


def test_not_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(ReduceError, match=r"is not a bug bundle \(no finding.json\)$"):
        reduce_bundle(tmp_path)
    with pytest.raises(ReduceError, match="is not a bug bundle"):
        reduce_bundle(tmp_path / "missing")


def _tanh_graph() -> Graph:
    """Ten elementwise operators; the Tanh's output reaches the first graph output through one Mul."""
    g = Graph(meta={"seed": 0})
    t = TensorType((2, 3, 4), "float32")
    for x in ("x", "y"):
        g.add_value(Value(x, t, INPUT_KIND))
    calls = [("Abs", ["x"], "a"), ("Neg", ["y"], "b"), ("Add", ["a", "b"], "c"), ("Tanh", ["c"], "t"),
             ("Mul", ["t", "a"], "d"), ("Relu", ["b"], "e"), ("Sub", ["e", "c"], "f"), ("Sigmoid", ["f"], "s"),
             ("Add", ["s", "a"], "h"), ("Abs", ["h"], "k")]
    for i, (op, ins, out) in enumerate(calls):
        g.add_value(Value(out, t, NODE_KIND))
        g.add_node(Node(op, ins, [out], {}, f"n{i}"))
    g.set_leaf_outputs()
    return g


def test_planted_value_bug_and_first_diverging_operator(tmp_path: Path) -> None:
    folder = _bundle(tmp_path / "c", _tanh_graph(), "tests.fake_backends:PlantedTanh")
    assert json.loads((folder / "finding.json").read_text())["oracle"] == "differential"
    result = reduce_bundle(folder, budget_seconds=120)
    ops = [n.op for n in result.graph.nodes]
    assert 1 <= len(ops) <= 2 and "Tanh" in ops
    tanh = next(n for n in result.graph.nodes if n.op == "Tanh")
    report = json.loads((folder / "reduction.json").read_text())
    assert (report["ops_before"], report["ops_after"]) == (10, len(ops))
    assert report["first_diverging"]["op"] == "Tanh"
    assert report["first_diverging"]["node"] == tanh.name == "n3"
    assert report["reproduced"] is True
    with np.load(folder / "reduced" / "expected.npz") as f:  # the reference's outputs of the reduced case
        assert len(f.files) == len(result.graph.outputs)
    run = subprocess.run([sys.executable, str(folder / "reduced" / "repro.py")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1 and "reproduced" in run.stdout, run.stdout + run.stderr


def test_the_located_operator_is_tried_alone_first(tmp_path: Path) -> None:
    """The first diverging operator the campaign located is tried alone before any halving: one
    candidate, where halving the nodes above it took a kept step and a refused one per halving."""
    folder = _bundle(tmp_path / "c", _tanh_graph(), "tests.fake_backends:PlantedTanh")
    result = reduce_bundle(folder, budget_seconds=120)
    assert [n.op for n in result.graph.nodes] == ["Tanh"]
    report = json.loads((folder / "reduction.json").read_text())
    assert report["stages"].get("suspect") == 1 and "nodes" not in report["stages"]


def test_disruptive_finding_keeps_the_violating_node(tmp_path: Path) -> None:
    """An invalid-on-purpose model accepted with garbage (Lenient): the reduced case still holds the
    node that breaks the constraint, and only the signature is required."""
    gen_cfg = {"strategy": "disruptive", "ops": (6, 6), "seed": 3}
    cfg = CampaignConfig(tmp_path / "c", ["tests.fake_backends:Lenient"], [REGISTRY[o] for o in PATTERN_OPS],
                         budget_seconds=120, max_tests=1, **gen_cfg)
    Campaign(cfg).run()
    folder = sorted((tmp_path / "c" / "bugs").iterdir())[0]
    original = Graph.from_json((folder / "graph.json").read_text())
    violation = original.meta["violation"]
    result = reduce_bundle(folder, budget_seconds=60)
    assert violation["node"] in [n.name for n in result.graph.nodes]
    assert result.graph.meta["violation"] == violation
    assert result.ops_after < result.ops_before and result.reproduced


def test_reduction_keeps_a_pinned_runtime_input(tmp_path: Path) -> None:
    """A bug of a dynamic-shape path (a Reshape that reads its shape at run time) reduces to that Reshape,
    whose pinned shape input keeps its value and is fed exactly that, even where the bundle's inputs file
    says otherwise (hand-edited, or stale)."""
    gen = ort_generator([REGISTRY[o] for o in [*PATTERN_OPS, "Reshape"]], op_range=(10, 10), runtime_consts=1.0,
                        dtypes=("float32", "bool"))
    graphs = (gen.generate(seed) for seed in range(200))
    g = next(g for g in graphs if [n.op for n in g.nodes].count("Reshape") == 1 and g.nodes[-1].op != "Reshape")
    shape = g.values[next(n for n in g.nodes if n.op == "Reshape").inputs[1]]
    assert shape.pinned
    folder = _bundle(tmp_path / "c", g, "tests.fake_backends:PlantedRuntimeShape")
    with np.load(folder / "inputs.npz") as f:
        inputs = {k: f[k] for k in f.files}
    np.testing.assert_array_equal(inputs[shape.name], shape.data)  # the campaign fed the pinned value
    inputs[shape.name] = np.full_like(shape.data, 7)
    np.savez(folder / "inputs.npz", **inputs)

    result = reduce_bundle(folder, budget_seconds=60)
    assert [n.op for n in result.graph.nodes] == ["Reshape"] and result.reproduced
    kept = result.graph.values[shape.name]
    assert kept.pinned and kept.type == shape.type
    np.testing.assert_array_equal(kept.data, shape.data)
    np.testing.assert_array_equal(result.inputs[shape.name], shape.data)
    with np.load(folder / "reduced" / "inputs.npz") as f:
        np.testing.assert_array_equal(f[shape.name], shape.data)


# -- graph surgery, without compilers ---------------------------------------------------------------
def test_removed_nodes_become_inputs_with_their_values() -> None:
    g = _tanh_graph()
    inter = {"c": np.full((2, 3, 4), 0.5, np.float32), "a": np.ones((2, 3, 4), np.float32)}
    feeds = {"x": np.zeros((2, 3, 4), np.float32), "y": np.zeros((2, 3, 4), np.float32)}
    h, hf = _subgraph(g, [3, 4], feeds, inter, np.random.default_rng(0))
    assert [n.op for n in h.nodes] == ["Tanh", "Mul"] and h.outputs == ["d"]
    assert sorted(v.name for v in h.inputs) == ["a", "c"]
    assert h.values["c"].hint == {"min": 0.5, "max": 0.5}
    np.testing.assert_array_equal(hf["c"], inter["c"])
    h.validate()


def test_retype_follows_shrunk_inputs_and_rejects_bad_ones() -> None:
    g = _tanh_graph()
    for name in ("x", "y"):
        g.values[name].type = TensorType((1, 3, 2), "float32")
    h = retype(g)
    assert h is not None and all(v.type.shape == (1, 3, 2) for v in h.values.values())
    g.values["y"].type = TensorType((1, 3, 3), "float32")  # no longer broadcasts with x in Add
    assert retype(g) is None


def test_a_candidate_its_spec_rejects_never_reaches_onnx_inference() -> None:
    """The attribute stage tried Split-18 with num_outputs 1 on a two-output Split: ONNX's C++ shape
    inference (data propagation, onnx 1.23) aborted the whole campaign process on it.  The spec's check
    rejects the candidate first.  Run in a child process: on broken code it is the child that dies."""
    code = """
from dlcfuzz.ir import INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.run.reduce import retype
g = Graph(opset=19)
g.add_value(Value("x", TensorType((1, 3, 1), "float64"), INPUT_KIND))
for name in ("a", "b"):
    g.add_value(Value(name, TensorType((1, 3, 1), "float64"), NODE_KIND))
g.add_node(Node("Split", ["x"], ["a", "b"], {"axis": -2, "num_outputs": 1}, "n0"))
g.outputs = ["a"]
print(retype(g))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "None", (run.returncode, run.stdout, run.stderr[-500:])


def _apart_graph(first: str) -> Graph:
    """``first`` on x and a Tanh on y: two parts that share no value, ``first``'s output listed first."""
    g = Graph(meta={"seed": 0})
    t = TensorType((2, 3), "float32")
    for x in ("x", "y", "a", "b"):
        g.add_value(Value(x, t, INPUT_KIND if x in "xy" else NODE_KIND))
    g.add_node(Node("Tanh", ["y"], ["b"], {}, "n0"))
    g.add_node(Node(first, ["x"], ["a"], {}, "n1"))  # the first in topological order (Graph.toposort)
    g.outputs = ["a", "b"]
    return g


def test_a_divergence_that_belongs_to_another_part_is_signed_there(tmp_path: Path) -> None:
    """EmptiesAll empties every output when a Tanh is present: the campaign sees a shape mismatch at
    the Neg, which is correct alone; the Tanh part diverges alone and becomes the case."""
    folder = _bundle(tmp_path / "c", _apart_graph("Neg"), "tests.fake_backends:EmptiesAll")
    found = json.loads((folder / "finding.json").read_text())
    assert "Neg" in found["title"]
    result = reduce_bundle(folder, budget_seconds=120)
    assert [n.op for n in result.graph.nodes] == ["Tanh"]
    assert result.signed_as and result.signed_as != found["signature"]
    assert result.first_diverging["op"] == "Tanh" and "Tanh" in result.title and "Neg" not in result.title
    report = json.loads((folder / "reduction.json").read_text())
    assert report["signed_as"] == result.signed_as and report["reproduced"] is True


def test_a_divergence_that_needs_another_part_is_signed_by_it(tmp_path: Path) -> None:
    """EmptiesBeside: the Tanh is right alone and so is the Neg, yet beside the Tanh the Neg's output
    comes back empty: the bug is signed by the Tanh, whichever operator shows it."""
    sigs = []
    for first in ("Neg", "Abs"):
        folder = _bundle(tmp_path / first, _apart_graph(first), "tests.fake_backends:EmptiesBeside")
        result = reduce_bundle(folder, budget_seconds=120)
        assert sorted(n.op for n in result.graph.nodes) == sorted([first, "Tanh"])
        assert "only beside Tanh" in result.title and result.reproduced
        sigs.append(result.signed_as)
    assert sigs[0] and sigs[0] == sigs[1]


def test_the_trigger_analysis_names_no_root_for_a_bystander_of_another_part() -> None:
    """EmptiesBeside: the Neg's output comes back empty only beside the Tanh, and an Identity in the Neg's
    place comes back empty too: the Neg is a bystander, and the analysis names no root by it (the
    signature, keyed on the Tanh, stands).  Where the Identity came back right, the shown operator would
    be needed and name the root (test_trigger_forms: OpenVINO's If)."""
    from dlcfuzz.oracle.triggers import BESIDE
    from dlcfuzz.run.dedup import analyze_triggers, graph_signature
    from tests.test_triggers import found

    g = _apart_graph("Neg")
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((2, 3)).astype(np.float32) for x in ("x", "y")}
    pool = WorkerPool(PhaseLimits())
    try:
        f = found(pool, g, feeds, ("tests.fake_backends:EmptiesBeside", "all"))
        a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
    finally:
        pool.close()
    assert [(t["cause"], t["result"]) for t in a.tried if t["kind"] == BESIDE] == [
        ("the part it shows in, alone", "vanished"), ("Neg replaced by an Identity", "shows")], a.summary()
    assert not a.root, a.summary()


class _Alternating:
    def __init__(self, graphs: list[Graph]) -> None:
        self.graphs = graphs

    def generate(self, seed: int) -> Graph:
        return copy.deepcopy(self.graphs[seed % len(self.graphs)])


def test_a_campaign_lists_bystanders_of_one_part_once(tmp_path: Path) -> None:
    """Two tests whose divergence shows at a Neg and at an Abs, both made by the Tanh beside them:
    one bug listed, under the Tanh; the other merged into it."""
    cfg = CampaignConfig(tmp_path / "c", ["tests.fake_backends:EmptiesAll"], [REGISTRY["Relu"]], budget_seconds=240,
                         max_tests=2, targeted=False, reduce_seconds=60)
    c = Campaign(cfg)
    c.gen = _Alternating([_apart_graph("Neg"), _apart_graph("Abs")])
    c.run()
    store = Store(tmp_path / "c")
    try:
        listed, merged = store.bugs(), store.bugs(merged=True)
    finally:
        store.close()
    assert len(listed) == 1 and len(merged) == 1, [b["title"] for b in listed]
    assert "Tanh" in listed[0]["title"] and "Neg" not in listed[0]["title"]


def test_a_reduced_case_the_other_compilers_agree_on_is_the_baselines(tmp_path: Path) -> None:
    """Two compilers with the same wrong Tanh, one of which cannot take a graph with a Sigmoid: the whole
    test has no vote, so the campaign lists the bug; its reduced case (the Tanh) is put to every compiler,
    which agree against the baseline: the bug moves to the baseline issues."""
    backends = ["tests.fake_backends:PlantedTanh", "tests.fake_backends:PlantedTanhNoSigmoid"]
    cfg = CampaignConfig(tmp_path / "c", backends, [REGISTRY["Relu"]], budget_seconds=240, max_tests=1, targeted=False,
                         allocate=False, reduce_seconds=60)
    c = Campaign(cfg)
    c.gen = _Fixed(_tanh_graph())
    c.run()
    store = Store(tmp_path / "c")
    try:
        found = [b["backend"] for b in store.bugs("compiler")] + [b["backend"] for b in store.bugs("baseline")]
        baseline = store.bugs("baseline")
    finally:
        store.close()
    assert found == ["tests.fake_backends:PlantedTanh"]
    assert [b["backend"] for b in baseline] == ["tests.fake_backends:PlantedTanh"]
