"""The one judge (oracle/judge.py): what a test is judged by (``Criteria``, built by ``criteria_for``
from the variants' options), the baseline's choice (the reference evaluator where trusted, else ONNX
Runtime without optimizations) on tiny real graphs, confirmed runs, and the categories of findings.
Expected values are written out here from the documented rules, never computed by the judge."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dlcfuzz.backends.base import CRASH, ERROR, OK, Outcome, Test, Variant
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value
from dlcfuzz.oracle import (
    BASELINE,
    COMPILER,
    CONFIRM_RUNS,
    DIFFERENTIAL,
    EXPORTER,
    FALLBACK,
    METAMORPHIC,
    UNCONFIRMED,
    Baseline,
    Criteria,
    Finding,
    Runner,
    criteria_for,
    judge,
    run_baseline,
    run_confirmed,
)
from dlcfuzz.oracle.blame import blamed_pass
from dlcfuzz.oracle.judge import baseline_chain
from dlcfuzz.run.dedup import graph_signature, title
from dlcfuzz.run.worker import PhaseLimits, WorkerPool


def _ok(*values: float) -> Outcome:
    return Outcome(OK, "run", [np.array(values, np.float32)])


def _one(op: str, shape: tuple[int, ...], out_shape: tuple[int, ...], attrs: dict | None = None) -> Graph:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType(shape, "float32"), INPUT_KIND))
    g.add_value(Value("y", TensorType(out_shape, "float32"), NODE_KIND))
    g.add_node(Node(op, ["x"], ["y"], attrs or {}, "n0"))
    g.outputs = ["y"]
    return g


# -- Criteria ----------------------------------------------------------------------------------------
def test_criteria_are_built_from_the_variants_options() -> None:
    variants = {
        "openvino": {"default": Variant("default", {"low_precision": True, "float64_in_float32": True}),
                     "f32": Variant("f32", {"low_precision": False, "float64_in_float32": True})},
        "inductor": {"eager": Variant("eager", {"uncompiled": True}), "inductor": Variant("inductor"),
                     "cuda-eager": Variant("cuda-eager", {"compare_with": "eager"})},
        "ort": {"basic": Variant("basic", {"level": "ORT_ENABLE_BASIC"})},
    }
    c = criteria_for(variants, {"float32": (0.1, 0.0)})
    assert c.low_precision == {("openvino", "default")}
    assert c.in_float32 == {("openvino", "default"), ("openvino", "f32")}
    assert c.uncompiled == {("inductor", "eager")}
    assert c.compare_with == {("inductor", "cuda-eager"): "eager"}
    assert c.anchors == {("inductor", "eager")}
    assert c.tolerances == {"float32": (0.1, 0.0)}
    assert (c.baseline_name, c.rounded, c.single) == ("baseline", (), {})


def test_a_plugin_that_still_says_reduced_precision_is_judged_as_low_precision() -> None:
    """The option's name before the rename: a backend written for it keeps its loose bound."""
    c = criteria_for({"plug": {"bf16": Variant("bf16", {"reduced_precision": True}), "f32": Variant("f32")}})
    assert c.low_precision == {("plug", "bf16")}
    # 1.05 against 1.0 in float32: beyond rtol 1e-2 + atol 1e-3, within the low-precision 0.1
    assert judge({"plug": {"bf16": _ok(1.05)}}, [np.array([1.0], np.float32)], c).findings == []


def test_criteria_cannot_be_changed_once_built() -> None:
    c = Criteria(low_precision={("ov", "bf16")})
    assert isinstance(c.low_precision, frozenset)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.baseline_name = "x"  # type: ignore[misc]


def test_criteria_for_a_graph_name_its_rounded_and_single_precision_outputs() -> None:
    g = Graph(opset=17)
    g.add_value(Value("x", TensorType((2,), "float32"), INPUT_KIND))
    g.add_value(Value("d", TensorType((2, 3), "float64"), INPUT_KIND))
    g.add_value(Value("s", TensorType((3,), "float64"), CONST_KIND, np.ones(3)))
    for name, dtype, shape in (("r", "float32", (2,)), ("i", "int32", (2,)), ("n", "float64", (2, 3))):
        g.add_value(Value(name, TensorType(shape, dtype), NODE_KIND))
    g.add_node(Node("Relu", ["x"], ["r"], {}, "n0"))
    g.add_node(Node("Cast", ["x"], ["i"], {"to": 6}, "n1"))  # a float cast to int32: one unit of slack
    g.add_node(Node("LayerNormalization", ["d", "s"], ["n"], {}, "n2"))  # float64 through float32 (stash_type 1)
    g.outputs = ["r", "i", "n"]
    c = Criteria(tolerances={"float32": (0.5, 0.0)}).for_graph(g, "ort/disable_all")
    assert (c.rounded, c.single, c.baseline_name) == ((1,), {2: "float32"}, "ort/disable_all")
    assert c.tolerances == {"float32": (0.5, 0.0)}  # the backend set's part is kept


