"""Trigger analysis (oracle/triggers.py) on the real compilers: each variation kind that a real compiler
shows cheaply makes its bug vanish, and names its root; two bugs with one trigger in different operators
get one root; ``dlcfuzz retriage`` folds them in a recorded campaign."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test, Variant
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle import Finding, criteria_for, judge, run_baseline, run_confirmed
from dlcfuzz.oracle.triggers import (
    ATTRIBUTE,
    ELEMENT_TYPE,
    EXACT_RANGE,
    INT32_RANGE,
    OPSET,
    SIBLING,
    SIGN,
    STATIC,
    THREADS,
    Analysis,
    root_name,
    siblings,
    swallowed_root,
    twin,
    variations,
)
from dlcfuzz.run.dedup import analyze_triggers, graph_signature, reduced_root

OV, TVM = ("openvino", "f32"), ("tvm", "unfused-generic")
FIRST = {"node": "n0", "kind": "value"}


def need(name: str) -> None:
    ok, why = load_backend(name).available()
    if not ok:
        pytest.skip(why)


def one_node(op: str, inputs: list[tuple[str, np.ndarray]], attrs: dict, out: tuple[int, ...], out_dtype: str = "",
             opset: int = 18) -> tuple[Graph, dict[str, np.ndarray]]:
    """A graph of one node ``n0``; ``inputs``: (kind, data), kind "input", "const" or "pinned"."""
    g, feeds = Graph(opset=opset), {}
    for i, (kind, data) in enumerate(inputs):
        a = np.asarray(data)
        g.add_value(Value(f"i{i}", TensorType(a.shape, a.dtype.name), CONST_KIND if kind == CONST_KIND else INPUT_KIND,
                          a if kind != INPUT_KIND else None))
        if kind != CONST_KIND:
            feeds[f"i{i}"] = a
    g.add_value(Value("y", TensorType(out, out_dtype or np.asarray(inputs[0][1]).dtype.name), NODE_KIND))
    g.add_node(Node(op, [f"i{i}" for i in range(len(inputs))], ["y"], attrs, "n0"))
    g.outputs = ["y"]
    return g, feeds


def found(pool, g: Graph, feeds: dict[str, np.ndarray], at: tuple[str, str]) -> Finding:
    """The one finding of the backend's variant on the case, judged as the campaign judges it."""
    backend, variant = at
    test = Test(to_bytes(g), g.to_json(), feeds)
    base = run_baseline(pool, test, g)
    got = run_confirmed(pool, backend, test, [variant]).outcomes
    _, described = pool.describe(backend)
    criteria = criteria_for({backend: {n: Variant(n, o) for n, o in described}}).for_graph(g, base.name)
    findings = judge({backend: got}, base.outputs, criteria).findings
    assert len(findings) == 1, (findings, got)
    return findings[0]


def analysis(pool, g: Graph, feeds: dict[str, np.ndarray], at: tuple[str, str], **kw) -> tuple[Finding, Analysis]:
    f = found(pool, g, feeds, at)
    return f, analyze_triggers(pool, f, g, feeds, FIRST, graph_signature(f, g), **kw)


def uint32_compare() -> tuple[Graph, dict[str, np.ndarray]]:
    return one_node("GreaterOrEqual", [(INPUT_KIND, np.array([3_000_000_000, 1, 5], np.uint32)),
                                       (INPUT_KIND, np.array([1, 2, 5], np.uint32))], {}, (3,), "bool")


def int64_min() -> tuple[Graph, dict[str, np.ndarray]]:
    return one_node("Min", [(INPUT_KIND, np.array([3_000_000_000, 1, 5], np.int64)),
                            (INPUT_KIND, np.array([2_900_000_000, 2, 5], np.int64))], {}, (3,))


def noop_reduce(op: str) -> tuple[Graph, dict[str, np.ndarray]]:
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.75  # negative ones: |x| and x² are not x
    return one_node(op, [(INPUT_KIND, x)], {"noop_with_empty_axes": 1}, (2, 3))


