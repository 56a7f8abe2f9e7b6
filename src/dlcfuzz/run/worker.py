"""Isolated worker processes: every import/compile/run of a compiler under test happens here.

A worker is a child process that imports one backend and serves tests over a pipe.  Before each
phase it tells the parent which phase and variant it enters; the parent enforces that phase's
timeout and a memory cap (polling the child's resident memory), kills the child when either is
exceeded, and turns a dead child (segfault, abort, OOM kill, hang) into an outcome with the phase
and signal.  The pool replaces dead workers and recycles each one after ``recycle`` tests.

Protocol: length-prefixed pickles.  Parent -> child: ``(test, variant_names)``.  Child -> parent:
``("phase", phase, variant)``, ``("step", text)`` and ``("artifact", name, text)`` from the
backend, ``("coverage", lines)`` after the import when frontend coverage is measured,
``("result", variant, Outcome)`` per variant (with the keys the backend reported ``fired`` while
compiling it, ``Outcome.fired``), ``("done", spoiled)`` (``Backend.spoiled``: the worker is then retired).
The child moves its own stdout to stderr at start, so compilers that print cannot corrupt the
protocol; stderr goes to a log file whose tail (including faulthandler's stack dump on a fatal
signal) is attached to crash outcomes.

Starting a worker: a new interpreter (``spawn``) imports the backend and, in its first test, the compiler
(torch, TVM: seconds of CPU each time; a reduction starts a fresh worker for every crash it confirms).
With ``fork`` (the default; ``WorkerPool(start=...)`` or ``DLCFUZZ_WORKER_START=spawn|fork`` choose), a pool
keeps one *fork server* per backend: a process started like a worker that imports the backend and the
modules ``PRELOAD`` names for it, and nothing else (no variant, version or device query, no test), then forks
a child for each worker.  The child closes the server's descriptors, takes its own session, pipes and log,
reseeds numpy's global generator and runs ``child_main`` as a spawned worker does: a process that ran no
test, killed, timed and capped the same way.  The server reaps its children and writes each exit status to
a pipe of the parent's (``_ForkedProc``).  Forking is safe only in a process with one thread and no GPU
context: after each import the server counts its threads (``/proc/self/task``) and looks for libcuda; where
a module starts a thread (onnxruntime and openvino do at import), the pool restarts the server with only
the modules before it, and where the backend itself does, the backend's workers are spawned.  What a forked
worker shares with the server and not with a spawned one: the string hash seed, and the modules' state
after import.  Frontend coverage (``DLCFUZZ_FRONTEND_COVERAGE``) always spawns: a preloaded module's
import-time lines would go unmeasured.  A server holds its imports' memory for the pool's life (resident:
inductor 341 MB, TVM 196, IREE 100, ORT and OpenVINO 38).  ``benchmarks/fresh_worker.py`` measures both
methods: a fresh worker's CPU from 1.29 to 0.43 s for TVM, 8.4 to 4.6 s for Inductor, 0.54 to 0.35 s for
OpenVINO (issue 29).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from dlcfuzz.backends.base import (
    COMPILE,
    CRASH,
    ERROR,
    IMPORT,
    OK,
    OOM,
    RUN,
    SKIPPED,
    START,
    TIMEOUT,
    Outcome,
    Test,
    resolve_variant,
)


@dataclass(frozen=True)
class PhaseLimits:
    start: float = 180.0  # importing the compiler package when a worker starts
    import_: float = 60.0
    compile: float = 120.0
    run: float = 30.0
    memory_mb: int = 8192  # resident memory cap of one worker
    # the limits above are ceilings: once ``paced_after`` runs of a phase on a backend have completed, the
    # phase's limit is ``pace`` times the slowest of them, at least ``pace_floor`` seconds (0: fixed limits).
    # A TVM import takes at most 2 s here: waiting a fixed minute for each hang cost a quarter of a campaign
    pace: float = 4.0
    pace_floor: float = 20.0
    paced_after: int = 20

    def timeout(self, phase: str) -> float:
        return {START: self.start, IMPORT: self.import_, COMPILE: self.compile, RUN: self.run}[phase]


# a phase's limit counts the time its worker ran on a CPU; the clock alone calls a hang at this multiple
WALL_SLACK = 3.0

START_METHODS = ("spawn", "fork")
DEFAULT_START = "fork"  # how a pool starts workers unless told (WorkerPool(start=...), DLCFUZZ_WORKER_START)

_TORCH = ("torch", "torch._dynamo", "torch._inductor.compile_fx")
# What a backend's fork server imports before it forks workers, after the backend's own module (the first
# class along the backend's MRO named here gives them; none: the backend's module only).  Modules that a
# first test imports and that start no thread and touch no GPU at import, measured with the versions
# here (issue 29): onnxruntime starts a native thread, so it is left to the worker; openvino starts one only
# through its telemetry package, which its backend keeps out (``unused_imports``).  The server checks anyway
# and leaves out any module that starts one.
PRELOAD: dict[str, tuple[str, ...]] = {
    "dlcfuzz.backends.ort:OrtBackend": ("onnx",),
    "dlcfuzz.backends.reference:ReferenceBackend": ("onnx", "onnx.reference"),
    "dlcfuzz.backends.openvino:OpenVinoTorchBackend": ("onnx", "torch", "openvino"),
    "dlcfuzz.backends.openvino:OpenVinoBackend": ("onnx", "openvino"),
    "dlcfuzz.backends.tvm:TvmTorchBackend": ("torch", "tvm", "tvm.relax", "tvm.relax.frontend.torch"),
    "dlcfuzz.backends.tvm:TvmBackend": ("onnx", "tvm", "tvm.relax", "tvm.relax.frontend.onnx"),
    "dlcfuzz.backends.tvm_relax:TvmRelaxBackend": ("tvm", "tvm.relax", "tvm.script", "dlcfuzz.export.relax"),
    "dlcfuzz.backends.inductor:InductorBackend": ("onnx", *_TORCH, "dlcfuzz.export.torch"),
    "dlcfuzz.backends.inductor:InductorTorchBackend": (*_TORCH, "dlcfuzz.export.torch_call"),
    "dlcfuzz.backends.torch_program:TorchProgramBackend": (*_TORCH, "dlcfuzz.export.torch_program"),
    "dlcfuzz.backends.torch_library:TorchLibraryBackend": ("onnx", "torch", "dlcfuzz.export.torch_call"),
    "dlcfuzz.backends.iree:IreeBackend": ("onnx", "iree.compiler", "iree.compiler.extras.onnx_importer",
                                          "iree.runtime"),
}


def preload_modules(cls: type) -> tuple[str, ...]:
    """The modules a fork server of backend class ``cls`` imports ahead of its workers: the class's own
    ``fork_preload`` where it has one (a plugin's backend can name its compiler's modules), else ``PRELOAD``."""
    own = getattr(cls, "fork_preload", None)
    if own is not None:
        return tuple(own)
    for c in cls.__mro__:
        found = PRELOAD.get(f"{c.__module__}:{c.__qualname__}")
        if found is not None:
            return found
    return ()


def worker_env(frontend_coverage: bool = False) -> dict[str, str]:
    """The environment of a worker (and of a fork server, whose children inherit it)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TVM_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    if frontend_coverage:
        env["DLCFUZZ_FRONTEND_COVERAGE"] = "1"
    # one Inductor cache for every worker: its precompiled header takes ~40 s to build once
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(tempfile.gettempdir()) / "dlcfuzz-inductor-cache"))
    return env


