"""torch.compile on torch-native programs (``gen/torch_program.py``, written by
``export/torch_program.py``): backend ``inductor-program``.

The import phase writes the program's source and runs it eagerly: the reference outputs, the inputs
after the run (in-place writes reach them) and an eager float64 run (the tie-breaker); a program that
eager torch rejects is the generator's decline (``EagerRejects``), never a bug.  Each variant then
compiles the program (``fullgraph=True``, so a graph break is an error, judged a decline) and runs it
on fresh inputs in the program's layouts:

- ``inductor``: forward, no grad, one thread;
- ``inductor-dynamic``: ``dynamic=True`` with every runtime input's dims marked (maybe) dynamic, then a
  second call at other sizes (where eager takes them), which must reuse or recompile correctly;
- ``inductor-threads``: forward with more than one thread (Inductor's OpenMP C++ paths);
- ``inductor-backward``: a cotangent per float output, gradients of the float inputs (not written in
  place) and parameters, compiled (AOTAutograd's joint graph) against eager;
- ``inductor-cpp-wrapper``, ``inductor-freezing`` (no grad: parameters folded as constants) and
  ``inductor-config`` (a few flags of ``CONFIG_FLAGS`` drawn from the test's seed: the program's
  ``meta["inductor_config"]``): the forward under ``torch._inductor.config.patch(flags)``; a finding there is
  bisected (``minimal_flags``: delta debugging over the flag set) to the fewest flags that still show it, ``{}``
  where it shows with none (a default-config bug);
- ``inductor-autotune`` (``AUTOTUNE_FLAGS``: freezing and max_autotune, the C++ GEMM template against ATen),
  ``inductor-fx-passes`` (``FX_PASSES_FLAGS``: the split/cat and batch-fusion passes named in
  pre/post_grad_fusion_options) and ``inductor-cache`` (the FX graph cache on: a first compile fills it, the
  compile judged is served from it): the forward under those flags, bisected like the others;
- ``inductor-layout``: the metamorphic layout oracle: after a call in the program's layouts, a call with each
  runtime input re-laid-out (``relayout``: contiguous <-> channels_last / transposed / step-sliced, the same
  values), judged on values alone against eager in the original layouts (kind ``layout``);
- ``inductor-halide`` (``inductor-halide-backward`` for a program that runs backward: the joint graph's kernels
  too): the program with Inductor's Halide CPU backend (``cpu_backend="halide"``), where the
  ``halide`` package is installed (``halide_reason``): Inductor's SIMD kernel codegen and tiling
  (``codegen/simd.py``, ``tiling_utils.py``), which the GPU's Triton kernels share and the C++ backend never
  runs, lowered to Halide; what Halide's codegen says it lacks (its ``Unsupported``, or a NotImplementedError:
  the variant's ``gaps``, raised as ``CodegenGap``) is a decline;
- ``inductor-aoti``: AOTInductor, as a model is deployed: ``torch.export`` of the program (its failure is the
  exporter's decline, ``TorchExportError``), ``aoti_compile_and_package`` into a ``.pt2`` package, loaded back
  with ``aoti_load_package`` and called in the program's layouts; forward only, for programs that write no
  input (``run/torch_campaign.plan``).  Its layer check runs the exported program itself (``ep.module()``):
  where that diverges (or crashes) too, the layer is torch.export's, not Inductor's;
- with a GPU, ``inductor-cuda`` (and its dynamic and backward forms): the program, its parameters and its
  inputs (in their layouts) on the GPU, compiled (Triton) against eager on the GPU, as PyTorch's triage
  compares them.

A divergence (``backends/torch_compare.compare_tensors``) is re-run with ``backend="aot_eager"`` (and then
``"eager"``) to name the layer; so is a compile crash.  Each variant hands over ``verdict-<variant>.json``
(what it found, the layer) and the run phase raises ``ProgramDivergence`` for a divergence, so that the
driver's judge (``oracle/torch_program.judge_outcomes``) makes the findings.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import random
import shutil
import tempfile
import weakref
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant
from dlcfuzz.backends.inductor import reporting_fired
from dlcfuzz.backends.torch_compare import (
    AOT,
    CODEGEN_GAP,
    DYNAMO,
    EAGER_REJECTS,
    EXPORT,
    GRAD,
    INDUCTOR,
    LAYOUT,
    MUTATION,
    VALUE,
    Divergence,
    ProgramDivergence,
    ProgramVerdict,
    compare_tensors,
    is_decline,
    raised_types,
)

# inductor-autotune: the CPU GEMM templates as a user asks for them (mode="max-autotune" on a frozen model in
# eval): freezing (parameters folded as constants, the mkldnn weight packing and conv/linear fusions), then
# max_autotune choosing between ATen and Inductor's C++ GEMM template (codegen/cpp_gemm_template.py,
# select_algorithm.py) for each matmul, within the default search space, the choices benchmarked in
# Inductor's pool of tuning subprocesses (autotune_process.py) as users do to survive a crashing choice
AUTOTUNE_FLAGS: dict[str, Any] = {"freezing": True, "max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN",
                                  "max_autotune_gemm_search_space": "DEFAULT", "autotune_in_subproc": True}
# inductor-fx-passes: the split/cat, unbind/stack and batch-fusion passes that are off unless named in
# pre_grad_fusion_options / post_grad_fusion_options (fx_passes/split_cat.py, group_batch_fusion.py), all of
# them by name, as their users turn them on (the CPU's: no GPU-only group fusion)
PRE_GRAD_PASSES = ("normalization_pass", "remove_split_with_size_one_pass", "merge_getitem_cat_pass",
                   "merge_stack_tahn_unbind_pass", "merge_splits_pass", "mutate_cat_pass", "split_cat_pass",
                   "unbind_stack_pass", "split_cat_to_slices_pass", "unbind_cat_to_view_pass",
                   "split_stack_to_cats_pass", "unbind_stack_to_slices_pass", "move_reshape_out_of_split_stack_pass",
                   "einsum_to_pointwise_pass", "batch_linear", "batch_linear_lhs", "batch_layernorm", "batch_tanh",
                   "batch_sigmoid", "batch_relu", "batch_detach", "batch_nan_to_num", "batch_clamp", "batch_dropout")
POST_GRAD_PASSES = ("normalization_aten_pass", "decompose_mm_pass", "unbind_stack_aten_pass", "split_cat_aten_pass",
                    "select_cat_aten_pass", "move_view_after_cat_aten_pass", "batch_linear_post_grad",
                    "batch_aten_tanh", "batch_aten_sigmoid", "batch_aten_relu", "batch_aten_add", "batch_aten_sub",
                    "batch_aten_div", "batch_aten_mul")
FX_PASSES_FLAGS: dict[str, Any] = {"pre_grad_fusion_options": {n: {} for n in PRE_GRAD_PASSES},
                                   "post_grad_fusion_options": {n: {} for n in POST_GRAD_PASSES}}
# inductor-halide: the kernels through Inductor's SIMD codegen and Halide instead of the C++ backend
HALIDE_FLAGS: dict[str, Any] = {"cpu_backend": "halide"}
VARIANTS = {
    "inductor": {"backend": "inductor"},
    "inductor-dynamic": {"backend": "inductor", "dynamic": True},
    "inductor-threads": {"backend": "inductor", "threads": 2},
    "inductor-backward": {"backend": "inductor", "backward": True},
    "inductor-cpp-wrapper": {"backend": "inductor", "config": {"cpp_wrapper": True}},
    "inductor-freezing": {"backend": "inductor", "config": {"freezing": True}},
    "inductor-config": {"backend": "inductor", "config": "sampled"},
    "inductor-layout": {"backend": "inductor", "relayout": True},
    "inductor-autotune": {"backend": "inductor", "config": AUTOTUNE_FLAGS},
    "inductor-fx-passes": {"backend": "inductor", "config": FX_PASSES_FLAGS},
    "inductor-cache": {"backend": "inductor", "config": {"fx_graph_cache": True}, "cached": True},
    "inductor-aoti": {"backend": "inductor", "aoti": True},
    # the experimental Halide backend says it lacks an operation with NotImplementedError("log2"): a decline
    "inductor-halide": {"backend": "inductor", "config": HALIDE_FLAGS, "gaps": ("NotImplementedError",)},
    "inductor-halide-backward": {"backend": "inductor", "config": HALIDE_FLAGS, "backward": True,
                                 "gaps": ("NotImplementedError",)},
}
# Inductor flags a sampled-config variant draws from (each with its values other than the default): ones
# that change what Inductor generates for a CPU (fusion, reductions, buffer reuse, the pattern passes, the
# C++ kernels' vector width, tiling and threading), none that changes the results' meaning (no fast-math,
# no padded or unkept output strides, no autotuning, nothing of the GPU)
CONFIG_FLAGS: dict[str, tuple[Any, ...]] = {
    "split_reductions": (False,),
    "aggressive_fusion": (True,),
    "epilogue_fusion": (False,),
    "pattern_matcher": (False,),
    "max_fusion_size": (1, 8),
    "realize_reads_threshold": (1,),
    "realize_opcount_threshold": (1,),
    "inplace_buffers": (False,),
    "allow_buffer_reuse": (False,),
    "unroll_reductions_threshold": (1, 64),
    "permute_fusion": (True,),
    "reorder_for_locality": (False,),
    "loop_ordering_after_fusion": (False,),
    "reorder_for_peak_memory": (False,),
    "group_fusion": (True,),
    "joint_graph_constant_folding": (False,),
    "split_cat_fx_passes": (False,),
    "online_softmax": (False,),
    "optimize_scatter_upon_const_tensor": (False,),
    "cpp.simdlen": (0, 256),
    "cpp.enable_kernel_profile": (True,),
    "cpp.dynamic_threads": (True,),
    "cpp.fallback_scatter_reduce_sum": (False,),
    "cpp.enable_tiling_heuristics": (False,),
    "cpp.min_chunk_size": (1,),
    "cpp.max_horizontal_fusion_size": (0, 1),
    "cpp.enable_loop_tail_vec": (False,),
    "cpp.use_decompose_tanh": (True,),
    "memory_planning": (True,),  # the wrapper's buffers planned into pools (codegen/memory_planning.py)
    "freezing": (True,),  # beside the others: the frozen graph's mkldnn packing under other codegen flags
    "trace.enabled": (True,),  # TORCH_COMPILE_DEBUG's IR dumps (debug.py), written into a temporary folder
}
BISECT_RUNS = 24  # the most runs a bisection of one finding's flags takes
# with a GPU: the same program on it, judged against eager torch on the same device (float64 there too)
CUDA_VARIANTS = {
    "inductor-cuda": {"backend": "inductor", "device": "cuda"},
    "inductor-cuda-dynamic": {"backend": "inductor", "device": "cuda", "dynamic": True},
    "inductor-cuda-backward": {"backend": "inductor", "device": "cuda", "backward": True},
}
THREADS = 1  # the default: one thread per worker (workers run side by side)


def halide_reason() -> str:
    """Why the Halide variant cannot run here ("" when it can)."""
    import importlib.util

    if importlib.util.find_spec("halide") is None:
        return 'the Halide package is not installed (pip install "dlcfuzz[halide]")'
    return ""


class EagerRejects(Exception):
    """Eager torch refuses the program: the generator's decline."""