def test_openvino_computes_large_integers_in_int32(pool) -> None:
    """OpenVINO 2026.4's CPU plugin compares uint32 3e9 >= 1 as false: bringing the values into the
    int32 range makes it vanish (replacing uint32 by int64 does not), the root is the values'."""
    need("openvino")
    _, a = analysis(pool, *uint32_compare(), OV)
    assert a.kinds == [INT32_RANGE] and a.root == "OpenVINO: integer values beyond the int32 range", a.summary()
    assert a.runs <= 12 and a.seconds > 0
    # the variation disabled, nothing else makes it vanish: no trigger
    _, without = analysis(pool, *uint32_compare(), OV, max_runs=12, skip=(INT32_RANGE,))
    assert without.kinds != [INT32_RANGE] and without.root != a.root, without.summary()


def test_two_operators_with_one_trigger_have_one_root(pool) -> None:
    """GreaterOrEqual on uint32 and Min on int64 are two signatures (two operators), one root."""
    need("openvino")
    f1, a1 = analysis(pool, *uint32_compare(), OV)
    g2, feeds2 = int64_min()
    f2, a2 = analysis(pool, g2, feeds2, OV)
    assert graph_signature(f1, uint32_compare()[0]) != graph_signature(f2, g2)
    assert a1.root == a2.root == "OpenVINO: integer values beyond the int32 range"


def test_tvm_reduce_with_noop_is_one_root_for_the_family(pool) -> None:
    """TVM 0.27 returns the input of ReduceSumSquare / ReduceL1 with noop_with_empty_axes=1 and no axes
    unchanged (ONNX still maps each element: x², |x|): the attribute set back to its default makes it
    vanish, a sibling of the Reduce* family shows it too, so the root is the family's."""
    need("tvm")
    _, square = analysis(pool, *noop_reduce("ReduceSumSquare"), TVM)
    assert square.kinds == [ATTRIBUTE] and square.family == "Reduce*", square.summary()
    assert square.root == "TVM: Reduce* with noop_with_empty_axes=1"
    _, l1 = analysis(pool, *noop_reduce("ReduceL1"), TVM)
    assert l1.root == square.root, l1.summary()
    assert any(t["kind"] == SIBLING and t["result"] == "shows" for t in l1.tried)
    # without the attribute variation the trigger is not found: the root is not the attribute's
    _, without = analysis(pool, *noop_reduce("ReduceSumSquare"), TVM, skip=(ATTRIBUTE,))
    assert ATTRIBUTE not in without.kinds and without.root != square.root, without.summary()


def bool_reduce(op: str) -> tuple[Graph, dict[str, np.ndarray]]:
    x = np.array([[True, False, True], [False, False, True]])
    return one_node(op, [(INPUT_KIND, x), (CONST_KIND, np.array([1], np.int64))], {}, (2, 1), opset=20)


def test_tvm_reduce_max_and_min_of_bool_are_one_root_by_their_element_type(pool) -> None:
    """TVM 0.27 fails to compile ReduceMax and ReduceMin of bool (opset 20 admits it), each with its own
    message ("Cannot decide min_value for typeT.bool", "... max_value ..."): a 2-hour campaign listed them
    as two roots.  The input fed as float32 makes the crash vanish, the family's other member that takes
    bool shows it too (the siblings that take no bool are no variation), so the root is one."""
    need("tvm")
    at = ("tvm", "unfused-generic")
    got = {}
    for op in ("ReduceMax", "ReduceMin"):
        g, feeds = bool_reduce(op)
        f = found(pool, g, feeds, at)
        a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
        assert f.oracle == "crash" and a.kinds == [ELEMENT_TYPE] and a.family == "Reduce*", a.summary()
        other = "ReduceMin" if op == "ReduceMax" else "ReduceMax"
        assert [t["cause"] for t in a.tried if t["kind"] == SIBLING] == [other], a.tried
        got[op] = (f.message, a.root)
    assert got["ReduceMax"][0] != got["ReduceMin"][0]
    assert got["ReduceMax"][1] == got["ReduceMin"][1] == "TVM: Reduce* with bool inputs"
    # without the variation no cause is found: each keeps its own signature
    g, feeds = bool_reduce("ReduceMax")
    f = found(pool, g, feeds, at)
    without = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), skip=(ELEMENT_TYPE,))
    assert ELEMENT_TYPE not in without.kinds and without.root != got["ReduceMax"][1], without.summary()


