"""Isra's 11 metrics and GenCoG's vertex/edge diversity over a test set of graphs.

Exact definitions (docs/metrics.md repeats them).  C is the operator corpus; only nodes whose
operator is in C count, and an edge is a tensor from one counted node to another.

Graph level, averaged over the graphs of the test set:
  NOO  number of nodes;  NOT  number of distinct operator types;
  NOP  number of distinct (producer node, consumer node) pairs joined by an edge;
  NTR  number of distinct node triples (u, v, w) with edges u->v and v->w;
  NSA  number of distinct (operator, input shapes, attributes) among the graph's nodes.  Isra's
       published code grew this set while it walked the graph, so the figure depended on the
       order it visited nodes; as a set of the graph's nodes it is order-independent.
Operator level, averaged over every o in C (an operator never seen scores 0):
  OTC  1 if o occurs;   IDC  |indegrees seen for o| / |indegrees o allows|;
  ODC  number of distinct outdegrees seen for o (a count, as in Isra's tables);
  SEC  |{o2 : an edge o->o2 occurs}| / |C|;
  DEC  |{(o2, o3) : a path o->o2->o3 occurs}| / |C|^2;
  SAC  number of distinct (input shapes, attributes) seen for o (a count, as in Isra's tables).
GenCoG:
  vertex diversity  mean over o in C of min(1, |distinct (input types, attributes) of o| / N_est(o));
  edge diversity    |{(o1, o2) : an edge o1->o2 occurs}| / |C|^2.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dlcfuzz.metrics.load import OpNode


@dataclass(frozen=True)
class OpInfo:
    """What the corpus knows about an operator: its allowed indegrees and call-space estimate."""

    indegrees: frozenset[int]
    call_space: int


@dataclass
class Accumulator:
    corpus: Mapping[str, OpInfo]
    graphs: int = 0
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(GRAPH_METRICS, 0.0))
    indeg: dict[str, set[int]] = field(default_factory=dict)
    outdeg: dict[str, set[int]] = field(default_factory=dict)
    pairs: dict[str, set[str]] = field(default_factory=dict)
    triples: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    shapes_attrs: dict[str, set] = field(default_factory=dict)
    types_attrs: dict[str, set] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, nodes: list[OpNode]) -> None:
        keep = [n.op in self.corpus for n in nodes]
        succ = [[j for j in n.succ if keep[j]] if keep[i] else [] for i, n in enumerate(nodes)]
        edges = {(i, j) for i in range(len(nodes)) for j in succ[i]}
        triples = {(i, j, k) for (i, j) in edges for k in set(succ[j])}
        kept = [n for n, k in zip(nodes, keep, strict=True) if k]
        self.graphs += 1
        s = self.sums
        s["NOO"] += len(kept)
        s["NOT"] += len({n.op for n in kept})
        s["NOP"] += len(edges)
        s["NTR"] += len(triples)
        s["NSA"] += len({(n.op, n.in_shapes, n.attrs) for n in kept})
        for i, n in enumerate(nodes):
            if not keep[i]:
                continue
            op = n.op
            self.counts[op] = self.counts.get(op, 0) + 1
            self.indeg.setdefault(op, set()).add(n.indegree)
            self.outdeg.setdefault(op, set()).add(len(succ[i]))
            self.shapes_attrs.setdefault(op, set()).add((n.in_shapes, n.attrs))
            self.types_attrs.setdefault(op, set()).add((n.in_types, n.attrs))
            for j in succ[i]:
                self.pairs.setdefault(op, set()).add(nodes[j].op)
        for i, j, k in triples:
            self.triples.setdefault(nodes[i].op, set()).add((nodes[j].op, nodes[k].op))

    def result(self) -> dict[str, float]:
        c = self.corpus
        nc = len(c)
        out = {k: v / max(1, self.graphs) for k, v in self.sums.items()}

        def mean(f) -> float:
            return sum(f(o) for o in c) / nc if nc else 0.0

        out["OTC"] = mean(lambda o: 1.0 if o in self.counts else 0.0)
        out["IDC"] = mean(lambda o: len(self.indeg.get(o, set()) & c[o].indegrees) / max(1, len(c[o].indegrees)))
        out["ODC"] = mean(lambda o: len(self.outdeg.get(o, ())))
        out["SEC"] = mean(lambda o: len(self.pairs.get(o, ())) / nc)
        out["DEC"] = mean(lambda o: len(self.triples.get(o, ())) / nc**2)
        out["SAC"] = mean(lambda o: len(self.shapes_attrs.get(o, ())))
        out["vertex_diversity"] = mean(lambda o: min(1.0, len(self.types_attrs.get(o, ())) / c[o].call_space))
        out["edge_diversity"] = sum(len(v) for v in self.pairs.values()) / nc**2 if nc else 0.0
        return out


GRAPH_METRICS = ("NOO", "NOT", "NOP", "NTR", "NSA")
OP_METRICS = ("OTC", "IDC", "ODC", "SEC", "DEC", "SAC")
DIVERSITY = ("vertex_diversity", "edge_diversity")


def compute(graphs: Iterable[list[OpNode]], corpus: Mapping[str, OpInfo]) -> dict[str, float]:
    acc = Accumulator(corpus)
    for nodes in graphs:
        acc.add(nodes)
    return acc.result()
