"""The torch backend (eager and TorchInductor) on tiny generated graphs, with the real compiler."""

from __future__ import annotations

import ast
import sys
import warnings

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from dlcfuzz.backends import load_backend
from dlcfuzz.backends.base import Test
from dlcfuzz.backends.inductor import InductorBackend
from dlcfuzz.export.onnx import to_bytes, to_onnx
from dlcfuzz.ir.hints import feed_array
from dlcfuzz.spec import REGISTRY
from tests.helpers import ort_generator

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, imported by Inductor

OPS = ("Conv", "Add", "Relu", "ReduceMean", "Softmax", "Slice", "Concat", "Transpose")


def _test(seed: int = 3) -> tuple[object, Test]:
    gen = ort_generator([REGISTRY[op] for op in OPS], op_range=(3, 5), dtypes=("float32",))
    g = gen.generate(seed)
    rng = np.random.default_rng(seed)
    return g, Test(to_bytes(g), g.to_json(), {v.name: feed_array(rng, v) for v in g.inputs})


def test_identity_and_support() -> None:
    b = load_backend("inductor")
    assert isinstance(b, InductorBackend) and b.available() == (True, "")
    assert b.version().startswith("2.")
    assert [v.name for v in b.variants()] == ["eager", "inductor", "inductor-dynamic"]
    assert b.supports({"Conv", "Add"}) and not b.supports({"Conv", "MaxRoiPool"})
    g, _ = _test()
    assert b.supports({n.op for n in g.nodes}, g)
    g.values[g.inputs[0].name].type = type(g.inputs[0].type)(g.inputs[0].type.shape, "uint16")
    assert not b.supports({n.op for n in g.nodes}, g)


def test_variants_match_the_reference_and_their_repro(tmp_path, monkeypatch) -> None:
    b = InductorBackend()
    g, test = _test()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ReferenceEvaluator(to_onnx(g)).run(None, test.inputs)
    model_path = tmp_path / "model.onnx"
    model_path.write_bytes(test.model)
    imported = b.load(test)
    for variant in b.variants():
        got = b.run(b.compile(imported, variant), test.inputs)
        assert len(got) == len(g.outputs)
        for o, w in zip(got, want, strict=True):
            np.testing.assert_allclose(o, w, rtol=1e-4, atol=1e-5, err_msg=variant.name)
        # the repro runs without dlcfuzz and gives the very same outputs
        source = b.repro_source(variant)
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "dlcfuzz", None)
            namespace: dict = {"__name__": "repro"}
            exec(compile(source, "repro.py", "exec", dont_inherit=True), namespace)
            again = namespace["run_model"](str(model_path), test.inputs)
        for o, r in zip(got, again, strict=True):
            np.testing.assert_array_equal(o, r, err_msg=variant.name)


def test_model_source_is_standalone(monkeypatch) -> None:
    """The whole source, not just the Model class, imports nothing of dlcfuzz and runs without it."""
    g, test = _test(5)
    source = InductorBackend().model_source(test)
    assert "class Model(torch.nn.Module)" in source
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] == "dlcfuzz" for a in node.names), ast.unparse(node)
        if isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] != "dlcfuzz", ast.unparse(node)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ReferenceEvaluator(to_onnx(g)).run(None, test.inputs)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "dlcfuzz", None)  # any import of dlcfuzz now fails
        namespace: dict = {"__name__": "model"}
        exec(compile(source, "model.py", "exec", dont_inherit=True), namespace)
        model = namespace["Model"]()
        with torch.no_grad():
            got = model(*[torch.from_numpy(test.inputs[v.name]) for v in g.inputs])
    assert len(got) == len(want)
    for o, w in zip(got, want, strict=True):
        np.testing.assert_allclose(o.numpy(), w, rtol=1e-4, atol=1e-5)


def test_a_data_dependent_guard_is_a_capture_limit() -> None:
    """Dynamo cannot guard on a value computed from data (torch's "Could not guard on data-dependent
    expression ... Consider annotating your code using torch._check*()"): seen in a default campaign on
    a SplitToSequence of a HammingWindow at inductor-dynamic. The capture's limit, not Inductor's."""
    import torch

    from dlcfuzz.oracle.unsupported import is_unsupported

    def data_dependent(x):
        return x + 1 if x.sum().item() > 2 else x - 1

    with pytest.raises(Exception) as info:
        torch.compile(data_dependent, fullgraph=True, dynamic=True)(torch.ones(3))
    e = info.value
    assert "Could not guard on data-dependent expression" in str(e)
    assert is_unsupported("inductor", "compile", type(e).__name__, str(e))
