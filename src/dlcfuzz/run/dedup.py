"""Signatures: one per distinct bug, stable across the names, numbers and paths of a test.

A signature hashes: backend, oracle, kind, phase, the exception type, the message normalized
(numbers, hex addresses, quoted names, node/value names, paths stripped; first line only for
messages that carry a backtrace), and the innermost frames inside the compiler's own code
(Python frames from the traceback, or from faulthandler's dump for a fatal signal).  For value
mismatches, which carry no stack, it uses the operator type that produced the differing output
and its dtype instead.
"""

from __future__ import annotations

import hashlib
import re

from dlcfuzz.oracle import CRASH, Finding

_FRAME = re.compile(r'File "([^"]+)", line \d+, in (\S+)')
_NORMALIZE = [
    (re.compile(r"0x[0-9a-fA-F]+"), "ADDR"),
    (re.compile(r"(/[\w.\-]+)+/?"), "PATH"),
    (re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`"), "'X'"),
    (re.compile(r"\b[nv]\d+\b"), "NAME"),  # dlcfuzz node and value names
    (re.compile(r"\b\w*\d\w*\b"), "N"),  # numbers and identifiers with digits (tmp123, shape dims)
    (re.compile(r"\s+"), " "),
]
COMPILER_DIRS = ("/tvm/", "/openvino/", "/onnxruntime/", "/torch/", "/onnx/reference/", "/tests/")


def normalize(message: str) -> str:
    """The message with everything test-specific replaced by placeholders."""
    line = message.strip().split("\n")[0] if message else ""
    for pat, rep in _NORMALIZE:
        line = pat.sub(rep, line)
    return line.strip()[:300]


def compiler_frames(traceback: str, n: int = 3) -> list[str]:
    """The innermost ``n`` frames inside a compiler's own code, as 'file:function'."""
    frames = [(path, fn) for path, fn in _FRAME.findall(traceback) if any(d in path for d in COMPILER_DIRS)]
    # faulthandler lists the innermost frame first, tracebacks last
    if "Fatal Python error" in traceback or "most recent call first" in traceback:
        frames = frames[::-1]
    return [f"{path.rsplit('/', 1)[-1]}:{fn}" for path, fn in frames[-n:]]


def signature(f: Finding, producer_op: str = "", dtype: str = "") -> str:
    if f.oracle == CRASH:
        parts = [f.backend, f.oracle, f.kind, f.phase, f.error_type, normalize(f.message),
                 *compiler_frames(f.traceback)]
    else:
        parts = [f.backend, f.oracle, f.kind, f.variant, f.other, producer_op, dtype]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def title(f: Finding, producer_op: str = "") -> str:
    """A one-line human summary of the bug."""
    if f.oracle == CRASH:
        what = f"{f.error_type}: {normalize(f.message)}" if f.kind == "exception" else f.message
        return f"{f.backend} {f.phase} {f.kind}: {what}"[:200]
    where = f" at the output of {producer_op}" if producer_op else ""
    return f"{f.backend} {f.variant} vs {f.other}: {f.kind} mismatch{where}"[:200]
