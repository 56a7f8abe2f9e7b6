"""Write a Graph as an ONNX model with an explicit opset and the lowest IR version it needs.

Two things are written otherwise than one ONNX node per IR node and one initializer per constant:

- a composite operator's node (spec/sequence.py: a sequence or optional pattern) becomes its chain of
  ONNX operators (``Graph.onnx_nodes``, by ``spec.expand``), whose values in between are not IR values;
- a constant named in ``graph.meta["constant_nodes"]`` (name -> a ``CONSTANT_FORMS`` attribute, chosen
  at generation: ``GenOptions.constant_nodes``) becomes a ``Constant`` node holding its data in that
  attribute, as exporters such as torch.onnx write them, instead of an initializer.

Intermediate values are typed (``value_info``) only where ONNX's shape inference cannot type them (no
schema, or a function body that depends on the node), so that compilers infer the rest as they would
from any exporter; ``graph.meta["declared_types"]`` names more to type (trigger analysis asks whether a
compiler fails only where it must infer a value's rank itself).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import onnx
import onnx.defs
from onnx import helper, numpy_helper

from dlcfuzz import __version__
from dlcfuzz.ir import (
    CONST_KIND,
    CONSTANT_FORMS,  # noqa: F401 (re-exported: the writer's readers find it here)
    NODE_KIND,
    ONNX_CODE,
    SHAPE_FORM,
    Graph,
    TensorType,
    Value,
    constant_forms,
    op_identity,
)

DEFAULT_OPSET = 17
# ONNX Runtime 1.31 accepts IR <= 13 and opset <= 26 (with no kernel for a few opset-22 versions:
# RoiAlign, MaxRoiPool, GlobalLpPool); TVM 0.27, OpenVINO 2026.4 and IREE 3.13 load 13-23 (measured).
# Generated graphs were checked valid at every opset 13-21 (400 single-operator graphs each) and at 22
# and 23 (300 graphs of 10 operators each), where Attention and RMSNormalization begin.
MIN_OPSET, MAX_OPSET = 13, 23

# the opset version a model imports for each other domain its nodes use (Microsoft's contrib operators
# are all version 1 in ONNX Runtime 1.31)
DOMAIN_VERSIONS = {"com.microsoft": 1}


def value_info(name: str, t: TensorType) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, ONNX_CODE[t.dtype], list(t.shape))


def _attr(v):
    if isinstance(v, np.ndarray):
        return numpy_helper.from_array(v)
    return v


# a 1-D int64 constant that is (a slice of) the shape of a runtime tensor may be written as that tensor's
# Shape (ir.SHAPE_FORM), as exporters write shape computations (Reshape(x, Shape(y))): the compiler
# must see through it


def shape_source(g: Graph, v: Value) -> tuple[str, int | None, int | None] | None:
    """Where constant ``v`` is a Shape of (``graph.meta["shape_of"]``: tensor, start, end), while that is
    still true: the tensor is still a graph input or a node's output whose shape slice holds v's data (a
    reduction may have removed or shrunk it); None otherwise."""
    got = (g.meta.get("shape_of") or {}).get(v.name)
    if not got or v.data is None:
        return None
    src, start, end = got
    x = g.values.get(src)
    if x is None or x.kind == CONST_KIND or x.pinned or (start is not None and g.opset < 15):
        return None
    if list(x.type.shape[start:end]) != [int(d) for d in np.asarray(v.data).ravel()] or v.type.rank != 1:
        return None
    return src, start, end


def constant_nodes(g: Graph) -> dict[str, str]:
    """The graph's constants written as Constant nodes: name -> attribute, or ``SHAPE_FORM`` (stale
    names, of values a reduction removed or made runtime inputs, and forms the type or the graph cannot
    take are left out)."""
    wanted = g.meta.get("constant_nodes") or {}

    def takes(v: Value, form: str) -> bool:
        return shape_source(g, v) is not None if form == SHAPE_FORM else form in constant_forms(v.type)

    # in the order of the graph's values (JSON stores meta with sorted keys: the model must not change)
    return {v.name: wanted[v.name] for v in g.values.values()
            if v.name in wanted and v.kind == CONST_KIND and takes(v, wanted[v.name])}


def constant_node(v: Value, form: str, g: Graph | None = None) -> onnx.NodeProto:
    """A Constant node making ``v`` from its data, held in attribute ``form``; for ``SHAPE_FORM`` the
    Shape node of its source input in ``g``."""
    assert v.data is not None
    if form == SHAPE_FORM:
        source = shape_source(g, v) if g is not None else None
        assert source is not None, "constant_nodes() writes a Shape only while it is one"
        src, start, end = source
        bounds = {k: b for k, b in (("start", start), ("end", end)) if b is not None}
        return helper.make_node("Shape", [src], [v.name], **bounds)
    if form == "value":
        value = numpy_helper.from_array(v.data)
    elif form in ("value_float", "value_floats"):
        value = v.data.astype(np.float32).tolist()  # Python floats of float32 values: exact
    else:
        value = v.data.astype(np.int64).tolist()
    return helper.make_node("Constant", [], [v.name], **{form: value})


@cache
def _inferred(op_type: str, opset: int) -> bool:
    """Whether ONNX's shape inference types the outputs of this ONNX operator: by its inference function
    or by expanding its function body (not one that depends on the node)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset)
    except onnx.defs.SchemaError:
        return True  # not an ONNX operator (a composite's chain is made of ONNX operators)
    return schema.has_type_and_shape_inference_function or schema.has_function


