"""Coverage and diversity metrics (Isra, GenCoG) over any folder of ONNX models."""

from dlcfuzz.metrics.isra import DIVERSITY, GRAPH_METRICS, OP_METRICS, OpInfo, compute
from dlcfuzz.metrics.load import ModelError, OpNode, load_model, op_nodes

__all__ = ["DIVERSITY", "GRAPH_METRICS", "OP_METRICS", "ModelError", "OpInfo", "OpNode", "compute",
           "load_model", "op_nodes"]
