"""Root keys found to name one root (issue 29): ``dedup.same_roots`` says which keys are a bug's root
under another name, ``dedup.join_roots`` records them in the store and moves the bugs already merged
under one of them.  Store-only: no compiler runs here (the analyses that give the keys run on the real
compilers in test_trigger_forms.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlcfuzz.ir import INPUT_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle.findings import CRASH, DIFFERENTIAL, Finding
from dlcfuzz.oracle.triggers import OPSET, SIBLING, Analysis
from dlcfuzz.run.dedup import join_roots, same_roots
from dlcfuzz.run.store import Store, TestRecord


def _store(tmp_path: Path, bugs: list[tuple[str, float]]) -> Store:
    """A store holding compiler bugs (signature, when found) of one backend, each its own root."""
    store = Store(tmp_path / "c")
    store.bind({"recorded": "for this test"})
    for i, (sig, _) in enumerate(bugs):
        store.commit(TestRecord(i, i, ["Relu"], "reference/default", True, 1, True, 0.1, 0, 0, 0, 0), [],
                     [(sig, CRASH, "exception", "tvm", "default", "compile", "x")],
                     [(sig, CRASH, "exception", "tvm", "default", "compile", f"message {sig}", "compiler",
                       f"bugs/{sig}")])
        store.merge_root(sig, sig)
    return store


def _listed(store: Store) -> set[str]:
    return {r["signature"] for r in store.bugs("compiler")}


def test_a_key_found_one_with_an_earlier_root_moves_its_bugs_there(tmp_path: Path) -> None:
    store = _store(tmp_path, [("a", 1), ("b", 2), ("c", 3)])
    try:
        assert _listed(store) == {"a", "b", "c"}
        # "b" and "c" merged under the key "op X": then a root "family F" is found to be "op X" too
        store.merge_root("b", "op X")
        store.merge_root("c", "op X")
        assert _listed(store) == {"a", "b"}
        assert join_roots(store, "family F", ["op X"]) == "family F"
        store.merge_root("a", "family F")
        assert _listed(store) == {"a"}, store.bug_entries()  # the first found lists the group
        # a later bug whose own key is "op X" joins the group by the recorded alias
        assert join_roots(store, "op X", []) == "family F"
    finally:
        store.close()


def test_keys_with_nothing_known_stay_apart(tmp_path: Path) -> None:
    store = _store(tmp_path, [("a", 1), ("b", 2)])
    try:
        assert join_roots(store, "a", []) == "a"
        assert join_roots(store, "b", []) == "b"
        assert _listed(store) == {"a", "b"}
    finally:
        store.close()


def _case(value: float) -> tuple[Graph, dict[str, np.ndarray]]:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2,), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType((2,), "float32"), "node"))
    g.add_node(Node("Relu", ["x"], ["y"], name="n0"))
    g.outputs = ["y"]
    return g, {"x": np.array([value, 1.0], np.float32)}


def test_two_crashes_on_one_reduced_case_share_a_key_and_another_case_does_not() -> None:
    one = Finding(CRASH, "exception", "tvm", "default", "compile", "AssertionError")
    other = Finding(CRASH, "exception", "tvm", "cpu", "build", "CodeGenVM cannot emit")
    keys = [same_roots(f, *_case(2.0), None)[0] for f in (one, other)]
    assert keys[0] == keys[1] and "crashes on the reduced case" in keys[0], keys
    assert same_roots(one, *_case(3.0), None)[0] != keys[0]  # another input: another case
    values = Finding(DIFFERENTIAL, "value", "tvm", "default", "run", "1/2 elements differ")
    assert same_roots(values, *_case(2.0), None) == []  # wrong values: a case can hold two


def test_a_family_root_is_one_with_each_operators_own_name_for_it() -> None:
    f = Finding(DIFFERENTIAL, "shape", "openvino", "f32", "run", "shape (1,), expected (2, 1)")
    a = Analysis(root="OpenVINO: Reduce* at version 13", trigger=["version 13"], kinds=[OPSET], family="Reduce*",
                 shown_in=["ReduceLogSumExp", "ReduceL1"],
                 tried=[{"kind": SIBLING, "cause": "ReduceL1", "result": "shows"}])
    assert same_roots(f, *_case(2.0), a) == ["OpenVINO: ReduceLogSumExp at version 13",
                                             "OpenVINO: ReduceL1 at version 13", "OpenVINO: Reduce* at version 13"]


def test_a_crash_with_the_words_a_twin_refused_is_that_refusals_root(tmp_path: Path) -> None:
    """OpenVINO's float64 eltwise kernel: a static compile fails with "unsupported src_prc: f64"; beside a
    QLinearConv on one thread the same error is swallowed, and the trigger analysis names that refusal's
    root.  The crash's words are that root's: one entry (a hand check of c41 found them one).  Words alone
    join nothing: two crashes whose words match, with no such root listed, stay apart (IREE's "failed to
    legalize operation '…'" once its quotes are stripped)."""
    from dlcfuzz.oracle.triggers import UNCHECKED
    from dlcfuzz.run.dedup import refused_root, root_keys

    said = ("Exception from src/inference/src/cpp/core.cpp:117:\nException from src/plugins/intel_cpu/src/nodes/"
            "kernels/x64/jit_uni_eltwise_generic.cpp:602:\nunsupported src_prc: f64\n")
    crash = Finding(CRASH, "exception", "openvino", "f32", "compile", said)
    g, inputs = _case(2.0)
    refused = f"OpenVINO: unsupported src_prc: f# {UNCHECKED}"
    assert refused_root(crash, g) == refused
    other = Finding(CRASH, "exception", "openvino", "f32", "compile", said.replace("src_prc", "dst_prc"))
    assert refused_root(other, g) != refused
    static = "4a01238c1ac7bbed"  # the crash's own signature: no readable root of its own
    store = _store(tmp_path, [("swallowed", 1), (static, 2), ("first", 3), ("second", 4)])
    try:
        store.merge_root("swallowed", refused)  # the swallowed one, rooted by its twin's refusal (THREADS)
        keys = root_keys(store, same_roots(crash, g, inputs, None), static, refused_root(crash, g))
        assert join_roots(store, static, keys) == refused
        store.merge_root(static, refused)
        assert _listed(store) == {"swallowed", "first", "second"}, store.bug_entries()
        legalize = Finding(CRASH, "exception", "iree", "O0", "compile", "error: failed to legalize operation "
                           "'torch.aten.mean.dim'")
        for sig, op in (("first", "mean.dim"), ("second", "cumsum")):
            f = Finding(CRASH, "exception", "iree", "O0", "compile", legalize.message.replace("mean.dim", op))
            h, fed = _case(5.0 if sig == "first" else 6.0)
            store.merge_root(sig, join_roots(store, sig, root_keys(store, same_roots(f, h, fed, None), sig,
                                                                   refused_root(f, h))))
        assert _listed(store) == {"swallowed", "first", "second"}, store.bug_entries()
    finally:
        store.close()


def test_a_knock_on_crash_is_no_key_of_the_converter_that_refused_it() -> None:
    """c45: OpenVINO's Reduce converter refused a ReduceLogSum's wrong shape (root "Reduce* at version 13")
    and a ConcatFromSequence's untyped output (root "a reader of ConcatFromSequence's output"); its check
    keyed both, and joined two defects.  A crash the analysis finds a knock-on keeps the case's key only."""
    from dlcfuzz.oracle.triggers import KNOCK_ON

    message = ("While validating ONNX node '<Node(ReduceMin): n1>': Check 'axes < rank' failed at "
               "src/frontends/onnx/frontend/src/op/reduce.cpp:61: Number of reduction axes is larger")
    f = Finding(CRASH, "exception", "openvino", "f32", "import", message, "RuntimeError")
    g, inputs = _case(2.0)
    converter = "openvino: frontend onnx converter reduce"
    assert converter in same_roots(f, g, inputs, None)
    knock_on = Analysis(root="OpenVINO import crash on ReduceLogSum's wrong shape",
                        trigger=["ReduceLogSum's wrong shape"], kinds=[KNOCK_ON], family="ReduceLogSum")
    keys = same_roots(f, g, inputs, knock_on)
    assert converter not in keys and len(keys) == 2 and "crashes on the reduced case" in keys[0], keys
    assert keys[1] == knock_on.root  # the analysis's own root, where a family's message names the bug's


def test_wrong_values_that_float32_operands_still_show_are_keyed_as_the_float32_bug() -> None:
    """c46: TVM's ScatterElements writes at the same wrong offsets for int64 and for float32 data, and the
    value signature keeps the data's type class: two roots.  Where the analysis fed the operator's integer
    operands as float32 and the bug still showed, the type is no cause: the bug's key is its float32 twin's
    signature.  Where that variation made it vanish (or was not tried), no such key."""
    from dlcfuzz.oracle.triggers import ELEMENT_TYPE
    from dlcfuzz.run.dedup import graph_signature

    g, inputs = _case(2.0)

    def wrong(dtype: str) -> Finding:
        f = Finding(DIFFERENTIAL, "value", "tvm", "default", "run", "5/12 elements differ", other="reference/default",
                    output=0)
        f.details["first_diverging"] = {"node": "n0", "op": "Relu", "output": "y", "kind": "value", "dtype": dtype}
        return f

    shows = Analysis(tried=[{"kind": ELEMENT_TYPE, "cause": "integer inputs", "result": "shows"}])
    vanished = Analysis(tried=[{"kind": ELEMENT_TYPE, "cause": "integer inputs", "result": "vanished"}])
    twin = graph_signature(wrong("float32"), g)
    assert graph_signature(wrong("int64"), g) != twin
    assert twin in same_roots(wrong("int64"), g, inputs, shows)
    assert twin not in same_roots(wrong("int64"), g, inputs, vanished)
    assert same_roots(wrong("float32"), g, inputs, shows) == []  # a float32 bug is keyed by its own signature


def _legalize(op: str, types: str, onnx_op: str) -> Finding:
    """An IREE compile crash in the words it gave in c47 (155bc528, 8825b53a, f169629c)."""
    return Finding(CRASH, "exception", "iree", "O0-generic", "compile",
                   f"error: failed to legalize operation '{op}' that was explicitly marked illegal: %127 = "
                   f"\"{op}\"(%arg2, %arg4) : {types} loc(\"<stdin>\":10:10)\n%6 = torch.operator "
                   f"\"onnx.{onnx_op}\"(%2, %arg4)", "IreeCompileError")


def test_a_computation_that_fails_to_legalize_is_one_key_whichever_operator_led_to_it() -> None:
    """IREE cannot lower torch.aten.matmul of a 1-D operand and one of rank 3 or more, reached through a
    MatMul (rank 4 by 1) and a MatMulInteger (1 by rank 5): hand-checked one defect, with no trigger to
    tell.  A constant or a list left unlegalized is what something upstream left: no key (an Einsum and a
    Pad, two defects, both leave a torch.prim.ListConstruct)."""
    g, inputs = _case(2.0)
    matmul = _legalize("torch.aten.matmul", "(!torch.vtensor<[4,4,5,3],f64>, !torch.vtensor<[3],f64>)", "MatMul")
    integer = _legalize("torch.aten.matmul", "(!torch.vtensor<[4],ui8>, !torch.vtensor<[4,1,5,4,5],si8>)",
                        "MatMulInteger")
    key = "IREE compile crash: torch.aten.matmul fails to legalize"
    assert key in same_roots(matmul, g, inputs, None) and key in same_roots(integer, g, inputs, None)
    bmm = _legalize("torch.aten.bmm", "(!torch.vtensor<[3,2],f32>, !torch.vtensor<[3,2,5],f32>)", "QLinearMatMul")
    assert key not in same_roots(bmm, g, inputs, None)
    listed = _legalize("torch.prim.ListConstruct", "(!torch.int) -> !torch.list<int>", "Einsum")
    assert not any("fails to legalize" in k for k in same_roots(listed, g, inputs, None))


def test_a_converter_key_of_another_operator_than_the_root_names_joins_nothing() -> None:
    """A case with two defects, a QLinearConv's per-axis scales (the analysis's root) and a GlobalLpPool whose
    converter refuses a dynamic batch (the report's section): the converter's key would fold every GlobalLpPool
    root under the QLinearConv's (c48: the lp_pool, reduce and gelu converters' keys all did)."""
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((1, 2, 3, 3), "float32"), INPUT_KIND))
    g.add_value(Value("q", TensorType((1, 2, 3, 3), "float32"), "node"))
    g.add_value(Value("y", TensorType((1, 2, 1, 1), "float32"), "node"))
    g.add_node(Node("QLinearConv", ["x"], ["q"], name="n0"))
    g.add_node(Node("GlobalLpPool", ["q"], ["y"], name="n1"))
    g.outputs = ["y"]
    message = ("Model wasn't fully converted. Failed operations detailed log:\n-- GlobalLpPool-20 with a message:\n"
               "While validating ONNX node '<Node(GlobalLpPool): n1>': Check 'data_shape[0].is_static()' failed at "
               "src/frontends/onnx/frontend/src/op/lp_pool.cpp:30\nSummary:\n")
    f = Finding(CRASH, "exception", "openvino", "f32", "import", message, "RuntimeError")
    key = "openvino: frontend onnx converter lp_pool"
    quant = Analysis(root="OpenVINO: QLinearConv with per-axis quantization parameters",
                     trigger=["per-axis quantization parameters"], kinds=["per-axis"], family="QLinearConv")
    assert key not in same_roots(f, g, {}, quant)
    pool_root = Analysis(root="OpenVINO: GlobalLpPool with dynamic shapes", trigger=["dynamic shapes"],
                         kinds=["static"], family="GlobalLpPool")
    assert key in same_roots(f, g, {}, pool_root) and key in same_roots(f, g, {}, None)


