"""An operator is one checked unit (run/record.py): every operator of the registry has every facet
declared (an interval rule and input domains, a torch rule, a Relax translation, its oracle traits, its
reference trust, a probe by every packaged profile) or exempted by name with its reason, and no table
names an operator the registry does not have."""

from __future__ import annotations

from dlcfuzz.export import relax_ops
from dlcfuzz.export import torch as export_torch
from dlcfuzz.run.record import FACETS, gaps, record, stale
from dlcfuzz.solve import intervals
from dlcfuzz.spec import REGISTRY


def test_every_operator_declares_or_exempts_every_facet():
    missing = gaps()
    assert not missing, f"{len(missing)} (operator, facet) pairs declared nowhere:\n" + "\n".join(missing)


def test_no_table_names_an_operator_the_registry_lacks():
    assert not stale(), "\n".join(stale())


def test_an_exemption_says_why_and_never_contradicts_a_declaration():
    for name, exempt, declared in (("NO_TORCH_RULE", export_torch.NO_TORCH_RULE, export_torch.OPS),
                                   ("NO_RELAX_TRANSLATION", relax_ops.NO_RELAX_TRANSLATION, relax_ops.OPS),
                                   ("NO_TRANSFER", intervals.NO_TRANSFER, intervals.TRANSFER)):
        for op, why in exempt.items():
            assert why.strip(), f"{name}: {op} has no reason"
            assert op not in declared, f"{name}: {op} is exempted and declared"


def test_a_removed_facet_is_named_with_its_operator_and_where_to_declare_it():
    """What the check says when an operator's entry is forgotten (here: Relu's transfer function)."""
    rule = intervals.TRANSFER.pop("Relu")
    try:
        assert gaps(["Relu"], FACETS) == [
            "Relu: no interval rule: add its transfer function to TRANSFER in solve/intervals.py, or exempt it in "
            "NO_TRANSFER with the reason"]
    finally:
        intervals.TRANSFER["Relu"] = rule
    assert gaps(["Relu"], FACETS) == []


def test_the_record_says_where_each_facet_is_declared():
    assert record("Floor", FACETS)["continuity"] == "oracle.localize.DISCONTINUOUS"
    assert record("Relu", FACETS)["continuity"] == "oracle.localize.CONTINUOUS"
    assert record("If", FACETS)["torch rule"].startswith("export.torch.NO_TORCH_RULE: ")
    assert len(REGISTRY) > 150


def test_a_yes_no_trait_listed_both_ways_is_a_gap():
    from dlcfuzz.oracle import localize

    localize.CONTINUOUS = localize.CONTINUOUS | {"Floor"}
    try:
        assert record("Floor", FACETS)["continuity"] is None
    finally:
        localize.CONTINUOUS = localize.CONTINUOUS - {"Floor"}
    assert record("Floor", FACETS)["continuity"] == "oracle.localize.DISCONTINUOUS"
