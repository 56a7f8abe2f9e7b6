from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dlcfuzz.cli import main
from tests.helpers import assert_model_file_is_its_graph


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlcfuzz.cli", *args], capture_output=True, text=True)


def test_gen_is_byte_identical_for_a_seed(tmp_path: Path) -> None:
    for d in ("a", "b"):
        assert main(["gen", "-n", "5", "--ops", "1:20", "--seed", "7", "--out", str(tmp_path / d)]) == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert len([n for n in names if n.endswith(".onnx")]) == 5
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n
    # identical, and each model is its own graph (not, say, one graph written five times)
    for i in range(5):
        a = tmp_path / "a"
        assert_model_file_is_its_graph(a / f"g{i:05d}.onnx", (a / f"g{i:05d}.json").read_text())
    assert len({(tmp_path / "a" / n).read_bytes() for n in names if n.endswith(".onnx")}) == 5


def test_metrics_json(tmp_path: Path, capsys) -> None:
    assert main(["gen", "-n", "4", "--ops", "3:6", "--seed", "1", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["metrics", str(tmp_path), "--json", "--op-set", "Add,Relu,Neg"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"] == 4 and out["corpus_size"] == 3


def test_corrupt_model_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.onnx").write_bytes(b"\x00\xffnot a model at all")
    r = run("metrics", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "bad.onnx" in r.stderr and "not a valid ONNX model" in r.stderr


def test_non_onnx_text_file_exit_2(tmp_path: Path) -> None:
    (tmp_path / "x.onnx").write_text("hello")
    r = run("metrics", str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_unknown_operator_exit_2(tmp_path: Path) -> None:
    for cmd in (["gen", "--out", str(tmp_path), "--op-set", "Add,NoSuchOp"],
                ["metrics", str(tmp_path), "--op-set", "NoSuchOp"]):
        r = run(*cmd)
        assert r.returncode == 2, cmd
        assert r.stderr.count("\n") == 1 and "NoSuchOp" in r.stderr


def in_process(capsys, *args: str) -> tuple[int, str]:
    """(exit status, stderr) of the command run in this process (argparse's own errors exit)."""
    capsys.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().err


def test_bad_options_exit_2(tmp_path: Path, capsys) -> None:
    """In this process (ten interpreters cost seconds; test_corrupt_model_is_one_line_exit_2 runs the
    command as a process)."""
    for args in (["gen", "--out", str(tmp_path), "--ops", "5:2"], ["gen", "--out", str(tmp_path), "--opset", "9"],
                 ["gen", "--out", str(tmp_path), "--opset", "13-99"], ["gen", "--out", str(tmp_path), "--opset", "x"],
                 ["gen", "--out", str(tmp_path), "--dtypes", "float33"], ["metrics", str(tmp_path / "missing")],
                 ["gen", "--out", str(tmp_path), "--strategy", "fancy"],
                 ["gen", "--out", str(tmp_path), "--strategy", "gencog", "--p-rej", "1.5"],
                 ["fuzz", "--out", str(tmp_path / "c"), "--strategy", "declgen", "--backends", "ort"],
                 ["fuzz", "--out", str(tmp_path / "c"), "--strategy", "guided", "--backends", "ort",
                  "--coverage-from", str(tmp_path / "nowhere")]):
        rc, err = in_process(capsys, *args)
        assert rc == 2, args
        assert err.count("\n") == 1, err


def test_gen_every_strategy(tmp_path: Path, capsys) -> None:
    for strategy in ("isra", "hirgen", "gencog", "guided", "feedback", "disruptive", "declgen", "randoop"):
        out = tmp_path / strategy
        assert main(["gen", "-n", "3", "--ops", "2:4", "--strategy", strategy, "--out", str(out)]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["strategy"] == strategy and len(list(out.glob("*.onnx"))) == 3
        metas = [json.loads(p.read_text())["meta"] for p in sorted(out.glob("g*.json"))]
        assert all(m["strategy"] == strategy for m in metas)
        if strategy == "disruptive":
            assert sum(summary["violations"].values()) == 3 and all("violation" in m for m in metas)
        if strategy in ("hirgen", "gencog", "guided"):
            assert summary["coverage"]
