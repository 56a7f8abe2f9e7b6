"""TVM's high-level IR directly (HirGen, for Relax): the dlcfuzz graph written as a Relax IRModule
with global functions, dataflow and plain blocks, tuples (``export/relax.py``), then compiled
along several paths whose results must agree.

Per test, a plan drawn from the graph's seed (recorded as the artifact ``relax_plan.json``):
a function layout, a function rewrite per global function (closure / wrap / call), and a random
sequence of the Relax passes the installed TVM offers (``PASSES``).  Variants:

- ``original-generic``: the module as written, ``tvm.compile``'s default pipeline, plain llvm;
- ``optimized-generic``: the pass sequence first (the failing pass is the step of a crash);
- ``pipeline-generic``: the CPU backend's own pipeline (``relax.get_default_pipeline``);
- ``rewritten-generic``: the module after the function rewrites;
- ``original-native``: as original, for this machine's ``-mcpu`` (cross-target oracle);
  ``original-cuda`` when a GPU exists.

All must agree with each other (metamorphic / cross-target) and with the reference
(differential); one that fails where the original runs is a crash finding with its step.
``repro_source`` rebuilds the module from the TVMScript artifacts and replays the passes.
"""

from __future__ import annotations

import base64
import inspect
import json
import random
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from dlcfuzz.backends.base import Backend, Test, Variant
from dlcfuzz.backends.tvm import FLATTEN_SOURCE, _flatten, has_cuda, host_cpu

# Passes that rewrite high-level Relax, safe to run on any module we write (no arguments needed,
# numerics preserved: ToMixedPrecision and FastMathTransform change results on purpose, so they
# are not here).  ``LOWERING`` runs after LegalizeOps, in this order, with cleanups between.
HIGH_LEVEL = ("CanonicalizeBindings", "ConvertToDataflow", "ToNonDataflow", "DeadCodeElimination",
              "EliminateCommonSubexpr", "FoldConstant", "LambdaLift", "Normalize", "RemoveUnusedParameters",
              "RemoveUnusedOutputs", "InlinePrivateFunctions", "ExpandTupleArguments", "TopologicalSort",
              "ReorderPermuteDimsAfterConcat", "ReorderTakeAfterMatmul", "AdjustMatmulOrder", "CombineParallelMatmul",
              "FuseTransposeMatmul", "RemoveRedundantReshape", "DecomposeOpsForInference", "FoldBatchnormToConv2D",
              "ExpandMatmulOfSum", "ComputePrimValue", "NormalizeGlobalVar")
LOWERING = ("LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR")
CLEANUPS = ("FoldConstant", "DeadCodeElimination", "CanonicalizeBindings", "RewriteDataflowReshape",
            "EliminateCommonSubexpr")


