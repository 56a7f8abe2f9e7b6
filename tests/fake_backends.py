"""Test-only backends that misbehave on purpose, loaded by workers as ``tests.fake_backends:Name``."""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant
from dlcfuzz.backends.ort import OrtBackend
from dlcfuzz.backends.tvm_relax import TvmRelaxBackend


class Segfault(OrtBackend):
    """ORT, except that compiling a graph with a Neg node dies of a real SIGSEGV."""

    name = "segfault"

    def compile(self, imported: bytes, variant: Variant):
        if b"Neg" in imported:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().compile(imported, variant)


class HangOnNeg(OrtBackend):
    """ORT, except that compiling a graph with a Neg node never ends (a busy loop, on the CPU)."""

    name = "hang-on-neg"

    def compile(self, imported: bytes, variant: Variant):
        while b"Neg" in imported:
            pass
        return super().compile(imported, variant)


class WaitsOnNeg(OrtBackend):
    """ORT, except that compiling a graph with a Neg node first waits 2.5 s off the CPU, as a compile
    starved of its core by a loaded machine does."""

    name = "waits-on-neg"

    def compile(self, imported: bytes, variant: Variant):
        if b"Neg" in imported:
            time.sleep(2.5)
        return super().compile(imported, variant)


class Hang(Backend):
    name = "hang"

    def load(self, test: Test):
        return test

    def compile(self, imported, variant: Variant):
        time.sleep(3600)

    def run(self, compiled, inputs):
        return []

    def repro_source(self, variant: Variant) -> str:
        return "import time\n\n\ndef run_model(model_path, inputs):\n    time.sleep(3600)\n"


