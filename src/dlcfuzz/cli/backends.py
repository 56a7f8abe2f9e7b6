"""``dlcfuzz backends``: every backend, built in or plugin, with its version, variants and availability."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    bl = sub.add_parser("backends", help="list every backend (built in, and plugins of the entry-point group "
                                         "dlcfuzz.backends): version, variants, availability")
    bl.add_argument("--no-variants", action="store_true",
                    help="ask each backend in this process rather than in a worker (faster; no crash isolation)")
    bl.set_defaults(func=cmd_backends)


def tested_versions() -> dict[str, list[str]]:
    """The compiler versions dlcfuzz was tested with, per backend (``dlcfuzz/data/tested.toml``)."""
    import tomllib
    from importlib.resources import files

    return tomllib.loads(files("dlcfuzz.data").joinpath("tested.toml").read_text())


def _tested(name: str, version: str, tested: dict[str, list[str]]) -> str:
    """"; tested: 1.31.1", and whether the installed version is one of them."""
    known = tested.get(name)
    if not known:
        return ""
    if version in known:
        return f"; tested: {', '.join(known)}"
    return (f"; tested: {', '.join(known)} (not {version}: it runs, its support profile probed on first use "
            "where dlcfuzz ships none)")


def cmd_backends(args: argparse.Namespace) -> int:
    """Every backend, built in or plugin: version, variants (as its worker reports them) and availability."""
    from dlcfuzz.backends import BUILTIN, DEFAULT, load_backend, plugins
    from dlcfuzz.run.worker import PhaseLimits, WorkerDied, WorkerPool

    # origin: "default" (built in, and run when --backends is not given), "built-in", or "plugin"
    rows = ([(n, p, "default" if n in DEFAULT else "built-in") for n, p in BUILTIN.items()]
            + [(n, p, "plugin") for n, p in plugins().items()])
    pool = WorkerPool(PhaseLimits())
    tested = tested_versions()
    try:
        for name, path, origin in rows:
            try:
                backend = load_backend(name)
                ok, why = backend.available()
            except Exception as e:  # a plugin that cannot even be imported: say why, list the rest
                ok, why = False, f"{name}: cannot load {path}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            if ok and not args.no_variants:
                try:
                    version, described = pool.describe(name)
                except WorkerDied as e:
                    ok, why = False, f"{name}: its worker could not start: {str(e).splitlines()[0][:200]}"
            if not ok:
                print(f"{name:<15} unavailable  {origin:<8} {path}\n{'':<15} {why}")
                continue
            if args.no_variants:
                version, described = backend.version(), [(v.name, v.options) for v in backend.variants()]
            variants = ", ".join(v for v, _ in described)
            print(f"{name:<15} {version:<12} {origin:<8} {path}\n{'':<15} variants: {variants}"
                  f"{_tested(name, version, tested)}")
    finally:
        pool.close()
    return 0
