"""Static facts about an operator's call space, for the coverage metrics."""

from __future__ import annotations

import math
import random

import numpy as np

from dlcfuzz.ir import TensorType
from dlcfuzz.solve.instantiate import GenOptions
from dlcfuzz.solve.types import schema, type_domains
from dlcfuzz.spec.dsl import Ctx, In, OpSpec


def indegrees(spec: OpSpec, opset: int) -> frozenset[int]:
    """Numbers of non-empty inputs the operator allows (variadic inputs capped at the spec's arity)."""
    sch = schema(spec.op, opset)
    if sch is None:  # no ONNX schema (an operator of another domain): the spec's inputs, optional ones omitted
        required = sum(isinstance(i, In) and not i.optional for i in spec.inputs)
        hi = len(spec.inputs) + (spec.arity[1] - 1 if spec.variadic else 0)
        return frozenset(range(required, hi + 1))
    # the schema's max is 2**31-1 for variadic inputs: cap by what the spec can generate
    hi = min(sch.max_input, spec.arity[1] + len(spec.inputs) - 1)
    return frozenset(range(sch.min_input, hi + 1))


def call_space(spec: OpSpec, limits: GenOptions) -> int:
    """GenCoG's rough call-space estimate N_est.

    max_dim ** (max rank of the first input), doubled when the operator takes more than one
    data input, times (floor(log2(product of attribute domain sizes)) + 1).  Attribute domains
    that depend on the first input are measured on a first input of maximal rank and dims.
    """
    first = spec.inputs[0]
    assert isinstance(first, In)
    rng = random.Random(0)
    c = Ctx(limits, rng, np.random.default_rng(0))
    rlo, rhi = first.rank(c) if callable(first.rank) else first.rank
    rank = max(rlo, min(rhi, limits.max_rank))
    sd = spec.first_shape(c)
    shape = (limits.max_dim,) * rank if sd is None else sd.sample(rng)  # fixed dims: any shape they allow
    in_space = limits.max_dim ** len(shape)
    if spec.variadic or len(spec.data_inputs) > 1:
        in_space *= 2
    doms = type_domains(spec, limits.opset, limits.dtypes or ("float32",))
    dtype = next((d[0] for d in doms.values() if d), "float32")
    c.x = TensorType(shape, dtype)
    c.s, c.r, c.T = c.x.shape, c.x.rank, dtype
    c.types = {"T": dtype}
    c.ins = [c.x]
    c.n = spec.arity[1]
    attr_space = 1
    for name, dom in spec.attrs.items():
        try:
            d = dom(c) if callable(dom) else dom
            attr_space *= max(1, d.size())
            c.set(name, d.sample(rng))
        except Exception:  # a domain that needs more context than the estimate builds
            c.set(name, None)
    return in_space * (int(math.log2(attr_space)) + 1)
