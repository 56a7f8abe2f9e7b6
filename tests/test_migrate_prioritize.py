"""Prioritization of migrated instances (OPERA and its RQ2 baselines) and APFD over an executed campaign:
pure Python/numpy, no compiler."""

from __future__ import annotations

import math
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from dlcfuzz.migrate.apfd import (
    ALL,
    apfd,
    apfd_table,
    format_improvements,
    format_table,
    improvements,
    load_campaign,
    report,
    time_to_bugs,
)
from dlcfuzz.migrate.instances import Instance, InstanceSet
from dlcfuzz.migrate.prioritize import (
    STRATEGIES,
    _greedy_rounds,
    compiler_count,
    compiler_counts,
    compiler_op_names,
    fast_order,
    instance_features,
    minhash_signatures,
    operator_scores,
    partition,
    prioritize,
    tensor_partition,
)


def inst(iid: int, op: str = "Conv", params: dict | None = None, shapes=((1, 3, 8, 8),), library: str = "onnx",
         dtype: str = "float32") -> Instance:
    tensors = [{"name": f"x{i}", "dtype": dtype, "shape": list(s)} for i, s in enumerate(shapes)]
    return Instance(library, op, "synthetic", f"case{iid}", params or {}, tensors, b"", id=iid)


# -- APFD ----------------------------------------------------------------------------------------------


def test_apfd_hand_computed_example() -> None:
    # 5 tests, 3 bugs: t2 finds b1, t3 finds b1 and b2, t5 finds b3; t1 and t4 find nothing.
    detects = {2: {"b1"}, 3: {"b1", "b2"}, 5: {"b3"}}
    # order 1,2,3,4,5: first detections TF(b1) = 2, TF(b2) = 3, TF(b3) = 5, sum 10, n = 5, m = 3:
    #   APFD = 1 - 10 / (5 * 3) + 1 / (2 * 5) = 1 - 0.6667 + 0.1 = 0.4333
    assert apfd([1, 2, 3, 4, 5], detects) == pytest.approx(1 - 10 / 15 + 1 / 10)
    assert apfd([1, 2, 3, 4, 5], detects) == pytest.approx(0.43333, abs=1e-4)
    # order 3,5,1,2,4: TF(b1) = 1, TF(b2) = 1, TF(b3) = 2, sum 4: APFD = 1 - 4/15 + 0.1 = 0.8333
    assert apfd([3, 5, 1, 2, 4], detects) == pytest.approx(0.83333, abs=1e-4)
    # the worst order: 4,1,2,3,5 -> TF 3, 4, 5 = 12: 1 - 12/15 + 0.1 = 0.3
    assert apfd([4, 1, 2, 3, 5], detects) == pytest.approx(0.3)
    # no bug detected: undefined
    assert math.isnan(apfd([1, 4], detects))
    assert math.isnan(apfd([], detects))


def test_time_to_bugs_counts_each_bug_when_its_first_test_ends() -> None:
    detects = {2: {"b1"}, 3: {"b1", "b2"}, 5: {"b3"}}
    seconds = {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 5.0}
    assert time_to_bugs([1, 2, 3, 4, 5], detects, seconds) == [(3.0, 1), (6.0, 2), (15.0, 3)]
    assert time_to_bugs([3, 5], detects, seconds, start=0.5) == [(3.5, 1), (3.5, 2), (8.5, 3)]


# -- strategies: permutations and errors --------------------------------------------------------------


def mixed_instances(n: int = 40, seed: int = 0) -> list[Instance]:
    r = random.Random(seed)
    ops = [("onnx", "Conv"), ("onnx", "Where"), ("onnx", "Add"), ("torch", "torch.nn.functional.conv2d"),
           ("torch", "torch.linalg.svd")]
    out = []
    for i in range(n):
        library, op = r.choice(ops)
        params = {"axis": r.choice([-2, -1, 0, 1, 3]), "alpha": r.choice([0.0, 1.5, -2.0]),
                  "mode": r.choice(["a", "b"])} if r.random() < 0.8 else {}
        shapes = [tuple(r.choice([0, 1, 4]) for _ in range(r.randint(0, 6))) for _ in range(r.randint(0, 2))]
        out.append(inst(3 * i + 7, op, params, shapes, library))
    return out


