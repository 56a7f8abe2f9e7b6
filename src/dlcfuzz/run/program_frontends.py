"""torch-native programs on the PyTorch frontends of TVM and OpenVINO (``tvm-torch``, ``openvino-torch``)
in a programs-only campaign: ``dlcfuzz fuzz --backends tvm-torch``, ``--backends openvino-torch``, or
beside Inductor (``--backends inductor,tvm-torch,openvino-torch``).

Each program is generated once and runs on every backend of the campaign, each judged apart against eager
torch (``oracle/program_frontend.py`` for the frontends, ``oracle/torch_program.py`` for Inductor): on
Inductor, the variants ``run/torch_campaign.plan`` draws; on a frontend, every variant of the compiler but
one of a plugin-chosen low precision.  The rest (store, bundles, program reducer) is the torch-program
campaign's (``run/torch_campaign.py``): a frontend's bug bundle holds ``program.py`` and a ``repro.py`` that
exports, converts, compiles and runs the program against eager (``backends/program_frontend.repro_tail``).

One module per compiler holds each frontend's program path (``backends/tvm.py``, ``backends/openvino.py``,
sharing ``backends/program_frontend.py``): not a backend per combination.
"""

from __future__ import annotations

import random
import time

from dlcfuzz.backends.base import Outcome, Test, Variant
from dlcfuzz.oracle import Verdict
from dlcfuzz.run.campaign import Executed
from dlcfuzz.run.store import TestRecord
from dlcfuzz.run.torch_campaign import (
    BACKEND,
    PROGRAM_BACKENDS,
    TorchProgramCampaign,
    TorchProgramTester,
    judge_program,
    plan,
)
from dlcfuzz.seeds import derive_seed

# the frontend backends that run torch-native programs (each its compiler's module's program path)
FRONTENDS = ("tvm-torch", "openvino-torch")


def frontends_only(backends: list[str]) -> bool:
    """Whether a campaign over these backends runs programs on the frontends: every backend is a frontend
    or Inductor (whose program backend runs the same programs), and at least one is a frontend."""
    return any(b in FRONTENDS for b in backends) and all(b in FRONTENDS or b in PROGRAM_BACKENDS for b in backends)


def program_backends(backends: list[str]) -> list[str]:
    """The backends that run such a campaign's programs, in order, each once (``inductor`` ->
    ``inductor-program``)."""
    return list(dict.fromkeys(PROGRAM_BACKENDS.get(b, b) for b in backends))


def frontend_variants(known: dict[str, Variant]) -> list[str]:
    """A frontend's variants a program runs on: all but those of a plugin-chosen low precision (OpenVINO's
    ``default``: bf16 on CPUs with it, beyond the program oracle's float32 tolerance)."""
    return [n for n, v in known.items() if not v.options.get("low_precision")] or list(known)[:1]


class FrontendProgramTester(TorchProgramTester):
    """The execute half of a program test on several backends: one program, each backend's variants."""

    def __init__(self, cfg, gen, pool, backends: list[str], variants: dict[str, dict[str, Variant]]) -> None:
        super().__init__(cfg, gen, pool, backends[0])
        self.compilers = list(backends)
        self.known = variants

    def execute(self, test_id: int, payload: None = None) -> Executed:
        t_start = time.perf_counter()
        seed = derive_seed(self.cfg.seed, test_id)
        graph = self.gen.generate(seed)
        graph.meta["target"] = self.backend
        runs = {b: (plan(graph, random.Random(seed), list(self.known.get(b, {})) or None) if b == BACKEND
                    else frontend_variants(self.known[b])) for b in self.compilers}  # plan may add to the meta
        test = Test(b"", graph.to_json(), {})
        t_generate = time.perf_counter() - t_start
        outcomes: dict[str, dict[str, Outcome]] = {}
        verdict = Verdict([], [])
        oracle_s = 0.0
        for backend, variants in runs.items():
            got = outcomes[backend] = self.pool.run(backend, test, variants)
            t0 = time.perf_counter()
            judged = judge_program(graph, got, backend)
            verdict.findings += judged.findings
            verdict.unsupported += judged.unsupported
            oracle_s += time.perf_counter() - t0
        compiler_s = sum(sum(o.seconds.values()) for got in outcomes.values() for o in got.values())
        eager_ok = not any(o.error_type == "EagerRejects" for got in outcomes.values() for o in got.values())
        record = TestRecord(test_id, seed, sorted({n.op for n in graph.nodes}), "eager" if eager_ok else "none",
                            eager_ok, 1, eager_ok, time.perf_counter() - t_start, t_generate, 0.0, compiler_s,
                            oracle_s)
        return Executed(record, graph, test, outcomes, verdict, None, None, [])


class FrontendProgramCampaign(TorchProgramCampaign):
    """The torch-program campaign with every program on each of ``cfg.backends`` (frontends, and
    Inductor's program backend where named)."""

    def start_backends(self) -> None:
        self._start(list(self.cfg.backends))

    @property
    def started(self) -> list[str]:
        return [b for b in self.cfg.backends if b in self.backends]

    @property
    def tester(self) -> TorchProgramTester:  # type: ignore[override]
        if self._tester is None:
            started = self.started or list(self.cfg.backends)
            self._tester = FrontendProgramTester(self.cfg, self.program_gen, self.pool, started,  # type: ignore
                                                 {b: self.variants.get(b, {}) for b in started})
        return self._tester  # type: ignore[return-value]