def test_pair_tolerances_loosen_for_a_low_precision_or_float32_member() -> None:
    c = Criteria(low_precision={("ov", "bf16")}, in_float32={("ov", "f32")})
    assert c.pair_tolerances({("ov", "bf16"), ("ov", "x")})["float32"] == (1e-1, 5e-2)
    assert c.pair_tolerances({("ov", "x")})["float32"] == (1e-2, 1e-3)
    assert c.pair_tolerances({("ov", "f32")})["float64"] == (1e-2, 1e-3)  # float32's bound for float64
    assert c.pair_tolerances({("ov", "x")})["float64"] == (1e-5, 1e-8)


# -- categories ---------------------------------------------------------------------------------------
def test_findings_name_the_baseline_the_criteria_name() -> None:
    v = judge({"tvm": {"O3": _ok(1, 5)}}, [np.array([1, 2], np.float32)], Criteria(baseline_name="ort/disable_all"))
    f, = v.findings
    assert (f.oracle, f.kind, f.other, f.output, f.category) == (DIFFERENTIAL, "value", "ort/disable_all", 0, COMPILER)
    assert f.details["max_abs"] == 3.0


def test_each_category_of_a_divergence() -> None:
    base = [np.array([1, 2], np.float32)]
    eager = Criteria(uncompiled={("inductor", "eager")}, baseline_name="reference/default")
    # the uncompiled variant against the baseline is the exporter's; compiled code against eager only
    v = judge({"inductor": {"eager": _ok(1, 5), "inductor": _ok(1, 5), "dyn": _ok(1, 7)}}, base, eager)
    assert sorted((f.oracle, f.variant, f.other, f.category) for f in v.findings) == [
        (DIFFERENTIAL, "eager", "reference/default", EXPORTER), (METAMORPHIC, "dyn", "eager", COMPILER)]
    # two compilers agreeing with each other against the baseline outvote it
    both = {"ort": {"basic": _ok(3, 3)}, "tvm": {"O3": _ok(3, 3)}}
    v = judge(both, base, Criteria(baseline_name="reference/default"))
    assert [(f.backend, f.category) for f in v.findings] == [("ort", BASELINE), ("tvm", BASELINE)]
    # the baseline's own backend does not vote: with ORT's disable_all as the baseline, TVM outvotes it
    # for ORT basic, but ORT cannot do the same for TVM
    v = judge(both, base, Criteria(baseline_name="ort/disable_all"))
    assert [(f.backend, f.category) for f in v.findings] == [("ort", BASELINE), ("tvm", COMPILER)]
    # a crash is the compiler's, a declined operator no finding
    crash = Outcome(CRASH, "compile", signal=11, message="segfault")
    declined = Outcome(ERROR, "import", error_type="OpNotImplemented", message="Operator Foo is not supported")
    v = judge({"tvm": {"O3": crash, "O0": declined}}, None)
    assert [(f.oracle, f.kind, f.category) for f in v.findings] == [("crash", "signal", COMPILER)]


def test_a_gpu_variant_is_held_to_the_tolerance_measured_on_a_gpu() -> None:
    """float32 rtol 3e-3 on a GPU pair (GPU_TOLERANCES), 1e-2 on the CPU: a 5e-3 relative gap
    (100 against 100.5, past atol 1e-3) is a finding on the GPU and rounding on the CPU."""
    variants = {"inductor": {"eager": Variant("eager", {"uncompiled": True}),
                             "inductor": Variant("inductor", {"compare_with": "eager"}),
                             "cuda-eager": Variant("cuda-eager", {"device": "cuda", "compare_with": "eager"})}}
    c = criteria_for(variants)
    assert c.on_gpu == {("inductor", "cuda-eager")}
    outcomes = {"inductor": {"eager": _ok(100.0), "inductor": _ok(100.5), "cuda-eager": _ok(100.5)}}
    v = judge(outcomes, None, c)
    assert [(f.oracle, f.variant, f.other) for f in v.findings] == [(METAMORPHIC, "cuda-eager", "eager")]
    # within 3e-3 on the GPU too
    outcomes["inductor"]["cuda-eager"] = _ok(100.2)
    assert judge(outcomes, None, c).findings == []


# -- the baseline ---------------------------------------------------------------------------------------
def test_the_chain_tries_the_reference_only_where_it_is_trusted() -> None:
    relu = _one("Relu", (2,), (2,))
    global_max = _one("GlobalMaxPool", (1, 2, 3, 3), (1, 2, 1, 1))  # the evaluator's output rank is wrong
    assert baseline_chain(relu) == [("reference", "default"), ("ort", "disable_all")]
    assert baseline_chain(relu, reference=False) == [("ort", "disable_all")]
    assert baseline_chain(global_max) == [("ort", "disable_all")]
    assert FALLBACK == ("ort", "disable_all")


