"""Output comparison (tolerances, Chebyshev distance, NaN/inf, dtype and shape mismatches) and the
oracles built on it (judge, judge_invalid, judge_migrated), on hand-made outputs whose expected
verdicts are worked out here from the documented bounds."""

from __future__ import annotations

import numpy as np
import pytest

from dlcfuzz.backends.base import Outcome
from dlcfuzz.oracle import (
    BASELINE,
    CRASH,
    DIFFERENTIAL,
    DISRUPTIVE,
    INCONSISTENT,
    METAMORPHIC,
    Criteria,
    judge,
    judge_invalid,
    judge_migrated,
)
from dlcfuzz.oracle.compare import all_finite, chebyshev, compare

f32, f64, f16 = np.float32, np.float64, np.float16


def a(*values, dtype=f32) -> np.ndarray:
    return np.array(values, dtype=dtype)


# -- compare: |actual - expected| <= atol + rtol * |expected|, per dtype --------------------------------
@pytest.mark.parametrize(("dtype", "inside", "outside"), [
    # float32: rtol 1e-2, atol 1e-3 -> 0.011 around 1
    (f32, 1.0105, 1.0115),
    # float64: rtol 1e-5, atol 1e-8 -> ~1.001e-5 around 1
    (f64, 1.0 + 9e-6, 1.0 + 1.1e-5),
    # float16: rtol 5e-2, atol 1e-2 -> 0.06 around 1 (float16 steps are 2**-10 near 1)
    (f16, 1.0576, 1.0654),
])
def test_compare_default_tolerances(dtype, inside, outside) -> None:
    e = a(1.0, 2.0, dtype=dtype)
    assert compare([e], [a(inside, 2.0, dtype=dtype)]) is None
    m = compare([e], [a(outside, 2.0, dtype=dtype)])
    assert (m.output, m.kind) == (0, "value")
    assert m.max_abs == pytest.approx(float(dtype(outside)) - 1.0)
    assert "1/2 elements differ" in m.detail
    # below the expected value the same bound holds
    assert compare([e], [a(2.0 - inside, 2.0, dtype=dtype)]) is None
    assert compare([e], [a(2.0 - outside, 2.0, dtype=dtype)]) is not None


def test_compare_relative_part_scales_with_the_expected_value() -> None:
    # float32 at 100: 1e-3 + 1e-2 * 100 = 1.001
    assert compare([a(100.0)], [a(100.99)]) is None
    assert compare([a(100.0)], [a(101.02)]) is not None
    # the bound is relative to the expected value, not the actual one
    assert compare([a(0.0)], [a(0.0009)]) is None
    assert compare([a(0.0)], [a(0.0011)]) is not None


def test_compare_tolerances_can_be_overridden_per_dtype() -> None:
    loose = {"float32": (0.5, 0.0)}
    assert compare([a(1.0)], [a(1.4)], loose) is None
    assert compare([a(1.0)], [a(1.6)], loose) is not None
    # other dtypes keep their defaults
    assert compare([a(1.0, dtype=f64)], [a(1.0001, dtype=f64)], loose) is not None
    # a float dtype without its own entry (longdouble) gets float32's bound
    ld = np.longdouble
    assert compare([a(1.0, dtype=ld)], [a(1.0105, dtype=ld)]) is None
    assert compare([a(1.0, dtype=ld)], [a(1.0115, dtype=ld)]) is not None


def test_compare_nan_and_inf() -> None:
    nan, inf = np.nan, np.inf
    assert compare([a(nan, 1.0)], [a(nan, 1.0)]) is None  # NaN equals NaN
    assert compare([a(inf, -inf)], [a(inf, -inf)]) is None  # infinities of the same sign
    for want, got in ((a(nan, 1.0), a(1.0, 1.0)), (a(inf, 1.0), a(nan, 1.0)), (a(inf, 1.0), a(-inf, 1.0)),
                      (a(1.0, 1.0), a(1.0, inf))):
        m = compare([want], [got])
        assert m is not None and m.kind == "value", (want, got)
    m = compare([a(1.0, 2.0)], [a(nan, 2.0)])
    assert m.max_abs == np.inf  # a NaN where the reference has a number is an infinite difference
    assert compare([a(inf)], [a(-inf)]) is not None