def test_every_strategy_returns_a_permutation_of_the_ids() -> None:
    insts = mixed_instances()
    ids = sorted(i.id for i in insts)
    coverage = {i.id: {f"f.py:{(i.id * k) % 23}" for k in range(i.id % 5)} for i in insts[:-5]}
    for strategy in STRATEGIES:
        for seed in (0, 1):
            order = prioritize(strategy, insts, seed=seed, coverage=coverage)
            assert sorted(order) == ids, strategy
    # instances without coverage go last, by id
    for strategy in ("total-cov", "additional-cov"):
        order = prioritize(strategy, insts, coverage=coverage)
        assert order[-5:] == sorted(i.id for i in insts[-5:])
    assert prioritize("opera", []) == []
    assert prioritize("fast", [inst(1)]) == [1]


def test_bad_strategy_or_missing_coverage_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown prioritization strategy 'nope'"):
        prioritize("nope", [inst(1)])
    with pytest.raises(ValueError, match="needs frontend coverage"):
        prioritize("additional-cov", [inst(1)])
    with pytest.raises(ValueError, match="unique"):
        prioritize("opera", [inst(1), inst(1)])


def test_random_is_a_seeded_permutation() -> None:
    insts = mixed_instances()
    assert prioritize("random", insts, seed=3) == prioritize("random", insts, seed=3)
    assert prioritize("random", insts, seed=3) != prioritize("random", insts, seed=4)


# -- OPERA ---------------------------------------------------------------------------------------------


def test_packaged_compiler_counts_and_torch_name_mapping() -> None:
    onnx, ep = compiler_counts("onnx"), compiler_counts("torch")
    assert onnx["Conv"] > 100 and "Where" not in onnx
    assert ep["conv2d"] >= 1 and ep["add"] > 10
    assert compiler_op_names("torch", "torch.nn.functional.conv2d")[0] == "conv2d"
    assert compiler_op_names("torch", "torch.linalg.svd")[0] == "linalg_svd"
    assert compiler_count("torch", "torch.nn.Conv2d", ep) == ep["conv2d"]
    assert compiler_count("torch", "torch.add", ep) == ep["add"]
    assert compiler_count("torch", "torch.nn.LeakyReLU", ep) == ep["leaky_relu"]
    assert compiler_count("torch", "torch.nn.BatchNorm2d", ep) == ep["batch_norm"]
    assert compiler_count("torch", "torch.nn.ConvTranspose2d", ep) == ep["conv_transpose2d"]
    assert compiler_count("torch", "torch.linalg.vector_norm", ep) == ep["linalg_vector_norm"]
    assert compiler_count("torch", "opinfo:nn.functional.conv2d:", ep) == ep["conv2d"]
    assert compiler_count("torch", "torch.Tensor.__rsub__", ep) == ep["rsub"]
    assert compiler_count("torch", "torch.nn.NoSuchThing", ep) == 0
    with pytest.raises(ValueError, match="no compiler-side counts"):
        compiler_counts("keras")
    # the smoothed ratio: (num_dll + 1) / (num_dlc + 1)
    scores = operator_scores([inst(1, "Conv"), inst(2, "Conv"), inst(3, "Where")])
    assert scores[("onnx", "Conv")] == pytest.approx(3 / (onnx["Conv"] + 1))
    assert scores[("onnx", "Where")] == 2.0


def test_partitions_follow_operas_equivalence_classes() -> None:
    assert [partition(v) for v in (-7, -1, 0, 1, 2, 2**20, 2**63 - 1, -(2**63))] == [
        "i:neg", "i:-1", "i:0", "i:1", "i:>1", "i:>1", "i:huge", "i:-huge"]
    assert [partition(v) for v in (-0.5, 0.0, 3.0, math.nan, math.inf, -math.inf)] == [
        "f:neg", "f:0", "f:pos", "f:nan", "f:inf", "f:-inf"]
    assert partition(True) is True and partition("same") == "same" and partition(None) is None
    assert partition([1, 1, 2, 2]) == partition((1, 1, 5, 9)) != partition([1, 1, 2])
    assert partition(np.int64(0)) == "i:0"
    ranks = [tensor_partition({"dtype": "float32", "shape": [2] * r})[2] for r in range(8)]
    assert ranks == [0, 1, 2, 3, 4, 5, ">5", ">5"]
    assert tensor_partition({"dtype": "int64", "shape": [3, 0, 1]}) == ("tensor", "int64", 3, True, True)
    feats = instance_features(inst(1, params={"axis": 1, "mode": "x"}))  # t0, axis, mode: 3 singles, 3 pairs
    assert len(feats) == 6


