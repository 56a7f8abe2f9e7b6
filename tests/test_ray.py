"""Campaigns on a real local Ray instance (``--executor ray``): the store is shaped as in a local run of
the same seeds, a killed actor is replaced without losing committed findings, a test whose executor
dies twice is recorded as lost, and a killed driver resumes from the store."""

from __future__ import annotations

import importlib.util
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'dlcfuzz[ray]')")

from dlcfuzz.migrate.instances import InstanceSet  # noqa: E402
from dlcfuzz.run.campaign import Campaign, CampaignConfig  # noqa: E402
from dlcfuzz.spec import REGISTRY  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OPS = [REGISTRY[o] for o in ("Relu", "Sigmoid", "Neg", "Add", "Mul", "Abs", "Tanh")]
BACKENDS = ["ort", "tests.fake_backends:Planted"]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    # actors and their compiler workers must import dlcfuzz and tests.fake_backends from this checkout
    path = os.pathsep.join(dict.fromkeys([str(ROOT / "src"), str(ROOT), *os.environ.get("PYTHONPATH", "").split(
        os.pathsep)]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path.strip(os.pathsep)}})
    yield
    ray.shutdown()


def campaign(out: Path, executor: str, tests: int, backends=BACKENDS, on_progress=None, **kw) -> Campaign:
    # the allocation draws, and the profiles learned in the order tests finish, differ between
    # executors by design: the comparison is of the executors, so both are off
    kw = {"targeted": False, "allocate": False, **kw}
    cfg = CampaignConfig(out, backends, OPS, budget_seconds=180, max_tests=tests, ops=(1, 3), jobs=2,
                         executor=executor, **kw)
    c = Campaign(cfg, on_progress)
    c.run()
    return c


def rows(out: Path, query: str) -> list[tuple]:
    db = sqlite3.connect(out / "campaign.sqlite")
    try:
        return list(db.execute(query))
    finally:
        db.close()


def shape(out: Path) -> dict:
    """What must not depend on the executor: tests, outcomes, findings, bugs and their bundles."""
    bugs = rows(out, "SELECT signature, oracle, kind, backend, variant, phase, title, first_test, hits, dir "
                     "FROM bugs ORDER BY signature")
    return {
        "tests": rows(out, "SELECT id, seed, n_ops, ops, baseline, finite, input_attempts, valid FROM tests "
                           "ORDER BY id"),
        "outcomes": rows(out, "SELECT test_id, backend, variant, status, phase, unsupported FROM outcomes "
                              "ORDER BY test_id, backend, variant"),
        "findings": rows(out, "SELECT test_id, signature, oracle, kind, backend, variant FROM findings "
                              "ORDER BY test_id, signature, variant"),
        "bugs": bugs,
        "bundles": {b[0]: sorted(p.name for p in (out / b[9]).iterdir()) for b in bugs},
        "schema": rows(out, "SELECT name, sql FROM sqlite_master ORDER BY name"),
    }


def test_ray_campaign_stores_what_a_local_one_does(tmp_path: Path) -> None:
    c = campaign(tmp_path / "ray", "ray", 10)
    assert c.progress.tests == 10 and c.executor.replaced == 0 and c.executor.lost == 0
    campaign(tmp_path / "local", "local", 10)
    ray_shape, local_shape = shape(tmp_path / "ray"), shape(tmp_path / "local")
    assert ray_shape["bugs"], "the planted bugs must be found"
    # first_test may differ (two actors finish in either order); everything else must not
    for s in (ray_shape, local_shape):
        s["bugs"] = [b[:7] + b[8:] for b in s["bugs"]]
    assert ray_shape == local_shape


def test_killed_actor_is_replaced_and_no_committed_finding_is_lost(tmp_path: Path) -> None:
    out = tmp_path / "c"
    seen: dict = {}

    def kill_one(progress) -> None:
        if progress.tests == 3 and not seen:  # mid-campaign: actor 0 has tests in flight
            seen["findings"] = set(rows(out, "SELECT test_id, signature FROM findings"))
            seen["bugs"] = {r[0] for r in rows(out, "SELECT signature FROM bugs")}
            ray.kill(c_holder[0].executor.actors[0])

    c_holder: list[Campaign] = []
    cfg = CampaignConfig(out, BACKENDS, OPS, budget_seconds=180, max_tests=14, ops=(1, 3), jobs=2, executor="ray")
    c = Campaign(cfg, kill_one)
    c_holder.append(c)
    c.run()
    assert seen and seen["bugs"], "the kill happened after findings were committed"
    assert c.executor.replaced == 1
    assert sorted(r[0] for r in rows(out, "SELECT id FROM tests")) == list(range(14))  # completed, retried once
    assert c.executor.lost == 0
    assert seen["findings"] <= set(rows(out, "SELECT test_id, signature FROM findings"))
    assert seen["bugs"] <= {r[0] for r in rows(out, "SELECT signature FROM bugs")}
    # and the campaign found what a local one finds
    campaign(tmp_path / "local", "local", 14)
    assert {r[0] for r in rows(out, "SELECT signature FROM bugs")} == {
        r[0] for r in rows(tmp_path / "local", "SELECT signature FROM bugs")}


