"""Roots that a case's form names (issue 29), on the real compilers, from reduced cases of a 30-minute
campaign (tests/data/roots/SIGNATURE: graph.json, inputs.npz):

- an operand's values: IREE's Pow of a negative base is NaN (INT_MIN as an integer), and its negative
  values made positive make it vanish, for integer and float bases alike; OpenVINO's dynamic-shape TopK
  does not put the lower index first among equal values, and ties broken make it vanish;
- an empty initializer fed at run time instead: OpenVINO reads an empty int64 initializer as a scalar,
  whichever operator takes it, a failed import of a Tile in one case and a wrong shape after an Expand in
  another, one root in any phase;

- an optional input given, taken back to its default (omitted): IREE ignores the recurrent layers'
  ``sequence_lens``, in RNN and in GRU alike, one root for the family;
- a value whose rank ONNX's shape inference cannot tell: IREE's importer types it as a scalar, and
  whichever operator reads it fails to compile, each with its own message;
- Resize through the other of ``scales`` and ``sizes`` is tried before pairs of causes, which would use
  up the analysis's runs, and where an output dimension is 0 (which ONNX's inference leaves unknown)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.ir import INPUT_KIND, Graph
from dlcfuzz.oracle.findings import Finding
from dlcfuzz.oracle.triggers import (
    BESIDE,
    DECLARED,
    ELEMENT_TYPE,
    EMPTY,
    KNOCK_ON,
    NEGATIVE,
    OPTIONAL,
    RANKS,
    RUN_TIME_CHOICE,
    SIBLING,
    SIGN,
    THREADS,
    TIES,
    UNKNOWN_RANK,
    Analysis,
    swallowed_root,
)
from dlcfuzz.run.dedup import analyze_triggers, graph_signature, same_roots
from dlcfuzz.run.reduce import finding_from_dict
from tests.test_triggers import analysis, found, need, one_node

DATA = Path(__file__).parent / "data" / "roots"
TVM, IREE, OPENVINO = ("tvm", "unfused-generic"), ("iree", "O0-generic"), ("openvino", "f32")


def case(signature: str) -> tuple[Graph, dict[str, np.ndarray]]:
    g = Graph.from_json((DATA / signature / "graph.json").read_text())
    with np.load(DATA / signature / "inputs.npz") as f:
        feeds = {k: f[k] for k in f.files}
    return g, {v.name: (v.data if v.pinned else feeds[v.name]) for v in g.inputs}


def analyzed(pool, signature: str, at: tuple[str, str], **kw) -> Analysis:
    g, feeds = case(signature)
    f = found(pool, g, feeds, at)
    return analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), **kw)


def test_iree_ignores_sequence_lens_in_rnn_and_gru_one_root(pool) -> None:
    """RNN (sequence_lens [1] of 2 steps) and GRU: IREE computes the steps past each sequence's length.
    Omitting ``sequence_lens`` (every sequence full) makes each vanish; the recurrent layers share the
    input, so one root.  (Without the variation, in a scratch copy, neither had a root.)"""
    need("iree")
    rnn, gru = analyzed(pool, "51fcff1293c5c73f", IREE), analyzed(pool, "ab9629f4c0988502", IREE)
    assert rnn.kinds == [OPTIONAL] and rnn.trigger == ["sequence_lens given"], rnn.summary()
    assert rnn.root == gru.root == "IREE: RNN/GRU/LSTM with sequence_lens given", (rnn.summary(), gru.summary())


def test_iree_crashes_on_values_of_unknown_rank_one_root_whatever_reads_them(pool) -> None:
    """Squeeze of axes fed at run time read by Tile, and BlackmanWindow of a size fed at run time read by
    MeanVarianceNormalization: ONNX cannot tell either output's rank, IREE types it as a scalar, and the
    readers fail with two messages.  Each producer alone is right and fed as the baseline gives it the crash
    vanishes: one root, named by no reader.  Without the knock-on analysis the two are apart."""
    need("iree")
    tile, mvn = (analyzed(pool, s, IREE, skip=(DECLARED,)) for s in ("2cba12ea372910bc", "8fa2c939bcb63000"))
    for a in (tile, mvn):
        assert a.kinds == [KNOCK_ON] and a.upstream is not None and a.upstream.first["kind"] == UNKNOWN_RANK, (
            a.summary())
    assert tile.root == mvn.root == (
        "IREE crash: a value of a rank that ONNX's shape inference cannot tell"), (tile.root, mvn.root)
    without = [analyzed(pool, s, IREE, skip=(KNOCK_ON, DECLARED)).root for s in ("2cba12ea372910bc",
                                                                                  "8fa2c939bcb63000")]
    assert tile.root not in without, without


def test_iree_crashes_where_it_must_infer_a_rank_that_onnx_cannot_tell_one_root(pool) -> None:
    """c45: ReduceMin (keepdims=0), ReduceMean and ReduceLogSum (noop_with_empty_axes=1) of axes fed at run
    time, read by a MeanVarianceNormalization, a Shape, a CastLike: IREE types each reduction's output, whose
    rank ONNX cannot tell, as a scalar, and fails with three messages.  With that output's type declared in
    the model (its values unchanged) each compiles: one root, before the axes' form (an initializer gives
    ONNX the rank too), which rooted them per operator and per attribute."""
    need("iree")
    found = [recorded(pool, s) for s in ("7a66bbbdb9aa9c13", "8955ae43772bc117", "dcc63482c95a90f2")]
    for a in found:
        assert a.kinds == [DECLARED], a.summary()
        assert a.root == "IREE crash: a value of a rank that ONNX's shape inference cannot tell", a.summary()
    g, feeds = case("7a66bbbdb9aa9c13")
    f = campaign_finding("7a66bbbdb9aa9c13")
    without = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), skip=(DECLARED,))
    assert without.root != found[0].root, without.summary()


def test_tvm_resize_family_is_found_before_pairs_use_up_the_runs(pool) -> None:
    """TVM keeps only sizes[2:] of a Resize: a uint8 Resize with two attributes off their defaults has
    six single causes, none of which makes it vanish, and fifteen pairs; the other form (through scales)
    is tried before them and names the family's root.  A Resize through scales to an output with a
    0-sized dimension (sizes that ONNX's inference leaves unknown) has the same root."""
    need("tvm")
    sizes, scales = analyzed(pool, "66108c144c391d52", TVM), analyzed(pool, "3778428f003e00c5", TVM)
    assert sizes.root == scales.root == "TVM: Resize (through scales or sizes) (shape mismatch)", (
        sizes.summary(), scales.summary())
    assert [t["kind"] for t in sizes.tried].index(SIBLING) < next(
        i for i, t in enumerate(sizes.tried) if "+" in t["kind"]), sizes.tried
    without = analyzed(pool, "3778428f003e00c5", TVM, skip=(SIBLING,))
    assert without.root == "", without.summary()


def test_openvino_reads_an_empty_initializer_as_a_scalar_one_root_in_any_phase(pool) -> None:
    """Tile of a uint16 scalar by an empty int64 initializer fails OpenVINO's import ("Tile repeats must be
    of rank 1": it read a scalar); an Expand of a float32 scalar to an empty shape, then a Neg, gives a
    wrong shape.  Only the empty initializer fed at run time makes each vanish: one root, the backend's,
    named by no operator and no phase.  Without the variation, the two are apart."""
    need("openvino")
    tile, expand = analyzed(pool, "529d4b6646463975", OPENVINO), analyzed(pool, "2bf200efa0cd7e68", OPENVINO)
    assert tile.kinds == expand.kinds == [EMPTY], (tile.summary(), expand.summary())
    assert tile.root == expand.root == "OpenVINO: an empty tensor folded as an initializer", (tile.root, expand.root)
    apart = [analyzed(pool, s, OPENVINO, skip=(EMPTY,)).root for s in ("529d4b6646463975", "2bf200efa0cd7e68")]
    assert apart[0] != apart[1], apart


def test_iree_pow_of_a_negative_base_is_one_root_for_integer_and_float_bases(pool) -> None:
    """IREE computes Pow through exp and log: a negative base gives NaN (INT_MIN for int32).  The negative
    values made positive make it vanish, for an int32 and a float32 case: one root.  (Without the variation,
    in a scratch copy, the two were apart.)"""
    need("iree")
    ints = one_node("Pow", [(INPUT_KIND, np.array([2, -2, -1, -3], np.int32)),
                            (INPUT_KIND, np.array([0, 2, 0, 3], np.int32))], {}, (4,))
    floats = one_node("Pow", [(INPUT_KIND, np.array([-0.7875, 0.5], np.float32)),
                              (INPUT_KIND, np.array([1.0, 2.0], np.float32))], {}, (2,))
    (_, a), (_, b) = analysis(pool, *ints, IREE), analysis(pool, *floats, IREE)
    assert a.kinds == b.kinds == [NEGATIVE], (a.summary(), b.summary())
    assert a.root == b.root == "IREE: Pow with negative values", (a.root, b.root)


def campaign_finding(signature: str) -> Finding:
    """The finding as the campaign recorded it (its finding.json beside the reduced case)."""
    return finding_from_dict(json.loads((DATA / signature / "finding.json").read_text()))


def recorded_campaign(out: Path, backend: str, signatures: Sequence[str],
                      reduction: Callable[[str], dict]) -> None:
    """A campaign folder as an earlier dlcfuzz recorded it: each recorded case of tests/data/roots a compiler bug
    of its own (bundle, reduced case, ``reduction(signature)`` as its reduction.json), in a store of ``backend``."""
    import shutil
    from dataclasses import asdict

    from dlcfuzz.run.store import Store, TestRecord

    store = Store(out)
    store.bind({"recorded": "by an earlier dlcfuzz"})
    store.set_meta("config", {"backends": [backend]})
    for i, sig in enumerate(signatures):
        f = campaign_finding(sig)
        bundle = out / "bugs" / sig
        (bundle / "reduced").mkdir(parents=True)
        for name in ("graph.json", "inputs.npz"):
            shutil.copy(DATA / sig / name, bundle / "reduced" / name)
        shutil.copy(DATA / sig / "graph.json", bundle / "graph.json")
        (bundle / "finding.json").write_text(json.dumps({**asdict(f), "signature": sig}))
        (bundle / "reduction.json").write_text(json.dumps(reduction(sig)))
        store.commit(TestRecord(i, i, ["Relu"], f.other or "reference/default", True, 1, True, 0.1, 0, 0, 0, 0), [],
                     [(sig, f.oracle, f.kind, f.backend, f.variant, f.phase, "x")],
                     [(sig, f.oracle, f.kind, f.backend, f.variant, f.phase, f.message, "compiler", f"bugs/{sig}")])
        store.merge_root(sig, sig)
    store.close()


CHOSEN = "OpenVINO: wrong values after a tensor chosen at run time (If, SequenceAt)"


def test_openvino_sequence_at_with_a_runtime_operand_is_one_root_whatever_is_beside_it(pool) -> None:
    """OpenVINO's dynamic-shape SequenceConstruct+SequenceAt gives other values than its static compile,
    only beside an operator that shares no value with it (an EmbedLayerNormalization in one case, a
    ReverseSequence in another), located at no node of the reduced case.  Its operands made initializers
    make it vanish, and the one node that reads them names the root: one for both (without that rule,
    neither had one).  A SequenceAt of a position fed at run time is a tensor chosen at run time, which
    OpenVINO lowers into Ifs: the If's root (c48: one read by a ConvTranspose, one beside a Concat; below)."""
    need("openvino")
    roots = []
    for sig in ("a22688cdf2f5e4e2", "13e198aedd73883c"):
        g, feeds = case(sig)
        f = campaign_finding(sig)
        a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
        roots.append(a.root)
    roots += [recorded(pool, s).root for s in ("256135d15a0ed242", "dd616b4172927c74")]
    assert roots == [CHOSEN] * 4, roots


def test_openvino_sequence_at_of_a_negative_position_is_a_root_of_its_own(pool) -> None:
    """OpenVINO's SequenceAt returns the last element for any negative position (-3 of 3 gives element 2),
    fed at run time or not: a defect apart from the one above, which its operands as initializers also
    hide.  The sign is tried before the operands' form (narrower), and names the root.  Without it, the
    root is the operands' form, one with the defect above (a hand check found them two)."""
    need("openvino")
    g, feeds = case("17765ac95bb0ad33")
    f = campaign_finding("17765ac95bb0ad33")
    a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
    assert a.kinds == [SIGN] and a.root == "OpenVINO: SequenceConstruct+SequenceAt with a negative position", (
        a.summary())
    without = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), skip=(SIGN,))
    assert without.root != a.root, without.summary()