def test_compare_counts_shapes_dtypes_and_integers() -> None:
    m = compare([a(1.0), a(2.0)], [a(1.0)])
    assert (m.output, m.kind) == (-1, "shape") and "1 outputs, expected 2" in m.detail
    m = compare([a(1.0), np.zeros((2, 3), f32)], [a(1.0), np.zeros((3, 2), f32)])
    assert (m.output, m.kind) == (1, "shape") and "(3, 2)" in m.detail
    m = compare([a(1.0)], [a(1.0, dtype=f64)])
    assert (m.output, m.kind) == (0, "dtype") and "float64" in m.detail
    # integers and booleans exactly, whatever the float tolerance
    assert compare([np.array([5, 7], np.int64)], [np.array([5, 7], np.int64)]) is None
    m = compare([np.array([5, 7], np.int64)], [np.array([5, 8], np.int64)])
    assert (m.output, m.kind) == (0, "value")
    assert compare([np.array([True])], [np.array([False])]).kind == "value"
    # the first differing output is reported; empty outputs compare equal
    m = compare([a(1.0), a(2.0), a(3.0)], [a(1.0), a(9.0), a(9.0)])
    assert m.output == 1
    assert compare([np.zeros((0, 3), f32)], [np.zeros((0, 3), f32)]) is None
    assert compare([], []) is None
    # plain lists and scalars are read as arrays
    assert compare([[1.0, 2.0]], [np.array([1.0, 2.0])]) is None


# -- chebyshev: max |actual - expected| <= bound * max(1, max |expected|) -----------------------------------
def test_chebyshev_bounds() -> None:
    assert chebyshev([a(0.5)], [a(0.5009)]) is None  # float32: 1e-3
    m = chebyshev([a(0.5)], [a(0.5011)])
    assert (m.output, m.kind) == (0, "value") and m.max_abs == pytest.approx(0.0011, rel=1e-3)
    assert chebyshev([a(100.0, 0.0)], [a(100.09, 0.0)]) is None  # scaled by the largest |expected|: 0.1
    assert chebyshev([a(100.0, 0.0)], [a(100.0, 0.11)]) is not None  # ... wherever the distance is
    assert chebyshev([a(0.5, dtype=f64)], [a(0.5 + 9e-8, dtype=f64)]) is None  # float64: 1e-7
    assert chebyshev([a(0.5, dtype=f64)], [a(0.5 + 2e-7, dtype=f64)]) is not None
    assert chebyshev([a(0.5, dtype=f16)], [a(0.5078, dtype=f16)]) is None  # float16: 1e-2
    assert chebyshev([a(0.5, dtype=f16)], [a(0.5156, dtype=f16)]) is not None
    assert chebyshev([a(0.5)], [a(0.6)], {"float32": 0.2}) is None  # overridden
    # integers exactly; counts, shapes and dtypes as in compare
    assert chebyshev([np.array([3], np.int32)], [np.array([4], np.int32)]).kind == "value"
    assert chebyshev([a(1.0)], [a(1.0, dtype=f64)]).kind == "dtype"
    assert chebyshev([a(1.0)], []).kind == "shape"


def test_chebyshev_nan_inf_and_complex() -> None:
    nan, inf = np.nan, np.inf
    assert chebyshev([a(nan, inf, -inf, 1.0)], [a(nan, inf, -inf, 1.0)]) is None
    for got in (a(0.0, 1.0), a(nan, nan), a(inf, 1.0)):
        m = chebyshev([a(nan, 1.0)], [got])
        assert m is not None and m.max_abs == np.inf, got
    assert chebyshev([a(inf)], [a(-inf)]).max_abs == np.inf
    assert chebyshev([a(1.0)], [a(inf)]).max_abs == np.inf
    assert chebyshev([a(inf, 1.0)], [a(1.0, 1.0)]).max_abs == np.inf
    m = chebyshev([a(nan, 5.0)], [a(1.0, nan)])
    assert "(4 elements)" in m.detail  # both positions differ in finiteness and in NaN-ness
    c = np.complex64
    assert chebyshev([a(1 + 1j, dtype=c)], [a(1 + 1.0009j, dtype=c)]) is None
    assert chebyshev([a(1 + 1j, dtype=c)], [a(1 + 1.1j, dtype=c)]) is not None
    # the special values are judged before the distance: finite elements elsewhere still count
    assert chebyshev([a(nan, 1.0)], [a(nan, 1.5)]).max_abs == pytest.approx(0.5)


