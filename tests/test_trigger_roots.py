"""Roots of one cause across signatures (issue 29), on the real compilers: a metamorphic bug's trial shows
it (oracle/triggers.py), TVM's optimizing pipeline is a crash's trigger, a declined variation hides no
crash, IREE's pooling lowering is one root for MaxPool and AveragePool, and OpenVINO's sequence outputs
are one root whichever sequence idiom and consumer (run/dedup.py)."""

from __future__ import annotations

import numpy as np

from dlcfuzz.backends.base import Test, Variant
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle import Finding, criteria_for, judge, run_baseline, run_confirmed
from dlcfuzz.oracle.triggers import OPSET, PIPELINE, Analysis, swallowed_root, twin
from dlcfuzz.run.dedup import analyze_triggers, crash_upstream_root, graph_signature, reduced_first, reduced_root
from tests.test_triggers import need, one_node


def findings(pool, g: Graph, feeds: dict[str, np.ndarray], backend: str, variants: list[str],
             baseline: bool = True) -> list[Finding]:
    """The findings of ``variants`` of one backend on the case, judged as the campaign judges them (without
    ``baseline``: as a campaign did where the baseline could not run, or before the judge left out a pair
    whose mate the baseline finds wrong)."""
    test = Test(to_bytes(g), g.to_json(), feeds)
    base = run_baseline(pool, test, g)
    got = run_confirmed(pool, backend, test, variants).outcomes
    _, described = pool.describe(backend)
    criteria = criteria_for({backend: {n: Variant(n, o) for n, o in described}}).for_graph(g, base.name)
    return judge({backend: got}, base.outputs if baseline else None, criteria).findings


def crash(pool, g: Graph, feeds: dict[str, np.ndarray], at: tuple[str, str]) -> Finding:
    got = [f for f in findings(pool, g, feeds, at[0], [at[1]]) if f.oracle == "crash"]
    assert len(got) == 1, got
    return got[0]


def runtime_pad() -> tuple[Graph, dict[str, np.ndarray]]:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    return one_node("Pad", [(INPUT_KIND, x), (CONST_KIND, np.array([0, 1, 1, 0], np.int64)),
                            ("pinned", np.array(5.0, np.float32))], {"mode": "constant"}, (3, 4))


def test_openvino_metamorphic_pad_with_a_runtime_constant_has_a_trigger(pool) -> None:
    """OpenVINO's static CPU plugin pads with 0 where Pad's constant_value is fed at run time (f32-dynamic
    pads with it): as a campaign without the baseline recorded it, a metamorphic bug (f32-dynamic vs f32),
    whose trial runs the pair and the baseline, so
    that making the operand an initializer makes it vanish; without the mate and the baseline its control
    run would show nothing and it would have no root."""
    need("openvino")
    g, feeds = runtime_pad()
    feeds["i2"] = np.array(5.0, np.float32)
    # the static f32 is the wrong one: judged with the baseline, it is its differential finding alone
    judged = findings(pool, g, feeds, "openvino", ["f32", "f32-dynamic"])
    assert [(f.oracle, f.variant) for f in judged] == [("differential", "f32")], judged
    meta = [f for f in findings(pool, g, feeds, "openvino", ["f32", "f32-dynamic"], baseline=False)
            if f.oracle == "metamorphic"]
    assert len(meta) == 1 and meta[0].variant == "f32-dynamic" and meta[0].other == "f32", meta
    a = analyze_triggers(pool, meta[0], g, feeds, {"node": "n0", "kind": meta[0].kind}, graph_signature(meta[0], g))
    assert a.root == "OpenVINO: Pad with operands fed at run time", a.summary()
    assert all(t["kind"] != "static" for t in a.tried), a.tried  # the mate is no variation of the pair


def constant_of_shape() -> tuple[Graph, dict[str, np.ndarray]]:
    g, feeds = one_node("ConstantOfShape", [(INPUT_KIND, np.array([2, 3], np.int64))], {}, (2, 3), "float32")
    return g, feeds


