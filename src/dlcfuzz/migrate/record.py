"""OPERA's migration mechanism: record the library API calls any pytest suite makes.

Loaded as a pytest plugin (``pytest -p dlcfuzz.migrate.record``) with ``DLCFUZZ_RECORD_OUT`` (an
instance set file) and ``DLCFUZZ_RECORD_LIBRARY=torch`` in the environment, it wraps, at
``pytest_configure``, every public function of ``torch.nn.functional`` and the public tensor
functions of the ``torch`` namespace (ATen functions and ``torch.functional``; not classes,
modules, creation functions such as ``zeros``/``tensor``/``arange``, in-place ``*_`` variants or
random operators).  A wrapper records the outermost call only (a thread-local depth counter: the
calls torch makes inside are not recorded), made while a test runs, with at least one tensor
argument and a tensor in its result: one ``Instance`` (source "pytest", provenance the test's node
id, the call spec of ``dlcfuzz.export.torch_call``, the actual result as ``expected``), committed at
once so an aborted run keeps what it recorded.  Recording never changes behaviour: its errors are
swallowed and the original result is returned.  ``pytest_unconfigure`` restores the originals.

``record(library, out, pytest_args)`` runs pytest with the plugin in a child process.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from dlcfuzz.migrate.instances import TORCH, Instance, InstanceSet, tensor_info

ENV_OUT, ENV_LIBRARY, ENV_STATS = "DLCFUZZ_RECORD_OUT", "DLCFUZZ_RECORD_LIBRARY", "DLCFUZZ_RECORD_STATS"
SUPPORTED = ("torch",)
EXIT_MEANING = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}

# torch functions that create tensors from sizes, values or data, and utilities
CREATION = frozenset({
    "tensor", "as_tensor", "asarray", "as_strided", "from_numpy", "from_file", "frombuffer", "from_dlpack",
    "zeros", "ones", "full", "arange", "range", "linspace", "logspace", "eye", "scalar_tensor", "tril_indices",
    "triu_indices", "bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window",
    "sparse_coo_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor",
    "sparse_compressed_tensor", "can_cast", "promote_types", "result_type", "numel", "to_dlpack"})
# callers whose calls are torch's machinery, not the test's: tensor printing, torch.testing (assert_close,
# OpInfo sample generation), tracing and compilation (calls made inside wrapped calls are never recorded)
INTERNAL = ("torch._tensor", "torch.testing", "torch.overrides", "torch._dynamo", "torch._inductor", "torch.fx",
            "torch._subclasses", "torch._prims", "torch._refs", "torch._decomp", "torch.jit", "torch._functorch",
            "torch.utils", "torch._higher_order_ops", "torch.export", "torch.onnx")
# not operators: torch.nn.functional's dispatch helpers
HELPERS = frozenset({"handle_torch_function", "has_torch_function", "has_torch_function_unary",
                     "has_torch_function_variadic", "boolean_dispatch", "assert_int_or_pair"})


class RecordError(Exception):
    """A recording run failed (one line, naming the cause)."""


def record(library: str, out: Path, pytest_args: list[str]) -> dict[str, Any]:
    """Runs pytest on ``pytest_args`` with the recording plugin; instances go to ``out`` (appended).

    Returns {"instances": recorded in this run, "exit": pytest's exit code, "tests": tests run,
    "outcomes": {outcome: count}, "skipped": {reason: calls not recorded}}.  Exit code 1 (failing
    tests) is a normal recording; 2-5 raise ``RecordError`` (what was recorded before stays)."""
    if library not in SUPPORTED:
        raise RecordError(f"unsupported library {library!r} (supported: {', '.join(SUPPORTED)})")
    import importlib.util

    if importlib.util.find_spec(library) is None:
        raise RecordError(f"{library} is not installed (pip install {library})")
    out = Path(out).resolve()
    store = InstanceSet(out)
    before = len(store)
    store.close()
    fd, stats_path = tempfile.mkstemp(prefix="dlcfuzz-record-", suffix=".json")
    os.close(fd)
    env = {**os.environ, ENV_OUT: str(out), ENV_LIBRARY: library, ENV_STATS: stats_path}
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "dlcfuzz.migrate.record", "-p",
                               "no:cacheprovider", "-q", *pytest_args], env=env, capture_output=True, text=True)
        try:
            stats = json.loads(Path(stats_path).read_text() or "{}")
        except (OSError, ValueError):
            stats = {}
    finally:
        Path(stats_path).unlink(missing_ok=True)
    if "instances" not in stats:  # the child died before pytest_unconfigure
        store = InstanceSet(out)
        stats["instances"] = len(store) - before
        store.close()
    code = proc.returncode
    if code in EXIT_MEANING or code < 0 or code > 5:
        meaning = EXIT_MEANING.get(code, "crashed")
        kept = f"; {stats['instances']} instances recorded before stay in {out}" if stats["instances"] else ""
        raise RecordError(f"pytest exit code {code} ({meaning}): {_first_error(proc.stdout + proc.stderr)}{kept}")
    outcomes = stats.get("outcomes", {})
    tests = sum(outcomes.values()) if "outcomes" in stats else None  # None: the child died before telling
    return {"instances": stats["instances"], "exit": code, "tests": tests, "outcomes": outcomes,
            "skipped": stats.get("skipped", {})}


def _first_error(output: str) -> str:
    """The first meaningful error line of pytest's output."""
    # section rules ("____ ERROR collecting path ____") shrink to one character each side for a long path
    lines = [re.sub(r"^[_=!]+(\s+|$)|\s+[_=!]+$", "", x.strip()) for x in output.splitlines()]
    lines = [x for x in lines if x]

    def first(pattern: str) -> str | None:
        return next((x for x in lines if re.match(pattern, x)), None)

    collecting = first(r"ERROR collecting ")
    if collecting is not None:  # with the exception it raised
        detail = first(r"E\s+\S")
        return collecting + (": " + detail[1:].strip() if detail else "")
    internal = [x for x in lines if x.startswith("INTERNALERROR>")]
    if internal:
        return internal[-1]
    for pattern in (r"\S+: error: ", r"ERROR: (?!usage:)", r"ERROR", r".*no tests ran", r".*[Ee]rror"):
        found = first(pattern)
        if found is not None:
            return found
    return lines[-1] if lines else "no output"


