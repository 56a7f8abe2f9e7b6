"""The torch exporter is device-agnostic: every tensor a generated module makes lives on its inputs'
device, so the module runs on a GPU as on the CPU.  CI has no GPU, so each operator of the op table
runs on generated single-op graphs with its inputs and weights on the ``meta`` device, watched by a
dispatch mode: any tensor on another device (one made without ``device=``, a numpy array turned into
a tensor and never moved) is a failure that names the operator, the aten call and the source line.
Values read back to the host (``.item()``, e.g. a window's length) come from a real CPU run first, and
so do the results of the operations whose output shape depends on values (nonzero, unique: meta has
no data to compute them from), replayed as meta tensors of the recorded shapes."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

from dlcfuzz.export.torch import OPS, to_torch, unsupported
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.spec import REGISTRY, onnx_ops
from tests.helpers import ort_generator

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402 (after the importorskip)
from torch.utils._pytree import tree_leaves  # noqa: E402

ITEM = torch.ops.aten._local_scalar_dense.default  # what .item(), int(t), bool(t) dispatch to
DATA_SHAPED = {torch.ops.aten.nonzero.default, torch.ops.aten._unique2.default, torch.ops.aten.unique_dim.default}


class _HostReads(TorchDispatchMode):
    """Records the values read back to the host on a real run, and replays them on ``meta`` (which has
    no data): the same code reads them in the same order."""

    def __init__(self, replay: list | None = None) -> None:
        super().__init__()
        self.values: list = [] if replay is None else list(replay)
        self.replaying = replay is not None
        self.leaks: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.replaying and func is ITEM:
            return self.values.pop(0)
        if self.replaying and func in DATA_SHAPED:
            made = tuple(torch.empty(s, dtype=d, device="meta") for s, d in self.values.pop(0))
            out = made if len(made) > 1 else made[0]
        else:
            out = func(*args, **(kwargs or {}))
        if func is ITEM:
            self.values.append(out)
        if func in DATA_SHAPED and not self.replaying:
            self.values.append([(t.shape, t.dtype) for t in (out if isinstance(out, tuple) else (out,))])
        if self.replaying:
            devices = {t.device.type for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)}
            if devices - {"meta"}:
                where = [f"line {f.lineno}: {f.line}" for f in traceback.extract_stack()
                         if f.filename.startswith("<dlcfuzz-torch-")]
                self.leaks.append(f"{func} on {sorted(devices)} at {where[-1] if where else '?'}")
        return out


def device_leaks(module, inputs: list[np.ndarray]) -> list[str]:
    """What the module computes off its inputs' device, run with module and inputs on ``meta``."""
    args = [torch.from_numpy(np.array(a)) for a in inputs]
    record = _HostReads()
    with record, torch.no_grad():
        module(*args)
    module, args = module.to("meta"), [a.to("meta") for a in args]
    watch = _HostReads(record.values)
    try:
        with watch, torch.no_grad():
            outs = module(*args)
    except RuntimeError as e:  # torch's own check: "Tensor on device meta is not on the expected device cpu!"
        where = [f"line {f.lineno}: {f.line}" for f in traceback.extract_tb(e.__traceback__)
                 if f.filename.startswith("<dlcfuzz-torch-")]
        return [*watch.leaks, f"{e} at {where[-1] if where else '?'}"]
    watch.leaks += [f"output {i} on {o.device}" for i, o in enumerate(outs) if o.device.type != "meta"]
    return watch.leaks


# every operator of the table, through the specs that write it (the sequence operators: the composites)
SPEC_OPS = sorted(op for op in REGISTRY if set(onnx_ops(op)) <= OPS.keys())


def test_every_table_op_has_a_spec() -> None:
    assert {part for op in SPEC_OPS for part in onnx_ops(op)} == OPS.keys()


@pytest.mark.parametrize("op", SPEC_OPS)
def test_every_op_makes_its_tensors_on_the_inputs_device(op: str) -> None:
    spec = REGISTRY[op]
    checked = 0
    for opset, seeds in ((17, range(3)), (21, range(100, 102))):
        try:
            gen = ort_generator([spec], opset=max(opset, spec.since))
        except ValueError:  # ORT runs no version of it at this opset (CastLike-21)
            continue
        for seed in seeds:
            g = gen.generate(seed)
            if unsupported(g):
                continue
            rng = np.random.default_rng(seed)
            leaks = device_leaks(to_torch(g), [feed_array(rng, v) for v in g.inputs])
            assert not leaks, f"{op} opset {opset} seed {seed} {g.nodes[0].attrs}: {leaks[:3]}"
            checked += 1
    if not checked:
        pytest.skip(f"{op}: every generated graph uses a dtype torch lacks")


def test_the_check_catches_a_tensor_made_on_the_cpu() -> None:
    """The watch itself: a CPU index tensor mixed with the inputs, and a CPU output, are both caught."""

    class Leaky(torch.nn.Module):
        def forward(self, x):
            return x.index_select(0, torch.tensor([0])), torch.arange(3)

    leaks = device_leaks(Leaky(), [np.ones((2, 2), np.float32)])
    assert any("index_select" in s and "cpu" in s for s in leaks), leaks
    assert "output 1 on cpu" in leaks


