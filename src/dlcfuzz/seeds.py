"""Seeds: test i of a run with seed S uses derive_seed(S, i), independent of how many tests run."""

import hashlib


def derive_seed(seed: int, index: int) -> int:
    # 63 bits: fits SQLite's signed integers
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:8], "little") >> 1
