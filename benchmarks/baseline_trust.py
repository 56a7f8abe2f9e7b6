"""Where onnx's ReferenceEvaluator cannot be the baseline: every spec's single-operator graphs run on
the reference, ONNX Runtime (no graph optimizations) and OpenVINO (CPU, f32), each in a worker
process (a compiler that crashes costs one outcome, not the sweep).

    PYTHONPATH=src python benchmarks/baseline_trust.py [--per-op 20] [--ops LSTM,GRU] [--opset 17]

A graph is *against the reference* when ORT and OpenVINO agree with each other (within
``oracle.compare`` tolerances) and the reference differs, or when the reference raises on a graph
ORT runs.  Prints, per operator, how often that happens, how often ORT and OpenVINO disagree (no
vote), how often the reference crashes, and how many bad graphs ``ReferenceBackend.supports`` still
trusts; then, per (operator, feature) -- an attribute value, an optional input present or absent, the
first input's dtype -- the bad rate with and without the feature, and the candidate rules: op-wide
where most graphs are bad, else the features whose graphs are mostly bad while the rest are not.
"""

from __future__ import annotations

import argparse
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import onnx.defs

from dlcfuzz.backends.base import OK, Outcome, Test
from dlcfuzz.backends.ort import full_profile
from dlcfuzz.backends.reference import ReferenceBackend
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.gen.isra import IsraGenerator
from dlcfuzz.ir import Graph, Node
from dlcfuzz.oracle.compare import compare
from dlcfuzz.run.worker import PhaseLimits, WorkerPool
from dlcfuzz.seeds import derive_seed
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import REGISTRY
from dlcfuzz.values import all_finite, synthesize

ATTEMPTS = 4  # input draws tried until ORT's outputs are finite (as a campaign retries on the baseline)
LIMITS = PhaseLimits(start=180, import_=30, compile=60, run=20, memory_mb=4096)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return repr(v) if isinstance(v, str) else str(v)


def features(node: Node, graph: Graph, opset: int) -> set[str]:
    """What one call is made of: each attribute's value (lists: whether they hold a value > 1 or < 0),
    attributes left at their default, optional inputs present/absent, the first input's dtype and rank."""
    out = set()
    for k, v in node.attrs.items():
        if isinstance(v, list | tuple):
            out.add(f"{k}=given")
            if any(isinstance(x, int | float) and x > 1 for x in v):
                out.add(f"{k}:some>1")
            if any(isinstance(x, int | float) and x < 0 for x in v):
                out.add(f"{k}:some<0")
        elif not isinstance(v, np.ndarray | dict):
            out.add(f"{k}={_fmt(v)}")
    try:
        sch = onnx.defs.get_schema(node.op, opset)
    except onnx.defs.SchemaError:
        sch = None
    if sch is not None:
        out |= {f"{a}=default" for a in sch.attributes if a not in node.attrs}
        for i, formal in enumerate(sch.inputs):
            if formal.option == onnx.defs.OpSchema.FormalParameterOption.Optional:
                present = i < len(node.inputs) and node.inputs[i] != ""
                out.add(f"in:{formal.name}" if present else f"in:{formal.name}=absent")
    x = graph.values[node.inputs[0]].type
    out |= {f"dtype={x.dtype}", f"rank={x.rank}"}
    return out


@dataclass
class OpStats:
    n: int = 0
    ref_crash: int = 0  # the reference raises on a graph ORT runs
    ref_wrong: int = 0  # ORT == OpenVINO != reference
    no_vote: int = 0  # ORT != OpenVINO (the reference is not judged)
    ort_err: int = 0
    ov_err: int = 0
    trusted_bad: int = 0  # bad, yet ReferenceBackend.supports accepts the graph
    feats: Counter = field(default_factory=Counter)
    bad_feats: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    @property
    def bad(self) -> int:
        return self.ref_crash + self.ref_wrong


def _one(pool: WorkerPool, backend: str, variant: str, test: Test) -> Outcome:
    return pool.run(backend, test, [variant])[variant]