def resize(form: str, factors: tuple[float, ...]) -> tuple[Graph, dict[str, np.ndarray]]:
    """Resize of a (1, 2, 2, 2) input by ``factors``, given as ``scales`` or as the ``sizes`` they make."""
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    out = tuple(int(d * f) for d, f in zip(x.shape, factors, strict=True))
    data = np.asarray(factors, np.float32) if form == "scales" else np.asarray(out, np.int64)
    g = Graph(opset=18)
    g.add_value(Value("x", TensorType(x.shape, "float32"), INPUT_KIND))
    g.add_value(Value("s", TensorType(data.shape, data.dtype.name), CONST_KIND, data))
    g.add_value(Value("y", TensorType(out, "float32"), NODE_KIND))
    g.add_node(Node("Resize", ["x", "", "s"] if form == "scales" else ["x", "", "", "s"], ["y"], {}, "n0"))
    g.outputs = ["y"]
    return g, {"x": x}


def test_tvm_resize_drops_the_batch_scale_through_scales_and_sizes_one_root(pool) -> None:
    """TVM 0.27's Resize keeps the batch dimension whether the batch is scaled through ``scales`` or
    through ``sizes``: no variation makes it vanish, the other form shows it, so both are the family's one
    root.  Without the sibling variation there is no root."""
    need("tvm")
    _, by_scales = analysis(pool, *resize("scales", (2, 1, 1, 1)), TVM)
    _, by_sizes = analysis(pool, *resize("sizes", (2, 1, 1, 1)), TVM)
    assert by_scales.root == by_sizes.root == "TVM: Resize (through scales or sizes) (shape mismatch)", (
        by_scales.summary(), by_sizes.summary())
    _, alone = analysis(pool, *resize("scales", (2, 1, 1, 1)), TVM, skip=(SIBLING,))
    assert alone.root == "", alone.summary()


def test_tvm_crash_on_a_large_trilu_k_is_the_int32_root_of_its_phase(pool) -> None:
    """TVM 0.27 fails to compile Trilu with k = 3e9 ("Literal value 3000000000 exceeds range of int32"):
    a crash whose root names the phase, and the same values' trigger."""
    need("tvm")
    g, feeds = one_node("Trilu", [(INPUT_KIND, np.arange(9, dtype=np.int64).reshape(3, 3)),
                                  (CONST_KIND, np.array(3_000_000_000, np.int64))], {}, (3, 3))
    f, a = analysis(pool, g, feeds, TVM)
    assert f.oracle == "crash" and a.kinds == [INT32_RANGE], a.summary()
    assert a.root == "TVM compile crash: integer values beyond the int32 range"


def test_openvino_trilu_k_beyond_float64s_exact_range_is_a_root_of_its_own(pool) -> None:
    """OpenVINO's static Trilu takes k through float64: k = 2**63 - 1 fails its import (a Select of
    inconsistent shapes); k brought to 2**52 (still beyond int32) makes it vanish, so its root is float64's
    exact range, not the int32 range of OpenVINO's dynamic Trilu below (which fails from k = 2**31 - 1).
    Without the narrower variation, the int32 one hides it."""
    need("openvino")
    g, feeds = one_node("Trilu", [(INPUT_KIND, np.ones((1, 2, 1), np.float32)),
                                  (CONST_KIND, np.array(2 ** 63 - 1, np.int64))], {}, (1, 2, 1))
    f, a = analysis(pool, g, feeds, OV)
    assert f.oracle == "crash" and f.phase == "import" and a.kinds == [EXACT_RANGE], (f, a.summary())
    assert a.root == "OpenVINO: integer values beyond float64's exact range", a.summary()
    _, without = analysis(pool, g, feeds, OV, skip=(EXACT_RANGE,))
    assert without.kinds == [INT32_RANGE] and without.root != a.root, without.summary()