# -- the plugin ---------------------------------------------------------------------------------


class _Recorder:
    def __init__(self, out: Path) -> None:
        self.store = InstanceSet(out)
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.local = threading.local()
        self.nodeid = ""  # the running test ("" outside tests: nothing is recorded)
        self.seen: set[str] = set()
        self.recorded = 0
        self.skipped: Counter = Counter()
        self.outcomes: Counter = Counter()
        self.patched: list[tuple[Any, str, Any, Any]] = []  # (namespace, name, original, wrapper)

    # which functions
    def targets(self) -> list[tuple[Any, str, str]]:
        import torch
        import torch.nn.functional as F

        from dlcfuzz.migrate.sources import is_random_op

        def wanted(name: str) -> bool:
            return not (name.startswith("_") or name.endswith("_") or name in CREATION or name in HELPERS
                        or is_random_op(name))

        found = []
        for name in dir(F):
            v = getattr(F, name)
            if (wanted(name) and (inspect.isfunction(v) or inspect.isbuiltin(v))
                    and getattr(v, "__module__", None) in ("torch.nn.functional", "torch", "torch._C._nn",
                                                           "torch._C")):
                found.append((F, name, f"torch.nn.functional.{name}"))
        aten = torch._C._VariableFunctions
        for name in dir(torch):
            v = getattr(torch, name)
            if wanted(name) and ((inspect.isbuiltin(v) and getattr(aten, name, None) is v)
                                 or (inspect.isfunction(v) and v.__module__ == "torch.functional")):
                found.append((torch, name, f"torch.{name}"))
        return found

    def install(self) -> None:
        try:  # TorchScript must see a wrapper as what it wraps (built before anything is replaced)
            from torch._jit_internal import boolean_dispatched
            from torch.jit._builtins import _find_builtin, _get_builtin_table, _register_builtin

            _get_builtin_table()
        except Exception:
            boolean_dispatched, _find_builtin, _register_builtin = {}, None, None
        for namespace, name, op in self.targets():
            original = getattr(namespace, name)
            wrapper = self.wrap(original, op)
            try:
                builtin = _find_builtin(original) if _find_builtin else None
                if builtin:
                    _register_builtin(wrapper, builtin)
                elif inspect.isfunction(original):  # how torch.jit.script_if_tracing marks its wrappers
                    setattr(wrapper, "__original_fn", original)
                    setattr(wrapper, "__script_if_tracing_wrapper", True)
                if original in boolean_dispatched:
                    boolean_dispatched[wrapper] = boolean_dispatched[original]
            except Exception:
                pass
            setattr(namespace, name, wrapper)
            self.patched.append((namespace, name, original, wrapper))

    def restore(self) -> None:
        try:
            from torch._jit_internal import boolean_dispatched
            from torch.jit._builtins import _get_builtin_table

            table = _get_builtin_table()
        except Exception:
            boolean_dispatched, table = {}, {}
        for namespace, name, original, wrapper in reversed(self.patched):
            if getattr(namespace, name, None) is wrapper:
                setattr(namespace, name, original)
            table.pop(id(wrapper), None)
            boolean_dispatched.pop(wrapper, None)
        self.patched.clear()

    def wrap(self, fn: Any, op: str) -> Any:
        import torch

        compiling = getattr(torch.compiler, "is_compiling", lambda: False)
        local, recorder = self.local, self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # under torch.compile (dynamo folds is_compiling to True), while scripting or tracing, in
            # a nested call or a forked process: the original call, nothing else
            if (compiling() or torch.jit.is_scripting() or getattr(local, "depth", 0) or not recorder.nodeid
                    or os.getpid() != recorder.pid or torch._C._get_tracing_state() is not None):
                return fn(*args, **kwargs)
            local.depth = 1
            try:
                try:  # calls of torch's own machinery (printing, torch.testing) are not the test's calls
                    caller = sys._getframe(1).f_globals.get("__name__", "")
                    pending = None if caller.startswith(INTERNAL) else recorder.before(op, args, kwargs)
                except Exception:
                    pending = None
                result = fn(*args, **kwargs)
                if pending is not None:
                    try:
                        recorder.after(pending, result)
                    except Exception:
                        recorder.skipped["recording failed"] += 1
                return result
            finally:
                local.depth = 0

        return wrapper

    # what is recorded
    def before(self, op: str, args: tuple, kwargs: dict) -> tuple | None:
        """The call's instance without its result, or None (no tensor argument, seen, unsupported)."""
        import torch

        from dlcfuzz.export.torch_call import encode_call
        from dlcfuzz.migrate.sources import _tensors_in, call_params, tensor_problem

        tensors = list(_tensors_in([args, kwargs]))
        if not tensors:
            return None
        if any(type(t) not in (torch.Tensor, torch.nn.Parameter) for t in tensors):  # fake, functorch, ...
            self.skipped["tensor subclass"] += 1
            return None
        params = call_params(args, kwargs)
        key = json.dumps([op, params, [(str(t.dtype), list(t.shape)) for t in tensors]], sort_keys=True,
                         default=str)
        if key in self.seen:
            return None
        self.seen.add(key)
        why = tensor_problem([args, kwargs])
        if why:
            self.skipped[why] += 1
            return None
        spec, arrays = encode_call(op, args, kwargs)
        return op, params, spec, arrays

    def after(self, pending: tuple, result: Any) -> None:
        from dlcfuzz.export.torch_call import tensor_outputs
        from dlcfuzz.migrate.sources import tensor_problem

        op, params, spec, arrays = pending
        outputs = tensor_outputs(result)
        if not outputs:
            self.skipped["no tensor result"] += 1
            return
        why = tensor_problem(outputs)
        if why:
            self.skipped[f"result: {why}"] += 1
            return
        expected = [t.detach().cpu().resolve_conj().resolve_neg().numpy().copy() for t in outputs]
        inst = Instance(library=TORCH, op=op, source="pytest", provenance=self.nodeid, params=params,
                        tensors=[tensor_info(n, a) for n, a in arrays.items()], model=spec, inputs=arrays,
                        expected=expected)
        with self.lock:
            self.store.add(inst)  # committed now: an aborted run keeps it
            self.recorded += 1

    def stats(self) -> dict[str, Any]:
        return {"instances": self.recorded, "outcomes": dict(self.outcomes), "skipped": dict(self.skipped)}


