"""Sequence and Optional patterns as composite operators (spec/sequence.py): each pattern's graphs are
valid ONNX at the opsets where its operators exist and are written as the pattern's chain; ONNX Runtime
and the reference evaluator agree on them (where the reference is trusted); TVM's ONNX frontend imports
them and agrees with ONNX Runtime, but for its known bugs, which are pinned here; the torch exporter (from
the IR and from the ONNX file, as repro scripts read it) and localization handle them; the support
profile blames a composite by the ONNX operator a decline names."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test
from dlcfuzz.backends.ort import full_profile, model_error
from dlcfuzz.backends.reference import distrusted
from dlcfuzz.export.onnx import to_bytes, to_onnx
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle.compare import compare
from dlcfuzz.oracle.localize import exposed
from dlcfuzz.solve.intervals import analyze
from dlcfuzz.spec import COMPOSITES, REGISTRY, expand, onnx_ops
from dlcfuzz.values import synthesize
from tests.helpers import SESSION_OPTIONS, ort_generator

HAS_TVM = importlib.util.find_spec("tvm") is not None
PATTERNS = sorted(op for op in COMPOSITES if REGISTRY[op].family == "sequence")  # If: test_control.py
OPSETS = (13, 15, 18, 23)


def opsets_of(op: str) -> list[int]:
    return [v for v in OPSETS if v >= REGISTRY[op].since]


def ort_run(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(to_bytes(g), SESSION_OPTIONS, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def feeds_of(g: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    return synthesize(g, np.random.default_rng(seed))


# -- building graphs by hand --------------------------------------------------------------------------------
def call(op: str, xs: list[TensorType | np.ndarray | None], out: TensorType, attrs: dict | None = None) -> Graph:
    """One call of ``op``: a TensorType is a runtime input, an array a constant, None an omitted input."""
    g = Graph(opset=18)
    names = []
    for k, x in enumerate(xs):
        if x is None:
            names.append("")
        elif isinstance(x, TensorType):
            names.append(g.add_value(Value(f"x{k}", x, INPUT_KIND)).name)
        else:
            names.append(g.add_value(Value(f"c{k}", TensorType(x.shape, x.dtype.name), CONST_KIND, x)).name)
    g.add_value(Value("y", out, NODE_KIND))
    g.add_node(Node(op, names, ["y"], attrs or {}, "n0"))
    g.outputs = ["y"]
    g.validate()
    return g


def split_pieces(node: Node, g: Graph) -> int:
    """How many pieces the SplitToSequence of a split pattern makes."""
    n = g.values[node.inputs[0]].type.shape[node.attrs["axis"]]
    split = g.values[node.inputs[1]].data if len(node.inputs) > 1 and node.inputs[1] else None
    if split is None:
        return n
    return -(-n // int(split)) if split.ndim == 0 else len(split)


# TVM 0.27's bugs on these patterns (docs/discrepancies.md); the agreement test leaves such calls out and
# test_tvm_sequence_bugs pins each
def tvm_bug(node: Node, g: Graph) -> str | None:
    if node.op.startswith("SplitToSequence+") and split_pieces(node, g) == 1:
        return "relax split into one section is a tensor, not a tuple (ConcatFromSequence then loops forever)"
    if node.op == "SplitToSequence+SequenceLength" and not (
            len(node.inputs) == 1 and node.attrs.get("keepdims") == 0):
        return "SequenceLength takes len() of SplitToSequence's relax Call"
    if node.op == "SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence" and node.inputs[1] and int(
            g.values[node.inputs[1]].data) < 0:
        return "SequenceInsert counts a negative position from n + 1 (-1 appends)"
    return None


# -- generation ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", PATTERNS)
def test_each_pattern_is_valid_at_its_opsets_and_written_as_its_chain(op: str) -> None:
    """The ONNX checker (full), strict shape inference and a run on ORT accept every graph, with the types
    the spec declares; the model holds the pattern's chain of ONNX operators, whose inner values are not
    graph values, and the spec's checks hold."""
    spec = REGISTRY[op]
    assert op == "+".join(COMPOSITES[op].ops) and onnx_ops(op) == COMPOSITES[op].ops
    for opset in opsets_of(op):
        gen = ort_generator([spec], opset=opset, runtime_consts=0.5, constant_nodes=0.5)
        for seed in range(10):
            g = gen.generate(seed)
            [node] = g.nodes
            assert model_error(g, seed=seed) is None, (opset, seed, model_error(g, seed=seed))
            for name, check in spec.checks.items():
                assert check(gen.last_ctx), f"{op}: {name} fails for {node.attrs}"
            chain = [n for n in to_onnx(g).graph.node if n.op_type != "Constant"]
            assert [n.op_type for n in chain] == list(COMPOSITES[op].ops)
            assert list(chain[-1].output) == node.outputs
            inner = {o for n in chain[:-1] for o in n.output}
            assert not inner & set(g.values) and {x for n in chain for x in n.input if x} - inner <= set(node.inputs)
        assert gen.stats.retries == 0, gen.stats