class Counting:
    """A Runner that counts the runs it passes on to the real worker pool."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool, self.runs = pool, []

    def run(self, backend: str, test: Test, variants: list[str], fresh: bool = False,
            runs: int = 1) -> dict[str, Outcome]:
        self.runs.append((backend, tuple(variants), fresh))
        return self.pool.run(backend, test, variants, fresh=fresh, runs=runs)



def test_the_baseline_is_the_reference_where_trusted_else_ort_without_optimizations(pool: WorkerPool) -> None:
    relu = _one("Relu", (3,), (3,))
    x = np.array([-1.5, 0.0, 2.5], np.float32)
    counting = Counting(pool)
    b = run_baseline(counting, Test(to_bytes(relu), relu.to_json(), {"x": x}), relu)
    assert (b.which, b.name, b.failed) == (("reference", "default"), "reference/default", [])
    assert b.outputs[0].tolist() == [0.0, 0.0, 2.5]
    assert counting.runs == [("reference", ("default",), False)]

    gmp = _one("GlobalMaxPool", (1, 2, 2, 2), (1, 2, 1, 1))
    x = np.array([[[[1, 7], [3, 2]], [[-4, -1], [-9, -2]]]], np.float32)
    counting = Counting(pool)
    b = run_baseline(counting, Test(to_bytes(gmp), gmp.to_json(), {"x": x}), gmp)
    assert b.name == "ort/disable_all"
    assert b.outputs[0].ravel().tolist() == [7.0, -1.0]
    assert counting.runs == [("ort", ("disable_all",), False)]


def test_ort_already_run_is_not_run_again(pool: WorkerPool) -> None:
    gmp = _one("GlobalMaxPool", (1, 1, 1, 2), (1, 1, 1, 1))
    ran = Outcome(OK, "run", [np.array([[[[5.0]]]], np.float32)])
    counting = Counting(pool)
    b = run_baseline(counting, Test(to_bytes(gmp), gmp.to_json(), {"x": np.zeros((1, 1, 1, 2), np.float32)}), gmp,
                     fallback=ran)
    assert b.outcome is ran and counting.runs == []


class Scripted:
    """A Runner whose outcomes are written out per (backend, fresh): what a worker pool reports, for
    the judge's handling of it (no compiler involved)."""

    def __init__(self, script: dict[tuple[str, bool], Outcome]) -> None:
        self.script, self.runs = script, []

    def run(self, backend: str, test: Test, variants: list[str], fresh: bool = False,
            runs: int = 1) -> dict[str, Outcome]:
        self.runs.append((backend, fresh, runs))
        return {v: self.script[(backend, fresh)] for v in variants}


def test_a_failing_baseline_is_recorded_and_the_next_one_serves() -> None:
    relu = _one("Relu", (1,), (1,))
    test = Test(to_bytes(relu), relu.to_json(), {"x": np.ones(1, np.float32)})
    broken = Outcome(ERROR, "run", error_type="RuntimeError", message="no kernel")
    b = run_baseline(Scripted({("reference", False): broken, ("ort", False): _ok(1)}), test, relu)
    assert b.name == "ort/disable_all"
    assert b.failed == [("reference", "default", "baseline failed: RuntimeError: no kernel")]
    b = run_baseline(Scripted({("reference", False): broken, ("ort", False): broken}), test, relu)
    assert (b.which, b.outcome, b.name, len(b.failed)) == (None, None, "none", 2)
    assert Baseline(None, None).outputs is None


# -- confirmed runs -------------------------------------------------------------------------------------
def test_a_crash_counts_only_when_a_fresh_process_repeats_it() -> None:
    test = Test(b"", "", {})
    dies = Outcome(CRASH, "compile", signal=11, message="SIGSEGV")
    # died in the pooled worker, ran in a fresh one: an unconfirmed crash, the fresh outcomes stand
    runner = Scripted({("tvm", False): dies, ("tvm", True): _ok(1)})
    got, late, _ = run_confirmed(runner, "tvm", test, ["O3"])
    assert got["O3"].status == OK
    assert [(f.kind, f.category, f.variant) for f in late] == [("unconfirmed", UNCONFIRMED, "O3")]
    assert runner.runs == [("tvm", False, 1), ("tvm", True, CONFIRM_RUNS)]
    # dies in the fresh one too: the crash stands, nothing unconfirmed
    got, late, _ = run_confirmed(Scripted({("tvm", False): dies, ("tvm", True): dies}), "tvm", test, ["O3"])
    assert got["O3"].status == CRASH and late == []
    # asked fresh from the start (the reducer's last check): not run a second time
    runner = Scripted({("tvm", True): dies})
    run_confirmed(runner, "tvm", test, ["O3"], fresh=True, runs=CONFIRM_RUNS)
    assert runner.runs == [("tvm", True, CONFIRM_RUNS)]


