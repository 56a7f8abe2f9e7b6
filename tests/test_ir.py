from __future__ import annotations

import numpy as np
import pytest

from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, GraphError, Node, TensorType, Value
from dlcfuzz.spec import REGISTRY
from tests.helpers import ort_generator


def tiny() -> Graph:
    g = Graph()
    g.add_value(Value("x", TensorType((2, 3), "float32"), INPUT_KIND))
    g.add_value(Value("w", TensorType((2, 3), "float32"), CONST_KIND, np.ones((2, 3), np.float32)))
    g.add_value(Value("y", TensorType((2, 3), "float32"), NODE_KIND))
    g.add_value(Value("z", TensorType((2, 3), "float32"), NODE_KIND))
    g.add_node(Node("Add", ["x", "w"], ["y"]))
    g.add_node(Node("LeakyRelu", ["y"], ["z"], {"alpha": 0.25}))
    g.set_leaf_outputs()
    return g


def test_leaf_outputs_and_validate() -> None:
    g = tiny()
    assert g.outputs == ["z"]
    g.validate()
    assert [v.name for v in g.inputs] == ["x"]
    assert [v.name for v in g.initializers] == ["w"]


def test_validate_rejects_dangling_and_cycles() -> None:
    g = tiny()
    g.nodes[0].inputs[0] = "nope"
    with pytest.raises(GraphError, match="undefined"):
        g.validate()
    g = tiny()
    g.nodes[0].inputs[0] = "z"  # z = f(y), y = Add(z, w)
    with pytest.raises(GraphError, match="cycle"):
        g.validate()
    g = tiny()
    g.values["w"].data = np.ones((3, 2), np.float32)
    with pytest.raises(GraphError, match="does not match"):
        g.validate()


def test_toposort_orders_producers_first() -> None:
    g = tiny()
    g.nodes.reverse()
    order = [n.op for n in g.toposort()]
    assert order == ["Add", "LeakyRelu"]


def test_json_round_trip_is_exact() -> None:
    gen = ort_generator(list(REGISTRY.values()), op_range=(10, 40), init_rate=1.0)
    for seed in range(30):
        g = gen.generate(seed)
        back = Graph.from_json(g.to_json())
        assert back == g
        assert to_bytes(back) == to_bytes(g)
        for name, v in g.values.items():
            if v.data is not None:
                assert back.values[name].data.dtype == v.data.dtype
                np.testing.assert_array_equal(back.values[name].data, v.data)