def test_all_finite() -> None:
    assert all_finite([a(1.0), np.array([2**62], np.int64), np.array([True])])
    assert not all_finite([a(1.0), a(np.nan)])
    assert not all_finite([a(-np.inf, dtype=f16)])
    assert all_finite([])


# -- the oracles ----------------------------------------------------------------------------------------------
def ok(*outs) -> Outcome:
    return Outcome("ok", "run", list(outs))


def error(message: str, phase: str = "compile", error_type: str = "RuntimeError") -> Outcome:
    return Outcome("error", phase, None, error_type, message, "Traceback ...")


def test_judge_differential_and_metamorphic() -> None:
    base = [a(1.0, 2.0)]
    v = judge({"b": {"v0": Outcome("skipped"), "v1": ok(a(1.0, 2.0)), "v2": ok(a(1.0, 3.0)),
                     "v3": Outcome("skipped")}}, base)
    assert v.unsupported == []
    kinds = sorted((f.oracle, f.backend, f.variant, f.other) for f in v.findings)
    assert kinds == [(DIFFERENTIAL, "b", "v2", "baseline"), (METAMORPHIC, "b", "v2", "v1")]
    assert all("1/2 elements differ" in f.message for f in v.findings)
    f = next(f for f in v.findings if f.oracle == DIFFERENTIAL)
    assert (f.kind, f.backend, f.phase, f.output) == ("value", "b", "run", 0)
    assert f.details["max_abs"] == pytest.approx(1.0) and f.category != BASELINE
    # no baseline: only the metamorphic comparison with the first variant that ran
    v = judge({"b": {"v1": ok(a(1.0)), "v2": ok(a(5.0))}}, None)
    assert [(f.oracle, f.variant, f.other) for f in v.findings] == [(METAMORPHIC, "v2", "v1")]
    assert judge({"b": {"v1": ok(a(1.0)), "v2": ok(a(1.001))}}, [a(1.0)]).findings == []


def test_judge_crashes_and_unsupported() -> None:
    outcomes = {
        "ort": {"a": error("NOT_IMPLEMENTED : Could not find an implementation for Foo(1) node")},
        "tvm": {"x": error("boom in pass", phase="compile"),
                "y": Outcome("crash", "compile", signal=11, message="SIGSEGV"),
                "z": Outcome("timeout", "run", message="hung"),
                "w": Outcome("oom", "compile", message="memory"),
                "e": Outcome("crash", "run", message="exit 3")},
    }
    v = judge(outcomes, [a(1.0)])
    assert [u[:2] for u in v.unsupported] == [("ort", "a")]
    assert v.unsupported[0][2].startswith("RuntimeError: NOT_IMPLEMENTED")
    got = [(f.oracle, f.kind, f.backend, f.variant, f.phase) for f in v.findings]
    assert got == [(CRASH, "exception", "tvm", "x", "compile"), (CRASH, "signal", "tvm", "y", "compile"),
                   (CRASH, "timeout", "tvm", "z", "run"), (CRASH, "oom", "tvm", "w", "compile"),
                   (CRASH, "exit", "tvm", "e", "run")]
    x = v.findings[0]
    assert (x.message, x.error_type, x.traceback) == ("boom in pass", "RuntimeError", "Traceback ...")
    # the step the backend announced is part of the message
    o = error("bad")
    o.step = "FuseOps"
    assert judge({"tvm": {"x": o}}, None).findings[0].message == "[FuseOps] bad"
    # "unsupported" rules hold for their phase only, and read the error type too
    frontend = "The following operators are not supported for frontend ONNX: Celu"
    assert judge({"tvm": {"x": error(frontend, phase="import")}}, None).findings == []
    assert [f.kind for f in judge({"tvm": {"x": error(frontend, phase="run")}}, None).findings] == ["exception"]
    v = judge({"reference": {"r": error("no kernel", phase="run", error_type="NotImplementedError")}}, None)
    assert v.findings == [] and v.unsupported == [("reference", "r", "NotImplementedError: no kernel")]
    long = "NOT_IMPLEMENTED : Could not find an implementation for " + "x" * 400
    assert len(judge({"ort": {"a": error(long)}}, None).unsupported[0][2]) == 300


