"""OPERA: library tests migrated into single-operator tests of compiler frontends.

sources (ONNX node tests, PyTorch OpInfo/ModuleInfo, any pytest suite via API instrumentation)
-> ``Instance`` (one operator call: op, parameter values, input tensors, provenance)
-> template (an ONNX single-node model, or a torch module around the call)
-> the frontends under test in isolated workers -> crash / inconsistency with the library's own
output -> dedup by conversion function; ``prioritize`` orders the instances, ``apfd`` scores orders.
"""
