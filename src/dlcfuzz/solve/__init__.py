"""Constraint solving over operator specs: Isra's ordered, backtrack-free instantiation."""

from dlcfuzz.solve.instantiate import Admission, Instantiator, Limits, Pool, Proposal, Stats
from dlcfuzz.solve.types import TypeProfile, type_domains

__all__ = ["Admission", "Instantiator", "Limits", "Pool", "Proposal", "Stats", "TypeProfile", "type_domains"]