def test_opera_puts_an_op_the_compiler_rarely_tests_first() -> None:
    counts = {"onnx": {"Conv": 100, "Where": 0}}
    insts = [inst(1, "Conv"), inst(2, "Conv", {"group": 2}), inst(3, "Conv", {"group": 3}), inst(9, "Where")]
    order = prioritize("opera", insts, counts=counts)
    assert order[0] == 9
    # with the packaged TVM counts too: Conv is in 198 of TVM's ONNX tests, Where in none
    assert prioritize("opera", insts)[0] == 9


def test_opera_prefers_new_partitions_over_a_repeat_within_an_op() -> None:
    a = inst(1, "Conv", {"group": 2, "pad": 0})
    repeat = inst(2, "Conv", {"group": 5, "pad": 0})  # group 5 is "> 1" like 2: nothing new
    new = inst(3, "Conv", {"group": 1, "pad": 0})  # group 1: a new class (and new pairs)
    assert prioritize("opera", [a, repeat, new]) == [1, 3, 2]
    # a featureless instance counts once per op and round
    e1, e2 = inst(4, "Add", shapes=()), inst(5, "Add", shapes=())
    x = inst(6, "Add", {"k": 1}, shapes=())
    assert prioritize("opera", [e1, e2, x], counts={"onnx": {"Add": 0}}) == [4, 6, 5]


def reference_rounds(rows: list[tuple], normalized: bool) -> list[int]:
    """The definition, instance by instance, in O(n^2): max score, ties by weight desc then id."""
    remaining = sorted(rows, key=lambda r: r[3])
    covered: dict = {}
    touched: set = set()
    order: list[int] = []
    picked = 0

    def score(r: tuple) -> float:
        group, feats, weight, _ = r
        if feats:
            new = len(feats - covered.get(group, set()))
            return weight * (new / len(feats)) if normalized else float(new)
        return weight if normalized and group not in touched else 0.0

    while remaining:
        best = max(remaining, key=lambda r: (score(r), r[2], -r[3]))
        if score(best) == 0:
            if picked == 0:
                order += [r[3] for r in sorted(remaining, key=lambda r: (-r[2], r[3]))]
                break
            covered.clear()
            touched.clear()
            picked = 0
            continue
        remaining.remove(best)
        order.append(best[3])
        covered.setdefault(best[0], set()).update(best[1])
        touched.add(best[0])
        picked += 1
    return order


def test_greedy_engine_matches_the_definition_on_random_inputs() -> None:
    for trial in range(150):
        r = random.Random(trial)
        rows = []
        for iid in r.sample(range(1000), r.randint(0, 25)):
            group = r.choice(["a", "b", "c"])
            base = 100 * "abc".index(group)  # feature ids are per group (as opera_order interns them)
            feats = frozenset(base + f for f in r.sample(range(12), r.randint(0, 4)))
            rows.append((group, feats, {"a": 0.5, "b": 2.0, "c": 2.0}[group], iid))
        for normalized in (True, False):
            assert _greedy_rounds(rows, normalized) == reference_rounds(rows, normalized), (trial, normalized)


# -- coverage baselines -------------------------------------------------------------------------------


def test_total_and_additional_coverage() -> None:
    insts = [inst(i) for i in (1, 2, 3, 4)]
    coverage = {1: {"f:1", "f:2", "f:3"}, 2: {"f:1", "f:2"}, 3: {"f:4"}}
    assert prioritize("total-cov", insts, coverage=coverage) == [1, 2, 3, 4]
    # after 1, test 2 adds nothing but 3 adds f:4: 3 comes first; then a new round starts for 2
    assert prioritize("additional-cov", insts, coverage=coverage) == [1, 3, 2, 4]


# -- FAST ----------------------------------------------------------------------------------------------