class Pace:
    """The slowest completed run of each phase per backend, and the limits that follow from it
    (``PhaseLimits.pace``); shared by a pool's workers, fed by every outcome they return."""

    def __init__(self, limits: PhaseLimits) -> None:
        self.limits = limits
        self.slowest: dict[tuple[str, str], float] = {}
        self.completed: Counter = Counter()
        self._lock = threading.Lock()

    def observe(self, backend: str, outcomes: Iterable[Outcome]) -> None:
        """Counts the phases that completed (a result or an error came back; not a hang or a death)."""
        with self._lock:
            for o in outcomes:
                if o.status in (OK, ERROR):
                    for phase, seconds in o.seconds.items():
                        key = (backend, phase)
                        self.completed[key] += 1
                        self.slowest[key] = max(self.slowest.get(key, 0.0), seconds)

    def timeout(self, backend: str, phase: str) -> float:
        fixed = self.limits.timeout(phase)
        key = (backend, phase)
        if phase == START or not self.limits.pace or self.completed[key] < self.limits.paced_after:
            return fixed
        return min(fixed, max(self.limits.pace_floor, self.limits.pace * self.slowest[key]))


# ---------------------------------------------------------------------------------------------
# The child side
# ---------------------------------------------------------------------------------------------
def _send(fd: int, msg: Any) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    os.write(fd, struct.pack("<Q", len(data)))
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _recv_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv(fd: int) -> Any:
    head = _recv_exact(fd, 8)
    if head is None:
        return None
    body = _recv_exact(fd, struct.unpack("<Q", head)[0])
    return None if body is None else pickle.loads(body)