def test_patterns_exist_from_the_opset_of_their_operators() -> None:
    """Optional-15 is the first Optional: its patterns are left out before; sequences exist at every opset."""
    for opset in (13, 14):
        gen = ort_generator(list(REGISTRY.values()), opset=opset)
        assert {"Optional+OptionalGetElement", "Optional+OptionalHasElement"} <= set(gen.unavailable)
        assert not {op for op in PATTERNS if op.startswith("Sequence") or op.startswith("Split")} & set(gen.unavailable)


def test_ort_profile_is_the_kernels_of_the_whole_chain() -> None:
    """A pattern's dtypes are those every operator of its chain has an ORT kernel for: ORT's SplitToSequence
    takes 6 element types (no int8, no unsigned), the sequence operators 12."""
    prof = full_profile(17, tuple(REGISTRY))
    split = {"bool", "float16", "float32", "float64", "int32", "int64"}
    assert prof[("SplitToSequence+ConcatFromSequence", "T")] == split
    assert prof[("SequenceConstruct+SequenceAt", "T")] >= split | {"int8", "uint8", "uint64"}
    assert prof[("Optional+OptionalGetElement", "T")] >= split
    assert full_profile(13, tuple(REGISTRY))[("Optional+OptionalGetElement", "T")] == frozenset()  # before Optional


def test_intervals_see_through_the_patterns() -> None:
    """The tensors a pattern moves keep their intervals (so that later calls may read them); lengths and
    has-element are exact."""
    x = TensorType((4, 3), "float32")
    g = call("SplitToSequence+ConcatFromSequence", [x, np.array(2, np.int64)], TensorType((4, 3), "float32"),
             {"axis": 0, "concat_axis": 1, "new_axis": 0})
    assert analyze(g, {"x0": (-2.0, 3.0)})["y"] == (-2.0, 3.0)
    g = call("SequenceConstruct+SequenceLength", [x, x, x], TensorType((), "int64"))
    assert analyze(g)["y"] == (3.0, 3.0)
    g = call("Optional+OptionalHasElement", [x], TensorType((), "bool"))
    assert analyze(g)["y"] == (1.0, 1.0)