def test_a_family_message_root_is_one_with_the_trigger_root_of_the_same_analysis(tmp_path: Path) -> None:
    """c49: IREE fails a ReduceSumSquare of axes fed at run time with "sum.dim_IntList" and a ReduceMax with
    "torch.constant.bool"; both analyses find "Reduce* with operands fed at run time".  The first is rooted by
    its family's message (``family_crash_root`` comes first), the second by its trigger: two entries, until
    the analysis's root is a key of the first."""
    from dlcfuzz.oracle.triggers import INITIALIZER
    from dlcfuzz.run.dedup import reduced_root, root_keys

    g = Graph(opset=18)
    g.add_value(Value("x", TensorType((2, 3), "float32"), INPUT_KIND))
    g.add_value(Value("axes", TensorType((1,), "int64"), INPUT_KIND))
    g.add_value(Value("y", TensorType((1, 3), "float32"), "node"))
    g.add_node(Node("ReduceSumSquare", ["x", "axes"], ["y"], name="n0"))
    g.outputs = ["y"]
    f = Finding(CRASH, "exception", "iree", "O0-generic", "compile",
                "error: failed to legalize operation 'torch.aten.sum.dim_IntList' that was explicitly marked illegal\n"
                '%6 = torch.operator "onnx.ReduceSumSquare"(%arg0, %arg1)', "IreeCompileError")
    trigger = "IREE compile crash: Reduce* with operands fed at run time"
    a = Analysis(root=trigger, trigger=["operands fed at run time"], kinds=[INITIALIZER], family="Reduce*")
    own = reduced_root(f, g, None, "", "one", a)
    assert own != trigger  # the family's message names it
    store = _store(tmp_path, [("one", 1), ("two", 2)])
    try:
        store.merge_root("one", join_roots(store, own, root_keys(store, same_roots(f, g, {}, a), "one", "")))
        store.merge_root("two", join_roots(store, trigger, root_keys(store, [], "two", "")))
        assert len(_listed(store)) == 1, store.bug_entries()
    finally:
        store.close()