def test_openvino_dynamic_trilu_needs_large_k_and_names_the_values_first(pool) -> None:
    """OpenVINO's dynamic-shape Trilu with k = 3e9 zeroes what it must keep; static, it folds k right.
    Both the values and the dynamic shapes are triggers; the values' cause comes first (one root with the
    int32 compare above).  With the values' variation disabled, the twin variant (static) makes it vanish."""
    need("openvino")
    g, feeds = one_node("Trilu", [(INPUT_KIND, np.arange(9, dtype=np.int64).reshape(3, 3)),
                                  (CONST_KIND, np.array(3_000_000_000, np.int64))], {}, (3, 3))
    _, a = analysis(pool, g, feeds, ("openvino", "f32-dynamic"))
    assert a.kinds == [INT32_RANGE] and a.root == "OpenVINO: integer values beyond the int32 range", a.summary()
    _, static = analysis(pool, g, feeds, ("openvino", "f32-dynamic"), skip=(INT32_RANGE,))
    assert static.kinds == [STATIC] and static.root == "OpenVINO: dynamic shapes", static.summary()
    _, neither = analysis(pool, g, feeds, ("openvino", "f32-dynamic"), skip=(INT32_RANGE, STATIC))
    assert STATIC not in neither.kinds, neither.summary()


def test_variations_of_forms_versions_and_variant_options() -> None:
    """Without a compiler: the attribute's default, a negative axis made positive, the neighbouring version
    with an attribute turned into an input, and the variant twin that differs in one option."""
    x = np.ones((2, 3), np.float32)
    g, feeds = one_node("ReduceMax", [(INPUT_KIND, x)], {"axes": [-1], "keepdims": 0}, (2,), opset=17)
    vs, _ = variations(g, feeds, FIRST, "f32", {"f32": {"dynamic": False}})
    kinds = {(v.kind, v.cause) for v in vs}
    assert (ATTRIBUTE, "keepdims=0") in kinds and (SIGN, "a negative axis") in kinds
    assert next(v for v in vs if v.kind == OPSET).cause == "version 13"
    g11, feeds11 = one_node("ReduceSum", [(INPUT_KIND, x)], {"axes": [1], "keepdims": 0}, (2,), opset=11)
    vs11, _ = variations(g11, feeds11, FIRST, "f32", {})
    at13 = next(v for v in vs11 if v.kind == OPSET).apply(g11, feeds11)  # ReduceSum-13 takes axes as an input
    assert at13 is not None
    h, _ = at13
    assert h.opset == 13 and "axes" not in h.nodes[0].attrs and len(h.nodes[0].inputs) == 2
    assert h.values[h.nodes[0].inputs[1]].data.tolist() == [1] and h.values["y"].type.shape == (2,)
    positive = next(v for v in vs if v.cause == "a negative axis").apply(g, feeds)
    assert positive is not None and positive[0].nodes[0].attrs["axes"] == [1]
    options = {"f32": {"config": {"T": 1}, "dynamic": False}, "f32-dynamic": {"config": {"T": 1}, "dynamic": True},
               "default": {"config": {}, "dynamic": False}}
    assert twin(options, "f32-dynamic", ("dynamic",)) == "f32"
    assert twin(options, "f32", ("config", "T")) == "default"  # the plugin's own number of threads
    assert twin(options, "f32-dynamic", ("config", "T")) == ""  # no dynamic variant with the default
    crash = Finding("crash", "exception", "tvm", "v", "import", "boom")
    assert root_name(crash, ["operands fed at run time"]) == "TVM import crash: operands fed at run time"


