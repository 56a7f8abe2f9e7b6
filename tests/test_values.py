"""Input synthesis: reference outputs are finite, values stay in the assumed ranges, deterministic."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.ir.hints import value_range
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import all_finite, input_range, synthesize
from tests.helpers import SESSION_OPTIONS, ort_generator

K = 8  # attempts per graph


def test_finite_rate_on_generated_graphs() -> None:
    gen = ort_generator(list(REGISTRY.values()), op_range=(1, 30))
    n, ok, first = 150, 0, 0
    for seed in range(n):
        g = gen.generate(seed)
        sess = ort.InferenceSession(to_bytes(g), SESSION_OPTIONS, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(seed)
        for attempt in range(K):
            if all_finite(sess.run(None, synthesize(g, rng, attempt))):
                ok += 1
                first += attempt == 0
                break
    assert ok >= 0.97 * n, f"{ok}/{n} graphs with finite outputs"
    assert first >= 0.95 * n  # the generator's intervals make the first attempt almost always enough


def test_values_stay_within_the_assumed_ranges() -> None:
    gen = ort_generator(list(REGISTRY.values()), op_range=(10, 30))
    for seed in range(20):
        g = gen.generate(seed)
        for attempt in range(4):
            feeds = synthesize(g, np.random.default_rng(seed), attempt)
            assert set(feeds) == {v.name for v in g.inputs}
            for v in g.inputs:
                a = feeds[v.name]
                assert a.shape == v.type.shape and a.dtype.name == v.type.dtype
                if v.pinned:  # a constant-like operand taken at run time: fed its own value, whatever it is
                    np.testing.assert_array_equal(a, v.data)
                    continue
                lo, hi = value_range(v.type, v.hint)
                assert a.size == 0 or (lo <= a.min() and a.max() <= hi), (v.name, v.hint, a.min(), a.max())


def one_input(dtype: str = "float32", shape: tuple[int, ...] = (2000,), hint: dict | None = None) -> Graph:
    g = Graph()
    g.add_value(Value("x", TensorType(shape, dtype), INPUT_KIND, hint=hint))
    g.add_value(Value("w", TensorType(shape, dtype), CONST_KIND, np.zeros(shape, dtype)))
    g.add_value(Value("y", TensorType(shape, dtype), NODE_KIND))
    g.add_node(Node("Add", ["x", "w"], ["y"]))
    g.set_leaf_outputs()
    return g


def test_later_attempts_draw_other_values() -> None:
    """Attempt 0 spans the whole default range [-2, 2]; later attempts draw from narrower, often
    one-signed sub-ranges inside it (2000 samples of the whole range span > 3.9, never <= 2.05)."""
    g = one_input()
    first = synthesize(g, np.random.default_rng(0), 0)["x"]
    assert set(synthesize(g, np.random.default_rng(0), 0)) == {"x"}  # runtime inputs only
    assert first.min() < -1.9 and first.max() > 1.9
    narrow = one_signed = 0
    for attempt in range(1, 21):
        x = synthesize(g, np.random.default_rng(attempt), attempt)["x"]
        assert x.dtype == np.float32 and x.shape == (2000,)
        assert x.min() >= -2.0 and x.max() <= 2.0
        narrow += float(np.ptp(x)) <= 2.05
        one_signed += bool(x.min() >= 0 or x.max() <= 0)
    assert narrow >= 8 and one_signed >= 5, (narrow, one_signed)


class FixedChoice:
    """A stand-in for a numpy Generator whose ``integers(n)`` picks sub-range ``index`` (and records n)."""

    def __init__(self, index: int) -> None:
        self.index, self.asked = index, []

    def integers(self, n: int) -> int:
        self.asked.append(n)
        return self.index


def test_input_range_by_hand() -> None:
    f32, i32 = TensorType((3,), "float32"), TensorType((3,), "int32")
    rng = FixedChoice(1)
    assert input_range(f32, None, 0, rng) == (-2.0, 2.0) and not rng.asked  # attempt 0: all of it
    # the sub-ranges of [0, 1] scaled onto [-2, 2]: 8 fixed ones, then the two one-signed halves
    assert input_range(f32, None, 3, FixedChoice(1)) == (-1.0, 1.0)  # (0.25, 0.75)
    assert input_range(f32, None, 1, FixedChoice(3)) == (0.0, 2.0)  # (0.5, 1.0)
    assert input_range(f32, None, 1, FixedChoice(6)) == (1.5, 2.0)  # (0.875, 1.0)
    assert input_range(f32, None, 1, FixedChoice(8)) == (-2.0, 0.0)  # negative side only
    assert input_range(f32, None, 1, FixedChoice(9)) == (0.0, 2.0)  # positive side only
    rng = FixedChoice(0)
    input_range(f32, None, 2, rng)
    assert rng.asked == [10]
    # a range on one side of 0 has no one-signed halves to add; the hint bounds the range
    rng = FixedChoice(4)
    assert input_range(f32, {"min": 1.0, "max": 3.0}, 1, rng) == pytest.approx((1.4, 1.6))  # (0.4, 0.6) of [1, 2]
    assert rng.asked == [8]
    for hint, n in (({"min": -3.0, "max": 0.0}, 8), ({"min": 0.0, "max": 2.0}, 8), ({"min": 0.5, "max": 3.0}, 8),
                    ({"min": -3.0, "max": 0.5}, 10)):
        rng = FixedChoice(0)
        input_range(f32, hint, 1, rng)
        assert rng.asked == [n], hint  # one-signed halves only where the range holds both signs
    # integers: whole bounds inside the range, never empty
    assert input_range(i32, None, 1, FixedChoice(5)) == (-2.0, -2.0)  # (-2, -1.5)
    assert input_range(i32, None, 1, FixedChoice(4)) == (0.0, 0.0)  # (-0.4, 0.4)
    assert input_range(i32, None, 1, FixedChoice(1)) == (-1.0, 1.0)
    assert input_range(i32, {"min": 0, "max": 100}, 1, FixedChoice(7)) == (1.0, 1.0)  # (0.2, 1.8) of [0, 2]
    # booleans and single-value ranges stay as they are
    rng = FixedChoice(1)
    assert input_range(TensorType((2,), "bool"), None, 5, rng) == (0.0, 1.0)
    assert input_range(f32, {"min": 1.5, "max": 1.5}, 5, rng) == (1.5, 1.5) and not rng.asked


def test_hints_hold_on_every_attempt() -> None:
    """Later attempts narrow within the hint's range (not the default one), and keep its other rules."""
    g = one_input(hint={"min": 0.0, "max": 1.0})
    mins = []
    for attempt in range(30):
        x = synthesize(g, np.random.default_rng(attempt), attempt)["x"]
        assert x.min() >= 0.0 and x.max() <= 1.0
        mins.append(float(x.min()))
    # the upper sub-ranges of [0, 1] ((0.5, 1), (0.875, 1)); narrowing [-2, 2] and then clipping never gives them
    assert max(mins) >= 0.5
    g = one_input("int32", (200,), hint={"nonzero": True})
    for attempt in range(8):
        x = synthesize(g, np.random.default_rng(attempt), attempt)["x"]
        assert x.dtype == np.int32 and (x != 0).all() and x.min() >= -2 and x.max() <= 2
    # attempt 0 is the default
    a, b = synthesize(g, np.random.default_rng(3)), synthesize(g, np.random.default_rng(3), 0)
    assert np.array_equal(a["x"], b["x"])
    narrow = synthesize(one_input(), np.random.default_rng(3), 1)["x"]
    assert not np.array_equal(synthesize(one_input(), np.random.default_rng(3))["x"], narrow)


def test_deterministic() -> None:
    gen = ort_generator(list(REGISTRY.values()), op_range=(5, 20))
    for seed in range(10):
        g = gen.generate(seed)
        for attempt in (0, 2):
            a = synthesize(g, np.random.default_rng(seed), attempt)
            b = synthesize(g, np.random.default_rng(seed), attempt)
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_all_finite() -> None:
    assert all_finite([np.ones(3, np.float32), np.array([1, 2], np.int64), np.array(True)])
    assert not all_finite([np.array([1.0, np.nan])])
    assert not all_finite([np.ones(2, np.float16), np.array([np.inf], np.float64)])
    assert all_finite([])
    assert not all_finite([np.array([1 + 1j, complex(np.nan, 0)])])  # complex outputs count too
    assert not all_finite([np.ones(2, np.float32), np.array([-np.inf], np.float32)])  # any output, not the first