def _left(first_line: str, onnx_op: str) -> Finding:
    """An IREE compile crash in the words it gave in c45 and c48 (dea17362, cb6ca01d, 44126303, 00cf35cc)."""
    return Finding(CRASH, "exception", "iree", "O3-host", "compile",
                   f"error: {first_line}\n%9 = torch.operator \"onnx.{onnx_op}\"(%8)", "IreeCompileError")


def test_a_result_replaced_by_a_value_of_another_shape_is_one_key_whichever_operator() -> None:
    """IREE lowers an identity Transpose, a one-input Sum and a ReduceMin of no axes to their operand: fed a
    tensor shaped at run time where the result is typed static, each fails to materialize the cast
    (hand-checked one defect, c48).  A replacement between two static shapes is another key; so is a cast
    the LLVM translation met (a Hardmax read by two operators, with or without the note naming it)."""
    dynamic = "failed to legalize unresolved materialization from ('!torch.vtensor<[{}],f64>') to " \
              "('!torch.vtensor<[{}],f64>') that remained live after conversion (no type converter specified)"
    transpose = _left(dynamic.format("?", "4"), "Transpose")
    total = _left(dynamic.format("?,?", "3,15"), "Sum")
    keys = [set(same_roots(f, *_case(v), None)) for f, v in ((transpose, 2.0), (total, 3.0))]
    key = "IREE compile crash: a result replaced by a value of a shape known at run time only (unresolved " \
          "materialization)"
    assert key in keys[0] & keys[1], keys
    static = _left(dynamic.format("1,2", ""), "ReduceSumSquare")
    assert key not in same_roots(static, *_case(4.0), None)
    untranslated = "LLVM Translation failed for operation: builtin.unrealized_conversion_cast"
    noted = _left(untranslated, "Hardmax")
    bare = Finding(CRASH, "exception", "iree", "O0-generic", "compile", f"error: {untranslated}", "IreeCompileError")
    assert set(same_roots(noted, *_case(5.0), None)) & set(same_roots(bare, *_case(6.0), None))


