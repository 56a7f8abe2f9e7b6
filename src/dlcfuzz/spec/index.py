"""index operators."""

from dlcfuzz.spec.dsl import OpSpec

SPECS: list[OpSpec] = []
