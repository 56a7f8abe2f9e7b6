"""Known upstream bugs: findings whose signature is listed are counted, never re-reported.

A known-bugs file is TOML, one ``[[bug]]`` table per bug already known upstream:

    [[bug]]
    signature = "3f1c0a9e5b7d2c44"        # dlcfuzz's signature of the bug (``dlcfuzz bugs CAMPAIGN`` lists them)
    backend = "tvm-torch"
    versions = ["0.27"]                   # compiler versions it is known in (prefixes); empty: any
    title = "avg_pool2d ignores divisor_override"
    link = "https://github.com/apache/tvm/issues/14795"
    note = "open since 2023 (Relay); the Relax exported-program importer has the same gap"

dlcfuzz ships one (``dlcfuzz/data/known_bugs.toml``) with the bugs its own campaigns found that
are known upstream; ``--known-bugs FILE`` adds a user's own list.  A finding that matches is
stored as a finding (so it is counted) but gets no bundle and no bug row.
"""

from __future__ import annotations

import threading
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


class KnownBugsError(ValueError):
    pass


@dataclass(frozen=True)
class KnownBug:
    signature: str
    backend: str
    title: str
    link: str
    note: str = ""
    versions: tuple[str, ...] = ()

    def applies(self, backend: str, version: str) -> bool:
        if backend != self.backend:
            return False
        return not self.versions or any(version.startswith(v) for v in self.versions)


def packaged() -> Path:
    return Path(str(resources.files("dlcfuzz.data") / "known_bugs.toml"))


class KnownBugs:
    def __init__(self, bugs: list[KnownBug] | None = None) -> None:
        self.by_signature: dict[str, KnownBug] = {b.signature: b for b in bugs or []}

    @classmethod
    def load(cls, paths: list[Path] | None = None, include_packaged: bool = True) -> KnownBugs:
        """The packaged list plus ``paths``; a malformed file raises KnownBugsError (one line)."""
        files = ([packaged()] if include_packaged else []) + list(paths or [])
        bugs: list[KnownBug] = []
        for path in files:
            try:
                data = tomllib.loads(Path(path).read_text())
            except (OSError, tomllib.TOMLDecodeError) as e:
                raise KnownBugsError(f"cannot read known-bugs file {path}: {e}") from None
            for i, entry in enumerate(data.get("bug", [])):
                missing = [k for k in ("signature", "backend", "title", "link") if not entry.get(k)]
                if missing:
                    raise KnownBugsError(f"{path}: bug #{i + 1} lacks {', '.join(missing)}")
                bugs.append(KnownBug(str(entry["signature"]), str(entry["backend"]), str(entry["title"]),
                                     str(entry["link"]), str(entry.get("note", "")),
                                     tuple(str(v) for v in entry.get("versions", []))))
        return cls(bugs)

    def match(self, signature: str, backend: str, version: str) -> KnownBug | None:
        bug = self.by_signature.get(signature)
        return bug if bug is not None and bug.applies(backend, version) else None

    def __len__(self) -> int:
        return len(self.by_signature)


KNOWN, NEW, SEEN = "known", "new", "seen"


class Reporting:
    """What a campaign does with a finding's signature (thread-safe): ``KNOWN`` upstream (count it
    only), ``NEW`` (write a bundle and a bug row) or ``SEEN`` (another hit of a reported bug)."""

    def __init__(self, reported: set[str], known: KnownBugs, versions: dict[str, str]) -> None:
        self.reported, self.known, self.versions = reported, known, versions  # versions: filled as backends start
        self.lock = threading.Lock()

    def classify(self, signature: str, backend: str) -> str:
        if self.known.match(signature, backend, self.versions.get(backend, "")):
            return KNOWN
        with self.lock:
            if signature in self.reported:
                return SEEN
            self.reported.add(signature)
            return NEW
