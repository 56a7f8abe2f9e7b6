"""Each torch spec against its OpInfo (``op_db``): the float32 CPU sample inputs' ranks, dtypes and attribute
values lie inside the spec's domain, or the spec says why not (``spec.torch.opinfo.OPINFO_EXEMPT``).

A few samples per OpInfo entry (the first ``SAMPLES``); a sample's rank above the generator's global limit
(``TORCH_LIMITS.max_rank``) is the generator's limit, not the spec's, and is not checked; dim lengths are
the generator's limits too.  Attributes are checked in the spec's order on a context built from the
sample's first tensor, each mapped one by the OpInfo sample's positional arguments (``OPINFO_ARGS``) or
keywords (by name, or ``OPINFO_KWARGS``); the others are drawn from their domains as the solver would."""

from __future__ import annotations

import random
import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")

from dlcfuzz.gen.torch_program import TORCH_LIMITS  # noqa: E402
from dlcfuzz.ir import TensorType  # noqa: E402
from dlcfuzz.spec.dsl import Ctx, EmptyDomain, Float, In  # noqa: E402
from dlcfuzz.spec.torch import TORCH_REGISTRY, TorchOpSpec  # noqa: E402
from dlcfuzz.spec.torch.opinfo import OPINFO_ARGS, OPINFO_EXEMPT, OPINFO_KWARGS, OPINFO_NAME  # noqa: E402

SAMPLES = 4


def _entries() -> dict[str, list[Any]]:
    from torch.testing._internal.common_methods_invocations import op_db

    out: dict[str, list[Any]] = {}
    for op in op_db:
        out.setdefault(op.name, []).append(op)
    return out


def opinfo_of(spec: TorchOpSpec, entries: dict[str, list[Any]]) -> list[Any]:
    """The OpInfo entries a spec answers to (see ``OPINFO_NAME``); none where op_db has none."""
    name = spec.op.removeprefix("torch.")
    if spec.op in OPINFO_NAME:
        opname, variants = OPINFO_NAME[spec.op]
        return [o for o in entries.get(opname, []) if variants is None or o.variant_test_name in variants]
    for cand in (name, f"nn.functional.{name}", name.rstrip("_"), f"nn.functional.{name.rstrip('_')}"):
        if cand in entries:
            return entries[cand]
    return []


def _float32(op: Any) -> bool:
    """Whether the OpInfo entry runs float32 on CPU (its samples are float32 ones)."""
    try:
        return torch.float32 in op.supported_dtypes("cpu")
    except Exception:
        return False


def _plain(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    if isinstance(v, torch.dtype):
        return str(v).removeprefix("torch.")
    return v


def sample_problems(spec: TorchOpSpec, sample: Any) -> list[str]:
    """What of one OpInfo sample lies outside the spec's domain (empty: inside)."""
    first = spec.inputs[0]
    assert isinstance(first, In)
    x = sample.input
    if isinstance(x, list | tuple):  # a variadic first input (cat, stack): its first tensor
        if not x or not isinstance(x[0], torch.Tensor):
            return []
        x = x[0]
    if not isinstance(x, torch.Tensor):
        return []
    r = x.dim()
    if r > TORCH_LIMITS.max_rank:
        return []  # the generator's global limit
    problems = []
    if not callable(first.rank) and not first.rank[0] <= r <= first.rank[1]:
        problems.append(f"rank {r} outside {first.rank}")
    dtypes = spec.types.get(first.T or "", ())
    if "float32" not in dtypes and x.dtype == torch.float32:
        problems.append(f"float32 not in {dtypes}")
    if problems:
        return problems
    given: dict[str, Any] = {}
    for name, v in zip(OPINFO_ARGS.get(spec.op, ()), sample.args, strict=False):
        if name is not None and not isinstance(v, torch.Tensor):
            given[name] = _plain(v)
    for k, v in sample.kwargs.items():
        name = OPINFO_KWARGS.get(k, k)
        if name in spec.attrs and not isinstance(v, torch.Tensor) and v is not None:
            given[name] = _plain(v)
    rng = random.Random(0)
    c = Ctx(TORCH_LIMITS, rng, np.random.default_rng(0))
    c.x = TensorType(tuple(x.shape), "float32")
    c.s, c.r, c.T = c.x.shape, r, "float32"
    c.types[first.T or "T"] = "float32"
    c.ins.append(c.x)
    for name, dom in spec.attrs.items():
        try:
            d = dom(c) if callable(dom) else dom
        except (EmptyDomain, IndexError, ZeroDivisionError, KeyError, TypeError, ValueError) as e:
            if name in given:
                problems.append(f"{name}={given[name]!r}: no domain ({type(e).__name__})")
            break
        if name in given:
            if isinstance(d, Float) and isinstance(given[name], int) and not isinstance(given[name], bool):
                given[name] = float(given[name])  # an int where the spec draws a float: the same value
            if given[name] not in d:
                problems.append(f"{name}={given[name]!r} outside its domain")
            c.set(name, given[name])
            continue
        try:
            c.set(name, d.sample(rng))
        except (EmptyDomain, IndexError, ValueError):
            break
    return problems


def check_all() -> tuple[dict[str, list[str]], list[str], list[str]]:
    """(spec -> problems of its samples, specs checked, specs with no OpInfo)."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    before = common_utils.extract_test_fn, core.extract_test_fn
    common_utils.extract_test_fn = core.extract_test_fn = lambda: None  # no unittest frame to look for
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated operators warn on every sample
            return _check_all()
    finally:
        common_utils.extract_test_fn, core.extract_test_fn = before


def _check_all() -> tuple[dict[str, list[str]], list[str], list[str]]:
    entries = _entries()
    problems: dict[str, list[str]] = {}
    checked: list[str] = []
    none: list[str] = []
    for op, spec in TORCH_REGISTRY.items():
        infos = [o for o in opinfo_of(spec, entries) if _float32(o)]
        if not infos:
            none.append(op)
            continue
        checked.append(op)
        for info in infos:
            torch.manual_seed(0)
            try:
                samples = info.sample_inputs("cpu", torch.float32, requires_grad=False)
                for k, sample in enumerate(samples):
                    if k >= SAMPLES:
                        break
                    for p in sample_problems(spec, sample):
                        problems.setdefault(op, []).append(f"{info.name}.{info.variant_test_name}#{k}: {p}")
            except Exception as e:  # an OpInfo whose samples need what this machine lacks
                none.append(f"{op} ({type(e).__name__})")
    return problems, checked, none


def test_specs_take_their_opinfo_samples_or_say_why_not():
    problems, checked, none = check_all()
    unexplained = {op: ps for op, ps in problems.items() if op not in OPINFO_EXEMPT}
    print(f"\n{len(checked)} specs checked against their OpInfo, {len(checked) - len(problems)} matched, "
          f"{len(set(problems) & set(OPINFO_EXEMPT))} exempted; {len(none)} with no OpInfo")
    assert len(checked) >= 150
    assert not unexplained, "\n".join(f"{op}: {ps[:3]}" for op, ps in sorted(unexplained.items()))
    # an exemption that no longer matches a problem is stale
    stale = [op for op in OPINFO_EXEMPT if op not in problems]
    assert not stale, f"exempted specs that take every sample checked: {stale}"
