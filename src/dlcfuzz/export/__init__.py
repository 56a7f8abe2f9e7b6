"""Writers of a Graph for the compilers under test (ONNX; Relax and torch in later issues)."""
