"""A crash on a producer's wrong output is rooted at the producer's divergence (issue 29), on the real
compilers: TVM's Dropout gives its mask as float32, and whichever operator reads it fails to compile;
OpenVINO's Resize ignores keep_aspect_ratio_policy, and the MatMulInteger after it fails validation;
TVM types NonMaxSuppression's output with its largest shape, and the Pad after it fails at run time.  The
cases are reduced cases of a 2-hour campaign (tests/data/knock_on/SIGNATURE: graph.json, inputs.npz)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlcfuzz.ir import Graph, Node
from dlcfuzz.oracle.findings import Finding
from dlcfuzz.oracle.triggers import KNOCK_ON, RUN_TIME_SHAPE, SIGN, Analysis, alone
from dlcfuzz.run.dedup import analyze_triggers, graph_signature, reduced_root
from tests.test_trigger_roots import crash, findings
from tests.test_triggers import need

DATA = Path(__file__).parent / "data" / "knock_on"


def case(signature: str) -> tuple[Graph, dict[str, np.ndarray]]:
    g = Graph.from_json((DATA / signature / "graph.json").read_text())
    with np.load(DATA / signature / "inputs.npz") as f:
        feeds = {k: f[k] for k in f.files}
    return g, {v.name: (v.data if v.pinned else feeds[v.name]) for v in g.inputs}


def analyzed(pool, signature: str, at: tuple[str, str]) -> tuple[Graph, Finding, Analysis]:
    """A reduced crash case of the campaign, its crash on ``at`` (backend, variant), and its trigger analysis."""
    g, feeds = case(signature)
    f = crash(pool, g, feeds, at)
    return g, f, analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))


def dropout_mask_read_by(op: str) -> tuple[Graph, dict[str, np.ndarray]]:
    """Dropout's mask read by ``op`` (a Not in the campaign's case; an Xor of the mask with itself here)."""
    g, feeds = case("b26f2214f8dc8b59")
    if op == "Xor":
        g.nodes[1] = Node("Xor", ["v23", "v23"], ["v32"], {}, "n8")
    return g, feeds


def test_tvm_crashes_on_dropouts_mask_are_the_dropout_bugs_root(pool) -> None:
    """Not and Xor of the mask fail in TVM's compile, each with its own message; the mask alone has the
    wrong dtype, and fed as the baseline gives it neither fails.  Both are rooted where the Dropout dtype
    bug itself is: its signature as the campaign's judge signs the Dropout alone (not by the analysis)."""
    need("tvm")
    at = ("tvm", "unfused-generic")
    roots, messages = [], set()
    for op in ("Not", "Xor"):
        g, feeds = dropout_mask_read_by(op)
        f = crash(pool, g, feeds, at)
        messages.add(f.message)
        a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
        assert a.kinds == [KNOCK_ON] and a.upstream is not None, a.summary()
        assert (a.upstream.first["op"], a.upstream.first["kind"]) == ("Dropout", "dtype"), a.summary()
        roots.append(a.root)
        without = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), skip=(KNOCK_ON,))
        assert without.root != a.root and KNOCK_ON not in without.kinds, without.summary()
    g, feeds = dropout_mask_read_by("Not")
    mask = alone(g, g.nodes[0], feeds, {})
    assert mask is not None
    own = [f for f in findings(pool, mask[0], mask[1], at[0], [at[1]]) if f.diverges and f.kind == "dtype"]
    assert own, "TVM's Dropout mask has the right dtype: the knock-on this test needs is fixed"
    assert roots == [graph_signature(own[0], mask[0])] * 2, roots


def test_openvino_crash_after_a_resize_keeping_aspect_ratio_is_the_resize_root(pool) -> None:
    """Resize(sizes, keep_aspect_ratio_policy=not_larger) then MatMulInteger of it with itself: OpenVINO
    gives the Resize the sizes' shape, and the MatMulInteger's validation fails.  Its root is the root of
    the Resize's own wrong shape: the attribute that makes it vanish, which OpenVINO ignores (its output
    with the attribute at its default is the same)."""
    need("openvino")
    _, _, a = analyzed(pool, "e184f5a4563fe6ab", ("openvino", "default"))
    assert a.kinds == [KNOCK_ON] and a.upstream is not None and a.upstream.first["kind"] == "shape", a.summary()
    assert a.root == "OpenVINO: Resize with keep_aspect_ratio_policy ignored", a.summary()