EagerRejects.__name__ = EAGER_REJECTS


class CodegenGap(Exception):
    """The variant's code generator lacks an operation (an exception its variant names as its ``gaps``)."""


CodegenGap.__name__ = CODEGEN_GAP


def sample_config(seed: int, low: int = 2, high: int = 6) -> dict[str, Any]:
    """The flags of a sampled-config variant for the test of ``seed``: ``low`` to ``high`` flags of
    ``CONFIG_FLAGS``, each set to one of its other values (the same seed, the same flags)."""
    rng = random.Random(seed)
    names = rng.sample(sorted(CONFIG_FLAGS), rng.randint(low, high))
    return {n: rng.choice(CONFIG_FLAGS[n]) for n in sorted(names)}


def minimal_flags(flags: dict[str, Any], shows: Any, runs: int = BISECT_RUNS) -> dict[str, Any]:
    """The smallest subset of ``flags`` on which ``shows`` (subset -> bool) still holds (``flags`` does):
    ``{}`` where it holds with no flags, else delta debugging (ddmin) over the flags, each subset run once,
    within ``runs`` runs (past them, the smallest found so far)."""
    seen: dict[tuple[str, ...], bool] = {}

    def holds(names: list[str]) -> bool:
        key = tuple(sorted(names))
        if key not in seen:
            if len(seen) >= runs:
                return False
            seen[key] = bool(shows({n: flags[n] for n in key}))
        return seen[key]

    if not flags or holds([]):
        return {}
    items, n = sorted(flags), 2
    while len(items) > 1:
        size = -(-len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        smaller = next((c for c in chunks if holds(c)), None)
        if smaller is None and n > 2:
            smaller = next((rest for c in chunks if holds(rest := [x for x in items if x not in c])), None)
            if smaller is not None:
                items, n = smaller, max(n - 1, 2)
                continue
        elif smaller is not None:
            items, n = smaller, 2
            continue
        if n >= len(items):
            break
        n = min(2 * n, len(items))
    return {name: flags[name] for name in items}


def flags_text(flags: dict[str, Any] | None) -> str:
    """``a=1, b=False`` (sorted), or ``default config`` for none."""
    return ", ".join(f"{k}={v!r}" for k, v in sorted(flags.items())) if flags else "default config"


def relayout(x: Any, how: str) -> Any:
    """``x``'s values in another memory layout: ``contiguous``, ``channels_last`` (4-d or 5-d),
    ``transposed`` (stored with its dims reversed) or ``sliced`` (every other element of a storage twice as
    long in the last dim)."""
    import torch

    if how == "contiguous":
        return x.contiguous()
    if how == "channels_last":
        return x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    if how == "transposed":
        perm = list(range(x.dim()))[::-1]  # its own inverse
        return x.permute(perm).contiguous().permute(perm)
    if how == "sliced":
        shape = list(x.shape)
        shape[-1] *= 2
        view = torch.zeros(shape, dtype=x.dtype, device=x.device)[..., ::2]
        view.copy_(x)
        return view
    return x


def relayouts(args: Any) -> list[str]:
    """The other layout of each runtime input (``relayout``; "" keeps it): a dense input becomes
    transposed, step-sliced or channels_last (in turn), any other (transposed, sliced, offset, expanded)
    contiguous."""
    import torch

    out: list[str] = []
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor) or a.numel() <= 1 or a.dim() == 0:
            out.append("")
        elif not a.is_contiguous() or a.storage_offset():
            out.append("contiguous")
        else:
            choices = (["transposed"] if sum(d > 1 for d in a.shape) > 1 else []) + ["sliced"] + \
                (["channels_last"] if a.dim() in (4, 5) else [])
            out.append(choices[i % len(choices)])
    return out


