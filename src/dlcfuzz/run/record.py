"""One record per operator: every fact dlcfuzz keeps about an ONNX operator of the registry
(``dlcfuzz.spec.REGISTRY``), gathered from the layers that own it, and checked together.

Each layer keeps its own tables (a spec imports nothing above ``ir``, an exporter nothing above ``ir``,
the solver ``ir`` and ``spec``), and next to each table the operators it does *not* hold, explicitly:
an exemption with its reason (``NO_TORCH_RULE``, ``NO_RELAX_TRANSLATION``, ``NO_TRANSFER``) or, for a
yes/no trait, the list of the "no" operators (``CONTINUOUS`` beside ``DISCONTINUOUS``).  So every
operator is classified for every facet, and a forgotten entry is a failure of
``tests/test_operator_record.py``, which calls ``gaps()`` and ``stale()`` here.  This module sits in
``run`` because it reads every owner: spec, solve, export, ir, backends and oracle.

The facets (``FACETS``):

========================  ====================================================================
spec                      the ``OpSpec`` (``spec/<family>.py``): what the registry is
interval rule             ``solve.intervals.TRANSFER``, or ``NO_TRANSFER`` with the reason
input domains             ``solve.intervals.DOMAINS``, or ``NO_DOMAIN`` (finite in, finite out)
torch rule                ``export.torch.OPS`` (a composite: its chain's operators), or ``NO_TORCH_RULE``
Relax rule                ``export.relax_ops.OPS``, or ``NO_RELAX_TRANSLATION``
continuity                ``oracle.localize.DISCONTINUOUS`` or ``CONTINUOUS``
overflow                  ``oracle.localize.WRAPPING`` or ``NON_WRAPPING``
hidden float math         ``ir.graph.COMPUTES_IN_FLOAT`` / ``FLOAT_ATTRIBUTES`` / ``ROUNDS_REAL_RESULTS``,
                          or ``NO_HIDDEN_FLOAT``
reference trust           ``backends.reference.RULES``, another domain (``foreign``), or ``TRUSTED``
profile <backend>         each packaged support profile (``data/profiles``) has probed it, or the
                          backend refuses it outright (``supports({op})`` is False: no torch rule,
                          not in IREE's lowered list ...)
========================  ====================================================================

Tables where an absent operator is the safe default are not facets: ``NAN_SAFE`` (absent: float
inputs must be finite, the conservative side), ``THROUGH`` (absent: recomputed as itself),
``gen/disruptive.py``'s per-operator rules (absent: the violations ONNX's schema gives), the Relax
``UNSUPPORTED_*`` tables and ``oracle/unsupported.py`` (absent: the call is tried, a decline is
learned by the profile).  ``CONTEXTUAL``, ``SHAPED`` and ``READS_CONSTANTS`` say how a domain or
transfer function reads its arguments; they belong to the function written for the operator.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from importlib.resources import files

from dlcfuzz.backends import reference
from dlcfuzz.export import relax_ops
from dlcfuzz.export import torch as export_torch
from dlcfuzz.ir import graph
from dlcfuzz.oracle import localize
from dlcfuzz.solve import intervals
from dlcfuzz.spec import REGISTRY, onnx_ops
from dlcfuzz.spec.torch import TORCH_REGISTRY


@dataclass(frozen=True)
class Facet:
    """One fact about an operator: ``declared(op)`` says where it is declared (None: nowhere), ``where``
    which tables to add it to."""

    name: str
    declared: Callable[[str], str | None]
    where: str


def _in(op: str, yes: tuple[tuple[str, Collection[str]], ...]) -> str | None:
    """The name of the first table holding ``op``; for an exemption mapping, with its reason."""
    for name, table in yes:
        if op in table:
            reason = table[op] if isinstance(table, Mapping) and isinstance(table[op], str) else None
            return f"{name}: {reason}" if reason else name
    return None


def _torch(op: str) -> str | None:
    chain = onnx_ops(op)
    if all(part in export_torch.OPS for part in chain):
        return "export.torch.OPS" + (f" (chain {', '.join(chain)})" if chain != [op] else "")
    return _in(op, (("export.torch.NO_TORCH_RULE", export_torch.NO_TORCH_RULE),))


def _reference(op: str) -> str | None:
    if (rule := reference.foreign(op)) is not None:
        return f"backends.reference.foreign: {rule.why}"
    if op in reference.BY_OP:
        return f"backends.reference.RULES ({len(reference.BY_OP[op])})"
    return _in(op, (("backends.reference.TRUSTED", reference.TRUSTED),))


def _yes_no(op: str, yes: tuple[tuple[str, Collection[str]], ...], no: tuple[str, Collection[str]]) -> str | None:
    """Where a yes/no trait classifies ``op``; None where neither says, or where both do (a contradiction)."""
    said_yes, said_no = _in(op, yes), _in(op, (no,))
    return None if bool(said_yes) == bool(said_no) else said_yes or said_no


FACETS: tuple[Facet, ...] = (
    Facet("interval rule", lambda op: _in(op, (("solve.intervals.TRANSFER", intervals.TRANSFER),
                                               ("solve.intervals.NO_TRANSFER", intervals.NO_TRANSFER))),
          "add its transfer function to TRANSFER in solve/intervals.py, or exempt it in NO_TRANSFER with the reason"),
    Facet("input domains", lambda op: _yes_no(op, (("solve.intervals.DOMAINS", intervals.DOMAINS),),
                                              ("solve.intervals.NO_DOMAIN", intervals.NO_DOMAIN)),
          "add its domain function to DOMAINS in solve/intervals.py, or list it in NO_DOMAIN (exactly one)"),
    Facet("torch rule", _torch,
          "add a Rule to OPS in export/torch.py and its function to export/torch_ops.py, or exempt it in "
          "NO_TORCH_RULE with the reason"),
    Facet("Relax rule", lambda op: _in(op, (("export.relax_ops.OPS", relax_ops.OPS),
                                            ("export.relax_ops.NO_RELAX_TRANSLATION",
                                             relax_ops.NO_RELAX_TRANSLATION))),
          "add its translation to OPS in export/relax_ops.py, or exempt it in NO_RELAX_TRANSLATION with the reason"),
    Facet("continuity", lambda op: _yes_no(op, (("oracle.localize.DISCONTINUOUS", localize.DISCONTINUOUS),),
                                              ("oracle.localize.CONTINUOUS", localize.CONTINUOUS)),
          "list it in DISCONTINUOUS or CONTINUOUS in oracle/localize.py (exactly one)"),
    Facet("overflow", lambda op: _yes_no(op, (("oracle.localize.WRAPPING", localize.WRAPPING),),
                                         ("oracle.localize.NON_WRAPPING", localize.NON_WRAPPING)),
          "list it in WRAPPING or NON_WRAPPING in oracle/localize.py (exactly one)"),
    Facet("hidden float math", lambda op: _yes_no(
        op, (("ir.graph.COMPUTES_IN_FLOAT", graph.COMPUTES_IN_FLOAT),
             ("ir.graph.FLOAT_ATTRIBUTES", graph.FLOAT_ATTRIBUTES),
             ("ir.graph.ROUNDS_REAL_RESULTS", graph.ROUNDS_REAL_RESULTS)),
        ("ir.graph.NO_HIDDEN_FLOAT", graph.NO_HIDDEN_FLOAT)),
          "list it in COMPUTES_IN_FLOAT, FLOAT_ATTRIBUTES or ROUNDS_REAL_RESULTS, or in NO_HIDDEN_FLOAT, in "
          "ir/graph.py (exactly one)"),
    Facet("reference trust", lambda op: None if op in reference.BY_OP and op in reference.TRUSTED else _reference(op),
          "sweep it with benchmarks/baseline_trust.py, then add a Rule to RULES or list it in TRUSTED in "
          "backends/reference.py (exactly one)"),
)


def packaged_profiles() -> dict[str, set[str]]:
    """backend -> the operators its packaged support profile (``data/profiles``) knows."""
    folder = files("dlcfuzz.data").joinpath("profiles")
    out: dict[str, set[str]] = {}
    for f in folder.iterdir():
        if f.name.endswith(".json"):
            d = json.loads(f.read_text())
            out[str(d["backend"])] = {op for op, keys in d["counts"].items() if any(sum(c) for c in keys.values())}
    return out


def profile_facets() -> tuple[Facet, ...]:
    """One facet per packaged profile: probed there, or refused outright by the backend."""
    from dlcfuzz.backends import load_backend

    facets = []
    for name, known in sorted(packaged_profiles().items()):
        backend = load_backend(name)

        def declared(op: str, known: set[str] = known, backend=backend, name: str = name) -> str | None:
            if op in known:
                return f"data/profiles ({name}): probed"
            return None if backend.supports({op}) else f"{name}: supports() refuses it"
        facets.append(Facet(f"profile {name}", declared,
                            f"probe it (dlcfuzz probe --backends {name} --op-set OP) and refresh the packaged "
                            f"profile (src/dlcfuzz/data/profiles/README.md), or have {name}'s supports() refuse it"))
    return tuple(facets)


def record(op: str, facets: Iterable[Facet] | None = None) -> dict[str, str | None]:
    """Facet -> where the operator's fact is declared (None: nowhere)."""
    return {f.name: f.declared(op) for f in (FACETS if facets is None else facets)}


