"""Signatures: one per distinct bug, stable across the names, numbers and paths of a test.

A signature hashes: backend, oracle, kind, phase, the exception type, the message normalized
(numbers, hex addresses, node/value names, paths stripped; first line only for
messages that carry a backtrace), and the innermost frames inside the compiler's own code
(Python frames from the traceback, or from faulthandler's dump for a fatal signal).  For value
mismatches, which carry no stack, it uses the *first diverging operator* (``oracle/localize.py``:
the first node, in topological order, whose output differs) and the kind and dtype class of its
difference, and not the oracle: one divergence seen by the differential and the metamorphic
oracle, or in int32 and uint32, is one bug.  A baseline issue (other compilers agree against the
baseline) is keyed on the baseline and that operator alone, whichever backends saw it.
Disruptive findings (invalid models on purpose) get their own
namespace: backend, symptom, phase, the operator and the kind of constraint the model breaks
(dtype, arity, ...: not its exact value), plus the compiler frames for crashes.

Roots (``reduced_root``) merge signatures of one cause: the trigger analysis's; a reduced case whose
reduction located no first diverging node is read at the finding's own (``reduced_first``), when the
reduction kept that node; a crash whose message quotes an operator of a converter family (IREE's
``onnx.MaxPool``) is keyed by its message with the family in place of the operator, before its triggers
(``family_crash_root``);
a crash fed by a tensor out of a sequence (any sequence idiom) is keyed as the sequence's
(``crash_upstream_root``: a frontend's sequence operators hand on a tensor of unknown rank or type,
on which each consumer fails in its own way).

Migrated single-operator tests (OPERA) are deduplicated by *conversion function*: the frontend
function that converted the operator (``migrated_signature``), since different operators can
share one converter (MaxPool and AveragePool) and one operator's failures share its converter.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dlcfuzz.ir import CONST_KIND, Graph, Node
from dlcfuzz.oracle import BASELINE, CRASH, DISRUPTIVE, EXPORTER, METAMORPHIC, Finding
from dlcfuzz.oracle.blame import blamed_pass
from dlcfuzz.oracle.triggers import (
    BACKEND_NAMES,
    ELEMENT_TYPE,
    FAMILIES,
    KNOCK_ON,
    MAX_RUNS,
    OPERATOR_FORM,
    PHASE_FREE,
    PRODUCER_TYPING,
    RESIZE_FORMS,
    RUN_TIME_SHAPE,
    SHARED_FORM,
    SIBLING,
    SIGNED,
    STATIC,
    THREADS,
    Analysis,
    analyze,
    crash_in,
    refusal_root,
    root_name,
    shaped_at_run_time_root,
    shows_without,
    with_unset_twins,
)

_SIGNATURE = re.compile(r"[0-9a-f]{16}")  # a bug's own key (``signature``), no readable root
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')  # a traceback's frame: file, line, function
_NORMALIZE = [
    # OpenVINO's node dumps list the node's arguments with the operations that produced them
    # ("opset1::Reshape Reshape_6 (opset1::Add n9[0]:f32[1], opset8::Slice ...) -> (...)"): whichever
    # operation feeds the failing node differs from test to test, the failing node is the bug
    (re.compile(r"(node '\S+ \S+) \([^']*?\) -> \([^']*?\)'"), r"\1 (ARGS) -> (ARGS)'"),
    (re.compile(r"0x[0-9a-fA-F]+"), "ADDR"),
    # the attributes of the ONNX operation IREE's error quotes ({torch.onnx.axis = 0 : si64}): the
    # operation is the bug's site, its attribute values differ from test to test
    (re.compile(r"\s*\{torch\.onnx\.[^{}]*\}"), ""),
    # an MLIR value that is one result of several (%5#1) is the value the error is about, whichever result
    (re.compile(r"(%\w+)#\d+"), r"\1"),
    # and an operation is the one quoted, whichever of its results are used (a MaxPool's "%8:2 = ..." with its
    # Indices, "%6 = ..." without: c48's 30127f6a and 6d742d1b, one defect)
    (re.compile(r"(%\w+):\d+ = "), r"\1 = "),
    # the math function a linker misses (IREE's "undefined symbol: sinf"): one missing library, whichever call
    (re.compile(r"(undefined symbol: )\w+"), r"\1SYMBOL"),
    # MLIR types (IREE): tensor<4x?xf32>, !torch.vtensor<[4,?],f32>: shapes differ from test to test
    (re.compile(r"(tensor|vector|memref|vtensor)<[^<>]*>"), r"\1<T>"),
    # dimension lists: OpenVINO prints f32[4,2] for a static variant and f32[?,?] for a dynamic one
    (re.compile(r"[\[{(]\s*(?:-?\d+|\?|\.\.\.?|-?\d+\s*\.\.\s*-?\d+)(?:\s*,\s*(?:-?\d+|\?|\.\.\.?|"
                r"-?\d+\s*\.\.\s*-?\d+))*\s*[\]})]"), "[DIMS]"),
    (re.compile(r"(/[\w.\-]+)+/?"), "PATH"),
    (re.compile(r"\b[nv]\d+\b"), "NAME"),  # dlcfuzz node and value names
    (re.compile(r"\b\w*\d\w*\b"), "N"),  # numbers and identifiers with digits (tmp123, shape dims)
    # an MLIR operation's operands and their types (IREE): "onnx.MatMulInteger"(%arg4, %2, %0) with or
    # without its optional zero points is one operation, whichever operands it was given (IREE's
    # lowering of a matmul of a 1-D operand was five roots of one campaign)
    (re.compile(r"\(%\w+(?:, %\w+)*\)"), "(%N...)"),  # %none: an optional operand left out
    (re.compile(r"\((?:![\w.]+(?:<T>)?|\w+<T>)(?:, (?:![\w.]+(?:<T>)?|\w+<T>))*\)"), "(TYPES)"),
    (re.compile(r"-> (?:![\w.]+<T>|\w+<T>)"), "-> (TYPES)"),  # one result's type as several results' are
    (re.compile(r"\s+"), " "),
]
COMPILER_DIRS = ("/tvm/", "/openvino/", "/onnxruntime/", "/torch/", "/onnx/reference/", "/tests/")


# lines that say where an error passed through, not what it is (OpenVINO wraps every error in
# several; TVM and Python append backtraces)
_BOILERPLATE = re.compile(
    r"^\s*(Exception from \S+:\d+:?|Check 'false' failed at .*|FrontEnd API failed with \w+:?"
    r"|Model wasn't fully converted.*|Traceback \(most recent call last\):|File \".*|\d+: .*|Stack trace:.*)\s*$")


# wrappers around the error that was really thrown: what follows the last one is the error
_WRAPPERS = re.compile(r"CALLBACK HAS THROWN:|Check '.*?' failed at \S+:\s*|^\s*\w+Error: Traceback.*?$", re.M)


# OpenVINO's conversion report: one block per operation it failed to convert ("-- Pad-21 with a message:")
_FAILED_OP = re.compile(r"^-- \S+ with a message:\s*$", re.M)
# a failure that follows from another: an input whose element type, rank or dimensions an earlier failure
# left unknown ("Unsupported input type dynamic", "Cannot get length of dynamic dimension", "Normalized
# axis of TopK is unknown", the element visitor's "Element not supported")
_CONSEQUENCE = re.compile(r"\btype dynamic\b|got: dynamic\b|\bmust be static\b|length of dynamic dimension"
                          r"|\bis unknown\b|^Element not supported", re.M)


def root_failure(message: str) -> str:
    """Of a conversion report, the block of the failed operation that is not the consequence of another
    (a ReduceMax "Unsupported input type dynamic" after its producer failed), so that a report of one
    failure and one of it and its consequences read alike; the message itself when it is no report."""
    blocks = _FAILED_OP.split(message or "")[1:]
    if not blocks:
        return message or ""
    blocks[-1] = blocks[-1].split("\nSummary:")[0]
    return next((b for b in blocks if not _CONSEQUENCE.search(b)), blocks[0])


# Triton's CompilationError lists the generated kernel's source ("at 11:4:", the lines, a caret) before
# what is wrong ("atomic_add does not support int8"): the listing differs with every kernel
_KERNEL_LISTING = re.compile(r"\bat \d+:\d+:\n(?:.*\n)*?[ \t]*\^[ \t]*\n")


def innermost(message: str) -> str:
    """The innermost thrown message: past OpenVINO's pass-name/node-dump wrapper ("... CALLBACK HAS
    THROWN: <the real error>"), the check-site prefixes that differ between code paths and Triton's
    listing of the kernel it failed to compile, of the root failure of a conversion report
    (``root_failure``)."""
    parts = _WRAPPERS.split(_KERNEL_LISTING.sub("", root_failure(message)))
    tail = parts[-1] if parts else ""
    return tail if tail.strip() else (message or "")


def normalize(message: str, lines: int = 2, names: Iterable[str] = ()) -> str:
    """The first ``lines`` informative lines of the innermost message, with everything test-specific
    replaced by placeholders: ``names`` (the test's own value, node and input names, which need
    not contain digits: "X", "data", "conv_out"), dimension lists, numbers, addresses, paths and
    temporary names."""
    keep = [ln for ln in innermost(message).splitlines() if ln.strip() and not _BOILERPLATE.match(ln)][:lines]
    text = " | ".join(ln.strip() for ln in keep)
    text = _names_pattern(tuple(sorted(set(names), key=len, reverse=True))).sub("NAME", text)
    for pat, rep in _NORMALIZE:
        text = pat.sub(rep, text)
    # one complaint per element, repeated: as many as the test had elements (Inductor's assert_size_stride
    # lists each dimension whose stride differs, "...at dim=N; ...at dim=N"); one placeholder per element of
    # a list, likewise (OpenVINO "dropped NAME, NAME": an LSTM's peephole and a SequenceAt's position, c46)
    text = " | ".join("; ".join(c for i, c in enumerate(cs) if i == 0 or c != cs[i - 1])
                      for cs in (line.split("; ") for line in text.split(" | ")))
    return _PLACEHOLDER_LIST.sub(r"\1", text).strip()[:300]


# a line's wrapper that names where an error was thrown, not what it says: OpenVINO's "While validating ONNX node
# '<Node(Compress): NAME>': Exception from srcPATH:N:" (normalized), before the statement on the next line
_WHERE = re.compile(r"^While validating (?:ONNX )?node '.*?'(?: with friendly_name '[^']*')?:\s*"
                    r"(?:Exception from \S+:N:?)?\s*")


def statement(message: str) -> str:
    """What a crash's message says, normalized, without where it was said: the first informative line that is more
    than a wrapper naming the node (OpenVINO says "Accessing out-of-range dimension" under a report's section and
    alone alike); a compiler's note after it (IREE's quoted operation) is left out."""
    lines = [_WHERE.sub("", ln) for ln in normalize(message, lines=3).split(" | ")]
    return next((ln for ln in lines if ln.strip()), "")[:160]


_PLACEHOLDER_LIST = re.compile(r"\b(NAME|N)(?:, \1\b)+")


@functools.lru_cache(maxsize=64)
def _names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for a test's names (longest first), each matched as a whole identifier."""
    alternatives = "|".join(re.escape(n) for n in names if n)
    return re.compile(rf"(?<![\w.])(?:{alternatives})(?![\w])") if alternatives else re.compile(r"(?!)")