def _error(phase: str, e: BaseException, seconds: dict[str, float], step: str = "") -> Outcome:
    return Outcome(ERROR, phase, None, type(e).__name__, str(e)[:4000],
                   "".join(traceback.format_exception(e))[-8000:], None, seconds, step)


class _FrontendCoverage:
    """Statement coverage of the backend's frontend modules during one import (coverage.py)."""

    def __init__(self, fragments: tuple[str, ...]) -> None:
        import coverage

        # installed packages count as third-party code, which coverage.py measures only when named as source
        packages = [f.strip("/").replace("/", ".") for f in fragments]
        self.cov = coverage.Coverage(data_file=None, source_pkgs=packages, branch=False, config_file=False)
        self.cov.set_option("run:disable_warnings", ["module-not-measured", "no-data-collected", "module-not-imported"])
        self.fragments = fragments

    def __enter__(self) -> _FrontendCoverage:
        self.cov.erase()
        self.cov.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cov.stop()

    def lines(self) -> list[str]:
        data = self.cov.get_data()
        out = []
        for path in data.measured_files():
            short = next((path[path.index(f):] for f in self.fragments if f in path), path)
            out += [f"{short}:{n}" for n in data.lines(path) or ()]
        return sorted(out)


def child_main(backend_name: str) -> None:
    import faulthandler

    proto_out = os.dup(1)
    os.dup2(2, 1)  # anything printed goes to the log, not into the protocol
    sys.stdout = sys.stderr
    faulthandler.enable(file=sys.stderr, all_threads=False)
    # the parent asks for the stack before it kills a hung worker: where a compiler hangs is the report's
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    proto_in = 0
    from dlcfuzz.backends import load_backend

    backend = load_backend(backend_name)
    for module in backend.unused_imports:  # an import of it now fails, as if it were not installed
        sys.modules.setdefault(module, None)  # type: ignore[assignment]
    state = {"step": ""}

    def step(text: str) -> None:
        state["step"] = text
        _send(proto_out, ("step", text))

    backend.step = step
    backend.artifact = lambda name, text: _send(proto_out, ("artifact", name, text))
    fired: list[str] = []  # the current variant's compiler-side events; travel in its Outcome
    backend.fired = fired.extend
    variants = {v.name: v for v in backend.variants()}
    measure = (_FrontendCoverage(backend.frontend_modules)
               if os.environ.get("DLCFUZZ_FRONTEND_COVERAGE") and backend.frontend_modules else None)
    _send(proto_out, ("ready", backend.version(), [(v.name, v.options) for v in variants.values()],
                      backend.device_notes()))
    while True:
        msg = _recv(proto_in)
        if msg is None:
            return
        test, names = msg
        seconds: dict[str, float] = {}
        state["step"] = ""
        _send(proto_out, ("phase", IMPORT, ""))
        t0 = time.perf_counter()
        try:
            with measure or contextlib.nullcontext():
                imported = backend.load(test)
        except Exception as e:
            seconds[IMPORT] = time.perf_counter() - t0
            if measure is not None:
                _send(proto_out, ("coverage", measure.lines()))
            for name in names:
                _send(proto_out, ("result", name, _error(IMPORT, e, seconds, state["step"])))
            _send(proto_out, ("done",))
            continue
        seconds[IMPORT] = time.perf_counter() - t0
        if measure is not None:
            _send(proto_out, ("coverage", measure.lines()))
        for k, name in enumerate(names):
            times = dict(seconds) if k == 0 else {}  # the shared import counts once, with the first variant
            phase = COMPILE
            state["step"] = ""
            fired.clear()
            try:
                _send(proto_out, ("phase", COMPILE, name))
                t0 = time.perf_counter()
                compiled = backend.compile(imported, resolve_variant(backend, variants, name))
                times[COMPILE] = time.perf_counter() - t0
                phase = RUN
                _send(proto_out, ("phase", RUN, name))
                t0 = time.perf_counter()
                outputs = backend.run(compiled, test.inputs)
                times[RUN] = time.perf_counter() - t0
                result = Outcome(OK, RUN, [np.asarray(o) for o in outputs], seconds=times)
            except Exception as e:
                times[phase] = time.perf_counter() - t0
                result = _error(phase, e, times, state["step"])
            result.fired = sorted(set(fired))  # also on an error: the passes that ran before it count
            _send(proto_out, ("result", name, result))
        _send(proto_out, ("done", backend.spoiled()))


