"""run/allocate.py: Thompson sampling of where a campaign spends its CPU (which compiler a test is
generated for, which others run it), by each arm's yield of new bugs per CPU-second."""

from __future__ import annotations

import random

import pytest

from dlcfuzz.run.allocate import Allocator


def test_rate_is_the_posterior_mean_of_bugs_per_cpu_second() -> None:
    a = Allocator()
    assert a.rate("fresh") == pytest.approx(1 / 60)  # the optimistic prior: one bug a minute
    a.credit("tvm", 40.0, 3)
    assert a.rate("tvm") == pytest.approx((1 + 3) / (60 + 40))


def test_a_cost_that_is_no_test_adds_seconds_and_bugs_but_no_pull() -> None:
    a = Allocator()
    a.credit("tvm", 5.0, 1, tests=0)  # reducing a bug: CPU spent, no test run
    a.credit("tvm", 2.0, 0)
    arm = a.arms["tvm"]
    assert (arm.seconds, arm.bugs, arm.pulls) == (7.0, 1, 1)


def test_the_target_always_runs() -> None:
    a = Allocator(seed=3, floor=0.0)
    for _ in range(200):
        best, runs = a.choose(["ort", "tvm", "openvino"])
        assert runs[best]
        assert set(runs) == {"ort", "tvm", "openvino"}


def test_thompson_allocation_follows_yield() -> None:
    a = Allocator(seed=1, floor=0.1)
    for _ in range(50):
        a.credit("rich", 10.0, 2)
        a.credit("poor", 10.0, 0)
    targets = [a.choose(["rich", "poor"])[0] for _ in range(200)]
    assert targets.count("rich") > 190
    runs = [a.choose(["rich", "poor"])[1]["poor"] for _ in range(400)]
    assert sum(runs) / 400 < 0.05  # equal CPU so far: above its floor, the poor arm runs by its draws alone


def test_a_cheap_arm_runs_along_more_often_than_a_dear_one() -> None:
    """Equal yield and equal CPU so far, but one arm takes 100 times the CPU per test: run along with
    the other's tests, it gets a hundredth of the chance (CPU-weighted), and the cheap one nearly always."""
    a = Allocator(seed=5, floor=0.0)
    a.credit("cheap", 100.0, 1, tests=1000)  # 0.1 s a test
    a.credit("dear", 100.0, 1, tests=10)  # 10 s a test
    along = {"cheap": [], "dear": []}
    for _ in range(4000):
        best, runs = a.choose(["cheap", "dear"])
        other = "dear" if best == "cheap" else "cheap"
        along[other].append(runs[other])
    assert len(along["cheap"]) > 1000 and len(along["dear"]) > 1000  # the same posterior: both targeted
    assert sum(along["cheap"]) / len(along["cheap"]) > 0.9
    assert sum(along["dear"]) / len(along["dear"]) < 0.02


def test_the_floor_is_a_share_of_cpu_not_of_tests() -> None:
    """A compiler that takes 10 s a test and finds nothing (Inductor, measured: 9 s a test, no bug in a
    15-minute campaign) keeps about floor / arms of the CPU, not a quarter of the tests (which made it
    77 % of the campaign's CPU)."""
    a, rng = Allocator(seed=2, floor=0.2), random.Random(2)
    pulls = {"fast": 0, "slow": 0}
    for _ in range(20000):
        _, runs = a.choose(["fast", "slow"])
        if runs["fast"]:
            pulls["fast"] += 1
            a.credit("fast", 0.1, int(rng.random() < 0.05))
        if runs["slow"]:
            pulls["slow"] += 1
            a.credit("slow", 10.0, 0)
    slow, fast = a.arms["slow"].seconds, a.arms["fast"].seconds
    assert 0.08 < slow / (slow + fast) < 0.2  # floor / arms = 0.1 of the CPU, plus the prior's exploration
    assert pulls["slow"] < 0.02 * pulls["fast"]


def test_the_same_seed_allocates_alike() -> None:
    def run(seed: int) -> list:
        a = Allocator(seed=seed)
        out = []
        for i in range(50):
            best, runs = a.choose(["a", "b", "c"])
            a.credit(best, 1.0, i % 7 == 0)
            out.append((best, tuple(sorted(runs.items()))))
        return out

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_an_arm_whose_tests_no_other_arm_runs_is_the_target_alone_or_absent() -> None:
    """torch-native programs beside ONNX compilers: the program arm is drawn like any other, but it never
    runs beside another arm's target, and where it is the target nothing else runs."""
    a = Allocator(seed=5, floor=0.0)
    keys = ["ort", "inductor", "inductor-program"]
    targets = set()
    for _ in range(300):
        best, runs = a.choose(keys, alone=["inductor-program"])
        targets.add(best)
        if best == "inductor-program":
            assert runs == {"ort": False, "inductor": False, "inductor-program": True}
        else:
            assert runs[best] and not runs["inductor-program"]
    assert targets == set(keys)


def test_an_arm_that_runs_alone_below_its_floor_of_cpu_is_the_target() -> None:
    """Its floor of CPU is had by being the target: a program arm that has spent nothing while the ONNX
    arms spent is the next target, however poor its draw."""
    a = Allocator(seed=2, floor=0.3)
    a.credit("ort", 10.0, 50)  # a rich ONNX arm
    best, runs = a.choose(["ort", "inductor-program"], alone=["inductor-program"])
    assert best == "inductor-program" and runs == {"ort": False, "inductor-program": True}
    a.credit("inductor-program", 100.0, 0)  # past its floor, it is drawn by its yield again
    assert {a.choose(["ort", "inductor-program"], alone=["inductor-program"])[0] for _ in range(50)} == {"ort"}


def test_the_arms_beside_a_rich_arm_that_runs_alone_keep_their_floor() -> None:
    """Where the arm that runs alone finds the bugs, the others, which cannot run beside it, are the target
    while below their floor of CPU: they are not starved by the Thompson draws."""
    a = Allocator(seed=4, floor=0.3)
    keys, alone = ["ort", "tvm", "inductor-program"], ["inductor-program"]
    a.credit("inductor-program", 10.0, 50)
    targets = []
    for _ in range(60):
        best, runs = a.choose(keys, alone=alone)
        targets.append(best)
        for k, ran in runs.items():
            if ran:
                a.credit(k, 1.0, 0)
    for k in ("ort", "tvm"):
        assert a.arms[k].seconds >= 0.3 / 3 * sum(arm.seconds for arm in a.arms.values()) - 1.0, targets
    assert targets.count("inductor-program") > len(targets) / 2  # still the most targeted by its yield
