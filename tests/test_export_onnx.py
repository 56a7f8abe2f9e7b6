"""The ONNX exporter on a hand-built graph: every field of the model read back with onnx, the lowest
IR version for the opset (ONNX's own table), an explicit opset, determinism, and the checker."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from dlcfuzz import __version__
from dlcfuzz.export.onnx import checker_error, to_bytes, to_onnx
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value

# ONNX's versioning table (docs/Versioning.md): the IR version each opset came with
IR_OF_OPSET = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10}


def graph(opset: int = 17) -> Graph:
    g = Graph(opset=opset)
    g.add_value(Value("x", TensorType((2, 3), "float32"), INPUT_KIND))
    g.add_value(Value("i", TensorType((4,), "int64"), INPUT_KIND))
    g.add_value(Value("w", TensorType((2, 3), "float32"), CONST_KIND, np.arange(6, dtype=np.float32).reshape(2, 3)))
    g.add_value(Value("y", TensorType((2, 3), "float32"), NODE_KIND))
    g.add_value(Value("z", TensorType((2, 3), "float32"), NODE_KIND))
    g.add_value(Value("c", TensorType((2,), "float16"), NODE_KIND))
    g.add_value(Value("j", TensorType((4,), "int64"), NODE_KIND))
    g.add_node(Node("Add", ["x", "w"], ["y"], name="add_0"))
    g.add_node(Node("LeakyRelu", ["y"], ["z"], {"alpha": 0.25}))  # no name
    g.add_node(Node("Constant", [], ["c"], {"value": np.array([1.5, -2], np.float16)}, name="k"))
    g.add_node(Node("Neg", ["i"], ["j"], name="neg"))
    g.outputs = ["z", "c", "j"]
    return g


def typed(v: onnx.ValueInfoProto) -> tuple:
    t = v.type.tensor_type
    return v.name, t.elem_type, [d.dim_value for d in t.shape.dim]


def test_every_field_of_the_model() -> None:
    m = to_onnx(graph())
    assert (m.producer_name, m.producer_version) == ("dlcfuzz", __version__)
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 17)]
    assert m.ir_version == 8
    assert m.graph.name == "dlcfuzz"
    assert [typed(v) for v in m.graph.input] == [("x", TensorProto.FLOAT, [2, 3]), ("i", TensorProto.INT64, [4])]
    assert [typed(v) for v in m.graph.output] == [("z", TensorProto.FLOAT, [2, 3]), ("c", TensorProto.FLOAT16, [2]),
                                                  ("j", TensorProto.INT64, [4])]
    assert [(t.name, t.data_type, list(t.dims)) for t in m.graph.initializer] == [("w", TensorProto.FLOAT, [2, 3])]
    np.testing.assert_array_equal(numpy_helper.to_array(m.graph.initializer[0]), np.arange(6).reshape(2, 3))
    nodes = [(n.op_type, n.name, list(n.input), list(n.output)) for n in m.graph.node]
    assert nodes == [("Add", "add_0", ["x", "w"], ["y"]), ("LeakyRelu", "", ["y"], ["z"]),
                     ("Constant", "k", [], ["c"]), ("Neg", "neg", ["i"], ["j"])]
    assert not m.graph.node[1].HasField("name")  # an unnamed node has no name, not an empty one
    alpha = m.graph.node[1].attribute[0]
    assert (alpha.name, alpha.type, alpha.f) == ("alpha", onnx.AttributeProto.FLOAT, 0.25)
    value = m.graph.node[2].attribute[0]
    assert value.type == onnx.AttributeProto.TENSOR  # an array attribute becomes a tensor
    np.testing.assert_array_equal(numpy_helper.to_array(value.t), np.array([1.5, -2], np.float16))
    assert numpy_helper.to_array(value.t).dtype == np.float16
    assert checker_error(m) is None


def test_attributes_in_name_order() -> None:
    g = graph()
    g.nodes[1] = Node("LeakyRelu", ["y"], ["z"], {"zeta": 1, "alpha": 0.5, "mid": "s"})
    assert [a.name for a in to_onnx(g).graph.node[1].attribute] == ["alpha", "mid", "zeta"]


def test_opset_and_lowest_ir_version() -> None:
    for opset, ir in IR_OF_OPSET.items():
        m = to_onnx(graph(opset))
        assert [o.version for o in m.opset_import] == [opset] and m.ir_version == ir, opset
        # an explicit opset overrides the graph's
        m = to_onnx(graph(17), opset)
        assert [o.version for o in m.opset_import] == [opset] and m.ir_version == ir, opset
    loaded = onnx.load_from_string(to_bytes(graph(17), 21))
    assert [o.version for o in loaded.opset_import] == [21] and loaded.ir_version == 10


def test_bytes_are_deterministic_and_the_model() -> None:
    g = graph()
    data = to_bytes(g)
    assert data == to_bytes(graph())
    assert data == to_onnx(g).SerializeToString(deterministic=True)
    assert onnx.load_from_string(data) == to_onnx(g)  # the whole model


def test_checker_error_is_one_line() -> None:
    bad = to_onnx(graph())
    bad.graph.node[0].input[1] = "nowhere"  # an undefined input
    why = checker_error(bad)
    assert why and "\n" not in why and "nowhere" in why
    # a Cast to data type 0 makes the checker raise a bare error: a line of its own, never None
    g = graph()
    g.nodes[1] = Node("Cast", ["y"], ["z"], {"to": 0})
    why = checker_error(to_onnx(g))
    assert why and "\n" not in why
    m = to_onnx(graph())
    m.graph.node[0].op_type = ""
    assert checker_error(m) == "Field 'op_type' of 'node' is required to be non-empty."


def test_checker_error_formats_any_exception(monkeypatch) -> None:
    """How the checker's exceptions become one line (raised here on purpose: ONNX's own messages
    happen to be one line already)."""
    def raising(error: Exception):
        def check(model, full_check=False):
            assert full_check  # strict shape inference is asked for
            raise error
        return check

    m = to_onnx(graph())
    monkeypatch.setattr(onnx.checker, "check_model", raising(ValueError("  \nfirst line\nsecond line")))
    assert checker_error(m) == "first line"
    monkeypatch.setattr(onnx.checker, "check_model", raising(KeyError()))
    assert checker_error(m) == "KeyError"  # no message: the exception's type says why
    monkeypatch.setattr(onnx.checker, "check_model", raising(ValueError("   ")))
    assert checker_error(m) == "ValueError"


def test_values_named_in_declared_types_are_typed_in_the_model_and_no_others() -> None:
    """Intermediates ONNX infers are left to the compiler's inference; ``meta["declared_types"]`` types more
    (trigger analysis: does a compiler fail only where it infers a rank itself?)."""
    g = graph()
    g.outputs = ["z", "j"]
    assert not to_onnx(g).graph.value_info
    g.meta["declared_types"] = ["y", "z"]  # an output is typed anyway: named once
    model = to_onnx(g)
    typed = {v.name: v.type.tensor_type for v in model.graph.value_info}
    assert sorted(typed) == ["y"]
    assert [d.dim_value for d in typed["y"].shape.dim] == [2, 3] and typed["y"].elem_type == TensorProto.FLOAT