def test_values_are_brought_into_int32_in_order_and_resize_changes_form() -> None:
    """The int32 variation keeps the order of the large values across the case (3e9 > 2.9e9 stays so, in
    another input too); Resize through scales becomes Resize through sizes of the same output shape; the
    trigger analysis's root is the root a reduced bug merges by."""
    g, feeds = int64_min()
    vs, _ = variations(g, feeds, FIRST, "f32", {})
    _, hf = next(v for v in vs if v.kind == INT32_RANGE).apply(g, feeds)
    a, b = hf["i0"], hf["i1"]
    assert a[0] > b[0] and all(abs(int(x)) < 2 ** 31 for x in [*a, *b]) and a[1:].tolist() == [1, 5]
    x = np.ones((1, 2, 3, 4), np.float32)
    rg, rfeeds = one_node("Resize", [(INPUT_KIND, x), (CONST_KIND, np.zeros(0, np.float32)),
                                     (CONST_KIND, np.array([1, 1, 2, 0.5], np.float32))], {}, (1, 2, 6, 2))
    family, sibs = siblings(rg, FIRST)
    other = next(v for v in sibs if v.cause == "Resize's other form").apply(rg, rfeeds)
    assert family.startswith("Resize") and other is not None
    node = other[0].nodes[0]
    assert node.inputs[2] == "" and other[0].values[node.inputs[3]].data.tolist() == [1, 2, 6, 2]
    f = Finding("differential", "value", "openvino", "f32", "run", "")
    done = Analysis(root="OpenVINO: integer values beyond the int32 range")
    assert reduced_root(f, g, FIRST, "", "sig", done) == done.root
    assert reduced_root(f, g, FIRST, "", "sig", Analysis()) == "sig"


def _bundle(folder: Path, sig: str, f: Finding, g: Graph, feeds: dict[str, np.ndarray]) -> str:
    """A bug bundle as a campaign writes it, with its reduced case (here: the case itself)."""
    from dataclasses import asdict

    bundle = folder / "bugs" / sig
    (bundle / "reduced").mkdir(parents=True)
    (bundle / "finding.json").write_text(json.dumps({**asdict(f), "signature": sig}))
    for where in (bundle, bundle / "reduced"):
        (where / "graph.json").write_text(g.to_json())
        (where / "model.onnx").write_bytes(to_bytes(g))
        np.savez(where / "inputs.npz", **feeds)
    (bundle / "reduction.json").write_text(json.dumps({"signature": sig, "first_diverging": FIRST, "reproduced": True}))
    return f"bugs/{sig}"


def test_retriage_folds_a_recorded_campaigns_bugs_under_one_root(pool, tmp_path: Path, capsys) -> None:
    """A campaign recorded before the trigger analysis lists the uint32 compare and the int64 Min apart;
    ``dlcfuzz retriage`` re-runs the analysis on their reduced cases and lists them as one root.  A third bug,
    whose reduction found it under the compare's signature (a bystander's ``signed_as``) and whose case
    shows nothing to analyse, is that bug's root too: a bug's own signature is a key of its root."""
    need("openvino")
    from dlcfuzz.cli import main
    from dlcfuzz.run.store import Store, TestRecord

    out = tmp_path / "c"
    store = Store(out)
    store.bind({"recorded": "by an earlier dlcfuzz"})
    first = ""
    relu = one_node("Relu", [(INPUT_KIND, np.array([-1.0, 2.0], np.float32))], {}, (2,))
    for i, (g, feeds) in enumerate([uint32_compare(), int64_min(), relu]):
        f = found(pool, g, feeds, OV) if i < 2 else Finding("differential", "value", OV[0], OV[1], "run",
                                                           "a bystander", other="reference/default", output=0)
        sig = graph_signature(f, g) if i < 2 else "b" * 16
        where = _bundle(out, sig, f, g, feeds)
        if i == 2:  # OpenVINO's Relu is right: the analysis names nothing, and the reduction's signature stands
            (out / where / "reduction.json").write_text(json.dumps(
                {"signature": sig, "first_diverging": FIRST, "reproduced": True, "signed_as": first}))
        first = first or sig
        store.commit(TestRecord(i, i, [g.nodes[0].op], "reference/default", True, 1, True, 0.1, 0, 0, 0, 0), [],
                     [(sig, f.oracle, f.kind, f.backend, f.variant, f.phase, "x")],
                     [(sig, f.oracle, f.kind, f.backend, f.variant, f.phase, f.message, "compiler", where)])
    store.close()
    capsys.readouterr()
    assert main(["retriage", str(out)]) == 0
    text = capsys.readouterr().out
    assert "roots: 3 before, 1 after" in text, text
    assert "merged: OpenVINO: integer values beyond the int32 range" in text, text
    store = Store(out)
    try:
        assert len(store.bugs("compiler")) == 1 and store.merged() == 2
        meta = store.get_meta("triggers")
        assert meta["bugs"] == 3
        # the compiler's share of the analyses is metered apart from their wall time (the CPU breakdown)
        assert 0 < meta["compiler_seconds"] < meta["seconds"]
    finally:
        store.close()
    assert main(["retriage", str(tmp_path / "nowhere")]) == 2
    assert main(["retriage", str(out), "--jobs", "0"]) == 2