def test_judge_marks_a_suspect_reference() -> None:
    base = [a(0.0)]
    # both tvm variants and ort agree with each other, not with the baseline: the reference is suspect
    v = judge({"tvm": {"p": ok(a(1.0)), "q": ok(a(1.0))}, "ort": {"d": ok(a(1.0))}}, base)
    diff = [f for f in v.findings if f.oracle == DIFFERENTIAL]
    assert len(diff) == 3 and all(f.category == BASELINE for f in diff)
    # one tvm variant agrees with the baseline: tvm's other variant is not excused, and tvm siding
    # with the baseline splits the vote, so ort's disagreement stays ort's
    v = judge({"tvm": {"p": ok(a(0.0)), "q": ok(a(1.0))}, "ort": {"d": ok(a(1.0))}}, base)
    diff = [f for f in v.findings if f.oracle == DIFFERENTIAL]
    assert [(f.backend, f.category == BASELINE) for f in diff] == [("tvm", False), ("ort", False)]
    # nobody else sides with the backend: not suspect
    v = judge({"tvm": {"p": ok(a(1.0))}, "ort": {"d": ok(a(0.0))}}, base)
    assert [(f.backend, f.category == BASELINE) for f in v.findings] == [("tvm", False)]
    # "agree" uses the campaign's tolerances
    loose = {"float32": (0.5, 0.0)}
    v = judge({"tvm": {"p": ok(a(1.0))}, "ort": {"d": ok(a(1.3))}}, [a(0.0)], Criteria(tolerances=loose))
    assert [(f.backend, f.category == BASELINE) for f in v.findings] == [("tvm", True), ("ort", True)]
    v = judge({"tvm": {"p": ok(a(1.0))}, "ort": {"d": ok(a(1.3))}}, [a(0.0)])
    assert [(f.backend, f.category == BASELINE) for f in v.findings] == [("tvm", False), ("ort", False)]
    # another backend's failed variant does not side with anyone
    v = judge({"tvm": {"p": ok(a(1.0))}, "ort": {"d": error("x")}}, base)
    assert next(f for f in v.findings if f.oracle == DIFFERENTIAL).category != BASELINE


def test_judge_low_precision_variants_get_the_loose_bound() -> None:
    base = [a(1.0)]
    outcomes = {"ov": {"f32": ok(a(1.0)), "bf16": ok(a(1.05))}}
    assert sorted((f.oracle, f.variant) for f in judge(outcomes, base).findings) == [
        (DIFFERENTIAL, "bf16"), (METAMORPHIC, "bf16")]
    # only the low-precision variant's comparisons are loosened: f32 is still held to float32's bound
    bf16 = Criteria(low_precision={("ov", "bf16")})
    v = judge({"ov": {"bf16": ok(a(1.05)), "f32": ok(a(1.05))}}, base, bf16)
    assert [(f.oracle, f.variant) for f in v.findings] == [(DIFFERENTIAL, "f32")]
    assert judge(outcomes, base, bf16).findings == []
    assert judge({"ov": {"f32": ok(a(1.0)), "bf16": ok(a(1.2))}}, base, bf16).findings
    # the low-precision variant listed first loosens the metamorphic pair too
    assert judge({"ov": {"bf16": ok(a(1.05)), "f32": ok(a(1.0))}}, None, bf16).findings == []
    # explicit tolerances apply to every variant
    assert judge(outcomes, base, Criteria(tolerances={"float32": (0.1, 0.0)})).findings == []