def configure() -> None:
    """One worker's torch settings: one thread, no compile pool or caches (a repro recompiles as the test
    did), data-dependent shapes captured, low-precision casts rounded as eager rounds them."""
    import torch
    import torch._dynamo.config as dynamo_config
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    torch.set_num_threads(THREADS)
    inductor_config.compile_threads = 1
    inductor_config.fx_graph_cache = False
    inductor_config.emulate_precision_casts = True
    functorch_config.enable_autograd_cache = False
    dynamo_config.capture_scalar_outputs = True
    dynamo_config.capture_dynamic_output_shape_ops = True
    dynamo_config.recompile_limit = 64
    inductor_config.max_autotune_report_choices_stats = False  # max_autotune's tables, printed per choice
    inductor_config.autotune_num_choices_displayed = 0


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class Program:
    namespace: dict[str, Any]
    source: str
    eager: list[Any]  # outputs
    eager_inputs: list[Any]  # the inputs after the eager run
    fp64: list[Any] | None
    fp64_inputs: list[Any] | None
    not_compared: list[int]
    backward: bool
    dynamic: bool
    cache: dict[Any, Any] = field(default_factory=dict)
    sampled_config: dict[str, Any] = field(default_factory=dict)  # the sampled-config variant's flags


@dataclass
class Ran:
    outputs: list[Any]
    verdict: ProgramVerdict
    divergence: Divergence | None


