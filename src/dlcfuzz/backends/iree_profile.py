"""IREE's support profile: the ONNX operators its ONNX lowering handles at opset 17, measured by
``benchmarks/iree_profile.py`` (single-operator models through the ``iree`` backend in workers)
and stored with its provenance in ``dlcfuzz/data/iree_ops.json``."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

PROFILE = "iree_ops.json"


@cache
def profile() -> dict[str, Any]:
    return json.loads(files("dlcfuzz.data").joinpath(PROFILE).read_text())


def lowered_ops() -> frozenset[str]:
    """Operators that compiled for llvm-cpu in at least one probed single-operator model."""
    return frozenset(profile()["lowered"])