def test_openvino_dynamic_topk_ties_are_its_trigger(pool) -> None:
    """OpenVINO's dynamic-shape TopK of int16 [[2, 2]] gives other indices than its static compile (the
    spec: the lower index first), as the campaign found it (metamorphic, its finding.json); the ties broken
    (the order kept) make it vanish, so the root is the ties', not the integer type's (float32 ties fail
    alike)."""
    need("openvino")
    g, feeds = case("5f43472644d38664")
    f = campaign_finding("5f43472644d38664")
    first = f.details["first_diverging"]
    a = analyze_triggers(pool, f, g, feeds, first, graph_signature(f, g))
    assert a.kinds == [TIES] and a.root == "OpenVINO: TopK with tied values", a.summary()


def test_ties_are_broken_in_order_within_the_type() -> None:
    """Without a compiler: equal elements become distinct, lower index smaller, the order of all kept; a
    type that cannot hold the moved values, or no ties, gives None."""
    from dlcfuzz.oracle.triggers import _ties_broken

    a = np.array([[2, 2], [1, 2]], np.int16)
    b = _ties_broken(a)
    assert b is not None and b.dtype == a.dtype and len(np.unique(b)) == 4
    assert b.tolist() == [[2, 3], [1, 4]]
    x = np.array([0.5, -1.0, 0.5], np.float32)
    y = _ties_broken(x)
    assert y is not None and y[0] < y[2] and y[1] == -1.0 and abs(float(y[2]) - 0.5) < 0.01
    assert _ties_broken(np.array([255, 255], np.uint8)) is None
    assert _ties_broken(np.array([1, 2, 3], np.int32)) is None


