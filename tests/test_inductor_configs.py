"""Inductor configurations as variants (cpp_wrapper, freezing, flags sampled from the test's seed), the
bisection of a finding's flags to the fewest that still show it, the metamorphic layout oracle, and crash
signatures keyed on where torch.compile failed (issue 28).  Real torch throughout; a planted fault is a real
Dynamo backend (tests/torch_fakes.py) that reads Inductor's flags as Inductor does."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dlcfuzz.backends.base import ERROR, Outcome, Test, Variant  # noqa: E402
from dlcfuzz.backends.torch_compare import DIVERGENCE_ERROR, LAYOUT, VALUE, ProgramDivergence  # noqa: E402
from dlcfuzz.backends.torch_program import (  # noqa: E402
    CONFIG_FLAGS,
    VARIANTS,
    TorchProgramBackend,
    minimal_flags,
    sample_config,
)
from dlcfuzz.gen.torch_program import ProgramOptions, TorchProgramGenerator  # noqa: E402
from dlcfuzz.ir import Graph  # noqa: E402
from dlcfuzz.oracle.torch_program import judge_outcomes, title  # noqa: E402
from dlcfuzz.spec.torch import TORCH_REGISTRY  # noqa: E402
from tests import torch_fakes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# five flags of which each planted fault needs one or two
FLAGS = {"epilogue_fusion": False, "aggressive_fusion": True, "cpp.simdlen": 0, "split_reductions": False,
         "inplace_buffers": False}


def _program(ops, seed=0, layout_rate=0.0, op_range=(2, 3)):
    gen = TorchProgramGenerator([TORCH_REGISTRY[o] for o in ops], op_range,
                                options=ProgramOptions(layout_rate=layout_rate, backward_rate=0.0, dynamic_rate=0.0))
    return gen.generate(seed)


def _run(backend, graph, variant: Variant):
    """(the backend's Ran or the error it raised, the verdict artifacts) of one variant, in this process."""
    arts: dict[str, str] = {}
    backend.artifact = arts.__setitem__
    p = backend.load(Test(b"", graph.to_json(), {}))
    try:
        return backend.compile(p, variant), arts
    except Exception as e:  # a crash: the variant's verdict still tells its layer
        return e, arts


def _judge(graph, variant: str, ran, arts):
    if ran.divergence is None:
        return judge_outcomes("planted", {variant: Outcome("ok", "run")}).findings
    o = Outcome(ERROR, "run", error_type=DIVERGENCE_ERROR, message=ran.divergence.message(variant), artifacts=arts)
    return judge_outcomes("planted", {variant: o}, {i: graph.nodes[-1].op for i in range(len(graph.outputs))}).findings


# ---------------------------------------------------------------------------------------------
# the variants on real Inductor
# ---------------------------------------------------------------------------------------------
def test_each_new_variant_compiles_a_tiny_real_program():
    """cpp_wrapper, freezing (a program with a parameter, no grad), flags sampled from the program's meta,
    and the layout variant, each on real Inductor: no false alarm, and the verdict says what it ran under."""
    g = _program(("torch.linear", "torch.relu"), seed=1, op_range=(2, 2))
    assert "torch.linear" in {n.op for n in g.nodes}  # a parameter for freezing to fold
    g.meta["inductor_config"] = {"epilogue_fusion": False, "cpp.simdlen": 0}
    b = TorchProgramBackend()
    for name in ("inductor-cpp-wrapper", "inductor-freezing", "inductor-config", "inductor-layout"):
        ran, arts = _run(b, g, Variant(name, dict(VARIANTS[name])))
        assert not isinstance(ran, Exception), (name, ran)
        assert ran.divergence is None, (name, ran.divergence)
        import json

        v = json.loads(arts[f"verdict-{name}.json"])
        expected = {"inductor-cpp-wrapper": {"cpp_wrapper": True}, "inductor-freezing": {"freezing": True},
                    "inductor-config": g.meta["inductor_config"], "inductor-layout": {}}[name]
        assert v["config"] == expected, (name, v)
        if name == "inductor-layout":
            assert any(v["relayout"]), v  # the program's input was laid out another way


def test_sampled_flags_are_reproducible_and_plan_runs_configs_on_a_share():
    from dlcfuzz.ir import Graph
    from dlcfuzz.run.torch_campaign import plan

    assert sample_config(7) == sample_config(7) and sample_config(7) != sample_config(8)
    for seed in range(50):
        flags = sample_config(seed)
        assert 2 <= len(flags) <= 6 and all(v in CONFIG_FLAGS[k] for k, v in flags.items())
    configs = layouts = 0
    for seed in range(1000):
        g = Graph(meta={"language": "torch"})
        chosen = plan(g, random.Random(seed), list(VARIANTS))
        configs += any(v in ("inductor-config", "inductor-cpp-wrapper", "inductor-freezing") for v in chosen)
        layouts += "inductor-layout" in chosen
        assert ("inductor-config" in chosen) == ("inductor_config" in g.meta)
        again = Graph(meta={"language": "torch"})
        assert plan(again, random.Random(seed), list(VARIANTS)) == chosen and again.meta == g.meta
    assert 250 <= configs <= 350 and 100 <= layouts <= 200, (configs, layouts)


# ---------------------------------------------------------------------------------------------
# bisection of the flags
# ---------------------------------------------------------------------------------------------
def test_ddmin_finds_the_fewest_flags():
    flags = {f"f{i}": i for i in range(8)}
    assert minimal_flags(flags, lambda s: "f5" in s) == {"f5": 5}
    assert minimal_flags(flags, lambda s: {"f1", "f6"} <= set(s)) == {"f1": 1, "f6": 6}
    assert minimal_flags(flags, lambda s: True) == {}


@pytest.mark.parametrize("fake,expected", [("OffByOneUnderOneFlag", torch_fakes.ONE_FLAG),
                                           ("OffByOneUnderTwoFlags", torch_fakes.TWO_FLAGS),
                                           ("OffByOneAlways", {})])
def test_a_planted_fault_under_some_flags_is_bisected_to_exactly_those(fake, expected):
    """A compiler wrong only under ``expected`` (known by construction), run under five flags: the finding
    names exactly ``expected`` (its title too), or says it is a default-config bug."""
    g = _program(("torch.sin", "torch.add"), seed=2)
    b = getattr(torch_fakes, fake)()
    plain, _ = _run(b, g, Variant("inductor", {"backend": "planted"}))
    assert (plain.divergence is not None) == (not expected)  # with no flags, only the default-config fault
    ran, arts = _run(b, g, Variant("inductor-config", {"backend": "planted", "config": dict(FLAGS)}))
    assert ran.divergence is not None and ran.divergence.kind == VALUE
    [f] = _judge(g, "inductor-config", ran, arts)
    assert f.details["config"] == expected and f.details["variant_config"] == FLAGS
    head = title(f)
    if expected:
        assert all(f"{k}={v!r}" in head for k, v in expected.items()), head
        assert not any(f"{k}=" in head for k in FLAGS if k not in expected), head
    else:
        assert "default config" in head, head


def test_repro_of_a_config_finding_sets_only_the_needed_flags(tmp_path):
    """repro.py of a finding under five flags patches in the one it needs: it reproduces (exit 1) with the
    planted compiler registered; with its flags emptied, it does not."""
    from dlcfuzz.backends.torch_program import repro_script
    from dlcfuzz.export.torch_program import to_program_source
    from dlcfuzz.run.torch_campaign import finding_variant

    g = _program(("torch.sin", "torch.add"), seed=2)
    ran, arts = _run(torch_fakes.OffByOneUnderOneFlag(), g,
                     Variant("inductor-config", {"backend": "planted", "config": dict(FLAGS)}))
    [f] = _judge(g, "inductor-config", ran, arts)
    variant = finding_variant(Variant("inductor-config", {"backend": "planted", "config": "sampled"}), f)
    assert variant.options["config"] == torch_fakes.ONE_FLAG
    text = repro_script(to_program_source(g), variant, title(f))
    assert "# Inductor flags: epilogue_fusion=False" in text
    code = ("import runpy, sys, torch; sys.path.insert(0, sys.argv[2]); "
            "from torch_fakes import off_by_one_when, ONE_FLAG; "
            "torch._dynamo.register_backend(name='planted')(off_by_one_when(ONE_FLAG)); "
            "runpy.run_path(sys.argv[1], run_name='__main__')")
    got = {}
    for name, source in (("repro.py", text), ("no_flags.py", text.replace("OPTIONS.get(\"config\") or {}", "{}"))):
        (tmp_path / name).write_text(source)
        got[name] = subprocess.run([sys.executable, "-c", code, str(tmp_path / name), str(ROOT / "tests")],
                                   capture_output=True, text=True, timeout=300, cwd=tmp_path,
                                   env={"PATH": "/usr/bin:/bin"})
    assert got["repro.py"].returncode == 1 and "reproduced" in got["repro.py"].stdout, \
        got["repro.py"].stdout + got["repro.py"].stderr[-2000:]
    assert got["no_flags.py"].returncode == 0, got["no_flags.py"].stdout + got["no_flags.py"].stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# the metamorphic layout oracle
# ---------------------------------------------------------------------------------------------
def test_the_layout_oracle_catches_a_planted_layout_dependent_fault(tmp_path):
    """A compiler that reads non-contiguous inputs as contiguous, on a program of contiguous inputs: the
    plain variant agrees with eager; the layout variant (the same values, other layouts) diverges, a finding
    of kind ``layout``."""
    g = _program(("torch.sin", "torch.add", "torch.mul"), seed=4, op_range=(2, 3))
    b = torch_fakes.StridesAsContiguousLayouts()
    plain, _ = _run(b, g, Variant("inductor", {"backend": "planted"}))
    assert plain.divergence is None
    ran, arts = _run(b, g, Variant("inductor-layout", {"backend": "planted", "relayout": True}))
    assert ran.divergence is not None and ran.divergence.kind == LAYOUT, ran.divergence
    with pytest.raises(ProgramDivergence):
        b.run(ran, {})
    [f] = _judge(g, "inductor-layout", ran, arts)
    assert f.kind == LAYOUT and f.details["relayout"] and "re-laid-out" in f.details["where"]
    # its repro.py re-lays the inputs out the same way and reproduces with the planted compiler registered
    from dlcfuzz.backends.torch_program import repro_script
    from dlcfuzz.export.torch_program import to_program_source
    from dlcfuzz.run.torch_campaign import finding_variant

    variant = finding_variant(Variant("inductor-layout", {"backend": "planted", "relayout": True}), f)
    repro = tmp_path / "repro.py"
    repro.write_text(repro_script(to_program_source(g), variant, title(f)))
    code = ("import runpy, sys, torch; sys.path.insert(0, sys.argv[2]); "
            "from torch_fakes import strides_as_contiguous; "
            "torch._dynamo.register_backend(name='planted')(strides_as_contiguous); "
            "runpy.run_path(sys.argv[1], run_name='__main__')")
    got = subprocess.run([sys.executable, "-c", code, str(repro), str(ROOT / "tests")], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert got.returncode == 1 and "reproduced" in got.stdout, got.stdout + got.stderr[-2000:]


def test_a_reduced_layout_finding_replays_the_layouts_of_the_reduced_programs_own_inputs(tmp_path):
    """``dlcfuzz reduce`` of a layout-variant bug whose program loses inputs in the reduction: the reduced
    repro.py re-lays out exactly the reduced program's inputs (one entry each, not the original's three) and
    reproduces with the planted compiler registered."""
    import json
    from dataclasses import asdict

    from dlcfuzz.cli import main
    from dlcfuzz.export.torch_program import build
    from dlcfuzz.run.dedup import graph_signature
    from dlcfuzz.run.torch_campaign import finding_variant, write_program_bundle

    planted = "tests.torch_fakes:StridesAsContiguousLayouts"
    g = _program(("torch.sin", "torch.add", "torch.mul"), seed=2, op_range=(3, 4))
    layout = Variant("inductor-layout", {"backend": "planted", "relayout": True})
    ran, arts = _run(torch_fakes.StridesAsContiguousLayouts(), g, layout)
    o = Outcome(ERROR, "run", error_type=DIVERGENCE_ERROR, message=ran.divergence.message(layout.name), artifacts=arts)
    [f] = judge_outcomes(planted, {layout.name: o}, {i: g.nodes[-1].op for i in range(len(g.outputs))}).findings
    assert len(f.details["relayout"]) == 3  # the program as found: three runtime inputs
    folder = tmp_path / "bug"
    folder.mkdir()
    (folder / "finding.json").write_text(json.dumps(asdict(f) | {"signature": graph_signature(f, g)}, default=str))
    (folder / "graph.json").write_text(g.to_json())
    write_program_bundle(folder, g, f, finding_variant(layout, f, g))
    assert main(["reduce", str(folder), "--budget", "120"]) == 0
    assert (folder / "original_program.py").exists()
    inputs = build((folder / "program.py").read_text())["make_inputs"]()
    assert len(inputs) < 3
    repro = (folder / "repro.py").read_text()
    options = next(line for line in repro.splitlines() if line.startswith("OPTIONS = "))
    assert len(eval(options.removeprefix("OPTIONS = "))["relayout"]) == len(inputs), options
    code = ("import runpy, sys, torch; sys.path.insert(0, sys.argv[2]); "
            "from torch_fakes import strides_as_contiguous; "
            "torch._dynamo.register_backend(name='planted')(strides_as_contiguous); "
            "runpy.run_path(sys.argv[1], run_name='__main__')")
    got = subprocess.run([sys.executable, "-c", code, str(folder / "repro.py"), str(ROOT / "tests")],
                         capture_output=True, text=True, timeout=300, cwd=folder, env={"PATH": "/usr/bin:/bin"})
    assert got.returncode == 1 and "reproduced" in got.stdout, got.stdout + got.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# crash signatures keyed on where torch.compile failed
# ---------------------------------------------------------------------------------------------
def _traceback(program: str, inner: list[str], error: str) -> str:
    """A chained traceback as the worker reports it: the root error raised inside ``inner`` (torch frames),
    then Dynamo's wrapper re-raising it from the program's own frames."""
    root = "".join(f'  File "/venv/lib/python3.11/site-packages/torch/{path}", line 10, in {fn}\n'
                   for path, fn in (f.split(":") for f in inner))
    outer = (f'  File "/tmp/{program}.py", line 3, in forward\n'
             '  File "/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 9, in compile_wrapper\n'
             '  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 5, in _call_impl\n')
    return (f"Traceback (most recent call last):\n{root}{error}\n\nThe above exception was the direct cause of the "
            f"following exception:\n\nTraceback (most recent call last):\n{outer}InductorError: {error}\n")


def test_crash_signatures_are_keyed_on_inductor_frames_and_the_lowering():
    from dlcfuzz.ir import Graph
    from dlcfuzz.run.dedup import graph_signature

    def finding(program: str, inner: list[str], message: str, flags: dict | None = None):
        verdict = '{"layer": "inductor"' + (f', "config": {{"cpp_wrapper": true}}, "minimal": {flags}'.replace(
            "'", '"').replace("True", "true") if flags is not None else "") + "}"
        o = Outcome(ERROR, "compile", error_type="InductorError", message=message,
                    traceback=_traceback(program, inner, message), artifacts={"verdict-v.json": verdict})
        [f] = judge_outcomes("inductor-program", {"v": o}).findings
        return graph_signature(f, Graph(meta={"language": "torch"}))

    scatter = ["_inductor/lowering.py:scatter_reduce_", "_inductor/ir.py:create", "_inductor/ir.py:realize"]
    codegen = ["_inductor/codegen/cpp.py:codegen_loops", "_inductor/codegen/cpp.py:gen_body",
               "_inductor/codegen/cpp.py:store"]
    msg = "LoweringException: AssertionError: \n  target: aten.scatter_reduce.two\n  args[0]: TensorBox(buf3)"
    # one Inductor bug reached by two programs (different outer frames, buffers): one signature
    assert finding("g00001", scatter, msg) == finding("g00777", scatter, msg.replace("buf3", "buf9"))
    # another lowering at the same frames, another site of the same message, other flags: distinct bugs
    assert finding("g00001", scatter, msg) != finding("g00001", scatter, msg.replace("scatter_reduce.two",
                                                                                     "index_put_.default"))
    assert finding("g00001", scatter, "AssertionError: bad") != finding("g00001", codegen, "AssertionError: bad")
    assert finding("g00001", codegen, "AssertionError: bad", {}) != \
        finding("g00001", codegen, "AssertionError: bad", {"cpp_wrapper": True})


# ---------------------------------------------------------------------------------------------
# the variants aimed at parts of Inductor a default compile leaves alone
# ---------------------------------------------------------------------------------------------
def _fired_under(name: str, g) -> set[str]:
    """The counters["inductor"] keys that one variant's compile of ``g`` made grow (it matched eager)."""
    from torch._dynamo.utils import counters

    counters.clear()
    ran, _ = _run(TorchProgramBackend(), g, Variant(name, dict(VARIANTS[name])))
    assert not isinstance(ran, Exception), (name, ran)
    assert ran.divergence is None, (name, ran.divergence)
    return {k for k, v in counters["inductor"].items() if v}


def test_the_autotune_variant_runs_the_cpp_gemm_template_on_a_frozen_linear():
    """inductor-autotune: freezing packs the linear's weight (mkldnn), max_autotune weighs the C++ GEMM
    template against ATen (select_algorithm) with its tuning subprocesses, and generates it; it matches eager."""
    from dlcfuzz.ir import CONST_KIND

    def frozen_float_linear(g) -> bool:  # a float32 linear whose weight is a parameter, of several rows and columns
        [n] = g.nodes
        x, w = (g.values[v] for v in n.inputs[:2])
        return (w.kind == CONST_KIND and x.type.dtype == "float32" and x.type.rank == 2
                and min(*x.type.shape, w.type.shape[0]) > 1)

    g = next(g for g in (_program(("torch.linear",), seed=s, op_range=(1, 1)) for s in range(200))
             if frozen_float_linear(g))
    from torch._inductor import autotune_process

    pools = []  # Inductor's pool of tuning subprocesses, asked for (autotune_in_subproc) before choosing
    real = autotune_process.get_tuning_process_pool
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(autotune_process, "get_tuning_process_pool", lambda: pools.append(1) or real())
        fired = _fired_under("inductor-autotune", g)
    assert pools
    # (select_algorithm_autotune counts only a benchmark run: a choice timed before is read from the cache)
    assert {"mkldnn_linear_weight_pack_matcher_count", "select_algorithm_weight_prune",
            "cpp_templated_kernel_counter"} <= fired, sorted(fired)


def test_the_fx_passes_variant_runs_the_split_cat_passes():
    """inductor-fx-passes: the pre-grad split/cat passes named in pre_grad_fusion_options rewrite a
    split-then-cat (and the post-grad ones run)."""
    g = _program(("torch.idiom_split_cat",), seed=0, op_range=(1, 1))
    fired = _fired_under("inductor-fx-passes", g)
    assert {"normalization_pass", "normalization_aten_pass"} <= fired, sorted(fired)
    assert fired & {"merge_getitem_cat_pass", "split_cat_pass", "split_cat_to_slices_pass", "merge_splits_pass"}, \
        sorted(fired)


def test_the_cache_variant_judges_a_compile_served_from_the_fx_graph_cache(tmp_path, monkeypatch):
    """inductor-cache, on an empty cache: its first compile misses and fills the FX graph cache, the one
    judged (against eager) is served from it."""
    from torch._dynamo.utils import counters
    from torch._inductor.codecache import FxGraphCache

    monkeypatch.setattr(FxGraphCache, "_get_tmp_dir", staticmethod(lambda: str(tmp_path)))  # graphs only, not kernels
    g = _program(("torch.sin", "torch.add"), seed=2)
    _fired_under("inductor-cache", g)
    assert (counters["inductor"]["fxgraph_cache_miss"], counters["inductor"]["fxgraph_cache_hit"]) == (1, 1), \
        dict(counters["inductor"])


def test_plan_aims_the_autotune_and_fx_passes_variants_at_what_the_program_holds():
    from dlcfuzz.ir import Graph, Node
    from dlcfuzz.run.torch_campaign import AUTOTUNE_SHARE, CACHE_SHARE, FX_PASSES_SHARE, plan

    def holding(*ops: str) -> Graph:
        return Graph(nodes=[Node(op, [], []) for op in ops], meta={"language": "torch"})

    runs = {"inductor-autotune": 0, "inductor-fx-passes": 0, "inductor-cache": 0}
    for seed in range(1000):
        for ops, never in ((("torch.sin", "torch.scatter_add"), ("inductor-autotune", "inductor-fx-passes")),
                           (("torch.idiom_linear_act", "torch.idiom_split_cat"), ())):
            chosen = plan(holding(*ops), random.Random(seed), list(VARIANTS))
            assert not set(never) & set(chosen), (ops, chosen)
            if not never:
                for v in runs:
                    runs[v] += v in chosen
    for v, share in (("inductor-autotune", AUTOTUNE_SHARE), ("inductor-fx-passes", FX_PASSES_SHARE),
                     ("inductor-cache", CACHE_SHARE)):
        assert abs(runs[v] - 1000 * share) < 60, (v, runs[v])


def test_the_aoti_variant_exports_compiles_a_package_and_agrees_with_eager(tmp_path):
    """AOTInductor on a tiny real program (a parameter, a transposed input): torch.export, a compiled package
    loaded back (the package is on disk), its outputs equal to eager's (no false alarm), and the bundle's
    repro.py, standalone, compiles the package too and finds nothing."""
    from dlcfuzz.backends.torch_program import repro_script
    from dlcfuzz.export.torch_program import to_program_source

    g = _program(("torch.linear", "torch.relu", "torch.transpose"), seed=1, op_range=(3, 3), layout_rate=1.0)
    b = TorchProgramBackend()
    variant = Variant("inductor-aoti", dict(VARIANTS["inductor-aoti"]))
    ran, _ = _run(b, g, variant)
    assert not isinstance(ran, Exception), ran
    assert ran.divergence is None, ran.divergence
    assert (Path(b._package_dir) / "model.pt2").is_file()
    assert len(b.run(ran, {})) == len(g.outputs)
    repro = tmp_path / "repro.py"
    repro.write_text(repro_script(to_program_source(g), variant, "no bug"))
    assert "aoti_compile_and_package" in repro.read_text()
    got = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 0 and "not reproduced" in got.stdout, got.stdout + got.stderr[-2000:]


def test_an_aoti_divergence_the_exported_program_shows_too_is_torch_exports():
    """The AOTInductor variant's layer check runs the exported program itself: a fault planted in
    torch.export (its module adds 1 to every float output) is named torch.export's, with no package built."""
    from dlcfuzz.backends import torch_library
    from dlcfuzz.backends.torch_compare import EXPORT

    g = _program(("torch.sin", "torch.add"), seed=0, op_range=(2, 2))
    b = TorchProgramBackend()
    real = torch_library.torch_export

    class Shifted:  # the exported program, with a planted fault in what torch.export made of the model
        def __init__(self, ep):
            self.ep = ep

        def module(self):
            inner = self.ep.module()
            return lambda *a: tuple(o + 1 if o.dtype.is_floating_point else o for o in inner(*a))

    def planted(model, args):
        return Shifted(real(model, args))

    torch_library.torch_export = planted
    try:
        p = b.load(Test(b"", g.to_json(), {}))
        layer = b._divergence_layer(p, dict(VARIANTS["inductor-aoti"]))
    finally:
        torch_library.torch_export = real
    assert layer == EXPORT


def test_plan_runs_aoti_on_a_share_of_the_forward_programs_that_write_no_input():
    from dlcfuzz.ir import Graph
    from dlcfuzz.run.torch_campaign import AOTI_SHARE, plan

    runs = 0
    for seed in range(1000):
        for meta, never in (({"backward": True}, True), ({"mutated": ["v1"]}, True), ({}, False)):
            chosen = plan(Graph(meta={"language": "torch", **meta}), random.Random(seed), list(VARIANTS))
            if never:
                assert "inductor-aoti" not in chosen, (meta, chosen)
            else:
                runs += "inductor-aoti" in chosen
    assert abs(runs - 1000 * AOTI_SHARE) < 40, runs


def test_the_sampled_memory_planning_flag_pools_the_buffers_and_matches_eager():
    """memory_planning (one of CONFIG_FLAGS): the wrapper allocates the program's buffers from pools, and the
    sampled-config variant under it finds no divergence."""
    from torch._inductor import config
    from torch._inductor.utils import run_and_get_code

    from dlcfuzz.export.torch_program import build, to_program_source

    assert CONFIG_FLAGS["memory_planning"] == (True,)
    g = _program(("torch.sin", "torch.matmul", "torch.relu"), seed=0, op_range=(3, 3))
    g.meta["inductor_config"] = {"memory_planning": True}
    ran, _ = _run(TorchProgramBackend(), g, Variant("inductor-config", dict(VARIANTS["inductor-config"])))
    assert not isinstance(ran, Exception) and ran.divergence is None, ran
    ns = build(to_program_source(g))
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(memory_planning=True, fx_graph_cache=False):
        _, code = run_and_get_code(torch.compile(ns["Model"](), fullgraph=True), *ns["make_inputs"]())
    torch._dynamo.reset()
    assert "alloc_from_pool(" in "".join(code), code


def test_a_layout_variants_finding_at_its_first_call_replays_no_layouts():
    """The layout variant's finding at its first call (a stride of the contiguous inputs' output) has no
    other layouts to replay: its repro's options hold none (a bare ``relayout=True`` made the repro fail
    on its own TypeError, a harness bug a hand check found), while one at the re-laid-out call keeps them."""
    from dlcfuzz.oracle.findings import METAMORPHIC, Finding
    from dlcfuzz.run.torch_campaign import finding_variant

    layout = Variant("inductor-layout", {"backend": "inductor", "relayout": True})
    first = Finding(METAMORPHIC, "stride", "inductor-program", "inductor-layout", "run", "stride mismatch")
    assert "relayout" not in finding_variant(layout, first).options
    second = Finding(METAMORPHIC, LAYOUT, "inductor-program", "inductor-layout", "run", "layout mismatch",
                     details={"relayout": ["channels_last", ""]})
    assert finding_variant(layout, second).options["relayout"] == ["channels_last", ""]


def test_the_layout_oracle_judges_a_program_that_reads_its_layout_against_eager_in_those_layouts():
    """A program whose eager result depends on its inputs' layout (an ``as_strided`` of a ``.contiguous()``
    copies in one layout and aliases in the other, before an in-place ``div_``): compiled in the other
    layouts, it agrees with eager in those layouts, and is no layout bug (a false one a hand check of the
    30-minute campaign c32 found: tests/data/programs/eager_reads_the_layout.json, on real Inductor)."""
    g = Graph.from_json((ROOT / "tests" / "data" / "programs" / "eager_reads_the_layout.json").read_text())
    ran, _ = _run(TorchProgramBackend(), g, Variant("inductor-layout", {"backend": "inductor", "relayout": True}))
    assert not isinstance(ran, Exception) and ran.divergence is None, ran
    assert any("eager itself reads the layout" in n for n in ran.verdict.notes), ran.verdict.notes


# ---------------------------------------------------------------------------------------------
# the Halide CPU backend
# ---------------------------------------------------------------------------------------------
def _needs_halide():
    from dlcfuzz.backends.torch_program import halide_reason

    if halide_reason():
        pytest.skip(halide_reason())


def test_the_halide_variant_builds_halide_kernels_and_agrees_with_eager(monkeypatch):
    """inductor-halide on a tiny real program: Inductor hands its kernels to Halide (each one built by
    HalideCodeCache, which the C++ backend never calls) and the outputs equal eager's."""
    _needs_halide()
    from torch._inductor.codecache import HalideCodeCache

    built: list[str] = []
    generate = HalideCodeCache.generate_halide_async.__func__

    def spy(cls, meta, source_code, submit_fn=None):
        built.append(source_code)
        return generate(cls, meta, source_code, submit_fn)

    monkeypatch.setattr(HalideCodeCache, "generate_halide_async", classmethod(spy))
    g = _program(("torch.sin", "torch.sum"), seed=0, op_range=(2, 2))
    ran, _ = _run(TorchProgramBackend(), g, Variant("inductor-halide", dict(VARIANTS["inductor-halide"])))
    assert not isinstance(ran, Exception), ran
    assert ran.divergence is None, ran.divergence
    assert built and all("import halide as hl" in s for s in built), built[:1]
    built.clear()  # and backward: the joint graph's kernels (sin's derivative, sum's broadcast) through Halide
    g = TorchProgramGenerator([TORCH_REGISTRY["torch.sin"], TORCH_REGISTRY["torch.sum"]], (2, 2),
                              options=ProgramOptions(layout_rate=0.0, backward_rate=1.0, dynamic_rate=0.0)).generate(0)
    variant = Variant("inductor-halide-backward", dict(VARIANTS["inductor-halide-backward"]))
    ran, _ = _run(TorchProgramBackend(), g, variant)
    assert not isinstance(ran, Exception), ran
    assert ran.divergence is None, ran.divergence
    assert len(built) >= 2 and any("cos" in s for s in built), built


def test_what_halides_codegen_says_it_lacks_is_a_decline_not_a_bug():
    """copysign has no Halide lowering: Inductor wraps Halide's Unsupported in an InductorError; that is the
    variant's decline (an unsupported outcome), while a wrapped NotImplementedError stays a crash."""
    _needs_halide()
    from dlcfuzz.backends.torch_compare import is_decline
    from dlcfuzz.oracle.torch_program import judge_outcomes

    g = _program(("torch.copysign",), seed=0, op_range=(1, 1))
    ran, _ = _run(TorchProgramBackend(), g, Variant("inductor-halide", dict(VARIANTS["inductor-halide"])))
    assert isinstance(ran, Exception), ran
    assert str(ran).startswith("Unsupported: halide backend does not support: copysign"), str(ran)[:300]
    o = Outcome(ERROR, "compile", error_type=type(ran).__name__, message=str(ran))
    verdict = judge_outcomes("inductor-program", {"inductor-halide": o})
    assert not verdict.findings and len(verdict.unsupported) == 1, verdict
    assert not is_decline("InductorError", "NotImplementedError: Unsupported for epilogue_nodes in "
                                           "CppFlexAttentionTemplate")


def test_an_operation_halide_lacks_is_the_halide_variants_decline():
    """log2: Halide's codegen raises NotImplementedError("log2"); the Halide variants name that type as their
    gaps, so the worker raises a CodegenGap, which the judge counts apart (unsupported), not as a bug."""
    _needs_halide()
    from dlcfuzz.oracle.torch_program import judge_outcomes

    g = _program(("torch.log2",), seed=0, op_range=(1, 1))
    ran, _ = _run(TorchProgramBackend(), g, Variant("inductor-halide", dict(VARIANTS["inductor-halide"])))
    assert type(ran).__name__ == "CodegenGap" and "NotImplementedError: log2" in str(ran), ran
    o = Outcome(ERROR, "compile", error_type=type(ran).__name__, message=str(ran))
    verdict = judge_outcomes("inductor-program", {"inductor-halide": o})
    assert not verdict.findings and len(verdict.unsupported) == 1, verdict


def test_plan_runs_halide_on_a_share_of_the_programs_and_not_where_it_is_missing():
    from dlcfuzz.run.torch_campaign import HALIDE_SHARE, plan

    runs = backward = 0
    for seed in range(1000):
        for meta in ({}, {"backward": True}):
            chosen = plan(Graph(meta={"language": "torch", **meta}), random.Random(seed), list(VARIANTS))
            runs += "inductor-halide" in chosen
            backward += "inductor-halide-backward" in chosen
            assert ("inductor-halide-backward" in chosen) <= bool(meta), chosen  # in the program's direction
            assert ("inductor-halide" in chosen) <= (not meta), chosen
    assert abs(runs - 1000 * HALIDE_SHARE) < 45 and abs(backward - 1000 * HALIDE_SHARE) < 45, (runs, backward)
    without = [v for v in VARIANTS if not v.startswith("inductor-halide")]
    assert not any(v.startswith("inductor-halide") for s in range(200) for meta in ({}, {"backward": True})
                   for v in plan(Graph(meta={"language": "torch", **meta}), random.Random(s), without))


def test_the_sampled_trace_flag_writes_inductors_debug_dumps_into_a_folder_it_removes(tmp_path, monkeypatch):
    """trace.enabled (one of CONFIG_FLAGS, TORCH_COMPILE_DEBUG's dumps): Inductor writes its IR and output
    fusion for the compile, into a temporary folder that is gone afterwards, nothing in the worker's folder."""
    from torch._inductor import debug

    assert CONFIG_FLAGS["trace.enabled"] == (True,)
    written: list[Path] = []
    real = debug.DebugContext.fopen

    def spy(self, filename, *a, **k):
        written.append(Path(self._path) / filename)
        return real(self, filename, *a, **k)

    monkeypatch.setattr(debug.DebugContext, "fopen", spy)
    monkeypatch.chdir(tmp_path)
    g = _program(("torch.sin", "torch.matmul", "torch.relu"), seed=0, op_range=(3, 3))
    g.meta["inductor_config"] = {"trace.enabled": True}
    ran, _ = _run(TorchProgramBackend(), g, Variant("inductor-config", dict(VARIANTS["inductor-config"])))
    assert not isinstance(ran, Exception) and ran.divergence is None, ran
    assert {"ir_pre_fusion.txt", "ir_post_fusion.txt"} <= {p.name for p in written}, written
    assert not any(p.exists() for p in written), written  # the folder went with the variant
    assert list(tmp_path.iterdir()) == []  # no torch_compile_debug/ where the worker runs


def test_a_quantized_linear_under_backward_agrees_and_its_repro_runs_without_float64(tmp_path):
    """idiom_qlinear (pt2e's int8 form) in a program that runs backward: its scales are read detached (eager
    differentiates them only through a deprecated fallback, compiled not at all: a false alarm of a
    30-minute campaign), and the repro's float64 tie-break, which quantize_per_tensor refuses, is skipped
    rather than failing the script."""
    from dlcfuzz.backends.torch_program import repro_script
    from dlcfuzz.export.torch_program import to_program_source

    gen = TorchProgramGenerator([TORCH_REGISTRY[o] for o in ("torch.idiom_qlinear", "torch.abs")], (2, 2),
                                options=ProgramOptions(layout_rate=0.0, backward_rate=1.0, dynamic_rate=0.0))
    g = next(g for g in (gen.generate(s) for s in range(50)) if "_dq_weight(" in to_program_source(g))
    source = to_program_source(g)
    assert "BACKWARD = True" in source and ".detach(), " in source.split("_dq_weight(", 2)[2]
    variant = Variant("inductor-backward", dict(VARIANTS["inductor-backward"]))
    ran, _ = _run(TorchProgramBackend(), g, variant)
    assert not isinstance(ran, Exception) and ran.divergence is None, ran
    repro = tmp_path / "repro.py"
    repro.write_text(repro_script(source, variant, "no bug"))
    got = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 0 and "not reproduced" in got.stdout, got.stdout + got.stderr[-2000:]