def test_a_recorded_crash_in_an_earlier_wording_is_read_by_todays() -> None:
    """A crash an earlier dlcfuzz recorded by IREE's stack frames, which today's backend words by LLVM's fatal
    error: the control's crash of the bug's variant, phase and error type is the bug (``reworded``), and the
    later trials are read by its words, not by any crash of that type.  Without ``reworded`` (a campaign's own
    bug) the control does not show it."""
    from dataclasses import replace

    from dlcfuzz.run.dedup import graph_signature, trigger_shows

    g, _ = _case(2.0)
    recorded = Finding(CRASH, "signal", "iree", "O0-generic", "compile",
                       "iree-compile killed by SIGABRT in mlir::torch::onnx_c:: <- mlir::iree_compiler::runIreecMain",
                       "IreeCompilerCrash")
    today = replace(recorded, message="iree-compile killed by SIGABRT: LLVM ERROR: dialect conversion attempted "
                                      "to replace a root operation that has no parent block")
    other = replace(recorded, message="iree-compile killed by SIGABRT: LLVM ERROR: Unhandled type: ui16")
    elsewhere = replace(today, variant="O3-host")
    reworded: list[Finding] = []
    shows = trigger_shows(recorded, graph_signature(recorded, g), None, reworded)
    assert shows([elsewhere, today], g, "") and reworded == [today]
    assert shows([today], g, "runtime") and not shows([other], g, "runtime")
    strict = trigger_shows(recorded, graph_signature(recorded, g), None)
    assert not strict([today], g, "")
    first_only = trigger_shows(recorded, graph_signature(recorded, g), None, [])
    assert not first_only([elsewhere], g, "") and not first_only([today], g, "runtime")