def compiler_frames(traceback: str, n: int = 3) -> list[str]:
    """The innermost ``n`` frames inside a compiler's own code, as 'file:function'."""
    frames = [(path, fn) for path, _, fn in _FRAME.findall(traceback) if any(d in path for d in COMPILER_DIRS)]
    # faulthandler lists the innermost frame first, tracebacks last
    if "Fatal Python error" in traceback or "most recent call first" in traceback:
        frames = frames[::-1]
    return [f"{path.rsplit('/', 1)[-1]}:{fn}" for path, fn in frames[-n:]]


def dtype_class(dtype: str) -> str:
    """float / int / bool: a divergence in int32 and in uint32 is one bug."""
    if not dtype:
        return ""
    return "bool" if dtype == "bool" else "int" if "int" in dtype else "float"


def divergence(f: Finding, producer_op: str = "", dtype: str = "") -> tuple[str, str, str]:
    """(operator, kind, dtype class) where a value finding's divergence starts: the first diverging
    operator when it was located, else the producer of the differing graph output.  A wrong shape has no
    dtype class: an operator's shape code is one whatever the element type (OpenVINO's Clip of scalar bounds
    gives a scalar for an int32 and for a float32 input: c48's 44580c0a and 954c6259, one defect)."""
    first = f.details.get("first_diverging") or {}
    op, kind, dtype = ((first["op"], first.get("kind", f.kind), first.get("dtype", "")) if first.get("op")
                       else (producer_op, f.kind, dtype))
    return op, kind, "" if kind == "shape" else dtype_class(dtype)


