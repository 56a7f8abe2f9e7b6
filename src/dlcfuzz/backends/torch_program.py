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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant
from dlcfuzz.backends.torch_compare import (
    AOT,
    DYNAMO,
    EAGER_REJECTS,
    GRAD,
    INDUCTOR,
    MUTATION,
    VALUE,
    Divergence,
    ProgramDivergence,
    ProgramVerdict,
    compare_tensors,
    is_decline,
)

VARIANTS = {
    "inductor": {"backend": "inductor"},
    "inductor-dynamic": {"backend": "inductor", "dynamic": True},
    "inductor-threads": {"backend": "inductor", "threads": 2},
    "inductor-backward": {"backend": "inductor", "backward": True},
}
# with a GPU: the same program on it, judged against eager torch on the same device (float64 there too)
CUDA_VARIANTS = {
    "inductor-cuda": {"backend": "inductor", "device": "cuda"},
    "inductor-cuda-dynamic": {"backend": "inductor", "device": "cuda", "dynamic": True},
    "inductor-cuda-backward": {"backend": "inductor", "device": "cuda", "backward": True},
}
THREADS = 1  # the default: one thread per worker (workers run side by side)


class EagerRejects(Exception):
    """Eager torch refuses the program: the generator's decline."""


EagerRejects.__name__ = EAGER_REJECTS


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
        return [Variant(n, dict(o)) for n, o in table.items()]

    def device_notes(self) -> dict[str, str]:
        from dlcfuzz.backends.inductor import cuda_reason

        why = cuda_reason()
        return {"cuda": f"{self.name}: {why}"} if why else {}

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
        source = to_program_source(Graph.from_json(test.graph_json)) if test.graph_json else test.model.decode()
        ns = build(source)
        try:
            eager, eager_inputs = run_eager(ns)
        except Exception as e:
            raise EagerRejects(f"eager torch rejects the program: {type(e).__name__}: {e}") from e
        try:
            fp64, fp64_inputs = run_eager(ns, fp64=True)
        except Exception:
            fp64, fp64_inputs = None, None
        return Program(ns, source, eager, eager_inputs, fp64, fp64_inputs, list(ns.get("NOT_COMPARED", [])),
                       bool(ns.get("BACKWARD")), bool(ns.get("DYNAMIC")))

    # -- compile: one variant, judged against eager ---------------------------------------------
    def compile(self, p: Program, variant: Variant) -> Ran:
        opts = variant.options
        verdict = ProgramVerdict()
        try:
            with threads(opts.get("threads", THREADS)):
                ran = self._variant(p, opts, opts.get("backend", "inductor"), verdict)
        except Exception as e:
            if is_decline(type(e).__name__, str(e)):
                raise
            verdict.layer = self._crash_layer(p, opts)
            self.artifact(f"verdict-{variant.name}.json", verdict.to_json())
            raise
        if ran.divergence is not None:
            ran.divergence.layer = self._divergence_layer(p, opts)
            verdict.divergence = ran.divergence.__dict__
        self.artifact(f"verdict-{variant.name}.json", verdict.to_json())
        return ran

    def _compiled(self, p: Program, backend: str, opts: dict[str, Any]) -> tuple[Any, Any]:
        import torch

        torch._dynamo.reset()
        model = p.namespace["Model"]().to(opts.get("device", "cpu"))
        fn = torch.compile(model, backend=backend, fullgraph=True, dynamic=True if opts.get("dynamic") else None)
        return model, fn

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
        """Runs ``p`` compiled with ``backend`` under the variant's options; the first divergence."""
        import torch

        ns = p.namespace
        device = opts.get("device", "cpu")
        model, fn = self._compiled(p, backend, opts)
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
        return Ran(outs, verdict, d)

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

    def _divergence_layer(self, p: Program, opts: dict[str, Any]) -> str:
        """inductor, unless aot_eager shows the divergence too (then Dynamo/AOTAutograd's, or Dynamo's
        alone where backend='eager' shows it as well)."""
        for backend, layer in (("aot_eager", AOT), ("eager", DYNAMO)):
            try:
                with threads(opts.get("threads", THREADS)):
                    again = self._variant(p, opts, backend, ProgramVerdict())
            except Exception:
                return layer if backend == "aot_eager" else AOT
            if again.divergence is None:
                return INDUCTOR if backend == "aot_eager" else AOT
        return DYNAMO

    def _crash_layer(self, p: Program, opts: dict[str, Any]) -> str:
        """Which layer a compile failure belongs to: the same program under aot_eager, then eager."""
        layer = INDUCTOR
        for backend, name in (("aot_eager", AOT), ("eager", DYNAMO)):
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
# Exits 1 while the bug is present, 0 once it is gone.
import sys
from collections import Counter

import torch._dynamo.utils
import torch._inductor.config
from torch._prims_common import check_significant_strides

OPTIONS = {options!r}
DEVICE = OPTIONS.get("device", "cpu")


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


def differs(ref, res, ref64, skip=()):
    for i, (a, b, c) in enumerate(zip(ref, res, ref64)):
        if i in skip or a is None or b is None:
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{{i}}: {{b.dtype}}{{tuple(b.shape)}}, eager {{a.dtype}}{{tuple(a.shape)}}"
        tol = {{torch.float16: 1e-3, torch.bfloat16: 1e-2}}.get(a.dtype, 1e-4)
        if a.dtype.is_floating_point and not torch._dynamo.utils.same(a, b, c, tol=tol, equal_nan=True):
            gap = (a.double() - b.double()).abs().max().item()
            return f"{{i}}: values differ, max |eager - compiled| = {{gap:.4g}}"
        if not a.dtype.is_floating_point and not bool((a == b).all()) and not bool((b == c.to(b.dtype)).all()):
            return f"{{i}}: {{int((a != b).sum())}} elements differ"
        if a.numel() > 1 and not check_significant_strides(a, b, only_cuda=False)[0]:
            return f"{{i}}: strides {{b.stride()}}, eager {{a.stride()}}"
    return None


def check():
    torch.set_num_threads(OPTIONS.get("threads", 1))
    torch._inductor.config.emulate_precision_casts = True
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    backward, dynamic = OPTIONS.get("backward", False), OPTIONS.get("dynamic", False)
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
        m64 = Model().double().to(DEVICE)
        args64 = [on_device(a.double() if a.dtype.is_floating_point else a) for a in make_inputs(seed, sizes)]
        ref64 = run(m64, m64, args64, backward)
        args = inputs(seed, sizes)
        if dynamic:
            for a in args:
                torch._dynamo.maybe_mark_dynamic(a, list(range(a.dim())))
        try:
            res = run(fn, model, args, backward)
        except Exception as e:
            print(f"reproduced: {{type(e).__name__}}: {{e}}"[:600])
            return 1
        for what, k, skip in (("output", 0, NOT_COMPARED), ("input after the run", 1, ()), ("gradient", 2, ())):
            diff = differs(ref[k], res[k], ref64[k], skip)
            if diff:
                print(f"reproduced at sizes {{sizes}}: {{what}} {{diff}}")
                return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(check())
'''


def repro_script(source: str, variant: Variant, title: str) -> str:
    """A standalone torch script: the program (Model, make_inputs) and a check that compiles it with the
    variant's options and compares with eager (float64 as the tie-breaker)."""
    head = source.split('\n\nif __name__ == "__main__":')[0]
    return head + _REPRO.format(title=title.replace("\n", " "), variant=variant.name, options=variant.options)


__all__ = ["VARIANTS", "EagerRejects", "TorchProgramBackend", "repro_script"]