def _tvm_check(message: str, frame: str) -> Finding:
    """A TVM compile crash with the C++ frame its FFI lists last, in the words c48 recorded (c6a94e3a, 0f962e4e)."""
    tb = ('  File "/x/tvm/ir/transform.py", line 171, in __call__\n    return _ffi_transform_api.RunPass(self, mod)\n'
          f'  File "/project/src/{frame}, in std::pair<tvm::Expr, tvm::Expr> f(const tvm::PrimExpr&)\n'
          f"tvm.error.InternalError: {message}\n")
    return Finding(CRASH, "exception", "tvm", "fused-generic", "compile", message, "InternalError", tb)


def test_one_pass_check_failing_is_one_key_whichever_operator_led_to_it() -> None:
    """TVM's VMShapeLower meets a symbolic shape it has not computed after a Tile (tile_dim_0 * tile_dim_1) and
    after a Range (4 * range_len_0) of operands fed at run time: hand-checked one defect (c48).  An operator's
    own check (its type inference in relax/op/) and a pass's refusal that is no failed check join nothing."""
    computed = "Check failed: (slot->value_computed) is false: PrimExpr {} in function main has not been computed"
    site = 'relax/backend/vm/vm_shape_lower.cc", line 508'
    tile = _tvm_check(computed.format("tile_dim_0 * tile_dim_1"), site)
    arange = _tvm_check(computed.format("T.int64(4) * range_len_0"), site)
    keys = [set(same_roots(f, *_case(v), None)) for f, v in ((tile, 2.0), (arange, 3.0))]
    assert keys[0] & keys[1] == {"TVM compile crash: the check at vm_shape_lower.cc:508"}, keys
    own = _tvm_check("Check failed: (x) is false: prelu expects", 'relax/op/op_common.cc", line 184')
    emit = _tvm_check("CodeGenVM cannot emit this Relax operator directly", 'relax/backend/vm/codegen_vm.cc", line 160')
    for f in (own, emit):
        assert not any("the check at" in k for k in same_roots(f, *_case(4.0), None))


