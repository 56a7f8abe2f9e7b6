"""Signatures: one per distinct bug.  Messages normalized (numbers, addresses, paths, a test's own
names), compiler frames, crash / disruptive / value / migrated signatures, and titles, on findings
written out here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle import CRASH, DIFFERENTIAL, DISRUPTIVE, METAMORPHIC, Finding
from dlcfuzz.run.dedup import (
    compiler_frames,
    family_crash_root,
    graph_root_cause,
    graph_signature,
    migrated_signature,
    normalize,
    producer,
    reduced_root,
    root_cause,
    signature,
    title,
)

TVM_TB = '''Traceback (most recent call last):
  File "/work/dlcfuzz/run/worker.py", line 88, in run_phase
    out = fn()
  File "/usr/lib/python3/site-packages/tvm/relax/frontend/onnx/onnx_frontend.py", line 1201, in from_onnx
    return g.from_onnx(model)
  File "/usr/lib/python3/site-packages/tvm/relax/frontend/onnx/onnx_frontend.py", line 977, in _convert
    op = self._convert_operator(op_name, inputs, attr)
  File "/usr/lib/python3/site-packages/tvm/relax/op/nn/nn.py", line 455, in conv2d
    return _ffi_api.conv2d(data, weight)
  File "/usr/lib/python3/site-packages/tvm/_ffi/base.py", line 21, in raise_last_ffi_error
    raise py_err
tvm.error.InternalError: Check failed
'''


def crash(message: str, traceback: str = "", **kw) -> Finding:
    args = {"oracle": CRASH, "kind": "exception", "backend": "tvm", "variant": "fused", "phase": "compile",
            "message": message, "error_type": "InternalError", "traceback": traceback} | kw
    return Finding(**args)


# -- normalize -----------------------------------------------------------------------------------------
def test_normalize_strips_numbers_addresses_paths_and_names() -> None:
    assert normalize("bad axis 3 at 0x7ffd1234abcd") == "bad axis N at ADDR"
    assert normalize("cannot open /tmp/dlcfuzz-x1/model.onnx now") == "cannot open PATH now"
    assert normalize("value v12 of node n3 is wrong") == "value NAME of node NAME is wrong"
    assert normalize("tmp123 and shape dims 4x5") == "N and shape dims N"
    assert normalize("spaces   and\ttabs") == "spaces and tabs"
    # a test's own names, whatever they look like, as whole identifiers only
    assert normalize("input 'data' of conv_out", names=["data", "conv_out"]) == "input 'NAME' of NAME"
    assert normalize("metadata is fine", names=["data"]) == "metadata is fine"
    assert normalize("x.data is a field", names=["data"]) == "x.data is a field"
    assert normalize("conv_out_2 differs", names=["conv_out"]) == "N differs"  # not a whole name: a digit word
    assert normalize("Xa X", names=["X", "Xa"]) == "NAME NAME"
    # the longest name first: a name may extend another past a non-word character (ONNX names do)
    assert normalize("x.1 is bad", names=["x", "x.1"]) == "NAME is bad"
    assert normalize("no names", names=[""]) == "no names"


def test_normalize_keeps_the_first_informative_lines() -> None:
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/x/y.py", line 3, in f',
        "Exception from src/core/x.cpp:12:",
        "Check 'false' failed at src/frontends/onnx/frontend/src/core/graph.cpp:400:",
        "FrontEnd API failed with OpConversionFailure:",
        "",
        "first real line 1",
        "0: some backtrace frame",
        "Stack trace: deep",
        "second real line",
        "third real line",
    ])
    assert normalize(text) == "first real line N | second real line"
    assert normalize(text, lines=1) == "first real line N"
    assert normalize(text, lines=3) == "first real line N | second real line | third real line"
    assert normalize("") == "" and normalize(None) == ""  # type: ignore[arg-type]
    assert len(normalize("word " * 200)) == 300


def test_normalized_messages_are_equal_under_renaming_and_differ_between_errors() -> None:
    one = normalize("Op Conv (node n4) at 0xdeadbeef: kernel 3 > input 2 in /a/b.py", names=["x1"])
    two = normalize("Op Conv (node n17) at 0x1: kernel 5 > input 4 in /c/d/e.py", names=["x1"])
    assert one == two
    assert one != normalize("Op Pool (node n4) at 0xdeadbeef: kernel 3 > input 2 in /a/b.py")


# -- compiler frames ----------------------------------------------------------------------------------------
def test_compiler_frames_are_the_innermost_in_compiler_code() -> None:
    assert compiler_frames(TVM_TB) == ["onnx_frontend.py:_convert", "nn.py:conv2d", "base.py:raise_last_ffi_error"]
    assert compiler_frames(TVM_TB, n=1) == ["base.py:raise_last_ffi_error"]
    assert compiler_frames(TVM_TB, n=5)[0] == "onnx_frontend.py:from_onnx"  # worker.py is dlcfuzz's own
    assert compiler_frames("no frames here") == []
    for d in ("openvino", "onnxruntime", "torch", "onnx/reference", "tests"):
        assert compiler_frames(f'  File "/p/{d}/m.py", line 1, in f') == ["m.py:f"], d
    assert compiler_frames('  File "/p/dlcfuzz/m.py", line 1, in f') == []
    # faulthandler lists the innermost frame first
    dump = ("Fatal Python error: Segmentation fault\n\nCurrent thread (most recent call first):\n"
            '  File "/s/torch/inner.py", line 5, in deep\n  File "/s/torch/outer.py", line 9, in top\n')
    assert compiler_frames(dump) == ["outer.py:top", "inner.py:deep"]
    assert compiler_frames(dump.replace("Fatal Python error", "Fatal error"), n=1) == ["inner.py:deep"]
    assert compiler_frames(dump.replace("(most recent call first)", ""), n=1) == ["inner.py:deep"]


# -- signatures -----------------------------------------------------------------------------------------------
def test_crash_signatures_equal_under_renamed_values_and_differ_between_errors() -> None:
    a = signature(crash("conv in node n3 of 0x55aa: bad group 4 for 'images'", TVM_TB), names=["images"])
    b = signature(crash("conv in node n9 of 0x1: bad group 8 for 'input_0'", TVM_TB), names=["input_0"])
    assert a == b and len(a) == 16 and int(a, 16) >= 0
    base = crash("conv in node n3: bad group 4", TVM_TB)
    s = signature(base)
    variants = [
        crash("pool in node n3: bad group 4", TVM_TB),  # another message
        crash("conv in node n3: bad group 4", TVM_TB, error_type="ValueError"),
        crash("conv in node n3: bad group 4", TVM_TB, backend="openvino"),
        crash("conv in node n3: bad group 4", TVM_TB, phase="run"),
        crash("conv in node n3: bad group 4", TVM_TB, kind="signal"),
        crash("conv in node n3: bad group 4", TVM_TB.replace("in conv2d", "in conv3d")),  # other frames
    ]
    for f in variants:
        assert signature(f) != s, f
    # the variant is not part of the bug; a frame outside the compiler is not either
    assert signature(crash("conv in node n3: bad group 4", TVM_TB, variant="unfused")) == s
    assert signature(crash("conv in node n3: bad group 4", TVM_TB.replace("run_phase", "other"))) == s


def test_signature_format_is_stable() -> None:
    """Signatures are stored (known_bugs.toml, campaign folders): their hash input is a contract."""
    import hashlib

    def sha(*parts: str) -> str:
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]

    f = Finding(DISRUPTIVE, "signal", "ov", "cpu", "compile", "m",
                details={"violation": {"op": "Neg", "kind": "dtype", "constraint": "T excludes uint8"}})
    assert signature(f) == sha("ov", DISRUPTIVE, "signal", "compile", "Neg", "dtype")
    # a violation record without its fields, or none at all, signs like empty fields
    assert signature(Finding(DISRUPTIVE, "signal", "ov", "cpu", "compile", "m", details={"violation": {}})) == sha(
        "ov", DISRUPTIVE, "signal", "compile", "", "")
    assert signature(Finding(DISRUPTIVE, "signal", "ov", "cpu", "compile", "m")) == sha(
        "ov", DISRUPTIVE, "signal", "compile", "", "")
    assert migrated_signature(crash("x", phase="import"), "MaxPool", "fx:_pool") == sha(
        "migrated", "tvm", CRASH, "fx:_pool")
    value = Finding(DIFFERENTIAL, "value", "tvm", "fused", "run", "m", other="baseline")
    assert migrated_signature(value, "Relu") == sha("migrated", "tvm", DIFFERENTIAL, "Relu", "value")
    # no producer given: the same as an unknown one
    assert signature(value) == signature(value, "", "")


def test_disruptive_signatures_by_operator_and_kind_of_violation() -> None:
    def found(op: str, broken: str, constraint: str, **kw) -> Finding:
        args = {"oracle": DISRUPTIVE, "kind": "signal", "backend": "ov", "variant": "cpu", "phase": "compile",
                "message": f"boom {constraint}", "details": {"violation": {"op": op, "kind": broken,
                                                                          "constraint": constraint}}} | kw
        return Finding(**args)

    s = signature(found("Reciprocal", "dtype", "T excludes int32"))
    assert signature(found("Reciprocal", "dtype", "T excludes uint8")) == s  # the kind, not the value
    assert signature(found("Neg", "dtype", "T excludes uint8")) != s
    assert signature(found("Reciprocal", "rank", "rank in [1, 2]")) != s
    assert signature(found("Reciprocal", "dtype", "T excludes int32", backend="tvm")) != s
    assert signature(found("Reciprocal", "dtype", "T excludes int32", kind="timeout")) != s
    assert signature(found("Reciprocal", "dtype", "T excludes int32", phase="run")) != s
    assert signature(found("Reciprocal", "dtype", "T excludes int32", traceback=TVM_TB)) != s
    # not a crash signature of the same message
    assert signature(crash("boom T excludes int32", backend="ov", kind="signal", error_type="")) != s


def test_value_signatures_by_backend_kind_and_operator() -> None:
    def value(oracle: str = DIFFERENTIAL, **kw) -> Finding:
        args = {"oracle": oracle, "kind": "value", "backend": "tvm", "variant": "fused", "phase": "run",
                "message": "3/4 elements differ (max abs diff 0.5)", "other": "baseline", "output": 0} | kw
        return Finding(**args)

    s = signature(value(), "Conv", "float32")
    assert signature(value(variant="unfused", message="1/4 elements differ", output=2), "Conv", "float32") == s
    assert signature(value(), "Gemm", "float32") != s
    assert signature(value(kind="shape"), "Conv", "float32") != s
    assert signature(value(backend="ov"), "Conv", "float32") != s
    # one divergence: the oracle that saw it, what it was compared with and the width of the dtype do not split it
    assert signature(value(), "Conv", "float16") == s
    assert signature(value(METAMORPHIC, other="a"), "Conv", "float32") == s
    assert signature(value(other="x"), "Conv", "float32") == s
    assert signature(value(), "Cast", "int32") == signature(value(), "Cast", "uint32")
    assert signature(value(), "Cast", "int32") != signature(value(), "Cast", "bool")
    # located: the first diverging operator, not the producer of the differing output
    first = value(details={"first_diverging": {"op": "Conv", "kind": "value", "dtype": "float32"}})
    assert signature(first, "Relu", "float32") == s
    # a baseline issue is the baseline's, whichever backend saw it
    base = value(category="baseline", other="reference/default")
    assert signature(base, "Conv") == signature(value(category="baseline", other="reference/default", backend="ov"),
                                                 "Conv") != signature(value(), "Conv")


def test_dtype_classes() -> None:
    from dlcfuzz.run.dedup import dtype_class

    assert [dtype_class(d) for d in ("", "bool", "int8", "uint64", "int32", "float16", "float64")] == [
        "", "bool", "int", "int", "int", "float", "float"]


def graph_with_names(x: str, node: str) -> Graph:
    g = Graph()
    g.add_value(Value(x, TensorType((2,), "float32"), INPUT_KIND))
    g.add_value(Value(f"{x}_relu", TensorType((2,), "float32"), NODE_KIND))
    g.add_node(Node("Relu", [x], [f"{x}_relu"], name=node))
    g.set_leaf_outputs()
    return g


def test_producer_and_graph_signature() -> None:
    g = graph_with_names("images", "relu_block")
    assert producer(g, 0) == ("Relu", "float32")
    assert producer(g, 1) == ("", "") and producer(g, -1) == ("", "")
    g2 = Graph()
    g2.add_value(Value("x", TensorType((2,), "int64"), INPUT_KIND))
    g2.outputs = ["x"]  # a graph input passed through: no operator produced it
    assert producer(g2, 0) == ("", "int64")
    # value findings: the operator that computed the differing output of a one-node graph
    value = Finding(DIFFERENTIAL, "value", "tvm", "fused", "run", "m", other="baseline", output=0)
    neg = graph_with_names("images", "relu_block")
    neg.nodes[0].op = "Neg"
    assert graph_signature(value, g) != graph_signature(value, neg)
    assert graph_signature(value, g) == graph_signature(value, graph_with_names("pixels", "act"))
    # crash messages that name the graph's values and nodes sign alike across graphs
    one = crash("relu_block: input images has a bad shape")
    two = crash("act: input pixels has a bad shape")
    assert graph_signature(one, g) == graph_signature(two, graph_with_names("pixels", "act"))
    assert graph_signature(one, g) != graph_signature(two, g)


def test_migrated_signatures_by_conversion_function() -> None:
    tb = ('Traceback (most recent call last):\n  File "/s/tvm/relax/frontend/torch/fx.py", line 9, in _conv2d\n'
          '  File "/s/tvm/relax/frontend/torch/fx.py", line 99, in _pool\n')
    a = migrated_signature(crash("x", phase="import"), "MaxPool", "fx:_pool")
    assert a == migrated_signature(crash("y", phase="import"), "AveragePool", "fx:_pool")
    assert a != migrated_signature(crash("x", phase="import"), "MaxPool", "fx:_conv2d")
    assert a != migrated_signature(crash("x", phase="import", backend="ov"), "MaxPool", "fx:_pool")
    # several converters reported: the one innermost in the traceback, else all of them
    both = "fx:_conv2d,fx:_pool"
    assert migrated_signature(crash("x", tb, phase="import"), "Conv", both) == a
    assert migrated_signature(crash("x", phase="import"), "Conv", both) != a
    # converters named "module:function" (the function after the last colon), or bare
    assert migrated_signature(crash("x", tb, phase="import"), "Conv", "a:fx:_pool,plain") == migrated_signature(
        crash("y", phase="import"), "Conv", "a:fx:_pool")
    assert migrated_signature(crash("x", tb, phase="import"), "Conv", "plain,_pool") == migrated_signature(
        crash("y", phase="import"), "Conv", "_pool")
    # the innermost frontend frame is not a converter (shared frontend code): keyed on that frame
    inner_other = tb.replace("in _pool", "in _other")
    assert (migrated_signature(crash("x", inner_other, phase="import"), "Conv", both)
            != migrated_signature(crash("z", phase="start"), "Conv", "fx:_conv2d"))
    assert (migrated_signature(crash("x", inner_other, phase="import"), "Conv", both)
            == migrated_signature(crash("y", inner_other, phase="import"), "Gemm", "fx:_gemm"))
    # without a reported converter: the operator and the normalized message (crash) or the kind (values)
    ov = migrated_signature(crash("Col2Im node 7 failed", phase="import"), "Col2Im")
    assert ov == migrated_signature(crash("Col2Im node 9 failed", phase="import"), "Col2Im")
    assert ov != migrated_signature(crash("Col2Im node 9 failed", phase="import"), "Im2Col")
    assert ov != migrated_signature(crash("Col2Im is unknown", phase="import"), "Col2Im")
    assert ov != migrated_signature(crash("Col2Im node 7 failed", phase="import", error_type="X"), "Col2Im")
    assert migrated_signature(crash("bad images", phase="import"), "Col2Im", names=["images"]) == migrated_signature(
        crash("bad pixels", phase="import"), "Col2Im", names=["pixels"])
    diff = Finding(DIFFERENTIAL, "value", "ov", "cpu", "run", "1/2 differ", other="baseline")
    assert migrated_signature(diff, "Col2Im") == migrated_signature(
        Finding(DIFFERENTIAL, "value", "ov", "gpu", "run", "2/2 differ", other="baseline"), "Col2Im")
    assert migrated_signature(diff, "Col2Im") != migrated_signature(diff, "Im2Col")
    assert migrated_signature(diff, "Col2Im") != migrated_signature(
        Finding(DIFFERENTIAL, "shape", "ov", "cpu", "run", "", other="baseline"), "Col2Im")
    assert migrated_signature(diff, "Col2Im", "fx:_col") != migrated_signature(diff, "Col2Im")
    # a crash after the frontend is an optimizer or runtime bug: the campaign's own signature
    late = crash("fuse failed in n3", TVM_TB, phase="compile")
    assert migrated_signature(late, "Conv", "fx:_conv2d") == signature(late)
    late = crash("fuse failed for images", TVM_TB, phase="compile")
    assert migrated_signature(late, "Conv", names=["images"]) == signature(late, names=["images"])
    assert migrated_signature(late, "Conv", names=["images"]) != signature(late)
    assert migrated_signature(crash("x", phase="import"), "MaxPool", "fx:_pool") != signature(
        crash("x", phase="import"))


def test_titles() -> None:
    assert title(crash("bad 0x1f in node n2")) == "tvm compile exception: InternalError: bad ADDR in node NAME"
    assert title(crash("killed by SIGSEGV", kind="signal")) == "tvm compile signal: killed by SIGSEGV"
    value = Finding(DIFFERENTIAL, "value", "tvm", "fused", "run", "m", other="baseline")
    assert title(value, "Conv") == "tvm vs baseline: value mismatch at the output of Conv"
    assert title(value) == "tvm vs baseline: value mismatch"
    located = Finding(DIFFERENTIAL, "value", "tvm", "fused", "run", "m", other="reference/default",
                      details={"first_diverging": {"op": "Conv", "node": "n3", "kind": "shape"}})
    assert title(located, "Relu") == "tvm vs reference/default: shape mismatch first at Conv (n3)"
    meta = Finding(METAMORPHIC, "shape", "tvm", "fused", "run", "m", other="unfused")
    assert title(meta) == "tvm fused vs unfused: shape mismatch"
    v = {"op": "Neg", "constraint": "T excludes uint8"}
    dis = Finding(DISRUPTIVE, "signal", "ov", "cpu", "compile", "SIGSEGV (model breaks 'Neg: T excludes uint8')",
                  details={"violation": v})
    assert title(dis) == "ov compile signal on a Neg that breaks 'T excludes uint8': SIGSEGV"
    inc = Finding(DISRUPTIVE, "inconsistent", "ov", "b", "run", "m", other="a", details={"violation": v})
    assert title(inc) == "ov accepts a Neg that breaks 'T excludes uint8'; b and a disagree"
    assert len(title(crash("word " * 100, kind="signal"))) == 200
    long = "b" * 250
    assert len(title(Finding(DIFFERENTIAL, "value", long, "v", "run", "m"))) == 200
    assert len(title(Finding(DISRUPTIVE, "inconsistent", long, "b", "run", "m", other="a",
                             details={"violation": v}))) == 200
    assert len(title(Finding(DISRUPTIVE, "signal", long, "b", "run", "m", details={"violation": v}))) == 200
    # the message up to the "(model breaks ...)" note, spaces and all
    dis.message = "killed by SIGSEGV (model breaks 'Neg: T excludes uint8')"
    assert title(dis).endswith(": killed by SIGSEGV")
    # a finding without its violation record still gets a title
    assert title(Finding(DISRUPTIVE, "signal", "ov", "cpu", "compile", "boom")).startswith("ov compile signal on a ")


def test_openvino_node_dumps_are_keyed_on_the_failing_node_not_its_producers() -> None:
    """OpenVINO lists a failing node's arguments with the operations that produced them: which
    operation feeds the failing Reshape differs from test to test, the bug does not."""
    from dlcfuzz.run.dedup import normalize

    dump = ("While validating node 'opset1::Reshape Reshape_626 (opset1::Add n9[0]:f32[1,1,1,1], opset8::Slice "
            "Slice_624[0]:i64[1]) -> (dynamic[...])' with friendly_name 'Reshape_626':\nShape inference input "
            "shapes {[1,1,1,1],[1]}")
    other = dump.replace("opset1::Add n9[0]", "opset1::Exp n3[0]").replace("_626", "_12")
    assert normalize(dump) == normalize(other)
    select = dump.replace("opset1::Reshape", "opset1::Select")
    assert normalize(select) != normalize(dump)  # the failing node's own operation still tells bugs apart


def _one_node(op: str, attrs: dict, opset: int = 21) -> Graph:
    g = Graph(opset=opset)
    g.add_value(Value("x", TensorType((1, 1, 4, 4), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType((1, 1, 1, 1), "float32"), NODE_KIND))
    g.add_node(Node(op, ["x"], ["y"], attrs, "n0"))
    return g


def test_a_reduced_divergence_with_a_mode_has_one_root_cause_across_operators_of_one_schema() -> None:
    """Conv, ConvInteger and QLinearConv share their attribute schema (ONNX's operator docs list the
    same six attributes) and, in ORT, the code that reads it: a SAME_UPPER divergence in each is one
    root cause, whatever dtype it diverged in.  MaxPool's schema differs; a default mode, or a
    divergence without a mode, is no trigger; a crash is keyed by its message."""
    first = {"node": "n0", "kind": "value"}

    def root(op: str, attrs: dict, **kw) -> str:
        return graph_root_cause(Finding(DIFFERENTIAL, "value", "ort", "all", "run", "", **kw), _one_node(op, attrs),
                                first)

    same_upper = {"auto_pad": "SAME_UPPER", "strides": [4, 4]}
    conv = root("Conv", same_upper)
    assert conv and conv == root("ConvInteger", {**same_upper, "strides": [4, 3]}) == root("QLinearConv", same_upper)
    assert root("MaxPool", same_upper) not in ("", conv)
    assert root("Conv", {"auto_pad": "SAME_LOWER"}) not in ("", conv)
    assert root("Conv", {"auto_pad": "NOTSET", "strides": [4, 4]}) == ""  # the default mode
    assert root("Conv", {"strides": [4, 4]}) == "" and root("Relu", {}) == ""
    assert root("Conv", same_upper, details={"blamed_pass": "ConvAddFusion"}) == ""
    assert graph_root_cause(crash("boom"), _one_node("Conv", same_upper), first) == ""
    assert graph_root_cause(Finding(DIFFERENTIAL, "value", "ort", "all", "run", ""), _one_node("Conv", same_upper),
                            {"node": "n9"}) == ""  # not the graph's node


def test_reductions_over_an_empty_axis_have_one_root_cause() -> None:
    """The ten Reduce* share one schema (keepdims, noop_with_empty_axes); over an empty set each must
    give its identity, and TVM 0.27 gives none of them (9 of its 31 bugs in a 30-minute migration were
    the onnx-node *_empty_set tests, one per operator).  Operators without attributes share nothing."""
    tvm = Finding(DIFFERENTIAL, "value", "tvm", "", "run", "")
    empty, full = [[2, 0, 4], [1]], [[2, 3, 4], [1]]
    keys = {op: root_cause(tvm, op, 18, {"keepdims": 1}, empty) for op in ("ReduceMax", "ReduceSum", "ReduceL2")}
    assert len(set(keys.values())) == 1 and keys["ReduceMax"]
    assert root_cause(tvm, "ReduceMax", 18, {"keepdims": 1}, full) == ""
    assert root_cause(replace(tvm, backend="openvino"), "ReduceMax", 18, {}, empty) not in ("", keys["ReduceMax"])
    assert root_cause(tvm, "Add", 18, {}, empty) != root_cause(tvm, "Mul", 18, {}, empty)


def test_flags_and_the_attribute_form_of_a_later_input_are_triggers() -> None:
    """Two OpenVINO 2026.4 defects a 30-minute campaign listed several times each, checked on OpenVINO by
    hand: before opset 18 it ignores ReduceL1's, ReduceLogSum's and ReduceLogSumExp's ``axes`` attribute
    (they reduce every axis; opset 18 moved axes to an input), and it reduces where
    noop_with_empty_axes=1 asks for the identity.  Each is one root cause across the Reduce* family."""
    ov = Finding(DIFFERENTIAL, "shape", "openvino", "f32", "run", "")
    axes_form = {root_cause(ov, "ReduceL1", 16, {"axes": [2]}, [[1, 2, 1]]),
                 root_cause(ov, "ReduceLogSum", 13, {"axes": [1]}, [[2, 1]]),
                 root_cause(ov, "ReduceLogSumExp", 14, {"axes": [3], "keepdims": 1}, [[1, 1, 2, 1]])}
    assert len(axes_form) == 1 and "" not in axes_form
    # a flag beside a stronger trigger is what the reduced shapes needed: the axes attribute decides
    assert root_cause(ov, "ReduceLogSum", 14, {"axes": [-2, 2], "keepdims": 0}, [[1, 1, 1, 1, 1]]) in axes_form
    assert root_cause(ov, "ReduceL1", 18, {}, [[1, 2, 1]]) == ""  # axes is an input there: no attribute form
    value = replace(ov, kind="value")
    noop = {root_cause(value, "ReduceL1", 18, {"keepdims": 1, "noop_with_empty_axes": 1}, [[1, 2]]),
            root_cause(value, "ReduceLogSum", 19, {"noop_with_empty_axes": 1}, [[1, 1, 1]])}
    assert len(noop) == 1 and "" not in noop
    assert root_cause(value, "ReduceL1", 18, {"keepdims": 0}, [[1, 2]]) not in ("", *noop)
    # an empty axes tensor (a constant) is a form of the call, not a reduction over an empty set
    g = Graph(opset=19)
    g.add_value(Value("x", TensorType((1,), "float32"), INPUT_KIND))
    g.add_value(Value("axes", TensorType((0,), "int64"), CONST_KIND, np.zeros(0, np.int64)))
    g.add_value(Value("y", TensorType((1,), "float32"), NODE_KIND))
    g.add_node(Node("ReduceL2", ["x", "axes"], ["y"], {"noop_with_empty_axes": 1}, "n0"))
    assert graph_root_cause(value, g, {"node": "n0", "kind": "value"}) in noop
    # numbers that are not flags are no trigger: Conv's group, a MaxPool kernel
    assert root_cause(value, "Conv", 17, {"group": 2, "kernel_shape": [3, 3]}, [[1, 2, 4, 4]]) == ""


def test_a_flag_is_no_guess_where_a_trigger_analysis_tried_the_case_without_it() -> None:
    """OpenVINO 2026.4's NonMaxSuppression keeps fewer boxes than ONNX at iou_threshold 0, with
    center_point_box=1 and without it (a hand check of c40, three roots): where the trigger analysis ran
    (and could not show the flag needed), the flag is no root of its own; where none ran, it is still
    guessed."""
    from dlcfuzz.oracle.triggers import Analysis

    g = Graph(opset=11)
    for name, shape in (("boxes", (1, 3, 4)), ("scores", (1, 1, 3))):
        g.add_value(Value(name, TensorType(shape, "float32"), INPUT_KIND))
    g.add_value(Value("k", TensorType((1,), "int64"), CONST_KIND, np.array([3], np.int64)))
    g.add_value(Value("y", TensorType((3, 3), "int64"), NODE_KIND))
    g.add_node(Node("NonMaxSuppression", ["boxes", "scores", "k"], ["y"], {"center_point_box": 1}, "n3"))
    f = Finding(DIFFERENTIAL, "shape", "openvino", "f32", "run", "", category="compiler", other="ort/disable_all")
    first = {"node": "n3", "op": "NonMaxSuppression", "kind": "shape", "dtype": "int64"}
    guessed = graph_root_cause(f, g, first)
    assert guessed and graph_root_cause(f, g, first, flags=False) == ""
    assert reduced_root(f, g, first, "", "SIG") == guessed
    assert reduced_root(f, g, first, "", "SIG", Analysis()) == "SIG"


def test_a_crash_root_is_named_by_the_reduced_cases_operators_and_its_value_trigger_first() -> None:
    """OpenVINO's import report lists every operator it failed to convert; the unreduced test's (a bundle's
    finding.json) named a HardSigmoid, a ReduceL1 and a Trilu, and the reduction kept the Trilu alone, whose
    constant k beyond 2**53 OpenVINO takes through float64.  The ReduceL1's family names no root of the
    Trilu; and a trigger in how the backend reads values (one root in any phase) comes before a family's
    message, an operator's form after it."""
    from dlcfuzz.oracle.triggers import ATTRIBUTE, EXACT_RANGE, Analysis

    report = ("Model wasn't fully converted. Failed operations detailed log:\n-- ReduceL1-22 with a message:\n"
              "While validating ONNX node '<Node(ReduceL1): n7>':\nUnsupported input type dynamic\n-- Trilu-22 with a "
              "message:\nWhile validating ONNX node '<Node(Trilu): n0>': Argument shapes are inconsistent.")
    f = crash(report, backend="openvino", variant="f32", phase="import", error_type="RuntimeError")
    assert family_crash_root(f) and family_crash_root(f, ops={"ReduceL1", "Abs"}) == family_crash_root(f)
    assert family_crash_root(f, ops={"Trilu"}) == ""
    g = Graph(opset=22)
    g.add_value(Value("x", TensorType((1, 4), "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType((1,), "float32"), NODE_KIND))
    g.add_node(Node("ReduceL1", ["x"], ["y"], {}, "n7"))
    exact = Analysis(root="OpenVINO: integer values beyond float64's exact range", kinds=[EXACT_RANGE])
    form = Analysis(root="OpenVINO import crash: ReduceL1 with keepdims=0", kinds=[ATTRIBUTE])
    assert reduced_root(f, g, None, "", "SIG", exact) == exact.root
    assert reduced_root(f, g, None, "", "SIG", form) == family_crash_root(f)


def test_a_converter_or_check_root_counts_only_the_reduced_cases_operators() -> None:
    """An unreduced test's import report (a bundle's finding.json, which retriage reads) has a section per
    operator OpenVINO could not convert; the reduced case kept one of them.  The DequantizeLinear
    converter's failed check keyed six roots of c44 as one (a Resize, a SkipLayerNormalization, ...) where
    the reduced cases held no DequantizeLinear: only the sections of the reduced case's operators count."""
    from dlcfuzz.run.dedup import check_root, converter_root

    report = ("Model wasn't fully converted. Failed operations detailed log:\n"
              "-- DequantizeLinear-21 with a message:\nException from src/frontends/onnx/frontend/src/op/"
              "dequantize_linear.cpp:182:\nThe number of dequantization scale elements '3' must match\n"
              "-- Resize-19 with a message:\nCheck 'axes.size() == 2' failed at src/core/shape_inference/include/"
              "interpolate_shape_inference.hpp:48:\nWhile validating node 'Interpolate'\n\nSummary:\n")
    f = crash(report, backend="openvino", variant="f32", phase="import", error_type="RuntimeError")

    def one(op: str) -> Graph:
        g = Graph(opset=21)
        g.add_value(Value("x", TensorType((1, 4), "float32"), INPUT_KIND))
        g.add_value(Value("y", TensorType((1, 4), "float32"), NODE_KIND))
        g.add_node(Node(op, ["x"], ["y"], {}, "n0"))
        g.outputs = ["y"]
        return g

    assert converter_root(f, one("Resize")) == ""
    assert converter_root(f, one("DequantizeLinear")) == "openvino: frontend onnx converter dequantize_linear"
    assert converter_root(f) == converter_root(f, one("DequantizeLinear"))  # no case: the whole message
    assert check_root(f, one("Resize")).endswith("Resize fails the check at interpolate_shape_inference.hpp:48")
    assert check_root(f, one("Tile")) == ""
    both = one("Resize")
    both.add_value(Value("z", TensorType((1, 4), "float32"), NODE_KIND))
    both.add_node(Node("DequantizeLinear", ["x"], ["z"], {}, "n1"))
    assert converter_root(f, both) == ""  # two of the case's operators fail: no one converter's root


def test_a_complaint_repeated_per_element_is_one_message() -> None:
    """Inductor's assert_size_stride lists each dimension whose stride differs: the same fault (the meta
    kernel of aten.unique_dim gives contiguous strides) over a rank-4 and a rank-3 tensor is one message;
    another complaint stays apart."""
    tail = ("\nError in op: torch.ops.aten.unique_dim.default\nThis error most often comes from a incorrect fake "
            "(aka meta) kernel for a custom op.")
    four = ("expected size 3==3, stride 20==60 at dim=0; expected size 4==4, stride 5==15 at dim=1; expected size "
            "5==5, stride 1==3 at dim=2; expected size 3==3, stride 60==1 at dim=3" + tail)
    three = ("expected size 4==4, stride 10==30 at dim=0; expected size 5==5, stride 2==6 at dim=1; expected size "
             "3==3, stride 40==2 at dim=2" + tail)
    other = "expected size 4==4, stride 10==30 at dim=0; expected storage offset 0==2" + tail
    assert normalize(four) == normalize(three) != normalize(other)
    assert signature(crash(four, error_type="AssertionError")) == signature(crash(three, error_type="AssertionError"))


def test_a_list_of_names_is_one_placeholder() -> None:
    """OpenVINO drops a model input it does not read: an LSTM's peephole P alone in one case, P and a
    SequenceAt's position in another (c46).  The names the message lists are the test's: one message."""
    one = "OpenVINO's model has 3 inputs for the graph's 4: it dropped v18"
    two = "OpenVINO's model has 3 inputs for the graph's 5: it dropped v18, v27"
    names = ["v18", "v27"]
    assert normalize(one, names=names) == normalize(two, names=names) == (
        "OpenVINO's model has N inputs for the graph's N: it dropped NAME")
    assert normalize("expected a, got b", names=["a", "b"]) == "expected NAME, got NAME"  # not one list


def test_iree_errors_quoting_one_operation_with_other_attributes_are_one_bug() -> None:
    """IREE 3.13's cast error on onnx.Compress, as a 30-minute campaign listed it three times: with an
    axis attribute of 0, of -1, and without one. The quoted operation's attributes are dropped; the
    operation stays, so another operation's error is another bug."""
    head = ("error: 'tensor.cast' op operand type 'tensor<?xf32>' and result type 'tensor<3xf32>' are cast "
            "incompatible\n%12 = torch.operator \"onnx.Compress\"(%3, %4) ")
    tail = ": (!torch.vtensor<[3,4],f32>, !torch.vtensor<[2],i1>) -> !torch.vtensor<[?,4],f32> loc(unknown)"
    texts = [head + "{torch.onnx.axis = 0 : si64} " + tail, head + "{torch.onnx.axis = -1 : si64} " + tail, head + tail]
    sigs = {signature(Finding(CRASH, "exception", "iree", "O3-host", "compile", t, "IreeCompileError")) for t in texts}
    assert len(sigs) == 1
    other = texts[0].replace("onnx.Compress", "onnx.Gather")
    assert signature(Finding(CRASH, "exception", "iree", "O3-host", "compile", other, "IreeCompileError")) not in sigs


def test_iree_link_errors_of_one_missing_library_are_one_bug() -> None:
    """IREE 3.13 cannot link float64 Sin, Tanh and Cos (a 30-minute campaign listed each): one missing
    math library. A value that is one result of several (%5#1) is named like any other value."""
    sigs = {signature(Finding(CRASH, "exception", "iree", "O3-host", "compile",
                              f"iree-lld: error: undefined symbol: {fn}", "IreeCompileError"))
            for fn in ("sin", "tanh", "cos")}
    assert len(sigs) == 1
    quoted = ("error: 'tensor.cast' op operand type 'tensor<?xf32>' and result type 'tensor<3xf32>' are cast "
              "incompatible\n%12 = torch.operator \"onnx.Compress\"({}, %4) : (!torch.vtensor<[3],f32>)")
    assert normalize(quoted.format("%3#1")) == normalize(quoted.format("%3"))


def test_iree_errors_of_one_operation_with_other_operands_are_one_bug() -> None:
    """IREE 3.13 cannot lower a matmul of a 1-D integer operand: a 2-hour campaign listed it once per
    MatMulInteger operand list (with or without its zero points, %none where one is left out). The
    operands and their types are dropped; the operation stays, so MatMul's error is another bug."""
    head = ("error: failed to legalize operation 'torch.aten.matmul' that was explicitly marked illegal: %227 = "
            "\"torch.aten.matmul\"(%213, %226) : (!torch.vtensor<[4],si32>, !torch.vtensor<[4,5,4,1],si32>) -> "
            "!torch.vtensor<[4,5,1],si32> loc(\"<stdin>\":10:10)\n")
    ops = ("(%arg4, %2, %0, %1) : (!torch.vtensor<[4],ui8>, !torch.vtensor<[4,5,4,1],ui8>, !torch.vtensor<[],ui8>, "
           "!torch.vtensor<[1],ui8>)", "(%arg4, %28) : (!torch.vtensor<[4],ui8>, !torch.vtensor<[4],si8>)",
           "(%arg3, %arg4, %none, %2) : (!torch.vtensor<[5],si8>, !torch.vtensor<[5,5,2],si8>, !torch.none, "
           "!torch.vtensor<[1],si8>)")
    texts = [head + f"%6 = torch.operator \"onnx.MatMulInteger\"{o} -> !torch.vtensor<[4,5,1],si32>" for o in ops]
    sigs = {signature(Finding(CRASH, "exception", "iree", "O3-host", "compile", t, "IreeCompileError")) for t in texts}
    assert len(sigs) == 1
    other = texts[1].replace("onnx.MatMulInteger", "onnx.MatMul")
    assert signature(Finding(CRASH, "exception", "iree", "O3-host", "compile", other, "IreeCompileError")) not in sigs


def test_iree_errors_quoting_an_operation_with_other_results_used_are_one_bug() -> None:
    """IREE 3.13's arith.truncf left illegal by a MaxPool of SAME_LOWER padding (c48's 6d742d1b and 30127f6a):
    quoted as "%6 = ..." of one result where its Indices go unused, "%8:2 = ... -> (...)" where they are read.
    One operation: one bug; another operation's error is another."""
    head = ("error: failed to legalize operation 'arith.truncf' that was explicitly marked illegal: %2 = "
            "\"arith.truncf\"(%1) : (f64) -> f32 loc(callsite(\"<stdin>\":10:10 at \"<stdin>\":10:10))\n")
    one = head + ('%6 = torch.operator "onnx.MaxPool"(%0) {torch.onnx.auto_pad = "SAME_LOWER"} : '
                  '(!torch.vtensor<[1,1,1,1],f32>) -> !torch.vtensor<[1,1,1,1],f32>')
    both = head + ('%8:2 = torch.operator "onnx.MaxPool"(%5) {torch.onnx.auto_pad = "SAME_LOWER"} : '
                   '(!torch.vtensor<[1,1,1,1],f32>) -> (!torch.vtensor<[1,1,1,1],f32>, !torch.vtensor<[1,1,1,1],si64>)')
    sigs = {signature(Finding(CRASH, "exception", "iree", "O0-generic", "compile", t, "IreeCompileError"))
            for t in (one, both)}
    assert len(sigs) == 1
    other = one.replace("onnx.MaxPool", "onnx.AveragePool")
    assert signature(Finding(CRASH, "exception", "iree", "O0-generic", "compile", other, "IreeCompileError")) \
        not in sigs

def test_a_report_is_keyed_past_failures_that_follow_from_unknown_dimensions() -> None:
    """OpenVINO 2026.4 reports (from a default campaign): a QLinearMatMul that fails on its scale's axis
    leaves an ArgMin "Cannot get length of dynamic dimension"; the bug is the QLinearMatMul's, listed
    alone or with its consequences."""
    def report(*blocks: str) -> str:
        body = "".join(f"-- {op} with a message:\n{text}\n\n" for op, text in blocks)
        return ("Exception from src/inference/src/cpp/core.cpp:105:\nFrontEnd API failed with OpConversionFailure:\n"
                f"Model wasn't fully converted. Failed operations detailed log:\n{body}Summary:\n-- Conversion is "
                f"failed for: {', '.join(op for op, _ in blocks)}\n")

    argmin = ("ArgMin-19", "While validating ONNX node '<Node(ArgMin): n3>': Exception from src/core/src/dimension.cpp:"
                           "208:\nCannot get length of dynamic dimension")
    qmatmul = ("QLinearMatMul-19", "While validating ONNX node '<Node(QLinearMatMul): n2>': Check 'ov::util::"
                                   "is_axis_valid(axis, r)' failed at src/frontends/onnx/frontend/src/utils/common.cpp:"
                                   "230:\nn2Parameter axis 1 out of tensor range [-1, 0]")
    assert normalize(report(argmin, qmatmul)) == normalize(report(qmatmul)) == "N axis N out of tensor range [DIMS]"


def test_crashes_that_need_the_same_producers_have_one_root_cause() -> None:
    """OpenVINO 2026.4 (campaign, reduced): ConcatFromSequence after SplitToSequence gives an output of
    dynamic element type, on which LeakyRelu fails with "Element not supported" and ReduceSum with
    "Unsupported input type dynamic".  The crashing node is the one the message names; a crash at a node
    fed only by graph inputs, or needing other producers, has another root (or none)."""
    from dlcfuzz.run.dedup import crash_upstream_root, reduced_root

    def graph(upstream: str, downstream: str) -> Graph:
        g = Graph(opset=17)
        x = TensorType((2, 3), "float32")
        g.add_value(Value("x", x, INPUT_KIND))
        g.add_value(Value("s", x, NODE_KIND))
        g.add_value(Value("y", x, NODE_KIND))
        g.add_node(Node(upstream, ["x"], ["s"], {"axis": 0} if "Split" in upstream else {}, "n0"))
        g.add_node(Node(downstream, ["s"], ["y"], {}, "n1"))
        g.outputs = ["y"]
        return g

    seq = "SplitToSequence+ConcatFromSequence"
    leaky = crash("While validating ONNX node '<Node(LeakyRelu): n1>': Element not supported", backend="openvino")
    reduce = crash("While validating ONNX node '<Node(ReduceSum): n1>': Unsupported input type dynamic",
                   backend="openvino")
    root = crash_upstream_root(leaky, graph(seq, "LeakyRelu"))
    assert root and root == crash_upstream_root(reduce, graph(seq, "ReduceSum"))
    assert crash_upstream_root(leaky, graph("Relu", "LeakyRelu")) not in ("", root)
    assert reduced_root(leaky, graph(seq, "LeakyRelu"), None, "", "own") == root
    # the message names the first node, which no node feeds: no upstream to blame
    at_input = crash("While validating ONNX node '<Node(Relu): n0>': boom", backend="openvino")
    assert crash_upstream_root(at_input, graph("Relu", "LeakyRelu")) == ""
    assert reduced_root(at_input, graph("Relu", "LeakyRelu"), None, "", "own") == "own"
    # through an operator in between, the source is blamed
    g = graph(seq, "Flatten")
    g.add_value(Value("z", TensorType((2, 3), "float32"), NODE_KIND))
    g.add_node(Node("LeakyRelu", ["y"], ["z"], {}, "n2"))
    g.outputs = ["z"]
    assert crash_upstream_root(replace(leaky, message=leaky.message.replace("n1", "n2")), g) == root
    # a node named n10 is not n1
    assert crash_upstream_root(crash("at n10: boom", backend="openvino"), graph(seq, "LeakyRelu")) == ""


def test_a_triton_compile_error_is_keyed_on_what_is_wrong_not_on_the_kernel_listed() -> None:
    """Triton lists the kernel it failed to compile ("at 11:4:", its source, a caret) before the error:
    two kernels with one error are one bug (seen on an H200: int8 scatter_add through an ONNX graph and
    through a torch program)."""
    def failure(kernel: str) -> str:
        return (f"CompilationError: at 11:4:\ndef {kernel}(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):\n"
                f"    xnumel = 12\n    tmp0 = tl.load(in_ptr0 + (x2), xmask)\n"
                f"    tl.atomic_add(out_ptr0 + (x1 + 4*tmp0), tmp2, xmask, sem='relaxed')\n    ^\n"
                f"atomic_add does not support int8\n")
    one, two = normalize(failure("triton_poi_fused_scatter_add_3")), normalize(failure("triton_poi_fused_index_put_0"))
    assert one == two
    assert one.startswith("CompilationError: atomic_add does not support")


def test_crashes_raised_through_one_converter_line_have_one_root() -> None:
    """TVM's Expand converter reads a shape it takes for static at one line: a campaign listed two crashes
    with two messages from it.  Their root is that line; another line of the converter is another root,
    and a crash after the import has no frontend site."""
    from dlcfuzz.run.dedup import frontend_site_root

    def crash(message: str, line: int, phase: str = "import") -> Finding:
        site = "/venv/lib/python3.11/site-packages/tvm/relax/frontend/onnx/onnx_frontend.py"
        tb = (f'Traceback (most recent call last):\n  File "{site}", line 6637, in _convert_operator\n'
              f'  File "{site}", line {line}, in _impl_v13\n  File "{site}", line {line}, in <listcomp>\n'
              f'  File "/venv/lib/python3.11/site-packages/tvm/ir/expr.py", line 57, in __getitem__\n')
        return Finding(CRASH, "exception", "tvm", "unfused-generic", phase, message, "TypeError", tb)

    subscript = crash("Type relax.ShapeType does not support subscript", 3500)
    no_value = crash("'Var' object has no attribute 'value'", 3500)
    assert signature(subscript) != signature(no_value)
    assert frontend_site_root(subscript) == frontend_site_root(no_value) == \
        "tvm: frontend onnx_frontend.py:3500 (_impl_v13)"
    assert frontend_site_root(crash("'Var' object has no attribute 'value'", 3512)) != frontend_site_root(no_value)
    assert frontend_site_root(crash("x", 3500, phase="compile")) == ""
    # the dispatcher's line calls every converter: no site (a retriage merged three unrelated crashes by it)
    dispatcher = replace(no_value, traceback=no_value.traceback.replace(", in _impl_v13", ", in _convert_operator"))
    assert frontend_site_root(dispatcher) == ""


def test_a_cpp_converters_failed_check_roots_its_crashes_by_the_converter() -> None:
    """OpenVINO's GlobalLpPool converter requires a static batch (lp_pool.cpp:30) and a static channel
    (:31): two checks of one converter, one root; a failure in core shape inference, which every converter
    reaches, roots nothing (bundles of a 30-minute campaign, tests/data/knock_on/SIGNATURE/finding.json)."""
    import json
    from pathlib import Path

    from dlcfuzz.run.dedup import converter_root
    from dlcfuzz.run.reduce import finding_from_dict

    data = Path(__file__).parent / "data" / "knock_on"
    roots = [converter_root(finding_from_dict(json.loads((data / s / "finding.json").read_text())))
             for s in ("6ab5bd1105f5b48c", "d0cb72d632bd29a8", "b7291b096ad958f2")]
    assert roots == ["openvino: frontend onnx converter lp_pool"] * 2 + [""], roots


def test_one_check_failing_under_one_operator_roots_its_crashes() -> None:
    """OpenVINO's LayerNormalization converter builds a Reshape that core shape inference refuses at
    reshape_shape_inference.hpp:360, for a scalar input in one bundle and a rank-4 one (beside a QLinearMatMul
    whose conversion fails elsewhere) in another: the messages differ, both reduced to the one
    LayerNormalization, and the root is that operator with the innermost check of its own section (two
    bundles of a 30-minute campaign, tests/data/knock_on/SIGNATURE/)."""
    import json
    from pathlib import Path

    from dlcfuzz.run.dedup import check_root, reduced_root
    from dlcfuzz.run.reduce import finding_from_dict

    data = Path(__file__).parent / "data" / "knock_on"
    want = "OpenVINO import crash: LayerNormalization fails the check at reshape_shape_inference.hpp:360"
    roots = []
    for sig in ("b7291b096ad958f2", "1308527b99491fe1"):
        f = finding_from_dict(json.loads((data / sig / "finding.json").read_text()))
        reduced = Graph.from_json((data / sig / "reduced" / "graph.json").read_text())
        assert check_root(f, reduced) == want
        roots.append(reduced_root(f, reduced, None, "", sig))
    assert roots == [want, want], roots
    # where a trigger analysis names the root otherwise (c42: "LayerNormalization with axis=0"), the check
    # is a key of that root too (``same_roots``): the campaign joins the two
    from dlcfuzz.oracle.triggers import ATTRIBUTE, Analysis
    from dlcfuzz.run.dedup import same_roots

    f = finding_from_dict(json.loads((data / "b7291b096ad958f2" / "finding.json").read_text()))
    reduced = Graph.from_json((data / "b7291b096ad958f2" / "reduced" / "graph.json").read_text())
    axis = Analysis(root="OpenVINO: LayerNormalization with axis=0", trigger=["axis=0"], kinds=[ATTRIBUTE])
    assert want in same_roots(f, reduced, {}, axis)
    # a case of several operators: the one whose section of the report it is; with no section, the case's one
    # sink; with two sinks, no operator is known: no such root
    from dataclasses import replace

    f = finding_from_dict(json.loads((data / "1308527b99491fe1" / "finding.json").read_text()))
    two = Graph.from_json((data / "1308527b99491fe1" / "reduced" / "graph.json").read_text())
    two.nodes = two.nodes * 2
    assert check_root(f, two) == want
    bare = replace(f, message="Check 'x' failed at src/core/shape_inference/include/reshape_shape_inference.hpp:360")
    assert check_root(bare, two) == ""
    assert check_root(bare, reduced) == want


def test_a_wrong_shape_at_one_operator_is_one_bug_whatever_the_element_type() -> None:
    """OpenVINO's Clip of scalar bounds gives a scalar where ONNX keeps the input's shape, for an int32 input and
    for a float32 one (c48's 44580c0a and 954c6259, listed apart): one bug.  Wrong values are still signed by
    their class of element type (an integer overflow is not a float rounding)."""
    def signed(kind: str, dtype: str) -> str:
        first = {"op": "Clip", "node": "n3", "kind": kind, "dtype": dtype}
        return signature(Finding(DIFFERENTIAL, kind, "openvino", "f32", "run", "shape (), expected (1, 1)",
                                 details={"first_diverging": first}, other="ort/disable_all"))

    assert signed("shape", "int32") == signed("shape", "float32")
    assert signed("value", "int32") != signed("value", "float32")
