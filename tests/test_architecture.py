"""The shape of the code, checked on its source: which package may import which (docs/architecture.md
holds the same table), and SQL only inside the two stores.  Both walk the installed dlcfuzz's files
with ``ast``; nothing is imported or run."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import dlcfuzz

SRC = Path(dlcfuzz.__file__).parent

# package -> the dlcfuzz packages its modules may import (besides itself and the root modules).  Lower
# layers first; an arrow never points up.  docs/architecture.md explains each row.
ALLOWED: dict[str, frozenset[str]] = {
    "ir": frozenset(),
    "spec": frozenset({"ir"}),
    "solve": frozenset({"ir", "spec"}),
    "gen": frozenset({"ir", "spec", "solve"}),
    "export": frozenset({"ir", "spec"}),
    "values": frozenset({"ir", "export"}),
    "backends": frozenset({"ir", "spec", "export", "values"}),
    "oracle": frozenset({"ir", "spec", "export", "values", "backends"}),
    "run": frozenset({"ir", "spec", "solve", "gen", "export", "values", "backends", "oracle"}),
    "migrate": frozenset({"ir", "spec", "export", "values", "backends", "oracle", "run"}),
    "metrics": frozenset({"ir"}),
    "report": frozenset({"run", "metrics"}),
    "cli": frozenset({"ir", "spec", "solve", "gen", "export", "values", "backends", "oracle", "run", "migrate",
                      "metrics", "report"}),
}
# the root of the package: dlcfuzz/__init__.py (the version), seeds.py (a test's seed) and data/ (packaged
# JSON and TOML, no code); they import nothing of dlcfuzz, and every package may import them
ROOT_MODULES = frozenset({"__init__", "seeds", "data"})

# upward imports that exist and are not fixed yet, each with its reason: (module, or a folder ending in
# "/", and the package it imports).  An entry that no longer matches an import fails too, so that a fixed
# one leaves this list.
EXEMPT: dict[tuple[str, str], str] = {
    ("ir/graph.py", "spec"): "Graph.onnx_nodes writes a composite operator (spec/sequence.py) as its chain; "
                             "export/torch.py, which imports no dlcfuzz, reads it off the graph by duck typing",
    ("spec/torch/", "solve"): "the torch-native specs register their interval rules in solve.intervals' "
                              "TRANSFER and DOMAINS tables under their names (the ONNX specs' rules live in "
                              "solve/intervals.py itself)",
}

# the two stores: every SQL statement of dlcfuzz lives in them
STORES = frozenset({"run/store.py", "migrate/instances.py"})
SQL = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+(?:OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|"
                 r"\bDELETE\s+FROM\b|\b(?:CREATE|ALTER|DROP)\s+(?:TABLE|INDEX|VIEW)\b|\bPRAGMA\s+\w+|"
                 r"\bBEGIN\s+(?:IMMEDIATE|EXCLUSIVE|DEFERRED)\b")


def _modules(root: Path = SRC) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(root).as_posix(), ast.parse(path.read_text(), str(path))


def _layer(rel: str) -> str:
    """The package a module belongs to ('run/store.py' -> 'run'), or a root module's name."""
    first = rel.split("/")[0]
    return first.removesuffix(".py") if "/" not in rel else first


