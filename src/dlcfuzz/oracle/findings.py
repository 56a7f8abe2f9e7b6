"""What the oracles report: a ``Finding`` (which oracle, what kind, whose fault), a test's ``Verdict``,
and the names of oracles and categories.  Pure data: the judge (``oracle/judge.py``) makes them.

Each finding has a *category*, whose fault it is (``CATEGORIES``); only ``COMPILER`` findings are a
compiler team's bugs (how each category is assigned: ``oracle/judge.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlcfuzz.backends.base import Outcome

CRASH, DIFFERENTIAL, METAMORPHIC, DISRUPTIVE = "crash", "differential", "metamorphic", "disruptive"
INCONSISTENT = "inconsistent"  # an invalid model accepted, with outputs its variants disagree on
# whose fault a finding is: the compiler's (listed as its bug), the baseline's, or dlcfuzz's exporter's
COMPILER, BASELINE, EXPORTER, NOISE, UNDEFINED = "compiler", "baseline", "exporter", "noise", "undefined"
UNCONFIRMED = "unconfirmed"  # a process death that a fresh process, running the model alone, did not repeat
# a compiler's error in words that say it declines the case (``oracle/unsupported.py``), recorded as a bug by an
# earlier dlcfuzz whose rules did not know them yet (``dlcfuzz retriage --rejudge``): a campaign counts declines
DECLINED = "declined"
CATEGORIES = (COMPILER, BASELINE, EXPORTER, NOISE, UNDEFINED, UNCONFIRMED, DECLINED)
VALUE_KINDS = ("value", "shape", "dtype")


@dataclass
class Finding:
    oracle: str
    kind: str  # exception / signal / timeout / oom / value / shape / dtype
    backend: str
    variant: str
    phase: str
    message: str
    error_type: str = ""
    traceback: str = ""
    other: str = ""  # the variant or baseline it was compared with
    output: int = -1  # index of the differing output
    category: str = COMPILER
    # e.g. "first_diverging": {node, op, output, kind, dtype, detail}, where a value divergence starts;
    # "blamed_pass": the compiler pass whose absence makes it vanish (``oracle/blame.py``)
    details: dict = field(default_factory=dict)

    @property
    def diverges(self) -> bool:
        """A value, shape or dtype divergence between outputs (not a crash, not a disruptive finding)."""
        return self.oracle in (DIFFERENTIAL, METAMORPHIC) and self.kind in VALUE_KINDS


def unconfirmed(backend: str, variant: str, o: Outcome) -> Finding:
    """A crash that a fresh worker did not repeat: no model reproduces it, so it is counted apart."""
    return Finding(CRASH, "unconfirmed", backend, variant, o.phase, f"{o.message}; not reproduced in a fresh process",
                   o.error_type, o.traceback, category=UNCONFIRMED)


@dataclass
class Verdict:
    findings: list[Finding]
    unsupported: list[tuple[str, str, str]]  # (backend, variant, message)
