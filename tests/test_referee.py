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
from tests.test_trigger_forms import DATA, campaign_finding, case
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
