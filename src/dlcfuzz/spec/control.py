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
branches apply that branch's operator, so it reads its operand from two scopes up.
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


def _branch(node: Node, which: str, operand: str, t: TensorType | None, depth: int = 0):
    """A branch: ``<which>_op`` applied to the outer value ``operand`` (then a constant added, or inside
    an If nested on the same condition); its output typed like x.  Names are unique in the model."""
    op, cond = node.attrs[f"{which}_op"], node.inputs[1]
    name = f"{node.name or 'if'}.{which}" + ".nested" * depth
    out = f"{node.outputs[0]}.{which}" + ".nested" * depth
    if node.attrs.get("nested") == which and depth == 0:
        nested = helper.make_node("If", [cond], [out], name=f"{name}.0",
                                  then_branch=_branch(node, which, operand, t, 1),
                                  else_branch=_branch(node, which, operand, t, 2))
        return helper.make_graph([nested], name, [], [_typed(out, t)])
    bias = node.attrs.get("then_bias") if which == "then" and t is not None else None
    if bias is None:
        return helper.make_graph([helper.make_node(op, [operand], [out], name=f"{name}.0")], name, [],
                                 [_typed(out, t)])
    assert t is not None
    applied, constant = f"{out}.applied", f"{out}.bias"
    return helper.make_graph(
        [helper.make_node(op, [operand], [applied], name=f"{name}.0"),
         helper.make_node("Add", [applied, constant], [out], name=f"{name}.1")],
        name, [], [_typed(out, t)], initializer=[numpy_helper.from_array(np.array(bias, t.dtype), constant)])


def _if_nodes(node: Node, types: Mapping[str, TensorType]) -> list[Node]:
    x, cond, *rest = node.inputs
    y = rest[0] if rest and rest[0] else x
    t = types.get(node.outputs[0])
    return [Node("If", [cond], list(node.outputs),
                 {"then_branch": _branch(node, "then", x, t), "else_branch": _branch(node, "else", y, t)},
                 node.name)]


IF = OpSpec(
    "If", "control",
    [In("x", T="V", rank=(0, 99)),
     # ONNX: "Condition for the if. The tensor must contain a single element."
     In("cond", T="B", shape=lambda c: AnyOf((Exact(()), Exact((1,))))),
     In("y", T="V", shape=lambda c: Exact(c.s), optional=True)],
    lambda c: [c.x],
    attrs={"then_op": lambda c: Choice(branch_ops(c.x.dtype)), "else_op": lambda c: Choice(branch_ops(c.x.dtype)),
           "then_bias": lambda c: Maybe(Float(-2.0, 2.0), 0.7) if c.x.dtype.startswith("float") else Choice((None,)),
           "nested": Maybe(Choice(("then", "else")), 0.7)},
    since=1,
    doc="a branch on a runtime condition; each branch one unary operator on a value of the outer graph",
    composite=Composite(("If",), {"V": (("If", "V"),), "B": (("If", "B"),)}, _if_nodes),
)

SPECS: list[OpSpec] = [IF]