def _fork_hazard() -> str:
    """Why this process may not fork workers ("": it may): a thread besides this one (a forked child would
    hold a copy of its locks and none of it), or a CUDA context (never usable in a forked child)."""
    try:
        tasks = len(os.listdir("/proc/self/task"))
    except OSError:
        return "no /proc/self/task to count threads in"
    if tasks > 1 or threading.active_count() > 1:
        return f"{tasks} threads ({threading.active_count()} of Python)"
    with contextlib.suppress(OSError), open("/proc/self/maps") as f:
        if "libcuda.so" in f.read():
            return "the CUDA driver is loaded"
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None and torch.cuda.is_initialized():
        return "CUDA is initialized"
    return ""


def fork_server_main(sock_fd: int, backend_name: str, limit: int = -1) -> str | None:
    """A fork server (``ForkServer`` is the pool's handle): imports the backend as a worker does, then the
    first ``limit`` of its ``PRELOAD`` modules (-1: all), checking after each that it may still fork; says
    ("ready", modules) or ("unsafe", k, why) (k: how many modules were safe; -1: not even the backend), then
    forks a worker per request.  Returns the backend's name in a forked child (the caller becomes the
    worker, ``child_main``), None in the server once the pool has gone and every child has ended."""
    import importlib

    from dlcfuzz.backends import load_backend

    sock = socket.socket(fileno=sock_fd)
    backend = load_backend(backend_name)
    for module in backend.unused_imports:  # as child_main does: blocked before any preload can import it
        sys.modules.setdefault(module, None)  # type: ignore[assignment]
    modules = preload_modules(type(backend))
    modules = modules if limit < 0 else modules[:limit]
    del backend  # each worker builds its own, as a spawned one does
    hazard = _fork_hazard()
    if hazard:
        _send(sock_fd, ("unsafe", -1, f"{hazard} after loading the backend"))
        return None
    for k, module in enumerate(modules):
        try:
            importlib.import_module(module)
        except Exception as e:
            _send(sock_fd, ("unsafe", k, f"importing {module} failed: {type(e).__name__}: {e}"[:500]))
            return None
        hazard = _fork_hazard()
        if hazard:
            _send(sock_fd, ("unsafe", k, f"{hazard} after importing {module}"))
            return None
    _send(sock_fd, ("ready", list(modules)))
    return _serve_forks(sock, backend_name)


def _serve_forks(sock: socket.socket, backend_name: str) -> str | None:
    """The server's loop: a request is one byte with four descriptors (the worker's stdin, stdout, log and
    the pipe its exit status goes to); the reply is ("pid", pid).  SIGCHLD wakes the loop to reap."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a Python handler, so that the wakeup descriptor is written
    signal.set_wakeup_fd(wake_w)
    children: dict[int, int] = {}  # pid -> the descriptor its exit status is written to
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    listening = True
    while listening or children:
        for fd, _ in poller.poll(1000):
            if fd == wake_r:
                os.read(wake_r, 4096)
                continue
            try:
                data, fds, _, _ = socket.recv_fds(sock, 1, 4)
            except OSError:
                data, fds = b"", []
            if not data or len(fds) != 4:  # the pool closed the socket (or its process ended)
                for f in fds:
                    os.close(f)
                listening = False
                poller.unregister(sock.fileno())
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                sock.close()
                _become_worker(backend_name, fds, [wake_r, wake_w, *children.values()])
                return backend_name
            for f in fds[:3]:
                os.close(f)
            children[pid] = fds[3]
            try:
                _send(sock.fileno(), ("pid", pid))
            except OSError:
                listening = False
                poller.unregister(sock.fileno())
        _reap(children)
    return None


def _reap(children: dict[int, int]) -> None:
    """Writes the exit status (as ``Popen.returncode`` gives it) of each child that has ended to its pipe."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = children.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):  # the pool may have stopped listening
                os.write(fd, struct.pack("<i", os.waitstatus_to_exitcode(status)))
            os.close(fd)


