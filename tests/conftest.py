"""Collection settings for the suite."""

# tests/migrate_sample/ holds torch's own behaviour, a fixture that `dlcfuzz migrate record` runs
# (tests pass its path explicitly, which pytest still collects): not a test of dlcfuzz
collect_ignore = ["migrate_sample"]
