"""Control flow: If, as a composite operator whose branches read values of the outer graph.

ONNX's If takes only its condition; each branch is a subgraph with no inputs whose nodes read values
of the enclosing graph by name (outer scope), as torch.onnx writes a data-dependent branch.  The IR
node reads the tensors the branches use, so everything that reads IR nodes (the solver, intervals,
input synthesis, the reducer) sees an ordinary operator: ``x`` first (the then-branch's operand),
then the condition, then an optional ``y`` for the else-branch (x when absent).  Each branch is one
unary operator drawn for the dtype (``then_op``, ``else_op``); both give x's type, as ONNX requires
of the branches' outputs.  Two forms exporters also write, and compilers convert with code of their
own: a float then-branch may add a constant held inside the subgraph (``then_bias``: an initializer
of the branch), and one branch may be an If nested on the same condition (``nested``), whose two
branches apply that branch's operator, so it reads its operand from two scopes up.  A third of the
calls have a second output, the operand the branch leaves as it is: then (then_op(x), y), else
(else_op(y), x), a conditional swap.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from onnx import helper, numpy_helper

from dlcfuzz.ir import ONNX_CODE, Node, TensorType
from dlcfuzz.spec.dsl import AnyOf, Choice, Composite, Exact, Float, In, Maybe, OpSpec

# unary operators of one type in, the same type out, defined on every value of the dtype (a branch's
# NaN or overflow would make the test judge its inputs, not the control flow)
BRANCH_OPS = {
    "float": ("Identity", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Floor", "Ceil"),
    "signed": ("Identity", "Neg", "Abs"),  # Neg of the minimum overflows: input synthesis keeps to small values
    "unsigned": ("Identity", "Abs"),
    "bool": ("Identity", "Not"),
}


def branch_ops(dtype: str) -> tuple[str, ...]:
    if dtype == "bool":
        return BRANCH_OPS["bool"]
    if dtype.startswith("float"):
        return BRANCH_OPS["float"]
    return BRANCH_OPS["unsigned" if dtype.startswith("uint") else "signed"]


def _typed(name: str, t: TensorType | None):
    return (helper.make_tensor_value_info(name, ONNX_CODE[t.dtype], list(t.shape)) if t is not None
            else helper.make_empty_tensor_value_info(name))


def _branch(node: Node, which: str, operand: str, other: str, t: TensorType | None, depth: int = 0):
    """A branch: ``<which>_op`` applied to the outer value ``operand`` (then a constant added, or inside
    an If nested on the same condition), and, for a second output, the ``other`` operand as it is; the
    outputs typed like x.  Names are unique in the model."""
    op, cond = node.attrs[f"{which}_op"], node.inputs[1]
    name = f"{node.name or 'if'}.{which}" + ".nested" * depth
    outs = [f"{o}.{which}" + ".nested" * depth for o in node.outputs]
    results = [_typed(o, t) for o in outs]
    if node.attrs.get("nested") == which and depth == 0:
        nested = helper.make_node("If", [cond], outs, name=f"{name}.0",
                                  then_branch=_branch(node, which, operand, other, t, 1),
                                  else_branch=_branch(node, which, operand, other, t, 2))
        return helper.make_graph([nested], name, [], results)
    passed = [helper.make_node("Identity", [other], outs[1:], name=f"{name}.2")] if len(outs) > 1 else []
    bias = node.attrs.get("then_bias") if which == "then" and t is not None else None
    if bias is None:
        return helper.make_graph([helper.make_node(op, [operand], outs[:1], name=f"{name}.0"), *passed], name, [],
                                 results)
    assert t is not None
    applied, constant = f"{outs[0]}.applied", f"{outs[0]}.bias"
    return helper.make_graph(
        [helper.make_node(op, [operand], [applied], name=f"{name}.0"),
         helper.make_node("Add", [applied, constant], outs[:1], name=f"{name}.1"), *passed],
        name, [], results, initializer=[numpy_helper.from_array(np.array(bias, t.dtype), constant)])


def _if_nodes(node: Node, types: Mapping[str, TensorType]) -> list[Node]:
    x, cond, *rest = node.inputs
    y = rest[0] if rest and rest[0] else x
    t = types.get(node.outputs[0])
    # a second output swaps: then (then_op(x), y), else (else_op(y), x)
    return [Node("If", [cond], list(node.outputs),
                 {"then_branch": _branch(node, "then", x, y, t), "else_branch": _branch(node, "else", y, x, t)},
                 node.name)]


IF = OpSpec(
    "If", "control",
    [In("x", T="V", rank=(0, 99)),
     # ONNX: "Condition for the if. The tensor must contain a single element."
     In("cond", T="B", shape=lambda c: AnyOf((Exact(()), Exact((1,))))),
     In("y", T="V", shape=lambda c: Exact(c.s), optional=True)],
    lambda c: [c.x] * c._nout,
    attrs={"_nout": Choice((1, 1, 2)),
           "then_op": lambda c: Choice(branch_ops(c.x.dtype)), "else_op": lambda c: Choice(branch_ops(c.x.dtype)),
           "then_bias": lambda c: Maybe(Float(-2.0, 2.0), 0.7) if c.x.dtype.startswith("float") else Choice((None,)),
           "nested": Maybe(Choice(("then", "else")), 0.7)},
    since=1,
    doc="a branch on a runtime condition; each branch one unary operator on a value of the outer graph",
    composite=Composite(("If",), {"V": (("If", "V"),), "B": (("If", "B"),)}, _if_nodes),
)

SPECS: list[OpSpec] = [IF]