def test_one_type_gap_in_one_compilers_words_is_one_key_whichever_operator_met_it() -> None:
    """TVM's Sign and Shrink of unsigned types each make a negative constant of the input's type and fail
    "cannot make uint from negative value -1" (c48's 6a179a00 and 186a5678, each rooted by its operator and
    "unsigned element types"): one key.  Other words under that trigger, or those words under another trigger
    (an operand's form), join nothing."""
    from dlcfuzz.oracle.triggers import RUNTIME, SIGNED

    words = "Check failed: (value >= 0) is false: cannot make uint from negative value -1"
    unsigned = ["unsigned element types"]

    def keys(op: str, message: str, kinds: list[str], trigger: list[str], value: float) -> set[str]:
        f = Finding(CRASH, "exception", "tvm", "unfused-generic", "compile", message, "InternalError")
        a = Analysis(root=f"TVM compile crash: {op} with {trigger[0]}", trigger=trigger, kinds=kinds, family=op)
        return set(same_roots(f, *_case(value), a))

    sign, shrink = keys("Sign", words, [SIGNED], unsigned, 2.0), keys("Shrink", words, [SIGNED], unsigned, 3.0)
    shared = sign & shrink
    assert len(shared) == 1 and "unsigned element types" in next(iter(shared)), (sign, shrink)
    assert not keys("Neg", "Check failed: cannot lower", [SIGNED], unsigned, 4.0) & shared
    assert not keys("Shrink", words, [RUNTIME], ["operands folded as initializers"], 5.0) & sign


def _one(op: str, value: float) -> tuple[Graph, dict[str, np.ndarray]]:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2,), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType((2,), "float32"), "node"))
    g.add_node(Node(op, ["x"], ["y"], name="n0"))
    g.outputs = ["y"]
    return g, {"x": np.array([value, 1.0], np.float32)}


def test_one_operator_failing_in_the_same_words_is_one_key_in_any_phase() -> None:
    """TVM's Resize divides by zero folding a constant: in its importer in one case, in FoldConstant in
    another (c48's 4ea0f895 and 40c28393, each rooted otherwise): one key.  Another operator failing in those
    words, or Resize in other words, joins nothing."""
    from dlcfuzz.oracle.triggers import ATTRIBUTE, RESIZE_FORMS

    words = "Check failed: fb->value != 0 (0 vs. 0) : Divide by zero"

    def keys(op: str, phase: str, message: str, value: float, analysis: Analysis | None = None) -> set[str]:
        f = Finding(CRASH, "exception", "tvm", "unfused-generic", phase, message, "InternalError")
        return set(same_roots(f, *_one(op, value), analysis))

    # the compile crash's analysis names Resize by its forms' family (a sibling run through sizes showed it)
    mode = Analysis(root=f"TVM: {RESIZE_FORMS} with coordinate_transformation_mode=align_corners",
                    trigger=["coordinate_transformation_mode=align_corners"], kinds=[ATTRIBUTE], family=RESIZE_FORMS)
    imported, compiled = keys("Resize", "import", words, 2.0), keys("Resize", "compile", words, 3.0, mode)
    shared = imported & compiled
    assert len(shared) == 1 and "Resize" in next(iter(shared)), (imported, compiled)
    assert not keys("Mod", "compile", words, 4.0) & shared
    assert not keys("Resize", "compile", "Check failed: index out of range", 5.0) & shared


def test_a_crash_on_a_dynamic_shape_is_one_root_whether_a_producer_or_the_variant_made_it() -> None:
    """OpenVINO's ConvTranspose with an output_shape crashes in the CPU plugin when its input's shape is unknown
    at compile time: after a ConstantOfShape (the knock-on analysis: "on an input shaped at run time") and on
    the dynamic-shape variant (the static twin compiles: "with dynamic shapes"), with two messages (c48's
    2692a5b2 and 328ccc97, hand-checked one defect): one key.  Another operator's dynamic shapes join nothing."""
    from dlcfuzz.oracle.triggers import STATIC, shaped_at_run_time_root

    f = Finding(CRASH, "exception", "openvino", "f32-dynamic", "compile",
                "Can not clone DnnlBlockedMemoryDesc with dims: [64, 2, ?]", "RuntimeError")
    dynamic = Analysis(root="OpenVINO compile crash: ConvTranspose with dynamic shapes", trigger=["dynamic shapes"],
                       kinds=[STATIC], family="ConvTranspose")
    g, inputs = _one("ConvTranspose", 2.0)
    assert shaped_at_run_time_root(f, "ConvTranspose") in same_roots(f, g, inputs, dynamic)
    assert shaped_at_run_time_root(f, "ConvTranspose") == \
        "OpenVINO compile crash: ConvTranspose on an input shaped at run time"
    other = Analysis(root="OpenVINO compile crash: Squeeze with dynamic shapes", trigger=["dynamic shapes"],
                     kinds=[STATIC], family="Squeeze")
    assert not any("on an input shaped at run time" in k for k in same_roots(f, *_one("Squeeze", 3.0), other)
                   if "ConvTranspose" in k)


