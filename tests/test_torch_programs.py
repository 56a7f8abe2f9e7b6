"""torch-native programs: the torch operator specs, the program writer, the layouts, the judging rule,
and the campaign catching planted torch.compile bugs (real torch throughout; a planted bug is a real
Dynamo backend that does one thing wrong)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dlcfuzz.backends.base import Outcome, Test  # noqa: E402
from dlcfuzz.backends.torch_compare import MUTATION, STRIDE, VALUE, compare_tensors, is_decline  # noqa: E402
from dlcfuzz.export.torch_program import build, to_program_source  # noqa: E402
from dlcfuzz.gen.torch_program import ProgramOptions, TorchProgramGenerator  # noqa: E402
from dlcfuzz.oracle import NOISE  # noqa: E402
from dlcfuzz.oracle.torch_program import judge_outcomes  # noqa: E402
from dlcfuzz.spec import REGISTRY  # noqa: E402
from dlcfuzz.spec.torch import TORCH_REGISTRY, families  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _eager(graph):
    ns = build(to_program_source(graph))
    with torch.no_grad():
        return ns, ns["Model"]()(*ns["make_inputs"]())


# ---------------------------------------------------------------------------------------------
# specs
# ---------------------------------------------------------------------------------------------
def test_registry_is_apart_from_onnx_and_large():
    assert len(TORCH_REGISTRY) >= 150
    assert set(families()) == {"pointwise", "view", "inplace", "index", "reduce", "nn", "idiom", "library"}
    assert all(op.startswith("torch.") for op in TORCH_REGISTRY)
    assert not set(TORCH_REGISTRY) & set(REGISTRY)  # the ONNX registry holds no torch operator


# calls eager torch may refuse by design (counted as the generator's declines): view() of a tensor
# whose strides do not allow it
MAY_DECLINE = {"torch.view"}


@pytest.mark.parametrize("family", ["pointwise", "view", "inplace", "index", "reduce", "nn"])
def test_every_spec_instantiates_a_call_eager_torch_runs(family):
    """Each operator of the family, alone, in two programs: eager torch runs it, and every output has the
    shape and dtype the spec's ``out`` computed (the spec is the operator's type inference)."""
    failures = []
    for op in families()[family]:
        gen = TorchProgramGenerator([TORCH_REGISTRY[op]], (1, 1))
        for seed in range(2):
            g = gen.generate(seed)
            assert g.nodes, f"{op}: no call in 20 tries ({gen.stats.failures})"
            try:
                _, outs = _eager(g)
            except Exception as e:
                if op not in MAY_DECLINE:
                    failures.append(f"{op}: {type(e).__name__}: {str(e)[:120]}")
                continue
            for o, name in zip(outs, g.outputs, strict=True):
                t = g.values[name].type
                if tuple(o.shape) != t.shape or str(o.dtype) != f"torch.{t.dtype}":
                    failures.append(f"{op}: {tuple(o.shape)} {o.dtype}, spec says {t}")
    assert not failures, "\n".join(failures)


def test_programs_of_many_calls_run_eagerly_and_stay_finite():
    gen = TorchProgramGenerator(op_range=(6, 10))
    ran = 0
    for seed in range(60):
        g = gen.generate(seed)
        try:
            _, outs = _eager(g)
        except RuntimeError:
            continue  # eager's own refusal (a view() of strides that do not allow it): a decline
        ran += 1
        ties = set(g.meta["ties"])
        for o, name in zip(outs, g.outputs, strict=True):
            if o.dtype.is_floating_point and name not in ties:
                assert torch.isfinite(o).all(), (seed, name)
    assert ran >= 55


def test_generation_is_reproducible():
    a = TorchProgramGenerator(op_range=(5, 8)).generate(7)
    b = TorchProgramGenerator(op_range=(5, 8)).generate(7)
    assert to_program_source(a) == to_program_source(b)


def test_in_place_writes_never_target_parameters_or_broadcast_views():
    from dlcfuzz.gen.torch_program import BROADCAST_VIEWS, roots

    gen = TorchProgramGenerator([TORCH_REGISTRY[o] for o in ("torch.add_", "torch.expand", "torch.narrow",
                                                              "torch.linear", "torch.zero_", "torch.transpose")],
                                (8, 12))
    writes = 0
    for seed in range(30):
        g = gen.generate(seed)
        made = {o: n for n in g.nodes for o in n.outputs}
        for n in g.nodes:
            if n.op in ("torch.add_", "torch.zero_"):
                writes += 1
                chain = roots(g, n.inputs[0])
                assert g.values[chain[-1]].kind != "const"
                assert not any(c in made and made[c].op in BROADCAST_VIEWS for c in chain)
    assert writes > 20


# ---------------------------------------------------------------------------------------------
# the writer and the layouts
# ---------------------------------------------------------------------------------------------
def test_gen_for_inductor_writes_programs_that_run_without_dlcfuzz(tmp_path):
    from dlcfuzz.cli import main

    assert main(["gen", "--for", "inductor", "-n", "3", "--ops", "4:6", "--out", str(tmp_path)]) == 0
    files = sorted(tmp_path.glob("g*.py"))
    assert [f.name for f in files] == ["g00000.py", "g00001.py", "g00002.py"]
    text = files[0].read_text()
    assert "dlcfuzz" not in text.split('"""', 2)[2]  # nothing of dlcfuzz imported or called
    got = subprocess.run([sys.executable, str(files[0])], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert got.returncode == 0, got.stderr[-2000:]
    assert "torch." in got.stdout


def test_unknown_torch_operator_in_op_set_is_one_line_and_exit_2(tmp_path, capsys):
    from dlcfuzz.cli import main

    assert main(["gen", "--for", "inductor", "-n", "1", "--op-set", "narrow,no_such_op", "--out",
                 str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_op" in err[0]


def test_fuzz_inductor_with_an_unknown_torch_operator_is_one_line_and_exit_2(tmp_path, capsys):
    from dlcfuzz.cli import main

    assert main(["fuzz", "--backends", "inductor", "--op-set", "no_such_op", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown torch operator" in err[0]


def test_fuzz_inductor_with_an_onnx_only_strategy_is_one_line_and_exit_2(tmp_path, capsys):
    from dlcfuzz.cli import main

    assert main(["fuzz", "--backends", "inductor", "--strategy", "hirgen", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--strategy hirgen" in err[0] and "feedback" in err[0]
    assert not (tmp_path / "c").exists()


def test_a_torch_only_backend_beside_onnx_compilers_is_one_line_and_exit_2(tmp_path, capsys):
    """inductor-torch takes torch code, no ONNX graph: fed the ONNX campaign's graphs, every test was a
    false crash listed as its bug."""
    from dlcfuzz.cli import main

    assert main(["fuzz", "--backends", "ort,inductor-torch", "--max-tests", "1", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inductor-torch run torch-native programs only" in err[0]
    assert not (tmp_path / "c" / "bugs").exists()


def test_layouts_are_the_ones_the_program_chose():
    gen = TorchProgramGenerator(op_range=(4, 8), options=ProgramOptions(layout_rate=1.0))
    seen = set()
    for seed in range(40):
        g = gen.generate(seed)
        ns = build(to_program_source(g))
        args = ns["make_inputs"]()
        for v, a in zip(g.inputs, args, strict=True):
            assert tuple(a.shape) == v.type.shape and str(a.dtype) == f"torch.{v.type.dtype}"
            lay = g.meta["layouts"].get(v.name)
            if lay is None:
                continue
            kind = lay["kind"]
            seen.add(kind)
            if kind == "transposed":
                base = [v.type.shape[p] for p in lay["perm"]]
                dense = torch.empty(base).stride()
                inverse = sorted(range(len(base)), key=lambda i: lay["perm"][i])
                assert a.stride() == tuple(dense[i] for i in inverse)
            elif kind == "channels_last":
                fmt = torch.channels_last if a.dim() == 4 else torch.channels_last_3d
                assert a.is_contiguous(memory_format=fmt)
            elif kind == "sliced":
                store = list(v.type.shape)
                store[lay["dim"]] *= lay["step"]
                assert a.stride(lay["dim"]) == torch.empty(store).stride(lay["dim"]) * lay["step"]
            elif kind == "offset":
                assert a.storage_offset() > 0
            elif kind == "expanded":
                assert all(a.stride(d) == 0 for d in lay["dims"])
            else:
                assert a.is_contiguous()
    assert seen >= {"transposed", "channels_last", "sliced", "offset", "expanded"}


# ---------------------------------------------------------------------------------------------
# the judging rule
# ---------------------------------------------------------------------------------------------
def test_compare_uses_float64_as_the_tie_breaker_and_skips_ties():
    ref = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
    exact = torch.tensor([1.0, 2.0, 3.0009765625], dtype=torch.float64)
    closer = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
    assert compare_tensors(VALUE, "output", [ref], [closer], [exact]) is None
    wrong = torch.tensor([1.0, 2.5, 3.0], dtype=torch.float16)
    d = compare_tensors(VALUE, "output", [ref], [wrong], [exact])
    assert d is not None and d.kind == VALUE and d.index == 0
    idx = torch.tensor([0, 1]), torch.tensor([1, 0])  # indices among ties: never compared
    assert compare_tensors(VALUE, "output", [idx[0]], [idx[1]], None, skip=[0]) is None
    assert compare_tensors(VALUE, "output", [idx[0]], [idx[1]], None) is not None


def test_a_half_precision_divergence_no_float64_run_judged_is_noise():
    """c46: a float16 gradient off by a few float16 ulps from eager, in a program whose float64 copy eager
    rejects (quantize_per_tensor takes float32 only): without the tie-break, rounding, not a bug."""
    ref = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float16)
    off = torch.tensor([1.0, 2.0, 4.0625], dtype=torch.float16)
    untied = compare_tensors(VALUE, "gradient of leaf", [ref], [off], None)
    assert untied is not None and untied.untied
    exact = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    tied = compare_tensors(VALUE, "gradient of leaf", [ref], [off], [exact])
    assert tied is not None and not tied.untied  # float64 says eager is the closer: the compiled one is wrong
    assert not compare_tensors(VALUE, "output", [ref.float()], [off.float()], None).untied  # float32: claimed
    verdict = json.dumps({"divergence": untied.__dict__})
    div = Outcome("error", "run", error_type="ProgramDivergence", message="grad mismatch",
                  artifacts={"verdict-inductor-backward.json": verdict})
    (f,) = judge_outcomes("inductor-program", {"inductor-backward": div}, {0: "torch.rsqrt"}).findings
    assert f.category == NOISE


def test_a_flipped_comparison_that_float64_agrees_with_is_not_a_bug():
    eager = torch.tensor([True, False])
    compiled = torch.tensor([True, True])
    assert compare_tensors(VALUE, "output", [eager], [compiled], [torch.tensor([True, True])]) is None
    assert compare_tensors(VALUE, "output", [eager], [compiled], [torch.tensor([True, False])]) is not None


def test_a_stride_difference_is_its_own_kind():
    a = torch.rand(3, 4)
    b = a.t().contiguous().t()
    d = compare_tensors(VALUE, "output", [a], [b], None, strides=True)
    assert d is not None and d.kind == STRIDE
    assert compare_tensors(VALUE, "output", [a], [b], None, strides=False) is None


def test_declines_and_the_layer_in_findings():
    assert is_decline("Unsupported", "Dynamo does not know how to trace")
    assert is_decline("EagerRejects", "eager torch rejects the program")
    assert not is_decline("RuntimeError", "CppCompileError: C++ compile error")
    from dlcfuzz.oracle.unsupported import is_unsupported  # the store's outcome rows count them as declines

    assert is_unsupported("inductor-program", "import", "EagerRejects", "eager torch rejects the program")
    assert not is_unsupported("inductor-program", "compile", "CppCompileError", "C++ compile error")
    verdict = ('{"divergence": {"kind": "value", "where": "output 1", "index": 1, "dtype": "float16", '
               '"layer": "dynamo/aot_autograd"}}')
    div = Outcome("error", "run", error_type="ProgramDivergence", message="value mismatch",
                  artifacts={"verdict-inductor.json": verdict})
    crash = Outcome("error", "compile", error_type="CppCompileError", message="C++ compile error",
                    artifacts={"verdict-inductor-dynamic.json": '{"layer": "inductor"}'})
    declined = Outcome("error", "import", error_type="EagerRejects", message="eager torch rejects the program")
    v = judge_outcomes("inductor-program", {"inductor": div, "inductor-dynamic": crash, "inductor-threads": declined},
                       {1: "torch.cumsum"})
    assert [(f.oracle, f.kind, f.variant) for f in v.findings] == [("metamorphic", "value", "inductor"),
                                                                  ("crash", "exception", "inductor-dynamic")]
    assert v.findings[0].details["first_diverging"] == {"op": "torch.cumsum", "kind": "value:dynamo/aot_autograd",
                                                        "dtype": "float16"}
    assert len(v.unsupported) == 1


# ---------------------------------------------------------------------------------------------
# torch.compile itself, and planted compilers, through the worker
# ---------------------------------------------------------------------------------------------
def _program(ops, seed, layout_rate=1.0, op_range=(3, 5)):
    gen = TorchProgramGenerator([TORCH_REGISTRY[o] for o in ops], op_range,
                                options=ProgramOptions(layout_rate=layout_rate, backward_rate=0.0, dynamic_rate=0.0))
    return gen.generate(seed)


def test_inductor_agrees_with_eager_on_a_program_with_views_and_in_place_writes():
    """One real Inductor compile: a transposed input, a write through a narrow view of it, a reduction;
    the compiled outputs and the input after the run agree with eager (no false alarm)."""
    from dlcfuzz.backends.torch_program import TorchProgramBackend

    g = _program(("torch.narrow", "torch.add_", "torch.sum", "torch.mul"), 3)
    b = TorchProgramBackend()
    verdicts = {}
    b.artifact = verdicts.__setitem__
    p = b.load(Test(b"", g.to_json(), {}))
    from dlcfuzz.backends.base import Variant

    ran = b.compile(p, Variant("inductor", {"backend": "inductor"}))
    assert ran.divergence is None, ran.divergence
    assert len(b.run(ran, {})) == len(g.outputs)


def _campaign(tmp_path, backend, ops, reduce_seconds=0.0, tests=6):
    from dlcfuzz.gen.torch_program import TORCH_LIMITS
    from dlcfuzz.run.campaign import CampaignConfig
    from dlcfuzz.run.torch_campaign import TorchProgramCampaign

    specs = [TORCH_REGISTRY[o] for o in ops]
    cfg = CampaignConfig(tmp_path / "c", [backend], specs, 300.0, tests, 1, 5, (3, 5), TORCH_LIMITS,
                         reduce_seconds=reduce_seconds, targeted=False)
    c = TorchProgramCampaign(cfg, specs=specs, options=ProgramOptions(layout_rate=1.0, backward_rate=0.0,
                                                                      dynamic_rate=0.0))
    c.start_backends()
    assert backend in c.backends, c.disabled
    c.run()
    return tmp_path / "c" / "bugs"


def test_planted_compiler_that_reads_non_contiguous_inputs_as_contiguous_is_caught_signed_and_reduced(tmp_path):
    """A Dynamo backend that reads every non-contiguous input as contiguous: the campaign finds value
    divergences on transposed/sliced inputs, signs them (one bundle per signature) with a standalone
    repro.py that reproduces, and the reduction keeps the signature with fewer calls."""
    import json

    bugs = _campaign(tmp_path, "tests.torch_fakes:StridesAsContiguous",
                     ("torch.sin", "torch.add", "torch.neg", "torch.relu"), reduce_seconds=60.0, tests=4)
    folders = sorted(bugs.iterdir())
    assert folders, "the planted bug was not caught"
    f = json.loads((folders[0] / "finding.json").read_text())
    assert f["oracle"] == "metamorphic" and f["kind"] == VALUE
    assert f["details"]["layer"] == "inductor"  # aot_eager and eager agree with eager: the compiler's
    assert f["signature"] == folders[0].name
    # the report hands over the program, not an (empty) ONNX model
    report = (folders[0] / "report.md").read_text()
    assert "class Model(torch.nn.Module)" in report and "import onnx" not in report
    assert f["title"].startswith("Inductor: value mismatch against eager"), f["title"]
    repro = folders[0] / "repro.py"
    text = repro.read_text()
    assert "class Model(torch.nn.Module)" in text and "dlcfuzz." not in text.replace("# ---- dlcfuzz", "")
    # the repro is standalone torch: with the planted compiler registered under the name it uses, it
    # reproduces (exit 1); nothing of dlcfuzz is needed
    code = ("import runpy, sys, torch; sys.path.insert(0, sys.argv[2]); "
            "from torch_fakes import strides_as_contiguous; "
            "torch._dynamo.register_backend(name='planted')(strides_as_contiguous); "
            "runpy.run_path(sys.argv[1], run_name='__main__')")
    got = subprocess.run([sys.executable, "-c", code, str(repro), str(ROOT / "tests")], capture_output=True,
                         text=True, timeout=300, cwd=folders[0], env={"PATH": "/usr/bin:/bin"})
    assert got.returncode == 1 and "reproduced" in got.stdout, got.stdout + got.stderr[-2000:]
    reduced = [d for d in folders if (d / "original_program.py").exists()]
    assert reduced, "no bundle was reduced"
    for d in reduced:
        assert d.joinpath("program.py").read_text().count("# torch.") < \
            d.joinpath("original_program.py").read_text().count("# torch.")


def test_planted_compiler_that_writes_through_copies_is_caught_as_a_mutation(tmp_path):
    import json

    bugs = _campaign(tmp_path, "tests.torch_fakes:WritesToCopies",
                     ("torch.narrow", "torch.add_", "torch.mul_", "torch.select"), tests=4)
    kinds = {json.loads((d / "finding.json").read_text())["kind"] for d in bugs.iterdir()}
    assert MUTATION in kinds


MAXPOOL = '''import torch
import torch.nn.functional as F

NOT_COMPARED = []
MUTATED = []
BACKWARD = True
DYNAMIC = False


class Model(torch.nn.Module):
    def forward(self, x):
        return (F.max_pool1d(x, [3], [3], [1]),)


def make_inputs(seed=0, sizes=None):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(3, 5, 3, generator=g).permute(0, 2, 1),)
'''


def test_outputs_are_compared_with_eager_in_the_same_grad_mode():
    """Eager max_pool1d on a transposed input lays its output out one way under no_grad and another with
    grad; aot_eager takes the grad-mode layout always.  The backward variant compares with eager under
    grad (no finding); the forward one, under no_grad, shows AOTAutograd's stride divergence."""
    from dlcfuzz.backends.base import Variant
    from dlcfuzz.backends.torch_program import TorchProgramBackend

    b = TorchProgramBackend()
    p = b.load(Test(MAXPOOL.encode(), "", {}))
    assert b.compile(p, Variant("b", {"backend": "aot_eager", "backward": True})).divergence is None
    d = b.compile(p, Variant("f", {"backend": "aot_eager"})).divergence
    assert d is not None and d.kind == STRIDE


def test_guided_programs_draw_the_operators_whose_programs_fired_something_new():
    """Compiler-feedback guidance over torch programs: a program that fired one new Inductor key moves its
    operators' values from the prior 1 toward the reward 1/2 (by the decay 0.3: 0.85), one that fired
    nothing toward 0 (0.7); the same key again is not new; draws then favour the credited operator."""
    import random

    specs = [TORCH_REGISTRY[o] for o in ("torch.sin", "torch.neg")]
    gen = TorchProgramGenerator(specs, (1, 1), guided=True)
    sin, neg = (_program((op,), 3) for op in ("torch.sin", "torch.neg"))
    assert gen.feedback(sin, ["inductor:inductor:fuse"]) == [("compiler", "inductor:inductor:fuse")]
    assert gen.feedback(neg, ["inductor:inductor:fuse"]) == []  # fired before: nothing new
    assert gen.rewards.value == pytest.approx({"torch.sin": 0.85, "torch.neg": 0.7})
    draws = [gen._draw(random.Random(i)).op for i in range(2000)]
    # softmax over temperature 0.25: e^(0.85/0.25) / (e^(0.85/0.25) + e^(0.7/0.25)) = 0.646
    assert draws.count("torch.sin") / 2000 == pytest.approx(0.646, abs=0.04)
    assert gen.generate(1).meta["strategy"] == "feedback"
    unguided = TorchProgramGenerator(specs, (1, 1))
    assert unguided.feedback(sin, ["inductor:inductor:fuse"]) == [] and unguided.generate(1).meta["strategy"] == "isra"


def test_fuzz_inductor_with_feedback_guidance_stores_the_optimizations_programs_fired(tmp_path):
    """Through the CLI on the real Inductor: a programs-only campaign under --strategy feedback records the
    Inductor keys its programs' compiles fired, each with the test that fired it first."""
    import sqlite3

    from dlcfuzz.cli import main

    out = tmp_path / "c"
    assert main(["fuzz", "--backends", "inductor", "--strategy", "feedback", "--max-tests", "2", "--ops", "4:4",
                 "--seed", "3", "--out", str(out)]) == 0
    db = sqlite3.connect(out / "campaign.sqlite")
    rows = db.execute("SELECT key, test_id FROM coverage WHERE criterion = 'compiler'").fetchall()
    db.close()
    assert rows and all(k.startswith("inductor:") for k, _ in rows), rows
    assert {t for _, t in rows} <= {0, 1}