def by_hand(node: Node, values: dict[str, np.ndarray]) -> np.ndarray:
    """What a pattern computes, written from its name and attributes with numpy and Python lists (not from
    its expansion): ONNX's semantics, list.insert / list.pop positions included."""
    op, a = node.op, node.attrs

    def x(i: int) -> np.ndarray | None:
        return values[node.inputs[i]] if i < len(node.inputs) and node.inputs[i] else None

    def concat(seq: list[np.ndarray]) -> np.ndarray:
        return np.stack(seq, a["concat_axis"]) if a.get("new_axis") else np.concatenate(seq, a["concat_axis"])

    if op.startswith("SplitToSequence+"):
        data, split = x(0), x(1)
        axis = a["axis"] % data.ndim
        n = data.shape[axis]
        if split is None:
            lengths = [1] * n
        elif split.ndim == 0:
            lengths = [int(split)] * (n // int(split)) + ([n % int(split)] if n % int(split) else [])
        else:
            lengths = [int(v) for v in split]
        pieces = np.split(data, np.cumsum(lengths)[:-1], axis)
        if split is None and a.get("keepdims", 1) == 0:
            pieces = [p.squeeze(axis) for p in pieces]
        return np.array(len(pieces), np.int64) if op.endswith("SequenceLength") else concat(pieces)
    if op == "SequenceConstruct+SequenceAt":
        return [values[i] for i in node.inputs[:-1]][int(x(len(node.inputs) - 1))]
    if op == "SequenceConstruct+SequenceLength":
        return np.array(len(node.inputs), np.int64)
    if op == "SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence":
        seq = [values[i] for i in node.inputs[3:]]
        seq.insert(len(seq) if x(1) is None else int(x(1)), x(0))
        seq.pop(-1 if x(2) is None else int(x(2)))
        return concat(seq)
    if op == "Optional+OptionalHasElement":
        return np.array(True)
    assert op in ("SequenceEmpty+SequenceInsert+SequenceAt", "Optional+OptionalGetElement"), op
    return x(0)


@pytest.mark.parametrize("op", PATTERNS)
def test_each_pattern_computes_what_its_name_says(op: str) -> None:
    """ORT's outputs of the exported chain are the pattern's meaning computed by hand (so that the expansion
    puts every position, split and axis where it belongs)."""
    for opset in opsets_of(op)[::2]:
        gen = ort_generator([REGISTRY[op]], opset=opset, runtime_consts=0.3)
        for seed in range(25):
            g = gen.generate(seed)
            feeds = feeds_of(g, seed)
            values = {**{v.name: v.data for v in g.values.values() if v.data is not None}, **feeds}
            want = by_hand(g.nodes[0], values)
            [got] = ort_run(g, feeds)
            assert got.dtype == want.dtype and got.shape == want.shape, (seed, g.nodes[0].attrs)
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed} {g.nodes[0].attrs}")


# -- baselines ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", PATTERNS)
def test_ort_and_the_reference_agree(op: str) -> None:
    """Where the reference is trusted, ORT (no optimizations) and the reference evaluator give the same
    outputs; where a rule distrusts it, it is really wrong (different outputs or an error)."""
    from onnx.reference import ReferenceEvaluator

    agreed = distrusted_wrong = 0
    for opset in opsets_of(op):
        gen = ort_generator([REGISTRY[op]], opset=opset, runtime_consts=0.25)
        for seed in range(8):
            g = gen.generate(seed)
            feeds = feeds_of(g, seed)
            expected = ort_run(g, feeds)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    got = [np.asarray(o) for o in ReferenceEvaluator(to_onnx(g)).run(None, feeds)]
                except Exception:  # the reference's own failure
                    got = None
            if distrusted(g.nodes[0], g) is None:
                assert got is not None and compare(expected, got) is None, (opset, seed, g.nodes[0].attrs)
                agreed += 1
            else:
                distrusted_wrong += got is None or compare(expected, got) is not None
    assert agreed >= 8 or op == "Optional+OptionalGetElement"
    if op == "Optional+OptionalGetElement":
        assert distrusted_wrong >= 8  # every one: the reference's Optional is a list


# -- TVM -------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not HAS_TVM, reason="tvm is not installed")
@pytest.mark.parametrize("op", PATTERNS)
def test_tvm_imports_the_patterns_and_agrees_with_ort(op: str) -> None:
    """TVM's converters of the chain's operators import each pattern (constant positions and splits: runtime
    ones are declines, the profile's business) and the compiled model gives ORT's outputs."""
    be = load_backend("tvm")
    variant = be.variants()[0]
    checked = 0
    for opset in opsets_of(op)[-2:]:
        gen = ort_generator([REGISTRY[op]], opset=opset, runtime_consts=0)
        for seed in range(80):
            g = gen.generate(seed)
            if tvm_bug(g.nodes[0], g):
                continue
            feeds = feeds_of(g, seed)
            got = be.run(be.compile(be.load(Test(to_bytes(g), g.to_json(), feeds)), variant), feeds)
            assert compare(ort_run(g, feeds), got) is None, (opset, seed, g.nodes[0].attrs)
            checked += 1
            if checked % 3 == 0:
                break
    assert checked >= 3