def test_a_pair_of_variations_applies_where_the_first_took_an_operand_away() -> None:
    """Without a compiler: ReduceSum-13 with a negative axes input; its version 11 takes axes as an
    attribute (the input goes), and the negative values made positive after it find no axes input: the
    pair still applies, to what is left (a campaign's analysis died of a KeyError there)."""
    from dlcfuzz.ir import CONST_KIND
    from dlcfuzz.oracle.triggers import OPSET, applied, variations

    x = np.array([[-1.5, 2.0], [0.5, -3.0]], np.float32)
    g, feeds = one_node("ReduceSum", [(INPUT_KIND, x), (CONST_KIND, np.array([-1], np.int64))], {}, (2, 1),
                        opset=13)
    vs, _ = variations(g, feeds, {"node": "n0"}, "v", {})
    pair = [next(v for v in vs if v.kind == OPSET), next(v for v in vs if v.kind == NEGATIVE)]
    got = applied(pair, g, feeds, "v")
    assert got is not None
    h, fed, variant = got
    assert h.opset == 11 and h.nodes[0].attrs["axes"] == [-1] and (fed["i0"] >= 0).all() and variant == "v"


def test_tvm_expand_to_a_shape_of_lower_rank_is_one_root_through_both_branches(pool) -> None:
    """TVM's Expand does not right-align a shape of fewer dimensions than its input: a constant shape fails
    in one converter branch (an AssertionError), a shape fed at run time in another (broadcast_to's
    ValueError).  The shape brought to the input's rank by leading 1s (what broadcasting does) makes each
    vanish: one root.  Without that variation, the two operand forms are two roots."""
    need("tvm")
    roots = [analyzed(pool, s, TVM).root for s in ("76c8a58b4147183a", "4be7649e09d5536b")]
    assert roots == ["TVM: Expand with operands of a lower rank"] * 2, roots
    apart = [analyzed(pool, s, TVM, skip=(RANKS,)).root for s in ("76c8a58b4147183a", "4be7649e09d5536b")]
    assert apart[0] != apart[1], apart