def signature(f: Finding, producer_op: str = "", dtype: str = "", names: Iterable[str] = ()) -> str:
    """``names``: the test's value, node and input names, which stand for nothing across tests."""
    if f.oracle == DISRUPTIVE:
        v = f.details.get("violation", {})
        # the kind of violation, not its exact value: Reciprocal on int32 and on uint8 is one bug
        parts = [f.backend, f.oracle, f.kind, f.phase, v.get("op", ""), v.get("kind", ""),
                 *compiler_frames(f.traceback)]
    elif f.oracle == CRASH:
        # where a hang was stopped is the moment's, not the cause's (a loop passes through many frames)
        # where it failed: the site the oracle read (a torch program's: ``details["site"]``), else the
        # innermost compiler frames
        site = f.details.get("site") or compiler_frames(f.traceback)
        parts = [f.backend, f.category, f.kind, f.phase, f.error_type, normalize(f.message, names=names),
                 *(site if f.kind != "timeout" else ())]
    elif f.category == BASELINE:  # the baseline's fault, whichever backends outvoted it
        parts = [BASELINE, f.other, *divergence(f, producer_op, dtype)]
    elif blamed_pass(f):  # one pass's defect, at whichever operator it rewrote (oracle/blame.py)
        _, kind, dtype_cls = divergence(f, producer_op, dtype)
        parts = [f.backend, "pass", blamed_pass(f), kind, dtype_cls]
    elif f.details.get("beside"):  # shows at any operator beside the part that makes it (run/reduce.py)
        _, kind, _ = divergence(f, producer_op, dtype)
        parts = [f.backend, "beside", f.category, f.details["beside"], kind]
    else:  # the variants of one backend that diverge at the same operator the same way are one bug
        parts = [f.backend, "divergence", f.category, *divergence(f, producer_op, dtype)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def _later_inputs(op: str) -> set[str]:
    """The input names of an operator's latest ONNX version (attributes of older versions by those names
    moved there: Reduce*'s axes, Split's split, Pad's pads)."""
    from onnx import defs

    try:
        return {i.name for i in defs.get_schema(op).inputs}
    except defs.SchemaError:
        return set()


def _schema_attributes(op: str, opset: int) -> tuple[tuple[str, ...], dict[str, object]]:
    """(the names of an operator's attributes, their defaults) by its ONNX schema; (op,), {} if unknown."""
    import onnx
    from onnx import defs

    try:
        schema = defs.get_schema(op, opset)
    except defs.SchemaError:
        return (op,), {}
    defaults = {k: onnx.helper.get_attribute_value(a.default_value) for k, a in schema.attributes.items()
                if a.default_value.name}
    return tuple(sorted(schema.attributes)), {k: v.decode() if isinstance(v, bytes) else v for k, v in defaults.items()}


def root_cause(f: Finding, op: str, opset: int, attrs: dict, shapes: Iterable[Iterable[int | None]],
               flags: bool = True) -> str:
    """One root cause across operators, for a value divergence at a single operator (a reduced case's
    first diverging node, or a migrated single-operator test) with a trigger (the reduction keeps only
    the attributes the divergence needs):

    - a mode: a string attribute off its ONNX default, such as auto_pad=SAME_UPPER;
    - the attribute form of what later versions take as an input (Reduce*'s axes before opset 18):
      a converter reads that form in its own code;
    - an empty data input (a zero-length axis; ``shapes``: the data inputs'): the reduction over an
      empty set, whose result the spec defines by the operation's identity;
    - only where none of those is, a flag off its default: an integer attribute whose default and
      value are 0 or 1, such as noop_with_empty_axes=1 (beside another trigger, a flag is more often
      what the reduced shapes made necessary: keepdims=0 where every reduced axis has length 1).

    Operators with one attribute schema (Conv, ConvInteger and QLinearConv; the ten Reduce*) share the
    code that reads it, so one trigger there is one bug, whatever the dtypes.  "" when there is no
    trigger (the signature by operator stands), and for crashes (keyed by message) and pass defects
    (keyed by the pass).  Only ever used to merge bugs (``Store.merge_root``), never to split one.
    ``flags``: whether a flag may be guessed (not where a trigger analysis tried the case without it:
    OpenVINO's NonMaxSuppression drops disjoint boxes with center_point_box=1 and without it alike)."""
    if f.oracle in (CRASH, DISRUPTIVE) or blamed_pass(f):
        return ""
    family, trigger = _triggers(op, opset, attrs, shapes, flags)
    if not trigger:
        return ""
    parts = ["root", f.backend, f.category, f.kind, ",".join(family or (op,)), *trigger]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def _triggers(op: str, opset: int, attrs: dict, shapes: Iterable[Iterable[int | None]],
              flags: bool = True) -> tuple[tuple[str, ...], list[str]]:
    """The operator's attribute family and the triggers of one call (``root_cause``)."""
    family, defaults = _schema_attributes(op, opset)
    values = sorted((k, v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items())
    trigger = [f"{k}={v}" for k, v in values if defaults.get(k) != v and isinstance(v, str)]
    trigger += [f"{k} attribute" for k, _ in values if k in _later_inputs(op)]
    if any(0 in tuple(s) for s in shapes):
        trigger.append("empty input")
    if not trigger and flags:
        trigger = [f"{k}={v}" for k, v in values if isinstance(v, int) and not isinstance(v, bool)
                   and v in (0, 1) and defaults.get(k) in (0, 1) and defaults.get(k) != v]
    return tuple(family or ()), trigger


def _data_shapes(node: Node, graph: Graph) -> list[tuple[int, ...]]:
    # data inputs only: an empty axes or pads tensor is a form of the call, not an empty set
    return [v.type.shape for i in node.inputs if (v := graph.values.get(i)) is not None
            and v.kind != CONST_KIND and not v.pinned]


def named_nodes(graph: Graph, message: str) -> list[Node]:
    """The nodes of ``graph`` that ``message`` names, by their names as whole words."""
    return [n for n in graph.nodes if n.name and re.search(rf"\b{re.escape(n.name)}\b", message)]


def crash_upstream_root(f: Finding, graph: Graph) -> str:
    """The root of a reduced crash at a node the message names whose inputs other nodes make: the
    reduction kept those producers because the crash needs what they give (a fresh input of the same
    type does not crash), so the crash is a consequence of how the compiler handled them, e.g. OpenVINO
    2026.4's ConcatFromSequence gives an output of dynamic element type, on which a LeakyRelu, an LSTM
    or a ReduceMax then fails to convert, each with its own message.  Keyed by the operators and triggers
    of the sources of what feeds it (its ancestors that no node feeds: through a Flatten in between, the
    ConcatFromSequence); "" when the crash is not named at such a node."""
    if f.oracle != CRASH:
        return ""
    named = {n.name: n for n in named_nodes(graph, f.message)}
    made_by = {o: n for n in graph.nodes for o in n.outputs}
    crashed = [n for n in named.values() if any(i in made_by for i in n.inputs if i)]
    if len(crashed) != 1:
        return ""
    ancestors: dict[str, Node] = {}
    todo = [made_by[i] for i in crashed[0].inputs if i in made_by]
    while todo:
        n = todo.pop()
        if n.name not in ancestors:
            ancestors[n.name] = n
            todo += [made_by[i] for i in n.inputs if i in made_by]
    sources = {name: n for name, n in ancestors.items() if not any(i in made_by for i in n.inputs if i)}
    parts = ["crash upstream", f.backend, f.category, f.phase]
    keys = set()
    for _, n in sorted(sources.items()):
        if _through_sequence(n.op):  # whichever sequence operators: the tensor taken out of a sequence
            keys.add(("a tensor out of a sequence",))
            continue
        family, trigger = _triggers(n.op, graph.opset, n.attrs, _data_shapes(n, graph))
        keys.add((",".join(family or (n.op,)), *trigger))
    for key in sorted(keys):
        parts += key
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=256)
def _through_sequence(op: str) -> bool:
    """Whether an operator (or an idiom of several, "SplitToSequence+ConcatFromSequence") reads or makes
    an ONNX sequence."""
    from onnx import defs

    for part in op.split("+"):
        try:
            schema = defs.get_schema(part)
        except defs.SchemaError:
            continue
        if any(t.startswith("seq(") for io in (*schema.inputs, *schema.outputs) for t in io.types):
            return True
    return False


# an operator an error message quotes: IREE's torch.operator "onnx.MaxPool", OpenVINO's <Node(ReduceSum): ...>
_FAMILY_OF = {op: name for name, ops in FAMILIES.items() for op in ops}
_QUOTED_OP = re.compile(r"(?<![\w])(?:onnx\.|Node\()(" + "|".join(sorted(_FAMILY_OF, key=len, reverse=True))
                        + r")(?![\w])")


# the operators whose failure in the same words is one defect (``same_roots``): a converter family's, and the
# sliding windows, whose output extents one piece of code computes (IREE's global optimization fails a
# linalg.generic's inferred shape where a strided Conv or AveragePool has an output extent of 1: c48 and c49,
# hand-checked one defect twice)
WINDOWS = (*FAMILIES["pooling"], *SHARED_FORM["Conv/ConvInteger/QLinearConv"][0])
_SAME_WORDS = {**_FAMILY_OF, **{op: "a sliding window (Conv*, *Pool)" for op in WINDOWS}}


def family_crash_root(f: Finding, names: Iterable[str] = (), ops: Collection[str] | None = None) -> str:
    """Of a crash whose message quotes the failing operator, where that operator is of a converter family
    (``oracle/triggers.py``'s ``FAMILIES``: MaxPool, AveragePool and LpPool share IREE's pooling lowering),
    the signature of its message with the family in place of the operator: one lowering's defect with one
    message is one root, whichever of the family the case had (a sibling run cannot always show it: the
    case that makes MaxPool fail may be one that AveragePool pads otherwise); "" otherwise.  ``ops``: the
    reduced case's operators, where the message is the unreduced test's (OpenVINO lists every operator it
    failed to convert: a ReduceL1 the reduction took away names no root of a Trilu)."""
    quoted = _QUOTED_OP.findall(f.message or "")
    if f.oracle != CRASH or not quoted or (ops is not None and not set(quoted) & set(ops)):
        return ""
    message = _QUOTED_OP.sub(lambda m: m.group(0)[:m.start(1) - m.start(0)] + _FAMILY_OF[m.group(1)], f.message)
    parts = ["family crash", f.backend, f.category, f.kind, f.phase, f.error_type,
             normalize(message, names=names), *compiler_frames(f.traceback)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def reduced_first(f: Finding, graph: Graph, first: dict | None) -> dict | None:
    """The first diverging node of a reduced case: the reduction's, else the finding's own where the
    reduced graph still has that node (a reduction that kept the case whole locates nothing new)."""
    if first:
        return first
    own = f.details.get("first_diverging") or {}
    return own if own.get("node") and any(n.name == own["node"] for n in graph.nodes) else first


def graph_root_cause(f: Finding, graph: Graph, first: dict | None, flags: bool = True) -> str:
    """``root_cause`` at a reduced graph's first diverging node (``first``: reduction.json's)."""
    node = next((n for n in graph.nodes if n.name and n.name == (first or {}).get("node")), None)
    if node is None:
        return ""
    return root_cause(replace(f, kind=(first or {}).get("kind", f.kind)), node.op, graph.opset, node.attrs,
                      _data_shapes(node, graph), flags)


def reduced_root(f: Finding, graph: Graph, first: dict | None, signed_as: str, signature: str,
                 triggers: Analysis | None = None) -> str:
    """The root a reduced bug merges by: the readable root of its trigger analysis (``triggers``:
    ``trigger_root``, oracle/triggers.py), else its trigger's by attributes (``graph_root_cause``), or for a
    crash the nodes that feed the crashing one (``crash_upstream_root``); else the signature its reduction
    found it under (``signed_as``: bystanders of one cause, run/reduce.py); else its own.  A crash's family
    root (``family_crash_root``) comes first, unless the crash is fed by other nodes (then it is theirs): the
    lowering's own error names the defect, whichever attribute brought the case to it (MaxPool's ceil_mode,
    AveragePool's pads)."""
    first = reduced_first(f, graph, first)
    upstream = crash_upstream_root(f, graph)
    consumer = triggers is not None and triggers.at_consumer
    typing = triggers is not None and triggers.upstream is not None and triggers.upstream.first.get("kind") == \
        PRODUCER_TYPING  # the run showed it: the reader runs on another producer's output of that shape
    if triggers is not None and triggers.upstream is not None and (typing or not (upstream and consumer)):
        return triggers.root  # a crash on a producer's wrong output (or type): the producer is its root
    family = "" if upstream else family_crash_root(f, [*graph.values, *(n.name for n in graph.nodes if n.name)],
                                                   {n.op for n in graph.nodes})
    # the sources of what the crashing node reads, where its message names it, say more than its producers'
    # right values alone: a tensor out of an OpenVINO sequence has the right values and a dynamic element type
    own = triggers.root if triggers is not None and not (upstream and consumer) else ""
    # a converter that fails on an input only the run shapes is at fault, not what made the input; one that
    # fails on what its producers gave (a tensor out of a sequence) comes after them
    converter = converter_root(f, graph) or check_root(f, graph)
    shaped = triggers is not None and triggers.upstream is not None and triggers.upstream.finding is None
    attributes = graph_root_cause(f, graph, first, flags=triggers is None)  # a flag a trigger analysis tried: no guess
    # a trigger in how the backend reads values is one root in any phase, before a lowering's message
    # (OpenVINO's constant Trilu k beyond 2**53: an import error in one case, a wrong shape in another)
    values = own if triggers is not None and triggers.kinds and all(k in PHASE_FREE for k in triggers.kinds) else ""
    return (values or family or own or attributes or frontend_site_root(f) or (converter if shaped else "")
            or upstream or converter or signed_as or signature)


def frontend_site_root(f: Finding) -> str:
    """Of a crash while a Python frontend converts the model (TVM's ONNX importer), the line of its
    converter (``_impl_vN``) the error came through: one line's defect is one root, whatever message it
    ends in (TVM's Expand converter, reading a shape it takes for static, fails with "ShapeType does not
    support subscript" or "'Var' object has no attribute 'value'" alike).  Not the dispatcher's line that
    calls every converter, nor a helper's that many call: "" without a converter frame."""
    if f.oracle != CRASH or f.phase != "import":
        return ""
    converters = [(path.rsplit("/", 1)[-1], line, fn) for path, line, fn in _FRAME.findall(f.traceback)
                  if any(d in path for d in FRONTEND_DIRS) and _CONVERTER_ENTRY.search(fn)]
    if not converters:
        return ""
    file, line, fn = converters[-1]  # a traceback lists the innermost frame last
    return f"{f.backend}: frontend {file}:{line} ({fn})"


def _sections(message: str, graph: Graph | None) -> str:
    """What a crash's message says about the operators of ``graph``: where the message reports several
    operators, one section each (OpenVINO's "-- Trilu-22 with a message:"), the one of the case's operator
    (an unreduced test's report names operators its reduced case no longer has), "" where two of the case's
    operators fail (a Resize and a QLinearConv in one reduced case bridged two roots of c44); else the whole
    message."""
    if graph is None or not _SECTION.search(message):
        return message
    ops = {n.op for n in graph.nodes}
    mine = [m for m in _SECTION.finditer(message) if m.group(1) in ops]
    # where several of the case's operators fail, their words would join two defects' roots: none
    return mine[0].group(2) if len({m.group(1) for m in mine}) == 1 else ""


def converter_root(f: Finding, graph: Graph | None = None) -> str:
    """Of an import crash whose C++ frontend's message says a check failed in one operator's converter
    (OpenVINO's ``src/frontends/onnx/frontend/src/op/lp_pool.cpp:30``), that converter's file, whichever
    of its checks failed (GlobalLpPool's converter requires a static batch at line 30 and a static channel
    at 31); not a shared helper's or core shape inference's, which every converter reaches; "" otherwise.
    ``graph``: the reduced case, whose operators' sections of the message count (``_sections``)."""
    if f.oracle != CRASH or f.phase != "import":
        return ""
    site = _CPP_CONVERTER.search(_sections(f.message or "", graph))
    return f"{f.backend}: frontend {site.group(1)} converter {site.group(2)}" if site else ""


def failing_operator(f: Finding, graph: Graph) -> str:
    """The operator of a reduced case that a crash failed in: the case's only one, else the one whose section
    of the compiler's report the message holds, else the case's one sink (a reduced case crashes at its end);
    "" where none is known."""
    if f.oracle != CRASH or not graph.nodes:
        return ""
    ops = {n.op for n in graph.nodes}
    named = [m.group(1) for m in _SECTION.finditer(f.message or "") if m.group(1) in ops]
    sinks = [n.op for n in graph.nodes if not any(o in x.inputs for x in graph.nodes for o in n.outputs if o)]
    return graph.nodes[0].op if len(graph.nodes) == 1 else named[0] if named else sinks[0] if len(sinks) == 1 else ""


def check_root(f: Finding, graph: Graph) -> str:
    """Of a crash whose C++ message says where a check failed (OpenVINO's report of the operators it could
    not convert, one section each), the operator that failed with the innermost failed check of its own
    section: one check failing under one operator is one defect, whatever shapes fed it (LayerNormalization's
    converter builds a Reshape that core shape inference refuses at reshape_shape_inference.hpp:360, for a
    scalar and for a rank-4 input alike).  The operator: the case's only one, else the one whose section it
    is, else the case's one sink, where the crash of a reduced case is (c48: OpenVINO's BatchNormalization of
    a 1-D input, alone, after a Sum, after a ConcatFromSequence); "" otherwise."""
    op = failing_operator(f, graph)
    sites = _CPP_CHECK.findall(_sections(f.message or "", graph)) if op else []
    if not sites:
        return ""
    file, line = sites[-1]
    return f"{crash_in(f)}: {op} fails the check at {file}:{line}"


# an MLIR conversion that found no pattern for a computation of the torch dialect (IREE's ONNX path): the
# pattern of that operation is the code at fault.  Not a constant's or a list's (torch.constant.int,
# torch.prim.ListConstruct), which is left when something upstream failed first: those join nothing.
_ILLEGAL_COMPUTATION = re.compile(r"failed to legalize operation '(torch\.aten\.[\w.]+)'")
# a lowering that put one of its operands in place of its result, of another type than the result's (IREE
# lowers a one-input Sum, an identity Transpose and a Reduce* of no axes so: fed a tensor shaped at run time
# where the result is typed static, each fails in these words; c48, hand-checked one defect)
_MATERIALIZATION = re.compile(r"failed to legalize unresolved materialization from \('!torch\.vtensor<\[([^\]]*)\]"
                              r"[^)]*\) to \('!torch\.vtensor<\[([^\]]*)\]")
# a float64 cast left to IREE's VM conversion, which has no pattern for one (a MaxPool's f64 pad value truncated, a
# Range's f64 size converted to an integer: c48, hand-checked one defect, with f64 kept by the O0 variants)
_F64_CAST = re.compile(r"failed to legalize operation 'arith\.(?:truncf|fptoui|fptosi)'[^\n]*: \(f64\)")
# a cast that no stage took away, left to the LLVM translation (IREE's Hardmax read by two operators, c48)
_UNTRANSLATED = re.compile(r"LLVM Translation failed for operation: ([\w.]+)")


def legalization_root(f: Finding) -> str:
    """Of a crash whose compiler left an operation that a later stage cannot take, that leftover: a computation
    it could not legalize (``_ILLEGAL_COMPUTATION``: its lowering is one defect, whichever ONNX operator led to
    it: IREE's torch.aten.matmul of a 1-D operand and one of rank 3 or more, reached through MatMul and
    MatMulInteger, hand-checked one defect in c45), a result replaced by a value of another shape
    (``_MATERIALIZATION``: from one shaped at run time to a static one, or between static ones), a float64 cast
    the VM conversion met (``_F64_CAST``), a cast the LLVM translation met (``_UNTRANSLATED``); "" otherwise."""
    if f.oracle != CRASH:
        return ""
    message = f.message or ""
    who = crash_in(f)
    if found := _ILLEGAL_COMPUTATION.search(message):
        return f"{who}: {found.group(1)} fails to legalize"
    if found := _MATERIALIZATION.search(message):
        shaped = "?" in found.group(1) and "?" not in found.group(2)
        return (f"{who}: a result replaced by a value of " + ("a shape known at run time only" if shaped
                                                              else "another shape") + " (unresolved materialization)")
    if _F64_CAST.search(message):
        return f"{who}: a float64 cast left to the VM conversion"
    if found := _UNTRANSLATED.search(message):
        return f"{who}: {found.group(1)} left to the LLVM translation"
    return ""


# a frame of a compiler's own C++ source in a Python traceback (TVM's FFI lists them: "/project/src/relax/
# backend/vm/vm_shape_lower.cc", line 508): a pass's (its backend lowering, its transforms), not an operator's
_PASS_FRAME = re.compile(r'File "[^"]*/src/((?:relax/(?:backend|transform)|tir/transforms?|s_tir/transform)/'
                         r'[\w./]+\.cc)", line (\d+), in ')


def pass_check_root(f: Finding) -> str:
    """Of a crash of a failed internal check ("Check failed: ...") whose innermost C++ frame is a compiler pass's
    (``_PASS_FRAME``), that site: one pass's check failing is one defect, whichever operator brought the case
    to it (TVM's VMShapeLower meets a symbolic shape it has not computed after a Tile and after a Range of
    operands fed at run time: c48, hand-checked one defect); "" otherwise: an operator's own code (its type
    inference) checks for itself, and a pass's refusal of an operator it was not given lowered ("CodeGenVM
    cannot emit this Relax operator") is that operator's lowering missing."""
    checked = f.oracle == CRASH and (f.message or "").startswith("Check failed:")
    sites = _PASS_FRAME.findall(f.traceback or "") if checked else []
    if not sites:
        return ""
    file, line = sites[-1]  # a traceback lists the innermost frame last
    return f"{crash_in(f)}: the check at {file.rsplit('/', 1)[-1]}:{line}"


def producer(graph: Graph, output: int) -> tuple[str, str]:
    """The operator type that produced graph output ``output``, and its dtype."""
    if not 0 <= output < len(graph.outputs):
        return "", ""
    name = graph.outputs[output]
    for n in graph.nodes:
        if name in n.outputs:
            return n.op, graph.values[name].type.dtype
    return "", graph.values[name].type.dtype


def graph_signature(f: Finding, graph: Graph) -> str:
    """The signature of a finding on a dlcfuzz graph: where a divergence starts, and the graph's own
    value and node names stripped from messages."""
    return signature(f, *producer(graph, f.output), names=[*graph.values, *(n.name for n in graph.nodes if n.name)])


def title(f: Finding, producer_op: str = "") -> str:
    """A one-line human summary of the bug, naming the baseline that judged it."""
    if f.oracle == DISRUPTIVE:
        v = f.details.get("violation", {})
        broken = f"a {v.get('op')} that breaks '{v.get('constraint')}'"
        if f.kind == "inconsistent":
            return f"{f.backend} accepts {broken}; {f.variant} and {f.other} disagree"[:200]
        return f"{f.backend} {f.phase} {f.kind} on {broken}: {f.message.split(' (model breaks')[0]}"[:200]
    if f.oracle == CRASH:
        what = f"{f.error_type}: {normalize(f.message)}" if f.kind == "exception" else f.message
        return f"{f.backend} {f.phase} {f.kind}: {what}"[:200]
    first = f.details.get("first_diverging") or {}
    op = first.get("op") or producer_op
    where = (f" first at {op} ({first.get('node') or first.get('output')})" if first.get("op")
             else f" at the output of {op}" if op else "")
    kind = first.get("kind", f.kind)
    if f.category == BASELINE:
        return f"{f.other} disagrees with {f.backend} {f.variant} and another compiler: {kind} mismatch{where}"[:200]
    who = f"{f.backend} {f.variant}" if f.oracle == METAMORPHIC else f.backend  # one bug spans the variants
    cause = (f", caused by pass {blamed_pass(f)}" if blamed_pass(f)
             else f", only beside {f.details['beside']} (which shares no value with it)" if f.details.get("beside")
             else "")
    return f"{who} vs {f.other}: {kind} mismatch{where}{cause}"[:200]


# migrated tests: the frontend backend -> the compiler behind it; a crash after the import is the
# compiler's, whichever frontend led there
COMPILER_OF = {"tvm-torch": "tvm", "openvino-torch": "openvino", "inductor-torch": "inductor"}
# the frontends' own Python code (TVM's importers, OpenVINO's torch decoders): where a frame names the site
FRONTEND_DIRS = ("/tvm/relax/frontend/", "/openvino/frontend/")
# a check failed in one operator's converter of a C++ frontend: (frontend, converter file)
_CPP_CONVERTER = re.compile(r"src/frontends/(\w+)/(?:frontend/)?src/op/([\w./]+)\.cpp:\d+")
# a section of OpenVINO's report of the operators it could not convert: (operator, what it says)
_SECTION = re.compile(r"^-- ([\w.+]+)-\d+ with a message:\n(.*?)(?=^-- |^Summary:|\Z)", re.M | re.S)
# a failed C++ check's site in a message ("Check '...' failed at src/core/.../reshape_shape_inference.hpp:360:")
_CPP_CHECK = re.compile(r"failed at (?:\S*/)?([\w.]+\.(?:cpp|hpp|h|cc)):(\d+)")
# the entry points of TVM's ONNX converter classes (OnnxOpConverter._impl_vN): the converter itself
_CONVERTER_ENTRY = re.compile(r"_impl(_v\d+)?$")
# what a message says about the types it was given, which differ between tests of one cause: dtype names
# (float32, f32, tensor(float), Float), torch schemas (aten::add.Tensor(Tensor self, ...) -> Tensor)
_TYPE_TEXT = [
    (re.compile(r"\b\w+::[\w.]+\((?:[^()]|\([^()]*\))*\)(?:\s*->\s*\S+)?"), "SCHEMA"),
    (re.compile(r"\btensor\(\w+\)|\b(?:b?float|int|uint|complex)\d*\b|\b[fiu](?:8|16|32|64)\b|\bbf16\b"
                r"|\b(?:Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool|ComplexFloat|ComplexDouble)\b"
                r"|\b(?:double|half|bool|boolean)\b", re.I), "DTYPE"),
]


def _frontend_frames(traceback: str) -> list[tuple[str, str]]:
    """(file, function) of the frames inside a frontend's own Python code, innermost first."""
    return [(path.rsplit("/", 1)[-1], fn) for path, _, fn in _FRAME.findall(traceback)[::-1]
            if any(d in path for d in FRONTEND_DIRS)]


def _conversion(f: Finding, reported: str) -> str:
    """The site of a finding in the frontend: of the converters the backend reported for the model
    (``reported``, comma-separated), the one whose frame is the innermost frontend frame; when that
    frame is shared frontend code (an attribute parser, an input-kind check), that frame as
    ``file:function``, whichever converters the graph had; without frontend frames, the reported
    converters."""
    names = [n for n in reported.split(",") if n]
    frames = _frontend_frames(f.traceback)
    if not frames:
        return reported
    file, fn = frames[0]
    hit = [n for n in names if n.rsplit(":", 1)[-1] == fn]
    if hit:
        return hit[0]
    if _CONVERTER_ENTRY.search(fn) and len(names) == 1:  # inside the one reported converter class
        return names[0]
    return f"{file}:{fn}"


def clause(f: Finding, names: Iterable[str] = ()) -> str:
    """The innermost error clause of a crash, with the types it mentions stripped: one cause seen with
    float32 and int64, or through two torch overloads, is one clause."""
    message = innermost(f.message)
    for pat, rep in _TYPE_TEXT:
        message = pat.sub(rep, message)
    return normalize(message, lines=1, names=names)


def migrated_signature(f: Finding, op: str, conversion: str = "", names: Iterable[str] = ()) -> str:
    """One signature per site and symptom for a migrated test's finding.

    - A crash after the frontend (compile or run phase) is an optimizer or runtime bug: the
      campaign's usual signature, under the compiler's name (``openvino-torch`` -> ``openvino``).
    - A finding of the exporter (``EXPORTER``) is keyed on the operator; one in the baseline
      (``BASELINE``) on the baseline and the operator, whichever frontends saw it.
    - ``conversion``: what the backend reported as the converter(s) of the model; the site is the
      converter, or the shared frontend frame the crash is in (``_conversion``).
    - Without either (OpenVINO's C++ converters, ONNX Runtime, the exporter): the operator stands for
      its converter, and a crash adds its innermost clause with types stripped (``clause``).

    ``names``: the test's value and node names and its operator's parameter names, which stand
    for nothing across tests."""
    if f.category == EXPORTER:  # the exporter's defect on one operator, whatever it led each frontend to
        parts = [f.backend, f.oracle, op, f.kind]
    elif f.oracle == CRASH and f.phase not in ("import", "start"):
        return signature(replace(f, backend=COMPILER_OF.get(f.backend, f.backend)), names=names)
    elif f.category == BASELINE:
        parts = [BASELINE, f.other, op, f.kind]
    elif conversion or (f.oracle == CRASH and _frontend_frames(f.traceback)):
        site = _conversion(f, conversion)
        parts = [f.backend, f.oracle, site] if site == conversion or site in conversion.split(",") else \
            [f.backend, f.oracle, site, f.error_type]
    elif f.oracle == CRASH:
        parts = [f.backend, f.oracle, op, f.error_type, clause(f, names)]
    else:
        parts = [f.backend, f.oracle, op, f.kind]
    return hashlib.sha256("\x1f".join(["migrated", *parts]).encode()).hexdigest()[:16]


# -- trigger analysis (oracle/triggers.py) -------------------------------------------------------------
SIBLING_WORDING = 0.8  # how alike a sibling's crash message must be to the bug's (difflib's ratio)
TRIGGERS_META = "triggers"  # the store's meta key: the trigger analyses' bugs, runs and seconds


def trigger_shows(finding: Finding, signature: str | Collection[str], first: dict | None,
                  reworded: list[Finding] | None = None) -> Callable[[list[Finding], Graph, str], bool]:
    """Whether a trial's findings hold the bug: its signature (one of them: a recorded reduced case is known
    by the signature an earlier dlcfuzz gave it and by today's), or (a value divergence) the same kind of
    divergence at the suspect node, by name, whatever operator a sibling variation put there (a trial is
    not localized: the divergence is read at the producer of the differing output), or (a crash under a
    sibling) the same crash in the sibling's words: TVM's ReduceMin of bool cannot decide a max_value
    where its ReduceMax cannot decide a min_value.  ``reworded`` (a recorded bug's): where the first trial
    (the control) gives no crash of the bug's signature but one of its variant, phase and error type, the
    backend words that crash otherwise today (IREE's SIGABRT by LLVM's fatal error, not stack frames): it
    is the bug, appended to ``reworded``, and its signature the one the later trials are read by."""
    name = (first or {}).get("node", "")
    kind = (first or {}).get("kind", finding.kind)
    said = normalize(finding.message)
    wanted = {signature} if isinstance(signature, str) else set(signature)
    control = [reworded is not None]  # the next trial is the control, and a rewording may be adopted

    def shows(findings: list[Finding], g: Graph, variation: str) -> bool:
        at = next((n.op for n in g.nodes if name and n.name == name), g.nodes[0].op if len(g.nodes) == 1 else "")
        adopt, control[0] = control[0], False
        mine = [f for f in findings if f.backend == finding.backend]
        if adopt and finding.oracle == CRASH and not any(graph_signature(f, g) in wanted for f in mine):
            same = [f for f in mine if f.oracle == CRASH and (f.variant, f.phase, f.kind, f.error_type) == (
                finding.variant, finding.phase, finding.kind, finding.error_type)]
            if same and reworded is not None:
                reworded.append(same[0])
                wanted.add(graph_signature(same[0], g))
                return True
        for f in mine:
            if graph_signature(f, g) in wanted:
                return True
            if finding.diverges and f.diverges and at and producer(g, f.output)[0] == at and f.kind == kind:
                return True
            if (variation == SIBLING and finding.oracle == CRASH == f.oracle
                    and (f.phase, f.kind, f.error_type) == (finding.phase, finding.kind, finding.error_type)
                    and difflib.SequenceMatcher(None, said, normalize(f.message)).ratio() >= SIBLING_WORDING):
                return True
        return False
    return shows


def analyze_triggers(pool: Any, finding: Finding, graph: Graph, inputs: dict, first: dict | None,
                     signature: str | Collection[str], tolerances: dict | None = None, max_runs: int = MAX_RUNS,
                     skip: Iterable[str] = (), twin_of: str = "", recorded: bool = False) -> Analysis:
    """The trigger analysis (``oracle.triggers.analyze``) of a reduced case, run through ``pool`` (a
    ``WorkerPool``: it also tells the backend's variants); ``signature``: the bug's (or its signatures: see
    ``trigger_shows``); ``twin_of``: the declared variant whose twin (an option left to the compiler's
    default) the finding's variant is; ``recorded``: the bug is an earlier dlcfuzz's, whose crash today's
    backend may word otherwise (``Analysis.reworded``)."""
    try:
        _, described = pool.describe(finding.backend)
    except Exception:  # the backend's worker cannot start: nothing to vary
        return Analysis()
    if twin_of:
        described = with_unset_twins(dict(described), twin_of)
    feeds = {v.name: (v.data if v.pinned else inputs[v.name]) for v in graph.inputs if v.pinned or v.name in inputs}
    first = reduced_first(finding, graph, first)
    reworded: list[Finding] | None = [] if recorded else None
    a = analyze(pool, finding, graph, feeds, first, dict(described),
                trigger_shows(finding, signature, first, reworded), tolerances, max_runs, tuple(skip))
    a.reworded = reworded[0] if reworded else None
    if a.swallowed is not None and a.kinds == [THREADS] and a.runs < max_runs:
        # the error the one-thread variant swallowed is a crash of the twin's; where that crash follows from a
        # producer's wrong output, the producer's bug is the root (OpenVINO's ReduceLogSumExp ignoring its axes
        # makes a ReverseSequence fail: swallowed on one thread, the wrong values are the ReduceLogSumExp's)
        crash = a.swallowed
        of_crash = analyze_triggers(pool, crash, graph, inputs, None, graph_signature(crash, graph), tolerances,
                                    max_runs - a.runs, (*skip, THREADS), twin_of=finding.variant)
        a.runs, a.seconds = a.runs + of_crash.runs, a.seconds + of_crash.seconds
        a.compiler_seconds += of_crash.compiler_seconds
        a.tried += [{**t, "cause": f"{t['cause']} (the twin's crash)"} for t in of_crash.tried]
        # adopted where it is a producer's bug, or the operator's form (OpenVINO's PRelu with a 1-D slope: the
        # twin's "Eltwise shape infer" error vanishes with the slope at the input's rank, as the wrong values do)
        form = bool(of_crash.kinds) and all(k in OPERATOR_FORM for k in of_crash.kinds)
        if of_crash.root and (form or (of_crash.upstream is not None and of_crash.upstream.finding is not None)):
            a.root, a.trigger, a.kinds, a.family = of_crash.root, of_crash.trigger, of_crash.kinds, of_crash.family
            a.upstream, a.shown_in = of_crash.upstream, of_crash.shown_in
        return a
    up = a.upstream
    if up is not None and up.finding is not None:  # a knock-on crash: rooted where its producer's bug would be
        own = graph_signature(up.finding, up.graph)
        of_up = analyze(pool, up.finding, up.graph, up.feeds, up.first, dict(described),
                        trigger_shows(up.finding, own, up.first), tolerances, max(0, max_runs - a.runs), tuple(skip))
        a.runs, a.seconds = a.runs + of_up.runs, a.seconds + of_up.seconds
        a.compiler_seconds += of_up.compiler_seconds
        # the producer's own bug (its flags were tried: no guess)
        a.root = of_up.root or graph_root_cause(up.finding, up.graph, up.first, flags=False) or own
        # a producer's own crash is a cause only where switching its trigger off in the case takes the bug away
        if up.finding.oracle == CRASH and of_up.kinds and a.runs < max_runs:
            still = shows_without(pool, finding, graph, feeds, up.first["node"], dict(described),
                                  trigger_shows(finding, signature, first), of_up, tolerances)
            a.runs += 1
            a.tried.append({"kind": KNOCK_ON, "cause": f"the case without {' with '.join(of_up.trigger)} at "
                                                        f"{up.first['op']}", "result": "invalid" if still is None
                            else "shows" if still else "vanished"})
            if still:  # another path of the reader's, not the producer's bug: no knock-on, no root
                a.root, a.trigger, a.kinds, a.family, a.upstream, a.at_consumer = "", [], [], "", None, False
    return a


def record_triggers(store: Any, folder: Path | None, analysis: Analysis) -> None:
    """Adds one analysis to the store's accounting (meta ``triggers``: bugs, runs, seconds: the campaign's
    CPU breakdown shows it beside the reductions) and writes it into the bundle's reduction.json."""
    if not analysis.runs:
        return
    so_far = store.get_meta(TRIGGERS_META) or {}
    store.set_meta(TRIGGERS_META, {"bugs": so_far.get("bugs", 0) + 1, "runs": so_far.get("runs", 0) + analysis.runs,
                                   "seconds": round(so_far.get("seconds", 0.0) + analysis.seconds, 3),
                                   "compiler_seconds": round(so_far.get("compiler_seconds", 0.0)
                                                             + analysis.compiler_seconds, 3)})
    path = folder / "reduction.json" if folder is not None else None
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            return
        data["triggers"] = analysis.summary()
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)


# the triggers in an operator's element types: a crash that needs them and says the same words at another
# operator is that type's gap in the compiler (``same_roots``)
ELEMENT_TYPES = frozenset({SIGNED, ELEMENT_TYPE})
ALIASES_META = "root_aliases"  # the store's meta key: a root key -> the root it is one with (``join_roots``)


def operators_of(family: str) -> tuple[str, ...]:
    """The operators a root's family names: a converter family's, a shared form's, Resize's forms', else the
    operator."""
    if family == RESIZE_FORMS:
        return ("Resize",)
    return FAMILIES.get(family) or (SHARED_FORM[family][0] if family in SHARED_FORM else (family,))


def same_roots(f: Finding, graph: Graph, inputs: dict, analysis: Analysis | None) -> list[str]:
    """Root keys that name this bug's root otherwise (``join_roots``): where siblings showed it, the name
    each of those operators' own analysis gives it (OpenVINO's ReduceL1 at version 13 finds no sibling
    where ReduceLogSumExp finds ReduceL1: "Reduce* at version 13"); for a crash, the reduced case itself,
    byte for byte (one model handed over, one fix: TVM's ConstantOfShape of a shape fed at run time fails
    in one pipeline's lowering and in the other's code generation), and its failed converter check."""
    keys = []
    if analysis is not None and analysis.root and analysis.trigger:
        keys += [root_name(f, analysis.trigger, op, analysis.kinds) for op in analysis.shown_in]
    first = f.details.get("first_diverging") or {}
    if (f.diverges and analysis is not None and dtype_class(first.get("dtype", "")) != "float"
            and any(t["kind"] == ELEMENT_TYPE and t["result"] == "shows" for t in analysis.tried)):
        # wrong values that the operator's operands fed as float32 still show: the element type is no cause,
        # and the bug is the one float32 data shows (c46: TVM's ScatterElements writes int64 and float32 data
        # at the same wrong offsets, two roots by the data's type)
        keys.append(graph_signature(replace(f, details={**f.details, "first_diverging": {**first, "dtype": "float32"}}),
                                    graph))
    if f.oracle == CRASH:
        h = hashlib.sha256(graph.to_json().encode())
        for k in sorted(inputs):
            a = np.asarray(inputs[k])
            h.update(f"{k}:{a.dtype}:{a.shape}".encode())
            h.update(a.tobytes())
        keys.append(f"{f.backend} crashes on the reduced case {h.hexdigest()[:16]}")
        # one check failing in one operator's converter is one defect, whatever trigger named the root
        # (OpenVINO's LayerNormalization reshape check: rooted by axis=0 in one case, by the check in another);
        # not where the analysis found the crash a knock-on: the check is right to refuse what a producer
        # gave it (c45: OpenVINO's Reduce converter refused a wrong shape from a ReduceLogSum and a
        # ConcatFromSequence's untyped output, which joined those two roots)
        # a producer that is right but whose output only the run shapes leaves the reader's check at fault
        shaped = analysis is not None and analysis.upstream is not None and analysis.upstream.first.get(
            "kind") == RUN_TIME_SHAPE
        # nor where the analysis names another operator than the one that failed: a case with two defects (a
        # QLinearConv's per-axis scales and a GlobalLpPool's static batch) would bridge their roots (c48: the
        # GlobalLpPool, Reduce and Gelu converters' keys all joined the QLinearConv root)
        failed = failing_operator(f, graph)
        other = (analysis is not None and bool(analysis.root) and bool(analysis.family) and not shaped
                 and bool(failed) and failed not in operators_of(analysis.family))
        if (analysis is None or KNOCK_ON not in analysis.kinds or shaped) and not other:
            keys.append(converter_root(f, graph) or check_root(f, graph) or legalization_root(f)
                        or pass_check_root(f))
            if failed:
                # one operator (or converter family) failing in the same words is one defect, whichever phase and
                # trigger (TVM's Resize divides by zero folding a constant: in its importer in one case, in
                # FoldConstant in another, c48)
                keys.append(f"{BACKEND_NAMES.get(f.backend, f.backend)} crash: {_SAME_WORDS.get(failed, failed)} "
                            f"saying {statement(f.message or '')}")
    if f.oracle == CRASH and analysis is not None and analysis.root and analysis.kinds == [STATIC] and (
            analysis.family in {n.op for n in graph.nodes}):
        keys.append(shaped_at_run_time_root(f, analysis.family))  # its dynamic-shape variant: the same unknown shape
    if f.oracle == CRASH and analysis is not None and analysis.root and set(analysis.kinds) <= ELEMENT_TYPES:
        # one type's gap in one compiler's words, whichever operator met it (TVM's Sign and Shrink of unsigned
        # types each make a negative constant: "cannot make uint from negative value", c48)
        keys.append(f"{crash_in(f)}: {' with '.join(analysis.trigger)}, saying {statement(f.message or '')}")
    # the analysis's own root too: where a crash's family message names the root (``reduced_root``), the
    # trigger's root is one with it (c49: IREE's ReduceSumSquare of axes fed at run time, rooted by its
    # family's "sum.dim_IntList" message, and its ReduceMax by "Reduce* with operands fed at run time")
    if analysis is not None and analysis.root:
        keys.append(analysis.root)
    return [k for k in dict.fromkeys(keys) if k]


def refused_root(f: Finding, graph: Graph) -> str:
    """The refusal root (``oracle/triggers.py``'s ``DECLINED_TWINS``) that a crash's words name: the error the
    static twin raised where the bug's dynamic-shape variant ran on unchecked, here failing on the path that
    checks; "" for no crash.  (An error one inference thread swallows is one root whatever its words:
    ``swallowed_root``.)  Only a key to join where such a root is listed (``root_keys``): words
    alone are no root (IREE's "failed to legalize operation" names no operation once quotes are stripped)."""
    return refusal_root(f.backend, _sections(f.message or "", graph)) if f.oracle == CRASH else ""


def root_keys(store: Any, same: Sequence[str], signature: str, refused: str) -> list[str]:
    """The keys a bug's root is joined with (``join_roots``): ``same_roots``'s, the bug's own signature (a
    bystander that another's reduction found under it is this root's), and the refusal root its words name
    where the store lists that root."""
    return [*same, signature, *([refused] if refused and store.has_root(refused) else [])]


def join_roots(store: Any, root: str, same: Sequence[str]) -> str:
    """The root key a bug merges under, with ``same`` (``same_roots``) recorded as one with it (the store's
    meta ``root_aliases``): the first of them known names the group, and the bugs already merged under
    another of them move to it."""
    known: dict[str, str] = store.get_meta(ALIASES_META) or {}
    canonical = known.get(root) or next((known[k] for k in same if k in known), root)
    if canonical == root and _SIGNATURE.fullmatch(root):  # a readable key the store lists names it over a signature
        canonical = next((k for k in same if k != root and store.has_root(k)), root)
    moved = [k for k in dict.fromkeys([root, *same]) if k != canonical and known.get(k) != canonical]
    for k in moved:
        known[k] = canonical
    for k, v in known.items():  # one level: a key that named a moved one names the group now
        if v in moved:
            known[k] = canonical
    if moved:
        store.set_meta(ALIASES_META, known)
        for k in moved:
            store.rename_root(k, canonical)
    return canonical


def trigger_root(pool: Any, finding: Finding, result: Any, tolerances: dict | None = None) -> Analysis:
    """The trigger analysis of a reduction's result (``run/reduce.py``'s ``ReductionResult``): nothing for a
    case that did not reproduce."""
    if not getattr(result, "reproduced", False):
        return Analysis()
    return analyze_triggers(pool, finding, result.graph, result.inputs, result.first_diverging, result.signature,
                            tolerances)
