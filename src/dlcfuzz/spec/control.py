"""Control flow: If, as a composite operator whose branches read values of the outer graph.

ONNX's If takes only its condition; each branch is a subgraph with no inputs whose nodes read values
of the enclosing graph by name (outer scope), as torch.onnx writes a data-dependent branch.  The IR
node reads the tensors the branches use, so everything that reads IR nodes (the solver, intervals,
input synthesis, the reducer) sees an ordinary operator: ``x`` first (the then-branch's operand),
then the condition, then an optional ``y`` for the else-branch (x when absent).  Each branch is one
unary operator drawn for the dtype (``then_op``, ``else_op``); both give x's type, as ONNX requires
of the branches' outputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from onnx import helper

from dlcfuzz.ir import ONNX_CODE, Node, TensorType
from dlcfuzz.spec.dsl import AnyOf, Choice, Composite, Exact, In, OpSpec, inner

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


def _branch(node: Node, which: str, op: str, operand: str, t: TensorType | None):
    """A branch: one node applying ``op`` to the outer value ``operand``; its output typed like x."""
    out = inner(node, 0 if which == "then" else 1)
    result = (helper.make_tensor_value_info(out, ONNX_CODE[t.dtype], list(t.shape)) if t is not None
              else helper.make_empty_tensor_value_info(out))
    name = f"{node.name}.{which}" if node.name else which
    return helper.make_graph([helper.make_node(op, [operand], [out], name=f"{name}.0")], name, [], [result])


def _if_nodes(node: Node, types: Mapping[str, TensorType]) -> list[Node]:
    x, cond, *rest = node.inputs
    y = rest[0] if rest and rest[0] else x
    t = types.get(node.outputs[0])
    return [Node("If", [cond], list(node.outputs),
                 {"then_branch": _branch(node, "then", node.attrs["then_op"], x, t),
                  "else_branch": _branch(node, "else", node.attrs["else_op"], y, t)},
                 node.name)]


IF = OpSpec(
    "If", "control",
    [In("x", T="V", rank=(0, 99)),
     # ONNX: "Condition for the if. The tensor must contain a single element."
     In("cond", T="B", shape=lambda c: AnyOf((Exact(()), Exact((1,))))),
     In("y", T="V", shape=lambda c: Exact(c.s), optional=True)],
    lambda c: [c.x],
    attrs={"then_op": lambda c: Choice(branch_ops(c.x.dtype)), "else_op": lambda c: Choice(branch_ops(c.x.dtype))},
    since=1,
    doc="a branch on a runtime condition; each branch one unary operator on a value of the outer graph",
    composite=Composite(("If",), {"V": (("If", "V"),), "B": (("If", "B"),)}, _if_nodes),
)

SPECS: list[OpSpec] = [IF]