def recorded(pool, signature: str) -> Analysis:
    """The trigger analysis of a reduced case as the campaign recorded it: its finding and the node its
    reduction located the divergence at."""
    g, feeds = case(signature)
    f = campaign_finding(signature)
    first = json.loads((DATA / signature / "reduction.json").read_text())["first_diverging"]
    return analyze_triggers(pool, f, g, feeds, first, graph_signature(f, g))


def test_wrong_values_whose_one_thread_variant_raises_an_error_now_are_that_errors_swallowing(pool) -> None:
    """c47: OpenVINO's one-thread variant returned a LayerNormalization's outputs unwritten in the campaign's
    process and raised the error ("Eltwise shape infer ... mismatch") in the retriage's: the control could not
    show the bug, and the analysis gave no root.  The variant raising is the swallowed error itself: its root.
    (A planted backend: which process raises is OpenVINO's history, not reproducible on demand.)"""
    backend = "tests.fake_backends:RaisesOnOneThread"
    g, feeds = one_node("Neg", [("input", np.ones((2, 3), np.float32))], {}, (2, 3))
    f = Finding("differential", "value", backend, "one-thread", "run", "6/6 elements differ", other="reference/default",
                output=0, details={"first_diverging": {"node": g.nodes[0].name, "op": "Neg", "output": g.outputs[0],
                                                       "kind": "value", "dtype": "float32"}})
    a = analyze_triggers(pool, f, g, feeds, f.details["first_diverging"], graph_signature(f, g))
    assert a.root == swallowed_root(backend), a.summary()
    assert a.swallowed is not None and "shapes conflict" in a.swallowed.message, a.summary()


def test_openvino_wrong_values_beside_an_error_its_one_thread_swallows_are_that_errors_root(pool) -> None:
    """A float64 Neg beside a quantized operator: OpenVINO's eltwise kernel has no float64 ("unsupported
    src_prc: f64"), which its default threads raise and one inference thread swallows, returning empty
    outputs, read at whichever operator is beside them (a Transpose in one case, a Greater in another).
    Folding the constants takes the Neg away and the bug with it, so before that variation the twin on the
    default threads is asked: its error, swallowed on one thread, is one root for both.  (With the threads
    asked in their place in the order, in a scratch copy, the roots were "Transpose with operands folded as
    initializers" and the comparisons' family.)"""
    need("openvino")
    roots = [recorded(pool, s).root for s in ("12e42b9079aa1a44", "6865c5ba2772fdfe")]
    assert roots == [swallowed_root("openvino")] * 2, roots


def test_openvino_readers_of_a_sequence_output_are_one_root_where_another_producer_passes(pool) -> None:
    """OpenVINO gives a ConcatFromSequence's output a dynamic element type: a HardSigmoid reading it fails
    to import with "Element not supported", a ReduceSumSquare with "Unsupported input type dynamic".  Each
    reader runs on a Reshape's output of the same run-time shape, so the producer's output as OpenVINO types
    it is the cause: one root, named by the producer.  A GlobalLpPool fails on an Expand's output and on
    the Reshape's alike ("First dimension of input data must be static"): the reader's own root."""
    need("openvino")
    hard_sigmoid, reduce_sum_square, pool_of_expand = (recorded(pool, s) for s in (
        "d99b7cffaee23f70", "c77c3cf0ddca9ca5", "6ab5bd1105f5b48c"))
    typed = ("OpenVINO crash: a reader of a tensor taken out of a sequence, which another producer's of its "
             "shape passes")
    assert hard_sigmoid.root == reduce_sum_square.root == typed, (hard_sigmoid.summary(), reduce_sum_square.summary())
    # an EyeLike reading it fails OpenVINO's compile, not its import (c46): the producer's typing, one root
    eye_like = recorded(pool, "77a94e0a6e68851a")
    assert eye_like.root == typed, eye_like.summary()
    # a Shrink reading a SequenceAt's output fails alike (c45): OpenVINO lowers the chain whole, one root
    shrink = recorded(pool, "05503c0465921eca")
    assert shrink.root == typed, shrink.summary()
    assert pool_of_expand.root == "OpenVINO import crash: GlobalLpPool on an input shaped at run time", (
        pool_of_expand.summary())


def test_openvino_split_lengths_fed_at_run_time_are_one_root_through_split_and_split_to_sequence(pool) -> None:
    """c45: OpenVINO's dynamic-shape float64 Split with its lengths fed at run time gives wrong parts, read
    through a Split and through a SplitToSequence+ConcatFromSequence (hand-checked: one defect).  Each
    vanishes with the lengths an initializer; the input both take them by, ``split``, names the family
    (``SHARED_FORM``).  Without it the roots were one per operator."""
    need("openvino")
    split, to_sequence = recorded(pool, "625f6d8535571587"), recorded(pool, "9a79bc02f37c48f3")
    assert split.root == to_sequence.root == "OpenVINO: Split/SplitToSequence with operands fed at run time", (
        split.summary(), to_sequence.summary())


def test_openvino_recurrent_layers_operands_form_is_one_root_for_the_three(pool) -> None:
    """c47: OpenVINO's dynamic-shape RNN and GRU compute the steps past each sequence's length; each vanishes
    with its initializers fed at run time.  The operands the form changes (W, R, B, sequence_lens) are inputs
    the three layers share by name, read through one recurrent input map: one root for the family
    (hand-checked one defect).  Without the shared names the roots were one per operator."""
    need("openvino")
    rnn, gru = recorded(pool, "33738b7cf9a3944f"), recorded(pool, "e245a92249b94f8d")
    assert rnn.root == gru.root == "OpenVINO: RNN/GRU/LSTM with operands folded as initializers", (
        rnn.summary(), gru.summary())