def test_compile_module_moves_weights_and_turns_tf32_off() -> None:
    from dlcfuzz.export.torch import build_namespace, to_torch_source
    from tests.helpers import generated_case

    g, _, _ = next(c for c in map(lambda s: generated_case(s, ["Conv", "Add"], init_rate=1.0, dtypes=("float32",)),
                                  range(30)) if c[0].initializers)
    ns = build_namespace(to_torch_source(g))
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    module = ns["compile_module"](ns["Model"](), {"device": "meta"})
    assert {b.device.type for b in module.buffers()} == {"meta"}
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False


def test_migrated_calls_run_on_the_inputs_device() -> None:
    """A migrated torch call (a function, and a module with weights) closes over no tensor of its own."""
    from dlcfuzz.export.torch_call import build_module, decode_call, encode_call

    x = torch.randn(1, 2, 5, 5)
    calls = [encode_call("torch.nn.functional.conv2d", (x, torch.randn(3, 2, 3, 3)), {"padding": 1}),
             encode_call("torch.nn.Linear", (torch.randn(4, 5),), {}, module_kwargs={"in_features": 5,
                         "out_features": 2}, state=torch.nn.Linear(5, 2).state_dict())]
    for data, arrays in calls:
        module, names = build_module(decode_call(data))
        assert not device_leaks(module, [arrays[n] for n in names])


def test_a_variant_on_another_device_leaves_the_shared_import_on_the_cpu() -> None:
    """InductorBackend.compile moves a copy of the module for a non-CPU variant (here ``meta``, standing in
    for cuda): the CPU variants compiled from the same import afterwards still run on the CPU."""
    from dlcfuzz.backends.base import Test, Variant
    from dlcfuzz.backends.inductor import InductorBackend
    from dlcfuzz.export.onnx import to_bytes
    from tests.helpers import generated_case

    g, _, feeds = next(c for c in map(lambda s: generated_case(s, ["Conv", "Add"], init_rate=1.0,
                                                              dtypes=("float32",)), range(30)) if c[0].initializers)
    b = InductorBackend()
    imported = b.load(Test(to_bytes(g), g.to_json(), feeds))
    before = b.run(b.compile(imported, Variant("eager")), feeds)
    on_meta = b.compile(imported, Variant("meta-eager", {"device": "meta"}))
    assert {t.device.type for t in on_meta.fn.buffers()} == {"meta"} and on_meta.device == "meta"
    assert {t.device.type for t in imported.module.buffers()} == {"cpu"}
    for x, y in zip(before, b.run(b.compile(imported, Variant("eager")), feeds), strict=True):
        np.testing.assert_array_equal(x, y)


# ---------------------------------------------------------------------------------------------
# torch-native programs on a GPU (backends/torch_program.py): inputs keep their layouts there
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: torch.arange(40.0).reshape(4, 10)[:, ::3],  # step-sliced
    lambda: torch.arange(6.0).reshape(1, 6).expand(5, 6),  # expanded: stride 0
    lambda: torch.arange(60.0).reshape(3, 4, 5).permute(2, 0, 1)[1:],  # transposed and offset
    lambda: torch.arange(120.0).reshape(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
])
def test_a_program_input_keeps_its_layout_on_another_device(make):
    from dlcfuzz.backends.torch_program import to_device

    x = make()
    moved = to_device(x, "meta")  # CI has no GPU: meta takes the same path as cuda
    assert moved.device.type == "meta"
    assert (tuple(moved.shape), moved.stride(), moved.storage_offset()) == (tuple(x.shape), x.stride(),
                                                                             x.storage_offset())


def test_a_program_campaign_runs_each_chosen_variant_on_the_gpu_too():
    import random

    from dlcfuzz.ir import Graph
    from dlcfuzz.run.torch_campaign import plan

    g = Graph()
    g.meta.update(backward=True, dynamic=False)
    cpu_only = ["inductor", "inductor-dynamic", "inductor-threads", "inductor-backward"]
    with_gpu = [*cpu_only, "inductor-cuda", "inductor-cuda-dynamic", "inductor-cuda-backward"]
    assert plan(g, random.Random(0), cpu_only) == ["inductor-backward"]
    assert plan(g, random.Random(0), with_gpu) == ["inductor-backward", "inductor-cuda-backward"]


@pytest.mark.parametrize("phase, error_type, message", [
    # cuda-eager on an H200 (torch 2.11): CUDA kernels lack dtypes the CPU ones have
    ("run", "NotImplementedError", "\"baddbmm_cuda\" not implemented for 'Long'"),
    ("run", "NotImplementedError", "\"addmm_cuda\" not implemented for 'Long'"),
    # cuda-inductor on an H200: Dynamo's limit on the exporter's loop over an LSTM's sequence_lens
    ("compile", "UserError", "Consider annotating your code using torch._check*(). Could not extract specialized "
                             "integer from data-dependent expression u0 (unhinted: u0).  (Size-like symbols: none)"),
])
def test_what_torch_declines_on_a_gpu_is_a_decline_not_a_bug(phase, error_type, message):
    from dlcfuzz.oracle.unsupported import is_unsupported

    assert is_unsupported("inductor", phase, error_type, message)


def test_a_triton_compile_error_on_a_gpu_stays_a_bug():
    from dlcfuzz.oracle.unsupported import is_unsupported

    assert not is_unsupported("inductor", "compile", "InductorError",
                              "CompilationError: at 11:4:\n    tl.atomic_add(out_ptr0, tmp2)\n    ^\n"
                              "atomic_add does not support int8")