def _become_worker(backend_name: str, fds: list[int], server_fds: list[int]) -> None:
    """In a forked child: what a spawned worker has, and nothing of the server's."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    stdin, stdout, log, status = fds
    for fd in (*server_fds, status):
        os.close(fd)
    os.setsid()  # its own session and process group, as start_new_session gives: killpg ends it and its tools
    for fd, target in ((stdin, 0), (stdout, 1), (log, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sys.argv = [sys.argv[0], backend_name]
    np.random.seed()  # a spawned worker's global generator is seeded from the OS; the server's is shared


# ---------------------------------------------------------------------------------------------
# The parent side
# ---------------------------------------------------------------------------------------------
class WorkerDied(Exception):
    pass


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time ``pid`` and its reaped children have used (None: no /proc to read it from)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    except (OSError, IndexError, ValueError):
        return None


def _ended_process(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie (a process that is not our child, so that waitpid cannot say)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


class _ForkedProc:
    """A worker forked by a fork server, as the parts of ``subprocess.Popen`` that ``Worker`` uses.  It is
    not our child: the server reaps it and writes its exit status (``returncode``'s convention: minus the
    signal) to the pipe ``status``."""

    LOST = 255  # the status when the server ended before it could report one (it was killed)

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes], status: int) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self._status = status
        self._server_gone = False
        self.returncode: int | None = None

    def _collect(self, timeout: float) -> None:
        if self._server_gone:
            if _ended_process(self.pid):
                self.returncode = self.LOST
                self.release()
            else:
                time.sleep(min(timeout, 0.05))
            return
        poller = select.poll()
        poller.register(self._status, select.POLLIN | select.POLLHUP)
        if not poller.poll(timeout * 1000):
            return
        data = os.read(self._status, 4)  # written at once by the server (4 bytes: a pipe delivers them whole)
        if len(data) == 4:
            self.returncode = struct.unpack("<i", data)[0]
            self.release()
        else:
            self._server_gone = True

    def poll(self) -> int | None:
        if self.returncode is None:
            self._collect(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            self._collect(left)
        return self.returncode

    def release(self) -> None:
        if self._status >= 0:
            os.close(self._status)
            self._status = -1
            self._server_gone = True  # nothing more to read


class ForkServerGone(Exception):
    """The fork server did not fork a worker (it died or hung): the worker is spawned instead."""


class ForkServerUnsafe(Exception):
    """The fork server may not fork: ``safe`` of its modules imported safely (-1: not even the backend)."""

    def __init__(self, safe: int, reason: str) -> None:
        super().__init__(reason)
        self.safe = safe
        self.reason = reason


class ForkServer:
    """The pool's handle on one backend's fork server (``fork_server_main``), started like a worker (same
    environment, own session) with the first ``limit`` of the backend's ``PRELOAD`` modules (-1: all).
    Raises ForkServerUnsafe when it may not fork; ``fork`` gives a worker, ``close`` ends the server once its
    workers have ended."""

    def __init__(self, backend: str, env: dict[str, str], log_dir: Path, timeout: float, limit: int = -1) -> None:
        self.backend = backend
        self.env = env
        self.cwd = os.getcwd()  # its workers' too (a spawned worker takes the pool's at its start)
        self.broken = False
        self._lock = threading.Lock()  # one request at a time: the campaign's jobs share the pool
        log_dir.mkdir(parents=True, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=f"forkserver-{backend.replace(':', '_')}-", suffix=".log", dir=log_dir)
        self.log_path = Path(path)
        self.sock, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dlcfuzz.run.worker", "--fork-server", str(theirs.fileno()), str(limit),
                 backend], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd, env=env,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
            os.close(fd)
        msg = self._reply(timeout)
        if msg is None or msg[0] != "ready":
            why = (f"{msg[2]}" if msg is not None and msg[0] == "unsafe" else
                   f"the fork server did not start: {self._log_tail()[-600:]}")
            self.close(wait=False)
            raise ForkServerUnsafe(msg[1] if msg is not None and msg[0] == "unsafe" else -1, why)
        self.preloaded: list[str] = msg[1]

    def _reply(self, timeout: float) -> Any:
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN | select.POLLHUP)
        if not poller.poll(timeout * 1000):
            return None
        try:
            return _recv(self.sock.fileno())
        except (OSError, EOFError, pickle.UnpicklingError):
            return None

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_bytes()[-6000:].decode(errors="replace")
        except OSError:
            return ""

    def usable(self, env: dict[str, str]) -> bool:
        return not self.broken and self.proc.poll() is None and env == self.env and os.getcwd() == self.cwd

    def fork(self, log: IO[bytes], timeout: float) -> _ForkedProc:
        """A new worker whose stderr is ``log`` (raises ForkServerGone)."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        st_r, st_w = os.pipe()
        msg = None
        try:
            with self._lock:
                if not self.broken:
                    socket.send_fds(self.sock, [b"F"], [in_r, out_w, log.fileno(), st_w])
                    msg = self._reply(timeout)
                    self.broken = msg is None or msg[0] != "pid"  # a late reply would answer the next request
        except OSError:
            self.broken = True
        finally:
            for fd in (in_r, out_w, st_w):
                os.close(fd)
        if self.broken or msg is None:
            for fd in (in_w, out_r, st_r):
                os.close(fd)
            raise ForkServerGone(f"{self.backend}'s fork server did not fork: {self._log_tail()[-300:]}")
        return _ForkedProc(msg[1], os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"), st_r)

    def close(self, wait: bool = True) -> None:
        """Closes the socket: the server ends once its workers have (``wait``: up to 10 s for that; else, or
        when it does not answer, it is killed)."""
        self.broken = True
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.proc.wait(timeout=10 if wait else 0.5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)  # its session's workers, if any, end with their pipes
            self.proc.wait()
        self.log_path.unlink(missing_ok=True)


class Worker:
    """One child process serving one backend."""

    def __init__(self, backend: str, limits: PhaseLimits, log_dir: Path | None = None,
                 frontend_coverage: bool = False, pace: Pace | None = None,
                 server: ForkServer | None = None) -> None:
        self.backend = backend
        self.limits = limits
        self.pace = pace or Pace(limits)
        self.tests_served = 0
        self.spoiled = False  # the backend said its process is unfit for more tests (``Backend.spoiled``)
        self.version = ""
        log_dir = log_dir or Path(tempfile.gettempdir())
        log_dir.mkdir(parents=True, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=f"worker-{backend.replace(':', '_')}-", suffix=".log", dir=log_dir)
        os.close(fd)  # reopened below as a file object; an unclosed one leaked a descriptor per worker
        self.log_path = Path(path)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 -- lives as long as the child
        env = worker_env(frontend_coverage)
        forked = None
        if server is not None and server.usable(env):
            with contextlib.suppress(ForkServerGone):  # a server gone bad is replaced by the pool; this one spawns
                forked = server.fork(self._log, limits.start)
        self.started = "spawn" if forked is None else "fork"  # how the child was started
        self.proc: subprocess.Popen | _ForkedProc = forked or subprocess.Popen(
            [sys.executable, "-m", "dlcfuzz.run.worker", backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, env=env, start_new_session=True)
        self._fd = self.proc.stdout.fileno()
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        msg = self._wait(START, limits.start)
        if isinstance(msg, Outcome):
            tail = msg.traceback or self.log_tail()
            self.close()
            raise WorkerDied(f"{backend} worker failed to start: {msg.message}\n{tail}")
        self.version = msg[1]
        self.variants: list[tuple[str, dict]] = msg[2]  # asked of the child: only it may import the compiler
        self.device_notes: dict[str, str] = msg[3]  # device -> why the backend has no variants on it

    # -- waiting with timeouts and the memory cap ------------------------------------------
    def _wait(self, phase: str, timeout: float) -> Any:
        """The next message, or an Outcome describing why none came (with the seconds it waited: a hang
        costs its time, which the campaign's accounting must see).  A phase hangs once it has run
        ``timeout`` seconds on the clock *and* on the CPU, or ``WALL_SLACK`` times that on the clock alone:
        on a machine shared by more workers than cores a compile gets a share of a core, and Halide's
        47-second compile passed a 120-second limit there (c43); a child that sleeps or waits on a lock
        uses no CPU, and is called by the clock alone."""
        started = time.monotonic()
        cpu_before = _cpu_seconds(self.proc.pid)
        while True:
            waited = time.monotonic() - started
            cpu = _cpu_seconds(self.proc.pid)
            used = waited if cpu is None or cpu_before is None else min(waited, cpu - cpu_before)
            if used >= timeout or waited >= WALL_SLACK * timeout:
                stack = self._stack()
                self.kill()
                return Outcome(TIMEOUT, phase, message=f"{phase} exceeded {timeout:.0f}s", traceback=stack,
                               seconds={phase: waited})
            # poll, not select: select fails on descriptors above 1023, which a long campaign reaches
            if self._poll.poll(min(timeout - used, 0.25) * 1000):
                msg = _recv(self._fd)
                if msg is None:
                    return self._ended(phase, started)
                return msg
            if self.limits.memory_mb and _rss_mb(self.proc.pid) > self.limits.memory_mb:
                self.kill()
                return Outcome(OOM, phase, message=f"resident memory above {self.limits.memory_mb} MB in {phase}",
                               seconds={phase: time.monotonic() - started})
            if self.proc.poll() is not None:
                return self._ended(phase, started)

    def _stack(self) -> str:
        """The hung child's Python stack (faulthandler's dump on SIGUSR1), as its log received it."""
        try:
            self._log.flush()
            before = self.log_path.stat().st_size
            os.kill(self.proc.pid, signal.SIGUSR1)
        except (OSError, ProcessLookupError):
            return ""
        dump = ""
        for _ in range(20):  # a C handler writes it at once, unless the child is stopped in native code
            time.sleep(0.05)
            with contextlib.suppress(OSError), open(self.log_path, "rb") as f:
                f.seek(before)
                dump = f.read(20000).decode(errors="replace")
            if "File " in dump:
                break
        return dump

    def _ended(self, phase: str, started: float) -> Outcome:
        died = self._death(phase)[1]
        died.seconds = {phase: time.monotonic() - started}
        return died

    def _death(self, phase: str) -> tuple[int, Outcome]:
        code = self.proc.wait()
        tail = self.log_tail()
        if code < 0:
            sig = -code
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            return code, Outcome(CRASH, phase, error_type=name, message=f"killed by {name} in {phase}",
                                 traceback=tail, signal=sig)
        return code, Outcome(CRASH, phase, error_type=f"exit {code}", message=f"worker exited with {code} in {phase}",
                             traceback=tail)

    def log_tail(self, n: int = 6000) -> str:
        try:
            self._log.flush()
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-n:].decode(errors="replace")

    # -- serving a test --------------------------------------------------------------------------
    def execute(self, test: Test, variants: list[str]) -> dict[str, Outcome]:
        """Outcomes per variant; the worker may be dead afterwards (check ``alive``)."""
        self.tests_served += 1
        results: dict[str, Outcome] = {}
        try:
            data = pickle.dumps((test, variants), protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            dead = self._death(START)[1]
            return dict.fromkeys(variants, dead)
        phase, current, step = START, "", ""
        artifacts: dict[str, str | bytes] = {}
        covered: list[str] = []
        while True:
            msg = self._wait(phase, self.pace.timeout(self.backend, phase))
            if isinstance(msg, Outcome):  # died, hung or ran out of memory in `phase`
                msg.step, msg.artifacts, msg.covered = step, artifacts, covered
                for v in variants:
                    if v not in results:
                        results[v] = msg if (v == current or phase == IMPORT) else Outcome(SKIPPED, phase)
                        msg = replace(msg, seconds={})  # the time waited counts once
                return results
            kind = msg[0]
            if kind == "phase":
                phase, current, step = msg[1], msg[2], ""
            elif kind == "step":
                step = msg[1]
            elif kind == "artifact":
                artifacts[msg[1]] = msg[2]
            elif kind == "coverage":
                covered = msg[1]
            elif kind == "result":
                msg[2].artifacts, msg[2].covered = artifacts, covered
                results[msg[1]] = msg[2]
            elif kind == "done":
                self.spoiled = self.spoiled or (len(msg) > 1 and bool(msg[1]))
                return results

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # a forked child not yet in its own session
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def close(self) -> None:
        """Ends the child (if alive) and closes every descriptor it held: pipes and log, dead or not."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        if isinstance(self.proc, _ForkedProc):
            self.proc.release()
        self._log.close()
        self.log_path.unlink(missing_ok=True)


class WorkerPool:
    """Persistent workers per backend, replaced when they die and recycled every ``recycle`` tests.
    The judge's ``Runner`` (``oracle/judge.py``): it runs tests through ``run``."""

    def __init__(self, limits: PhaseLimits, recycle: int = 200, log_dir: Path | None = None,
                 frontend_coverage: bool = False, start: str | None = None) -> None:
        self.limits = limits
        self.frontend_coverage = frontend_coverage  # workers measure their frontend's statement coverage
        self.recycle = recycle
        self.log_dir = log_dir
        self.pace = Pace(limits)
        self.idle: dict[str, list[Worker]] = {}
        self.deaths = 0
        self._lock = threading.Lock()  # campaign jobs share the pool from several threads
        # how new workers start (module docstring): "fork" from a per-backend fork server, or "spawn"
        self.start = start or os.environ.get("DLCFUZZ_WORKER_START") or DEFAULT_START
        if self.start not in START_METHODS:
            raise ValueError(f"start method {self.start!r}: not one of {', '.join(START_METHODS)}")
        self.servers: dict[str, ForkServer] = {}
        self.started_by: dict[str, str] = {}  # backend -> how its workers start, and why not forked
        self._spawn_only: set[str] = set()
        self._server_starts: Counter = Counter()
        self._server_locks: dict[str, threading.Lock] = {}

    MAX_SERVER_STARTS = 4  # a backend whose fork server died this often spawns its workers

    def _server(self, backend: str) -> ForkServer | None:
        """The backend's fork server, started (or replaced, if it died) on first need; None: spawn."""
        if self.start != "fork" or self.frontend_coverage:
            return None
        with self._lock:
            lock = self._server_locks.setdefault(backend, threading.Lock())
        with lock:  # another backend's server may start meanwhile
            env = worker_env()
            server = self.servers.get(backend)
            if server is not None and server.usable(env):
                return server
            if server is not None:
                server.close()
                del self.servers[backend]
            if backend in self._spawn_only:
                return None
            if self._server_starts[backend] >= self.MAX_SERVER_STARTS:
                self._spawn_only.add(backend)
                self.started_by[backend] = f"spawn: its fork server ended {self.MAX_SERVER_STARTS} times"
                return None
            self._server_starts[backend] += 1
            limit = -1
            while True:
                try:
                    server = ForkServer(backend, env, self.log_dir or Path(tempfile.gettempdir()), self.limits.start,
                                        limit)
                except ForkServerUnsafe as e:
                    if e.safe >= 0 and (limit < 0 or e.safe < limit):
                        limit = e.safe  # again, importing only the modules before the one that made it unsafe
                        continue
                    self._spawn_only.add(backend)
                    self.started_by[backend] = f"spawn: {e.reason}"
                    return None
                self.servers[backend] = server
                self.started_by[backend] = f"fork, preloaded: {', '.join(server.preloaded) or 'the backend only'}"
                return server

    def _new_worker(self, backend: str) -> Worker:
        return Worker(backend, self.limits, self.log_dir, self.frontend_coverage, self.pace, self._server(backend))

    def acquire(self, backend: str) -> Worker:
        with self._lock:
            free = self.idle.setdefault(backend, [])
            if free:
                return free.pop()
        return self._new_worker(backend)

    def release(self, w: Worker, keep: bool = True) -> None:
        """Back to the pool, unless it died, is due for recycling or is not to be kept (a fresh one)."""
        if not w.alive:
            with self._lock:
                self.deaths += 1
            w.close()
        elif not keep or w.spoiled or w.tests_served >= self.recycle:
            w.close()
        else:
            with self._lock:
                self.idle.setdefault(w.backend, []).append(w)

    def run(self, backend: str, test: Test, variants: list[str], fresh: bool = False,
            runs: int = 1) -> dict[str, Outcome]:
        """Outcomes of ``test`` on ``backend``; ``fresh`` uses a new worker, untouched by earlier tests,
        which runs the test up to ``runs`` times, until one crashes (a model can break its own process
        on a later run: OpenVINO's dynamic LRN of one channel returns an empty output, then dies)."""
        try:
            w = self._new_worker(backend) if fresh else self.acquire(backend)
        except WorkerDied as e:
            return dict.fromkeys(variants, Outcome(CRASH, START, error_type="WorkerDied", message=str(e)[:2000]))
        try:
            got = w.execute(test, variants)
            self.pace.observe(backend, got.values())
            for _ in range(runs - 1 if fresh else 0):
                # a crash, a hang or a memory blow-up ends the worker: a run after it would only say so
                if any(o.status in (CRASH, TIMEOUT, OOM) for o in got.values()) or not w.alive:
                    break
                got = w.execute(test, variants)
                self.pace.observe(backend, got.values())
            return got
        finally:
            # a fresh worker is used once: pooled, every fresh run (a reduction's last check) kept one more child
            self.release(w, keep=not fresh)

    def describe(self, backend: str) -> tuple[str, list[tuple[str, dict]]]:
        """(version, variants) of a backend, as its worker reports them (raises WorkerDied)."""
        w = self.acquire(backend)
        self.release(w)
        return w.version, w.variants

    def device_notes(self, backend: str) -> dict[str, str]:
        """device -> why the backend has no variants on it, as its worker reports (raises WorkerDied)."""
        w = self.acquire(backend)
        self.release(w)
        return w.device_notes

    def close(self) -> None:
        for ws in self.idle.values():
            for w in ws:
                w.close()
        self.idle.clear()
        for server in self.servers.values():
            server.close()
        self.servers.clear()


if __name__ == "__main__":
    # run the importable module's copy, so that pickled Outcomes name dlcfuzz.run.worker, not __main__
    from dlcfuzz.run.worker import child_main as _child_main
    from dlcfuzz.run.worker import fork_server_main as _fork_server_main

    if sys.argv[1] == "--fork-server":  # --fork-server SOCKET LIMIT BACKEND
        _name = _fork_server_main(int(sys.argv[2]), sys.argv[4], int(sys.argv[3]))
        if _name is not None:  # a forked child: a worker from here on
            _child_main(_name)
    else:
        _child_main(sys.argv[1])
