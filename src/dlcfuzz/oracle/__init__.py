"""Oracles: crash, differential (vs the baseline) and metamorphic (across a backend's variants).

One module judges (``oracle/judge.py``): the baseline's choice, confirmed runs, comparison,
categories, and (through ``oracle/localize.py`` and ``oracle/blame.py``) where a divergence starts
and which compiler pass causes it.  The findings it makes are ``oracle/findings.py``'s; outputs are
compared by ``oracle/compare.py``; a compiler that merely declines an operator is told apart by
``oracle/unsupported.py``.  The oracle imports ``ir``, ``spec``, ``export``, ``values`` and
``backends``, never ``run``: it runs tests through a ``Runner`` it is handed (the campaign's worker pool).
"""

from __future__ import annotations

from dlcfuzz.oracle.compare import all_finite, compare
from dlcfuzz.oracle.findings import (
    BASELINE,
    CATEGORIES,
    COMPILER,
    CRASH,
    DECLINED,
    DIFFERENTIAL,
    DISRUPTIVE,
    EXPORTER,
    INCONSISTENT,
    METAMORPHIC,
    NOISE,
    UNCONFIRMED,
    UNDEFINED,
    VALUE_KINDS,
    Finding,
    Verdict,
    unconfirmed,
)
from dlcfuzz.oracle.judge import (
    CONFIRM_RUNS,
    FALLBACK,
    REFERENCE,
    REFERENCE_RUN,
    Baseline,
    Criteria,
    Runner,
    criteria_for,
    explain,
    judge,
    judge_invalid,
    judge_migrated,
    run_baseline,
    run_confirmed,
)

__all__ = [
    "BASELINE",
    "CATEGORIES",
    "COMPILER",
    "CONFIRM_RUNS",
    "CRASH",
    "DECLINED",
    "DIFFERENTIAL",
    "DISRUPTIVE",
    "EXPORTER",
    "FALLBACK",
    "INCONSISTENT",
    "METAMORPHIC",
    "NOISE",
    "REFERENCE",
    "REFERENCE_RUN",
    "UNCONFIRMED",
    "UNDEFINED",
    "VALUE_KINDS",
    "Baseline",
    "Criteria",
    "Finding",
    "Runner",
    "Verdict",
    "all_finite",
    "compare",
    "criteria_for",
    "explain",
    "judge",
    "judge_invalid",
    "judge_migrated",
    "run_baseline",
    "run_confirmed",
    "unconfirmed",
]