def to_onnx(g: Graph, opset: int | None = None) -> onnx.ModelProto:
    """The model of ``g``: ONNX's operators at ``opset``; an operator of another domain (a qualified
    name, ``ir.op_identity``) as a node of that domain, which the model imports too."""
    opset = opset or g.opset
    forms = constant_nodes(g)
    # a Shape of a node's output follows that node; every other constant node leads the graph
    after: dict[str, list[onnx.NodeProto]] = {}
    nodes = []
    for name, form in forms.items():
        node = constant_node(g.values[name], form, g)
        if form == SHAPE_FORM and g.values[node.input[0]].kind == NODE_KIND:
            after.setdefault(node.input[0], []).append(node)
        else:
            nodes.append(node)
    domains, typed = set(), []
    for n in g.onnx_nodes():  # composite operators as their chains
        domain, op_type = op_identity(n.op)
        nodes.append(helper.make_node(op_type, n.inputs, n.outputs, name=n.name or None, domain=domain or None,
                                      **{k: _attr(v) for k, v in sorted(n.attrs.items())}))
        if domain:
            domains.add(domain)
            # its inputs too: ORT's contrib shape inference needs their shapes, which ONNX's graph-level
            # inference may not state (a HannWindow's length comes from a value)
            typed += [v for v in [*n.inputs, *n.outputs] if v and v not in g.outputs and v not in forms
                      and g.values[v].kind == NODE_KIND]
        elif not _inferred(op_type, opset):
            typed += [v for v in n.outputs if v and v not in g.outputs and v in g.values]
        nodes += [m for o in n.outputs for m in after.get(o, [])]
    typed += [v for v in g.meta.get("declared_types", ()) if v in g.values and v not in g.outputs and v not in forms]
    graph = helper.make_graph(
        nodes,
        "dlcfuzz",
        [value_info(v.name, v.type) for v in g.inputs],
        [value_info(o, g.values[o].type) for o in g.outputs],
        initializer=[numpy_helper.from_array(v.data, v.name) for v in g.initializers if v.name not in forms],
        # ONNX's shape inference knows no schema outside its domains, nor infers an operator whose
        # function body depends on the node (GroupNormalization-21): the outputs of those nodes are
        # typed here, so that it still checks (strictly) the nodes that read them; Constant nodes''
        # outputs too (ORT's contrib shape inference reads its inputs' shapes from the declared types:
        # EmbedLayerNormalization's gamma as a Constant node had "a null shape")
        value_info=[value_info(o, g.values[o].type) for o in dict.fromkeys([*forms, *typed])],
    )
    unknown = sorted(domains - DOMAIN_VERSIONS.keys())
    if unknown:
        raise ValueError(f"no opset version known for domain {', '.join(unknown)}")
    imports = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, DOMAIN_VERSIONS[d]) for d in sorted(domains))]
    model = helper.make_model(graph, opset_imports=imports, producer_name="dlcfuzz", producer_version=__version__)
    # the IR version follows the default domain (onnx's table does not know the others)
    model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    return model


def to_bytes(g: Graph, opset: int | None = None) -> bytes:
    return to_onnx(g, opset).SerializeToString(deterministic=True)


def checker_error(model: onnx.ModelProto) -> str | None:
    """Why the ONNX checker with strict shape inference rejects ``model`` (None: it accepts)."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # ValidationError, InferenceError, and bare ValueErrors (e.g. Cast to=0)
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return None