@cache
def passes() -> dict[str, tuple[str, ...]]:
    """The passes of each group that the installed TVM has and can build without arguments."""
    from tvm import relax

    def usable(name: str) -> bool:
        fn = getattr(relax.transform, name, None)
        if fn is None:
            return False
        try:
            return all(p.default is not inspect.Parameter.empty for p in inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            return True
    return {group: tuple(n for n in names if usable(n))
            for group, names in (("high", HIGH_LEVEL), ("lowering", LOWERING), ("cleanup", CLEANUPS))}


@dataclass
class Plan:
    layout: Any  # export.relax.Layout
    rewrites: dict[str, str]  # function name -> rewrite form
    passes: list[str]
    inputs: list[str]

    def to_json(self) -> str:
        return json.dumps({"layout": self.layout.to_dict(), "rewrites": self.rewrites, "passes": self.passes,
                           "inputs": self.inputs}, indent=1)


def make_plan(g, split_rate: float = 0.6) -> Plan:
    from dlcfuzz.export.relax import REWRITES, random_layout

    rng = random.Random(f"relax-{g.meta.get('seed', 0)}")
    layout = random_layout(g, rng, split_rate)
    rewrites = {f"f{k}": rng.choice(REWRITES) for k in range(len(layout.cuts) + 1) if layout.cuts}
    groups = passes()
    seq = [rng.choice(groups["high"]) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.5:  # go on into TIR: legalize, fuse, with cleanups in between
        for name in groups["lowering"]:
            seq.append(name)
            if rng.random() < 0.4:
                seq.append(rng.choice(groups["cleanup"]))
    return Plan(layout, rewrites, seq, [v.name for v in g.inputs])


@dataclass
class Imported:
    modules: dict[str, Any]  # "original" / "rewritten" -> IRModule
    plan: Plan


class TvmRelaxBackend(Backend):
    """TVM Relax modules written by dlcfuzz, along several compilation paths and targets."""

    name = "tvm-relax"
    unused_imports: tuple[str, ...] = ("torch",)  # as TvmBackend's: tvm_ffi's DLPack exchange with torch
    package = "tvm"
    pip = "apache-tvm"

    def variants(self) -> list[Variant]:
        generic = {"kind": "llvm"}
        out = [Variant("original-generic", {"module": "original", "optimize": False, "pipeline": "default",
                                            "target": generic}),
               Variant("optimized-generic", {"module": "original", "optimize": True, "pipeline": "default",
                                             "target": generic}),
               Variant("pipeline-generic", {"module": "original", "optimize": False, "pipeline": "cpu",
                                            "target": generic}),
               Variant("rewritten-generic", {"module": "rewritten", "optimize": False, "pipeline": "default",
                                             "target": generic})]
        if host_cpu():
            out.append(Variant("original-native", {"module": "original", "optimize": False, "pipeline": "default",
                                                   "target": {"kind": "llvm", "mcpu": host_cpu()}}))
        if has_cuda():  # untested here (no GPU)
            out.append(Variant("original-cuda", {"module": "original", "optimize": False, "pipeline": "default",
                                                 "target": {"kind": "cuda", "host": {"kind": "llvm"}},
                                                 "device": "cuda"}))
        return out

    def supports(self, ops: set[str], graph=None) -> bool:
        """Without the graph, whether every operator has a Relax translation (a dtype or form Relax
        refuses is a property of a graph's call, asked when the graph is given)."""
        from dlcfuzz.export.relax import supported, untranslated

        return supported(graph) is None if graph is not None else not untranslated(ops)

    def load(self, test: Test) -> Imported:
        from dlcfuzz.export.relax import rewrite, to_relax
        from dlcfuzz.ir import Graph

        g = Graph.from_json(test.graph_json)
        plan = make_plan(g)
        self.artifact("relax_plan.json", plan.to_json())
        self.step("write the module")
        original = to_relax(g, plan.layout)
        self._script("relax_module", original)
        rewritten = original
        for fname, form in plan.rewrites.items():
            self.step(f"rewrite {fname} ({form})")
            rewritten = rewrite(rewritten, fname, form)
        self._script("relax_module_rewritten", rewritten)
        return Imported({"original": original, "rewritten": rewritten}, plan)

    def _script(self, name: str, mod) -> None:
        from dlcfuzz.export.relax import to_tvmscript

        self.step(f"print {name}")
        text, consts = to_tvmscript(mod)
        self.artifact(f"{name}.py", text)
        self.artifact(f"{name}_consts.json", json.dumps([_encode(a) for a in consts]))

    def compile(self, imported: Imported, variant: Variant):
        import tvm
        from tvm import relax

        opts = variant.options
        mod = imported.modules[opts["module"]]
        for name in imported.plan.passes if opts["optimize"] else ():
            self.step(f"pass {name}")
            mod = getattr(relax.transform, name)()(mod)
            relax.analysis.well_formed(mod)  # raises on ill-formed output: the pass's bug
        target = tvm.target.Target(dict(opts["target"]))
        self.step(f"build ({opts['pipeline']} pipeline)")
        pipeline = relax.get_default_pipeline(target) if opts["pipeline"] == "cpu" else "default"
        ex = tvm.compile(mod, target, relax_pipeline=pipeline)
        device = tvm.cuda() if target.kind.name == "cuda" else tvm.cpu()
        return relax.VirtualMachine(ex, device), device, imported.plan.inputs

    def run(self, compiled, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        import tvm

        vm, device, names = compiled
        self.step("run main")
        return _flatten(vm["main"](*[tvm.runtime.tensor(np.asarray(inputs[n], order="C"), device) for n in names]))

    def repro_source(self, variant: Variant) -> str:
        opts = variant.options
        return f'''
import base64
import json
import pathlib

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

MODULE = {opts["module"]!r}  # "original" or "rewritten" (after the function rewrites)
OPTIMIZE = {opts["optimize"]!r}  # replay the recorded pass sequence before building
PIPELINE = {opts["pipeline"]!r}  # "cpu": relax.get_default_pipeline(target); else tvm.compile's default
TARGET = {dict(opts["target"])!r}


{FLATTEN_SOURCE}

def decode(d):
    return np.frombuffer(base64.b64decode(d["data"]), dtype=d["dtype"]).reshape(d["shape"]).copy()


def run_model(model_path, inputs):
    here = pathlib.Path(model_path).parent
    plan = json.loads((here / "relax_plan.json").read_text())
    stem = "relax_module" if MODULE == "original" else "relax_module_rewritten"
    consts = [decode(d) for d in json.loads((here / f"{{stem}}_consts.json").read_text())]
    scope = {{"CONSTS": consts, "I": I, "R": R, "T": T}}
    mod = tvm.script.from_source((here / f"{{stem}}.py").read_text(), extra_vars=scope)
    for name in plan["passes"] if OPTIMIZE else []:
        print("pass", name)
        mod = getattr(relax.transform, name)()(mod)
        relax.analysis.well_formed(mod)
    target = tvm.target.Target(TARGET)
    pipeline = relax.get_default_pipeline(target) if PIPELINE == "cpu" else "default"
    ex = tvm.compile(mod, target, relax_pipeline=pipeline)
    dev = tvm.cuda() if target.kind.name == "cuda" else tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    return flatten(vm["main"](*[tvm.runtime.tensor(np.asarray(inputs[n], order="C"), dev) for n in plan["inputs"]]))
'''


def _encode(a: np.ndarray) -> dict[str, Any]:
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}