def test_auto_pad_same_is_varied_by_the_pads_it_means(pool) -> None:
    """c47: OpenVINO's dynamic-shape MaxPool pads SAME_LOWER (float32) and SAME_UPPER (int8) wrongly, alike.
    Omitting auto_pad makes neither a valid case (the kernel exceeds the input); the explicit pads it means
    give the same outputs, and the bug vanishes with them: one root, whichever SAME and element type.  (Without
    the variation, one had no root and the other was "MaxPool with integer inputs".)"""
    need("openvino")
    lower, upper = recorded(pool, "ec11cbee50ff3050"), recorded(pool, "d4a833fc9a257423")
    assert lower.root == upper.root == "OpenVINO: MaxPool with auto_pad SAME_UPPER or SAME_LOWER", (
        lower.summary(), upper.summary())


def test_same_pads_are_those_onnx_defines() -> None:
    """ONNX: output = ceil(size / stride), total = (output - 1) * stride + (kernel - 1) * dilation + 1 - size;
    the odd unit at the end for SAME_UPPER, at the beginning for SAME_LOWER."""
    from dlcfuzz.ir import INPUT_KIND, NODE_KIND, Node, TensorType, Value
    from dlcfuzz.oracle.triggers import _same_pads

    g = Graph(opset=18)
    g.add_value(Value("x", TensorType((1, 1, 5, 6), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType((1, 1, 3, 6), "float32"), NODE_KIND))
    node = Node("MaxPool", ["x"], ["y"], {"auto_pad": "SAME_UPPER", "kernel_shape": [4, 3], "strides": [2, 1]}, "n0")
    g.add_node(node)
    # height: ceil(5/2) = 3, total (3-1)*2 + 4 - 5 = 3 -> 1 and 2; width: total 3 - 1 = 2 -> 1 and 1
    assert _same_pads(g, node) == [1, 1, 2, 1]
    node.attrs["auto_pad"] = "SAME_LOWER"
    assert _same_pads(g, node) == [2, 1, 1, 1]
    node.attrs["dilations"] = [2, 1]  # height: (3-1)*2 + (4-1)*2 + 1 - 5 = 6 -> 3 and 3
    assert _same_pads(g, node) == [3, 1, 3, 1]


def test_iree_einsum_without_an_arrow_is_one_root_whatever_it_says(pool) -> None:
    """c45: IREE fails Einsum "h" (a permute of the wrong rank) and Einsum "..." (a ListConstruct it cannot
    legalize): hand-checked one defect, its implicit-output mode.  With the output written out ("h->h",
    "...->...") each compiles: one root."""
    need("iree")
    letter, dots = recorded(pool, "68a3135f62d01347"), recorded(pool, "f169629ccd24290b")
    assert letter.root == dots.root == "IREE: Einsum with an implicit output (no '->')", (
        letter.summary(), dots.summary())


@pytest.mark.parametrize(("equation", "shapes"), [
    ("ij,jk", [(2, 3), (3, 4)]), ("ba", [(2, 3)]), ("ii", [(3, 3)]), ("...ij,...jk", [(2, 2, 3), (2, 3, 1)]),
    ("kj,ij", [(2, 3), (4, 3)]),
])
def test_an_implicit_einsum_output_is_written_out_as_numpy_computes_it(equation, shapes) -> None:
    from dlcfuzz.oracle.triggers import explicit_equation

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in shapes]
    written = explicit_equation(equation)
    assert "->" in written and np.allclose(np.einsum(equation, *xs), np.einsum(written, *xs)), written


def test_openvino_attention_with_a_3d_mask_is_one_root_and_a_1d_mask_another(pool) -> None:
    """c46, c47: OpenVINO's com.microsoft.Attention with a past state and a 3-D mask_index fails its import in
    one case and gives a wrong shape in another (hand-checked one defect); omitting the mask, an optional
    input of ONNX Runtime's schema (ONNX's has none for that domain), makes each vanish.  A 1-D mask_index
    (starts and ends) wrong in another case is another branch of the converter: named by its rank, apart."""
    need("openvino")
    crash, shape, ends = (recorded(pool, s) for s in ("c26d67b72e8a79cf", "e03d21bc2ed42706", "7bfa07f2245e9cb5"))
    three = "OpenVINO: com.microsoft.Attention with a 3-D mask_index given"
    assert crash.root == shape.root == three, (crash.summary(), shape.summary())
    assert ends.root == "OpenVINO: com.microsoft.Attention with mask_index given", ends.summary()


def test_a_flag_is_named_by_its_value_whether_ignored_or_not(pool) -> None:
    """c48: OpenVINO's MaxPool with storage_order=1 gives transposed indices in one case (its outputs move with
    the flag) and, under dynamic shapes, row-major ones in another (they do not: "ignored").  A flag has one
    value off its default: ignoring it is one way of getting it wrong, one root."""
    need("openvino")
    shape, ignored = recorded(pool, "10c3d7dd58af6452"), recorded(pool, "d4a833fc9a257423.c48")
    assert shape.root == ignored.root == "OpenVINO: MaxPool with storage_order=1", (shape.summary(), ignored.summary())


