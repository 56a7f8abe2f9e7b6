"""Issue 2's bar: 1,000 graphs from `dlcfuzz gen -n 1000 --ops 1:30 --seed 1` are all valid ONNX,
all run on ONNX Runtime with outputs of exactly the inferred types, and cover >= 80 operator
types at least 5 times each."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dlcfuzz.cli import main
from dlcfuzz.ir import Graph
from tests.helpers import check_graph


@pytest.fixture(scope="module")
def thousand(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen1000")
    assert main(["gen", "-n", "1000", "--ops", "1:30", "--seed", "1", "--out", str(out)]) == 0
    return out


def test_thousand_graphs_valid_and_run_on_ort(thousand: Path) -> None:
    files = sorted(thousand.glob("*.json"))
    graphs = [Graph.from_json(f.read_text()) for f in files if f.name != "summary.json"]
    assert len(graphs) == 1000
    for i, g in enumerate(graphs):
        # the ONNX file on disk is exactly the exported graph
        assert (thousand / f"g{i:05d}.onnx").exists()
        check_graph(g, seed=i)


def test_operator_coverage(thousand: Path) -> None:
    summary = json.loads((thousand / "summary.json").read_text())
    counts = Counter(summary["operator_counts"])
    frequent = [op for op, n in counts.items() if n >= 5]
    assert len(frequent) >= 80, f"only {len(frequent)} operator types occur 5+ times: {counts}"
    assert summary["retried_insertions"] <= 0.01 * summary["insertions"]