def test_judge_invalid() -> None:
    violation = {"op": "Relu", "constraint": "T excludes int8", "kind": "dtype"}
    outcomes = {"tvm": {"a": error("rejected"), "b": Outcome("crash", "compile", signal=6, message="abort")},
                "ov": {"a": ok(a(1.0)), "b": ok(a(3.0)), "c": Outcome("skipped")},
                "ort": {"a": ok(a(1.0)), "b": ok(a(1.0))}}
    v = judge_invalid(outcomes, violation, confirmed=True)
    assert v.unsupported == []
    got = [(f.oracle, f.kind, f.backend, f.variant) for f in v.findings]
    assert got == [(DISRUPTIVE, "signal", "tvm", "b"), (DISRUPTIVE, INCONSISTENT, "ov", "b")]
    crash, garbage = v.findings
    assert crash.message == "abort (model breaks 'Relu: T excludes int8')"
    assert crash.details == {"violation": violation} and garbage.details == {"violation": violation}
    assert (garbage.other, garbage.phase, garbage.output) == ("a", "run", 0)
    assert "Relu: T excludes int8" in garbage.message
    # not confirmed invalid by the checker: disagreeing outputs are not a finding, crashes still are
    v = judge_invalid(outcomes, violation, confirmed=False)
    assert [(f.kind, f.backend) for f in v.findings] == [("signal", "tvm")]
    # low-precision pairs get the loose bound
    near = {"ov": {"a": ok(a(1.0)), "b": ok(a(1.05))}}
    assert len(judge_invalid(near, violation, True).findings) == 1
    assert judge_invalid(near, violation, True, Criteria(low_precision={("ov", "a")})).findings == []


def test_judge_migrated() -> None:
    expected = [a(0.5)]
    outcomes = {"tvm": {"s": Outcome("skipped"), "d": ok(a(0.6))},
                "ov": {"d": ok(a(0.5009))},
                "ort": {"d": error("NOT_IMPLEMENTED : Could not find an implementation for X", phase="run")}}
    v = judge_migrated(outcomes, expected)
    assert [(f.oracle, f.backend, f.variant, f.other, f.category == BASELINE) for f in v.findings] == [
        (DIFFERENTIAL, "tvm", "d", "baseline", False)]
    assert v.findings[0].message.startswith("Chebyshev distance")
    assert [u[:2] for u in v.unsupported] == [("ort", "d")]
    # a variant that failed does not stop the backend's next one from being judged
    v = judge_migrated({"tvm": {"x": error("boom", phase="import"), "d": ok(a(0.6))}}, expected)
    assert [(f.oracle, f.variant) for f in v.findings] == [(CRASH, "x"), (DIFFERENTIAL, "d")]
    # agreeing frontends are judged with the campaign's bound
    wide = {"float32": 0.05}
    v = judge_migrated({"tvm": {"d": ok(a(0.6))}, "ov": {"d": ok(a(0.64))}}, expected, wide)
    assert [f.category == BASELINE for f in v.findings] == [True, True]
    v = judge_migrated({"tvm": {"d": ok(a(0.6))}, "ov": {"d": ok(a(0.64))}}, expected)
    assert [f.category == BASELINE for f in v.findings] == [False, False]
    # another frontend that read the same model agrees with tvm: the library's output is suspect
    # (without model_of every frontend counts as reading the same model)
    outcomes["ov"]["d"] = ok(a(0.6))
    v = judge_migrated(outcomes, expected)
    assert [(f.backend, f.category == BASELINE) for f in v.findings] == [("tvm", True), ("ov", True)]
    model_of = {"tvm": "onnx", "ov": "onnx"}
    f = next(f for f in judge_migrated(outcomes, expected, model_of=model_of).findings if f.backend == "tvm")
    assert f.category == BASELINE
    # ... but not a frontend that was given another model
    f = next(f for f in judge_migrated(outcomes, expected, model_of={"tvm": "torch", "ov": "onnx"}).findings
             if f.backend == "tvm")
    assert f.category != BASELINE
    # a crash that is not "unsupported" is a finding
    v = judge_migrated({"tvm": {"d": error("segv-ish failure", phase="import")}}, expected)
    assert [(f.oracle, f.kind, f.phase) for f in v.findings] == [(CRASH, "exception", "import")]
    assert judge_migrated({"tvm": {"d": ok(a(0.6))}}, expected, {"float32": 0.5}).findings == []