def test_a_check_failing_in_a_reader_of_a_run_time_shape_keys_the_reader(pool) -> None:
    """c48: OpenVINO refuses a BatchNormalization of a 1-D input (ONNX allows it) at
    batch_norm_shape_inference.hpp:22: alone, after a Sum of a Compress, after a ConcatFromSequence.  The
    analyses find the producers right and their outputs shaped at run time: the reader is at fault, and its
    failed check is one key for the three (a wrong producer's would not be: the check is right to refuse)."""
    need("openvino")
    key = "OpenVINO import crash: BatchNormalization fails the check at batch_norm_shape_inference.hpp:22"
    for s in ("35c636df6e593ddb", "999b4beb5b7153a0", "688bda2f148056b9"):
        g, feeds = case(s)
        f = campaign_finding(s)
        a = recorded(pool, s)
        assert key in same_roots(f, g, feeds, a), (s, a.summary(), same_roots(f, g, feeds, a))


def test_tvm_empty_tensors_fed_at_run_time_are_one_root_whatever_reads_them(pool) -> None:
    """c49: TVM's importer reads a graph input's dimension 0 as a symbolic one; a Tile's zero-length repeats
    and an Expand's zero-length shape, fed at run time, fail on it with two messages (hand-checked one
    defect).  Only the empty inputs made initializers makes each vanish: one root, before the operands'
    form and the Expand's lower rank, which named them apart."""
    need("tvm")
    tile, expand = recorded(pool, "e58a6b6ace234091"), recorded(pool, "efc5603f096928b6")
    assert tile.root == expand.root == "TVM: an empty tensor fed at run time", (tile.summary(), expand.summary())


def test_openvino_reduce_axes_ignored_at_version_13_is_one_root_named_by_the_family(pool) -> None:
    """OpenVINO's ReduceLogSumExp and ReduceL1 at versions 13 to 17 ignore their axes.  ReduceLogSumExp's
    case finds the version and its sibling ReduceL1 showing it: "Reduce* at version 13".  A ScatterND that
    fails on ReduceL1's wrong shape is rooted at ReduceL1's own analysis, which finds no sibling: "ReduceL1
    at version 13", a name the family's root is known by (``same_roots``), so the two are one."""
    need("openvino")
    family, knock_on = recorded(pool, "dcacf4cfad9745a4"), recorded(pool, "d51aaea33a83183b")
    assert family.root == "OpenVINO: Reduce* at version 13" and "ReduceL1" in family.shown_in, family.summary()
    assert knock_on.root == "OpenVINO: ReduceL1 at version 13", knock_on.summary()
    g, feeds = case("dcacf4cfad9745a4")
    assert knock_on.root in same_roots(campaign_finding("dcacf4cfad9745a4"), g, feeds, family)


def test_openvino_reduce_noop_with_empty_axes_is_the_familys_whichever_operator_shows_it(pool) -> None:
    """OpenVINO makes every Reduce* with noop_with_empty_axes=1 and no axes an Identity (ReduceLogSum returns
    x, not log x).  The attribute off its default names the root; the reduce operators read it in one shared
    helper, so the root is the family's even where no sibling run shows it (ReduceSumSquare maps nothing
    first and comes out right)."""
    need("openvino")
    a = recorded(pool, "eb49b659ece107d6")
    assert a.root == "OpenVINO: Reduce* with noop_with_empty_axes=1", a.summary()


def test_openvino_error_swallowed_on_one_thread_is_rooted_where_the_twins_crash_is(pool) -> None:
    """ReduceLogSumExp at version 13 ignores its axes; the ReverseSequence reading its output fails on the
    compiler's default threads ("Incorrect input 'seq_lengths' values"), and one inference thread swallows
    that error, leaving a GlobalAveragePool beside them empty.  The twin's crash, analysed as a crash, is a
    knock-on of the ReduceLogSumExp's wrong shape: that producer's own root names the swallowed case too."""
    need("openvino")
    a = recorded(pool, "9ac07b498cdf484e")
    assert a.root == "OpenVINO: Reduce* at version 13", a.summary()
    assert any(t["cause"].endswith("(the twin's crash)") for t in a.tried), a.tried


def test_openvino_if_wrong_only_beside_unrelated_operators_is_one_root_named_by_the_if(pool) -> None:
    """OpenVINO's dynamic-shape If returns unwritten memory for a 64-bit payload, only beside some
    operators that share no value with it (a LayerNormalization in one case, an InstanceNormalization in
    another): the If's part alone is right, and so is an Identity of a fresh input in the If's place beside
    the same operator, so the If is needed and the bug is the If's beside any part: one root, also where an
    operator after the If in its part shows it (named by that operator, c43 had three roots).  The
    bystander side (the other part is the cause, and an Identity in the shown operator's place comes back
    wrong too) is test_triggers' LRN and Resize cases, which keep no root without the thread twin.  Without
    the variation, the two had none (their signatures, keyed on the neighbour, are two)."""
    need("openvino")
    # c43: an If read by a GatherND beside an InstanceNormalization, and by an Abs beside a GatherND, where the
    # divergence shows at the GatherND and the Abs: the If upstream of them in their part is tried first
    cases = ("282fe61449ff23f6", "157a2b08c879dab5", "c05bf95b5432357d", "2ed7d2449518645b")
    analyses = [recorded(pool, s) for s in cases]
    for a in analyses:
        assert a.kinds == [BESIDE] and a.family == RUN_TIME_CHOICE, a.summary()
        assert [t["result"] for t in a.tried if t["kind"] == BESIDE] == ["vanished", "vanished"], a.summary()
    assert [a.root for a in analyses] == [CHOSEN] * 4
    g, feeds = case("282fe61449ff23f6")
    f = campaign_finding("282fe61449ff23f6")
    without = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), skip=(BESIDE,))
    assert not without.root, without.summary()


