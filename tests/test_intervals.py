"""Value intervals: transfer functions on hand examples, domains, and soundness against ONNX Runtime."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from dlcfuzz.export.onnx import to_onnx
from dlcfuzz.ir import TensorType
from dlcfuzz.solve.intervals import (
    REJECT,
    TOP,
    Domain,
    analyze,
    domain,
    finite,
    fresh_range,
    num,
    output_intervals,
)
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import synthesize
from tests.helpers import SESSION_OPTIONS, ort_generator

F32 = "float32"


def t(shape, dtype: str = F32) -> TensorType:
    return TensorType(tuple(shape), dtype)


def out(op: str, ivs, types, attrs=None, outs=None):
    return output_intervals(op, ivs, types, attrs or {}, outs or [types[0]])


def within(got, lo: float, hi: float, slack: float = 1e-4) -> bool:
    """``got`` contains [lo, hi] and is at most ``slack`` (relative) wider."""
    g_lo, g_hi = got
    return g_lo <= lo and hi <= g_hi and g_lo >= lo - slack * max(1, abs(lo)) and g_hi <= hi + slack * max(1, abs(hi))


# ---------------------------------------------------------------------------------------------
# Transfer functions
# ---------------------------------------------------------------------------------------------
def test_exact_elementwise() -> None:
    x = [(-1.5, 2.0)]
    assert out("Relu", x, [t((3,))]) == [(0.0, 2.0)]
    assert out("Abs", x, [t((3,))]) == [(0.0, 2.0)]
    assert out("Neg", x, [t((3,))]) == [(-2.0, 1.5)]
    assert out("Identity", x, [t((3,))]) == x
    assert out("Floor", x, [t((3,))]) == [(-2.0, 2.0)]


def test_monotone_and_bounded_functions() -> None:
    assert within(out("Exp", [(-1.0, 2.0)], [t((3,))])[0], math.exp(-1), math.exp(2))
    assert within(out("Log", [(0.5, 4.0)], [t((3,))])[0], math.log(0.5), math.log(4))
    assert out("Sqrt", [(0.0, 4.0)], [t((3,))])[0][0] == 0.0  # an exact 0 bound keeps its sign
    assert within(out("Sigmoid", [(-2.0, 2.0)], [t((3,))])[0], 1 / (1 + math.e ** 2), 1 / (1 + math.e ** -2))
    lo, hi = out("Sin", [(-10.0, 10.0)], [t((3,))])[0]
    assert (lo, hi) == (-1.0, 1.0)  # Sin saturates within [-1, 1]
    assert within(out("Cos", [(-0.5, 1.0)], [t((1,))])[0], math.cos(1.0), 1.0)
    assert within(out("Tan", [(-1.0, 1.0)], [t((1,))])[0], -math.tan(1), math.tan(1))
    assert out("Tan", [(-2.0, 2.0)], [t((1,))])[0] == (-num(F32).fmax, num(F32).fmax)  # crosses a pole: finite only
    assert out("Softmax", [(-5.0, 5.0)], [t((4,))]) == [(0.0, 1.0)]
    assert out("Less", [TOP, (0.0, 1.0)], [t((2,)), t((2,))], outs=[t((2,), "bool")]) == [(0.0, 1.0)]


def test_arithmetic() -> None:
    a, b = (1.0, 2.0), (-3.0, 0.5)
    assert within(out("Add", [a, b], [t((2,))] * 2)[0], -2.0, 2.5)
    assert within(out("Sub", [a, b], [t((2,))] * 2)[0], 0.5, 5.0)
    assert within(out("Mul", [a, b], [t((2,))] * 2)[0], -6.0, 1.0)
    assert within(out("Div", [a, (0.5, 1.0)], [t((2,))] * 2)[0], 1.0, 4.0)
    assert out("Div", [(-7.0, 7.0), (2.0, 3.0)], [t((2,), "int32")] * 2)[0] == (-3.0, 3.0)  # truncation
    assert within(out("Sum", [a, a, b], [t((2,))] * 3)[0], -1.0, 4.5)
    assert out("Max", [a, b], [t((2,))] * 2) == [(1.0, 2.0)]
    assert out("Where", [(0.0, 1.0), a, b], [t((2,), "bool"), t((2,)), t((2,))], outs=[t((2,))]) == [(-3.0, 2.0)]


def test_integer_wrap_around_is_the_whole_range() -> None:
    i8 = t((2,), "int8")
    assert out("Add", [(100.0, 120.0), (100.0, 120.0)], [i8, i8]) == [(-128.0, 127.0)]
    assert out("Add", [(1.0, 2.0), (3.0, 4.0)], [i8, i8]) == [(4.0, 6.0)]
    assert out("Neg", [(-128.0, 0.0)], [i8]) == [(-128.0, 127.0)]  # -(-128) wraps


def test_cast_follows_the_target_type() -> None:
    x = [t((2,))]
    assert out("Cast", [(-3.7, 100.9)], x, {"to": 3}, [t((2,), "int8")]) == [(-3.0, 100.0)]
    assert out("Cast", [(-3.7, 300.9)], x, {"to": 3}, [t((2,), "int8")]) == [(-128.0, 127.0)]
    assert out("Cast", [(0.0, 7e4)], x, {"to": 10}, [t((2,), "float16")])[0][1] == math.inf  # overflow
    assert out("Cast", [(0.5, 2.0)], x, {"to": 9}, [t((2,), "bool")]) == [(1.0, 1.0)]


def test_reductions_scale_by_the_reduced_count() -> None:
    x, src = [(-1.0, 2.0), None], [t((2, 3)), None]
    assert within(out("ReduceSum", x, src, {"keepdims": 0}, [t((2,))])[0], -3.0, 6.0)
    assert within(out("ReduceMean", x, src, {}, [t((2, 1))])[0], -1.0, 2.0)
    assert out("ReduceMax", x, src, {}, [t((2, 1))]) == [(-1.0, 2.0)]
    assert within(out("ReduceSumSquare", x, src, {}, [t((2, 1))])[0], 0.0, 12.0)
    assert within(out("ReduceProd", [(0.5, 2.0), None], src, {}, [t((2, 1))])[0], 0.125, 8.0)
    assert out("ArgMax", [TOP], [t((2, 3))], {"axis": 1}, [t((2, 1), "int64")]) == [(0.0, 2.0)]


def test_contractions_bound_by_the_contraction_length() -> None:
    assert within(out("MatMul", [(-1.0, 1.0), (-2.0, 2.0)], [t((3, 4)), t((4, 5))], {}, [t((3, 5))])[0], -8.0, 8.0)
    gemm = out("Gemm", [(0.0, 1.0), (0.0, 2.0), (1.0, 1.0)], [t((2, 3)), t((3, 4)), t((4,))],
               {"alpha": 0.5, "beta": 2.0}, [t((2, 4))])[0]
    assert within(gemm, 2.0, 5.0)
    # Conv: C/group * prod(kernel) = 2 * 9 products, plus padding zeros
    conv = out("Conv", [(-1.0, 1.0), (-1.0, 1.0)], [t((1, 2, 5, 5)), t((3, 2, 3, 3))], {}, [t((1, 3, 3, 3))])[0]
    assert within(conv, -18.0, 18.0)
    ein = out("Einsum", [(1.0, 2.0), (1.0, 3.0)], [t((2, 3)), t((3, 4))], {"equation": "ij,jk->ik"}, [t((2, 4))])[0]
    assert within(ein, 3.0, 18.0)


def test_data_movement_preserves_and_pad_takes_the_union() -> None:
    x = (1.0, 2.0)
    assert out("Transpose", [x], [t((2, 3))], {}, [t((3, 2))]) == [x]
    assert out("Split", [x, None], [t((4,)), None], {}, [t((2,)), t((2,))]) == [x, x]
    assert out("Concat", [x, (-5.0, 0.0)], [t((2,)), t((3,))], {"axis": 0}, [t((5,))]) == [(-5.0, 2.0)]
    assert out("Pad", [x, (0.0, 1.0), (-3.0, -3.0)], [t((2,)), t((2,), "int64"), t(())], {}, [t((4,))]) == [(-3.0, 2.0)]
    assert out("Pad", [x, (0.0, 1.0)], [t((2,)), t((2,), "int64")], {}, [t((4,))]) == [(0.0, 2.0)]  # pads with 0
    assert out("Pad", [x, (0.0, 1.0)], [t((2,)), t((2,), "int64")], {"mode": "edge"}, [t((4,))]) == [x]
    assert out("Shape", [TOP], [t((2, 5, 3))], {}, [t((3,), "int64")]) == [(2.0, 5.0)]


def test_non_finite_inputs_give_unknown_outputs() -> None:
    assert out("Relu", [TOP], [t((3,))]) == [TOP]
    assert out("Sigmoid", [(0.0, math.inf)], [t((3,))]) == [TOP]  # NaN propagates through bounded functions
    assert out("IsNaN", [TOP], [t((3,))], {}, [t((3,), "bool")]) == [(0.0, 1.0)]
    assert out("NoSuchOp", [(0.0, 1.0)], [t((3,))]) == [TOP]


# ---------------------------------------------------------------------------------------------
# Domains
# ---------------------------------------------------------------------------------------------
def test_input_domains() -> None:
    def dom(op: str, slot: int = 0, dtype: str = F32, ivs=(), first: str = F32):
        c = SimpleNamespace(ins=[t((4,), first)], s=(4,), r=1, attrs={})  # the solver context, in part
        return domain(op, slot, dtype, 4, c, list(ivs))

    assert dom("Acosh").accepts((1.0, 3.0)) and not dom("Acosh").accepts((0.5, 3.0))
    assert dom("Log").accepts((1e-3, 2.0)) and not dom("Log").accepts((0.0, 2.0))
    assert dom("Sqrt").accepts((0.0, 2.0)) and not dom("Sqrt").accepts((-1e-30, 2.0))
    assert dom("Asin").accepts((-1.0, 1.0)) and not dom("Asin").accepts((-1.0, 1.0 + 1e-6))
    assert not dom("Atanh").accepts((-1.0, 1.0)) and dom("Atanh").accepts((-0.99, 0.99))
    recip = dom("Reciprocal")
    assert recip.accepts((0.5, 2.0)) and recip.accepts((-2.0, -0.5)) and not recip.accepts((-2.0, 2.0))
    assert dom("Exp").hi < 89 and 9.5 < dom("Exp", dtype="float16").hi < 11  # float16 overflows above ~11
    assert not dom("Relu").accepts(TOP) and dom("IsNaN") is None  # float slots need finite values
    # integer divisors: nonzero; and not -1 when the dividend may be INT_MIN (the quotient traps)
    assert dom("Div", 1, "int32", [(-2.0, 2.0)]).accepts((-2.0, -1.0))
    assert not dom("Div", 1, "int32", [(-2.0, 2.0)]).accepts((-1.0, 1.0))
    assert not dom("Div", 1, "int32", [(-2.0 ** 31, 0.0)]).accepts((-1.0, -1.0))
    assert dom("Div", 0, "int32") is None
    # Pow: a negative base needs an integer exponent that cannot overflow
    assert dom("Pow", 1, F32, [(-2.0, 2.0)]) is REJECT
    assert dom("Pow", 1, "int64", [(-2.0, 2.0)]).accepts((0.0, 3.0))
    assert not dom("Pow", 1, "int64", [(-2.0, 2.0)]).accepts((-1.0, 3.0))
    assert dom("Pow", 1, F32, [(0.5, 2.0)]).accepts((-3.0, 3.0))
    assert not dom("Pow", 1, F32, [(0.5, 1e10)]).accepts((-5.0, 5.0))
    # amplifying operators: the later input's domain keeps the output finite
    assert not dom("Mul", 1, F32, [(-1e30, 1e30)]).accepts((-1e10, 1e10))
    assert dom("BatchNormalization", 4).accepts((0.0, 2.0)) and not dom("BatchNormalization", 4).accepts((-1.0, 2.0))


def test_fresh_ranges_lie_in_the_domain_and_the_default_range() -> None:
    rng = random.Random(0)
    for op, slot, dtype, ivs in [("Log", 0, F32, []), ("Acosh", 0, F32, []), ("Atanh", 0, F32, []),
                                 ("Reciprocal", 0, F32, []), ("Div", 1, "uint8", [(0.0, 2.0)]),
                                 ("Div", 1, "int32", [(-2.0 ** 31, 0.0)]), ("Exp", 0, "float16", [])]:
        d = domain(op, slot, dtype, 4, None, ivs)
        for _ in range(5):
            lo, hi = fresh_range(d, t((2,), dtype), rng)
            assert lo <= hi and d.accepts((lo, hi)), (op, d, lo, hi)
            assert lo >= -2.0 and hi <= 2.0
            if dtype.startswith("float"):  # representable: rounding keeps drawn values inside
                nt = np.dtype(dtype).type
                assert float(nt(lo)) == lo and float(nt(hi)) == hi
    assert fresh_range(domain("Log", 0, F32, 4, None, []), t((2,)), rng) == (0.25, 2.0)
    assert fresh_range(Domain(0.0, 5.0), t((2,)), rng) == (0.0, 2.0)


def test_a_spread_domain_accepts_only_intervals_that_prove_a_nonzero_element() -> None:
    # DynamicQuantizeLinear divides by (max(0, max x) - min(0, min x)) / 255: an all-zero x is undefined
    d = domain("DynamicQuantizeLinear", 0, F32, 4, None, [])
    assert d.accepts((0.5, 2.0)) and d.accepts((-2.0, -0.5))
    assert not d.accepts((0.0, 0.0)) and not d.accepts((-4.0, 4.0))  # x - x lies in any mixed interval
    assert not d.accepts((0.0, 2.0))  # Relu of negatives: all zero
    rng = random.Random(0)
    for _ in range(5):
        lo, hi = fresh_range(d, t((3,)), rng)
        assert max(hi, -lo) >= 1.0  # new inputs reach well past 0
    assert fresh_range(Domain(-1.0, 0.0, spread=0.5), t((2,)), rng)[0] <= -0.5


def test_dynamic_quantize_never_reads_an_all_zero_tensor() -> None:
    """Graphs of operators that can zero a tensor (x - x, Relu of negatives, Min ...) feeding
    DynamicQuantizeLinear: its input always holds a nonzero element (on ONNX Runtime)."""
    specs = [REGISTRY[o] for o in ("Sub", "Relu", "Neg", "Min", "DynamicQuantizeLinear")]
    gen = ort_generator(specs, op_range=(3, 8), dtypes=(F32,))
    seen = 0
    for seed in range(60):
        g = gen.generate(seed)
        names, sess = _run_all_values(g)
        feeds = synthesize(g, np.random.default_rng(seed))
        vals = {**feeds, **dict(zip(names, sess.run(None, feeds), strict=True))}
        for node in g.nodes:
            if node.op == "DynamicQuantizeLinear":
                seen += 1
                assert np.any(vals[node.inputs[0]]), f"seed {seed}: all-zero input {node.inputs[0]}"
    assert seen >= 30


# ---------------------------------------------------------------------------------------------
# Soundness: actual ONNX Runtime outputs lie within the computed intervals
# ---------------------------------------------------------------------------------------------
def _run_all_values(g):
    model = to_onnx(g)
    names = [o for n in g.nodes for o in n.outputs]
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    return names, ort.InferenceSession(model.SerializeToString(), SESSION_OPTIONS, providers=["CPUExecutionProvider"])


def _check_sound(g, seed: int) -> None:
    names, sess = _run_all_values(g)
    ivs = analyze(g)
    for attempt in (0, 3):
        vals = dict(zip(names, sess.run(None, synthesize(g, np.random.default_rng(seed), attempt)), strict=True))
        for node in g.nodes:
            for o in node.outputs:
                lo, hi = ivs[o]
                a = vals[o].astype(np.float64)
                if node.op == "MeanVarianceNormalization":  # ORT: NaN on constant slices (a documented caveat)
                    continue
                if finite((lo, hi)):
                    assert np.isfinite(a).all(), f"{node.op} {node.attrs}: non-finite output, interval {lo, hi}"
                if a.size and not np.isnan(a).all():
                    assert lo <= np.nanmin(a) and np.nanmax(a) <= hi, (
                        f"{node.op} {node.attrs}: [{np.nanmin(a)}, {np.nanmax(a)}] outside {lo, hi}")


@pytest.mark.parametrize("op", sorted(REGISTRY))
def test_single_op_outputs_lie_within_their_intervals(op: str) -> None:
    spec = REGISTRY[op]
    try:
        gen = ort_generator([spec], opset=max(17, spec.since))
    except ValueError:
        pytest.skip(f"{op}: ONNX Runtime has no kernel for any allowed dtype")
    for seed in range(6):
        _check_sound(gen.generate(seed), seed)


def test_graph_values_lie_within_their_intervals() -> None:
    gen = ort_generator(list(REGISTRY.values()), op_range=(10, 30))
    for seed in range(25):
        _check_sound(gen.generate(seed), seed)


@pytest.mark.parametrize("op", ["QuantizeLinear", "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv"])
def test_quantization_results_lie_within_their_intervals(op: str) -> None:
    """The quantization operators' transfer functions (they once had none: their outputs were the type's
    whole range); the integer contractions' bounds are far inside int32."""
    spec = REGISTRY[op]
    gen = ort_generator([spec], opset=max(17, spec.since))
    for seed in range(20):
        g = gen.generate(seed)
        _check_sound(g, seed)
        if op in ("MatMulInteger", "ConvInteger"):
            lo, hi = analyze(g)[g.nodes[0].outputs[0]]
            assert lo > -2.0**31 and hi < 2.0**31 - 1, (lo, hi)
