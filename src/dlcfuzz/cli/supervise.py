"""A campaign that outlives a crash of its own process.

Compilers run in worker processes, so a compiler that dies is a finding.  The campaign process itself
also calls native code: ONNX's shape inference and checker, its reference evaluator's numpy, the
trigger analysis and the reducer's graph surgery.  One assertion there (a ``std::clamp`` of ONNX's data
propagation once aborted a 30-minute campaign after 1,909 tests) ended the campaign, with what it had
found kept but the rest of its budget lost.

``dlcfuzz fuzz`` run as a program therefore runs the campaign in a child process and, where the child
dies of a crash signal, starts it again: a campaign resumes where its store says (the tests it had not
committed run again), within what is left of the budget (``DEADLINE``).  An interrupt or a termination
is passed on and ends both; a run that fails otherwise is not repeated.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

CHILD = "DLCFUZZ_CAMPAIGN_CHILD"  # set in the child: it runs the campaign itself
DEADLINE = "DLCFUZZ_CAMPAIGN_DEADLINE"  # the budget's end (seconds since the epoch), across restarts
CRASH_SIGNALS = frozenset({signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL})
MAX_RESTARTS = 3


def supervised() -> bool:
    """Whether this process is a supervised campaign's child."""
    return bool(os.environ.get(CHILD))


def remaining(budget: float | None) -> float | None:
    """A child's budget: what is left of the supervisor's (a restart does not start the clock again)."""
    end = os.environ.get(DEADLINE)
    if budget is None or not end:
        return budget
    return max(0.0, float(end) - time.time())


def supervise(command: Sequence[str], budget: float | None, out: str) -> int:
    """Runs ``command`` (the campaign, as a child) until it ends other than by a crash signal, at most
    ``MAX_RESTARTS`` times again; its exit status (128 + the signal for a signal)."""
    env = dict(os.environ, **{CHILD: "1"})
    if budget:
        env[DEADLINE] = repr(time.time() + budget)
    child: subprocess.Popen | None = None

    def forward(signum: int, frame: object) -> None:
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        for attempt in range(MAX_RESTARTS + 1):
            child = subprocess.Popen(list(command), env=env)
            try:
                rc = child.wait()
            except KeyboardInterrupt:  # the child has the same interrupt and stops on its own
                rc = child.wait()
            if rc >= 0 or signal.Signals(-rc) not in CRASH_SIGNALS:
                return rc if rc >= 0 else 128 - rc
            name = signal.Signals(-rc).name
            if attempt == MAX_RESTARTS:
                break
            print(f"dlcfuzz: the campaign process died of {name} (a crash in native code it called); resuming "
                  f"the campaign in {out} ({attempt + 1} of {MAX_RESTARTS} restarts)", file=sys.stderr, flush=True)
        print(f"dlcfuzz: error: the campaign process died of {name} {MAX_RESTARTS + 1} times; what it found is "
              f"kept in {out}: run the same command to resume", file=sys.stderr)
        return 2
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
