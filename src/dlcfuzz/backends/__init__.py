"""Compilers under test, one module each.  A backend is named by a short name (built in, or a
plugin: an installed package's entry point in the group ``dlcfuzz.backends`` whose value is
``module:Class``) or by ``module:Class`` (so tests can plant their own); workers resolve the name
the same way and import it by that path."""

from __future__ import annotations

import importlib

from dlcfuzz.backends.base import Backend, Test, Variant

BUILTIN = {
    "ort": "dlcfuzz.backends.ort:OrtBackend",
    "tvm": "dlcfuzz.backends.tvm:TvmBackend",
    "openvino": "dlcfuzz.backends.openvino:OpenVinoBackend",
    "inductor": "dlcfuzz.backends.inductor:InductorBackend",
    "iree": "dlcfuzz.backends.iree:IreeBackend",
    "reference": "dlcfuzz.backends.reference:ReferenceBackend",
    "tvm-relax": "dlcfuzz.backends.tvm_relax:TvmRelaxBackend",
    # OPERA: migrated torch calls (call specs) through the compilers' PyTorch frontends, and the library itself
    "tvm-torch": "dlcfuzz.backends.tvm:TvmTorchBackend",
    "openvino-torch": "dlcfuzz.backends.openvino:OpenVinoTorchBackend",
    "inductor-torch": "dlcfuzz.backends.inductor:InductorTorchBackend",
    # torch-native programs (views, in-place writes, layouts, dynamic shapes, backward) through torch.compile
    "inductor-program": "dlcfuzz.backends.torch_program:TorchProgramBackend",
    "torch-library": "dlcfuzz.backends.torch_library:TorchLibraryBackend",
}
# what a campaign runs when no backend is named (tvm-relax, HirGen's high-level IR testing of
# TVM, compiles every test five ways: asked for by name).  iree joined after measuring (issue 16,
# 2 shared cores): 4.4 s of compiler time per test against 12.4 s for the other four together, on
# 83% of a default campaign's tests (the rest hold an operator its importer does not lower), and
# 24 distinct findings in 414 compiler-seconds (16 real by hand) against the four's 33 in 741 s.
DEFAULT = ("ort", "tvm", "openvino", "inductor", "iree")


ENTRY_POINT_GROUP = "dlcfuzz.backends"


class UnknownBackend(KeyError):
    pass


def plugins() -> dict[str, str]:
    """Backends of installed packages: entry-point name -> ``module:Class``.  A built-in name wins
    over a plugin of the same name (so that a stray package cannot replace a compiler under test)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTIN}


def path_of(name: str) -> str:
    if name in BUILTIN:
        return BUILTIN[name]
    found = plugins().get(name)
    if found:
        return found
    if ":" in name:
        return name
    raise UnknownBackend(name)


def load_backend(name: str) -> Backend:
    module, cls = path_of(name).split(":")
    return getattr(importlib.import_module(module), cls)()


__all__ = [
    "BUILTIN",
    "DEFAULT",
    "ENTRY_POINT_GROUP",
    "Backend",
    "Test",
    "UnknownBackend",
    "Variant",
    "load_backend",
    "path_of",
    "plugins",
]