def test_openvino_dynamic_lrn_against_its_default_is_the_root_its_threads_twin_raises(pool) -> None:
    """OpenVINO's dynamic-shape LRN fails ("Primitive descriptor was not found") on the compiler's threads
    and returns a wrong shape on one.  Against the static f32 (no static twin to ask) the threads twin's
    error named the root; against the default (bfloat16), whose static twin runs it right, "dynamic shapes"
    did, an operator-free root every dynamic-shape defect shares (c42: two roots for one LRN).  The threads
    twin is asked before the static one: one root, the error swallowed on one thread (whatever it says)."""
    need("openvino")
    a = recorded(pool, "927180b3fe7a09a3")
    assert a.kinds == [THREADS] and a.root == swallowed_root("openvino"), a.summary()
    g, feeds = case("927180b3fe7a09a3")
    f = campaign_finding("927180b3fe7a09a3")
    without = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), skip=(THREADS,))
    assert without.root == "OpenVINO: dynamic shapes", without.summary()


def test_openvino_resize_of_the_batch_axis_is_its_refusals_root_before_an_operands_form(pool) -> None:
    """OpenVINO's dynamic-shape Resize of the batch axis, its scales an initializer: wrong values on one
    thread, the Interpolate refusal on the compiler's threads; with the scales fed at run time it comes out
    right.  The operands' form was asked first and named "Resize with operands folded as initializers", a
    root apart from the refusal's (c44: two roots, one cause).  The threads twin is asked before an operand's
    form (after the values' causes): one root, the error swallowed on one thread."""
    need("openvino")
    a = recorded(pool, "c502c11bfe20a904")
    assert a.kinds == [THREADS] and a.root == swallowed_root("openvino"), a.summary()


def test_a_case_with_a_contrib_operator_is_varied_and_openvinos_lstm_peephole_is_one_root(pool) -> None:
    """OpenVINO ignores LSTM's peephole input P: where P feeds the LSTM alone it drops the input (a
    DroppedInput at import), where a com.microsoft.FastGelu reads P too it computes wrong values.  ONNX's
    inference and evaluator know no contrib operator, so every variation of the second case was invalid and
    it had no root (c44: two roots, one cause).  The contrib operator keeps its outputs' types where a
    variation leaves its inputs' alone: omitting P makes the bug vanish, and the operator's form is one
    root with the import crash's."""
    need("openvino")
    values = recorded(pool, "8f1a79a467a5e6a7")
    assert values.kinds == [OPTIONAL] and values.trigger == ["a 2-D P given"], values.summary()
    g, feeds = case("a1d509e1ed33e1df")
    f = campaign_finding("a1d509e1ed33e1df")
    crash = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
    assert values.root == crash.root == "OpenVINO: LSTM with a 2-D P given", (values.root, crash.root)


def test_openvino_prelu_with_a_lower_rank_slope_is_one_root_however_it_shows(pool) -> None:
    """OpenVINO takes PRelu's 1-D slope per channel (axis 1) where ONNX broadcasts it from the last axis, one
    way (unidirectionally): wrong values against the reference, a wrong shape under dynamic shapes, and, on
    the compiler's threads, an "Eltwise shape infer" error that one thread swallows (c43: three roots, one
    cause).  The slope brought to the input's rank by leading 1s makes each vanish, the twin's error too:
    one root, the operator's form.  (Before, only multidirectional broadcasting was aligned.)"""
    need("openvino")
    roots = [recorded(pool, s) for s in ("0b83d543fd14059d", "dd03707f2f60b8da", "4357ae8afda3c6fc")]
    want = "OpenVINO: PRelu with operands of a lower rank"
    assert [a.root for a in roots] == [want] * 3, [a.summary() for a in roots]
    assert roots[0].kinds == [RANKS], roots[0].summary()


def test_openvino_resize_ignoring_keep_aspect_ratio_policy_is_one_root_whatever_its_value(pool) -> None:
    """OpenVINO's Resize through sizes takes keep_aspect_ratio_policy not_smaller and not_larger alike as
    stretch, the default (c43: two roots, one per value).  The attribute set back to its default makes the
    bug vanish, and OpenVINO's outputs do not move with it where the baseline's do: the attribute is
    ignored, whichever value the case set."""
    need("openvino")
    smaller = recorded(pool, "5232d79d53814edd")
    assert smaller.root == "OpenVINO: Resize with keep_aspect_ratio_policy ignored", smaller.summary()
    g, feeds = case("5232d79d53814edd")
    g.nodes[0].attrs["keep_aspect_ratio_policy"] = "not_larger"  # sizes [13, 4] on 1x1: 4x4, not 4x13
    f = found(pool, g, feeds, OPENVINO)
    larger = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
    assert larger.root == smaller.root, larger.summary()


def test_tvm_resize_with_axes_is_one_root_through_scales_and_sizes(pool) -> None:
    """TVM's Resize reads scales and sizes as given for every axis, whatever ``axes`` lists: an IndexError
    at one line of its converter through scales, another at another line through sizes (c46: two roots,
    keyed by those lines).  ``axes`` has no default to set back; omitted, with the operands given for every
    axis (the others at their identity), the same Resize runs, and the bug vanishes: "Resize with axes given"
    for both."""
    need("tvm")
    through_scales, through_sizes = recorded(pool, "5e8f8ba3c797a6bc"), recorded(pool, "2e354f9f3b93d6f0")
    assert through_scales.root == "TVM: Resize with axes given", through_scales.summary()
    assert through_sizes.root == through_scales.root, through_sizes.summary()