def test_mismatch_details_for_every_path() -> None:
    # integers: how many elements differ, and an abstract distance of 1
    m = compare([np.array([1, 2, 3], np.int32)], [np.array([1, 5, 6], np.int32)])
    assert (m.output, m.kind, m.max_abs) == (0, "value", 1.0)
    assert m.detail == "2/3 elements differ (exact comparison)"
    # an empty output is skipped, the next one still compared
    m = compare([np.zeros((0,), f32), a(1.0)], [np.zeros((0,), f32), a(2.0)])
    assert m is not None and m.output == 1
    m = chebyshev([np.zeros((0,), f32), np.array([1], np.int8)], [np.zeros((0,), f32), np.array([2], np.int8)])
    assert m is not None and m.output == 1
    # chebyshev's special-values and distance paths
    m = chebyshev([a(1.0), a(np.nan)], [a(1.0), a(0.0)])
    assert (m.output, m.kind) == (1, "value") and m.detail.startswith("NaN/inf where the library has none")
    m = chebyshev([a(1.0), a(0.5)], [a(1.0), a(0.7)])
    assert (m.output, m.kind) == (1, "value") and m.detail == "Chebyshev distance 0.2 > 0.001"
    # the bound itself is allowed: distance 0.5 against a bound of exactly 0.5
    assert chebyshev([a(1.0)], [a(1.5)], {"float32": 0.5}) is None
    assert chebyshev([a(1.0)], [a(1.5001)], {"float32": 0.5}) is not None


@pytest.mark.parametrize("dtype", [f16, f32, f64])
def test_comparing_nan_inf_and_out_of_range_values_warns_about_nothing(dtype) -> None:
    """A campaign's console carries no numpy warnings: inf - inf, casts of NaN and inf, and values
    beyond float16's range are compared, not warned about."""
    import warnings

    big = 1e300 if dtype is f64 else 3e38 if dtype is f32 else 6e4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = np.array([np.nan, np.inf, -np.inf, big, -big, 1.0], dtype)
        same = e.copy()
        other = np.array([1.0, np.inf, np.inf, -big, np.nan, 2.0], dtype)
        assert compare([e], [same]) is None
        m = compare([e], [other])
        # NaN against 1, -inf against inf, big against -big, -big against NaN, 1 against 2; inf = inf
        assert m is not None and m.detail.startswith("5/6 elements differ") and m.max_abs == float("inf")
        assert chebyshev([e], [same]) is None
        assert chebyshev([e], [other]) is not None
        assert compare([e], [other], single=[0]) is not None
        # integers computed from floats, with a unit of slack, at the ends of their range
        ints = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0], np.int64)
        assert compare([ints], [ints], rounded=[0]) is None
        assert all_finite([e]) is False


def test_integers_computed_from_floats_at_low_precision_are_compared_by_shape_and_type_only() -> None:
    """OpenVINO's default (bfloat16 here) moves a float feeding a QuantizeLinear from 39.51 to 39.49: the
    quantized value moves a step, and a MatMulInteger's weight of 126 makes that 252 (a hand check found it
    listed as a bug).  Where one side computed in low precision, such integers may move by any amount;
    their shape and type are still compared, and integers not computed from floats exactly."""
    f32 = np.array([5040, 126], np.int32)
    bf16 = np.array([4788, 126], np.int32)
    assert compare([f32], [bf16], rounded=[0]) is not None  # one unit of slack at full precision
    assert compare([f32], [bf16], rounded=[0], low_precision=True) is None
    assert compare([f32], [bf16[:1]], rounded=[0], low_precision=True).kind == "shape"
    assert compare([f32], [bf16], low_precision=True) is not None  # not computed from floats: exact