_recorder: _Recorder | None = None


def pytest_configure(config: Any) -> None:
    global _recorder
    out, library = os.environ.get(ENV_OUT), os.environ.get(ENV_LIBRARY, TORCH)
    if not out or _recorder is not None:
        return
    if library not in SUPPORTED:
        import pytest

        raise pytest.UsageError(f"dlcfuzz record: unsupported library {library!r} (supported: "
                                f"{', '.join(SUPPORTED)})")
    _recorder = _Recorder(Path(out))
    _recorder.install()


def pytest_runtest_protocol(item: Any, nextitem: Any) -> None:
    if _recorder is not None:
        _recorder.nodeid = item.nodeid


def pytest_runtest_logreport(report: Any) -> None:
    if _recorder is None:
        return
    if report.when == "call":
        _recorder.outcomes[report.outcome] += 1
    elif report.when == "setup" and report.outcome != "passed":
        _recorder.outcomes["error" if report.failed else "skipped"] += 1
    elif report.when == "teardown":
        _recorder.nodeid = ""


def pytest_unconfigure(config: Any) -> None:
    global _recorder
    if _recorder is None:
        return
    rec, _recorder = _recorder, None
    rec.nodeid = ""
    rec.restore()
    rec.store.close()
    path = os.environ.get(ENV_STATS)
    if path:
        with contextlib.suppress(OSError):
            Path(path).write_text(json.dumps(rec.stats()))