def test_tvm_conv_transpose_ignoring_output_shape_is_rooted_by_that_attribute(pool) -> None:
    """TVM's ConvTranspose ignores ``output_shape`` (c43: two roots, one a Mod failing on its wrong shape,
    c46: no trigger).  The attribute has no default in ONNX's schema; omitted, the operator computes its own
    output shape, which TVM gets right: the root is the attribute given."""
    need("tvm")
    a = recorded(pool, "80f76616fdf74f1a")
    assert a.root == "TVM: ConvTranspose with output_shape given", a.summary()


def test_openvino_qlinearconv_per_channel_weights_are_one_root_as_an_error_and_as_wrong_values(pool) -> None:
    """OpenVINO's QLinearConv converter dequantizes the weights' per-channel scales and zero points along
    the input channels, not the output channels: where their counts differ the import fails ("The number of
    dequantization scale elements ... must match"), where they agree the values are wrong (c46: two roots, a
    converter's key and "negative values").  Made scalars (per-tensor), both vanish: one root."""
    need("openvino")
    error, values = recorded(pool, "77cea660d07e3e5e"), recorded(pool, "3576adacd042e59a")
    assert error.root == values.root == "OpenVINO: QLinearConv with per-axis quantization parameters", (
        error.summary(), values.summary())


def test_retriage_knows_a_recorded_crash_by_its_signature_today_too(pool, tmp_path: Path) -> None:
    """A crash's reduction records the signature the dlcfuzz of its campaign signed the reduced case with;
    where today's signs it otherwise (a message's list of names is one placeholder now), the trials must know
    it by today's too, or the control never shows it and nothing is analysed (c46: eight bugs)."""
    import shutil

    from dlcfuzz.cli.retriage import _triage

    need("openvino")
    sig = "77cea660d07e3e5e"
    bundle = tmp_path / "bugs" / sig
    (bundle / "reduced").mkdir(parents=True)
    for name in ("graph.json", "inputs.npz"):
        shutil.copy(DATA / sig / name, bundle / "reduced" / name)
    shutil.copy(DATA / sig / "graph.json", bundle / "graph.json")
    shutil.copy(DATA / sig / "finding.json", bundle / "finding.json")
    (bundle / "reduction.json").write_text(json.dumps({"signature": "0" * 16, "first_diverging": None,
                                                       "reproduced": True}))
    root, analysis, *_ = _triage(pool, tmp_path, {"signature": sig, "dir": f"bugs/{sig}"}, {}, None)
    assert root == "OpenVINO: QLinearConv with per-axis quantization parameters", analysis.summary()


def test_a_crash_three_producers_from_the_wrong_one_is_that_producers_root(pool) -> None:
    """OpenVINO's ReduceLogSumExp at version 13 ignores its axes and gives a scalar; two Sigmoids carry it to
    a Concat whose import fails on the rank (c46).  The Sigmoids, nearest the crash, are right alone; the
    ReduceLogSumExp, the third producer, is the wrong one: the crash is rooted where its bug is."""
    need("openvino")
    a = recorded(pool, "786b49dc0e3d5732")
    assert a.kinds == [KNOCK_ON] and a.root == "OpenVINO: Reduce* at version 13", a.summary()


def test_retriage_reads_recorded_iree_crashes_in_todays_words(tmp_path: Path, capsys) -> None:
    """c48 recorded two IREE SIGABRTs by the stack frames they were dumped with ("in mlir::torch::onnx_c:: <-
    mlir::iree_compiler::runIreecMain" and "in mlir::torch::onnx_c::"): a ReduceLogSumExp and a ReduceL2 of no
    axes, both "LLVM ERROR: dialect conversion attempted to replace a root operation that has no parent block"
    (hand-checked one defect), listed apart.  ``retriage --rejudge`` reads them in today's words: one root.  And
    a Slice that IREE says it leaves "unimplemented: dim is not constant" is a decline now, not a bug."""
    from dlcfuzz.cli import main
    from dlcfuzz.run.store import Store

    need("iree")
    out = tmp_path / "c"
    recorded_campaign(out, "iree", ("8eec0cb3a312d57d", "957fca5b505bf94a", "d75e038af00611d8"),
                      lambda sig: json.loads((DATA / sig / "reduction.json").read_text()))
    assert main(["retriage", str(out), "--rejudge", "--max-runs", "4", "--jobs", "1"]) == 0
    printed = capsys.readouterr().out
    assert "roots: 3 before, 1 after" in printed, printed
    assert "d75e038af00611d8: now declined" in printed
    assert main(["bugs", str(out)]) == 0
    assert "recorded crashes that read as declines now: 1" in capsys.readouterr().out
    store = Store(out)
    try:
        assert {r["signature"] for r in store.bugs("declined")} == {"d75e038af00611d8"}
    finally:
        store.close()


def test_tvm_float16_quantize_is_one_root_as_a_crash_and_as_wrong_values(pool) -> None:
    """TVM legalizes a float16 QuantizeLinear in float16: an int16 zero point's bound 65535 fails the compile
    ("Literal value 65535 exceeds maximum of float16", c48's 96270843) and float16's rounding gives wrong
    integers in another case (fae4cabe), hand-checked one defect.  Each needs the float16 inputs: one root,
    the operator's form, whichever way it shows."""
    need("tvm")
    crash, values = recorded(pool, "96270843c296f86a"), recorded(pool, "fae4cabedacd645a")
    assert crash.kinds == values.kinds == [ELEMENT_TYPE], (crash.tried, values.tried)
    assert crash.root == values.root == "TVM: QuantizeLinear with float16 inputs"