@pytest.mark.skipif(not HAS_TVM, reason="tvm is not installed")
def test_tvm_sequence_bugs(tmp_path: Path) -> None:
    """TVM 0.27's bugs the patterns meet, each on its smallest call (so that a TVM that fixes one says so):
    SequenceLength of a SplitToSequence, SequenceInsert at a negative position, and a SplitToSequence of one
    piece, which ConcatFromSequence iterates forever (in a worker: the import times out)."""
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    be = load_backend("tvm")
    variant = be.variants()[0]
    x = TensorType((4, 3), "float32")
    g = call("SplitToSequence+SequenceLength", [x, np.array(2, np.int64)], TensorType((), "int64"), {"axis": 0})
    assert tvm_bug(g.nodes[0], g)
    with pytest.raises(Exception, match="object of type 'Call' has no len"):
        be.load(Test(to_bytes(g), g.to_json(), feeds_of(g)))

    g = call("SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence",
             [TensorType((1, 3), "float32"), np.array(-1, np.int64), np.array(0, np.int64), x, x],
             TensorType((5, 3), "float32"), {"concat_axis": 0})
    assert tvm_bug(g.nodes[0], g) and model_error(g) is None
    feeds = feeds_of(g)
    got = be.run(be.compile(be.load(Test(to_bytes(g), g.to_json(), feeds)), variant), feeds)[0]
    want = ort_run(g, feeds)[0]
    # [a, b] with t inserted at -1: ONNX (Python's list.insert) [a, t, b], TVM [a, b, t]; the first erased
    t, b = feeds["x0"], feeds["x4"]
    np.testing.assert_array_equal(want, np.concatenate([t, b]))
    np.testing.assert_array_equal(got, np.concatenate([b, t]))

    g = call("SplitToSequence+ConcatFromSequence", [TensorType((1, 3), "float32")], TensorType((1, 3), "float32"),
             {"axis": 0, "concat_axis": 1})
    assert tvm_bug(g.nodes[0], g) and model_error(g) is None
    pool = WorkerPool(PhaseLimits(import_=8, memory_mb=3000), log_dir=tmp_path)
    try:
        o = pool.run("tvm", Test(to_bytes(g), g.to_json(), feeds_of(g)), [variant.name])[variant.name]
    finally:
        pool.close()
    assert o.phase == "import" and o.status in ("timeout", "oom"), (o.status, o.message)


@pytest.mark.skipif(not HAS_TVM, reason="tvm is not installed")
def test_a_decline_naming_a_chain_operator_blames_the_pattern(tmp_path: Path) -> None:
    """TVM declines a runtime position ("Position must be a constant.", while converting onnx.SequenceErase):
    the profile blames the pattern whose chain holds SequenceErase, by the runtime input's key, though no
    node of the graph is called SequenceErase."""
    from dlcfuzz.run.profile import ACCEPTED, DECLINED, SupportProfile
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    x = TensorType((2, 3), "float32")

    def graph(kind: str) -> Graph:
        g = call("SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence",
                 [x, None, np.array(0, np.int64), x, x], TensorType((4, 3), "float32"), {"concat_axis": 0})
        g.values["c2"].kind = kind  # the erase position: a constant, or pinned at run time
        g.values["x0"] = Value("x0", x, NODE_KIND)  # made by a Relu: two suspects
        g.add_value(Value("r", x, INPUT_KIND))
        g.nodes.insert(0, Node("Relu", ["r"], ["x0"], {}, "n_relu"))
        g.validate()
        assert model_error(g) is None
        return g

    pool = WorkerPool(PhaseLimits(), log_dir=tmp_path)
    try:
        version = pool.describe("tvm")[0]
        runs = {kind: pool.run("tvm", Test(to_bytes(graph(kind)), graph(kind).to_json(), feeds_of(graph(kind))),
                               ["unfused-generic"]) for kind in (CONST_KIND, INPUT_KIND)}
    finally:
        pool.close()
    assert "while converting onnx.SequenceErase" in runs[INPUT_KIND]["unfused-generic"].traceback
    profile = SupportProfile("tvm", version)
    assert profile.learn(graph(CONST_KIND), runs[CONST_KIND]) == ACCEPTED
    assert profile.learn(graph(INPUT_KIND), runs[INPUT_KIND]) == DECLINED
    op = "SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence"
    assert profile.declined_keys(op) == ["in2=runtime"] and profile.declined_keys("Relu") == []