def test_tvm_fold_constant_crash_is_the_optimizing_pipelines_root(pool) -> None:
    """TVM's cpu pipeline: LegalizeOps leaves ConstantOfShape of a run-time shape unlegalized, FoldConstant
    then legalizes it and reshape_call_te asserts; the default pipeline does not crash there.  The twin
    without the pipeline (and its opt-level) makes it vanish: the pipeline's root, whichever operator."""
    need("tvm")
    g, feeds = constant_of_shape()
    f = crash(pool, g, feeds, ("tvm", "fused-generic"))
    a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
    assert a.kinds == [PIPELINE] and a.root == "TVM compile crash: the optimizing pipeline", a.summary()
    options = {"fused": {"pipeline": "cpu", "target": {"kind": "llvm", "opt-level": 3}},
               "unfused": {"pipeline": "default", "target": {"kind": "llvm", "opt-level": 0}}}
    assert twin(options, "fused", ("pipeline",), (("target", "opt-level"),)) == "unfused"


def pool_node(op: str, attrs: dict, opset: int = 14) -> tuple[Graph, dict[str, np.ndarray]]:
    x = np.linspace(-1, 1, 2, dtype=np.float32).reshape(1, 1, 2)
    return one_node(op, [(INPUT_KIND, x)], attrs, (1, 1, 1), opset=opset)


def test_iree_pooling_lowering_is_one_root_and_a_decline_hides_no_crash(pool) -> None:
    """IREE's pooling lowering fails alike for MaxPool and AveragePool when a pooled extent is 1 and the
    padded input is not one kernel ("'linalg.generic' op inferred input/output operand ... to be 3, but
    found 2"): the message quotes onnx.MaxPool or onnx.AveragePool, one root with the family in its place.
    MaxPool at version 11 is declined by IREE's importer: the version is no trigger."""
    need("iree")
    attrs = {"kernel_shape": [3], "pads": [1, 1], "strides": [2]}
    roots = []
    for op, triggers in (("MaxPool", Analysis()), ("AveragePool", Analysis(root="IREE: AveragePool with pads",
                                                                             trigger=["pads off its default"]))):
        g, feeds = pool_node(op, attrs)
        f = crash(pool, g, feeds, ("iree", "O0-generic"))
        roots.append(reduced_root(f, g, None, "", graph_signature(f, g), triggers))
    assert roots[0] == roots[1] and len(roots[0]) == 16, roots  # before an operator's trigger too
    g, feeds = pool_node("MaxPool", attrs)
    f = crash(pool, g, feeds, ("iree", "O0-generic"))
    a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
    assert OPSET not in a.kinds and any(t["kind"] == OPSET and t["result"] == "invalid" for t in a.tried), a.tried


def split_concat_then_reverse() -> tuple[Graph, dict[str, np.ndarray]]:
    """SplitToSequence+ConcatFromSequence of a [1, 1, 1, 1, 1] tensor, then ReverseSequence."""
    g, shape = Graph(opset=16), (1, 1, 1, 1, 1)
    g.add_value(Value("x", TensorType(shape, "float32"), INPUT_KIND))
    g.add_value(Value("s", TensorType((1,), "int32"), CONST_KIND, np.array([1], np.int32)))
    g.add_value(Value("lens", TensorType((1,), "int64"), CONST_KIND, np.array([1], np.int64)))
    g.add_node(Node("SplitToSequence+ConcatFromSequence", ["x", "s"], ["t"],
                    {"axis": -4, "concat_axis": -1, "keepdims": 1}, "n0"))
    g.add_node(Node("ReverseSequence", ["t", "lens"], ["y"], {"batch_axis": 1, "time_axis": 0}, "n1"))
    for name in ("t", "y"):
        g.add_value(Value(name, TensorType(shape, "float32"), NODE_KIND))
    g.outputs = ["y"]
    return g, {"x": np.ones(shape, np.float32)}


def construct_at_then_lp_normalization() -> tuple[Graph, dict[str, np.ndarray]]:
    """SequenceConstruct+SequenceAt at a position fed at run time, then LpNormalization."""
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((1,), "float32"), INPUT_KIND))
    g.add_value(Value("k", TensorType((), "int64"), INPUT_KIND, np.array(0, np.int64)))
    g.add_node(Node("SequenceConstruct+SequenceAt", ["x", "x", "x", "k"], ["t"], {}, "n0"))
    g.add_node(Node("LpNormalization", ["t"], ["y"], {}, "n1"))
    for name in ("t", "y"):
        g.add_value(Value(name, TensorType((1,), "float32"), NODE_KIND))
    g.outputs = ["y"]
    return g, {"x": np.ones(1, np.float32), "k": np.array(0, np.int64)}