class Noisy(OrtBackend):
    """Prints to stdout, as compilers do."""

    name = "noisy"

    def run(self, compiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        print("some compiler chatter on stdout " * 100)
        sys.stdout.flush()
        return super().run(compiled, inputs)


class MemoryHog(Backend):
    name = "memoryhog"

    def load(self, test: Test):
        return test

    def compile(self, imported, variant: Variant):
        hog = [np.ones(2**27, np.uint8) for _ in range(64)]  # 8 GiB, touched
        return hog

    def run(self, compiled, inputs):
        return []


class Planted(OrtBackend):
    """ORT with planted bugs that its repro source replays too: compile raises for graphs with
    Relu (the message carries test-specific names), and run adds 1 to outputs when Sigmoid occurs."""

    name = "planted"
    variants_ = ("basic", "all")

    def variants(self) -> list[Variant]:
        return [v for v in super().variants() if v.name in self.variants_]

    def compile(self, imported: bytes, variant: Variant):
        if b"Relu" in imported:
            raise RuntimeError(f"planted failure in node n{len(imported) % 97} at {hex(id(imported))}")
        return super().compile(imported, variant), b"Sigmoid" in imported

    def run(self, compiled, inputs):
        sess, shift = compiled
        outs = super().run(sess, inputs)
        return [o + 1 if shift and o.dtype.kind == "f" else o for o in outs]

    def repro_source(self, variant: Variant) -> str:
        head = "def run_model(model_path, inputs):"
        return super().repro_source(variant).replace(head, '''def run_model(model_path, inputs):
    data = open(model_path, "rb").read()
    if b"Relu" in data:
        raise RuntimeError("planted failure")
    outs = _run_model(model_path, inputs)
    return [o + 1 if b"Sigmoid" in data and o.dtype.kind == "f" else o for o in outs]


def _run_model(model_path, inputs):''')


class SegfaultRepro(Segfault):
    """Segfault whose repro source segfaults too."""

    def repro_source(self, variant: Variant) -> str:
        head = "def run_model(model_path, inputs):"
        return super().repro_source(variant).replace(head, '''def run_model(model_path, inputs):
    import os, signal
    if b"Neg" in open(model_path, "rb").read():
        os.kill(os.getpid(), signal.SIGSEGV)
    return _run_model(model_path, inputs)


def _run_model(model_path, inputs):''')


class Lenient(Backend):
    """Accepts any model without validating it and returns outputs of the declared types, all 0
    in one variant and all 1 in the other: garbage the disruptive oracle must catch."""

    name = "lenient"

    def variants(self) -> list[Variant]:
        return [Variant("zeros", {"fill": 0}), Variant("ones", {"fill": 1})]

    def load(self, test: Test):
        return test.model

    def compile(self, imported, variant: Variant):
        return imported, variant.options["fill"]

    def run(self, compiled, inputs):
        namespace: dict = {}
        exec(self.repro_source(Variant("", {"fill": compiled[1]})), namespace)
        return namespace["outputs"](compiled[0])

    def repro_source(self, variant: Variant) -> str:
        return f"""
import numpy as np
import onnx
from onnx import helper


def outputs(model_bytes):
    g = onnx.load_model_from_string(model_bytes).graph
    return [np.full([d.dim_value for d in o.type.tensor_type.shape.dim], {variant.options["fill"]},
                    helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)) for o in g.output]


def run_model(model_path, inputs):
    return outputs(open(model_path, "rb").read())
"""


class PlantedRelax(TvmRelaxBackend):
    """tvm-relax whose optimized variants also run a test-only pass that adds 1 to every float
    constant: the metamorphic oracle (optimized vs original) must catch it."""

    def compile(self, imported, variant: Variant):
        if variant.options["optimize"]:
            imported = type(imported)({k: shift_constants(m) for k, m in imported.modules.items()}, imported.plan)
        return super().compile(imported, variant)

    def repro_source(self, variant: Variant) -> str:
        src = super().repro_source(variant)
        if not variant.options["optimize"]:
            return src
        loop = '    for name in plan["passes"] if OPTIMIZE else []:'
        return src.replace(loop, "    mod = shift_constants(mod)\n" + loop) + SHIFT_SOURCE


SHIFT_SOURCE = '''

def shift_constants(mod):
    import numpy as np
    import tvm
    from tvm import relax

    @relax.expr_functor.mutator
    class Shift(relax.PyExprMutator):
        def visit_generic_const_(self, c):
            a = c.value.numpy()
            return relax.const(a + 1, a.dtype.name) if a.dtype.kind == "f" else c

    out = tvm.IRModule({})
    for gv, fn in mod.functions.items():
        out[gv] = Shift().visit_expr(fn) if isinstance(fn, relax.Function) else fn
    return out
'''
_namespace: dict = {}
exec(SHIFT_SOURCE, _namespace)
shift_constants = _namespace["shift_constants"]


class StepCrash(OrtBackend):
    """ORT that announces a step, then dies of SIGSEGV in it (or raises in it, for Relu graphs)."""

    name = "stepcrash"

    def compile(self, imported: bytes, variant: Variant):
        self.step("pass Boom")
        if b"Relu" in imported:
            raise RuntimeError("boom")
        os.kill(os.getpid(), signal.SIGSEGV)


# -- test-case reduction (tests/test_reduce.py) ----------------------------------------------------
PATTERN_SOURCE = '''

def sigmoid_feeds_mul(model_bytes):
    """Whether a Sigmoid node's output is read by a Mul node."""
    import onnx

    g = onnx.load_model_from_string(model_bytes).graph
    sig = {o for n in g.node if n.op_type == "Sigmoid" for o in n.output}
    return any(n.op_type == "Mul" and sig & set(n.input) for n in g.node)


def shift_tanh(model_bytes):
    """The model with 1 added to every Tanh output."""
    import onnx
    from onnx import helper

    m = onnx.load_model_from_string(model_bytes)
    nodes = []
    for k, n in enumerate(m.graph.node):
        nodes.append(n)
        if n.op_type == "Tanh":
            out = n.output[0]
            n.output[0] = f"{out}__planted{k}"
            one = f"__planted_one{k}"
            nodes.append(helper.make_node("Constant", [], [one + "f"], value_float=1.0))
            nodes.append(helper.make_node("CastLike", [one + "f", n.output[0]], [one]))
            nodes.append(helper.make_node("Add", [n.output[0], one], [out]))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m.SerializeToString()
'''
exec(PATTERN_SOURCE, _namespace)
sigmoid_feeds_mul = _namespace["sigmoid_feeds_mul"]
shift_tanh = _namespace["shift_tanh"]


class PlantedPattern(OrtBackend):
    """ORT (level "all" only) whose compile raises when a Sigmoid's output feeds a Mul: a bug
    triggered by a two-operator pattern, for the reducer to isolate."""

    name = "plantedpattern"

    def variants(self) -> list[Variant]:
        return [v for v in super().variants() if v.name == "all"]

    def compile(self, imported: bytes, variant: Variant):
        if sigmoid_feeds_mul(imported):
            raise RuntimeError("planted: SigmoidMulFusion cannot fuse a Sigmoid into the Mul that reads it")
        return super().compile(imported, variant)

    def repro_source(self, variant: Variant) -> str:
        head = "def run_model(model_path, inputs):"
        return super().repro_source(variant).replace(head, '''def run_model(model_path, inputs):
    if sigmoid_feeds_mul(open(model_path, "rb").read()):
        raise RuntimeError("planted: SigmoidMulFusion cannot fuse a Sigmoid into the Mul that reads it")
    return _run_model(model_path, inputs)


def _run_model(model_path, inputs):''') + PATTERN_SOURCE


class PlantedTanh(OrtBackend):
    """ORT (level "all" only) that adds 1 to the output of every Tanh: a wrong value of one
    operator, for the reducer and its first-diverging-operator search."""

    name = "plantedtanh"

    def variants(self) -> list[Variant]:
        return [v for v in super().variants() if v.name == "all"]

    def compile(self, imported: bytes, variant: Variant):
        return super().compile(shift_tanh(imported), variant)

    def repro_source(self, variant: Variant) -> str:
        head = "def run_model(model_path, inputs):"
        return super().repro_source(variant).replace(head, '''def run_model(model_path, inputs):
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".onnx") as f:
        f.write(shift_tanh(open(model_path, "rb").read()))
        f.flush()
        return _run_model(f.name, inputs)


def _run_model(model_path, inputs):''') + PATTERN_SOURCE


class FlakyPattern(PlantedPattern):
    """PlantedPattern whose bug stops showing on models of at most 2 nodes once the file named by
    $DLCFUZZ_TEST_SWITCH exists: a flaky bug for the reducer's final confirmation."""

    name = "flakypattern"

    def compile(self, imported: bytes, variant: Variant):
        import onnx

        switch = os.environ.get("DLCFUZZ_TEST_SWITCH", "")
        if switch and os.path.exists(switch) and len(onnx.load_model_from_string(imported).graph.node) <= 2:
            return OrtBackend.compile(self, imported, variant)
        return super().compile(imported, variant)


class WrongSigmoid(OrtBackend):
    """ORT computing every Sigmoid as HardSigmoid (same dtypes, other values), in every variant and
    in its repro source: one wrong operator, whatever the graph computes downstream of it."""

    name = "wrongsigmoid"

    def load(self, test: Test) -> bytes:
        return super().load(Test(hard_sigmoid(test.model), test.graph_json, test.inputs))

    def repro_source(self, variant: Variant) -> str:
        head = "def run_model(model_path, inputs):"
        return super().repro_source(variant).replace(head, f'''{HARD_SIGMOID_SOURCE}

def run_model(model_path, inputs):
    path = model_path + ".hard.onnx"
    with open(model_path, "rb") as f, open(path, "wb") as g:
        g.write(hard_sigmoid(f.read()))
    return _run_model(path, inputs)


def _run_model(model_path, inputs):''')


HARD_SIGMOID_SOURCE = '''
def hard_sigmoid(model_bytes):
    import onnx

    m = onnx.load_model_from_string(model_bytes)
    for n in m.graph.node:
        if n.op_type == "Sigmoid":
            n.op_type = "HardSigmoid"
    return m.SerializeToString()
'''
exec(HARD_SIGMOID_SOURCE, _namespace)
hard_sigmoid = _namespace["hard_sigmoid"]


class Prolific(OrtBackend):
    """ORT that fails every compile with a message of its own per model: a new distinct bug in every test
    (a planted high-yield compiler, for the allocation's test)."""

    name = "prolific"

    def variants(self) -> list[Variant]:
        return [v for v in super().variants() if v.name == "basic"]

    def compile(self, imported: bytes, variant: Variant):
        import hashlib

        compiled = super().compile(imported, variant)
        # letters, not digits: signatures normalize numbers away
        word = "".join(chr(97 + b % 26) for b in hashlib.sha256(imported).digest()[:8])
        raise RuntimeError(f"planted failure {word}")
        return compiled


def reshape_reads_a_runtime_shape(model_bytes: bytes) -> bool:
    """Whether a Reshape node takes its shape from a graph input (not an initializer)."""
    import onnx

    g = onnx.load_model_from_string(model_bytes).graph
    runtime = {i.name for i in g.input} - {t.name for t in g.initializer}
    return any(n.op_type == "Reshape" and len(n.input) > 1 and n.input[1] in runtime for n in g.node)


class PlantedRuntimeShape(OrtBackend):
    """ORT (level "all" only) whose compile raises when a Reshape reads its shape at run time: a bug of
    a dynamic-shape path, for the reducer to isolate with the pinned shape input intact."""

    name = "plantedruntimeshape"

    def variants(self) -> list[Variant]:
        return [v for v in super().variants() if v.name == "all"]

    def compile(self, imported: bytes, variant: Variant):
        if reshape_reads_a_runtime_shape(imported):
            raise RuntimeError("planted: Reshape cannot take its shape at run time")
        return super().compile(imported, variant)


class EmptiesAll(OrtBackend):
    """ORT (level "all") that returns every output empty when the model holds a Tanh, as OpenVINO's
    dynamic models do when one node fails: the divergence shows first at whatever precedes the Tanh."""

    name = "emptiesall"
    spares_tanh = False  # EmptiesBeside: the Tanh's own outputs stay right

    def variants(self) -> list[Variant]:
        return [v for v in super().variants() if v.name == "all"]

    def compile(self, imported: bytes, variant: Variant):
        import onnx

        graph = onnx.load_model_from_string(imported).graph
        tanh = {o for n in graph.node if n.op_type == "Tanh" for o in n.output}
        self.emptied = [bool(tanh) and not (self.spares_tanh and o.name in tanh) for o in graph.output]
        return super().compile(imported, variant)

    def run(self, compiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        outs = super().run(compiled, inputs)
        return [np.zeros((0,) * o.ndim, o.dtype) if empty else o for o, empty in zip(outs, self.emptied, strict=True)]


class EmptiesBeside(EmptiesAll):
    """EmptiesAll, except that the Tanh's own outputs are right: the divergence needs the Tanh beside it."""

    name = "emptiesbeside"
    spares_tanh = True


class Corrupted(OrtBackend):
    """ORT whose process dies (a real SIGSEGV) of what it ran before: compiling a model with Neg after
    one with Abs (an earlier test's corruption: no model alone repeats it), and compiling a model with
    Sin for the second time (a model that breaks its own process on a later run)."""

    name = "corrupted"
    seen: list[bytes] = []  # the models this process compiled

    def compile(self, imported: bytes, variant: Variant):
        earlier, _ = list(Corrupted.seen), Corrupted.seen.append(imported)
        if (b"Neg" in imported and any(b"Abs" in m for m in earlier)) or (
                b"Sin" in imported and any(m == imported for m in earlier)):
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().compile(imported, variant)


class PlantedTanhNoSigmoid(PlantedTanh):
    """PlantedTanh's wrong Tanh, on a compiler that cannot take a graph with a Sigmoid: it agrees with the
    accused one on a reduced case, but never ran the whole test."""

    name = "plantedtanhnosigmoid"

    def supports(self, ops, graph=None) -> bool:
        return "Sigmoid" not in ops and super().supports(ops, graph)


class ParentPid(OrtBackend):
    """ORT whose outputs end with one more: the worker's parent's pid (the pool's process for a spawned
    worker, the fork server's for a forked one)."""

    name = "parentpid"

    def run(self, compiled, inputs):
        return [*super().run(compiled, inputs), np.array([os.getppid()], np.int64)]


class ThreadAtStart(ParentPid):
    """ParentPid whose construction starts a thread, as a compiler that starts its pool at import: a fork
    server may not fork it."""

    name = "threadatstart"

    def __init__(self) -> None:
        super().__init__()
        import threading

        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()


class PreloadsThreads(ParentPid):
    """ParentPid whose fork server is asked to import onnx, then onnxruntime (a module that starts a thread
    at import), then numpy."""

    name = "preloadsthreads"
    fork_preload = ("onnx", "onnxruntime", "numpy")


class RaisesOnOneThread(OrtBackend):
    """ORT whose one-thread variant (OpenVINO's option, ``INFERENCE_NUM_THREADS`` 1) raises an error at run
    time on graphs with a Neg: the process a one-thread OpenVINO raises in, where another returned the
    outputs unwritten (the bug as the campaign recorded it)."""

    name = "raises-on-one-thread"

    def variants(self) -> list[Variant]:
        basic = next(v for v in super().variants() if v.name == "basic")
        return [Variant("one-thread", {**basic.options, "config": {"INFERENCE_NUM_THREADS": 1}})]

    def compile(self, imported: bytes, variant: Variant):
        return super().compile(imported, variant), b"Neg" in imported

    def run(self, compiled, inputs):
        sess, raises = compiled
        if raises:
            raise RuntimeError("Exception from src/plugins/intel_cpu/src/node.cpp:42: shapes conflict")
        return super().run(sess, inputs)


class RoundsToBfloat16(OrtBackend):
    """ORT with a low-precision variant that, as OpenVINO's bfloat16 default does, rounds its float32 inputs
    and constants to bfloat16 (and ``low-plus-one``, which also adds 1 to its float outputs: a real bug besides)."""

    name = "rounds-to-bfloat16"

    def variants(self) -> list[Variant]:
        basic = next(v for v in super().variants() if v.name == "basic")
        return [basic, Variant("low", {**basic.options, "low_precision": True}),
                Variant("low-plus-one", {**basic.options, "low_precision": True, "plus_one": True})]

    def compile(self, imported: bytes, variant: Variant):
        from dlcfuzz.oracle.localize import rounded_initializers

        low, plus_one = variant.options.get("low_precision", False), variant.options.get("plus_one", False)
        if low:  # its constants too, as OpenVINO's bfloat16 default does
            import ml_dtypes

            imported = rounded_initializers(imported, ml_dtypes.bfloat16) or imported
        return super().compile(imported, variant), low, plus_one

    def run(self, compiled, inputs):
        import ml_dtypes

        sess, low, plus_one = compiled
        if low:
            inputs = {k: v.astype(ml_dtypes.bfloat16).astype(np.float32) if v.dtype == np.float32 else v
                      for k, v in inputs.items()}
        outs = super().run(sess, inputs)
        return [o + 1 if plus_one and o.dtype.kind == "f" else o for o in outs]
