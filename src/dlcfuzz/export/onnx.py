"""Write a Graph as an ONNX model with an explicit opset and the lowest IR version it needs."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from dlcfuzz import __version__
from dlcfuzz.ir import ONNX_CODE, Graph, TensorType, op_identity

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


def to_onnx(g: Graph, opset: int | None = None) -> onnx.ModelProto:
    """The model of ``g``: ONNX's operators at ``opset``; an operator of another domain (a qualified
    name, ``ir.op_identity``) as a node of that domain, which the model imports too."""
    opset = opset or g.opset
    nodes, domains, typed = [], set(), []
    for n in g.nodes:
        domain, op_type = op_identity(n.op)
        nodes.append(helper.make_node(op_type, n.inputs, n.outputs, name=n.name or None, domain=domain or None,
                                      **{k: _attr(v) for k, v in sorted(n.attrs.items())}))
        if domain:
            domains.add(domain)
            typed += [o for o in n.outputs if o and o not in g.outputs]
    graph = helper.make_graph(
        nodes,
        "dlcfuzz",
        [value_info(v.name, v.type) for v in g.inputs],
        [value_info(o, g.values[o].type) for o in g.outputs],
        initializer=[numpy_helper.from_array(v.data, v.name) for v in g.initializers],
        # ONNX's shape inference knows no schema outside its domains: the outputs of those nodes are
        # typed here, so that it still checks (strictly) the nodes that read them
        value_info=[value_info(o, g.values[o].type) for o in typed],
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
