"""Graph generation strategies (one module each), chosen by name with ``make_generator``.

Every generator has ``generate(seed) -> Graph``, ``stats``, ``specs`` (the operators it can
generate) and ``unavailable`` (those it cannot under the dtype set, opset and target).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dlcfuzz.ir import Graph
from dlcfuzz.solve import Admission, GenOptions, TypeProfile
from dlcfuzz.spec.dsl import OpSpec

VALID = ("isra", "hirgen", "gencog", "guided", "feedback")  # every graph is valid by construction
BASELINES = ("declgen", "randoop")  # Isra's baselines: need a validity check
STRATEGIES = (*VALID, "disruptive", *BASELINES)
FUZZ_STRATEGIES = (*VALID, "disruptive")  # the baselines exist to be measured against, not to fuzz with
UNTARGETED = ("disruptive", "probe", *BASELINES)  # deliberately blind to what the target compiler takes


def make_generator(strategy: str, specs: Sequence[OpSpec], limits: GenOptions, op_range: tuple[int, int],
                   profile: TypeProfile | None = None, coverage=None,
                   valid: Callable[[Graph], str | None] | None = None, admit: Admission | None = None,
                   **options):
    """A generator by strategy name; ``coverage`` (gen.guided.Coverage) for the guided ones,
    ``valid`` (a model's validity error, or None) for the baselines, ``admit`` (a target compiler's
    support profile) for the valid ones; ``options`` are the strategy's own knobs (e.g. p_rej,
    temperature, paths)."""
    if strategy == "isra":
        from dlcfuzz.gen.isra import IsraGenerator

        return IsraGenerator(specs, limits, op_range, profile, admit)
    if strategy in ("hirgen", "gencog", "guided"):
        from dlcfuzz.gen.guided import GuidedGenerator

        return GuidedGenerator(specs, limits, op_range, profile, strategy, coverage, admit=admit, **options)
    if strategy == "feedback":  # steered by the compilers' feedback (gen/feedback.py)
        from dlcfuzz.gen.feedback import FeedbackGenerator

        return FeedbackGenerator(specs, limits, op_range, profile, coverage, admit=admit, **options)
    if strategy == "probe":
        from dlcfuzz.gen.probe import ProbeGenerator

        return ProbeGenerator(specs, limits, op_range, profile)
    if strategy == "disruptive":
        from dlcfuzz.gen.disruptive import DisruptiveGenerator

        return DisruptiveGenerator(specs, limits, op_range, profile)
    if strategy in BASELINES:
        from dlcfuzz.gen.baselines import DeclGenGenerator, RandoopGenerator

        if valid is None:
            raise ValueError(f"strategy {strategy} needs a validity check")
        cls = DeclGenGenerator if strategy == "declgen" else RandoopGenerator
        return cls(specs, limits, op_range, profile, valid=valid)
    raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