class DiesOn:
    """A runner whose actor process dies (not a compiler worker: the actor itself) on given ids."""

    def __init__(self, ids: set[int]) -> None:
        self.ids = ids

    def build(self) -> DiesOn:
        return self

    def share(self, items: list) -> None:
        pass

    def execute(self, item_id: int, payload) -> int:
        if item_id in self.ids:
            os._exit(1)
        time.sleep(0.05)
        return item_id

    def close(self) -> None:
        pass


def test_a_test_whose_actor_dies_twice_is_lost_and_the_rest_goes_on() -> None:
    from dlcfuzz.run.ray_executor import RayExecutor

    recorded, lost = [], []
    ex = RayExecutor(DiesOn({3}), jobs=2)
    ex.run(((i, None) for i in range(8)), None, lambda r: recorded.append(r) or [], lambda i, why: lost.append(i))
    assert sorted(recorded) == [0, 1, 2, 4, 5, 6, 7]
    assert lost == [3] and ex.lost == 1
    assert ex.replaced >= 2  # the actor that ran it first and the replacement that ran it again


def test_guided_coverage_is_merged_at_the_driver(tmp_path: Path) -> None:
    out = tmp_path / "c"
    c = campaign(out, "ray", 8, backends=["ort"], strategy="hirgen")
    assert c.progress.tests == 8
    keys = rows(out, "SELECT criterion, key, test_id FROM coverage")
    assert keys and {k[2] for k in keys} <= set(range(8))
    assert sum(c.coverage.size(k) for k in ("op_dtype", "op_shape", "edge")) == len(keys)


def test_killed_driver_resumes_from_the_store(tmp_path: Path) -> None:
    # enough tests that the driver is still running when the third commit is seen (tiny tests take ~20 ms)
    total = 120
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "dlcfuzz.cli", "fuzz", "--executor", "ray", "--jobs", "2", "--backends",
           ",".join(BACKENDS), "--max-tests", str(total), "--ops", "1:3", "--op-set", ",".join(s.op for s in OPS),
           "--reduce-budget", "0", "--probe-per-op", "0", "--out", str(out)]  # resuming, not probing
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    db = out / "campaign.sqlite"
    deadline = time.monotonic() + 120
    committed = 0
    while time.monotonic() < deadline and committed < 3 and proc.poll() is None:
        time.sleep(0.1)
        if db.exists():
            try:
                with sqlite3.connect(db) as con:
                    committed = con.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
            except sqlite3.OperationalError:  # the tables are being created
                continue
    os.killpg(proc.pid, signal.SIGKILL)  # the driver (and the local Ray instance it started)
    proc.wait()
    before = set(rows(out, "SELECT test_id, signature FROM findings"))
    assert 3 <= len(rows(out, "SELECT id FROM tests")) < total
    r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resuming" in r.stdout and "ray: 2 actors" in r.stdout
    assert sorted(x[0] for x in rows(out, "SELECT id FROM tests")) == list(range(total))
    assert before <= set(rows(out, "SELECT test_id, signature FROM findings"))


@pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="apache-tvm is not installed")
def test_ray_migration_stores_what_a_local_one_does(tmp_path: Path) -> None:
    from dlcfuzz.migrate.campaign import Migration, MigrationConfig
    from tests.test_migrate_campaign import layer_norm, onnx_instance

    instances = tmp_path / "set.sqlite"
    s = InstanceSet(instances)
    s.add(onnx_instance("Relu", {"x": np.ones((2, 3), np.float32)}, ["y"], "relu"))
    s.add(layer_norm(-1, "ln_last_axis"))
    s.add(layer_norm(1, "ln_axis_1"))
    s.close()
    shapes = []
    for executor in ("ray", "local"):
        out = tmp_path / executor
        m = Migration(MigrationConfig(out, [str(instances)], ["tvm", "ort"], jobs=1, executor=executor))
        m.harvest()
        assert m.run().tests == 3
        shapes.append(shape(out))
    assert [b[3] for b in shapes[0]["bugs"]] == ["tvm"]  # TVM's LayerNormalization converter, once
    for s in shapes:
        s["bugs"] = [b[:7] + b[8:] for b in s["bugs"]]
    assert shapes[0] == shapes[1]