def gaps(ops: Iterable[str] | None = None, facets: Iterable[Facet] | None = None) -> list[str]:
    """One line per (operator, facet) declared nowhere, saying where to declare it."""
    chosen = tuple(FACETS + profile_facets() if facets is None else facets)
    return [f"{op}: no {f.name}: {f.where}"
            for op in (REGISTRY if ops is None else ops) for f in chosen if f.declared(op) is None]


# table entries that name no operator of the registry on purpose
NOT_IN_REGISTRY = {
    "DFT": "solve/intervals.py has its transfer function and domain, waiting for spec/signal.py's dft_spec",
}


def stale() -> list[str]:
    """Entries of the tables and exemptions above that name no operator of the registry (a typo, or an
    operator removed): the operators of composite chains count for the torch table, which writes them."""
    chains = {part for op in REGISTRY for part in onnx_ops(op)}
    tables: dict[str, Collection[str]] = {
        "solve.intervals.TRANSFER": intervals.TRANSFER, "solve.intervals.NO_TRANSFER": intervals.NO_TRANSFER,
        "solve.intervals.DOMAINS": intervals.DOMAINS, "solve.intervals.NO_DOMAIN": intervals.NO_DOMAIN,
        "export.torch.NO_TORCH_RULE": export_torch.NO_TORCH_RULE,
        "export.relax_ops.OPS": relax_ops.OPS, "export.relax_ops.NO_RELAX_TRANSLATION": relax_ops.NO_RELAX_TRANSLATION,
        "oracle.localize.DISCONTINUOUS": localize.DISCONTINUOUS, "oracle.localize.CONTINUOUS": localize.CONTINUOUS,
        "oracle.localize.WRAPPING": localize.WRAPPING, "oracle.localize.NON_WRAPPING": localize.NON_WRAPPING,
        "ir.graph.COMPUTES_IN_FLOAT": graph.COMPUTES_IN_FLOAT, "ir.graph.FLOAT_ATTRIBUTES": graph.FLOAT_ATTRIBUTES,
        "ir.graph.ROUNDS_REAL_RESULTS": graph.ROUNDS_REAL_RESULTS, "ir.graph.NO_HIDDEN_FLOAT": graph.NO_HIDDEN_FLOAT,
        "backends.reference.RULES": reference.BY_OP, "backends.reference.TRUSTED": reference.TRUSTED,
    }
    # the torch-native operators (spec/torch) register their interval rules in the same tables under
    # their torch.* names; their record is their TorchOpSpec, which the torch registry checks as it loads
    out = [f"{name}: {op} is no operator of the registry" for name, table in tables.items() for op in table
           if op not in REGISTRY and op not in TORCH_REGISTRY and op not in NOT_IN_REGISTRY]
    out += [f"export.torch.OPS: {op} is no operator of the registry nor of a composite's chain"
            for op in export_torch.OPS if op not in REGISTRY and op not in chains]
    return out