def test_an_operators_attribute_trigger_is_one_root_as_a_crash_in_any_phase_or_as_wrong_values():
    """TVM's pooling converter sizes SAME_LOWER with floor where ONNX says ceil: a wrong shape in one model,
    negative pads that fail the compile in another.  With the operator's attribute (or version) as the
    trigger, both are one root, named without the phase; an operand's form (fed at run time) and a trigger
    at no one operator keep the phase apart, not the crash's kind (OpenVINO's reference Tile crashes on run-time
    repeats where its CPU plugin's Tile computes wrong values: two defects)."""
    from dlcfuzz.oracle.triggers import ATTRIBUTE, OPSET, RUNTIME, root_name

    crash = Finding("crash", "exception", "tvm", "unfused-generic", "compile", "negative pads")
    late = Finding("crash", "signal", "tvm", "unfused-generic", "run", "SIGSEGV")
    wrong = Finding("differential", "shape", "tvm", "unfused-generic", "run", "mismatch")
    mode, version = ["auto_pad=SAME_LOWER"], ["version 10"]
    assert root_name(crash, mode, "MaxPool", [ATTRIBUTE]) == root_name(late, mode, "MaxPool", [ATTRIBUTE]) == \
        root_name(wrong, mode, "MaxPool", [ATTRIBUTE]) == "TVM: MaxPool with auto_pad=SAME_LOWER"
    assert root_name(crash, version, "MaxPool", [OPSET]) == root_name(wrong, version, "MaxPool", [OPSET]) == \
        "TVM: MaxPool at version 10"
    fed = ["operands fed at run time"]
    assert root_name(late, fed, "Tile", [RUNTIME]) == "TVM run crash: Tile with operands fed at run time"
    assert root_name(wrong, fed, "Tile", [RUNTIME]) == "TVM: Tile with operands fed at run time"
    assert root_name(crash, mode + fed, "MaxPool", [ATTRIBUTE, RUNTIME]).startswith("TVM compile crash: ")
    unsigned = ["unsigned element types"]
    assert root_name(crash, unsigned) == "TVM compile crash: unsigned element types"
    assert root_name(wrong, unsigned) == "TVM: unsigned element types"
    # an error in one case, a signal in another (ORT's fused MatMulIntegerToFloat of unsigned operands checks
    # per-channel scales in one, and reads past them in another): one root, apart from another phase's
    error = Finding("crash", "exception", "ort", "all", "run", "Per-Channel is not supported yet")
    signal = Finding("crash", "signal", "ort", "all", "run", "killed by SIGSEGV in run")
    assert root_name(error, unsigned, "MatMul", ["signed"]) == root_name(signal, unsigned, "MatMul", ["signed"]) != \
        root_name(crash, unsigned, "MatMul", ["signed"])


THREADS_DATA = Path(__file__).parent / "data" / "threads"