def test_openvino_sequence_outputs_fail_their_consumers_under_one_root(pool) -> None:
    """OpenVINO's sequence operators hand on a tensor of unknown rank: a ReverseSequence after
    SplitToSequence+ConcatFromSequence and a LpNormalization after SequenceConstruct+SequenceAt fail to
    convert, each in its own way; one root, the tensor out of a sequence, whichever idiom made it."""
    need("openvino")
    roots = []
    for g, feeds in (split_concat_then_reverse(), construct_at_then_lp_normalization()):
        f = crash(pool, g, feeds, ("openvino", "f32"))
        roots.append(crash_upstream_root(f, g))
    assert roots[0] and roots[0] == roots[1], roots


def test_a_reduced_case_that_kept_the_node_is_read_at_the_findings_first() -> None:
    """Without a compiler: a reduction that located nothing falls back to the finding's own first diverging
    node where the reduced graph still has it."""
    g, _ = runtime_pad()
    f = Finding("metamorphic", "value", "openvino", "f32-dynamic", "run", "", other="f32",
                details={"first_diverging": {"node": "n0", "op": "Pad", "kind": "value"}})
    assert reduced_first(f, g, None) == {"node": "n0", "op": "Pad", "kind": "value"}
    f.details["first_diverging"]["node"] = "gone"
    assert reduced_first(f, g, None) is None


def resize_scales(scales: list[float], out: tuple[int, ...]) -> tuple[Graph, dict[str, np.ndarray]]:
    """Resize of a [1, 1, 1, 1, 1] input by ``scales`` (some on the batch and channel axes)."""
    g = Graph(opset=18)
    x = np.full((1, 1, 1, 1, 1), 0.4, np.float32)
    g.add_value(Value("x", TensorType(x.shape, "float32"), INPUT_KIND))
    g.add_value(Value("scales", TensorType((5,), "float32"), CONST_KIND, np.array(scales, np.float32)))
    g.add_value(Value("y", TensorType(out, "float32"), NODE_KIND))
    g.add_node(Node("Resize", ["x", "", "scales"], ["y"], {"keep_aspect_ratio_policy": "stretch"}, "n0"))
    g.outputs = ["y"]
    return g, {"x": x}


def test_openvino_resize_that_its_static_compile_declines_is_one_root_under_dynamic_shapes() -> None:
    """OpenVINO's static compile refuses a Resize that scales the batch or channel axis ("only supports
    resize on spatial dimensions"); its dynamic-shape path runs it and returns a wrong shape.  The static
    twin's decline hides the bug, so no variation makes it vanish: the refusal names the root, the same for
    every such case whatever its scales and node names, whichever twin refuses it (the one on the compiler's
    threads is asked first).  Each case in a worker pool of its own: OpenVINO on
    one thread swallows the refusal only in a process that has not run the case's other form before."""
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    need("openvino")
    roots = []
    for scales, out in (([0.8, 1.2, 0.6, 2.62, 2.5], (0, 1, 0, 2, 2)), ([2.0, 1.0, 1.0, 2.0, 2.0], (2, 1, 1, 2, 2))):
        g, feeds = resize_scales(scales, out)
        own = WorkerPool(PhaseLimits())
        try:
            wrong = [f for f in findings(own, g, feeds, "openvino", ["f32-dynamic"]) if f.diverges]
            assert len(wrong) == 1, wrong
            a = analyze_triggers(own, wrong[0], g, feeds, {"node": "n0", "kind": wrong[0].kind},
                                 graph_signature(wrong[0], g))
        finally:
            own.close()
        # the twin on the compiler's threads is asked before the static one, and refuses alike
        assert any(t["kind"] == "threads" and t["result"] == "invalid" for t in a.tried), a.tried
        assert a.trigger == ["a case its twin without one inference thread does not run"], a.summary()
        roots.append(a.root)
    # one thread swallows the refusal, whatever the case: one root
    assert roots[0] == roots[1] == swallowed_root("openvino"), roots