# -- other compilers and dlcfuzz's own readers -------------------------------------------------------------
@pytest.mark.parametrize("op", PATTERNS)
def test_torch_exporter_runs_the_chain(op: str) -> None:
    """The torch model of a pattern (sequences as lists) gives ORT's outputs, built from the graph as the
    Inductor backend builds it and from the ONNX file as its repro script does."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from dlcfuzz.export.torch import build_namespace, module_source, onnx_parts, ops_source, to_torch, unsupported

    gen = ort_generator([REGISTRY[op], REGISTRY["Add"]], op_range=(2, 3), opset=opsets_of(op)[-1],
                        dtypes=("float32", "int64", "bool"), runtime_consts=0.3, constant_nodes=0.5)
    for seed in range(4):
        g = gen.generate(seed)
        assert unsupported(g) is None
        feeds = feeds_of(g, seed)
        args = [torch.from_numpy(np.array(feeds[v.name])) for v in g.inputs]
        want = ort_run(g, feeds)
        ours = [o.numpy() for o in to_torch(g)(*args)]
        namespace = build_namespace(ops_source() + "\n\n" + module_source(*onnx_parts(to_onnx(g), feeds)))
        theirs = [o.numpy() for o in namespace["Model"]()(*args)]
        assert compare(want, ours) is None and compare(want, theirs) is None, (seed, [n.attrs for n in g.nodes])


def test_inductor_takes_the_patterns() -> None:
    """Campaigns keep the specs some backend supports: Inductor supports a pattern by its chain's operators."""
    from dlcfuzz.backends.inductor import InductorBackend

    assert all(InductorBackend().supports({op}) for op in PATTERNS)
    assert not InductorBackend().supports({"NoSuchOp"})


def test_localization_exposes_ir_values_only() -> None:
    """Localization makes every IR value an output: the chains' inner sequences stay inside, and the exposed
    model is valid and runs (ORT gives the same outputs as the graph's, plus the intermediates)."""
    ops = [REGISTRY[o] for o in ("SequenceConstruct+SequenceAt", "SplitToSequence+ConcatFromSequence", "Relu",
                                 "Optional+OptionalGetElement")]
    gen = ort_generator(ops, op_range=(5, 6), opset=18, dtypes=("float32",))
    graphs = (gen.generate(seed) for seed in range(20))
    g = next(g for g in graphs if len({n.op for n in g.nodes} - {"Relu"}) >= 2)
    e = exposed(g)
    assert set(e.outputs) == {o for n in g.nodes for o in n.outputs}
    assert model_error(e) is None
    feeds = feeds_of(g)
    full = dict(zip(e.outputs, ort_run(e, feeds), strict=True))
    for name, a in zip(g.outputs, ort_run(g, feeds), strict=True):
        np.testing.assert_array_equal(full[name], a)


def test_expansion_is_one_place_and_names_inner_values_after_the_node() -> None:
    """``spec.expand`` writes a plain node as itself and a pattern as its chain, inner values named after the
    node's output (unique in the model), nodes after the node's name."""
    plain = Node("Relu", ["a"], ["b"], {}, "n3")
    assert expand(plain) == [plain]
    node = Node("SequenceEmpty+SequenceInsert+SequenceAt", ["t", "", "p"], ["v9"], {"dtype": 7}, "n4")
    chain = expand(node)
    assert [(n.op, n.inputs, n.outputs, n.attrs, n.name) for n in chain] == [
        ("SequenceEmpty", [], ["v9.0"], {"dtype": 7}, "n4.0"),
        ("SequenceInsert", ["v9.0", "t"], ["v9.1"], {}, "n4.1"),
        ("SequenceAt", ["v9.1", "p"], ["v9"], {}, "n4.2")]
    assert all(onnx.defs.has(n.op) for n in chain)