def test_openvino_on_one_thread_returns_what_it_refuses_on_more_one_root() -> None:
    """OpenVINO 2026.4's Resize of the batch axis: on more than one inference thread the CPU plugin raises
    "Interpolate ... only supports resize on spatial dimensions" (a decline); on the one thread every
    dlcfuzz variant sets, it swallows that error and returns an empty output.  No variant declares the
    default thread count: the analysis runs the variant with the option unset, whose refusal names the
    root, for the Resize alone and for an Atan beside it (two roots of a 30-minute campaign, c33).  Each
    case in workers of its own: a process whose one-thread run has swallowed the error raises it the next
    time."""
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    need("openvino")
    roots = []
    for sig in ("dd616b4172927c74", "5667aa6b02276a86"):
        g = Graph.from_json((THREADS_DATA / sig / "graph.json").read_text())
        with np.load(THREADS_DATA / sig / "inputs.npz") as z:
            feeds = {v.name: (v.data if v.pinned else z[v.name]) for v in g.inputs}
        pool = WorkerPool(PhaseLimits())
        try:
            f = found(pool, g, feeds, OV)
            a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
            assert f.oracle == "differential" and a.kinds == [THREADS], a.summary()
            assert a.root == swallowed_root("openvino"), a.root
            roots.append(a.root)
            # without the unset twin there is no thread variation, and no root
            without = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), skip=(THREADS,))
            assert not without.root, without.summary()
        finally:
            pool.close()
    assert roots[0] == roots[1]


def test_a_refusal_is_keyed_by_its_whole_words_whatever_the_node_is_named() -> None:
    """Without a compiler: OpenVINO's refusal names the node ('v8', 'v25'); its words key the root alike
    when the whole message is read, and differ when it is cut at the verdict's 300 characters (which is why
    the analysis reads the outcome's own message)."""
    from dlcfuzz.oracle.triggers import refusal_words

    def said(name: str) -> str:
        return ("RuntimeError: Exception from src/inference/src/cpp/infer_request.cpp:224:\n"
                "Exception from src/plugins/intel_cpu/src/node.cpp:823:\n"
                f"[CPU] Interpolate node with name '{name}' Exception from "
                "src/plugins/intel_cpu/src/nodes/interpolate.cpp:2513:\n"
                f"[CPU] Interpolate node with name '{name}' only supports resize on spatial dimensions"
                "(depth, height and width)\n\n\n")

    assert refusal_words(said("v8")) == refusal_words(said("v25"))
    assert "only supports resize on spatial dimensions" in refusal_words(said("v8"))
    assert refusal_words(said("v8")[:300]) != refusal_words(said("v25")[:300])


def test_openvino_lrn_error_swallowed_on_one_thread_is_its_root() -> None:
    """OpenVINO 2026.4's LRN under dynamic shapes: on its default threads the CPU plugin fails ("LRN node
    ... Primitive descriptor was not found", an error, not a refusal); on one thread it swallows it and
    returns empty outputs.  The twin's error, whatever kind, names the root (three roots of c33: the LRN
    alone, and beside an EmbedLayerNormalization and an Unsqueeze that took the blame); without the thread
    variation there is none."""
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    need("openvino")
    g = Graph.from_json((THREADS_DATA / "bbafb5ac2ce88e8a" / "graph.json").read_text())
    with np.load(THREADS_DATA / "bbafb5ac2ce88e8a" / "inputs.npz") as z:
        feeds = {v.name: (v.data if v.pinned else z[v.name]) for v in g.inputs}
    from dlcfuzz.run.reduce import finding_from_dict

    # as the campaign found it: against the static f32
    f = finding_from_dict(json.loads((THREADS_DATA / "bbafb5ac2ce88e8a" / "finding.json").read_text()))
    pool = WorkerPool(PhaseLimits())
    try:
        a = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g))
        without = analyze_triggers(pool, f, g, feeds, None, graph_signature(f, g), skip=(THREADS,))
    finally:
        pool.close()
    assert a.kinds == [THREADS] and a.root == swallowed_root("openvino"), a.summary()
    assert not without.root, without.summary()


