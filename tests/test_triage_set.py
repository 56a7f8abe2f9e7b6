"""The labelled triage set (tests/data/triage/): cases from dlcfuzz's own campaigns, each labelled by
hand with its class and one line of evidence (README.md there), judged again on the real compilers.

- real: the accused backend has a compiler finding;
- duplicate: its compiler finding has the signature, or (the cases being reduced) the root cause, of
  the case it duplicates;
- decline: the accused backend declined it (counted as unsupported), no finding;
- baseline-wrong: no compiler finding for the accused backend (a baseline issue, or a baseline that
  is not trusted for the graph, so that the accused backend agrees with the one that judges it);
- exporter-wrong: an exporter finding, no compiler finding, for the accused backend;
- noise: findings counted as rounding noise only;
- invalid-input: no compiler finding (ONNX leaves the result undefined)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import Graph
from dlcfuzz.oracle import COMPILER, EXPORTER, NOISE
from dlcfuzz.run.campaign import Campaign, CampaignConfig, Evaluation
from dlcfuzz.run.dedup import graph_root_cause, graph_signature
from dlcfuzz.spec import REGISTRY

TRIAGE = Path(__file__).resolve().parent / "data" / "triage"
CASES = sorted(p.name for p in TRIAGE.iterdir() if (p / "label.json").is_file()) if TRIAGE.is_dir() else []
LABEL = {c: json.loads((TRIAGE / c / "label.json").read_text()) for c in CASES}


def _case(name: str) -> tuple[Graph, Test]:
    graph = Graph.from_json((TRIAGE / name / "graph.json").read_text())
    with np.load(TRIAGE / name / "inputs.npz") as z:
        inputs = {k: z[k] for k in z.files}
    return graph, Test(to_bytes(graph), graph.to_json(), inputs)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory):
    wanted = sorted({LABEL[c]["backend"] for c in CASES})
    missing = [b for b in wanted if not load_backend(b).available()[0]]
    if missing:
        pytest.skip(f"compilers of the triage set not installed: {', '.join(missing)}")
    # untargeted: a compiler's profile would skip the labelled declines instead of running them
    cfg = CampaignConfig(tmp_path_factory.mktemp("triage"), wanted, list(REGISTRY.values()), targeted=False)
    c = Campaign(cfg)
    c.start_backends()
    yield c
    c.pool.close()
    c.store.close()


_judged: dict[str, tuple[Graph, Evaluation]] = {}


def judged(campaign: Campaign, name: str) -> tuple[Graph, Evaluation]:
    if name not in _judged:
        graph, test = _case(name)
        _judged[name] = graph, campaign.tester.evaluate(graph, test)
    return _judged[name]


def test_the_set_covers_every_class() -> None:
    assert {LABEL[c]["class"] for c in CASES} >= {"real", "duplicate", "decline", "baseline-wrong"}
    for c in CASES:
        assert LABEL[c]["evidence"].strip(), c


@pytest.mark.parametrize("name", CASES)
def test_each_case_is_classified_as_labelled(campaign: Campaign, name: str) -> None:
    label = LABEL[name]
    backend = label["backend"]
    graph, e = judged(campaign, name)
    mine = [f for f in e.verdict.findings if f.backend == backend]
    compiler = [f for f in mine if f.category == COMPILER]
    got = [(f.oracle, f.category, f.message[:80]) for f in mine]
    why = f"{name}: {label['class']} ({label['evidence']}); got {got}"
    match label["class"]:
        case "real":
            assert compiler, why
        case "duplicate":
            other_graph, other = judged(campaign, label["duplicate_of"])
            theirs = [f for f in other.verdict.findings if f.backend == backend and f.category == COMPILER]

            def keys(fs: list, g: Graph) -> set[str]:
                return {graph_signature(f, g) for f in fs} | {
                    r for f in fs if (r := graph_root_cause(f, g, f.details.get("first_diverging")))}
            assert compiler and keys(compiler, graph) & keys(theirs, other_graph), why
        case "decline":
            assert not mine and any(b == backend for b, _, _ in e.verdict.unsupported), why
        case "baseline-wrong" | "invalid-input":
            assert not compiler, why
        case "exporter-wrong":
            assert not compiler and any(f.category == EXPORTER for f in mine), why
        case "noise":
            assert not compiler and all(f.category == NOISE for f in mine), why
        case other:
            raise AssertionError(f"{name}: unknown class {other!r}")


def test_a_campaign_lists_one_root_cause_once_after_reducing_its_cases(tmp_path: Path) -> None:
    """The three SAME_UPPER cases (Conv, ConvInteger, QLinearConv: three signatures, one root cause)
    recorded by a campaign that reduces its bugs: one is listed, the other two are merged into it."""
    from dlcfuzz.run.campaign import Executed
    from dlcfuzz.run.store import TestRecord

    names = ["ort-conv-same-upper", "ort-convinteger-same-upper", "ort-qlinearconv-same-upper"]
    if not load_backend("ort").available()[0]:
        pytest.skip("onnxruntime not installed")
    c = Campaign(CampaignConfig(tmp_path / "c", ["ort"], list(REGISTRY.values()), targeted=False, reduce_seconds=10))
    c.start_backends()
    try:
        for i, name in enumerate(names):
            graph, test = _case(name)
            e = c.tester.evaluate(graph, test)
            record = TestRecord(i, i, sorted({n.op for n in graph.nodes}), e.baseline_name, e.finite, 1, True,
                                0.0, 0.0, 0.0, e.compiler_seconds, e.oracle_seconds)
            c.record(Executed(record, graph, test, e.outcomes, e.verdict, e.baseline, None, []))
        listed = c.store.bugs("compiler")
        merged = c.store.bugs("compiler", merged=True)
    finally:
        c.pool.close()
        c.store.close()
    def at(bug) -> str:
        return bug["title"].split(" first at ")[1].split(" ")[0]
    assert [at(b) for b in listed] == ["Conv"], [b["title"] for b in listed]
    assert {at(b) for b in merged} == {"ConvInteger", "QLinearConv"}
    assert set(listed[0]["same_root"].split(",")) == {b["signature"] for b in merged}
