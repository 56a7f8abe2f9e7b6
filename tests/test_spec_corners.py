"""Models the ONNX checker accepts but the operator text leaves undefined must never be generated:
a pool window holding only padding (a dilated kernel that steps over a short input), and a 1-D
("per-axis") quantization scale without an axis of its length (e.g. on a rank-0 tensor).  The
properties are read back from the written ONNX model, not from the specs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from dlcfuzz.export.onnx import to_onnx
from dlcfuzz.spec import REGISTRY
from tests.helpers import check_graph, ort_generator

GRAPHS = 200


def _model(op: str, seed: int, **limits) -> tuple[onnx.ModelProto, onnx.NodeProto]:
    # the checks read the values the specs chose from the model's initializers: no operand at run time,
    # none in a Constant node
    g = ort_generator([REGISTRY[op]], runtime_consts=0.0, constant_nodes=0.0, **limits).generate(seed)
    m = to_onnx(g)
    return m, next(n for n in m.graph.node if n.op_type == op)


def _shape(m: onnx.ModelProto, name: str) -> tuple[int, ...]:
    for vi in [*m.graph.input, *m.graph.value_info, *m.graph.output]:
        if vi.name == name:
            return tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    for t in m.graph.initializer:
        if t.name == name:
            return tuple(t.dims)
    raise KeyError(name)


def _const(m: onnx.ModelProto, name: str) -> np.ndarray:
    for t in m.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return numpy_helper.to_array(n.attribute[0].t)
    raise KeyError(name)


def _empty_window(x: tuple[int, ...], attrs: dict) -> str | None:
    """A window with no tap inside the unpadded input, computed from ONNX's own formulas."""
    sp = x[2:]
    k = attrs["kernel_shape"]
    s = attrs.get("strides", [1] * len(sp))
    d = attrs.get("dilations", [1] * len(sp))
    pads = attrs.get("pads", [0] * 2 * len(sp))
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    for j, n in enumerate(sp):
        eff = (k[j] - 1) * d[j] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-n // s[j])
            total = max(0, (out - 1) * s[j] + eff - n)
            pb = total // 2 if auto == "SAME_UPPER" else total - total // 2
        elif auto == "VALID":
            out, pb = (n - eff) // s[j] + 1, 0
        else:
            pb = pads[j]
            num = n + pads[j] + pads[j + len(sp)] - eff
            out = (-(-num // s[j]) if attrs.get("ceil_mode") else num // s[j]) + 1
        for o in range(out):
            start = o * s[j] - pb
            if attrs.get("ceil_mode") and start >= n:
                continue  # "sliding windows that would start in the right padded region are ignored"
            if not any(0 <= start + i * d[j] < n for i in range(k[j])):
                return f"dim {j}: window {o} taps {[start + i * d[j] for i in range(k[j])]} miss [0, {n})"
    return None


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_windows_hold_an_input_element(op):
    dilated = 0
    for seed in range(GRAPHS):
        m, node = _model(op, seed, opset=19, max_dim=3)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        dilated += any(v > 1 for v in attrs.get("dilations", []))
        why = _empty_window(_shape(m, node.input[0]), attrs)
        assert why is None, f"seed {seed}: {attrs}: {why}"
    assert dilated > 20  # dilation is still drawn where the kernel fits


def test_pool_fix_keeps_lppool_dilated_kernels_over_short_inputs():
    """LpPool's window of padding only is defined (a sum of no terms: 0): not narrowed."""
    over = 0
    for seed in range(GRAPHS):
        m, node = _model("LpPool", seed, opset=19, max_dim=3)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        x = _shape(m, node.input[0])
        d = attrs.get("dilations", [1] * (len(x) - 2))
        over += any(dj > 1 and (k - 1) * dj + 1 > n for k, dj, n in zip(attrs["kernel_shape"], d, x[2:], strict=True))
    assert over > 0


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
@pytest.mark.parametrize("opset", [17, 21])
def test_one_d_scale_has_an_axis_of_its_length(op, opset):
    rank0_unit = 0
    one_d = 0
    for seed in range(GRAPHS):
        m, node = _model(op, seed, opset=opset, max_rank=2, max_dim=2)
        x = _shape(m, node.input[0])
        scale = _const(m, node.input[1])
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if scale.ndim == 1:  # "a 1-D tensor for per-axis quantization"
            one_d += 1
            axis = attrs.get("axis", 1)
            assert -len(x) <= axis < len(x), f"seed {seed}: axis {axis} out of range for x{x}"  # [-r, r-1]
            assert scale.shape[0] == x[axis % len(x)], f"seed {seed}: scale {scale.shape} along axis {axis} of x{x}"
        rank0_unit += len(x) == 0 and scale.shape == (1,)
    assert rank0_unit == 0 and one_d > 20


def test_fixed_specs_still_valid_on_ort():
    for op in ("MaxPool", "AveragePool", "QuantizeLinear", "DequantizeLinear"):
        for seed in range(6):
            check_graph(ort_generator([REGISTRY[op]], opset=19, max_rank=3, max_dim=3).generate(seed), seed=seed)


@pytest.mark.parametrize("op", ["QLinearConv", "ConvInteger"])
def test_conv_quantization_parameters_have_the_shapes_onnx_names(op: str) -> None:
    """ONNX: x's (and QLinearConv's y's) scale and zero point are "a scalar"; w's are "a scalar or a 1-D
    tensor ... equal to the number of output channels (M)" (OpenVINO reads a 1-element x_scale per axis)."""
    seen = 0
    for seed in range(60):
        m, node = _model(op, seed)
        inputs = list(node.input)
        m_out = _shape(m, inputs[3 if op == "QLinearConv" else 1])[0]
        scalars = [1, 2, 6, 7] if op == "QLinearConv" else [2]
        per_channel = [4, 5] if op == "QLinearConv" else [3]
        for k in scalars:
            if k < len(inputs) and inputs[k]:
                assert _shape(m, inputs[k]) == (), (op, seed, k, _shape(m, inputs[k]))
                seen += 1
        for k in per_channel:
            if k < len(inputs) and inputs[k]:
                assert _shape(m, inputs[k]) in ((), (m_out,)), (op, seed, k, _shape(m, inputs[k]), m_out)
    assert seen >= 20
