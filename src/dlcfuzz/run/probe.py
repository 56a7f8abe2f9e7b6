"""Building support profiles (``dlcfuzz probe``): a campaign of single-operator tests, each operator
``per_op`` times with fresh dtypes, ranks, attributes and input forms, on each compiler's anchors and
first compiled variant.  It is a campaign like any other, so a crash found while probing is a bug in
its store with its bundle; the profiles it learned are written to the cache for the versions probed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from dlcfuzz.run.campaign import Campaign, CampaignConfig, Progress
from dlcfuzz.run.profile import SupportProfile
from dlcfuzz.run.worker import PhaseLimits
from dlcfuzz.solve import Limits
from dlcfuzz.spec import OpSpec


def probe(backends: list[str], out: Path, specs: list[OpSpec], limits: Limits, per_op: int = 4, jobs: int = 1,
          phases: PhaseLimits | None = None, on_progress: Callable[[Progress], None] | None = None,
          ) -> tuple[Campaign, dict[str, SupportProfile]]:
    """Probes ``backends`` into a new campaign folder under ``out``; returns the campaign (its store
    holds what probing found) and the profiles it built."""
    folder = out / time.strftime("probe-%Y%m%d-%H%M%S")
    cfg = CampaignConfig(folder, backends, specs, budget_seconds=None, max_tests=per_op * len(specs), jobs=jobs,
                         ops=(1, 1), limits=limits, phases=phases or PhaseLimits(), strategy="probe",
                         targeted=False, allocate=False, variants_per_backend=1, fresh_profiles=True)
    campaign = Campaign(cfg, on_progress)
    campaign.start_backends()
    campaign.run()  # saves the profiles it learned
    return campaign, {b: p for b, p in campaign.profiles.items() if p.learned}