def test_tvm_crash_on_an_input_shaped_at_run_time_is_the_readers(pool) -> None:
    """NonMaxSuppression's output is right alone, but its shape is known only at run time, and the Pad
    that reads it fails at run time; fed the same values from a graph input, it does not.  No output is
    wrong: the root is the reader's, on an input shaped at run time, whichever operator made it
    (OpenVINO's GlobalLpPool fails alike after a OneHot of a run-time depth and after an AffineGrid)."""
    need("tvm")
    _, _, a = analyzed(pool, "de42ef801ededcf1", ("tvm", "unfused-generic"))
    assert a.kinds == [KNOCK_ON] and a.upstream is not None, a.summary()
    assert a.upstream.first == {"node": "n1", "op": "NonMaxSuppression", "output": "", "kind": RUN_TIME_SHAPE,
                                "reader": "Pad"}
    assert a.root == "TVM run crash: Pad on an input shaped at run time", a.summary()


def test_tvm_crash_on_a_producers_own_crash_is_rooted_there(pool) -> None:
    """ConstantOfShape (of a shape fed at run time) -> Sign -> ArgMin fails in TVM's ArgMin converter,
    which cannot read the shape; the ConstantOfShape alone fails in TVM too, and fed as the baseline gives
    it, ArgMin does not: rooted at the ConstantOfShape's own crash, as the judge signs it alone."""
    need("tvm")
    at = ("tvm", "unfused-generic")
    g, _, a = analyzed(pool, "a7ecb5fca4fcfed6", at)
    _, feeds = case("a7ecb5fca4fcfed6")
    assert a.kinds == [KNOCK_ON] and a.upstream is not None, a.summary()
    assert (a.upstream.first["op"], a.upstream.first["kind"]) == ("ConstantOfShape", "exception"), a.summary()
    source = alone(g, g.nodes[0], feeds, {})
    assert source is not None
    assert a.root == graph_signature(crash(pool, *source, at), source[0]), a.summary()


def test_a_crash_whose_producers_are_right_is_the_consumers(pool) -> None:
    """HardSwish -> Unsqueeze with its axes fed at run time fails in TVM's compile; the HardSwish alone is
    right: the crash is the Unsqueeze's, whichever elementwise operator feeds it (an Exp in another case of
    the campaign, with other shapes), rooted by the trigger that makes it vanish (the axes as an initializer)."""
    need("tvm")
    roots = []
    for signature in ("581d43ade26c76ee", "ae9a1a17af73bab5"):
        _, _, a = analyzed(pool, signature, ("tvm", "fused-generic"))
        assert KNOCK_ON not in a.kinds and a.upstream is None, a.summary()
        roots.append(a.root)
    assert roots == ["TVM compile crash: Unsqueeze with operands fed at run time"] * 2, roots


def test_tvm_sequence_insert_at_a_negative_position_is_one_root(pool) -> None:
    """TVM's SequenceInsert puts a negative position one place too far right: wrong values in one case,
    a wrong shape in another.  Each negative position made the non-negative one that means the same (by
    ONNX's reference) makes it vanish: one root; without that variation, none."""
    need("tvm")
    roots = []
    for signature in ("c50a2991543494b6", "fc871d685b1c58aa"):
        g, feeds = case(signature)
        got = [f for f in findings(pool, g, feeds, "tvm", ["unfused-generic"]) if f.diverges]
        assert got, signature
        first = {"node": g.nodes[0].name, "kind": got[0].kind}
        a = analyze_triggers(pool, got[0], g, feeds, first, graph_signature(got[0], g))
        roots.append(a.root)
        without = analyze_triggers(pool, got[0], g, feeds, first, graph_signature(got[0], g), skip=(SIGN,))
        assert "negative position" not in without.root, without.summary()
    assert roots == ["TVM: SequenceConstruct+SequenceInsert+SequenceErase+ConcatFromSequence with a negative position"
                     ] * 2, roots