def test_the_worker_pool_and_the_test_runners_are_runners() -> None:
    assert isinstance(WorkerPool(PhaseLimits()), Runner)
    assert isinstance(Scripted({}), Runner) and isinstance(Counting(WorkerPool(PhaseLimits())), Runner)
    assert not isinstance(object(), Runner)


# -- bundles written before the renames -------------------------------------------------------------------
def test_a_pass_blamed_under_the_old_key_signs_and_titles_the_same() -> None:
    """Bundles of campaigns before the rename name the pass ``details["culprit"]``."""
    g = _one("Relu", (2,), (2,))
    first = {"node": "n0", "op": "Relu", "output": "y", "kind": "value", "dtype": "float32"}
    new = Finding(METAMORPHIC, "value", "ort", "basic", "run", "1/2 differ", other="disable_all", output=0,
                  details={"first_diverging": first, "blamed_pass": "QDQPropagationTransformer"})
    old = dataclasses.replace(new, details={"first_diverging": first, "culprit": "QDQPropagationTransformer"})
    assert blamed_pass(old) == blamed_pass(new) == "QDQPropagationTransformer"
    assert graph_signature(old, g) == graph_signature(new, g)
    assert title(old) == title(new) and "caused by pass QDQPropagationTransformer" in title(new)


def test_the_oracle_imports_no_higher_layer() -> None:
    """``oracle`` may import ir, spec, export, values and backends, never run (it is handed a Runner)."""
    import ast
    from pathlib import Path

    import dlcfuzz.oracle

    allowed = {"oracle", "ir", "spec", "export", "values", "backends"}
    for path in Path(dlcfuzz.oracle.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                parts = name.split(".")
                if parts[0] == "dlcfuzz" and len(parts) > 1:
                    assert parts[1] in allowed, f"{path.name} imports {name}"


def test_a_low_precision_variant_may_move_integers_computed_from_floats_by_any_amount() -> None:
    """OpenVINO's default (bfloat16) against its f32 variant, and against the baseline: an int32 output
    computed from float math (a QuantizeLinear's step times a MatMulInteger's weight) 252 apart is no
    finding; the same difference between two full-precision variants is one."""
    c = Criteria(low_precision={("ov", "bf16")}, rounded=(0,))
    f32, bf16 = np.array([5040], np.int32), np.array([4788], np.int32)
    outcomes = {"ov": {"f32": Outcome(OK, outputs=[f32]), "bf16": Outcome(OK, outputs=[bf16])}}
    assert judge(outcomes, [f32], c).findings == []
    full = {"ov": {"f32": Outcome(OK, outputs=[f32]), "f32-other": Outcome(OK, outputs=[bf16])}}
    assert sorted(f.oracle for f in judge(full, [f32], c).findings) == ["differential", "metamorphic"]


def test_a_variant_is_not_judged_against_a_mate_that_the_baseline_finds_wrong_there() -> None:
    """OpenVINO's LRN with a bias off 1 is wrong in float32 and in bfloat16 alike (a hand check of c41:
    1e4 times the baseline's values); bfloat16 rounds the wrong values otherwise, and the metamorphic pair
    listed that as a bug of its own.  Each variant's divergence from the baseline is the finding; the pair's
    is not.  Where the mate is right (or the baseline is outvoted), the pair stands."""
    c = Criteria(baseline_name="ort/disable_all")
    base = [np.array([1, 2], np.float32)]
    wrong_alike = {"ov": {"f32": _ok(100, 200), "f32-dynamic": _ok(100, 300)}}
    found = sorted((f.oracle, f.variant) for f in judge(wrong_alike, base, c).findings)
    assert found == [(DIFFERENTIAL, "f32"), (DIFFERENTIAL, "f32-dynamic")], found
    mate_right = {"ov": {"f32": _ok(1, 2), "f32-dynamic": _ok(1, 3)}}
    found = sorted((f.oracle, f.variant) for f in judge(mate_right, base, c).findings)
    assert found == [(DIFFERENTIAL, "f32-dynamic"), (METAMORPHIC, "f32-dynamic")], found
    outvoted = {"ov": {"f32": _ok(5, 5), "f32-dynamic": _ok(5, 6)}, "tvm": {"O3": _ok(5, 5)}}
    found = sorted((f.backend, f.oracle, f.category) for f in judge(outvoted, base, c).findings)
    assert ("ov", METAMORPHIC, COMPILER) in found, found
