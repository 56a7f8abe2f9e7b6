"""A user's own compiler as a plugin: a package that declares a backend in the entry-point group
``dlcfuzz.backends`` is found by name, listed by ``dlcfuzz backends``, and runs a campaign (its
workers find it the same way)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="the plugin wraps onnxruntime, not installed (pip install onnxruntime)")

SRC = str(Path(__file__).resolve().parents[1] / "src")

# ONNX Runtime in a few lines, with one variant that adds 1 to every float output (a bug to find),
# and a decline of its own: it "does not support" Neg, and says so in a rule of the plugin's
PLUGIN = '''
import numpy as np
import onnxruntime as ort

from dlcfuzz.backends.base import Backend, Variant
from dlcfuzz.oracle.unsupported import RULES

RULES.append(("tiny-ort", "compile", r"^TinyUnsupported: no Neg"))


class TinyUnsupported(Exception):
    pass


class TinyOrt(Backend):
    name = "tiny-ort"
    package = "onnxruntime"
    pip = "tinyort-plugin"

    def variants(self):
        return [Variant("plain", {"shift": 0}), Variant("shifted", {"shift": 1})]

    def load(self, test):
        return test.model

    def compile(self, model, variant):
        if b"Neg" in model:
            raise TinyUnsupported("no Neg")
        return ort.InferenceSession(model, providers=["CPUExecutionProvider"]), variant.options["shift"]

    def run(self, compiled, inputs):
        session, shift = compiled
        return [o + shift if o.dtype.kind == "f" else o for o in session.run(None, inputs)]

    def repro_source(self, variant):
        return f"""
import onnxruntime as ort


def run_model(model_path, inputs):
    outs = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"]).run(None, inputs)
    return [o + {variant.options["shift"]} if o.dtype.kind == "f" else o for o in outs]
"""
'''


def install_plugin(site: Path) -> None:
    """What pip leaves in site-packages for a package with an entry point: the module and its dist-info."""
    (site / "tinyort_plugin").mkdir(parents=True)
    (site / "tinyort_plugin" / "__init__.py").write_text(PLUGIN)
    info = site / "tinyort_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyort-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[dlcfuzz.backends]\ntiny-ort = tinyort_plugin:TinyOrt\n")


def dlcfuzz(args: list[str], site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{site}"}
    return subprocess.run([sys.executable, "-m", "dlcfuzz.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_plugin_listed_and_run_in_a_campaign(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_plugin(site)

    listed = dlcfuzz(["backends", "--no-variants"], site, tmp_path)
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("tiny-ort"))
    assert line.split()[1:4] == ["0.1", "plugin", "tinyort_plugin:TinyOrt"]
    assert "variants: plain, shifted" in listed.stdout

    out = tmp_path / "campaign"
    run = dlcfuzz(["fuzz", "--backends", "tiny-ort", "--max-tests", "3", "--budget", "120s", "--reduce-budget", "0",
                   "--op-set", "Add,Relu,Neg", "--ops", "2:3", "--dtypes", "float32", "--out", str(out),
                   # every variant on every test, and the declines planted in the plugin not steered around
                   "--untargeted", "--no-allocation"],
                  site, tmp_path)
    assert run.returncode == 0, run.stderr
    db = sqlite3.connect(out / "campaign.sqlite")
    statuses = db.execute("SELECT variant, status, unsupported, error FROM outcomes "
                          "WHERE backend = 'tiny-ort'").fetchall()
    assert len(statuses) == 2 * 3  # both variants of every test
    assert {v for v, status, _, _ in statuses if status == "ok"} == {"plain", "shifted"}
    declined = [(u, e) for _, status, u, e in statuses if status != "ok"]
    assert declined and all(u == 1 and "TinyUnsupported" in e for u, e in declined)
    assert not db.execute("SELECT 1 FROM bugs WHERE title LIKE '%TinyUnsupported%'").fetchall()
    bug_dir = db.execute("SELECT dir FROM bugs WHERE backend = 'tiny-ort' AND variant = 'shifted'").fetchone()[0]
    # the bundle's repro.py needs only the plugin's compiler, and shows the planted shift
    repro = subprocess.run([sys.executable, str(out / bug_dir / "repro.py")], capture_output=True, text=True,
                           cwd=tmp_path, timeout=120)
    assert repro.returncode == 1 and repro.stdout.startswith("reproduced"), repro.stdout + repro.stderr


def test_unknown_name_lists_plugins(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_plugin(site)
    run = dlcfuzz(["fuzz", "--backends", "no-such", "--out", str(tmp_path / "c")], site, tmp_path)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "tiny-ort" in run.stderr


def test_rule_appended_after_first_use_counts() -> None:
    """A plugin imported late (after some error was already judged) still has its decline rules."""
    from dlcfuzz.oracle.unsupported import RULES, is_unsupported

    assert not is_unsupported("late-plugin", "compile", "LateUnsupported", "no Foo")
    RULES.append(("late-plugin", "compile", r"^LateUnsupported: no Foo"))
    try:
        assert is_unsupported("late-plugin", "compile", "LateUnsupported", "no Foo")
    finally:
        RULES.pop()
