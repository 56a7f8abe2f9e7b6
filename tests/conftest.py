"""Collection settings for the suite."""

import pytest

# tests/migrate_sample/ holds torch's own behaviour, a fixture that `dlcfuzz migrate record` runs
# (tests pass its path explicitly, which pytest still collects): not a test of dlcfuzz
collect_ignore = ["migrate_sample"]

@pytest.fixture(autouse=True, scope="session")
def _profile_cache(tmp_path_factory):
    """Campaigns write the support profiles they learn into the user's cache: tests use their own, so
    that they neither read a developer's profiles nor write into them (dlcfuzz's packaged profiles still
    apply, for the pinned compiler versions)."""
    import os

    old = os.environ.get("DLCFUZZ_CACHE")
    os.environ["DLCFUZZ_CACHE"] = str(tmp_path_factory.mktemp("dlcfuzz-cache"))
    yield
    if old is None:
        os.environ.pop("DLCFUZZ_CACHE", None)
    else:
        os.environ["DLCFUZZ_CACHE"] = old