def judge(pool: WorkerPool, g: Graph, seed: int) -> tuple[str, str]:
    """(verdict, detail): 'ok', 'ref_crash', 'ref_wrong', 'no_vote', 'ort_err', 'ov_err'."""
    model, gj = to_bytes(g), g.to_json()
    ort = None
    for attempt in range(ATTEMPTS):
        test = Test(model, gj, synthesize(g, np.random.default_rng([seed, attempt]), attempt))
        ort = _one(pool, "ort", "disable_all", test)
        if ort.status != OK or all_finite(ort.outputs):
            break
    if ort.status != OK:
        return "ort_err", ort.message[:120]
    ref = _one(pool, "reference", "default", test)
    ov = _one(pool, "openvino", "f32", test)
    if ov.status != OK:
        return ("ref_crash" if ref.status != OK else "ov_err"), (ref.message if ref.status != OK else ov.message)[:120]
    if (m := compare(ort.outputs, ov.outputs)) is not None:
        return "no_vote", m.detail
    if ref.status != OK:
        return "ref_crash", f"{ref.error_type}: {ref.message[:120]}"
    if (m := compare(ort.outputs, ref.outputs)) is not None:
        return "ref_wrong", m.detail
    return "ok", ""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-op", type=int, default=20, help="graphs per operator")
    p.add_argument("--ops", default="", help="comma-separated operators (default: every spec)")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--min-bad", type=int, default=2, help="bad graphs a candidate feature needs")
    a = p.parse_args()
    # (the evaluator has no operator of another domain: the contrib specs are ORT's to judge)
    names = a.ops.split(",") if a.ops else sorted(op for op in REGISTRY if not REGISTRY[op].domain)
    limits = GenOptions(opset=a.opset)
    profile = full_profile(a.opset, tuple(REGISTRY))
    ref = ReferenceBackend()
    pool = WorkerPool(LIMITS, recycle=400)
    stats: dict[str, OpStats] = {}
    t0 = time.perf_counter()
    try:
        for op in names:
            try:
                gen = IsraGenerator([REGISTRY[op]], limits, (1, 1), profile)
            except ValueError:
                print(f"{op}: not available at opset {a.opset} for ORT")
                continue
            st = stats[op] = OpStats()
            for i in range(a.per_op):
                seed = derive_seed(a.opset, zlib.crc32(op.encode()) * 100_000 + i)
                try:
                    g = gen.generate(seed)
                except Exception as e:  # a spec that cannot be instantiated here: not the baseline's fault
                    print(f"{op}: generation failed: {e}")
                    break
                node = next(n for n in g.nodes if n.op == op)
                verdict, detail = judge(pool, g, seed)
                st.n += 1
                if verdict in ("ort_err", "ov_err", "no_vote"):
                    setattr(st, verdict, getattr(st, verdict) + 1)
                    continue
                feats = features(node, g, a.opset)
                st.feats.update(feats)
                if verdict == "ok":
                    continue
                setattr(st, verdict, getattr(st, verdict) + 1)
                st.bad_feats.update(feats)
                trusted = ref.supports({n.op for n in g.nodes}, g)
                st.trusted_bad += trusted
                if len(st.examples) < (6 if trusted else 2):
                    attrs = {k: v for k, v in node.attrs.items() if not isinstance(v, np.ndarray)}
                    ins = [None if not x else g.values[x].data.tolist() if g.values[x].data is not None
                           and g.values[x].data.size <= 8 else (g.values[x].type.shape, g.values[x].type.dtype)
                           for x in node.inputs]
                    st.examples.append(f"{'TRUSTED ' if trusted else ''}{verdict}: {detail} | {attrs} {ins}")
    finally:
        pool.close()
    report(stats, a.min_bad, time.perf_counter() - t0)


def report(stats: dict[str, OpStats], min_bad: int, seconds: float) -> None:
    print(f"\n{'operator':<26}{'graphs':>7}{'judged':>7}{'ref wrong':>10}{'ref crash':>10}{'bad %':>7}"
          f"{'no vote':>8}{'ORT err':>8}{'OV err':>7}{'trusted bad':>12}")
    tot = Counter()
    for op, s in stats.items():
        judged = s.n - s.no_vote - s.ort_err - s.ov_err
        for k in ("n", "ref_wrong", "ref_crash", "no_vote", "ort_err", "ov_err", "trusted_bad"):
            tot[k] += getattr(s, k)
        tot["judged"] += judged
        if s.bad or s.no_vote or s.ort_err or s.ov_err:
            print(f"{op:<26}{s.n:>7}{judged:>7}{s.ref_wrong:>10}{s.ref_crash:>10}"
                  f"{100 * s.bad / max(judged, 1):>6.0f}%{s.no_vote:>8}{s.ort_err:>8}{s.ov_err:>7}{s.trusted_bad:>12}")
    print(f"{'all (' + str(len(stats)) + ' ops)':<26}{tot['n']:>7}{tot['judged']:>7}{tot['ref_wrong']:>10}"
          f"{tot['ref_crash']:>10}{100 * (tot['ref_wrong'] + tot['ref_crash']) / max(tot['judged'], 1):>6.1f}%"
          f"{tot['no_vote']:>8}{tot['ort_err']:>8}{tot['ov_err']:>7}{tot['trusted_bad']:>12}   ({seconds:.0f}s)")
    print("\ncandidate rules (feature: bad/with, bad/without)")
    for op, s in stats.items():
        judged = s.n - s.no_vote - s.ort_err - s.ov_err
        if not s.bad:
            continue
        if s.bad >= 0.8 * judged:
            print(f"  {op}: op-wide ({s.bad}/{judged} bad)")
        else:
            cands = []
            for f, nb in s.bad_feats.items():
                nf = s.feats[f]
                rest_bad, rest = s.bad - nb, judged - nf
                if rest and nb >= min(min_bad, s.bad) and nb / nf >= 0.5 and rest_bad / rest <= 0.25:
                    cands.append((-(nb / nf), -nb, f, nb, nf, rest_bad, rest))
            cands.sort()
            shown = ", ".join(f"{f} {nb}/{nf} vs {rb}/{r}" for _, _, f, nb, nf, rb, r in cands[:6])
            print(f"  {op}: {s.bad}/{judged} bad; {shown or 'no single feature separates them'}")
        for e in s.examples:
            print(f"      {e[:400]}")


if __name__ == "__main__":
    main()
