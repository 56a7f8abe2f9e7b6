"""Campaigns on a Ray cluster (``--executor ray``): one actor per job, the store on the driver.

Only this module imports Ray, and only ``--executor ray`` imports this module (``pip install
dlcfuzz[ray]``).

- Each actor (``TestActor``) builds its own executor half from a picklable spec (``TesterSpec`` for
  fuzzing, ``MigrationSpec`` for migration): its own worker pool, so a compiler that segfaults kills
  one worker process inside the actor, exactly as locally, never the actor.
- The driver keeps ``IN_FLIGHT`` submissions queued per actor (one running, one ready), collects
  results with ``ray.wait`` as they finish and records them itself (bundles, one store transaction
  per test, progress, reductions): the store has one writer, as in local mode.
- Shared state (the coverage keys of guided generation) is merged by the driver's ``record``
  callback, which returns the keys new to the campaign; they are appended to a log, and every
  submission to an actor carries the part of the log that actor has not seen yet.  Staleness
  bound: when an actor generates test t, its coverage holds every key recorded by the driver
  before t was submitted, plus its own earlier tests; it misses at most the keys of the tests that
  were in flight on other actors at that moment or recorded since (fewer than IN_FLIGHT x jobs + the
  results recorded while t waited in the actor's queue, itself at most IN_FLIGHT - 1 tests long).
- A lost actor (``RayActorError``: killed, its process or node died) is replaced; each test it had
  in flight is submitted again once, and a test whose second executor dies too is recorded as lost
  (``Campaign.record_lost``).  The campaign goes on.  A dead driver takes its actors with it (they
  are not detached); rerunning the command resumes from the store, which never saw uncommitted tests.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

try:
    import ray
    from ray.exceptions import RayActorError
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("--executor ray needs Ray: pip install 'dlcfuzz[ray]'") from e

IN_FLIGHT = 2  # submissions queued per actor: one running, one ready to start when it finishes


@ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)
class TestActor:
    """One job of a campaign: holds its own executor half (and through it its own compiler worker
    processes, generator and copy of the shared coverage)."""

    def __init__(self, spec: Any) -> None:
        self.runner = spec.build()

    def where(self) -> tuple[str, int]:
        return os.uname().nodename, os.getpid()

    def execute(self, item_id: int, payload: Any, shared: list) -> Any:
        if shared:
            self.runner.share(shared)
        return self.runner.execute(item_id, payload)

    def close(self) -> None:
        self.runner.close()


def connect(address: str | None) -> bool:
    """Joins the cluster at ``address`` (or starts a local Ray instance); True when this call
    started Ray (and so should shut it down).  Workers get the driver's PYTHONPATH, so a source
    checkout (or a test suite's fake backends) works on a single machine; on a cluster, every node
    needs dlcfuzz and the compilers installed."""
    if ray.is_initialized():
        return False
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths.append(os.getcwd())  # local runs find modules named relative to the working directory
    ray.init(address=address, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}})
    return True


class RayExecutor:
    def __init__(self, spec: Any, jobs: int, address: str | None = None) -> None:
        self.spec = spec
        self.jobs = jobs
        self.address = address
        self.actors: list[Any] = []  # one per slot; a replaced actor takes its slot
        self.replaced = 0  # actors that died and were replaced
        self.lost = 0  # tests recorded as lost
        self.record_seconds = 0.0  # driver time in ``record`` (bundles, store, coverage merge)
        self.recorded = 0

    def _start(self) -> Any:
        return TestActor.options(max_concurrency=1).remote(self.spec)

    def run(self, todo: Iterator[tuple[int, Any]], deadline: float | None,
            record: Callable[[Any], list], lost: Callable[[int, str], None]) -> None:
        """Runs every (id, payload) of ``todo`` until the deadline; ``record(result)`` commits one
        result on the driver and returns the shared items (coverage keys) it added; ``lost(id,
        reason)`` records a test that two executors died on."""
        started = connect(self.address)
        try:
            self._loop(todo, deadline, record, lost)
        finally:
            closing = [a.close.remote() for a in self.actors]  # their compiler workers, and the workers' logs
            ray.wait(closing, num_returns=len(closing), timeout=30)
            for a in self.actors:
                ray.kill(a)
            if started:
                ray.shutdown()

    def _loop(self, todo, deadline, record, lost) -> None:
        self.actors = [self._start() for _ in range(self.jobs)]
        try:  # a set-up that cannot build an executor (broken install, bad spec) fails here, once
            self.where = ray.get([a.where.remote() for a in self.actors])
        except RayActorError as e:
            raise RuntimeError(f"Ray actors could not start: {e}") from None
        log: list = []  # shared items merged at the driver, in order
        sent = [0] * self.jobs  # per slot: how much of the log its actor has
        inflight: dict[Any, tuple[int, Any, int, int, Any]] = {}  # ref -> (slot, actor, seq, id, payload)
        queued = [0] * self.jobs
        failures: dict[int, int] = {}  # id -> executors that died running it alone
        retry: list[tuple[int, Any]] = []  # ids whose actor died, to submit again first, each alone
        alone = [False] * self.jobs  # per slot: its actor runs a retried test, with nothing queued behind it
        seq = 0

        def submit(slot: int, item: tuple[int, Any]) -> None:
            nonlocal seq
            delta = log[sent[slot]:]
            sent[slot] = len(log)
            ref = self.actors[slot].execute.remote(item[0], item[1], delta)
            inflight[ref] = (slot, self.actors[slot], seq, *item)
            seq += 1
            queued[slot] += 1

        exhausted = False
        while True:
            out_of_budget = deadline is not None and time.monotonic() >= deadline
            for slot in range(self.jobs):
                while queued[slot] < IN_FLIGHT and not alone[slot]:
                    if retry:  # retried tests run even when out of budget (they were started in it), alone
                        if queued[slot]:
                            break
                        alone[slot] = True
                        item = retry.pop(0)
                    elif out_of_budget or exhausted:
                        break
                    else:
                        item = next(todo, None)
                        if item is None:
                            exhausted = True
                            break
                    submit(slot, item)
            if not inflight:
                return
            done, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in done:
                if ref not in inflight:  # a dead actor's submission, already handed out again
                    continue
                slot, actor = inflight[ref][:2]
                try:
                    result = ray.get(ref)
                except RayActorError as e:
                    # the actor died: submissions it finished before dying still hold their results
                    # (recorded as usual); of those left, one was running, but a result on its way when
                    # the actor died is lost too, so only a test that was alone on it counts a failure:
                    # the others run again, each alone
                    mine = sorted((v[2], r) for r, v in inflight.items() if v[1] is actor)
                    finished = []
                    for _, r in mine:
                        if r is not ref and ray.wait([r], timeout=0)[0]:
                            with contextlib.suppress(RayActorError):
                                finished.append((r, ray.get(r)))
                    for r, result in finished:
                        del inflight[r]
                        log += record(result)
                        self.recorded += 1
                    mine = [(q, r) for q, r in mine if r in inflight]
                    for _, r in mine:
                        item_id, payload = inflight.pop(r)[3:]
                        if len(mine) == 1:
                            failures[item_id] = failures.get(item_id, 0) + 1
                            if failures[item_id] >= 2:
                                self.lost += 1
                                lost(item_id, f"actor died twice ({type(e).__name__})")
                                continue
                        retry.append((item_id, payload))
                    retry.sort(key=lambda it: failures.get(it[0], 0))  # a test that killed an actor goes last
                    self._replace(slot, sent)
                    queued[slot], alone[slot] = 0, False
                    continue
                # any other error is a bug in dlcfuzz itself (ray.get re-raised it): it must not pass silently
                del inflight[ref]
                queued[slot] -= 1
                alone[slot] = False
                t0 = time.perf_counter()
                log += record(result)
                self.record_seconds += time.perf_counter() - t0
                self.recorded += 1

    def _replace(self, slot: int, sent: list[int]) -> None:
        old = self.actors[slot]
        ray.kill(old)  # no-op when it is gone already; stops it when only its node is unreachable
        self.actors[slot] = self._start()
        sent[slot] = 0  # the new actor starts from the spec's coverage: it gets the whole log
        self.replaced += 1
