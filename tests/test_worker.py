"""Isolation: real segfaults, hangs and memory blow-ups in workers become outcomes, never the end."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dlcfuzz.backends.base import CRASH, OK, OOM, RUN, SKIPPED, TIMEOUT, Outcome, Test
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.run.worker import WALL_SLACK, Pace, PhaseLimits, WorkerPool
from dlcfuzz.spec import REGISTRY
from tests.helpers import ort_generator


def make_test(ops: list[str], seed: int = 0) -> Test:
    g = ort_generator([REGISTRY[o] for o in ops], op_range=(3, 3), dtypes=("float32",)).generate(seed)
    rng = np.random.default_rng(seed)
    return Test(to_bytes(g), g.to_json(), {v.name: feed_array(rng, v) for v in g.inputs})


def test_ort_in_a_worker_matches_in_process() -> None:
    import onnxruntime as ort

    pool = WorkerPool(PhaseLimits())
    try:
        t = make_test(["Add", "Relu", "Neg"])
        got = pool.run("ort", t, ["disable_all", "all"])
        assert {o.status for o in got.values()} == {OK}
        want = ort.InferenceSession(t.model, providers=["CPUExecutionProvider"]).run(None, t.inputs)
        for o in got.values():
            for a, b in zip(o.outputs, want, strict=True):
                np.testing.assert_array_equal(a, b)
        assert set(got["disable_all"].seconds) == {"import", "compile", "run"}
        assert set(got["all"].seconds) == {"compile", "run"}  # the shared import is counted once
    finally:
        pool.close()


def test_segfault_is_an_outcome_and_the_pool_recovers() -> None:
    pool = WorkerPool(PhaseLimits())
    try:
        bad = pool.run("tests.fake_backends:Segfault", make_test(["Neg"]), ["basic", "all"])
        assert bad["basic"].status == CRASH and bad["basic"].error_type == "SIGSEGV"
        assert bad["basic"].phase == "compile"
        assert "Fatal Python error" in bad["basic"].traceback  # faulthandler's dump from the child
        assert bad["all"].status == SKIPPED
        assert pool.deaths == 1
        good = pool.run("tests.fake_backends:Segfault", make_test(["Relu"]), ["basic"])
        assert good["basic"].status == OK
    finally:
        pool.close()


def test_hanging_compile_is_stopped_at_its_timeout() -> None:
    import time

    pool = WorkerPool(PhaseLimits(compile=1.5))
    try:
        t0 = time.monotonic()
        got = pool.run("tests.fake_backends:Hang", make_test(["Relu"]), ["default"])
        assert got["default"].status == TIMEOUT and got["default"].phase == "compile"
        assert time.monotonic() - t0 < 10
        # where it hung: the child's Python stack, taken before it was killed
        assert "fake_backends.py" in got["default"].traceback and "in compile" in got["default"].traceback
        # confirming in a fresh worker (several runs, as a crash is): the hang is what comes back, not the
        # dead worker's next run
        again = pool.run("tests.fake_backends:Hang", make_test(["Relu"]), ["default"], fresh=True, runs=3)
        assert again["default"].status == TIMEOUT
    finally:
        pool.close()


def test_a_hang_is_called_at_the_backends_own_pace() -> None:
    """Once a backend completed enough compiles, a hang is called at a multiple of the slowest (or the
    floor), not at the fixed limit; the time waited is the outcome's, so the campaign counts it."""
    import time

    limits = PhaseLimits(compile=600, pace=4.0, pace_floor=2.0, paced_after=3)
    pool = WorkerPool(limits)
    try:
        for seed in range(3):
            assert pool.run("tests.fake_backends:HangOnNeg", make_test(["Relu"], seed), ["all"])["all"].status == OK
        t0 = time.monotonic()
        got = pool.run("tests.fake_backends:HangOnNeg", make_test(["Neg"]), ["all"])["all"]
        waited = time.monotonic() - t0
        assert got.status == TIMEOUT and got.phase == "compile"
        assert 2.0 <= waited < 15  # the floor (ORT compiles these in milliseconds), not 600 s
        assert 2.0 <= got.seconds["compile"] <= waited
    finally:
        pool.close()