def test_openvino_skip_layer_norm_statistics_in_float16_is_one_root(pool) -> None:
    """OpenVINO gives SkipLayerNormalization's mean and inv_std_var in float16 (the contrib schema: float32),
    and the MatMul that reads one fails to convert (in another case, the BiasGelu after a ReduceL2 of one,
    where ONNX's inference cannot retype the cut case).  The reduced case declares the statistics' shape
    stale (the reduction changed the input), and the Skip's other outputs are read by no one: the Skip,
    alone and cut out, still shows the knock-on, rooted where its dtype bug alone is."""
    need("openvino")
    roots = []
    for signature in ("a91c70031d8065ca", "f4b8dbdca73e0be2"):  # the second: ReduceL2 then a contrib BiasGelu
        _, _, a = analyzed(pool, signature, ("openvino", "f32"))
        assert a.kinds == [KNOCK_ON] and a.upstream is not None, a.summary()
        assert (a.upstream.first["op"], a.upstream.first["kind"]) == ("com.microsoft.SkipLayerNormalization",
                                                                      "dtype")
        roots.append(a.root)
    assert roots == [graph_signature(a.upstream.finding, a.upstream.graph)] * 2, roots


def test_a_tensor_out_of_an_openvino_sequence_stays_one_root(pool) -> None:
    """SequenceAt's tensor has the right values alone, but OpenVINO gives it a dynamic element type, on
    which ReduceMax and com.microsoft.Attention fail to convert, each with its own message naming the node:
    the sources of what the crashing node reads (a tensor out of a sequence) are the root, not the
    consumer that the producers' right values would otherwise name."""
    need("openvino")
    roots = []
    for signature in ("44d38ec92ab6f394", "060832107b9d7d00"):
        g, f, a = analyzed(pool, signature, ("openvino", "f32"))
        roots.append(reduced_root(f, g, None, "", graph_signature(f, g), a))
    assert roots[0] == roots[1] and "operands fed at run time" not in roots[0], roots


def test_a_divergence_the_signature_cannot_read_in_a_trial_is_read_as_any(pool) -> None:
    """OpenVINO cuts a Slice's `ends` fed at run time to int32.  The reduction located the divergence at the
    Slice as a shape mismatch; a trial, not localized, sees it at the output as values: its signature does
    not read it, so the control is read again as any divergence of the backend, and the int32 variation
    finds the backend's trigger (the root of the campaign's other int32 bugs)."""
    import json

    from dlcfuzz.run.reduce import finding_from_dict

    need("openvino")
    g, feeds = case("05fb517c76494ecc")
    f = finding_from_dict(json.loads((DATA / "05fb517c76494ecc" / "finding.json").read_text()))
    reduction = json.loads((DATA / "05fb517c76494ecc" / "reduction.json").read_text())
    a = analyze_triggers(pool, f, g, feeds, reduction["first_diverging"], reduction["signature"])
    assert a.tried[0]["result"] == "vanished", a.summary()  # as the signature reads it
    assert a.root == "OpenVINO: integer values beyond the int32 range", a.summary()


def test_iree_crash_beside_a_producers_own_crash_is_not_its_knock_on(pool) -> None:
    """TopK with sorted=0 fails alone in IREE ("failed to legalize operation 'torch.constant.int'"); the
    ReverseSequence reading it fails on another path (a Loop whose operand types differ), and fed as the
    baseline gives the TopK's output, it does not.  The TopK's own trigger, sorted=0, switched off in the
    whole case leaves the crash: no knock-on, and not the TopK bug's root."""
    need("iree")
    _, _, a = analyzed(pool, "025a00c712ae7fd4", ("iree", "O0-generic"))
    assert a.upstream is None and a.root != "IREE: TopK with sorted=0", a.summary()
    assert {"kind": KNOCK_ON, "cause": "the case without sorted=0 at TopK", "result": "shows"} in a.tried, a.tried
