"""The bugs of a campaign folded under their roots, ordered most different first, and counted once for
every command that lists or counts them (``dlcfuzz bugs``, ``bugs --json``, the summary line that
``fuzz``, ``probe`` and ``store rebuild`` print, and the HTML report).

**Roots.**  A bug is one signature (a bundle ``bugs/SIGNATURE``).  Bugs with one root cause are one
entry, the *root*, with the others (its *members*) folded under it.  The store says which bugs share a
root cause in two fields of a bug's row (``Store.merge_root`` writes both): ``root``, the key of its
root cause (``dedup.reduced_root`` and any later trigger analysis), and ``same_as``, the signature of
the bug it was merged into.  Two bugs of one category are folded together when one names the other in
``same_as`` or both have the same non-empty ``root``; the first found of a group (``first_seen``, then
signature) is its root.  Bugs of different categories are never folded together: a bug whose reduced
case moved to the baseline's issues (``Store.set_category``) is its own root there, and is counted
there.

**Order.**  As "Taming Compiler Fuzzers" (Chen et al., PLDI 2013) does, the roots of each category
are listed furthest-point-first: the first found root first, then, again and again, the root whose
distance to the nearest one already listed is the largest (ties: the first found), so that the most
different bugs come first and near-duplicates that dedup missed sink to the end.  The distance
between two roots ``a`` and ``b`` is::

    8 * [backends differ] + 4 * [categories or kinds differ]
      + 2 * jaccard(operators of a, operators of b) + 1 * jaccard(message tokens of a, of b)

``jaccard`` is the Jaccard distance of two sets (1 - |a & b| / |a | b|; 0 for two empty sets), so
every term outweighs all the terms after it together (8 > 4 + 2 + 1, 4 > 2 + 1, 2 > 1): a root on
another backend is further than any root on the same one, and so on.  A bug's operators are those of
its reduced case (``reduced/graph.json``) where it was reduced, else those of the test that found it;
its message tokens are the words (3 characters or more, lower case) of its title and its first
finding's message.

**Counts.**  ``BugList`` counts roots per category and per backend, and members apart; every command
reads it through ``read`` and prints ``summary_line``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dlcfuzz.oracle.findings import CATEGORIES, COMPILER

__all__ = ["COMPILER", "Bug", "BugList", "bug_from_entry", "distance", "fold", "furthest_first", "jaccard", "order",
           "read", "summary_line"]

# the distance's terms, each larger than the sum of those after it (the module docstring)
W_BACKEND, W_KIND, W_OPS, W_MESSAGE = 8.0, 4.0, 2.0, 1.0
_TOKEN = re.compile(r"[a-z_][a-z0-9_]{2,}")
_MESSAGE_CHARS = 2000  # of the first finding's message (a traceback's head says what it is)


class BugSource(Protocol):
    """What ``read`` needs of a store: ``Store`` and ``StoreReader`` both have it."""

    def bug_entries(self) -> list[dict[str, Any]]: ...


@dataclass
class Bug:
    """One bug (one signature) as the store lists it, with where it is folded."""

    signature: str
    category: str
    backend: str
    oracle: str = ""
    kind: str = ""
    variant: str = ""
    phase: str = ""
    title: str = ""
    first_test: int = 0
    hits: int = 0
    dir: str = ""
    first_seen: float = 0.0
    root_key: str = ""  # the store's ``root``: the key of its root cause ("" where none was found)
    same_as: str = ""  # the store's ``same_as``: the signature it was merged into ("" where none)
    variants: list[str] = field(default_factory=list)
    ops: frozenset[str] = frozenset()
    message: str = ""
    row: dict[str, Any] = field(default_factory=dict, repr=False)  # every stored column, as read
    root: str = ""  # the signature of the entry it is folded under (its own for a root); set by ``fold``
    members: list[Bug] = field(default_factory=list, repr=False)  # a root's folded bugs, in the order found

    @property
    def is_root(self) -> bool:
        return self.root == self.signature

    @property
    def tokens(self) -> frozenset[str]:
        return frozenset(_TOKEN.findall(f"{self.title} {self.message[:_MESSAGE_CHARS]}".lower()))

    def as_json(self, folder: Path) -> dict[str, Any]:
        """What ``dlcfuzz bugs --json`` prints of it (``bundle``: its folder's path)."""
        return {"signature": self.signature, "root": self.root, "category": self.category, "backend": self.backend,
                "title": self.title, "bundle": str(folder / self.dir), "oracle": self.oracle, "kind": self.kind,
                "variant": self.variant, "variants": self.variants, "phase": self.phase, "hits": self.hits,
                "first_test": self.first_test, "first_seen": self.first_seen, "root_cause": self.root_key,
                "members": [m.signature for m in self.members] if self.is_root else []}


def bug_from_entry(e: dict[str, Any]) -> Bug:
    """A ``Bug`` from one of ``Store.bug_entries``'s dicts."""
    return Bug(str(e["signature"]), str(e.get("category") or COMPILER), str(e.get("backend", "")),
               str(e.get("oracle", "")), str(e.get("kind", "")), str(e.get("variant", "")), str(e.get("phase", "")),
               str(e.get("title", "")), int(e.get("first_test") or 0), int(e.get("hits") or 0),
               str(e.get("dir") or f"bugs/{e['signature']}"), float(e.get("first_seen") or 0.0),
               str(e.get("root") or ""), str(e.get("same_as") or ""), list(e.get("variants") or []),
               frozenset(e.get("ops") or ()), str(e.get("message") or ""), dict(e))


# -- folding ----------------------------------------------------------------------------------------
def _found(b: Bug) -> tuple[float, str]:
    return (b.first_seen, b.signature)


def fold(bugs: Iterable[Bug]) -> list[Bug]:
    """Sets each bug's ``root`` and each root's ``members`` (the module docstring); returns the roots
    in the order found."""
    bugs = sorted(bugs, key=_found)
    by_sig = {b.signature: b for b in bugs}
    parent = {b.signature: b.signature for b in bugs}

    def find(s: str) -> str:
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:  # the first found stays the root
            first, other = sorted((ra, rb), key=lambda s: _found(by_sig[s]))
            parent[other] = first

    first_of_key: dict[tuple[str, str], str] = {}
    for b in bugs:
        target = by_sig.get(b.same_as)
        if target is not None and target.category == b.category:
            union(b.signature, target.signature)
        if b.root_key:
            key = (b.category, b.root_key)
            if key in first_of_key:
                union(b.signature, first_of_key[key])
            else:
                first_of_key[key] = b.signature
    for b in bugs:
        b.root, b.members = find(b.signature), []
    for b in bugs:
        if not b.is_root:
            by_sig[b.root].members.append(b)
    return [b for b in bugs if b.is_root]


# -- ordering ---------------------------------------------------------------------------------------
def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """The Jaccard distance of two sets (0 for two empty sets)."""
    union = a | b
    return 1.0 - len(a & b) / len(union) if union else 0.0


def distance(a: Bug, b: Bug) -> float:
    """The distance between two roots (the module docstring)."""
    return (W_BACKEND * (a.backend != b.backend) + W_KIND * (a.category != b.category or a.kind != b.kind)
            + W_OPS * jaccard(a.ops, b.ops) + W_MESSAGE * jaccard(a.tokens, b.tokens))


def furthest_first(roots: Sequence[Bug]) -> list[Bug]:
    """``roots`` furthest-point-first: the first found, then each time the one furthest from its nearest
    already chosen (ties: the first found)."""
    left = sorted(roots, key=_found)
    if not left:
        return []
    chosen = [left.pop(0)]
    nearest = [distance(chosen[0], b) for b in left]
    while left:
        i = max(range(len(left)), key=lambda j: (nearest[j], -j))  # the largest; the first found of ties
        pick = left.pop(i)
        nearest.pop(i)
        chosen.append(pick)
        nearest = [min(d, distance(pick, b)) for d, b in zip(nearest, left, strict=True)]
    return chosen


# -- the list every command reads ---------------------------------------------------------------------
def _category_rank(category: str) -> tuple[int, str]:
    return (CATEGORIES.index(category), "") if category in CATEGORIES else (len(CATEGORIES), category)


@dataclass
class BugList:
    """A campaign's bugs: ``roots`` by category (``oracle.CATEGORIES``'s order, compiler bugs first),
    each category's roots furthest-point-first."""

    roots: list[Bug]

    def of(self, category: str) -> list[Bug]:
        """The roots of one category, furthest-point-first."""
        return [r for r in self.roots if r.category == category]

    def every(self, category: str | None = None) -> list[Bug]:
        """Every bug, listed or merged (of one category, if given): each root followed by its members."""
        return [b for r in self.roots if category in (None, r.category) for b in (r, *r.members)]

    def categories(self) -> dict[str, int]:
        """Roots per category."""
        return dict(Counter(r.category for r in self.roots))

    def per_backend(self, category: str = COMPILER) -> dict[str, int]:
        """Roots of one category per backend."""
        return dict(sorted(Counter(r.backend for r in self.of(category)).items()))

    def members(self, category: str | None = None) -> int:
        """Bugs folded under a root (of one category, if given)."""
        return sum(len(r.members) for r in self.roots if category in (None, r.category))


def order(bugs: Iterable[Bug]) -> BugList:
    """Folds ``bugs`` and orders the roots (the module docstring)."""
    roots = fold(bugs)
    cats = sorted({r.category for r in roots}, key=_category_rank)
    return BugList([r for c in cats for r in furthest_first([r for r in roots if r.category == c])])


def _reduced_ops(bundle: Path) -> frozenset[str] | None:
    """The operators of a bundle's reduced case (None where it has none readable)."""
    try:
        graph = json.loads((bundle / "reduced" / "graph.json").read_text())
        return frozenset(str(n["op"]) for n in graph["nodes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read(store: BugSource, folder: Path) -> BugList:
    """The campaign's bugs in ``folder``, from its open store (``Store`` or ``StoreReader``): the one
    function every command lists and counts bugs through."""
    bugs = [bug_from_entry(e) for e in store.bug_entries()]
    for b in bugs:
        reduced = _reduced_ops(folder / b.dir)
        if reduced:
            b.ops = reduced
    return order(bugs)


_ISSUES = (("baseline", "baseline issues"), ("exporter", "exporter issues"), ("noise", "rounding noise"),
           ("undefined", "undefined behaviour (e.g. integer overflow)"),
           ("unconfirmed", "crashes a fresh process did not repeat"))
# categories counted only where a campaign has them: ``dlcfuzz retriage --rejudge``'s
_RARE = {"declined": "recorded crashes that read as declines now"}


def summary_line(bugs: BugList, declines: int) -> str:
    """One line: the compiler bugs (roots) per backend first, the bugs folded under a root apart, then
    baseline issues, exporter issues, ... and declines, each counted apart (roots)."""
    per_backend = bugs.per_backend(COMPILER)
    listed = ", ".join(f"{b} {n}" for b, n in per_backend.items()) or "none"
    counts = bugs.categories()
    issues = "".join(f"; {label}: {counts.get(c, 0)}" for c, label in _ISSUES)
    others = sorted(set(counts) - {COMPILER, *(c for c, _ in _ISSUES)})
    issues += "".join(f"; {_RARE.get(c, f'{c} issues')}: {counts[c]}" for c in others)
    return (f"compiler bugs: {sum(per_backend.values())} ({listed}); merged into a root cause: {bugs.members()}"
            f"{issues}; declines (unsupported, not bugs): {declines}")