def test_a_phase_is_limited_by_its_time_on_the_cpu_and_by_a_multiple_on_the_clock() -> None:
    """A compile that waits off the CPU past its limit (a starved one) is no hang; one that sleeps for
    good is called at WALL_SLACK times the limit; one that spins at the limit."""
    import time

    pool = WorkerPool(PhaseLimits(compile=1.5))
    try:
        assert pool.run("tests.fake_backends:WaitsOnNeg", make_test(["Neg"]), ["all"])["all"].status == OK
        t0 = time.monotonic()
        assert pool.run("tests.fake_backends:HangOnNeg", make_test(["Neg"]), ["all"])["all"].status == TIMEOUT
        assert time.monotonic() - t0 < 1.5 * WALL_SLACK
        t0 = time.monotonic()
        assert pool.run("tests.fake_backends:Hang", make_test(["Relu"]), ["default"])["default"].status == TIMEOUT
        assert 1.5 * WALL_SLACK <= time.monotonic() - t0 < 15
    finally:
        pool.close()


def test_the_paced_limit_follows_the_slowest_completed_run() -> None:
    """By hand: limits 4 x slowest, floor 20 s, ceiling the fixed limit, fixed until 2 runs completed;
    hangs and deaths do not count as completed."""
    limits = PhaseLimits(import_=60, compile=120, pace=4.0, pace_floor=20.0, paced_after=2)
    pace = Pace(limits)
    pace.observe("tvm", [Outcome(OK, RUN, seconds={"import": 1.0, "compile": 10.0})])
    assert pace.timeout("tvm", "import") == 60  # one completed import: not yet paced
    pace.observe("tvm", [Outcome(TIMEOUT, "import", seconds={"import": 60.0})])
    assert pace.timeout("tvm", "import") == 60  # a hang is no completed run
    pace.observe("tvm", [Outcome("error", "compile", seconds={"import": 2.0, "compile": 40.0})])
    assert pace.timeout("tvm", "import") == 20  # 4 x 2 s is below the floor
    assert pace.timeout("tvm", "compile") == 120  # 4 x 40 s is above the ceiling
    assert pace.timeout("iree", "import") == 60  # another backend's pace is its own
    assert Pace(replace(limits, pace=0)).timeout("tvm", "import") == 60


def test_memory_cap_kills_the_worker() -> None:
    pool = WorkerPool(PhaseLimits(memory_mb=600))
    try:
        got = pool.run("tests.fake_backends:MemoryHog", make_test(["Relu"]), ["default"])
        assert got["default"].status in (OOM, CRASH), got["default"]
    finally:
        pool.close()


def test_stdout_chatter_does_not_break_the_protocol() -> None:
    pool = WorkerPool(PhaseLimits())
    try:
        got = pool.run("tests.fake_backends:Noisy", make_test(["Add"]), ["basic"])
        assert got["basic"].status == OK and got["basic"].phase == RUN
    finally:
        pool.close()


def test_workers_that_come_and_go_leave_no_descriptor_open() -> None:
    """A 30-minute campaign (3,454 tests, reductions in fresh workers) died with "filedescriptor out of
    range in select()": each worker leaked its log file's descriptor, and a dead one its pipes.  Fresh
    workers, living and dying, now give back every descriptor."""
    import os

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    pool = WorkerPool(PhaseLimits())
    try:
        pool.run("ort", make_test(["Neg"]), ["disable_all"])  # the first one's imports may open files for good
        # and each backend's fork server keeps one socket for the pool's life
        pool.run("tests.fake_backends:Segfault", make_test(["Relu"]), ["basic"])
        before = open_fds()
        for seed in range(4):
            pool.run("ort", make_test(["Neg"], seed), ["disable_all"], fresh=True)
            pool.run("tests.fake_backends:Segfault", make_test(["Neg"], seed), ["basic"], fresh=True)
        assert open_fds() <= before, (before, open_fds())
    finally:
        pool.close()


def test_a_crash_is_confirmed_by_the_model_alone_run_again_in_a_fresh_worker() -> None:
    """Corrupted dies on a Neg model after an Abs model (what an earlier test did: a fresh worker running
    the Neg model alone never dies, so the crash is unconfirmed, counted apart from the compiler's bugs),
    and on a Sin model's second run (confirmed: a fresh worker dies too once it runs the model again)."""
    from dlcfuzz.oracle import UNCONFIRMED, run_confirmed

    backend = "tests.fake_backends:Corrupted"
    pool = WorkerPool(PhaseLimits())
    try:
        assert pool.run(backend, make_test(["Abs"]), ["basic"])["basic"].status == OK
        got, late, _ = run_confirmed(pool, backend, make_test(["Neg"]), ["basic"])
        assert got["basic"].status == OK
        assert [(f.kind, f.category) for f in late] == [("unconfirmed", UNCONFIRMED)]
        sin = make_test(["Sin"])
        assert pool.run(backend, sin, ["basic"])["basic"].status == OK  # its first run
        got, late, _ = run_confirmed(pool, backend, sin, ["basic"])
        assert got["basic"].status == CRASH and not late
    finally:
        pool.close()