@pytest.mark.parametrize(("operands", "attrs", "out"), [
    # roi and scales for axes [3, 2] of a 1x2x3x4 input: crop and resize the two inner axes
    ({1: np.array([0.1, 0.2, 0.9, 0.8], np.float32), 2: np.array([1.5, 2.0], np.float32)},
     {"axes": [3, 2], "coordinate_transformation_mode": "tf_crop_and_resize", "mode": "linear"}, (1, 2, 6, 6)),
    # sizes for axes [-2, 0], fed at run time
    ({3: np.array([5, 2], np.int64)}, {"axes": [-2, 0], "mode": "nearest"}, (2, 2, 5, 4)),
])
def test_resize_axes_omitted_with_operands_for_every_axis_is_the_same_operation(operands: dict, attrs: dict,
                                                                               out: tuple[int, ...]) -> None:
    """``axes given`` switched off: the operands listed per axis given for every axis, the others at their
    identity (roi [0, 1], scale 1, the input's length); ONNX Runtime computes the same outputs."""
    import onnxruntime as ort

    from dlcfuzz.oracle.triggers import _all_axes

    g, feeds = Graph(opset=19), {}
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    g.add_value(Value("x", TensorType(x.shape, "float32"), INPUT_KIND))
    feeds["x"] = x
    names = ["x", "", "", ""]
    for position, data in operands.items():
        names[position] = f"o{position}"
        pinned = data.dtype == np.int64  # sizes fed at run time (pinned), the others initializers
        kind = INPUT_KIND if pinned else CONST_KIND
        g.add_value(Value(names[position], TensorType(data.shape, data.dtype.name), kind, data))
        if pinned:
            feeds[names[position]] = data
    g.add_value(Value("y", TensorType(out, "float32"), NODE_KIND))
    g.add_node(Node("Resize", names[:max(operands) + 1], ["y"], attrs, "n0"))
    g.outputs = ["y"]
    h, hf = _all_axes(g.nodes[0])(g, feeds)
    assert "axes" not in h.nodes[0].attrs
    assert all(h.values[n].type.shape[0] in (4, 8) for n in h.nodes[0].inputs[1:] if n)

    def run(graph: Graph, fd: dict) -> np.ndarray:
        return ort.InferenceSession(to_bytes(graph), providers=["CPUExecutionProvider"]).run(None, fd)[0]

    want = run(g, feeds)
    assert want.shape == out
    np.testing.assert_allclose(run(h, hf), want, rtol=1e-6)


def test_per_axis_quantization_is_a_quantizing_operators_and_a_normalizations_scale_is_none() -> None:
    """c48 rooted a GroupNormalization "with per-axis quantization parameters": its 1-D ``scale`` made a scalar.
    Only an operator with a zero point quantizes; QLinearConv's 1-D w_scale is per-axis quantization."""
    from dlcfuzz.oracle.triggers import PER_AXIS_QUANT

    f32 = np.float32
    g, feeds = one_node("GroupNormalization", [("input", np.ones((1, 4, 2), f32)), ("const", np.ones(4, f32)),
                                               ("const", np.zeros(4, f32))], {"num_groups": 2}, (1, 4, 2), opset=21)
    vs, _ = variations(g, feeds, FIRST, "f32", {})
    assert PER_AXIS_QUANT not in {v.kind for v in vs}
    u8, i8 = np.uint8, np.int8
    g, feeds = one_node("QLinearConv", [("input", np.ones((1, 2, 3, 3), u8)), ("const", np.array(0.1, f32)),
                                        ("const", np.array(0, u8)), ("const", np.ones((2, 2, 1, 1), i8)),
                                        ("const", np.array([0.1, 0.2], f32)), ("const", np.zeros(2, i8)),
                                        ("const", np.array(0.1, f32)), ("const", np.array(0, u8))], {}, (1, 2, 3, 3),
                        out_dtype="uint8")
    vs, _ = variations(g, feeds, FIRST, "f32", {})
    assert PER_AXIS_QUANT in {v.kind for v in vs}
