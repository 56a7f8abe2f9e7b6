"""Running tests: isolated workers, the campaign loop, the store, dedup."""
