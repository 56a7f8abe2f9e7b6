"""Operator instances (one library call with concrete parameter values) and the SQLite file that holds them.

An instance carries what its template needs: for ``library == "onnx"`` the single-node ONNX
model, for ``library == "torch"`` the call spec of ``dlcfuzz.export.torch_call``, plus the input
values by name, the library's own outputs where the source knows them, and the description that
prioritization works on (``params``: non-tensor parameter values, JSON-able; ``tensors``: dtype
and shape of each tensor input).  A set is written one committed row at a time, so a recording
that dies keeps every instance it reached.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ONNX, TORCH = "onnx", "torch"

SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (
    id INTEGER PRIMARY KEY, library TEXT NOT NULL, op TEXT NOT NULL, source TEXT NOT NULL,
    provenance TEXT NOT NULL, params TEXT NOT NULL, tensors TEXT NOT NULL, model BLOB NOT NULL,
    inputs BLOB NOT NULL, expected BLOB);
"""


@dataclass
class Instance:
    library: str  # "onnx" | "torch"
    op: str  # ONNX op type ("Conv"), or the torch API ("torch.nn.functional.conv2d", "torch.nn.Conv2d")
    source: str  # "onnx-node" | "torch-opinfo" | "torch-module" | "pytest" | ...
    provenance: str  # the test it came from (node test name, OpInfo name + sample index, pytest node id)
    params: dict[str, Any]  # non-tensor parameter values by name (attributes, keyword and positional args)
    tensors: list[dict[str, Any]]  # per tensor input: {"name", "dtype", "shape"}
    model: bytes  # ONNX single-node model (onnx) or the encoded call spec (torch)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)  # runtime input values, by name
    expected: list[np.ndarray] | None = None  # the library's own outputs (None: computed by the pre-check)
    id: int = -1

    def text(self) -> str:
        """The instance as one line of text (FAST's string view of a test)."""
        shapes = ", ".join(f"{t['dtype']}{list(t['shape'])}" for t in self.tensors)
        return f"{self.op}({shapes}; {json.dumps(self.params, sort_keys=True, default=str)})"


def tensor_info(name: str, a: np.ndarray) -> dict[str, Any]:
    return {"name": name, "dtype": str(a.dtype), "shape": [int(d) for d in a.shape]}


def pack_arrays(arrays: dict[str, np.ndarray] | list[np.ndarray]) -> bytes:
    if isinstance(arrays, list):
        arrays = {f"o{i}": a for i, a in enumerate(arrays)}
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def unpack_arrays(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def unpack_outputs(data: bytes) -> list[np.ndarray]:
    got = unpack_arrays(data)
    return [got[k] for k in sorted(got, key=lambda k: int(k[1:]))]


def jsonable(value: Any) -> Any:
    """A JSON-able stand-in for a parameter value (dtypes, enums, tuples...), keeping numbers as numbers."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 16 else f"array{list(value.shape)}"
    return str(value)


class InstanceSet:
    """Instances in a SQLite file (a campaign's store, or a set recorded by ``migrate record``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.executescript(SCHEMA)

    def add(self, inst: Instance) -> int:
        """Commits one instance; returns its id."""
        cur = self.db.execute(
            "INSERT INTO instances (library, op, source, provenance, params, tensors, model, inputs, expected) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            (inst.library, inst.op, inst.source, inst.provenance, json.dumps(jsonable(inst.params)),
             json.dumps(inst.tensors), inst.model, pack_arrays(inst.inputs),
             None if inst.expected is None else pack_arrays(list(inst.expected))))
        inst.id = int(cur.lastrowid)
        return inst.id

    def extend(self, instances: Iterable[Instance]) -> int:
        """Adds many instances in one transaction; returns how many."""
        n = 0
        self.db.execute("BEGIN")
        try:
            for inst in instances:
                self.add(inst)
                n += 1
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return n

    def forget_unrun(self, source: str) -> None:
        """Drops the instances of ``source`` that no test ran (in a campaign's store, whose ``tests``
        table lies beside them): what a cut-short harvest left."""
        self.db.execute("DELETE FROM instances WHERE source = ? AND id NOT IN (SELECT id FROM tests)", (source,))

    def operators(self) -> int:
        """How many distinct operators the instances cover."""
        return self.db.execute("SELECT COUNT(DISTINCT op) FROM instances").fetchone()[0]

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM instances").fetchone()[0]

    def __iter__(self) -> Iterator[Instance]:
        """Every instance, without its (large) model and values: what prioritization needs."""
        for row in self.db.execute("SELECT id, library, op, source, provenance, params, tensors FROM instances "
                                   "ORDER BY id"):
            yield Instance(row[1], row[2], row[3], row[4], json.loads(row[5]), json.loads(row[6]), b"", id=row[0])

    def get(self, instance_id: int) -> Instance:
        row = self.db.execute("SELECT id, library, op, source, provenance, params, tensors, model, inputs, expected "
                              "FROM instances WHERE id = ?", (instance_id,)).fetchone()
        if row is None:
            raise KeyError(instance_id)
        return Instance(row[1], row[2], row[3], row[4], json.loads(row[5]), json.loads(row[6]), row[7],
                        unpack_arrays(row[8]), None if row[9] is None else unpack_outputs(row[9]), id=row[0])

    def close(self) -> None:
        self.db.close()
