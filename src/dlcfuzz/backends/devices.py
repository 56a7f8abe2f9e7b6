"""Devices are variants: a backend's variant runs on ``options["device"]`` ("cpu" when absent).

A GPU adds variants to the backends that have one (TVM cuda, Inductor with Triton, ONNX Runtime's
CUDA and TensorRT providers); each backend decides in its worker whether its package can use the
GPU and says why not (``Backend.device_notes``).  This module holds what the driver needs without
importing any compiler: the device names, parsing ``--devices``, which variants a restriction keeps,
and whether this machine has a GPU at all (through the CUDA driver library, no package needed).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from functools import cache
from typing import Any

DEVICES = ("cpu", "cuda")


def device_of(options: dict[str, Any]) -> str:
    """The device a variant with these options runs on."""
    return str(options.get("device", "cpu"))


def parse_devices(text: str) -> tuple[str, ...]:
    """``"cpu,cuda"`` -> ("cpu", "cuda"); raises ValueError naming an unknown or missing device."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError(f"--devices: no device named (choose from {', '.join(DEVICES)})")
    bad = [n for n in names if n not in DEVICES]
    if bad:
        raise ValueError(f"--devices: unknown device {bad[0]!r} (choose from {', '.join(DEVICES)})")
    return tuple(dict.fromkeys(names))


def keep(described: Iterable[tuple[str, dict]], devices: Iterable[str]) -> list[tuple[str, dict]]:
    """The (name, options) variants that run on one of ``devices``."""
    allowed = set(devices)
    return [(n, o) for n, o in described if device_of(o) in allowed]


@cache
def cuda_gpus() -> tuple[list[str], str]:
    """(names of this machine's CUDA GPUs, why there are none): asked of the CUDA driver library,
    so it needs no compiler package and works where no backend can use the GPU."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return [], "no CUDA driver (libcuda.so.1 not found)"
    if lib.cuInit(0) != 0:
        return [], "the CUDA driver finds no usable GPU (cuInit failed)"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return [], "the CUDA driver reports no GPU"
    names = []
    for i in range(count.value):
        dev, buf = ctypes.c_int(0), ctypes.create_string_buffer(256)
        ok = lib.cuDeviceGet(ctypes.byref(dev), i) == 0 and lib.cuDeviceGetName(buf, 256, dev) == 0
        names.append(buf.value.decode(errors="replace") if ok else f"GPU {i}")
    return names, ""


def found() -> dict[str, str]:
    """device -> what was found ("" for the CPU), or "none: why" where it is missing."""
    gpus, why = cuda_gpus()
    return {"cpu": "", "cuda": ", ".join(gpus) if gpus else f"none: {why}"}


def describe(devices: Iterable[str]) -> tuple[str, list[str]]:
    """(one line naming the devices found among ``devices``, lines saying which are skipped and why)."""
    gpus, why = cuda_gpus()
    use, skipped = [], []
    for d in devices:
        if d == "cuda" and not gpus:
            skipped.append(f"cuda: no GPU here ({why}): the cuda variants are skipped")
        else:
            use.append(f"cuda ({', '.join(gpus)})" if d == "cuda" else d)
    return "devices: " + (", ".join(use) or "none"), skipped
