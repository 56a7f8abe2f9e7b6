"""What every compiler under test provides.

A backend turns a test (an ONNX model, plus the dlcfuzz graph for backends that build their
own model) into outputs in three phases, each run inside an isolated worker process:

    imported = backend.load(test)                    # phase "import": the frontend
    compiled = backend.compile(imported, variant)    # phase "compile", once per variant
    outputs  = backend.run(compiled, inputs)         # phase "run"

A *variant* is one optimization setting or target of the same compiler (e.g. ORT's
optimization levels, TVM's opt level x CPU target).  Variants of one backend must agree with
each other (the metamorphic oracle) and with the reference (the differential oracle).

``repro_source(variant)`` returns Python source that defines ``run_model(model_path, inputs)``
using only that compiler's package, for the standalone ``repro.py`` of a bug bundle; files the
backend handed over with ``artifact`` lie next to the model.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Variant:
    name: str
    options: dict[str, Any] = field(default_factory=dict)


OK, ERROR, CRASH, TIMEOUT, OOM, SKIPPED = "ok", "error", "crash", "timeout", "oom", "skipped"
IMPORT, COMPILE, RUN, START = "import", "compile", "run", "start"


@dataclass
class Outcome:
    """The result of one backend variant on one test."""

    status: str
    phase: str = ""
    outputs: list[np.ndarray] | None = None
    error_type: str = ""
    message: str = ""
    traceback: str = ""
    signal: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # time inside the compiler, per phase
    step: str = ""  # the last step the backend announced within the phase (e.g. the pass running)
    artifacts: dict[str, str | bytes] = field(default_factory=dict)  # files the backend made for this test
    covered: list[str] = field(default_factory=list)  # frontend statements the import ran ("file:line"), if measured
    # compiler-side events of this variant's compile (a pass that changed the module, a rewrite that
    # matched), e.g. "tvm:pass:FoldConstant": feedback for generation, cheap next to the compile itself
    fired: list[str] = field(default_factory=list)


@dataclass
class Test:
    """What a worker needs to run one test."""

    __test__ = False  # not a pytest test class

    model: bytes  # the ONNX model
    graph_json: str  # the dlcfuzz graph (for backends that build their own model, e.g. torch)
    inputs: dict[str, np.ndarray]


WITHOUT = " without "  # a variant with passes turned off: "basic without ort:transformer:ConstantFolding"


def without(variant: str, keys: list[str]) -> str:
    return f"{variant}{WITHOUT}{','.join(keys)}"


UNSET = " unset "  # a variant with one option left to the compiler's default: "f32 unset config.INFERENCE_NUM_THREADS"


def unset(variant: str, path: tuple[str, ...]) -> str:
    return f"{variant}{UNSET}{'.'.join(path)}"


def unset_option(options: Mapping[str, Any], path: Sequence[str]) -> dict[str, Any]:
    """``options`` without the (nested) option at ``path``."""
    out = dict(options)
    if len(path) == 1:
        out.pop(path[0], None)
    else:
        out[path[0]] = unset_option(out.get(path[0], {}), path[1:])
    return out


def resolve_variant(backend: Backend, variants: dict[str, Variant], name: str) -> Variant:
    """A variant by name, including one with passes turned off (``without``) and one with an option left
    to the compiler's default (``unset``); KeyError if unknown."""
    base, sep, path = name.partition(UNSET)
    if sep:
        return Variant(name, unset_option(variants[base].options, path.split(".")))
    base, sep, keys = name.partition(WITHOUT)
    if not sep:
        return variants[name]
    got = backend.disabling(variants[base], [k for k in keys.split(",") if k])
    if got is None:
        raise KeyError(f"{backend.name} cannot turn passes off: {name}")
    return got


class Backend:
    name: str = ""
    package: str = ""  # the importable module whose absence disables the backend
    pip: str = ""  # what to pip install to enable it
    # the compiler itself type-checks the model dlcfuzz hands it (an ONNX frontend, Relax's BlockBuilder);
    # False where dlcfuzz's own exporter writes the compiler's model, so an invalid graph tests nothing
    checks_models: bool = True
    # where the frontend's Python code lives (path fragments), for statement coverage of the import phase
    frontend_modules: tuple[str, ...] = ()
    # whether compile() measures what it reports to ``fired`` (off: to measure what measuring costs)
    report_fired: bool = True
    # optional packages that the compiler imports when they are installed but that this backend never
    # uses: its worker keeps them out (each fresh worker, and a reduction confirms in one, pays the import)
    unused_imports: tuple[str, ...] = ()

    def available(self) -> tuple[bool, str]:
        """(True, "") or (False, one-line reason), without importing the compiler."""
        if self.package and importlib.util.find_spec(self.package) is None:
            return False, f"{self.name}: package '{self.package}' is not installed (pip install {self.pip})"
        return True, ""

    def version(self) -> str:
        from importlib.metadata import version

        return version(self.pip.split("==")[0]) if self.pip else "?"

    def variants(self) -> list[Variant]:
        """This machine's variants; one that runs elsewhere than the CPU says so in
        ``options["device"]`` (see ``backends.devices``)."""
        return [Variant("default")]

    def device_notes(self) -> dict[str, str]:
        """device -> why this backend has no variants on it here (e.g. a CPU-only build), for the
        devices it could use; asked in the worker, as variants() is."""
        return {}

    def supports(self, ops: set[str], graph: Any = None) -> bool:
        """Whether the backend can be tried on a graph with these operator types (and, when
        given, this dlcfuzz Graph) at all.

        Without a graph the question is about the operators alone: False only when one of them is
        refused whatever graph it is in (no translation, outside the backend's profile), so that the
        operators a campaign generates from (the CLI's ``_supported_specs``) keep every one some graph could
        reach the backend with.  Checks that need types, attributes or the graph's form are the
        graph's, never a reason to refuse for want of one: ``supports(ops, g)`` implies
        ``supports(ops)`` (``tests/test_e2e.py`` checks it for every built-in backend).  The
        reference is the one exception: it is a baseline to trust, not a compiler under test, and
        without the graph it refuses the operators whose features it could not check."""
        return True

    # Set by the worker: ``step(text)`` announces a step within the current phase (a pass), so that
    # a crash or an error in it names it; ``artifact(name, text)`` hands over a file for the bug
    # bundle (e.g. the module as TVMScript); ``fired(keys)`` reports compiler-side events of the
    # variant being compiled (``Outcome.fired``).  All do nothing outside a worker.
    def step(self, text: str) -> None:
        pass

    def artifact(self, name: str, text: str | bytes) -> None:
        pass

    def fired(self, keys: list[str]) -> None:
        pass

    def disabling(self, variant: Variant, keys: list[str]) -> Variant | None:
        """``variant`` with the passes behind the ``fired`` keys ``keys`` turned off, named
        ``without(variant.name, keys)``; None where this backend cannot turn passes off.  Finding the
        pass whose removal makes a divergence vanish names the bug's cause (``oracle/blame.py``).  Pure:
        the driver asks it too, without the compiler."""
        return None

    def load(self, test: Test) -> Any:
        raise NotImplementedError

    def compile(self, imported: Any, variant: Variant) -> Any:
        raise NotImplementedError

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    def spoiled(self) -> bool:
        """Whether this process is unfit for more tests after its last run: a compiler that swallowed an
        error, returned unwritten outputs and left its memory corrupt (a later run of OpenVINO's CPU plugin
        then segfaults).  Its worker serves no further test: the pool starts a new one."""
        return False

    def repro_source(self, variant: Variant) -> str:
        raise NotImplementedError
