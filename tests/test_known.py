"""run/known.py: bugs known upstream (counted, never re-reported) and what a campaign does with a
finding's signature: known, new, or seen again."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlcfuzz.run.known import KNOWN, NEW, SEEN, KnownBug, KnownBugs, KnownBugsError, Reporting, packaged

ENTRY = '''[[bug]]
signature = "{sig}"
backend = "{backend}"
versions = {versions}
title = "a title"
link = "https://example.org/issue/1"
'''


def write(path: Path, *entries: tuple[str, str, str]) -> Path:
    path.write_text("\n".join(ENTRY.format(sig=s, backend=b, versions=v) for s, b, v in entries))
    return path


def test_the_packaged_list_loads_and_every_entry_is_complete() -> None:
    known = KnownBugs.load()
    assert len(known) > 0 and packaged().is_file()
    for sig, bug in known.by_signature.items():
        assert sig == bug.signature and len(sig) == 16 and int(sig, 16) >= 0
        assert bug.backend and bug.title and bug.link.startswith("http")


def test_a_bug_matches_its_backend_and_listed_version_prefixes_only(tmp_path: Path) -> None:
    f = write(tmp_path / "k.toml", ("aaaa", "tvm", '["0.27"]'), ("bbbb", "openvino", "[]"))
    known = KnownBugs.load([f], include_packaged=False)
    assert len(known) == 2
    assert known.match("aaaa", "tvm", "0.27.0.post1") is not None
    assert known.match("aaaa", "tvm", "0.28.0") is None  # fixed there, or not known there
    assert known.match("aaaa", "tvm-torch", "0.27.0") is None  # another backend's signature space
    assert known.match("bbbb", "openvino", "2026.4.1") is not None  # no versions: any
    assert known.match("cccc", "tvm", "0.27") is None


def test_a_users_list_adds_to_the_packaged_one(tmp_path: Path) -> None:
    f = write(tmp_path / "k.toml", ("aaaa", "tvm", "[]"))
    assert len(KnownBugs.load([f])) == len(KnownBugs.load()) + 1


def test_a_malformed_file_is_one_line_naming_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[bug]]\nsignature = "aaaa"\nbackend = "tvm"\n')  # no title, no link
    with pytest.raises(KnownBugsError, match=r"bug #1 lacks title, link") as e:
        KnownBugs.load([bad], include_packaged=False)
    assert "\n" not in str(e.value)
    bad.write_text("[[bug]\n")
    with pytest.raises(KnownBugsError, match="cannot read"):
        KnownBugs.load([bad], include_packaged=False)
    with pytest.raises(KnownBugsError, match="cannot read"):
        KnownBugs.load([tmp_path / "missing.toml"], include_packaged=False)


def test_a_signature_is_new_once_then_seen_and_a_known_one_is_only_counted() -> None:
    known = KnownBugs([KnownBug("kkkk", "tvm", "t", "l", versions=("0.27",))])
    r = Reporting({"old1"}, known, {"tvm": "0.27.0"})
    assert r.classify("kkkk", "tvm") == KNOWN
    assert r.classify("kkkk", "tvm") == KNOWN  # never becomes reported
    assert r.classify("old1", "tvm") == SEEN  # reported before the campaign resumed
    assert r.classify("nnnn", "tvm") == NEW
    assert r.classify("nnnn", "tvm") == SEEN
    r.versions["openvino"] = "2026.4.1"
    assert r.classify("kkkk", "openvino") == NEW  # known for tvm only


def test_a_known_bug_of_another_version_is_new() -> None:
    known = KnownBugs([KnownBug("kkkk", "tvm", "t", "l", versions=("0.27",))])
    assert Reporting(set(), known, {"tvm": "0.28.1"}).classify("kkkk", "tvm") == NEW
    assert Reporting(set(), known, {}).classify("kkkk", "tvm") == NEW  # the backend not started yet
