"""Input synthesis: reference outputs are finite, values stay in the assumed ranges, deterministic."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir.hints import value_range
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import all_finite, synthesize
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
                lo, hi = value_range(v.type, v.hint)
                assert a.size == 0 or (lo <= a.min() and a.max() <= hi), (v.name, v.hint, a.min(), a.max())


def test_later_attempts_draw_other_values() -> None:
    g = ort_generator([REGISTRY["Add"]], op_range=(3, 3), dtypes=("float32",)).generate(0)
    a = synthesize(g, np.random.default_rng(0), 0)
    spans = []
    for attempt in range(1, 6):
        b = synthesize(g, np.random.default_rng(0), attempt)
        spans += [float(np.ptp(x)) for x in b.values() if x.size > 1]
        assert any(not np.array_equal(a[k], b[k]) for k in a)
    assert min(spans, default=0.0) < 4.0  # narrower sub-ranges than the whole [-2, 2]


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