def reference_fast(texts: list[str], seed: int, bands: int, rows: int) -> list[int]:
    """FAST-pw as in the released implementation, naively; ties broken by the same seeded rank."""
    sig = minhash_signatures(texts, bands * rows).tolist()
    perm = np.random.default_rng([seed, 0xFA57]).permutation(len(texts)).tolist()
    remaining = list(perm)  # rank order
    empty = [2**31 - 1] * (bands * rows)
    u = list(empty)
    order = []

    def same_bucket(t: int) -> bool:
        return any(sig[t][b * rows:(b + 1) * rows] == u[b * rows:(b + 1) * rows] for b in range(bands))

    while remaining:
        cands = [t for t in remaining if not same_bucket(t)]
        if not cands:
            u = list(empty)
            cands = list(remaining)
        best = min(cands, key=lambda t: (sum(a == b for a, b in zip(sig[t], u, strict=True)), remaining.index(t)))
        order.append(best)
        remaining.remove(best)
        u = [min(a, b) for a, b in zip(u, sig[best], strict=True)]
    return order


def test_fast_matches_a_naive_fast_pw() -> None:
    r = random.Random(5)
    words = ["conv", "add", "relu", "axis", "float32", "pads", "[1, 2]", "mode", "x", "y"]
    for trial in range(12):
        texts = [" ".join(r.choice(words) for _ in range(r.randint(1, 6))) for _ in range(r.randint(1, 30))]
        for bands, rows in ((10, 1), (4, 2), (3, 3)):
            got = fast_order(texts, seed=trial, bands=bands, rows=rows)
            assert got == reference_fast(texts, trial, bands, rows), (trial, bands, rows)


def test_fast_puts_a_textually_different_test_early() -> None:
    similar = [inst(i, "Conv", {"dilations": [1, 1], "group": 1, "kernel_shape": [3, 3], "pads": [i % 3] * 4})
               for i in range(1, 51)]
    odd = Instance("onnx", "QLinearMatMulZebra", "synthetic", "odd", {"quux": "wwwwwwwwwwwwwwwwwwww"}, [], b"",
                   id=99)
    for seed in range(5):
        order = prioritize("fast", [*similar, odd], seed=seed)
        assert order.index(99) <= 1, seed


def test_fast_and_opera_on_20000_instances() -> None:
    r = random.Random(0)
    ops = ["Conv", "Add", "Resize", "Pad", "Slice", "Gather", "ReduceMean", "Where"]
    insts = [inst(i, r.choice(ops), {"axis": r.randint(-3, 3), "mode": r.choice("abc"), "pads": [r.randint(0, 2)] * 4},
                  [tuple(r.choice([0, 1, 3, 8]) for _ in range(r.randint(0, 6)))]) for i in range(20000)]
    for strategy in ("fast", "opera"):
        assert len(set(prioritize(strategy, insts))) == 20000


# -- a synthetic executed campaign --------------------------------------------------------------------


