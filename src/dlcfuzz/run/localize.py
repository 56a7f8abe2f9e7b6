"""Where a value divergence starts: the first diverging operator (GenCoG), for every value finding.

A finding's differing *graph output* says little: one wrong Conv makes every downstream output
differ, and each would name another producer.  ``localize`` exposes every intermediate value of
the test's graph as an output, runs the accused variant and what it was compared with (the
baseline, or the backend's anchor variant) on that graph, and records in the finding's
``details["first_diverging"]`` the first node, in topological order, whose output differs beyond
the tolerance.  Signatures and titles use it (``run/dedup.py``), and the reducer keeps that node
and drops everything downstream of it (``run/reduce.py``).

Exposing intermediates can change what a compiler fuses, so the divergence may vanish in the
exposed graph; the finding then keeps no location and is signed by the producer of its output.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection

import numpy as np

from dlcfuzz.backends.base import OK, Outcome, Test
from dlcfuzz.export.onnx import to_bytes
from dlcfuzz.ir import Graph, Node, Value
from dlcfuzz.oracle import DIFFERENTIAL, Finding
from dlcfuzz.oracle.compare import REDUCED_PRECISION, compare

# (backend, test, variants) -> variant -> outcome: running in the campaign's isolated workers
Runner = Callable[[str, Test, list[str]], dict[str, Outcome]]


def exposed(g: Graph) -> Graph:
    """A copy of ``g`` whose outputs are every node output, in topological order."""
    out = Graph(opset=g.opset, meta=copy.deepcopy(g.meta))
    out.values = {k: Value(v.name, v.type, v.kind, v.data, dict(v.hint) if v.hint else v.hint)
                  for k, v in g.values.items()}
    out.nodes = [Node(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.name) for n in g.toposort()]
    out.outputs = [o for n in out.nodes for o in n.outputs if o in out.values]
    return out


def rounded_outputs(g: Graph) -> list[int]:
    """Indices of the graph outputs that are integers computed from float math."""
    rounded = g.rounded_from_floats()
    return [i for i, o in enumerate(g.outputs) if o in rounded]


def first_divergence(g: Graph, expected: list[np.ndarray], actual: list[np.ndarray],
                     tolerances: dict[str, tuple[float, float]] | None) -> dict[str, str] | None:
    """The first node of ``g`` (whose outputs are every node output, as ``exposed`` makes them)
    whose output differs between ``expected`` and ``actual``: {node, op, output, kind, dtype, detail}."""
    if len(expected) != len(g.outputs) or len(actual) != len(g.outputs):
        return None
    where = {o: n for n in g.nodes for o in n.outputs}
    rounded = g.rounded_from_floats()
    for k, name in enumerate(g.outputs):
        m = compare([expected[k]], [actual[k]], tolerances, [0] if name in rounded else [])
        if m is not None:
            n = where[name]
            return {"node": n.name, "op": n.op, "output": name, "kind": m.kind,
                    "dtype": g.values[name].type.dtype, "detail": m.detail}
    return None


def localize(graph: Graph, test: Test, findings: list[Finding], run: Runner, baseline: tuple[str, str] | None,
             tolerances: dict[str, tuple[float, float]] | None = None,
             reduced: Collection[tuple[str, str]] = ()) -> None:
    """Sets ``details["first_diverging"]`` of each value finding in ``findings`` that can be located.
    ``baseline``: the (backend, variant) whose outputs differential findings were judged against."""
    todo = [f for f in findings if f.diverges]
    if not todo or len(graph.nodes) < 2:  # one node: the divergence can only start there
        for f in todo:
            if graph.nodes:
                n = graph.nodes[0]
                f.details["first_diverging"] = {"node": n.name, "op": n.op, "output": n.outputs[0], "kind": f.kind,
                                                "dtype": graph.values[n.outputs[0]].type.dtype, "detail": f.message}
        return
    g = exposed(graph)
    try:
        probe = Test(to_bytes(g), g.to_json(), test.inputs)
    except (ValueError, KeyError, TypeError):
        return
    wanted: dict[str, set[str]] = {}
    for f in todo:
        wanted.setdefault(f.backend, set()).add(f.variant)
        if f.oracle != DIFFERENTIAL:
            wanted[f.backend].add(f.other)
    if baseline is not None and any(f.oracle == DIFFERENTIAL for f in todo):
        wanted.setdefault(baseline[0], set()).add(baseline[1])
    got: dict[str, dict[str, Outcome]] = {b: run(b, probe, sorted(vs)) for b, vs in wanted.items()}

    def outputs(backend: str, variant: str) -> list[np.ndarray] | None:
        o = got.get(backend, {}).get(variant)
        return o.outputs if o is not None and o.status == OK else None

    loose = (tolerances or {}) | REDUCED_PRECISION
    for f in todo:
        expected = outputs(*baseline) if f.oracle == DIFFERENTIAL and baseline else outputs(f.backend, f.other)
        actual = outputs(f.backend, f.variant)
        if expected is None or actual is None:
            continue
        pair = {(f.backend, f.variant), (f.backend, f.other)}
        first = first_divergence(g, expected, actual, loose if pair & set(reduced) else tolerances)
        if first is not None:
            f.details["first_diverging"] = first
