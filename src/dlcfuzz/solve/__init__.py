"""Constraint solving over operator specs: Isra's ordered, backtrack-free instantiation."""

from dlcfuzz.solve.instantiate import Admission, GenOptions, Instantiator, Pool, Proposal, Stats
from dlcfuzz.solve.types import TypeProfile, type_domains

__all__ = ["Admission", "GenOptions", "Instantiator", "Pool", "Proposal", "Stats", "TypeProfile", "type_domains"]
