"""Fresh workers forked by a per-backend fork server (run/worker.py): the same outcomes as spawned ones, the
same isolation, and a spawn wherever forking is unsafe."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from dlcfuzz.backends.base import CRASH, OK, OOM, TIMEOUT
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from tests.test_worker import make_test


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_a_forked_fresh_worker_gives_what_a_spawned_one_gives_on_ort() -> None:
    forking, spawning = WorkerPool(PhaseLimits(), start="fork"), WorkerPool(PhaseLimits(), start="spawn")
    try:
        t = make_test(["Add", "Relu", "Neg"])
        w = forking._new_worker("ort")  # really forked, by the server
        assert w.started == "fork" and parent_of(w.proc.pid) == forking.servers["ort"].proc.pid
        assert forking.started_by["ort"].startswith("fork")
        spawned = spawning._new_worker("ort")
        assert spawned.started == "spawn" and parent_of(spawned.proc.pid) == os.getpid()
        assert (w.version, w.variants, w.device_notes) == (spawned.version, spawned.variants, spawned.device_notes)
        forking.release(w, keep=False)
        spawning.release(spawned, keep=False)
        for _ in range(2):  # the second from the same server: a new process again, untouched by the first
            got = forking.run("ort", t, ["disable_all", "all"], fresh=True)
            want = spawning.run("ort", t, ["disable_all", "all"], fresh=True)
            for v in want:
                assert (got[v].status, got[v].phase, set(got[v].seconds)) == (OK, "run", set(want[v].seconds))
                for a, b in zip(got[v].outputs, want[v].outputs, strict=True):
                    np.testing.assert_array_equal(a, b)
    finally:
        forking.close()
        spawning.close()


def test_a_segfault_in_a_forked_worker_is_a_crash_and_the_server_serves_the_next_one() -> None:
    backend = "tests.fake_backends:Segfault"
    pool = WorkerPool(PhaseLimits(), start="fork")
    try:
        bad = pool.run(backend, make_test(["Neg"]), ["basic", "all"], fresh=True)
        server = pool.servers[backend]
        assert bad["basic"].status == CRASH and bad["basic"].error_type == "SIGSEGV", bad["basic"]
        assert bad["basic"].phase == "compile" and bad["basic"].signal == 11
        assert "Fatal Python error" in bad["basic"].traceback  # faulthandler's dump, in the child's own log
        assert server.proc.poll() is None
        good = pool.run(backend, make_test(["Relu"]), ["basic"], fresh=True)
        assert good["basic"].status == OK
        assert pool.servers[backend] is server and server.proc.poll() is None  # the same server, alive
        # a pooled worker dies the same way, and is replaced by a forked one
        assert pool.run(backend, make_test(["Neg"]), ["basic"])["basic"].status == CRASH
        assert pool.deaths == 2
        assert pool.run(backend, make_test(["Relu"]), ["basic"])["basic"].status == OK
        assert pool.idle[backend][0].started == "fork"
    finally:
        pool.close()
    assert server.proc.returncode == 0  # it ended with the pool, after its workers


def test_a_forked_worker_keeps_the_timeouts_and_the_memory_cap() -> None:
    hanging = WorkerPool(PhaseLimits(compile=1.5), start="fork")
    hogging = WorkerPool(PhaseLimits(memory_mb=600), start="fork")
    try:
        hung = hanging.run("tests.fake_backends:Hang", make_test(["Relu"]), ["default"], fresh=True)["default"]
        assert hung.status == TIMEOUT and hung.phase == "compile"
        assert "in compile" in hung.traceback  # the stack, dumped by the forked child on SIGUSR1
        hog = hogging.run("tests.fake_backends:MemoryHog", make_test(["Relu"]), ["default"], fresh=True)["default"]
        assert hog.status in (OOM, CRASH), hog
        for pool in (hanging, hogging):
            assert all(by.startswith("fork") for by in pool.started_by.values()), pool.started_by
    finally:
        hanging.close()
        hogging.close()


def test_a_backend_with_a_thread_after_import_is_spawned() -> None:
    backend = "tests.fake_backends:ThreadAtStart"
    pool = WorkerPool(PhaseLimits(), start="fork")
    try:
        got = pool.run(backend, make_test(["Relu"]), ["disable_all"], fresh=True)["disable_all"]
        assert got.status == OK
        assert got.outputs[-1][0] == os.getpid()  # its parent is this process: spawned, not forked
        assert backend not in pool.servers
        assert pool.started_by[backend].startswith("spawn: 2 threads"), pool.started_by
    finally:
        pool.close()


def test_a_server_leaves_out_the_module_that_starts_a_thread_and_what_follows() -> None:
    probe = "import os, onnxruntime; print(len(os.listdir('/proc/self/task')))"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env).stdout.strip() == "1":
        pytest.skip("this onnxruntime starts no thread at import")
    backend = "tests.fake_backends:PreloadsThreads"
    pool = WorkerPool(PhaseLimits(), start="fork")
    try:
        got = pool.run(backend, make_test(["Relu"]), ["disable_all"], fresh=True)["disable_all"]
        assert got.status == OK
        assert got.outputs[-1][0] == pool.servers[backend].proc.pid  # forked
        assert pool.servers[backend].preloaded == ["onnx"]
        assert pool.started_by[backend] == "fork, preloaded: onnx"
    finally:
        pool.close()


def test_the_start_method_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLCFUZZ_WORKER_START", "spawn")
    assert WorkerPool(PhaseLimits()).start == "spawn"
    monkeypatch.setenv("DLCFUZZ_WORKER_START", "fork")
    assert WorkerPool(PhaseLimits()).start == "fork"
    assert WorkerPool(PhaseLimits(), start="spawn").start == "spawn"
    assert WorkerPool(PhaseLimits(), frontend_coverage=True)._server("ort") is None  # coverage: spawned
    with pytest.raises(ValueError):
        WorkerPool(PhaseLimits(), start="vfork")


def test_openvino_workers_are_forked_from_a_server_that_imported_openvino_without_its_telemetry() -> None:
    """OpenVINO's converter package starts a telemetry thread at import, which kept OpenVINO out of the fork
    server: each fresh worker (a reduction's confirmations, a retired spoiled worker) imported it again.  Its
    backend keeps the telemetry package out, so the server imports OpenVINO once and forks right workers."""
    pytest.importorskip("openvino", reason="openvino is not installed")
    pool = WorkerPool(PhaseLimits(), start="fork")
    try:
        got = pool.run("openvino", make_test(["Relu"]), ["f32"], fresh=True)["f32"]
        assert got.status == OK, got.message
        assert pool.started_by["openvino"] == "fork, preloaded: onnx, openvino", pool.started_by
    finally:
        pool.close()
