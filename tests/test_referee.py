"""A reduced value bug that ONNX Runtime judged, because the reference evaluator is distrusted for one node
of the case, is taken to the baseline's issues where the reference evaluator trusts the first diverging node
and, run on it alone with ONNX Runtime's inputs, sides with the accused compiler (``Campaign._outvoted``).
On the real OpenVINO, from reduced cases of a 30-minute campaign (tests/data/roots/)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.spec import REGISTRY
from tests.test_trigger_forms import DATA, campaign_finding, case, recorded_campaign
from tests.test_triggers import need


def _sides(campaign: Campaign, signature: str) -> bool:
    g, feeds = case(signature)
    first = json.loads((DATA / signature / "reduction.json").read_text())["first_diverging"]
    return campaign._outvoted(campaign_finding(signature), SimpleNamespace(graph=g, inputs=feeds,
                                                                             first_diverging=first))


def test_the_reference_at_the_first_diverging_node_outvotes_onnx_runtime(tmp_path: Path) -> None:
    """MeanVarianceNormalization over one element: ONNX Runtime gives NaN, OpenVINO and the reference
    evaluator 0 (the spec's function adds 1e-9 to the divisor); a GlobalMaxPool beside it kept the reference
    from judging the case.  OpenVINO's ReduceLogSumExp that ignores its axes at version 13 stays a bug: there
    the reference evaluator sides with ONNX Runtime."""
    need("openvino")
    campaign = Campaign(CampaignConfig(tmp_path / "c", ["openvino"], [REGISTRY["Relu"]], max_tests=0))
    campaign.start_backends()
    try:
        assert _sides(campaign, "88e09fab44315d56") is True
        assert _sides(campaign, "dcacf4cfad9745a4") is False
    finally:
        campaign.pool.close()


def test_retriage_rejudge_moves_a_recorded_bug_that_the_reference_outvotes(tmp_path: Path, capsys) -> None:
    """A campaign recorded the MeanVarianceNormalization case above as an OpenVINO bug; ``dlcfuzz retriage
    --rejudge`` judges its reduced case again with the campaign's backends and moves it to the baseline's
    issues, and the ReduceLogSumExp bug beside it stays.  OpenVINO's RoiAlign of mode max (c46), against
    ONNX Runtime's max, which ONNX Runtime and the reference compute wrong alike, has no baseline now: a
    baseline issue too.  Without ``--rejudge`` categories stay."""
    from dlcfuzz.cli import main
    from dlcfuzz.run.store import Store

    need("openvino")
    out = tmp_path / "c"

    def reduction(sig: str) -> dict:
        first = json.loads((DATA / sig / "reduction.json").read_text())["first_diverging"]
        return {"signature": sig, "first_diverging": first, "reproduced": True}

    recorded_campaign(out, "openvino", ("88e09fab44315d56", "dcacf4cfad9745a4", "683f1aff33a09d8c"), reduction)
    assert main(["retriage", str(out)]) == 0
    store = Store(out)
    assert {r["signature"] for r in store.bugs("compiler")} == {"88e09fab44315d56", "dcacf4cfad9745a4",
                                                                "683f1aff33a09d8c"}
    store.close()
    capsys.readouterr()
    assert main(["retriage", str(out), "--rejudge"]) == 0
    printed = capsys.readouterr().out
    assert "88e09fab44315d56: now baseline" in printed
    assert "683f1aff33a09d8c: now baseline (openvino f32: no baseline)" in printed, printed
    store = Store(out)
    try:
        assert {r["signature"] for r in store.bugs("compiler")} == {"dcacf4cfad9745a4"}
    finally:
        store.close()
