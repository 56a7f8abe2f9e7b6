"""Disruptive campaigns end to end: invalid models on purpose, real ONNX Runtime rejecting them,
and planted compilers that crash on them or accept them with garbage outputs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from dlcfuzz.run.campaign import Campaign, CampaignConfig
from dlcfuzz.spec import REGISTRY
from tests.test_campaign import run_repro

OPS = [REGISTRY[o] for o in ("Neg", "Add", "Relu", "MatMul", "Concat", "Transpose", "Softmax", "ReduceSum")]


def test_rejections_are_right_crashes_and_acceptance_are_findings(tmp_path: Path) -> None:
    out = tmp_path / "c"
    cfg = CampaignConfig(out, ["ort", "tests.fake_backends:Lenient", "tests.fake_backends:SegfaultRepro"], OPS,
                         budget_seconds=300, max_tests=30, ops=(1, 2), strategy="disruptive", allocate=False)
    c = Campaign(cfg)
    c.run()
    assert c.progress.tests == 30
    db = sqlite3.connect(out / "campaign.sqlite")
    db.row_factory = sqlite3.Row
    bugs = list(db.execute("SELECT * FROM bugs"))
    statuses = {(r["backend"], r["status"]) for r in db.execute("SELECT backend, status FROM outcomes")}
    db.close()
    assert ("ort", "error") in statuses  # ONNX Runtime rejects the invalid models with an error
    lenient = [b for b in bugs if b["backend"].endswith("Lenient")]
    crashes = [b for b in bugs if b["backend"].endswith("SegfaultRepro") and b["kind"] == "signal"]
    assert lenient and all(b["oracle"] == "disruptive" and b["kind"] == "inconsistent" for b in lenient)
    assert crashes and all(b["oracle"] == "disruptive" for b in crashes)
    # one bug per (operator, kind of violation), however the exact values differ
    pairs = set()
    for b in lenient:
        v = json.loads((out / b["dir"] / "finding.json").read_text())["details"]["violation"]
        assert v["op"] in b["title"]
        pairs.add((v["op"], v["kind"]))
    assert len(pairs) == len(lenient)
    assert run_repro(out / lenient[0]["dir"]).returncode == 1  # accepts the invalid model, garbage: reproduced
    assert run_repro(out / crashes[0]["dir"]).returncode != 0  # dies of SIGSEGV
