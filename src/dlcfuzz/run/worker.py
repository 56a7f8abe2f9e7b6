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
compiling it, ``Outcome.fired``), ``("done",)``.
The child moves its own stdout to stderr at start, so compilers that print cannot corrupt the
protocol; stderr goes to a log file whose tail (including faulthandler's stack dump on a fatal
signal) is attached to crash outcomes.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
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
from typing import Any

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
        _send(proto_out, ("done",))


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


class Worker:
    """One child process serving one backend."""

    def __init__(self, backend: str, limits: PhaseLimits, log_dir: Path | None = None,
                 frontend_coverage: bool = False, pace: Pace | None = None) -> None:
        self.backend = backend
        self.limits = limits
        self.pace = pace or Pace(limits)
        self.tests_served = 0
        self.version = ""
        log_dir = log_dir or Path(tempfile.gettempdir())
        log_dir.mkdir(parents=True, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=f"worker-{backend.replace(':', '_')}-", suffix=".log", dir=log_dir)
        os.close(fd)  # reopened below as a file object; an unclosed one leaked a descriptor per worker
        self.log_path = Path(path)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 -- lives as long as the child
        env = dict(os.environ, OMP_NUM_THREADS="1", TVM_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYTHONFAULTHANDLER="1")
        # one Inductor cache for every worker: its precompiled header takes ~40 s to build once
        if frontend_coverage:
            env["DLCFUZZ_FRONTEND_COVERAGE"] = "1"
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(tempfile.gettempdir()) / "dlcfuzz-inductor-cache"))
        self.proc = subprocess.Popen([sys.executable, "-m", "dlcfuzz.run.worker", backend], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, env=env, start_new_session=True)
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
        costs its limit, which the campaign's accounting must see)."""
        started = time.monotonic()
        deadline = started + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                stack = self._stack()
                self.kill()
                return Outcome(TIMEOUT, phase, message=f"{phase} exceeded {timeout:.0f}s", traceback=stack,
                               seconds={phase: timeout})
            # poll, not select: select fails on descriptors above 1023, which a long campaign reaches
            if self._poll.poll(min(left, 0.25) * 1000):
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
                return results

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
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
        self._log.close()
        self.log_path.unlink(missing_ok=True)


class WorkerPool:
    """Persistent workers per backend, replaced when they die and recycled every ``recycle`` tests.
    The judge's ``Runner`` (``oracle/judge.py``): it runs tests through ``run``."""

    def __init__(self, limits: PhaseLimits, recycle: int = 200, log_dir: Path | None = None,
                 frontend_coverage: bool = False) -> None:
        self.limits = limits
        self.frontend_coverage = frontend_coverage  # workers measure their frontend's statement coverage
        self.recycle = recycle
        self.log_dir = log_dir
        self.pace = Pace(limits)
        self.idle: dict[str, list[Worker]] = {}
        self.deaths = 0
        self._lock = threading.Lock()  # campaign jobs share the pool from several threads

    def acquire(self, backend: str) -> Worker:
        with self._lock:
            free = self.idle.setdefault(backend, [])
            if free:
                return free.pop()
        return Worker(backend, self.limits, self.log_dir, self.frontend_coverage, self.pace)

    def release(self, w: Worker, keep: bool = True) -> None:
        """Back to the pool, unless it died, is due for recycling or is not to be kept (a fresh one)."""
        if not w.alive:
            with self._lock:
                self.deaths += 1
            w.close()
        elif not keep or w.tests_served >= self.recycle:
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
            w = (Worker(backend, self.limits, self.log_dir, self.frontend_coverage, self.pace) if fresh
                 else self.acquire(backend))
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


if __name__ == "__main__":
    # run the importable module's copy, so that pickled Outcomes name dlcfuzz.run.worker, not __main__
    from dlcfuzz.run.worker import child_main as _child_main

    _child_main(sys.argv[1])
