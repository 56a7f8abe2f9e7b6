"""The selection operators (spec/select.py), whose output shapes follow from input values: the shapes
their specs declare are the ones ONNX Runtime returns, NonMaxSuppression's selection is ORT's, and
the first input whose values the spec draws is a new constant that no other call's tensor stands in for."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND
from dlcfuzz.spec import REGISTRY
from dlcfuzz.spec.select import nms_select
from tests.helpers import SESSION_OPTIONS, ort_generator

SELECT = ("NonZero", "Unique", "NonMaxSuppression")


def _ort(g) -> list[np.ndarray]:
    sess = ort.InferenceSession(to_bytes(g), SESSION_OPTIONS, providers=["CPUExecutionProvider"])
    return sess.run(None, {v.name: v.data for v in g.inputs})  # pinned runtime inputs: their own values


@pytest.mark.parametrize("op", SELECT)
def test_declared_output_shapes_are_what_ort_returns(op: str) -> None:
    gen = ort_generator([REGISTRY[op]], opset=17)
    for seed in range(40):
        g = gen.generate(seed)
        # the data that decide the shape are constants, or runtime inputs pinned to the spec's values
        assert all(v.data is not None for v in g.inputs)
        for name, got in zip(g.outputs, _ort(g), strict=True):
            t = g.values[name].type
            assert got.shape == t.shape and got.dtype.name == t.dtype, f"{op} seed {seed} {g.nodes[0].attrs}"


def test_nms_selection_is_what_ort_selects() -> None:
    gen = ort_generator([REGISTRY["NonMaxSuppression"]], opset=17)
    seen = set()
    for seed in range(60):
        g = gen.generate(seed)
        node = g.nodes[0]
        np.testing.assert_array_equal(gen.last_ctx._selected, _ort(g)[0], err_msg=f"seed {seed} {node.attrs}")
        np.testing.assert_array_equal(nms_select(gen.last_ctx), gen.last_ctx._selected)
        seen.add((node.attrs.get("center_point_box", 0), len(node.inputs)))
    assert seen >= {(0, 3), (0, 4), (0, 5), (1, 3), (1, 4), (1, 5)}  # both formats, with and without thresholds


def test_drawn_first_inputs_are_fresh_constants_in_graphs() -> None:
    """In graphs with other operators, the boxes of NonMaxSuppression and the X of NonZero / Unique
    are constants holding what their spec drew, never another call's tensor (whose values the spec
    could not know); boxes always end in 4 (its shape domain)."""
    fillers = [REGISTRY[o] for o in ("Relu", "Add", "Neg", "Cast")]
    gen = ort_generator([*(REGISTRY[o] for o in SELECT), *fillers], op_range=(6, 10), opset=17)
    count = 0
    for seed in range(15):
        g = gen.generate(seed)
        producers = {o for n in g.nodes for o in n.outputs}
        for n in g.nodes:
            if n.op in SELECT:
                x = g.values[n.inputs[0]]
                assert x.name not in producers and x.kind == CONST_KIND and x.data is not None
                assert n.op != "NonMaxSuppression" or x.type.shape[-1] == 4
                count += 1
    assert count >= 10


def test_nms_center_boxes_on_relax() -> None:
    """Center-format boxes, which the Relax exporter turns into corners for TVM's NMS, on TVM, where
    overlaps suppress boxes (the calls TVM is known to get wrong left out: test_export_relax.TVM_BUGS)."""
    pytest.importorskip("tvm")
    from tests.test_export_relax import CASES, TVM_BUGS, _run_relax

    # constants only: TVM gets a runtime max_output_boxes_per_class wrong (test_export_relax.TVM_BUGS)
    gen = ort_generator([REGISTRY["NonMaxSuppression"]], opset=17, runtime_consts=0)
    checked = 0
    for seed in range(400):
        g = gen.generate(seed)
        node, c = g.nodes[0], gen.last_ctx
        unsuppressed = sum(min(c._max, int(np.sum(row > (-np.inf if c._score is None else c._score))))
                           for row in c._scores.reshape(-1, c.s[1]))
        if not node.attrs.get("center_point_box") or len(c._selected) == unsuppressed or any(
                op == "NonMaxSuppression" and CASES[case](node, g, {}) for op, case in TVM_BUGS):
            continue
        feeds = {v.name: v.data for v in g.inputs}  # pinned runtime inputs
        np.testing.assert_array_equal(_run_relax(g, feeds)[0], _ort(g)[0], err_msg=f"seed {seed} {node.attrs}")
        checked += 1
        if checked == 3:
            break
    assert checked == 3


def test_nms_result_crosses_a_relax_function_boundary() -> None:
    """all_class_non_max_suppression's struct info is its static bound (B * C * S, 3), trimmed at run
    time: the exporter casts it to the graph's shape, so a function taking the result declares that
    shape and TVM checks it (without the cast, writing the module fails: 'Argument 0 type mismatch')."""
    pytest.importorskip("tvm")
    import tvm
    from tvm import relax

    from dlcfuzz.export.relax import Layout, to_relax
    from tests.test_export_relax import CASES, TVM_BUGS

    # constants only: main takes no arguments here
    gen = ort_generator([REGISTRY["NonMaxSuppression"], REGISTRY["Cast"]], op_range=(2, 2), opset=17, runtime_consts=0)
    checked = 0
    for seed in range(200):
        g = gen.generate(seed)
        nms, cast = g.nodes
        if nms.op != "NonMaxSuppression" or cast.inputs[0] != nms.outputs[0] or any(
                op == "NonMaxSuppression" and CASES[case](nms, g, {}) for op, case in TVM_BUGS):
            continue
        g.outputs = list(cast.outputs)
        b, s = g.values[nms.inputs[0]].type.shape[:2]
        if g.values[nms.outputs[0]].type.shape[0] == b * g.values[nms.inputs[1]].type.shape[1] * s:
            continue  # nothing trimmed: the bound is the shape
        mod = to_relax(g, Layout([1], [True, True, True]))  # the Cast in a function of its own
        vm = relax.VirtualMachine(tvm.compile(mod, tvm.target.Target({"kind": "llvm"})), tvm.cpu())
        np.testing.assert_array_equal(vm["main"]().numpy(), _ort(g)[0], err_msg=f"seed {seed}")
        checked += 1
        if checked == 2:
            break
    assert checked == 2