def test_sliding_windows_failing_in_the_same_words_are_one_key() -> None:
    """IREE's global optimization fails a linalg.generic's inferred shape where a strided window's output extent
    is 1, for a Conv and an AveragePool alike (c48's 8938fa95 and 1f7ebd07; c49's 680a95ed, a QLinearConv:
    hand-checked one defect twice).  A window operator and another (a Gather) in those words share nothing."""
    words = ("error: 'linalg.generic' op inferred input/output operand #1 has shape's dimension #3 to be 5, but "
             'found 2\n%6 = torch.operator "onnx.{}"(%arg0)')

    def keys(op: str, value: float) -> set[str]:
        f = Finding(CRASH, "exception", "iree", "O0-generic", "compile", words.format(op), "IreeCompileError")
        return set(same_roots(f, *_one(op, value), None))

    conv, pool = keys("Conv", 2.0), keys("AveragePool", 3.0)
    assert len(conv & pool) == 1 and "sliding window" in next(iter(conv & pool)), (conv, pool)
    assert not keys("Gather", 4.0) & conv


def test_the_same_statement_under_a_report_section_and_alone_is_one_key() -> None:
    """OpenVINO's Compress without an axis squeezes a one-element input to a scalar: "Accessing out-of-range
    dimension", once under its conversion report's section and once alone (c48's 479dae1f and 2b572f78,
    hand-checked one defect): one key, by what the error says, not where."""
    report = ("Exception from src/inference/src/cpp/core.cpp:105:\nCheck 'false' failed at src/frontends/common_"
              "translators/src/unconverted_ops_report.cpp:151:\nFrontEnd API failed with OpConversionFailure:\nModel "
              "wasn't fully converted. Failed operations detailed log:\n-- Compress-21 with a message:\nWhile "
              "validating ONNX node '<Node(Compress): n6>': Exception from src/core/src/shape_util.cpp:66:\nAccessing "
              "out-of-range dimension\n\nSummary:\n-- Conversion is failed for: Compress-21\n")
    alone = ("Exception from src/inference/src/cpp/core.cpp:105:\nException from src/core/src/shape_util.cpp:66:\n"
             "Accessing out-of-range dimension\n\n")
    keys = [set(same_roots(Finding(CRASH, "exception", "openvino", "f32", "import", m, "RuntimeError"),
                           *_one("Compress", v), None)) for m, v in ((report, 2.0), (alone, 3.0))]
    assert "OpenVINO crash: Compress saying Accessing out-of-range dimension" in keys[0] & keys[1], keys


def test_a_float64_cast_left_to_the_vm_conversion_is_one_key_whichever_cast() -> None:
    """IREE's VM conversion has no pattern for a float64 truncf (a MaxPool's pad value) nor fptoui (a Range's
    size): c48's 30127f6a and 1c6dd52a, hand-checked one defect.  The same cast of f32 is no such key."""
    cast = "error: failed to legalize operation 'arith.{0}' that was explicitly marked illegal: %2 = \"arith.{0}\"" \
           "(%1) : ({1}) -> {2} loc(\"<stdin>\":12:12)"
    keys = [set(same_roots(Finding(CRASH, "exception", "iree", "O0-generic", "compile", cast.format(*c),
                                   "IreeCompileError"), *_case(v), None))
            for c, v in ((("truncf", "f64", "f32"), 2.0), (("fptoui", "f64", "i64"), 3.0))]
    assert keys[0] & keys[1] == {"IREE compile crash: a float64 cast left to the VM conversion"}, keys
    narrow = Finding(CRASH, "exception", "iree", "O0-generic", "compile", cast.format("fptoui", "f32", "i64"),
                     "IreeCompileError")
    assert not set(same_roots(narrow, *_case(4.0), None)) & keys[0]
