"""Building support profiles (``dlcfuzz probe``): a campaign of single-operator tests, each operator
``per_op`` times with fresh dtypes, ranks, attributes and input forms, on each compiler's anchors and
first compiled variant.  It is a campaign like any other, so a crash found while probing is a bug in
its store with its bundle; the profiles it learned are written to the cache for the versions probed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dlcfuzz.run.campaign import Campaign, CampaignConfig, Progress
from dlcfuzz.run.profile import SupportProfile
from dlcfuzz.run.worker import PhaseLimits
from dlcfuzz.solve import GenOptions
from dlcfuzz.spec import OpSpec


def probe(backends: list[str], out: Path, specs: list[OpSpec], limits: GenOptions, per_op: int = 4, jobs: int = 1,
          phases: PhaseLimits | None = None, on_progress: Callable[[Progress], None] | None = None,
          ) -> tuple[list[Campaign], dict[str, SupportProfile]]:
    """Probes ``backends`` on ``specs`` (what the cache knew of those operators is forgotten, the rest
    kept), then probes again, ``2 * per_op`` times, the operators some compiler took in some tests and
    declined in others: more tests tell which feature it declines.  An operator that ``limits.opset``
    does not have yet (GroupNormalization-21, Attention-23) is probed at the opset that introduced it.
    Returns the rounds' campaigns (their stores hold what probing found) and the profiles."""
    stamp = time.strftime("probe-%Y%m%d-%H%M%S")
    by_opset: dict[int, list[OpSpec]] = {}
    for s in specs:
        by_opset.setdefault(max(limits.opset, s.since), []).append(s)
    campaigns: list[Campaign] = []
    learned: dict[str, SupportProfile] = {}
    for opset, group in sorted(by_opset.items()):
        name = stamp if opset == limits.opset else f"{stamp}-opset{opset}"
        group = _generable(group, replace(limits, opset=opset))
        if not group:  # e.g. the operators a new compiler version's profile never saw, none of them generable
            continue
        got, profiles = _rounds(backends, out, name, group, replace(limits, opset=opset), per_op, jobs, phases,
                                on_progress)
        campaigns += got
        learned |= profiles
    return campaigns, learned


def _generable(specs: list[OpSpec], limits: GenOptions) -> list[OpSpec]:
    """The operators of ``specs`` that the probing generator can instantiate at ``limits`` (its dtypes,
    opset and target, as a probing campaign's generator sees them); none: an empty list."""
    from dlcfuzz.gen.isra import split_available

    profile = None
    if limits.target == "ort":  # as campaign._profile: ONNX Runtime's kernels narrow the dtypes
        from dlcfuzz.backends.ort import full_profile

        profile = full_profile(limits.opset, tuple(s.op for s in specs))
    try:
        return split_available(specs, limits, profile)[0]
    except ValueError:
        return []


def _rounds(backends: list[str], out: Path, stamp: str, specs: list[OpSpec], limits: GenOptions, per_op: int, jobs: int,
            phases: PhaseLimits | None, on_progress: Callable[[Progress], None] | None,
            ) -> tuple[list[Campaign], dict[str, SupportProfile]]:
    """The two probing rounds of ``probe`` at one opset."""
    by_op = {s.op: s for s in specs}
    campaigns: list[Campaign] = []
    learned: dict[str, SupportProfile] = {}
    for round_, (ops, n, fresh) in enumerate([(list(by_op), per_op, True), (None, 2 * per_op, False)]):
        if ops is None:  # the second round: the mixed operators of the first
            ops = sorted({op for p in learned.values() for op in p.mixed()} & by_op.keys())
            if not ops:
                break
        cfg = CampaignConfig(out / f"{stamp}-{round_ + 1}", backends, [by_op[o] for o in ops], budget_seconds=None,
                             max_tests=n * len(ops), jobs=jobs, ops=(1, 1), limits=limits,
                             phases=phases or PhaseLimits(), strategy="probe", targeted=False, allocate=False,
                             variants_per_backend=1, fresh_profiles=fresh)
        campaign = Campaign(cfg, on_progress)
        campaign.start_backends()
        campaign.run()  # saves the profiles it learned
        campaigns.append(campaign)
        learned |= {b: p for b, p in campaign.profiles.items() if p.learned}
    return campaigns, learned
