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
from tests.helpers import assert_model_file_is_its_graph, check_graph


@pytest.fixture(scope="module")
def thousand(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen1000")
    assert main(["gen", "-n", "1000", "--ops", "1:30", "--seed", "1", "--out", str(out)]) == 0
    return out


def test_thousand_graphs_valid_and_run_on_ort(thousand: Path) -> None:
    texts = [(thousand / f"g{i:05d}.json").read_text() for i in range(1000)]
    assert len(list(thousand.glob("g*.json"))) == len(list(thousand.glob("g*.onnx"))) == 1000
    for i, text in enumerate(texts):
        # the ONNX file on disk is the graph of its JSON (checked on the file, not re-exported)...
        assert_model_file_is_its_graph(thousand / f"g{i:05d}.onnx", text)
        # ...and that graph is valid and runs
        check_graph(Graph.from_json(text), seed=i)


def test_operator_coverage(thousand: Path) -> None:
    summary = json.loads((thousand / "summary.json").read_text())
    counts = Counter(summary["operator_counts"])
    frequent = [op for op, n in counts.items() if n >= 5]
    assert len(frequent) >= 80, f"only {len(frequent)} operator types occur 5+ times: {counts}"
    assert summary["retried_insertions"] <= 0.01 * summary["insertions"]