def _detach(x: Any) -> Any:
    import torch

    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def _to64(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
        return x.detach().to(torch.float64)
    return x


def to_device(x: Any, device: str) -> Any:
    """``x`` on ``device`` in the same layout: its whole storage moves and the same view (sizes, strides,
    offset) is taken of it, so step-sliced, offset and expanded (stride 0) inputs stay what they were."""
    import torch

    if not isinstance(x, torch.Tensor) or device == "cpu" or x.device.type == device:
        return x
    storage = x.untyped_storage()
    base = x.new_empty(0).set_(storage, 0, (storage.nbytes() // x.element_size(),), (1,))
    return base.to(device).as_strided(x.shape, x.stride(), x.storage_offset())


def on_device(model: Any, args: tuple, device: str) -> tuple[Any, tuple]:
    """The model (moved in place) and the arguments on ``device``."""
    if device == "cpu":
        return model, args
    return model.to(device), tuple(to_device(a, device) for a in args)


def run_eager(ns: dict[str, Any], model: Any = None, inputs: tuple | None = None, fp64: bool = False,
              device: str = "cpu") -> tuple[list[Any], list[Any]]:
    """(outputs, inputs after the run) of one eager run on ``device``, no grad."""
    import torch

    model = model if model is not None else ns["Model"]()
    args = inputs if inputs is not None else ns["make_inputs"]()
    if fp64:
        model = copy.deepcopy(model).double()
        args = tuple(_to64(a) for a in args)
    model, args = on_device(model, args, device)
    with torch.no_grad():
        out = model(*args)
    return [_detach(o) for o in out], [_detach(a) for a in args]


def eager_runs(ns: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any] | None, list[Any] | None]:
    """(outputs, inputs after the run) of eager torch, then both of its float64 run (None where float64
    fails): the references.  A program eager rejects is the generator's decline (``EagerRejects``)."""
    try:
        eager, eager_inputs = run_eager(ns)
    except Exception as e:
        raise EagerRejects(f"eager torch rejects the program: {type(e).__name__}: {e}") from e
    try:
        fp64, fp64_inputs = run_eager(ns, fp64=True)
    except Exception:
        fp64, fp64_inputs = None, None
    return eager, eager_inputs, fp64, fp64_inputs


def grads_of(ns: dict[str, Any], fn: Any, model: Any, args: tuple) -> tuple[list[Any], list[Any]]:
    """(outputs, gradients) of a run through ``fn`` (the model, or its compiled form) with grad: the
    gradients of the float inputs (not written in place) and the parameters of a cotangent-weighted sum
    of the float outputs (no gradients where no output carries one)."""
    import torch

    mutated = set(ns.get("MUTATED", []))
    leaves = []
    args = list(args)
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.dtype.is_floating_point and i not in mutated:
            args[i] = a.detach().requires_grad_(True)
            leaves.append(args[i])
    params = [p for p in model.parameters() if p.requires_grad]
    outs = fn(*args)
    g = torch.Generator().manual_seed(1234)
    loss = None
    for o in outs:
        if isinstance(o, torch.Tensor) and o.requires_grad and o.dtype.is_floating_point:
            cot = (torch.rand(o.shape, generator=g, dtype=torch.float64) * 2 - 1).to(o.device)
            term = (o.double() * cot).sum()
            loss = term if loss is None else loss + term
    detached = [_detach(o) for o in outs]
    if loss is None:
        return detached, []
    got = torch.autograd.grad(loss, leaves + params, allow_unused=True)
    return detached, [None if x is None else x.detach() for x in got]


class TorchProgramBackend(Backend):
    name = "inductor-program"
    package = "torch"
    pip = "torch==2.13.0"
    checks_models = False

    def variants(self) -> list[Variant]:
        from dlcfuzz.backends.inductor import cuda_reason

        table = VARIANTS | ({} if cuda_reason() else CUDA_VARIANTS)
        missing = {n for n, o in VARIANTS.items() if o.get("config") is HALIDE_FLAGS} if halide_reason() else set()
        return [Variant(n, dict(o)) for n, o in table.items() if n not in missing]

    def device_notes(self) -> dict[str, str]:
        from dlcfuzz.backends.inductor import cuda_reason

        notes = {"cuda": cuda_reason(), "halide": halide_reason()}
        return {k: f"{self.name}: {why}" for k, why in notes.items() if why}

    def supports(self, ops: set[str], graph: Any = None) -> bool:
        from dlcfuzz.ir.graph import is_torch_program

        return graph is None or is_torch_program(graph)

    # -- import: the program, and its eager runs ------------------------------------------------
    def load(self, test: Test) -> Program:
        import torch

        from dlcfuzz.export.torch_program import build, to_program_source
        from dlcfuzz.ir import Graph

        configure()
        torch._dynamo.reset()
        graph = Graph.from_json(test.graph_json) if test.graph_json else None
        source = to_program_source(graph) if graph is not None else test.model.decode()
        ns = build(source)
        eager, eager_inputs, fp64, fp64_inputs = eager_runs(ns)
        # the sampled-config variant's flags: the test's draw (plan()), or one from the program's text
        sampled = (graph.meta.get("inductor_config") if graph is not None else None) or \
            sample_config(zlib.crc32(source.encode()))
        return Program(ns, source, eager, eager_inputs, fp64, fp64_inputs, list(ns.get("NOT_COMPARED", [])),
                       bool(ns.get("BACKWARD")), bool(ns.get("DYNAMIC")), sampled_config=dict(sampled))

    # -- compile: one variant, judged against eager ---------------------------------------------
    def compile(self, p: Program, variant: Variant) -> Ran:
        opts = dict(variant.options)
        if opts.get("config") == "sampled":
            opts["config"] = dict(p.sampled_config)
        verdict = ProgramVerdict(config=dict(opts.get("config") or {}))
        backend = opts.get("backend", "inductor")
        try:  # the Inductor optimizations the compile fired (``Outcome.fired``): what feedback guidance reads
            with threads(opts.get("threads", THREADS)), reporting_fired(self):
                ran = self._variant(p, opts, backend, verdict)
        except Exception as e:
            if is_decline(type(e).__name__, str(e)):
                raise
            if raised_types(type(e).__name__, str(e)) & set(opts.get("gaps", ())):
                raise CodegenGap(f"{variant.name}: {type(e).__name__}: {e}") from e
            opts = self._bisect(p, opts, backend, verdict, crash=type(e).__name__)
            verdict.layer = self._crash_layer(p, opts)
            self.artifact(f"verdict-{variant.name}.json", verdict.to_json())
            raise
        if ran.divergence is not None:
            opts = self._bisect(p, opts, backend, verdict, kind=ran.divergence.kind)
            ran.divergence.layer = self._divergence_layer(p, opts, ran.divergence.kind)
            verdict.divergence = ran.divergence.__dict__
        self.artifact(f"verdict-{variant.name}.json", verdict.to_json())
        return ran

    def _bisect(self, p: Program, opts: dict[str, Any], backend: str, verdict: ProgramVerdict, crash: str = "",
                kind: str = "") -> dict[str, Any]:
        """Of a finding under Inductor flags: the fewest of them that still show it (the same crash type, or a
        divergence of the same kind), in ``verdict.minimal``; the options with only those flags."""
        flags = opts.get("config") or {}
        if not flags:
            return opts

        def shows(subset: dict[str, Any]) -> bool:
            try:
                with threads(opts.get("threads", THREADS)):
                    again = self._variant(p, {**opts, "config": subset}, backend, ProgramVerdict())
            except Exception as e:
                return bool(crash) and type(e).__name__ == crash
            return not crash and again.divergence is not None and again.divergence.kind == kind

        verdict.minimal = minimal_flags(flags, shows)
        return {**opts, "config": verdict.minimal}

    def _compiled(self, p: Program, backend: str, opts: dict[str, Any]) -> tuple[Any, Any]:
        import torch

        torch._dynamo.reset()
        model = p.namespace["Model"]().to(opts.get("device", "cpu"))
        if opts.get("aoti"):
            return model, self._aoti(p, model, backend)
        fn = torch.compile(model, backend=backend, fullgraph=True, dynamic=True if opts.get("dynamic") else None)
        return model, fn

    def _aoti(self, p: Program, model: Any, backend: str) -> Any:
        """AOTInductor's compiled program: torch.export of ``model`` on the program's inputs, compiled into a
        package and loaded back; for a layer check (``backend`` other than Inductor), the exported program
        itself, run by torch."""
        import torch

        from dlcfuzz.backends.torch_library import torch_export

        ep = torch_export(model, tuple(p.namespace["make_inputs"]()))
        if backend != "inductor":
            return ep.module()
        if self._package_dir is None:  # one folder per worker, its package rewritten by each compile
            self._package_dir = tempfile.mkdtemp(prefix="dlcfuzz-aoti-")
            weakref.finalize(self, shutil.rmtree, self._package_dir, True)
        package = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(self._package_dir,
                                                                                         "model.pt2"))
        return torch._inductor.aoti_load_package(package)

    _package_dir: str | None = None

    def _references(self, p: Program, device: str) -> tuple[list[Any], list[Any], list[Any] | None, list[Any] | None]:
        """(outputs, inputs after the run, and both of the float64 run) of eager torch on ``device``: a
        compiled run is judged against eager on its own device."""
        if device == "cpu":
            return p.eager, p.eager_inputs, p.fp64, p.fp64_inputs
        if ("references", device) not in p.cache:
            try:
                eager, eager_inputs = run_eager(p.namespace, device=device)
            except Exception as e:
                raise EagerRejects(f"eager torch on {device} rejects the program: {type(e).__name__}: {e}") from e
            try:
                fp64, fp64_inputs = run_eager(p.namespace, fp64=True, device=device)
            except Exception:
                fp64, fp64_inputs = None, None
            p.cache[("references", device)] = (eager, eager_inputs, fp64, fp64_inputs)
        return p.cache[("references", device)]

    def _eager_grads(self, p: Program, device: str) -> dict[str, Any]:
        """Eager's outputs and gradients with grad on ``device`` (and float64's), as the compiled run
        makes them: kernels may differ from no-grad ones (max_pool1d's output strides do), so the
        forward outputs are compared with these too."""
        ns = p.namespace
        if ("grads", device) not in p.cache:
            got: dict[str, Any] = {}
            m, args = on_device(ns["Model"](), ns["make_inputs"](), device)
            try:
                got["outs"], got["grads"] = grads_of(ns, m, m, args)
            except Exception as e:  # e.g. a tensor saved for backward written in place afterwards
                raise EagerRejects(f"eager torch rejects the program's backward: {type(e).__name__}: {e}") from e
            m64, args64 = on_device(copy.deepcopy(ns["Model"]()).double(),
                                    tuple(_to64(a) for a in ns["make_inputs"]()), device)
            try:
                got["outs64"], got["grads64"] = grads_of(ns, m64, m64, args64)
            except Exception:
                got["outs64"], got["grads64"] = None, None
            p.cache[("grads", device)] = got
        return p.cache[("grads", device)]

    def _variant(self, p: Program, opts: dict[str, Any], backend: str, verdict: ProgramVerdict) -> Ran:
        """Runs ``p`` compiled with ``backend`` under the variant's options (its Inductor flags patched in
        around the compile and the runs); the first divergence."""
        from torch._inductor import config as inductor_config

        flags = dict(opts.get("config") or {})
        with contextlib.ExitStack() as stack:
            if flags.get("trace.enabled"):  # its dumps go where they are removed, not into the worker's folder
                flags["trace.debug_dir"] = stack.enter_context(tempfile.TemporaryDirectory(prefix="dlcfuzz-trace-"))
            with inductor_config.patch(flags):
                return self._run_variant(p, opts, backend, verdict)

    def _run_variant(self, p: Program, opts: dict[str, Any], backend: str, verdict: ProgramVerdict) -> Ran:
        import torch

        ns = p.namespace
        device = opts.get("device", "cpu")
        model, fn = self._compiled(p, backend, opts)
        if opts.get("cached"):  # a first compile fills the FX graph cache, the compile judged is served from it
            with torch.no_grad():
                fn(*(to_device(a, device) for a in ns["make_inputs"]()))
            model, fn = self._compiled(p, backend, opts)
        state = {k: v.detach().clone() for k, v in model.state_dict().items()} if opts.get("relayout") else {}
        args = tuple(to_device(a, device) for a in ns["make_inputs"]())
        if opts.get("backward"):
            ref = self._eager_grads(p, device)
            outs, got = grads_of(ns, fn, model, args)
            d = compare_tensors(VALUE, "output", ref["outs"], outs, ref["outs64"], p.not_compared, strides=True)
            if d is None:
                d = compare_tensors(GRAD, "gradient of leaf", ref["grads"], got, ref["grads64"])
                if d is not None:
                    d.where = d.where.replace("leaf", "input" if d.index < _n_leaves(ns) else "parameter")
            return Ran(outs, verdict, d)
        eager, eager_inputs, fp64, fp64_inputs = self._references(p, device)
        if opts.get("dynamic"):
            for a in args:
                if isinstance(a, torch.Tensor) and a.dim():
                    torch._dynamo.maybe_mark_dynamic(a, list(range(a.dim())))
        with torch.no_grad():
            outs = [_detach(o) for o in fn(*args)]
        after = [_detach(a) for a in args]
        d = compare_tensors(VALUE, "output", eager, outs, fp64, p.not_compared, strides=True)
        if d is None:
            d = compare_tensors(MUTATION, "input after the run", eager_inputs, after, fp64_inputs)
        if d is None and opts.get("dynamic"):
            d = self._second_call(p, fn, verdict, device)
        if d is None and opts.get("relayout"):
            d = self._relaid_call(p, fn, model, state, verdict, device)
        return Ran(outs, verdict, d)

    def _relaid_call(self, p: Program, fn: Any, model: Any, state: dict[str, Any], verdict: ProgramVerdict,
                     device: str) -> Divergence | None:
        """The layout variant's second call: each runtime input's values in another layout (``relayouts``),
        the model's buffers as before the first call; judged on values alone (strides may differ) against
        eager in the program's own layouts.  A program whose eager result itself depends on the layout (an
        ``as_strided`` of a ``.contiguous()`` that copies in one layout and aliases in the other, before an
        in-place write) is judged against eager in the other layouts, without the float64 tie-break."""
        import torch

        eager, eager_inputs, fp64, fp64_inputs = self._references(p, device)
        original = tuple(to_device(a, device) for a in p.namespace["make_inputs"]())
        verdict.relayout = relayouts(original)
        if not any(verdict.relayout):
            verdict.notes.append("layout call skipped: no input to re-lay-out")
            return None

        def relaid() -> tuple:  # fresh inputs for each run: the compiled and the eager one may write into them
            fresh = (to_device(a, device) for a in p.namespace["make_inputs"]())
            return tuple(relayout(a, h) if h else a for a, h in zip(fresh, verdict.relayout, strict=True))

        args = relaid()
        try:
            there, there_inputs = run_eager(p.namespace, inputs=relaid(), device=device)
        except Exception as e:  # eager refuses the other layouts: the layouts are the program's business
            verdict.notes.append(f"layout call skipped: eager rejects the other layouts: {type(e).__name__}")
            return None
        if compare_tensors(LAYOUT, "eager", eager, there, fp64, p.not_compared) is not None:
            verdict.notes.append("layout call: eager itself reads the layout; judged against eager in those layouts")
            eager, eager_inputs, fp64, fp64_inputs = there, there_inputs, None, None
        with torch.no_grad():
            for k, v in model.state_dict().items():
                v.copy_(state[k])
            outs = [_detach(o) for o in fn(*args)]
        label = f"re-laid-out call [{', '.join(h or 'kept' for h in verdict.relayout)}]:"
        d = compare_tensors(LAYOUT, f"{label} output", eager, outs, fp64, p.not_compared)
        if d is None:
            d = compare_tensors(LAYOUT, f"{label} input after the run", eager_inputs, [_detach(a) for a in args],
                                fp64_inputs)
        return d

    def _second_call(self, p: Program, fn: Any, verdict: ProgramVerdict, device: str) -> Divergence | None:
        """The dynamic variant's second call, at other sizes: one dimension length of the runtime inputs
        grows by one everywhere it occurs (where eager takes the program at those sizes)."""
        import torch

        ns = p.namespace
        sizes = Counter(d for a in ns["make_inputs"]() if isinstance(a, torch.Tensor) for d in a.shape if d > 1)
        if not sizes:
            verdict.notes.append("second call skipped: no dimension longer than 1")
            return None
        old = sizes.most_common(1)[0][0]
        other = {old: old + 1}
        try:
            ref, ref_in = run_eager(ns, inputs=ns["make_inputs"](1, other), device=device)
        except Exception as e:
            verdict.notes.append(f"second call skipped: eager rejects sizes {other}: {type(e).__name__}")
            return None
        try:
            ref64, ref64_in = run_eager(ns, inputs=ns["make_inputs"](1, other), fp64=True, device=device)
        except Exception:
            ref64, ref64_in = None, None
        args = tuple(to_device(a, device) for a in ns["make_inputs"](1, other))
        with torch.no_grad():
            outs = [_detach(o) for o in fn(*args)]
        d = compare_tensors(VALUE, f"second call at sizes {other}: output", ref, outs, ref64, p.not_compared,
                            strides=True)
        if d is None:
            d = compare_tensors(MUTATION, f"second call at sizes {other}: input after the run", ref_in,
                                [_detach(a) for a in args], ref64_in)
        return d

    def _divergence_layer(self, p: Program, opts: dict[str, Any], kind: str = "") -> str:
        """inductor, unless a layer check (``_layer_checks``) shows the divergence too: aot_eager
        (Dynamo/AOTAutograd's, or Dynamo's alone where backend='eager' shows it as well), or for AOTInductor
        the exported program (torch.export's); with ``kind``, a divergence of that kind (the layout variant's:
        a stride divergence of its first call is not its layout divergence)."""
        checks = _layer_checks(opts)
        for i, (backend, layer) in enumerate(checks):
            try:
                with threads(opts.get("threads", THREADS)):
                    again = self._variant(p, opts, backend, ProgramVerdict())
            except Exception:  # the check itself fails: the layer before it is at fault
                return layer if i == 0 else checks[i - 1][1]
            if again.divergence is None or (kind == LAYOUT and again.divergence.kind != kind):
                return INDUCTOR if i == 0 else checks[i - 1][1]
        return checks[-1][1]

    def _crash_layer(self, p: Program, opts: dict[str, Any]) -> str:
        """Which layer a compile failure belongs to: the same program under each layer check in turn
        (aot_eager, then eager; for AOTInductor, the exported program)."""
        layer = INDUCTOR
        for backend, name in _layer_checks(opts):
            try:
                with threads(opts.get("threads", THREADS)):
                    self._variant(p, opts, backend, ProgramVerdict())
                return layer
            except Exception:
                layer = name
        return layer

    def run(self, ran: Ran, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        if ran.divergence is not None:
            raise ProgramDivergence(ran.divergence.message(""))
        return [_numpy(o) for o in ran.outputs]

    def repro_source(self, variant: Variant) -> str:
        """The bundle's repro.py for a torch program is written by ``repro_script`` (a standalone torch
        script); this source only lets the generic bundle writer run."""
        return f"OPTIONS = {variant.options!r}\n\ndef run_model(model_path, inputs):\n    raise SystemExit(" \
               f"'run repro.py of a torch program directly')\n"


EXPORT_CHECK = "export"  # the layer check of the AOTInductor variant: the exported program, run by torch


def _layer_checks(opts: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The runs that name a finding's layer, in order, each with the layer it names when it shows the finding
    too: aot_eager (Dynamo/AOTAutograd), then eager (Dynamo); for AOTInductor, the exported program."""
    if opts.get("aoti"):
        return ((EXPORT_CHECK, EXPORT),)
    return (("aot_eager", AOT), ("eager", DYNAMO))


def _n_leaves(ns: dict[str, Any]) -> int:
    import torch

    mutated = set(ns.get("MUTATED", []))
    return sum(1 for i, a in enumerate(ns["make_inputs"]())
               if isinstance(a, torch.Tensor) and a.dtype.is_floating_point and i not in mutated)


def _numpy(o: Any) -> np.ndarray:
    import torch

    if not isinstance(o, torch.Tensor):
        return np.asarray(o)
    t = o.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.contiguous().numpy()


# ---------------------------------------------------------------------------------------------
# The standalone repro script of a finding
# ---------------------------------------------------------------------------------------------
_REPRO = '''

# ---- dlcfuzz: {title}
# torch.compile ({variant}: {options!r}) against eager, float64 eager as the tie-breaker.
# Inductor flags: {flags} (set below around the compile and the runs).
# Exits 1 while the bug is present, 0 once it is gone.
import sys
from collections import Counter

import torch._dynamo.utils
import torch._inductor.config
from torch._prims_common import check_significant_strides

OPTIONS = {options!r}
DEVICE = OPTIONS.get("device", "cpu")
INDUCTOR_FLAGS = OPTIONS.get("config") or {{}}
RELAYOUT = OPTIONS.get("relayout") or []  # the layout oracle: each input's values in another layout


{relayout_src}


def on_device(x):
    """x on DEVICE in the same layout (sizes, strides, storage offset)."""
    if DEVICE == "cpu":
        return x
    s = x.untyped_storage()
    base = x.new_empty(0).set_(s, 0, (s.nbytes() // x.element_size(),), (1,))
    return base.to(DEVICE).as_strided(x.shape, x.stride(), x.storage_offset())


def inputs(seed=0, sizes=None):
    return tuple(on_device(a) for a in make_inputs(seed, sizes))


def run(fn, model, args, backward):
    """(outputs, inputs after the run, gradients of the float inputs not written in place and the parameters)"""
    if not backward:
        with torch.no_grad():
            outs = fn(*args)
        return [o.detach().clone() for o in outs], [a.detach().clone() for a in args], []
    args = [a.detach().requires_grad_(True) if a.dtype.is_floating_point and i not in MUTATED else a
            for i, a in enumerate(args)]
    leaves = [a for a in args if a.requires_grad] + [p for p in model.parameters()]
    outs = fn(*args)
    g = torch.Generator().manual_seed(1234)
    terms = [(o.double() * (torch.rand(o.shape, generator=g, dtype=torch.float64) * 2 - 1).to(o.device)).sum()
             for o in outs if o.requires_grad and o.dtype.is_floating_point]
    grads = torch.autograd.grad(sum(terms), leaves, allow_unused=True) if terms else []
    return [o.detach() for o in outs], [a.detach() for a in args], [x for x in grads]


def differs(ref, res, ref64, skip=(), strides=True):
    for i, (a, b, c) in enumerate(zip(ref, res, ref64)):
        if i in skip or a is None or b is None:
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{{i}}: {{b.dtype}}{{tuple(b.shape)}}, eager {{a.dtype}}{{tuple(a.shape)}}"
        tol = {{torch.float16: 1e-3, torch.bfloat16: 1e-2}}.get(a.dtype, 1e-4)
        if a.dtype.is_floating_point and not torch._dynamo.utils.same(a, b, c, tol=tol, equal_nan=True):
            gap = (a.double() - b.double()).abs().max().item()
            return f"{{i}}: values differ, max |eager - compiled| = {{gap:.4g}}"
        if (not a.dtype.is_floating_point and not bool((a == b).all())
                and (c is None or not bool((b == c.to(b.dtype)).all()))):
            return f"{{i}}: {{int((a != b).sum())}} elements differ"
        if strides and a.numel() > 1 and not check_significant_strides(a, b, only_cuda=False)[0]:
            return f"{{i}}: strides {{b.stride()}}, eager {{a.stride()}}"
    return None


def check():
    torch.set_num_threads(OPTIONS.get("threads", 1))
    torch._inductor.config.emulate_precision_casts = True
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    backward, dynamic = OPTIONS.get("backward", False), OPTIONS.get("dynamic", False)
    model = Model().to(DEVICE)
    if OPTIONS.get("aoti"):  # AOTInductor: torch.export, compiled into a package, loaded back
        import os
        import tempfile

        package = os.path.join(tempfile.mkdtemp(), "model.pt2")
        ep = torch.export.export(model, inputs())
        fn = torch._inductor.aoti_load_package(torch._inductor.aoti_compile_and_package(ep, package_path=package))
    else:
        fn = torch.compile(model, backend=OPTIONS.get("backend", "inductor"), fullgraph=True, dynamic=dynamic or None)
    if OPTIONS.get("cached"):  # a first compile fills the FX graph cache; the one checked is served from it
        with torch.no_grad():
            fn(*inputs())
        torch._dynamo.reset()
        model = Model().to(DEVICE)
        fn = torch.compile(model, backend=OPTIONS.get("backend", "inductor"), fullgraph=True, dynamic=dynamic or None)
    calls = [(0, None)]
    if dynamic:  # a second call: the most common dim length of the inputs, one longer everywhere
        old = Counter(d for a in make_inputs() for d in a.shape if d > 1).most_common(1)
        calls += [(1, {{old[0][0]: old[0][0] + 1}})] if old else []
    for seed, sizes in calls:
        try:
            eager = Model().to(DEVICE)
            ref = run(eager, eager, inputs(seed, sizes), backward)
        except Exception as e:
            print(f"eager rejects the call at sizes {{sizes}}: {{type(e).__name__}}")
            continue
        try:  # eager in float64, the tie-breaker; none where an operator takes no float64 (quantize_per_tensor)
            m64 = Model().double().to(DEVICE)
            args64 = [on_device(a.double() if a.dtype.is_floating_point else a) for a in make_inputs(seed, sizes)]
            ref64 = run(m64, m64, args64, backward)
        except Exception:
            ref64 = tuple([None] * len(r or ()) for r in ref)
        args = inputs(seed, sizes)
        if dynamic:
            for a in args:
                torch._dynamo.maybe_mark_dynamic(a, list(range(a.dim())))
        try:
            if RELAYOUT:  # a call in the program's layouts, then one with the same values in other layouts
                state = {{k: v.detach().clone() for k, v in model.state_dict().items()}}
                run(fn, model, args, backward)
                with torch.no_grad():
                    for k, v in model.state_dict().items():
                        v.copy_(state[k])
                args = tuple(relayout(a, h) if h else a for a, h in zip(inputs(seed, sizes), RELAYOUT))
            res = run(fn, model, args, backward)
        except Exception as e:
            print(f"reproduced: {{type(e).__name__}}: {{e}}"[:600])
            return 1
        for what, k, skip in (("output", 0, NOT_COMPARED), ("input after the run", 1, ()), ("gradient", 2, ())):
            diff = differs(ref[k], res[k], ref64[k], skip, strides=not RELAYOUT)
            if diff:
                print(f"reproduced at sizes {{sizes}}: {{what}} {{diff}}")
                return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    with torch._inductor.config.patch(INDUCTOR_FLAGS):
        code = check()
    sys.exit(code)
'''


def _standalone(fn: Any) -> str:
    """The source of one of this module's torch-only functions, as a repro script can hold it: no type
    hints, torch imported by the script."""
    text = inspect.getsource(fn).replace("    import torch\n\n", "")
    return text.replace("(x: Any, how: str) -> Any:", "(x, how):")


def repro_script(source: str, variant: Variant, title: str) -> str:
    """A standalone torch script: the program (Model, make_inputs) and a check that compiles it with the
    variant's options and compares with eager (float64 as the tie-breaker).  The options' ``config`` (the
    finding's fewest Inductor flags) is patched in around the check; their ``relayout`` (the layout
    variant's other layouts) re-lays the inputs out for a second call, judged on values alone."""
    head = source.split('\n\nif __name__ == "__main__":')[0]
    flags = variant.options.get("config")
    return head + _REPRO.format(title=title.replace("\n", " "), variant=variant.name, options=variant.options,
                                flags=flags_text(flags) if isinstance(flags, dict) else "none",
                                relayout_src=_standalone(relayout))


__all__ = ["AUTOTUNE_FLAGS", "CONFIG_FLAGS", "FX_PASSES_FLAGS", "HALIDE_FLAGS", "VARIANTS", "EagerRejects",
           "TorchProgramBackend", "halide_reason", "minimal_flags", "relayout", "repro_script", "sample_config"]