def make_campaign(folder: Path, with_coverage: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    db_path = folder / "campaign.sqlite"
    store = InstanceSet(db_path)
    insts = [inst(0, "Conv", {"group": 1}), inst(0, "Conv", {"group": 2}), inst(0, "Where"), inst(0, "Add"),
             inst(0, "Add", {"k": 3}), inst(0, "Conv", {"group": 7})]  # the last one never ran
    for i in insts:
        store.add(i)
    store.close()
    db = sqlite3.connect(db_path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE tests (id INTEGER PRIMARY KEY, seconds REAL, valid INTEGER);
        CREATE TABLE findings (test_id INTEGER, signature TEXT, oracle TEXT, kind TEXT, backend TEXT,
                               variant TEXT, phase TEXT, message TEXT);
        CREATE TABLE bugs (signature TEXT, backend TEXT);
        CREATE TABLE frontend_coverage (test_id INTEGER, backend TEXT, lines TEXT);
    """)
    db.executemany("INSERT INTO tests VALUES (?,?,?)", [(1, 1.0, 1), (2, 2.0, 1), (3, 3.0, 1), (4, 4.0, 0),
                                                         (5, 5.0, 1)])
    findings = [(3, "tvm:where", "tvm"), (3, "ort:where", "ort"), (2, "tvm:conv", "tvm"), (4, "tvm:conv", "tvm"),
                (6, "tvm:never", "tvm")]  # test 6 is not in tests: ignored
    db.executemany("INSERT INTO findings VALUES (?,?,'crash','crash',?,'default','import','')", findings)
    db.executemany("INSERT INTO bugs VALUES (?,?)", [("tvm:where", "tvm"), ("ort:where", "ort"), ("tvm:conv", "tvm")])
    if with_coverage:
        db.executemany("INSERT INTO frontend_coverage VALUES (?,?,?)", [
            (1, "tvm", "a.py:1\na.py:2"), (1, "ort", "b.py:9"), (2, "tvm", "a.py:1"), (3, "tvm", "a.py:1\na.py:7"),
            (5, "tvm", "")])
    db.commit()
    db.close()


def test_load_campaign_reads_only_executed_tests(tmp_path: Path) -> None:
    make_campaign(tmp_path / "c")
    camp = load_campaign(tmp_path / "c")
    assert [i.id for i in camp.instances] == [1, 2, 3, 4, 5]
    assert camp.backends == ["ort", "tvm"]
    assert camp.detects["tvm"] == {2: {"tvm:conv"}, 3: {"tvm:where"}, 4: {"tvm:conv"}}
    assert camp.detects["ort"] == {3: {"ort:where"}}
    assert camp.detects[ALL][3] == {"tvm/tvm:where", "ort/ort:where"}
    assert camp.coverage[1] == {"a.py:1", "a.py:2", "b.py:9"} and camp.coverage[5] == set()
    assert camp.coverage_backends == ["ort", "tvm"]
    assert camp.seconds[4] == 4.0 and camp.valid[4] is False
    with pytest.raises(FileNotFoundError):
        load_campaign(tmp_path / "missing")


def test_apfd_table_over_a_synthetic_campaign(tmp_path: Path) -> None:
    make_campaign(tmp_path / "c")
    rows = apfd_table(tmp_path / "c", runs=3, seed=0)
    assert {(r["strategy"], r["backend"]) for r in rows} == {(s, b) for s in STRATEGIES for b in ("ort", "tvm", ALL)}
    by = {(r["strategy"], r["backend"]): r for r in rows}
    assert by[("opera", "tvm")]["bugs"] == 2 and by[("opera", ALL)]["bugs"] == 3
    assert by[("random", "tvm")]["runs"] == 3 and by[("random", "tvm")]["std"] is not None
    assert by[("opera", "tvm")]["runs"] == 1 and by[("opera", "tvm")]["std"] is None
    # opera: Where (test 3, absent from TVM's ONNX tests) comes first and finds both Where bugs at once
    order = prioritize("opera", load_campaign(tmp_path / "c").instances)
    assert order[0] == 3
    # ORT's one bug, found by test 3 at position 1 of 5 tests: APFD = 1 - 1/(5*1) + 1/(2*5) = 0.9
    assert by[("opera", "ort")]["tests"] == 5
    assert by[("opera", "ort")]["apfd"] == pytest.approx(0.9)
    for r in rows:
        assert 0 < r["apfd"] < 1
        assert r["time_half"] <= r["time_all"]
    text = format_table(rows)
    assert "opera" in text and "tvm (2 bugs)" in text and "additional-cov" in text
    assert {i["baseline"] for i in improvements(rows)} == set(STRATEGIES) - {"opera"}
    assert "vs random" in format_improvements(rows)
    assert "prioritization time" in report(tmp_path / "c", runs=2)


def test_apfd_table_skips_coverage_strategies_without_coverage(tmp_path: Path) -> None:
    make_campaign(tmp_path / "c", with_coverage=False)
    rows = apfd_table(tmp_path / "c", runs=2)
    skipped = [r for r in rows if r["strategy"] in ("total-cov", "additional-cov")]
    assert skipped and all(r["note"].startswith("skipped") and math.isnan(r["apfd"]) for r in skipped)
    assert "skipped" in format_table(rows)


def test_opera_scales_each_librarys_scores_in_a_mixed_set() -> None:
    # 30 ONNX node-test instances of one op and one torch sample of another, both untested by the compiler:
    # raw scores 31 and 2 would run all 30 ONNX instances first; per-library scaling interleaves the sources
    onnx_side = [inst(i, "Foo", {"k": i}) for i in range(30)]
    torch_side = [inst(100, "torch.foo", {}, library="torch")]
    order = prioritize("opera", onnx_side + torch_side, counts={"onnx": {}, "torch": {}})
    assert order.index(100) <= 1


def test_load_campaign_keeps_one_librarys_instances(tmp_path: Path) -> None:
    make_campaign(tmp_path / "c")  # every instance is an ONNX one
    assert [i.id for i in load_campaign(tmp_path / "c", "onnx").instances] == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="no instances of library 'torch'"):
        load_campaign(tmp_path / "c", "torch")