def _imported(tree: ast.Module, root: Path) -> Iterator[tuple[int, str]]:
    """(line, the dlcfuzz package or root module imported) of every import, at any depth (the lazy
    imports inside functions count the same)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "dlcfuzz":
            # from dlcfuzz import run (a package or module), or __version__ (a name of dlcfuzz/__init__.py)
            names = [f"dlcfuzz.{a.name}" if (root / a.name).is_dir() or (root / f"{a.name}.py").is_file()
                     else "dlcfuzz" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom):  # relative: resolved against the package it is in
            raise AssertionError(f"line {node.lineno}: relative import; dlcfuzz imports by absolute names")
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "dlcfuzz":
                yield node.lineno, parts[1] if len(parts) > 1 else "__init__"


def layer_violations(root: Path = SRC) -> list[str]:
    """Every import of a package that the importing module's package may not import, not exempted; and
    every exemption that matches no import any more."""
    found, used = [], set()
    for rel, tree in _modules(root):
        layer = _layer(rel)
        if layer not in ALLOWED and layer not in ROOT_MODULES:
            found.append(f"{rel}: package {layer!r} is in no row of the allowed-imports table")
            continue
        allowed = frozenset() if layer in ROOT_MODULES else ALLOWED[layer] | ROOT_MODULES
        for line, target in _imported(tree, root):
            if target == layer or target in allowed:
                continue
            exempt = next((key for key in EXEMPT if key[1] == target and (
                rel == key[0] or (key[0].endswith("/") and rel.startswith(key[0])))), None)
            if exempt is not None:
                used.add(exempt)
                continue
            found.append(f"{rel}:{line}: {layer} imports {target} (allowed: {', '.join(sorted(allowed)) or 'nothing'})")
    found += [f"exemption {rel} -> {target} matches no import any more: remove it" for rel, target in EXEMPT
              if (rel, target) not in used]
    return found


def sql_outside_the_stores(root: Path = SRC) -> list[str]:
    """Every SQL statement, cursor call or connection outside the two stores: an ``execute`` given a
    string, any ``executemany`` / ``executescript``, ``sqlite3.connect``, and any string that reads as SQL."""
    found = []
    for rel, tree in _modules(root):
        if rel in STORES:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr = node.func.attr
                first = node.args[0] if node.args else None
                if attr in ("executemany", "executescript") or (
                        attr == "execute" and isinstance(first, (ast.Constant, ast.JoinedStr))
                        and not (isinstance(first, ast.Constant) and not isinstance(first.value, str))):
                    found.append(f"{rel}:{node.lineno}: .{attr}(...) runs SQL")
                elif attr == "connect" and isinstance(node.func.value, ast.Name) and node.func.value.id == "sqlite3":
                    found.append(f"{rel}:{node.lineno}: sqlite3.connect opens a database")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                found.append(f"{rel}:{node.lineno}: SQL in a string: {node.value[:60]!r}")
    return found


def test_no_module_imports_a_higher_layer() -> None:
    found = layer_violations()
    assert not found, "imports against the layering (tests/test_architecture.py ALLOWED):\n" + "\n".join(found)


def test_every_package_has_a_row_and_the_table_points_one_way() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()} - ROOT_MODULES
    assert packages == set(ALLOWED), packages ^ set(ALLOWED)
    order = list(ALLOWED)  # lower layers first: a package may import only packages listed before it
    for pkg, allowed in ALLOWED.items():
        assert all(order.index(a) < order.index(pkg) for a in allowed), pkg


def test_no_sql_outside_the_two_stores() -> None:
    found = sql_outside_the_stores()
    assert not found, f"SQL belongs in {' or '.join(sorted(STORES))}:\n" + "\n".join(found)


def test_the_benchmarks_read_campaigns_through_the_store() -> None:
    benchmarks = Path(__file__).resolve().parent.parent / "benchmarks"
    if not benchmarks.is_dir():
        pytest.skip(f"no benchmarks/ beside {Path(__file__).parent} (an installed copy of the tests)")
    found = sql_outside_the_stores(benchmarks)
    assert not found, "a benchmark reads a campaign with run.store.StoreReader:\n" + "\n".join(found)


@pytest.mark.parametrize("text, is_sql", [
    ("SELECT id FROM tests", True),
    ("INSERT OR IGNORE INTO coverage VALUES (?,?,?)", True),
    ("UPDATE bugs SET hits = hits + 1", True),
    ("DELETE FROM instances WHERE source = ?", True),
    ("PRAGMA table_info(bugs)", True),
    ("SequenceInsert", False),
    ("select a dtype from the profile", False),
    ("the tests of INSERT_ERASE", False),
])
def test_the_sql_pattern_tells_statements_from_prose(text: str, is_sql: bool) -> None:
    assert bool(SQL.search(text)) == is_sql


def test_both_checks_fail_on_planted_violations(tmp_path: Path) -> None:
    """A copy of the source with one upward import and one query outside the stores planted in it."""
    for pkg in ("ir", "report"):
        (tmp_path / pkg).mkdir()
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "ir" / "__init__.py").write_text("from dlcfuzz.run.store import Store\n")
    (tmp_path / "report" / "__init__.py").write_text(
        "def n(store):\n    return store.db.execute('SELECT COUNT(*) FROM bugs').fetchone()[0]\n")
    layers = layer_violations(tmp_path)
    assert any(v.startswith("ir/__init__.py:1: ir imports run") for v in layers), layers
    sql = sql_outside_the_stores(tmp_path)
    assert any("report/__init__.py:2: .execute" in v for v in sql), sql
    assert any("SQL in a string" in v for v in sql), sql
