"""Trigger analysis of a reduced bug: which feature of the case makes the compiler go wrong.

A reduced case still carries features that may or may not be the bug's cause: integer values beyond
the int32 range, unsigned element types, operands fed at run time or folded as initializers, dynamic
shapes, an attribute's form, the operator's version.  Each *variation* switches one suspected cause
off (``variations``), and the case runs again, judged as the campaign judges it (a confirmed run
through the ``Runner``, the usual baseline); a variation after which the bug's signature is gone
names a cause the bug needs.  The bug's *trigger* is the smallest set of causes whose removal makes
it vanish: the first single cause (in ``_ORDER``: the values' before the variant's before the
operator's) whose removal does, else the first pair that does (``analyze``), within ``MAX_RUNS`` runs;
where no single one does, the operator's family is tried before the pairs (below).

- ``EXACT_RANGE`` / ``INT32``: integer values beyond float64's exact range (2**53), then beyond the int32
  range, brought into it (OpenVINO's CPU plugin computes uint32, uint64 and large int64 in int32; its
  static Trilu takes k through float64);
- ``SIGNED``: unsigned element types replaced by the next wider signed type, values kept;
- ``INITIALIZER`` / ``RUNTIME``: operands fed at run time (pinned inputs) made initializers, and
  initializers fed at run time; ``EMPTY``: only the empty initializers fed at run time (OpenVINO reads an
  empty int64 initializer as a scalar, whichever operator takes it: the backend's);
- ``STATIC``: a variant compiled for dynamic shapes replaced by its static twin (variants carry
  their options: the twin is the variant whose options differ in ``dynamic`` alone), and likewise
  ``THREADS`` for one inference thread, where the backend has a variant with the plugin's default,
  and ``PIPELINE`` for TVM's optimizing pipeline (``pipeline=cpu`` with its ``opt-level``: the twin
  runs the default pipeline, in which LegalizeOps' leftovers reach no FoldConstant);
- ``ATTRIBUTE``: an attribute off its default set back to it (omitted); ``SIGN``: a negative axis or position
  made the non-negative one that means the same (before the operands' form, which it is narrower than:
  OpenVINO's SequenceAt ignores a negative position's sign, fed at run time or not); ``RANKS``: operands of a
  lower rank than the output brought to it by leading 1s, as broadcasting aligns them (TVM's Expand to a
  shape of fewer dimensions fails in both its converter's branches);
- ``OPSET``: the operator at its neighbouring version, an attribute there taken as an input (or the
  reverse) where the versions differ in that;
- ``ELEMENT_TYPE``: the operator's integer, bool, float16 or float64 operands (those its schema binds to
  one type that float32 may be) fed as float32 (TVM cannot take a min_value of bool in ReduceMax and
  in ReduceMin: one root with their family, whatever each message says);
- ``OPTIONAL``: an optional input or attribute (one without a default) the operator is given, omitted
  (its default: IREE computes a recurrent layer's steps past its ``sequence_lens``; TVM's ConvTranspose
  ignores ``output_shape``; Resize's ``axes`` omitted with its per-axis operands given for every axis);
- ``PER_AXIS_QUANT``: scales and zero points given per axis (1-D) made scalars (per-tensor quantization);
- ``NEGATIVE``: the operator's negative operands made positive (IREE's Pow of a negative base is NaN, of
  an int32 base and a float32 one alike); ``TIES``: a selection's equal elements made distinct, their
  order kept (OpenVINO's dynamic-shape TopK does not put the lower index first).

Where no variation makes the bug vanish but the static twin *declines* the case, the refusal names the
root (``DECLINED_TWINS``): the static compile checks a feature that the dynamic-shape path runs unchecked,
and wrongly, whichever operator carries it.  Where the twin on the compiler's default threads raises an
error, OpenVINO on one inference thread swallowed it and returned unwritten outputs: one root whatever the
error (``swallowed_root``); the error itself is the twin's crash.

Wrong values with no trigger, shown at an operator only beside a part of the case that shares no value
with it (``BESIDE``, ``beside``), are the operator's where an Identity of a fresh input in its place comes
back right beside that part (OpenVINO's dynamic-shape If: one root beside a GRU or a LayerNormalization),
and the other part's where the Identity comes back wrong too (its signature stands).

A crash of several nodes with no trigger of its own may be a *knock-on* (``KNOCK_ON``, ``knock_on``): a
producer in the case, alone, diverges from the baseline (or gives an output shaped only at run time),
and without it (its output fed as the baseline gives it) the crash vanishes.  Its root is the
producer's divergence, as that bug alone would be rooted (``run/dedup.py`` analyzes it in turn), so
that TVM's Dropout mask of the wrong dtype is one root, whichever consumer fails on it.  A producer
that is right but whose output ONNX's shape inference cannot shape names its reader (a dimension known
only at run time), or no one (a rank it cannot tell: IREE's importer types such a value as a scalar,
and every reader fails on it).

The cause names the root: a trigger in the values' range, the element types or the variant
(``OPERATOR_FREE``) is the backend's, whichever operator met it; a trigger in an operand's form, an
operator's attributes or its version is that operator's (a crash's, but for the integer range, the
threads and the optimizing pipeline, whose passes meet every operator, too: ``CRASH_OPERATOR_FREE``),
or its converter family's (``FAMILIES``: Reduce*,
pooling, comparisons, Resize through ``scales`` or ``sizes``) when a sibling of the family run on the
same case shows the bug too, or where the attributes or optional inputs it needs are read alike by the
family (``SHARED_FORM``: Conv's padding, the recurrent layers' ``sequence_lens``).  The
root is a readable name, e.g. "OpenVINO: integer values beyond the int32 range" or "TVM: Reduce*
with noop_with_empty_axes=1".

A trial judges the bug as its signature reads it, whichever oracle saw it: a metamorphic bug's trial
runs the variant beside its mate *and* against the baseline (the signature is the divergence, not the
oracle), so that the variations of a metamorphic bug can show it, and of one whose reduced case both
variants now get wrong alike; a variation with the mate's options is no variation of a metamorphic
pair.  A variation the compiler declines (an "unsupported" error) neither shows nor hides a bug, a
crash's neither: the compiler stopped before the crash's site (IREE's importer lowers no MaxPool
before version 12).

The judging needs the signature (``run/dedup.py``), which the oracle does not import: the caller
hands ``analyze`` a ``Sign`` that says whether a trial's findings hold the bug.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np

from dlcfuzz.backends.base import OK, UNSET, Outcome, Test, Variant, unset, unset_option
from dlcfuzz.ir import CONST_KIND, INPUT_KIND, NODE_KIND, Graph, Node, TensorType, Value, op_identity
from dlcfuzz.ir.dtypes import onnx_type_name
from dlcfuzz.oracle.compare import all_finite, compare
from dlcfuzz.oracle.findings import COMPILER, CRASH, DIFFERENTIAL, METAMORPHIC, Finding
from dlcfuzz.oracle.judge import CONFIRM_RUNS, Runner, criteria_for, judge, run_baseline, run_confirmed

MAX_RUNS = 12  # confirmed runs per bug, all variations and siblings together
MAX_SIBLINGS = 4  # siblings of the operator's family tried (until one shows the bug)

# kinds of variation
(EXACT_RANGE, INT32_RANGE, SIGNED, INITIALIZER, RUNTIME, EMPTY, FED_EMPTY, STATIC, THREADS, PIPELINE, ATTRIBUTE, SIGN,
 RANKS, OPSET, PER_AXIS_QUANT, NEGATIVE, TIES, ELEMENT_TYPE, OPTIONAL, SIBLING, KNOCK_ON, BESIDE, DECLARED) = (
    "exact", "int32", "signed", "initializer", "runtime", "empty", "fed-empty", "static", "threads", "pipeline",
    "attribute", "sign", "ranks", "opset", "per-axis", "negative", "ties", "element-type", "optional-input", "sibling",
    "knock-on", "beside", "declared")
EXACT_BOUND = 2 ** 53  # the integers float64 holds exactly
# operators whose outputs are positions chosen by comparing elements: among equal ones, the spec says
# which index wins (TopK the lower, ArgMax the first or the last), and a compiler may pick another
SELECTION = ("TopK", "ArgMax", "ArgMin", "Unique", "MaxPool")
# an operator's form: its attributes, its version, its optional inputs, the element type it computes in (one
# root however the bug shows: TVM legalizes a float16 QuantizeLinear in float16, whose bound 65535 fails the
# compile in one case and whose rounding gives wrong integers in another, c48, hand-checked one defect)
OPERATOR_FORM = (ATTRIBUTE, SIGN, RANKS, OPSET, OPTIONAL, PER_AXIS_QUANT, ELEMENT_TYPE)
MAX_PRODUCERS = 3  # producers of a crash's case checked for a wrong output of their own (``knock_on``)
# triggers that name no operator: the backend's, whichever operator met them (its integer precision, its
# dynamic-shape kernels, its threads).  An operand's form names the operator: constant folding evaluates
# each operator with its own code, and a converter reads a constant or a runtime operand in its own way.
# A crash is at a site of an operator's own code unless its trigger is the backend's integer range (or its
# threads): OpenVINO's dynamic-shape compile failures fail in each operator's shape code with its own check.
OPERATOR_FREE = frozenset({EXACT_RANGE, INT32_RANGE, SIGNED, EMPTY, FED_EMPTY, STATIC, THREADS, DECLARED})
# A crash only the optimizing pipeline shows is in its passes (TVM's FoldConstant legalizing what LegalizeOps
# left, on whichever operator): the pipeline's.
CRASH_OPERATOR_FREE = frozenset({EXACT_RANGE, INT32_RANGE, EMPTY, FED_EMPTY, THREADS, PIPELINE, DECLARED})
# triggers in how the backend reads values, wherever it reads them: one root whether the case crashes in a
# phase or computes wrong values (OpenVINO reads an empty int64 initializer as a scalar: Tile's import fails,
# Expand gives a wrong shape; it takes a Trilu's k beyond 2**53 through float64: its import fails in one case,
# its compile aborts in another).  Not the int32 range: OpenVINO's dynamic Trilu overflows k + N in int32 at
# run time, a defect of its own beside those.
PHASE_FREE = frozenset({EXACT_RANGE, EMPTY, FED_EMPTY})
# a value the compiler types wrongly fails each reader in the phase where that reader checks it (IREE's importer
# types a value of a rank ONNX cannot tell as a scalar: a Reduce*'s lowering fails on it, a Pad's, a Shape's):
# one crash in any phase, as the knock-on analysis names it (``KNOCK_ON``, ``UNKNOWN_RANK``)
CRASH_IN_ANY_PHASE = frozenset({DECLARED})
# A variation whose twin variant *declines* the case says where the bug lives: the static compile checks
# a feature (and refuses it) that the dynamic-shape path runs without the check, and wrongly; OpenVINO on
# more than one thread raises the error (Interpolate "only supports resize on spatial dimensions") that one
# inference thread swallows, returning unwritten outputs.  Every case that reaches that unchecked path,
# whichever operator carries it, is one root, named by the refusal and the path (the twin's cause).
DECLINED_TWINS = {STATIC: "dynamic shapes", THREADS: "one inference thread"}
UNCHECKED = "(raised on one path, wrong outputs on another)"  # how such a root's name ends
# the twins whose every error (not only a refusal) the bug's variant swallows
SWALLOWED = frozenset({THREADS})
# variant options whose twin, where the backend declares none, is the variant with the option left to the
# compiler's default (``backends.base.unset``): every OpenVINO variant sets one inference thread
UNSET_TWINS = (("config", "INFERENCE_NUM_THREADS"),)
_REFUSAL_CHARS = 90
_NUMBER = re.compile(r"\d+")
_QUOTED = re.compile(r"'[^']*'")
_STEP = re.compile(r"^\[[\w -]+\] ")  # the step a judge prefixes a crash's message with


def message_head(message: str, chars: int) -> str:
    """What a compiler's message says failed, to key a root by: its first line that says more than a
    heading (``Exception from core.cpp:117:``, ``backend='inductor' raised:`` introduce what they wrap),
    without its numbers and quoted names (a node's, a tensor's), at most ``chars`` characters."""
    lines = [x.strip() for x in _STEP.sub("", message.strip()).splitlines() if x.strip()]
    said = next((x for x in lines if not x.endswith(":")), lines[0] if lines else "")
    return _NUMBER.sub("#", _QUOTED.sub("'…'", said))[:chars].strip()


def refusal_words(decline: str) -> str:
    """A decline's words: what the compiler refused."""
    return message_head(decline, _REFUSAL_CHARS)


def swallowed_root(backend: str) -> str:
    """The root of every case whose twin on the compiler's own threads raises the error that one inference
    thread swallows, returning unwritten outputs: one defect, whichever node raised what (c46: a Resize's
    Interpolate refusal, an LRN's "Primitive descriptor was not found", a reshape conflict, each a root).
    What the node raised is the twin's crash, a root of its own where it is a bug and not a decline."""
    return f"{BACKEND_NAMES.get(backend, backend)}: an error swallowed on one inference thread, its outputs unwritten"


def refusal_root(backend: str, decline: str) -> str:
    """The root a refusal names, whichever path runs it unchecked; "" for no words."""
    words = refusal_words(decline)
    return f"{BACKEND_NAMES.get(backend, backend)}: {words} {UNCHECKED}" if words else ""


# the order causes are named in (the pipeline last: an operator's own cause is named before it; the element
# type after the attributes and versions: a float32 operator runs other code, which any narrower cause explains)
_ORDER = (EXACT_RANGE, INT32_RANGE, SIGNED, DECLARED, FED_EMPTY, SIGN, RANKS, INITIALIZER, EMPTY, RUNTIME, STATIC,
          THREADS, OPSET, ATTRIBUTE, PER_AXIS_QUANT, NEGATIVE, TIES, ELEMENT_TYPE, OPTIONAL, PIPELINE)

BACKEND_NAMES = {"openvino": "OpenVINO", "tvm": "TVM", "tvm-relax": "TVM Relax", "ort": "ONNX Runtime",
                 "iree": "IREE", "inductor": "Inductor"}

def crash_in(f: Finding) -> str:
    """How a root names a crash of ``f``'s backend in its phase ("TVM compile crash")."""
    return f"{BACKEND_NAMES.get(f.backend, f.backend)} {f.phase} crash"


# Resize's two forms of its output size, through scales or through sizes: a family of one operator (``siblings``)
RESIZE_FORMS = "Resize (through scales or sizes)"
# those that map each element before they reduce first: they share more of a converter's paths
REDUCE = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ReduceSum", "ReduceMean",
          "ReduceMax", "ReduceMin", "ReduceProd")
# one converter family: operators that take the same inputs and attributes and share a converter's code
FAMILIES: dict[str, tuple[str, ...]] = {
    "Reduce*": REDUCE,
    "pooling": ("MaxPool", "AveragePool", "LpPool"),
    "global pooling": ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"),
    "comparisons": ("Greater", "Less", "GreaterOrEqual", "LessOrEqual"),
    # the variadic elementwise operators, which a runtime folds pairwise over their broadcast operands (IREE types
    # each partial result as the whole output: a Sum, a Mean and a Max of operands of lower ranks fail alike, c48)
    "Sum/Mean/Min/Max": ("Sum", "Mean", "Min", "Max"),
    "ArgMax/ArgMin": ("ArgMax", "ArgMin"),
}
# operators that read these attributes (or optional inputs) through one shared helper in the runtimes (ONNX
# Runtime's ConvAttributes, TVM's and OpenVINO's auto-pad code; the recurrent layers' sequence_lens, which
# the spec defines alike for the three and IREE's lowering ignores in each): a trigger in one of them is the
# family's, which a sibling run cannot show (a float Conv does not become a QLinearConv by its name, nor an
# RNN's weights a GRU's)
SHARED_FORM: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "Conv/ConvInteger/QLinearConv": (("Conv", "ConvInteger", "QLinearConv"),
                                     frozenset({"auto_pad", "pads", "strides", "dilations", "group", "kernel_shape"})),
    # and the inputs the three share by name: OpenVINO's ONNX frontend reads them through one recurrent input
    # map, and its CPU plugin runs the three as one RNN node (c47: its dynamic-shape RNN and GRU ignore
    # sequence_lens, each rooted by its operands' form: hand-checked one defect, in LSTM too)
    "RNN/GRU/LSTM": (("RNN", "GRU", "LSTM"), frozenset({"X", "W", "R", "B", "sequence_lens", "initial_h"})),
    # OpenVINO's ONNX frontend and TVM's converter read it in the reduce helper all of them share (OpenVINO
    # makes the node an Identity for each); its siblings run right where the operator does not map first
    # (ReduceSumSquare), so a sibling run may miss it
    "Reduce*": (REDUCE, frozenset({"noop_with_empty_axes"})),
    # the lengths of the parts, an input of both (OpenVINO's float64 Split of lengths fed at run time under
    # dynamic shapes gives wrong parts through Split and through SplitToSequence: c45, hand-checked one defect)
    "Split/SplitToSequence": (("Split", "SplitToSequence+ConcatFromSequence", "SplitToSequence+SequenceLength"),
                              frozenset({"split"})),
}
# the variant options a variation switches: option path -> (kind, the value that is the suspected cause, its
# name, the other option paths that go with it: the twin may differ there too)
OPTION_CAUSES: dict[tuple[str, ...], tuple[str, Any, str, tuple[tuple[str, ...], ...]]] = {
    ("dynamic",): (STATIC, True, "dynamic shapes", ()),
    ("config", "INFERENCE_NUM_THREADS"): (THREADS, 1, "one inference thread", ()),
    ("pipeline",): (PIPELINE, "cpu", "the optimizing pipeline", (("target", "opt-level"),)),
}

Feeds = dict[str, np.ndarray]
# a trial's findings hold the bug: (findings, the trial's graph, the variation's kind) -> bool
Sign = Callable[[list[Finding], Graph, str], bool]


@dataclass(frozen=True)
class Variation:
    """One suspected cause switched off: ``apply`` makes the case without it (None: not applicable);
    ``variant``: the variant to run instead of the bug's (a variant option's twin)."""

    kind: str
    cause: str
    apply: Callable[[Graph, Feeds], tuple[Graph, Feeds] | None] | None = None
    variant: str = ""
    about: str = ""  # the attribute or input the variation takes back to its default


@dataclass
class Analysis:
    """What the trigger analysis of one bug found."""

    root: str = ""  # the readable root ("" when no variation made the bug vanish)
    trigger: list[str] = field(default_factory=list)  # the causes the bug needs
    kinds: list[str] = field(default_factory=list)
    family: str = ""  # the operator or family the root names ("" for an operator-free trigger)
    unvaried: list[str] = field(default_factory=list)  # causes present that no variation here switches off
    runs: int = 0
    seconds: float = 0.0  # wall time of the analysis (its runs are in the compilers and the baseline)
    compiler_seconds: float = 0.0  # of which inside the bug's compiler
    tried: list[dict[str, Any]] = field(default_factory=list)  # {kind, cause, result}: vanished / shows / invalid
    # a knock-on crash's upstream divergence (``knock_on``): the producer alone, as a case of its own
    upstream: Upstream | None = None
    # a crash's root named at the node that reads its producers' right values (or an input shaped at run time)
    at_consumer: bool = False
    # the operators of the family that showed the bug (the case's own, and the siblings that did)
    shown_in: list[str] = field(default_factory=list)
    # the error that the twin on the compiler's own threads raised where the bug's variant swallowed it (a
    # crash of its own, whose root the swallowed case shares: ``dedup.analyze_triggers``)
    swallowed: Finding | None = None
    # a recorded crash in today's words, where the backend words it otherwise since (``dedup.trigger_shows``)
    reworded: Finding | None = None

    def summary(self) -> dict[str, Any]:
        up = self.upstream
        return {"root": self.root, "trigger": self.trigger, "kinds": self.kinds, "family": self.family,
                "unvaried": self.unvaried, "runs": self.runs, "seconds": round(self.seconds, 2),
                "compiler_seconds": round(self.compiler_seconds, 2), "tried": self.tried,
                **({"upstream": up.first} if up is not None else {})}


@dataclass
class Upstream:
    """The producer whose wrong output a crash needs, alone: its case, and its divergence there."""

    finding: Finding | None  # None: its values are right, but its output's shape is known only at run time
    graph: Graph
    feeds: dict[str, np.ndarray]
    first: dict[str, Any]  # {node, op, output, kind}: the producer, as a first diverging node


# -- graph surgery ------------------------------------------------------------------------------------
def _copy_value(v: Value) -> Value:
    return Value(v.name, v.type, v.kind, None if v.data is None else np.array(v.data),
                 dict(v.hint) if v.hint else v.hint)


def _copy(g: Graph) -> Graph:
    out = Graph(opset=g.opset, meta=dict(g.meta))
    out.values = {k: _copy_value(v) for k, v in g.values.items()}
    out.nodes = [Node(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.name) for n in g.nodes]
    out.outputs = list(g.outputs)
    return out


def _alone(node: Node) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The case cut to the part ``node`` is in (``Graph.parts``), its outputs those the part makes."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        at = _at(g, node)
        part = next(p for p in g.parts() if at in p)
        h, new = _copy(g), dict(feeds)
        h.nodes = [h.nodes[i] for i in part]
        made = {o for n in h.nodes for o in n.outputs}
        h.outputs = [o for o in h.outputs if o in made]
        for name in [k for k, v in h.values.items() if v.kind == NODE_KIND and k not in made]:
            del h.values[name]
        h2 = pruned_and_retyped(h, new) if h.outputs else None
        return (h2, new) if h2 is not None else None
    return apply


def _stand_in(node: Node) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The case with ``node`` replaced by an Identity of a fresh input per output (of the output's type,
    random values), the first keeping the node's name (the trial reads the divergence there)."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        from dlcfuzz.ir.hints import random_array

        at = _at(g, node)
        h, new = _copy(g), dict(feeds)
        rng = np.random.default_rng(0)
        identities = []
        for i, out in enumerate(h.nodes[at].outputs):
            v = h.values[out]
            if not isinstance(v.type, TensorType):
                return None
            fresh = f"{out}_stand_in"
            h.values[fresh] = Value(fresh, v.type, INPUT_KIND, None, v.hint)
            new[fresh] = random_array(rng, v.type, v.hint)
            identities.append(Node("Identity", [fresh], [out], {}, node.name if i == 0 else f"{node.name}_{i}"))
        h.nodes[at:at + 1] = identities
        h2 = pruned_and_retyped(h, new)
        return (h2, new) if h2 is not None else None
    return apply


def pruned_and_retyped(h: Graph, feeds: dict) -> Graph | None:
    """``h`` without the inputs and constants a variation left unread (dropped from ``feeds`` too),
    retyped (``retyped``)."""
    used = {x for m in h.nodes for x in m.inputs if x}
    for name in [k for k, v in h.values.items() if v.kind != NODE_KIND and k not in used]:
        del h.values[name]
        feeds.pop(name, None)
    return retyped(h, feeds)


def retyped(g: Graph, feeds: Feeds | None = None) -> Graph | None:
    """``g`` with its node outputs' types inferred again by ONNX's strict shape inference (after an
    attribute or version changed them); where inference accepts the model but cannot tell a type (a TopK
    whose k a Shape computes), as ONNX's reference evaluator gives each output on ``feeds``; None when
    inference rejects the model or neither tells a type."""
    import onnx

    from dlcfuzz.export.onnx import to_onnx
    from dlcfuzz.ir import DTYPE_OF_CODE

    try:
        model = to_onnx(g)
        for o in model.graph.output:
            o.ClearField("type")
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception:  # an invalid variation: the checker's and inference's errors are of many types
        return None
    types = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        tt = vi.type.tensor_type
        if not tt.HasField("shape") or any(not d.HasField("dim_value") for d in tt.shape.dim):
            continue
        types[vi.name] = TensorType(tuple(d.dim_value for d in tt.shape.dim), DTYPE_OF_CODE.get(tt.elem_type, ""))
    made = [name for name, v in g.values.items() if v.kind == NODE_KIND]
    if feeds is not None and any(name not in types or not types[name].dtype for name in made):
        types.update(_run_types(g, feeds, made))
    # an operator of another domain (com.microsoft's), which neither ONNX's inference nor its evaluator
    # knows, keeps the types its outputs had where the variation left its inputs' types as they were
    for n in g.nodes:
        if op_identity(n.op)[0] and all(types.get(x, g.values[x].type) == g.values[x].type for x in n.inputs if x):
            for o in n.outputs:
                if o and (o not in types or not types[o].dtype):
                    types[o] = g.values[o].type
    out = _copy(g)
    for name in made:
        t = types.get(name)
        if t is None or not t.dtype:
            return None
        out.values[name].type = t
    return out


def _run_types(g: Graph, feeds: Feeds, names: Sequence[str]) -> dict[str, TensorType]:
    """The types of ``names`` (node outputs) as ONNX's reference evaluator makes them on ``feeds`` ({}
    where it cannot run the case)."""
    visible = _copy(g)
    visible.outputs = list(names)
    got = _reference_outputs(visible, feeds)
    if got is None or len(got) != len(names):
        return {}
    return {name: TensorType(tuple(a.shape), a.dtype.name) for name, a in zip(names, got, strict=True)
            if isinstance(a, np.ndarray)}


def _integer(a: np.ndarray) -> bool:
    return np.asarray(a).dtype.kind in "iu"


def _beyond(a: np.ndarray, bound: int) -> bool:
    """Whether integer ``a`` holds a value beyond ``[-bound, bound - 1]``."""
    a = np.asarray(a)
    return _integer(a) and a.size > 0 and (int(a.max()) > bound - 1 or int(a.min()) < -bound)


def _large_values(g: Graph, feeds: Feeds, bound: int) -> list[int]:
    """The integer values (in tensors and attributes) of the case beyond ``[-bound, bound - 1]``."""
    arrays = [np.asarray(v.data) for v in g.values.values() if v.data is not None]
    arrays += [np.asarray(a) for a in feeds.values()]
    attrs = [x for n in g.nodes for a in n.attrs.values() for x in (a if isinstance(a, list) else [a])
             if isinstance(x, int) and not isinstance(x, bool)]
    return sorted({int(x) for a in arrays if _beyond(a, bound) for x in a.ravel() if not -bound <= int(x) < bound}
                  | {x for x in attrs if not -bound <= x < bound})


def _into_range(bound: int) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """Integer values beyond ``[-bound, bound - 1]`` brought well into it, their order kept (across the
    whole case): the k-th smallest of the large ones becomes bound / 2 + k (the negative ones alike below
    -bound / 2), so that what a compiler adds to them stays in range too."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        large = _large_values(h, feeds, bound)
        above = [x for x in large if x > 0]
        below = [x for x in large if x < 0]
        half = bound // 2
        table = {x: half + k for k, x in enumerate(above)} | {x: -half - (len(below) - 1 - k)
                                                              for k, x in enumerate(below)}

        def into(a: np.ndarray) -> np.ndarray:
            if not _beyond(a, bound):
                return a
            return np.array([table.get(int(x), int(x)) for x in a.ravel()],
                            dtype=np.asarray(a).dtype).reshape(a.shape)

        for v in h.values.values():
            if v.data is not None:
                v.data = into(np.asarray(v.data))
        for k, a in feeds.items():
            new[k] = into(np.asarray(a))
        for n in h.nodes:
            for k, a in n.attrs.items():
                if isinstance(a, int) and not isinstance(a, bool):
                    n.attrs[k] = table.get(a, a)
                elif isinstance(a, list) and a and all(isinstance(x, int) for x in a):
                    n.attrs[k] = [table.get(x, x) for x in a]
        return h, new
    return apply


_into_int32 = _into_range(2 ** 31)


SIGNED_OF = {"uint8": "int32", "uint16": "int32", "uint32": "int64", "uint64": "int64"}


def _signed(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
    """Unsigned types to the next wider signed type that ONNX Runtime computes, values kept (uint64
    clipped to int64)."""
    from dlcfuzz.ir import ONNX_CODE

    h = _copy(g)
    for v in h.values.values():
        if v.type.dtype in SIGNED_OF:
            to = SIGNED_OF[v.type.dtype]
            v.type = TensorType(v.type.shape, to)
            if v.data is not None:
                v.data = np.clip(v.data, 0, np.iinfo(np.int64).max).astype(to)
    for n in h.nodes:
        for k, a in n.attrs.items():
            if k in ("to", "dtype", "output_dtype") and isinstance(a, int):
                src = next((d for d, c in ONNX_CODE.items() if c == a), "")
                if src in SIGNED_OF:
                    n.attrs[k] = ONNX_CODE[SIGNED_OF[src]]
    new = {k: (np.clip(a, 0, np.iinfo(np.int64).max).astype(SIGNED_OF[np.asarray(a).dtype.name])
               if np.asarray(a).dtype.name in SIGNED_OF else a) for k, a in feeds.items()}
    return h, new


def _pinned_to_initializers(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
    h = _copy(g)
    new = dict(feeds)
    for v in h.values.values():
        if v.pinned:
            v.kind = CONST_KIND
            new.pop(v.name, None)
    return h, new


def _initializers_to_inputs(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
    h = _copy(g)
    new = dict(feeds)
    for v in h.values.values():
        if v.kind == CONST_KIND and v.data is not None:
            v.kind = INPUT_KIND  # pinned: fed its own data at run time
            new[v.name] = np.asarray(v.data)
    return h, new


UNTOLD_RANK = "a value of a rank that ONNX's shape inference cannot tell"


def _rank_untold(g: Graph) -> list[str]:
    """The values between nodes whose rank ONNX's shape inference cannot tell from the case's types and
    constants (a ReduceMin of axes fed at run time, keepdims=0; a window of a length fed at run time)."""
    import onnx

    from dlcfuzz.export.onnx import to_onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(to_onnx(g))
    except Exception:  # inference's errors are of many types: no claim
        return []
    ranked = {v.name for v in inferred.graph.value_info if v.type.tensor_type.HasField("shape")}
    return [o for n in g.nodes for o in n.outputs if o in g.values and o not in g.outputs and o not in ranked
            and g.values[o].kind == NODE_KIND]


def _declared(names: Sequence[str]) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The case with the types of ``names`` (the rank and dimensions they have) declared in the model: the
    compiler need not infer them (``export/onnx.py``: ``meta["declared_types"]``); values unchanged."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h = _copy(g)
        h.meta["declared_types"] = [*g.meta.get("declared_types", ()), *names]
        return h, dict(feeds)

    return apply


def _empty_initializers(g: Graph) -> list[str]:
    return [k for k, v in g.values.items() if v.kind == CONST_KIND and v.data is not None and np.size(v.data) == 0]


def _empty_to_inputs(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
    """Only the empty initializers fed at run time (an ONNX frontend may read one as a scalar)."""
    h, new = _copy(g), dict(feeds)
    for name in _empty_initializers(h):
        h.values[name].kind = INPUT_KIND
        new[name] = np.asarray(h.values[name].data)
    return h, new


def _empty_fed(g: Graph) -> list[str]:
    return [k for k, v in g.values.items() if v.pinned and np.size(v.data) == 0]


def _empty_to_initializers(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
    """Only the empty tensors fed at run time made initializers (TVM's importer reads a graph input's
    dimension 0 as a symbolic one: a Tile's and an Expand's zero-length operand fail on it, c49)."""
    h, new = _copy(g), dict(feeds)
    for name in _empty_fed(h):
        h.values[name].kind = CONST_KIND
        new.pop(name, None)
    return h, new


def _operands(g: Graph, kind: str) -> list[str]:
    """The values whose form a variation of ``kind`` changes (the pinned inputs, or the initializers)."""
    if kind == INITIALIZER:
        return [k for k, v in g.values.items() if v.pinned]
    if kind == RUNTIME:
        return [k for k, v in g.values.items() if v.kind == CONST_KIND and v.data is not None]
    if kind == EMPTY:
        return _empty_initializers(g)
    if kind == FED_EMPTY:
        return _empty_fed(g)
    return []


def _slots(g: Graph, node: Node, values: Collection[str]) -> set[str]:
    """The names the schema gives ``node``'s inputs that are among ``values`` (a sequence chain's are its
    first operator's)."""
    schema = _schema(node.op.split("+", 1)[0], g.opset)
    if schema is None:
        return set()
    formal = [p.name for p in schema.inputs]
    variadic = bool(schema.inputs) and schema.inputs[-1].option == schema.inputs[-1].option.Variadic
    return {formal[min(i, len(formal) - 1)] if variadic or i < len(formal) else "" for i, x in enumerate(node.inputs)
            if x in values} - {""}


# -- the suspect operator -------------------------------------------------------------------------------
def suspect(g: Graph, first: Mapping[str, Any] | None) -> Node | None:
    """The node the bug is at: the located first diverging node, else the graph's only node."""
    name = (first or {}).get("node")
    node = next((n for n in g.nodes if name and n.name == name), None)
    if node is None and len(g.nodes) == 1:
        node = g.nodes[0]
    return node


def _schema(op: str, opset: int) -> Any:
    from onnx import defs

    try:
        return defs.get_schema(op, opset)
    except defs.SchemaError:
        return None


def _defaults(op: str, opset: int) -> dict[str, Any]:
    import onnx

    schema = _schema(op, opset)
    if schema is None:
        return {}
    out = {}
    for k, a in schema.attributes.items():
        if a.default_value.name:
            v = onnx.helper.get_attribute_value(a.default_value)
            out[k] = v.decode() if isinstance(v, bytes) else v
    return out


def _attribute_cause(name: str, v: Any) -> str:
    """An attribute off its default as a cause: a mode or a flag by its value (mode=max,
    noop_with_empty_axes=1), a number or a list by its name alone (the value differs from bug to bug)."""
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str) or (isinstance(v, int) and v in (0, 1)):
        return f"{name}={v}"
    return f"{name} off its default"


def _at(g: Graph, node: Node) -> int:
    return next(i for i, n in enumerate(g.nodes) if n.name == node.name and n.outputs == node.outputs)


def _omit(node: Node, name: str) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h = _copy(g)
        del h.nodes[_at(h, node)].attrs[name]
        h2 = retyped(h, feeds)
        return (h2, dict(feeds)) if h2 is not None else None
    return apply


SAME = ("SAME_UPPER", "SAME_LOWER")
# where a convolution's or pooling's weights, whose spatial dimensions are the kernel's, are among its inputs
KERNEL_INPUT = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}


def _same_pads(g: Graph, node: Node) -> list[int] | None:
    """The explicit pads (begins, then ends) that ``node``'s auto_pad SAME_UPPER or SAME_LOWER means on its
    input's static shape, as ONNX defines them (the output's spatial size is ceil(size / stride); the odd
    unit of padding at the end for SAME_UPPER, at the beginning for SAME_LOWER); None where the kernel is
    unknown (ConvTranspose pads otherwise)."""
    if node.op not in (*FAMILIES["pooling"], *KERNEL_INPUT) or not node.inputs or node.inputs[0] not in g.values:
        return None
    sizes = g.values[node.inputs[0]].type.shape[2:]
    kernel = node.attrs.get("kernel_shape")
    if kernel is None and node.op in KERNEL_INPUT and len(node.inputs) > KERNEL_INPUT[node.op]:
        kernel = g.values[node.inputs[KERNEL_INPUT[node.op]]].type.shape[2:]
    if kernel is None or len(kernel) != len(sizes):
        return None
    strides = node.attrs.get("strides") or [1] * len(sizes)
    dilations = node.attrs.get("dilations") or [1] * len(sizes)
    begins, ends = [], []
    for n, k, st, d in zip(sizes, kernel, strides, dilations, strict=True):
        total = max(0, (-(-n // st) - 1) * st + (k - 1) * d + 1 - n)
        small, large = total // 2, total - total // 2
        begins.append(small if node.attrs["auto_pad"] == "SAME_UPPER" else large)
        ends.append(large if node.attrs["auto_pad"] == "SAME_UPPER" else small)
    return begins + ends


def _explicit_pads(node: Node) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The case with ``node``'s auto_pad SAME_* written as the pads it means (``_same_pads``)."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h = _copy(g)
        at = h.nodes[_at(h, node)]
        pads = _same_pads(h, at)
        if pads is None:
            return None
        del at.attrs["auto_pad"]
        at.attrs["pads"] = pads
        h2 = retyped(h, feeds)
        return (h2, dict(feeds)) if h2 is not None else None
    return apply


def explicit_equation(equation: str) -> str:
    """An Einsum equation without "->" with the output ONNX (as numpy) gives it: the broadcast dimensions
    ("...") first where an input has them, then the labels that occur once, in alphabetical order."""
    terms = equation.replace(" ", "")
    letters = [c for c in terms if c.isalpha()]
    once = sorted(c for c in set(letters) if letters.count(c) == 1)
    return f"{terms}->{'...' if '...' in terms else ''}{''.join(once)}"


def _explicit_output(node: Node) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The case with ``node``'s implicit Einsum output written out (``explicit_equation``): same outputs."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h = _copy(g)
        at = h.nodes[_at(h, node)]
        at.attrs["equation"] = explicit_equation(str(at.attrs["equation"]))
        return h, dict(feeds)
    return apply


@cache
def _contrib_inputs(op: str) -> tuple[tuple[str, bool], ...]:
    """(name, optional) of the inputs of an operator of another domain (``com.microsoft.Attention``), as ONNX
    Runtime, which defines those operators, registers them (its newest version); () where it has none."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_schemas

    domain, op_type = op_identity(op)
    found = [s for s in ort_schemas.get_all_operator_schema() if (s.domain, s.name) == (domain, op_type)]
    if not found:
        return ()
    newest = max(found, key=lambda s: s.since_version)
    return tuple((i.name, i.option.name == "Optional") for i in newest.inputs)


def _optional_inputs(g: Graph, node: Node) -> list[tuple[int, str]]:
    """(position, schema name) of the optional inputs the node is given (omitted, each says "default": a
    trailing one left out, an inner one by an empty name); an operator of another domain's by ONNX Runtime's
    schema (OpenVINO's com.microsoft.Attention with a 3-D mask_index and a past state: c46, c47)."""
    schema = _schema(node.op, g.opset)
    inputs = (tuple((i.name, i.option.name == "Optional") for i in schema.inputs) if schema is not None
              else _contrib_inputs(node.op) if op_identity(node.op)[0] else ())
    return [(k, inputs[k][0]) for k, x in enumerate(node.inputs) if x and k < len(inputs) and inputs[k][1]]


# optional attributes without a default whose omission changes nothing ONNX computes: the kernel's and the
# hidden state's sizes are then read off the weights, and Dropout's seed matters only in training
INFERRED = frozenset({"kernel_shape", "hidden_size", "seed"})


def _optional_attributes(g: Graph, node: Node) -> list[str]:
    """The optional attributes the node is given that have no default in its schema (omitted, the operator
    computes its own: TVM's ConvTranspose ignores output_shape, its Resize reads scales and sizes as given
    for every axis whatever ``axes`` lists)."""
    schema = _schema(node.op, g.opset)
    if schema is None:
        return []
    return [k for k, a in sorted(schema.attributes.items()) if k in node.attrs and not a.required
            and not a.default_value.name and k not in INFERRED]


def _omit_input(node: Node, position: int) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        n = h.nodes[_at(h, node)]
        n.inputs[position] = ""
        while n.inputs and not n.inputs[-1]:
            n.inputs.pop()
        h2 = pruned_and_retyped(h, new)
        return (h2, new) if h2 is not None else None
    return apply


def _rank(g: Graph, node: Node) -> int | None:
    v = g.values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    return v.type.rank if v is not None else None


def _own_value(h: Graph, feeds: Feeds, name: str) -> np.ndarray | None:
    """The value of operand ``name`` that a variation may rewrite: a constant's or a fed input's, read by one
    node only (None: computed by a node, or read elsewhere too)."""
    v = h.values[name]
    given = v.data if v.data is not None else feeds.get(name)
    if given is None or sum(name in m.inputs for m in h.nodes) > 1:
        return None
    return np.asarray(given)


def _set_value(h: Graph, feeds: Feeds, name: str, value: np.ndarray) -> None:
    """Operand ``name`` holds ``value`` from here (its type's shape with it): as a constant, a pinned input's
    data, or what is fed at run time."""
    v = h.values[name]
    v.type = TensorType(tuple(value.shape), v.type.dtype)
    if v.data is not None:  # an initializer, or a pinned input (fed its data at run time)
        v.data = value
    if name in feeds:
        feeds[name] = value


# operators whose ``axes`` attribute lists the axes that operands give one entry for (none: every axis), and
# those operands: (input position, what an axis not listed takes: "region" [start 0, end 1], "one", "length")
PER_AXIS = {"Resize": ((1, "region"), (2, "one"), (3, "length"))}


def _all_axes(node: Node) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The case with ``axes`` omitted (every axis) and the per-axis operands given for every axis, the axes
    not listed at their identity: the same operation (TVM's Resize reads scales and sizes as full-rank
    whatever axes says: an IndexError through one, another through the other, wrong values where it fits)."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        n = h.nodes[_at(h, node)]
        x = h.values[n.inputs[0]].type
        if not isinstance(x, TensorType):
            return None
        rank = x.rank
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in n.attrs["axes"]]
        for position, fill in PER_AXIS[n.op]:
            name = n.inputs[position] if len(n.inputs) > position else ""
            if not name:
                continue
            given = _own_value(h, new, name)
            if given is None or given.size != len(axes) * (2 if fill == "region" else 1):
                return None
            given = given.ravel()
            if fill == "region":
                full = np.concatenate([np.zeros(rank), np.ones(rank)]).astype(given.dtype)
                full[axes] = given[:len(axes)]
                full[[rank + a for a in axes]] = given[len(axes):]
            else:
                full = (np.ones(rank) if fill == "one" else np.array(x.shape)).astype(given.dtype)
                full[axes] = given
            _set_value(h, new, name, full)
        del n.attrs["axes"]
        h2 = retyped(h, new)
        return (h2, new) if h2 is not None else None
    return apply


def _per_axis_quantization(g: Graph, node: Node) -> list[str]:
    """The node's scale and zero-point operands given per axis (1-D: per channel, row or column), of a
    quantizing operator (one with a zero point: a normalization's "scale" is none, c48 rooted a
    GroupNormalization "with per-axis quantization parameters")."""
    schema = _schema(node.op, g.opset)
    if schema is None or not any(i.name.endswith("zero_point") for i in schema.inputs):
        return []
    return [x for k, x in enumerate(node.inputs) if x and k < len(schema.inputs)
            and schema.inputs[k].name.endswith(("scale", "zero_point")) and g.values[x].type.rank == 1]


def _per_tensor(names: Sequence[str]) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The case with each of ``names`` (scales and zero points given per axis) a scalar, its first element:
    per-tensor quantization (OpenVINO's QLinearConv converter dequantizes the weights' per-channel
    scales along the input channels: an import error where their counts differ, wrong values where they
    do not)."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        for name in names:
            given = _own_value(h, new, name)
            if given is None:
                return None
            _set_value(h, new, name, given.reshape(-1)[:1].reshape(()))
        h2 = retyped(h, new)
        return (h2, new) if h2 is not None else None
    return apply


def _positive_axes(node: Node) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        n = h.nodes[_at(h, node)]
        rank = _rank(h, n)
        if rank is None:
            return None
        if isinstance(n.attrs.get("axis"), int) and n.attrs["axis"] < 0:
            n.attrs["axis"] += rank
        if isinstance(n.attrs.get("axes"), list):
            n.attrs["axes"] = [a + rank if a < 0 else a for a in n.attrs["axes"]]
        for name in _axes_inputs(h, n):
            v = h.values[name]
            v.data = np.where(v.data < 0, v.data + rank, v.data).astype(v.data.dtype)
            if name in new:
                new[name] = v.data
        return h, new
    return apply


def _axes_inputs(g: Graph, node: Node) -> list[str]:
    """The node's constant or pinned inputs named ``axes`` by its schema."""
    schema = _schema(node.op, g.opset)
    if schema is None:
        return []
    names = [i.name for i in schema.inputs]
    return [x for k, x in enumerate(node.inputs) if x and k < len(names) and names[k] == "axes"
            and (v := g.values.get(x)) is not None and v.data is not None]


def _negative_axes(g: Graph, node: Node) -> bool:
    if isinstance(node.attrs.get("axis"), int) and not isinstance(node.attrs["axis"], bool) and node.attrs["axis"] < 0:
        return True
    if isinstance(node.attrs.get("axes"), list) and any(a < 0 for a in node.attrs["axes"]):
        return True
    return any((np.asarray(g.values[x].data) < 0).any() for x in _axes_inputs(g, node))


MAX_WRAP = 16  # the longest sequence (or axis) a negative position is tried to count back from


def _takes_a_position(op: str, opset: int) -> bool:
    """Whether an operator (or a part of an idiom, "SequenceConstruct+SequenceAt") takes an input its
    schema names ``position`` (SequenceAt, SequenceInsert, SequenceErase)."""
    return any(schema is not None and any(i.name == "position" for i in schema.inputs)
               for schema in (_schema(part, opset) for part in op.split("+")))


def _negative_positions(g: Graph, node: Node) -> list[str]:
    """The constant or pinned integer scalars of a node that takes a position, where negative: positions
    counted from the end (an idiom's inputs are not named by one schema: its negative scalars, which
    ``_positions_from_start`` only moves where the reference says they mean the same)."""
    if not _takes_a_position(node.op, g.opset):
        return []
    axes = set(_axes_inputs(g, node))
    return [x for x in dict.fromkeys(node.inputs) if x and x not in axes and (v := g.values.get(x)) is not None
            and v.data is not None and np.ndim(v.data) == 0 and _integer(v.data) and int(v.data) < 0]


def _reference_outputs(g: Graph, feeds: Feeds) -> list[Any] | None:
    from onnx.reference import ReferenceEvaluator

    from dlcfuzz.export.onnx import to_onnx

    try:
        return list(ReferenceEvaluator(to_onnx(g)).run(None, {k: np.asarray(v) for k, v in feeds.items()}))
    except Exception:  # the reference's errors are of many types: no equivalent found
        return None


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(np.asarray(x).shape == np.asarray(y).shape and np.array_equal(x, y)
                                    for x, y in zip(a, b, strict=True))


def _positions_from_start(node: Node) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """Each negative position made the non-negative one that means the same: the first ``p + k`` with
    which ONNX's reference evaluator gives the case's outputs unchanged (the length ``k`` it counts back
    from is the case's, which the variation need not know)."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        want = _reference_outputs(h, new)
        if want is None:
            return None
        for name in _negative_positions(h, h.nodes[_at(h, node)]):
            v = h.values[name]
            p = int(v.data)
            for k in range(-p, -p + MAX_WRAP):
                v.data = np.array(p + k, dtype=np.asarray(v.data).dtype)
                if name in new:
                    new[name] = v.data
                got = _reference_outputs(h, new)
                if got is not None and _same(got, want):
                    break
            else:
                return None
        return h, new
    return apply


def _versions(op: str, opset: int) -> tuple[int | None, int | None]:
    """(the operator's version in effect at ``opset``, its neighbouring version: the one before, else after)."""
    from onnx import defs

    here = _schema(op, opset)
    if here is None:
        return None, None
    since = here.since_version
    before = _schema(op, since - 1) if since > 1 else None
    if before is not None and before.since_version >= 7:
        return since, before.since_version
    later = [s.since_version for s in defs.get_all_schemas_with_history()
             if s.name == op and s.domain == "" and s.since_version > since]
    return since, (min(later) if later else None)


def _at_version(node: Node, version: int) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The graph at opset ``version`` (the suspect's neighbouring version); an attribute that the other
    version takes as an input becomes a constant input, and the reverse."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        target = _schema(node.op, version)
        if target is None:
            return None
        h, new = _copy(g), dict(feeds)
        h.opset = version
        n = h.nodes[_at(h, node)]
        here = _schema(node.op, g.opset)
        names_here = [i.name for i in here.inputs] if here is not None else []
        names_there = [i.name for i in target.inputs]
        inputs: dict[str, str] = {names_here[k]: x for k, x in enumerate(n.inputs) if k < len(names_here) and x}
        for name, x in list(inputs.items()):
            if name not in names_there and name in target.attributes:
                v = h.values[x]
                if v.data is None:
                    return None
                n.attrs[name] = [int(a) for a in np.asarray(v.data).ravel()]
                del inputs[name]
        for name in list(n.attrs):
            if name not in target.attributes:
                if name not in names_there or not isinstance(n.attrs[name], list):
                    return None
                const = f"{n.name or 'n'}_{name}"
                if const in h.values:
                    return None
                data = np.asarray(n.attrs.pop(name), dtype=np.int64)
                h.add_value(Value(const, TensorType(data.shape, "int64"), CONST_KIND, data))
                inputs[name] = const
        ordered = [inputs.get(name, "") for name in names_there]
        while ordered and not ordered[-1]:
            ordered.pop()
        if any(x not in ordered for x in inputs.values()):
            return None
        n.inputs = ordered
        h2 = pruned_and_retyped(h, new)
        return (h2, new) if h2 is not None else None
    return apply


def _broadcast_operands(g: Graph, node: Node, feeds: Feeds) -> list[tuple[str, str]]:
    """The node's operands of a lower rank than its output that broadcasting aligns to it: (name, "tensor")
    for a tensor (of an operator that broadcasts its inputs, either way, or Expand's input), (name,
    "shape") for Expand's shape, where the case holds them (an input or a constant)."""
    out = g.values.get(node.outputs[0]) if node.outputs and node.outputs[0] else None
    schema = _schema(node.op, g.opset)
    if out is None or schema is None:
        return []
    own = set(_own_operands(g, node, feeds))
    if node.op == "Expand" and len(node.inputs) == 2:
        data, shape = node.inputs
        found = [(data, "tensor")] if data in own and g.values[data].type.rank < out.type.rank else []
        if shape in own and np.size(feeds.get(shape, g.values[shape].data)) < out.type.rank:
            found.append((shape, "shape"))
        return found
    doc = (schema.doc or "").lower()
    if "multidirectional" not in doc and "unidirectional" not in doc:  # PRelu's slope broadcasts one way
        return []
    return [(x, "tensor") for x in dict.fromkeys(node.inputs) if x in own and g.values[x].type.rank < out.type.rank]


def _same_ranks(node: Node, operands: Sequence[tuple[str, str]]
                ) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The operands brought to the output's rank by leading 1s (a tensor reshaped, a shape's values
    prepended): what broadcasting does, done in the case (the same values out)."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        rank = h.values[node.outputs[0]].type.rank
        for name, what in operands:
            if name not in h.values:
                return None
            values = np.asarray(new.get(name, h.values[name].data))
            if what == "tensor":  # reshaped by leading 1s; a shape's values prepended with 1s
                values = values.reshape((1,) * (rank - values.ndim) + values.shape)
            else:
                values = np.concatenate([np.ones(rank - values.size, values.dtype), values.ravel()])
            _set_value(h, new, name, values)
        h2 = retyped(h, new)
        return (h2, new) if h2 is not None else None
    return apply


def _bound_types(op: str, opset: int, node: Node) -> list[tuple[str, frozenset[str]]] | None:
    """(the type parameter, the element types it admits, as dtype names) of each of the node's operands in
    the schema of ``op`` (variadic ones repeat the last); None when ``op`` has no schema at that version."""
    schema = _schema(op, opset)
    if schema is None or not schema.inputs:
        return None
    allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    out = []
    for i in range(len(node.inputs)):
        param = schema.inputs[min(i, len(schema.inputs) - 1)].type_str
        out.append((param, frozenset(onnx_type_name(t) for t in allowed.get(param, [param])) - {None}))
    return out


def _admits(op: str, g: Graph, node: Node) -> bool:
    """Whether ``op``'s schema takes the node's operands' element types (a sibling that does not is no
    variation: a ReduceL1 of bool is an invalid model, not a case without the bug)."""
    bound = _bound_types(op, g.opset, node)
    if bound is None:
        return False
    return all(not name or g.values[name].type.dtype in types
               for name, (_, types) in zip(node.inputs, bound, strict=True) if name in g.values)


def _element_class(dtype: str) -> str:
    return "bool" if dtype == "bool" else "integer" if "int" in dtype else dtype


def _own_operands(g: Graph, node: Node, feeds: Feeds) -> list[str]:
    """The node's operands that are inputs or constants of the case, with values (a node's output keeps its
    values)."""
    return [x for x in dict.fromkeys(node.inputs) if x and x in g.values and g.values[x].kind != NODE_KIND
            and (x in feeds or g.values[x].data is not None)]


def _negative_operands(g: Graph, node: Node, feeds: Feeds) -> list[str]:
    values = {x: np.asarray(feeds.get(x, g.values[x].data)) for x in _own_operands(g, node, feeds)}
    return [x for x, a in values.items() if a.dtype.kind in "if" and a.size and (a < 0).any()]


def _non_negative(names: Sequence[str]) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    """The operands' negative values made positive (their magnitudes kept: the bug may need them)."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        for name in [x for x in names if x in h.values]:  # another variation may have taken one away
            v = h.values[name]
            if v.data is not None:
                v.data = np.abs(np.asarray(v.data))
            if name in new:
                new[name] = np.abs(np.asarray(new[name]))
        return h, new
    return apply


def _ties_broken(a: np.ndarray) -> np.ndarray | None:
    """``a`` with its equal elements made distinct, the order of all kept (among equal ones, by index),
    each moved up at most a little; None where ``a`` has no ties, or its type cannot hold the result."""
    a = np.asarray(a)
    flat = a.ravel()
    if flat.size < 2 or len(np.unique(flat)) == flat.size or a.dtype.kind not in "iuf":
        return None
    order = np.argsort(flat, kind="stable")
    wanted = flat[order].astype(np.float64)
    for i in range(1, wanted.size):
        step = 1.0 if a.dtype.kind in "iu" else max(1e-3, 1e-3 * abs(wanted[i - 1]))
        wanted[i] = max(wanted[i], wanted[i - 1] + step)
    if a.dtype.kind in "iu" and wanted[-1] > np.iinfo(a.dtype).max:
        return None
    made = wanted.astype(a.dtype)
    if not (np.diff(made.astype(np.float64)) > 0).all():  # float16 rounds two of them together
        return None
    out = np.empty_like(flat)
    out[order] = made
    return out.reshape(a.shape)


def _without_ties(name: str) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        if name not in h.values:  # another variation took it away
            return None
        v = h.values[name]
        broken = _ties_broken(new.get(name, v.data))
        if broken is None:
            return None
        if v.data is not None:
            v.data = broken
        if name in new:
            new[name] = broken
        return h, new
    return apply


def _float_operands(g: Graph, node: Node) -> tuple[list[str], str]:
    """(the node's operands fed as float32 by the ``ELEMENT_TYPE`` variation, their element type's class):
    those of a type parameter that admits float32 and is bound to another type, when each operand so bound
    is an input or a constant of the case (a node's output keeps its type)."""
    bound = _bound_types(node.op, g.opset, node)
    if bound is None:
        return [], ""
    groups: dict[str, list[str]] = {}
    for name, (param, types) in zip(node.inputs, bound, strict=True):
        if name and name in g.values and "float32" in types and g.values[name].type.dtype != "float32":
            groups.setdefault(param, []).append(name)
    names = [n for ns in groups.values() if all(g.values[x].kind != NODE_KIND for x in ns) for n in ns]
    return names, _element_class(g.values[names[0]].type.dtype) if names else ""


def _as_float32(names: Sequence[str]) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        for name in [x for x in names if x in h.values]:  # another variation may have taken one away
            v = h.values[name]
            v.type = TensorType(v.type.shape, "float32")
            if v.data is not None:
                v.data = np.asarray(v.data).astype(np.float32)
            if name in new:
                new[name] = np.asarray(new[name]).astype(np.float32)
        h2 = retyped(h, new)
        return (h2, new) if h2 is not None else None
    return apply


def _sibling(node: Node, op: str) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None]:
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h = _copy(g)
        n = h.nodes[_at(h, node)]
        n.op = op
        h2 = retyped(h, feeds)
        return (h2, dict(feeds)) if h2 is not None else None
    return apply


def _resize_form(node: Node) -> Callable[[Graph, Feeds], tuple[Graph, Feeds] | None] | None:
    """Resize through the other of ``scales`` and ``sizes``: the same output shape."""
    def apply(g: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
        h, new = _copy(g), dict(feeds)
        n = h.nodes[_at(h, node)]
        ins = n.inputs + [""] * (4 - len(n.inputs))
        # an empty tensor stands for an omitted one (ONNX allows either for scales and sizes)
        ins = [x if not x or h.values[x].data is None or np.asarray(h.values[x].data).size else "" for x in ins]
        x, out = h.values[ins[0]], h.values[n.outputs[0]]
        if ins[2] and h.values[ins[2]].data is not None and not ins[3]:
            data = np.asarray(out.type.shape, dtype=np.int64)
            if "axes" in n.attrs:
                data = data[[a % x.type.rank for a in n.attrs["axes"]]]
            name, slot, dtype = f"{n.name or 'n'}_sizes", 3, "int64"
        elif ins[3] and h.values[ins[3]].data is not None and not ins[2]:
            axes = [a % x.type.rank for a in n.attrs.get("axes", range(x.type.rank))]
            data = np.asarray([out.type.shape[a] / x.type.shape[a] for a in axes], dtype=np.float32)
            name, slot, dtype = f"{n.name or 'n'}_scales", 2, "float32"
        else:
            return None
        if name in h.values:
            return None
        h.add_value(Value(name, TensorType(data.shape, dtype), CONST_KIND, data))
        ins[5 - slot] = ""  # the other one goes
        ins[slot] = name
        while ins and not ins[-1]:
            ins.pop()
        n.inputs = ins
        h2 = pruned_and_retyped(h, new)
        if h2 is None and slot == 3:  # ONNX's inference leaves a size of 0 unknown; the sizes are the shape
            h2 = h
        return (h2, new) if h2 is not None and h2.values[n.outputs[0]].type == out.type else None
    return apply if node.op == "Resize" else None


# -- the variations -----------------------------------------------------------------------------------
def _option(options: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = options
    for k in path:
        if not isinstance(cur, Mapping) or k not in cur:
            return None
        cur = cur[k]
    return cur


def twin(variants: Mapping[str, Mapping[str, Any]], variant: str, path: tuple[str, ...],
         also: tuple[tuple[str, ...], ...] = ()) -> str:
    """The variant whose options are ``variant``'s but for the option at ``path`` (unset, or another value)
    and those at ``also`` (which go with it); "" when the backend has none."""
    mine = variants.get(variant)
    if mine is None:
        return ""

    def rest(o: Mapping[str, Any]) -> dict[str, Any]:
        out = unset_option(o, path)
        for p in also:
            out = unset_option(out, p)
        return out

    base = rest(mine)
    return next((name for name, o in variants.items() if name != variant and rest(o) == base
                 and _option(o, path) != _option(mine, path)), "")


def _swallows(options: Mapping[str, Any]) -> bool:
    """Whether a variant's options set the cause of a swallowed error (``SWALLOWED``: one inference thread)."""
    return any(kind in SWALLOWED and _option(options, path) == value
               for path, (kind, value, _, _) in OPTION_CAUSES.items())


def with_unset_twins(variants: Mapping[str, Mapping[str, Any]], variant: str) -> dict[str, Mapping[str, Any]]:
    """``variants`` and, for each option of ``UNSET_TWINS`` that ``variant`` sets and no declared variant
    leaves out, the variant without it (``backends.base.unset``: the worker resolves it by name)."""
    out = dict(variants)
    mine = variants.get(variant)
    for path in UNSET_TWINS:
        if mine is not None and _option(mine, path) is not None and not twin(variants, variant, path):
            out[unset(variant, path)] = unset_option(mine, path)
    return out


def variations(g: Graph, feeds: Feeds, first: Mapping[str, Any] | None, variant: str,
               variants: Mapping[str, Mapping[str, Any]], mate: str = "") -> tuple[list[Variation], list[str]]:
    """The variations that apply to the case, each switching one suspected cause off, and the causes
    present that no variation can switch off here (a variant option without a twin); ``mate``: the
    variant a metamorphic bug's variant is compared with (its twin is no variation of the pair)."""
    out: list[Variation] = []
    unavailable: list[str] = []
    # the narrower first: a value beyond 2**53 is beyond int32 too, and its own cause where a converter
    # takes it through float64 (OpenVINO's static Trilu fails from |k| = 2**53 + 1, its dynamic one at int32)
    if _large_values(g, feeds, EXACT_BOUND):
        out.append(Variation(EXACT_RANGE, "integer values beyond float64's exact range", _into_range(EXACT_BOUND)))
    if _large_values(g, feeds, 2 ** 31):
        out.append(Variation(INT32_RANGE, "integer values beyond the int32 range", _into_int32))
    if any(v.type.dtype in SIGNED_OF for v in g.values.values()):
        out.append(Variation(SIGNED, "unsigned element types", _signed))
    if any(v.pinned for v in g.values.values()):
        out.append(Variation(INITIALIZER, "operands fed at run time", _pinned_to_initializers))
    if any(v.kind == CONST_KIND and v.data is not None for v in g.values.values()):
        out.append(Variation(RUNTIME, "operands folded as initializers", _initializers_to_inputs))
    if _empty_initializers(g):
        out.append(Variation(EMPTY, "an empty tensor folded as an initializer", _empty_to_inputs))
    # narrower than every operand's form, and than a lower rank an empty shape gives; after the declared types,
    # which change no value (IREE's ReduceLogSum of empty axes fed at run time: the rank ONNX cannot tell)
    if _empty_fed(g):
        out.append(Variation(FED_EMPTY, "an empty tensor fed at run time", _empty_to_initializers))
    untyped = _rank_untold(g)
    if untyped:
        out.append(Variation(DECLARED, UNTOLD_RANK, _declared(untyped)))
    for path, (kind, value, cause, also) in OPTION_CAUSES.items():
        if _option(variants.get(variant, {}), path) == value:
            other = twin(variants, variant, path, also)
            if other == mate and mate:
                continue
            if other:
                out.append(Variation(kind, cause, variant=other))
            else:
                unavailable.append(cause)
    node = suspect(g, first)
    if node is not None:
        defaults = _defaults(node.op, g.opset)
        for name, value in sorted(node.attrs.items()):
            if name == "auto_pad" and value in SAME:  # the explicit pads it means: same outputs, another form
                if _same_pads(g, node) is not None:
                    out.append(Variation(ATTRIBUTE, "auto_pad SAME_UPPER or SAME_LOWER", _explicit_pads(node),
                                         about=name))
            elif name in defaults and defaults[name] != value:
                out.append(Variation(ATTRIBUTE, _attribute_cause(name, value), _omit(node, name), about=name))
        if node.op == "Einsum" and "->" not in str(node.attrs.get("equation", "->")):
            out.append(Variation(ATTRIBUTE, "an implicit output (no '->')", _explicit_output(node), about="equation"))
        if _negative_axes(g, node):
            out.append(Variation(SIGN, "a negative axis", _positive_axes(node)))
        if _negative_positions(g, node):
            out.append(Variation(SIGN, "a negative position", _positions_from_start(node)))
        lower = _broadcast_operands(g, node, feeds)
        if lower:
            out.append(Variation(RANKS, "operands of a lower rank", _same_ranks(node, lower)))
        since, other = _versions(node.op, g.opset)
        if since is not None and other is not None:
            out.append(Variation(OPSET, f"version {since}", _at_version(node, other)))
        per_axis = _per_axis_quantization(g, node)
        if per_axis:
            out.append(Variation(PER_AXIS_QUANT, "per-axis quantization parameters", _per_tensor(per_axis)))
        negative = _negative_operands(g, node, feeds)
        if negative:
            out.append(Variation(NEGATIVE, "negative values", _non_negative(negative)))
        data = node.inputs[0] if node.inputs else ""
        if node.op in SELECTION and data in _own_operands(g, node, feeds) and _ties_broken(
                feeds.get(data, g.values[data].data)) is not None:
            out.append(Variation(TIES, "tied values", _without_ties(data)))
        names, element = _float_operands(g, node)
        if names:
            out.append(Variation(ELEMENT_TYPE, f"{element} inputs", _as_float32(names)))
        for position, name in _optional_inputs(g, node):
            # a tensor of two or more dimensions is named with its rank, which may select its meaning (com.
            # microsoft.Attention's mask_index: 1-D ends or starts and ends, 3-D a mask per query: two defects)
            rank = g.values[node.inputs[position]].type.rank if node.inputs[position] in g.values else 0
            given = f"a {rank}-D {name} given" if rank >= 2 else f"{name} given"
            out.append(Variation(OPTIONAL, given, _omit_input(node, position), about=name))
        for name in _optional_attributes(g, node):
            omit = _all_axes(node) if name == "axes" and node.op in PER_AXIS else _omit(node, name)
            out.append(Variation(OPTIONAL, f"{name} given", omit, about=name))
    return out, unavailable


def siblings(g: Graph, first: Mapping[str, Any] | None) -> tuple[str, list[Variation]]:
    """(the suspect's family, the variations that put a sibling of the family, or the other form of
    one operator, in its place)."""
    node = suspect(g, first)
    if node is None:
        return "", []
    out: list[Variation] = []
    family = next((name for name, ops in FAMILIES.items() if node.op in ops), "")
    if family:
        # the siblings whose schemas take its operands' types (a ReduceL1 of bool is no model)
        out += [Variation(SIBLING, op, _sibling(node, op)) for op in FAMILIES[family]
                if op != node.op and _admits(op, g, node)]
    form = _resize_form(node)
    if form is not None:
        family = RESIZE_FORMS
        out.append(Variation(SIBLING, "Resize's other form", form))
    return family, out


# -- running a variation ------------------------------------------------------------------------------
class Trial:
    """Runs cases as the campaign judges them: the baseline (the reference, else ORT without
    optimizations; a case it cannot run is not valid), then the bug's backend and variant, confirmed."""

    def __init__(self, runner: Runner, finding: Finding, variants: Mapping[str, Mapping[str, Any]],
                 tolerances: Mapping[str, tuple[float, float]] | None = None) -> None:
        self.runner, self.f = runner, finding
        self.variants, self.tolerances = variants, tolerances
        self.criteria = criteria_for({finding.backend: {n: Variant(n, dict(o)) for n, o in variants.items()}},
                                     dict(tolerances or {}))
        self.runs = 0
        self.compiler_seconds = 0.0  # inside the bug's compiler, over all cases (the campaign's CPU breakdown)
        self.declined = ""  # the compiler's decline of the last case it declined
        self.failed = ""  # the compiler's error on the last case it failed (a decline or not)
        self.failed_at: tuple[str, Outcome] | None = None  # the variant that failed it, and how
        self.crashed: list[Finding] = []  # the compiler's crashes on the last case (its own, whatever the oracle)
        self.fresh = False  # every case in a worker of its own (``analyze``: a control a used worker hides)
        self.outputs: dict[str, list[np.ndarray]] = {}  # the last case's outputs, per variant that ran it

    def __call__(self, g: Graph, feeds: Feeds, variant: str) -> list[Finding] | None:
        """The findings of ``variant`` on the case (a metamorphic bug's: beside its mate, and against the
        baseline), or None when the case is not valid (no finite baseline, or it does not run on the
        compiler and fails elsewhere than the bug did, or the compiler declines it)."""
        from dlcfuzz.export.onnx import to_bytes

        try:
            g.validate()
            test = Test(to_bytes(g), g.to_json(), {k: np.asarray(v) for k, v in feeds.items()})
        except (ValueError, KeyError, TypeError):
            return None
        self.runs += 1
        self.crashed = []
        base = run_baseline(self.runner, test, g)
        if base.outputs is None or not all_finite(base.outputs):
            return None
        runs = CONFIRM_RUNS if self.f.oracle == CRASH else 1
        pair = self.f.oracle == METAMORPHIC and self.f.other and self.f.other != variant
        names = [self.f.other, variant] if pair else [variant]  # the mate first: the variant is compared with it
        # a twin with an option unset runs in a worker of its own: OpenVINO on its default threads leaves the
        # process changed (its later one-thread runs raise what they swallowed before)
        fresh = self.fresh or any(UNSET in n for n in names)
        got, late, seconds = run_confirmed(self.runner, self.f.backend, test, names, fresh=fresh, runs=runs)
        self.compiler_seconds += seconds
        self.outputs = {v: o.outputs for v, o in got.items() if o.status == OK and o.outputs is not None}
        by_baseline = self.f.oracle in (DIFFERENTIAL, METAMORPHIC)
        criteria = self.criteria.for_graph(g, base.name if by_baseline else self.f.other)
        verdict = judge({self.f.backend: got}, base.outputs if by_baseline else None, criteria)
        self.crashed = [f for f in verdict.findings + late if f.backend == self.f.backend and f.oracle == CRASH
                        and f.category == COMPILER]
        # the decline's whole message (the verdict keeps 300 characters: a longer node name cut its words)
        declines = [f"{got[v].error_type}: {got[v].message}" if v in got else why
                    for b, v, why in verdict.unsupported if b == self.f.backend and v in names]
        if declines:
            self.declined = declines[0]
            return None  # declined: the compiler stopped before the bug's site, which it neither shows nor hides
        if self.f.oracle != CRASH and any(v not in got or got[v].status != OK for v in names):
            self.failed = next((f"{o.error_type}: {o.message}" for v in names if (o := got.get(v)) is not None
                                and o.status != OK and o.message), "")
            self.failed_at = next(((v, o) for v in names if (o := got.get(v)) is not None and o.status != OK), None)
            return None  # failed: it neither shows nor hides wrong values
        return [f for f in verdict.findings + late if f.backend == self.f.backend]


    def intermediates(self, g: Graph, feeds: Feeds) -> Feeds:
        """Every tensor a node of ``g`` makes, as the baseline computes it ({} where it cannot)."""
        from dlcfuzz.export.onnx import to_bytes

        names = [o for n in g.nodes for o in n.outputs if o and o in g.values]
        visible = _copy(g)
        visible.outputs = names
        try:
            test = Test(to_bytes(visible), visible.to_json(), {k: np.asarray(v) for k, v in feeds.items()})
        except (ValueError, KeyError, TypeError):
            return {}
        self.runs += 1
        base = run_baseline(self.runner, test, visible)
        if base.outputs is None or len(base.outputs) != len(names):
            return {}
        return {k: a for k, a in zip(names, base.outputs, strict=True) if isinstance(a, np.ndarray)}


# -- a crash on a producer's wrong output -------------------------------------------------------------
def _fed(g: Graph, name: str, inter: Feeds) -> Value | None:
    """``name`` (a node's output) as a runtime input holding the baseline's value, of its type (which a
    reduction may have left stale where it is read by no one); None where the baseline has no tensor
    (a sequence) of the declared element type."""
    v, a = g.values[name], inter.get(name)
    if a is None or a.dtype.name != v.type.dtype:
        return None
    return Value(name, TensorType(tuple(a.shape), v.type.dtype), INPUT_KIND)


def alone(g: Graph, node: Node, feeds: Feeds, inter: Feeds) -> tuple[Graph, Feeds] | None:
    """``node`` alone: what other nodes gave it fed at run time with the baseline's values, its outputs
    the case's."""
    made = {o for n in g.nodes for o in n.outputs}
    h = Graph(opset=g.opset, meta=dict(g.meta))
    new: Feeds = {}
    for name in dict.fromkeys(x for x in node.inputs if x):
        if name in made:
            fed = _fed(g, name, inter)
            if fed is None:
                return None
            h.values[name], new[name] = fed, inter[name]
        else:
            h.values[name] = _copy_value(g.values[name])
            if name in feeds:
                new[name] = feeds[name]
    for name in node.outputs:
        if name:
            h.values[name] = Value(name, g.values[name].type, NODE_KIND)
    h.nodes = [Node(node.op, list(node.inputs), list(node.outputs), dict(node.attrs), node.name)]
    h.outputs = [o for o in node.outputs if o]
    return h, new


def cut(g: Graph, node: Node, feeds: Feeds, inter: Feeds) -> tuple[Graph, Feeds] | None:
    """``g`` without ``node``: what it gave the others fed at run time with the baseline's values, and
    what only fed it dropped."""
    h, new = _copy(g), dict(feeds)
    h.nodes = [n for n in h.nodes if n.name != node.name]
    h.outputs = [o for o in h.outputs if o not in node.outputs]
    read = {x for n in h.nodes for x in n.inputs if x}
    for name in node.outputs:
        if name not in read:
            h.values.pop(name, None)
        elif name in h.values:
            fed = _fed(g, name, inter)
            if fed is None:
                return None
            h.values[name], new[name] = fed, inter[name]
    while True:  # drop the nodes that now feed nothing
        used = {x for n in h.nodes for x in n.inputs if x} | set(h.outputs)
        dead = [n for n in h.nodes if not any(o in used for o in n.outputs)]
        if not dead:
            break
        h.nodes = [n for n in h.nodes if n not in dead]
        for n in dead:
            for o in n.outputs:
                h.values.pop(o, None)
    if not h.nodes or not h.outputs:
        return None
    typed = pruned_and_retyped(h, new)  # where ONNX's inference cannot (contrib operators), the types stand
    return (h if typed is None else typed), new


def _last(op: str) -> str:
    """The operator of a chain's output (a sequence chain is one node: "SplitToSequence+ConcatFromSequence")."""
    return op.rsplit("+", 1)[-1]


# the operators that take a tensor out of a sequence: a compiler without sequences lowers each chain whole, and
# types what it gives alike (OpenVINO types SequenceAt's output and ConcatFromSequence's as dynamic: each reader
# that checks its input's type fails, c45 and c46: one root)
FROM_SEQUENCE = frozenset({"SequenceAt", "ConcatFromSequence"})


def _typed_producer(op: str) -> str:
    """How a producer whose typing fails its readers is named: a tensor out of a sequence whichever operator
    took it out, else the operator."""
    return "a tensor taken out of a sequence" if _last(op) in FROM_SEQUENCE else f"{_last(op)}'s output"


def reshaped_at_run_time(g: Graph, node: Node, feeds: Feeds, inter: Feeds) -> tuple[Graph, Feeds] | None:
    """``g`` with what ``node`` gave the others made by another producer whose output only the run shapes:
    a Reshape of the baseline's values to a shape fed at run time (ONNX then knows the rank and element
    type, not the dimensions); None where that cannot be built (an empty value: Reshape reads a 0 as "keep")."""
    case = cut(g, node, feeds, inter)
    if case is None:
        return None
    h, fd = case
    for name in node.outputs:
        v = h.values.get(name)
        if v is None or v.kind != INPUT_KIND or name not in fd:
            continue
        a = np.asarray(fd.pop(name))
        if a.size == 0:
            return None
        flat, shape = f"{name}__flat", f"{name}__shape"
        if flat in h.values or shape in h.values:
            return None
        h.values[name] = Value(name, v.type, NODE_KIND)
        h.add_value(Value(flat, TensorType((a.size,), v.type.dtype), INPUT_KIND))
        dims = np.array(a.shape, np.int64)
        h.add_value(Value(shape, TensorType((a.ndim,), "int64"), INPUT_KIND, dims))
        fd[flat], fd[shape] = a.reshape(-1), dims
        h.nodes.insert(0, Node("Reshape", [flat, shape], [name], {}, f"{name}__reshape"))
    return h, fd


RUN_TIME_SHAPE = "run-time shape"
UNKNOWN_RANK = "unknown rank"
# a producer whose output the compiler types worse than ONNX does: a reader fails on it, and not on another
# producer's output of the same run-time shape (OpenVINO gives a ConcatFromSequence's output a dynamic element
# type; every reader that checks its input's type fails, each with its own message)
PRODUCER_TYPING = "producer's typing"


def shaped_at_run_time(g: Graph) -> str:
    """What ONNX's shape inference cannot tell of ``g``'s outputs from the case's types and constants:
    a dimension (``RUN_TIME_SHAPE``: NonMaxSuppression's boxes, NonZero's, a ConstantOfShape of a shape fed
    at run time), or the rank itself (``UNKNOWN_RANK``: a Squeeze of axes fed at run time, a window of a
    size fed at run time), where the operator has a schema (one without inference says nothing); ""
    where it tells all."""
    import onnx

    from dlcfuzz.export.onnx import to_onnx

    try:
        model = to_onnx(g)
        for o in model.graph.output:
            o.ClearField("type")
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference's errors are of many types: no claim
        return ""
    found = ""
    for o in inferred.graph.output:
        tt = o.type.tensor_type
        if tt.HasField("shape") and any(not d.HasField("dim_value") for d in tt.shape.dim):
            return RUN_TIME_SHAPE
        if (o.type.HasField("tensor_type") and not tt.HasField("shape")
                and all(_schema(n.op, g.opset) is not None for n in g.nodes)):
            found = UNKNOWN_RANK
    return found


def knock_on(trial: Trial, graph: Graph, feeds: Feeds, variant: str, crashes: Callable[[Graph, Feeds], bool | None],
             max_runs: int) -> tuple[Upstream | None, bool]:
    """Of a reduced crash, the producer whose wrong output the crash needs: one that, alone, diverges
    from the baseline on the bug's backend (or crashes there, or gives an output whose shape only the
    run tells), and without which (its output fed with the baseline's value) the crash vanishes.  A
    compiler that gets one operator's output wrong (TVM's Dropout gives its mask as float32, OpenVINO's
    Resize ignores keep_aspect_ratio_policy) crashes in whichever operator reads it, each with its own
    message: one root, the producer's divergence.  The reduction kept the producer because the crash
    needs it, not because it is wrong: a crash whose producers give right values (a static shape the
    consumer reads, a fused pattern) is the consumer's.  Producers nearest the end first, at most
    ``MAX_PRODUCERS``.  Returns (the producer or None, whether every producer ran alone and was right)."""
    consumed = {x for n in graph.nodes for x in n.inputs if x}
    producers = [n for n in reversed(graph.nodes) if n.name and any(o in consumed for o in n.outputs)]
    if not producers or trial.runs >= max_runs:
        return None, False
    right = len(producers) <= MAX_PRODUCERS
    inter = trial.intermediates(graph, feeds)
    values = Trial(trial.runner, Finding(DIFFERENTIAL, "value", trial.f.backend, variant, "run", ""),
                   trial.variants, trial.tolerances)
    shaped: list[tuple[Node, tuple[Graph, Feeds], str]] = []  # producers whose output only the run shapes

    def vanishes_without(node: Node) -> bool:  # its output fed as the baseline gives it
        without = cut(graph, node, feeds, inter)
        return without is not None and crashes(*without) is False

    for node in producers[:MAX_PRODUCERS]:
        case = alone(graph, node, feeds, inter)
        if case is None or trial.runs + values.runs >= max_runs:
            right = False
            continue
        found = values(*case, variant)
        wrong = [f for f in found or [] if f.diverges and f.category == COMPILER] + values.crashed
        trial.runs, trial.compiler_seconds = trial.runs + values.runs, trial.compiler_seconds + values.compiler_seconds
        values.runs, values.compiler_seconds = 0, 0.0
        if not wrong:
            unknown = shaped_at_run_time(case[0]) if found is not None else ""
            if unknown:
                shaped.append((node, case, unknown))
            right = right and found is not None
            continue
        right = False
        if not vanishes_without(node):
            continue
        f = wrong[0]
        output = case[0].outputs[f.output] if 0 <= f.output < len(case[0].outputs) else ""
        return Upstream(f, case[0], case[1], {"node": node.name, "op": node.op, "output": output,
                                              "kind": f.kind}), False
    if shaped:  # no producer is wrong, one's output only the run shapes: the reader failing on it is at fault
        node, case, unknown = shaped[0]
        if not vanishes_without(node):
            return None, False
        reader = next((n.op for n in graph.nodes if any(o in n.inputs for o in node.outputs if o)), "")
        # the reader at fault fails on any output shaped at run time; where it runs on a Reshape's, the
        # producer's output as the compiler types it is the cause, whichever reader fails on it
        other = reshaped_at_run_time(graph, node, feeds, inter) if unknown == RUN_TIME_SHAPE else None
        if other is not None and trial.runs < max_runs:
            found = trial(*other, variant)
            if found is not None and not trial.crashed and not any(f.diverges for f in found):
                unknown = PRODUCER_TYPING
        return Upstream(None, case[0], case[1], {"node": node.name, "op": node.op, "output": "",
                                                 "kind": unknown, "reader": reader}), False
    return None, right


def shows_without(runner: Runner, finding: Finding, graph: Graph, feeds: Feeds, node: str,
                  variants: Mapping[str, Mapping[str, Any]], shows: Sign, trigger: Analysis,
                  tolerances: Mapping[str, tuple[float, float]] | None = None) -> bool | None:
    """Whether the case's bug still shows with ``trigger`` (a producer's own, found on the producer alone)
    switched off at that producer (``node``) in the whole case; None where it cannot be switched off there
    or the case is then not valid.  A knock-on from a producer's own crash holds only where this is False:
    IREE's TopK with sorted=0 fails alone, and the ReverseSequence reading it fails on another path, which
    sorted=1 does not take away."""
    variants = with_unset_twins(variants, finding.variant)
    found, _ = variations(graph, feeds, {"node": node}, finding.variant, variants)
    chosen = [next((v for v in found if (v.kind, v.cause) == (kind, cause)), None)
              for kind, cause in zip(trigger.kinds, trigger.trigger, strict=True)]
    if not chosen or None in chosen:
        return None
    case = applied([v for v in chosen if v is not None], graph, feeds, finding.variant)
    if case is None:
        return None
    g, fd, variant = case
    findings = Trial(runner, finding, variants, tolerances)(g, fd, variant)
    return None if findings is None else shows(findings, g, KNOCK_ON)


def applied(vs: Sequence[Variation], graph: Graph, feeds: Feeds, variant: str) -> tuple[Graph, Feeds, str] | None:
    """The case (and the variant to run it on) with each of ``vs`` switched off; None where one does not
    apply to it."""
    g, fd = graph, dict(feeds)
    for v in vs:
        if v.apply is not None:
            try:
                got = v.apply(g, fd)
            except (KeyError, StopIteration):  # after another variation, what it changes may be gone
                return None
            if got is None:
                return None
            g, fd = got
        variant = v.variant or variant
    return g, fd, variant


def ignored(v: Variation, computed: Mapping[str, list[np.ndarray]], trial: Trial) -> Variation:
    """An attribute's value that the bug needs, as ``v`` names it, or where the variant computes the same
    outputs with the attribute at its default (the last trial's), the attribute ignored: the baseline's
    outputs moved with the value and the compiler's did not, whichever value the case set (OpenVINO takes
    Resize's keep_aspect_ratio_policy not_smaller and not_larger alike as stretch: one root).  Not a flag
    (``_attribute_cause``: X=0 or X=1): its one value off the default names it either way (c48: OpenVINO's
    MaxPool with storage_order=1 gave transposed indices in one case and ignored it in another)."""
    if v.kind != ATTRIBUTE or "=" not in v.cause or v.cause.rsplit("=", 1)[1] in ("0", "1"):
        return v  # a number or a list is named by the attribute alone already, a flag by its one value
    mine, default = computed.get(trial.f.variant), trial.outputs.get(trial.f.variant)
    if mine is None or default is None or compare(default, mine, trial.criteria.tolerances) is not None:
        return v
    return replace(v, cause=f"{v.about} ignored")


def analyze(runner: Runner, finding: Finding, graph: Graph, feeds: Feeds, first: Mapping[str, Any] | None,
            variants: Mapping[str, Mapping[str, Any]], shows: Sign,
            tolerances: Mapping[str, tuple[float, float]] | None = None, max_runs: int = MAX_RUNS,
            skip: Collection[str] = ()) -> Analysis:
    """The trigger of a reduced bug: the variations (each switching one suspected cause off) after which
    ``shows`` no longer finds the bug in the findings, then, where no single one does, pairs of them;
    the root named by the trigger, the backend and the phase (``root_name``).  ``variants``: the
    backend's variants' options by name (the bug's own among them); at most ``max_runs`` confirmed runs;
    ``skip``: kinds of variation left out."""
    t0 = time.monotonic()
    a = Analysis()
    if finding.oracle not in (DIFFERENTIAL, METAMORPHIC, CRASH) or finding.variant not in variants:
        return a
    variants = with_unset_twins(variants, finding.variant)
    trial = Trial(runner, finding, variants, tolerances)
    mate = finding.other if finding.oracle == METAMORPHIC else ""
    found, unavailable = variations(graph, feeds, first, finding.variant, variants, mate)
    found = [v for v in found if v.kind not in skip]

    def diverged(found: list[Finding]) -> bool:
        """Any divergence of the backend's, wherever it shows."""
        return any(f.diverges and f.backend == finding.backend for f in found)

    reading = shows  # how a trial's findings are read (the control may loosen it, below)
    controls: list[Finding] = []  # the findings of the case as it is (the last control's)

    computed: dict[str, list[np.ndarray]] = {}  # the variant's outputs on the case as it is (the last control's)

    def run(vs: tuple[Variation, ...], kind: str) -> bool | None:
        case = applied(vs, graph, feeds, finding.variant)
        if case is None or trial.runs >= max_runs:
            return None
        g, fd, variant = case
        findings = trial(g, fd, variant)
        if not vs:
            controls[:] = findings or []
            computed.clear()
            computed.update(trial.outputs)
        return None if findings is None else reading(findings, g, kind)

    def note(vs: tuple[Variation, ...], result: bool | None) -> None:
        a.tried.append({"kind": "+".join(v.kind for v in vs) or "control",
                        "cause": " with ".join(v.cause for v in vs) or "the reduced case",
                        "result": "invalid" if result is None else "shows" if result else "vanished"})

    control = run((), "")  # the case as it is: the bug must show as ``shows`` reads it, or nothing is concluded
    note((), control)
    raised = trial.failed_at if control is None else None  # the variant raised an error on the case
    if control is False and finding.diverges:
        # a trial is not localized: where the reduced case's divergence shows at another operator, or as
        # another kind, than its signature reads, any divergence of the backend is the bug (a variation
        # then leaves it less often: fewer triggers, never a wrong one)
        def reading(found: list[Finding], g: Graph, kind: str) -> bool:
            return diverged(found)

        control = run((), "")
        a.tried.append({"kind": "control", "cause": "the reduced case, read as any divergence",
                        "result": "invalid" if control is None else "shows" if control else "vanished"})
    if not control:
        # a worker's history can hide the bug: OpenVINO on one thread swallows an error (and returns unwritten
        # outputs) only in a process that has not raised it before, so each case from here runs in a new one
        trial.fresh = True
        control = run((), "")
        a.tried.append({"kind": "control", "cause": "the reduced case, in a worker of its own",
                        "result": "invalid" if control is None else "shows" if control else "vanished"})
    if not control and raised is not None and finding.oracle != CRASH and _swallows(variants[finding.variant]):
        # wrong values that the bug's own variant, on one inference thread, gave in one process and raised as an
        # error in another (a used worker raises what a fresh one swallows): that error swallowed, one root
        # whatever it says (c47: OpenVINO's LayerNormalization after a TopK, a Split of a Resize's output)
        variant_of, how = raised
        a.trigger, a.kinds = ["the error its variant raises in one process and swallows in another"], [THREADS]
        a.root = swallowed_root(finding.backend)
        a.swallowed = Finding(CRASH, "signal" if how.signal else "exception", finding.backend, variant_of,
                              how.phase, how.message, how.error_type, how.traceback)
    if not control:
        a.runs, a.seconds, a.compiler_seconds = trial.runs, time.monotonic() - t0, trial.compiler_seconds
        return a
    needed: list[Variation] = []
    kept: list[Variation] = []  # variations that ran and left the bug (candidates for pairs)
    refused, refused_by = "", ""  # what the compiler said declining the case on a variant twin (DECLINED_TWINS)
    order = sorted(found, key=lambda v: _ORDER.index(v.kind))
    # wrong values beside a part of the case that shares no value with them, where the twin on the compiler's
    # own threads raises an error, are that error swallowed, whichever operator they are read at: asked
    # first, before an operand's form (folding the constants takes the failing part away, and the bug with
    # it).  Not within one part: there the error may follow from the wrong values (a Slice's ends cut to
    # int32 give a shape that a later Add's shape inference rejects)
    swallowing = finding.oracle != CRASH and len(graph.parts()) > 1
    if swallowing:
        order = [v for v in order if v.kind in SWALLOWED] + [v for v in order if v.kind not in SWALLOWED]
    elif finding.oracle != CRASH:
        # within one part, after the values' causes and before the operands' form and the static twin: the
        # error that the threads twin raises names the defect, where "dynamic shapes" names every dynamic-shape
        # defect alike and an operand's form the path that reaches it (OpenVINO's dynamic LRN "Primitive
        # descriptor was not found": rooted by its words against f32, by "dynamic shapes" against the default;
        # its Resize of the batch axis: by the Interpolate refusal, and by "operands folded as initializers"
        # where scales fed at run time take the checked path)
        twins = [v for v in order if v.kind in SWALLOWED]
        rest = [v for v in order if v.kind not in SWALLOWED]
        at = next((i for i, v in enumerate(rest) if v.kind not in (EXACT_RANGE, INT32_RANGE, SIGNED)), len(rest))
        order = rest[:at] + twins + rest[at:]
    asks_twin = finding.oracle != CRASH  # the twin's error, where it raises one, is what the variant swallowed
    later: Variation | None = None  # a swallowing twin's vanishing, asked early, named in its place in ``_ORDER``
    swallowed = False  # the twin raised the error that the bug's variant swallowed: that error is the root
    for v in order:
        if trial.runs >= max_runs or (later is not None and _ORDER.index(v.kind) > _ORDER.index(later.kind)):
            break
        trial.declined = trial.failed = ""
        trial.failed_at = None
        result = run((v,), v.kind)
        note((v,), result)
        # the twin's refusal names the root; on the compiler's own threads any error it raises does (one
        # thread swallows it: OpenVINO's LRN "Primitive descriptor was not found" is no decline)
        words = trial.declined or (trial.failed if v.kind in SWALLOWED else "")
        if result is None and v.kind in DECLINED_TWINS and words and not refused:
            refused, refused_by = words, v.kind
            if v.kind in SWALLOWED and asks_twin:
                swallowed = True
            if v.kind in SWALLOWED and trial.failed_at is not None and not trial.declined:
                variant_of, how = trial.failed_at
                a.swallowed = Finding(CRASH, "signal" if how.signal else "exception", finding.backend, variant_of,
                                      how.phase, how.message, how.error_type, how.traceback)
            if swallowed:
                break
        if result is False and v.kind in SWALLOWED and asks_twin and later is None:
            later = v
            continue
        if result is False:  # the smallest set: one cause, the first in ``_ORDER`` that makes it vanish
            needed = [ignored(v, computed, trial)]
            break
        if result is True:
            kept.append(v)
    if later is not None and not needed:
        needed = [later]
    node = suspect(graph, first)
    family_tried = False

    def try_siblings() -> None:
        """The family's siblings (and an operator's other form) on the case: the first that shows the bug
        names the family (``a.family``, else the operator)."""
        nonlocal family_tried
        if family_tried or node is None:
            return
        family_tried = True
        family, sibs = siblings(graph, first)
        a.family = node.op
        for v in ([] if SIBLING in skip else sibs[:MAX_SIBLINGS]):
            if trial.runs >= max_runs:
                break
            result = run((v,), SIBLING)
            note((v,), result)
            if result:
                a.family = family
                a.shown_in = [node.op, *([v.cause] if v.cause in FAMILIES.get(family, ()) else [])]
                break

    if not needed and not swallowed:
        # before pairs, which are many: whether a sibling shows the bug is what names the root of a bug that
        # no single cause explains (TVM's Resize drops sizes[:2] and scales[:2] alike: one root)
        try_siblings()
        for pair in itertools.combinations(kept, 2):
            if trial.runs >= max_runs:
                break
            if {pair[0].kind, pair[1].kind} in ({INITIALIZER, RUNTIME}, {EMPTY, RUNTIME}):
                continue
            result = run(pair, "+".join(v.kind for v in pair))
            note(pair, result)
            if result is False:
                needed = list(pair)
                break
    free = CRASH_OPERATOR_FREE if finding.oracle == CRASH else OPERATOR_FREE
    named = [v for v in needed if v.kind not in free]
    # a crash of several nodes, with no trigger that is the backend's, or an operator's at a node located
    if (finding.oracle == CRASH and len(graph.nodes) > 1 and KNOCK_ON not in skip
            and (not needed or (named and node is None))):
        def crashes(g: Graph, fd: Feeds) -> bool | None:
            found = trial(g, fd, finding.variant) if trial.runs < max_runs else None
            return None if found is None else shows(found, g, KNOCK_ON)

        up, right = knock_on(trial, graph, feeds, finding.variant, crashes, max_runs)
        sinks = [n for n in graph.nodes if not any(o in x.inputs for x in graph.nodes for o in n.outputs)]
        # the producers are right, and the operands the trigger changes are the consumer's: the consumer's
        if (right and named and node is None and len(sinks) == 1
                and all(set(_operands(graph, v.kind)) <= set(sinks[0].inputs) for v in named)):
            node, first, a.at_consumer = sinks[0], {"node": sinks[0].name}, True
        if up is not None:  # the producer's divergence is the root, whichever consumer crashed on it
            op, kind = up.first["op"], up.first["kind"]
            # an output shaped at run time is no wrong output: the reader that fails on it is at fault; one of
            # a rank that ONNX cannot tell fails every reader alike (IREE's importer types it as a scalar)
            what = (f"{up.first['reader']} on an input shaped at run time" if kind == RUN_TIME_SHAPE
                    else UNTOLD_RANK if kind == UNKNOWN_RANK
                    else f"a reader of {_typed_producer(op)}, which another producer's of its shape passes"
                    if kind == PRODUCER_TYPING
                    else f"{op}'s own crash" if up.finding is not None and up.finding.oracle == CRASH
                    else f"{op}'s wrong {kind}")
            a.tried.append({"kind": KNOCK_ON, "cause": f"{op}'s output fed as the baseline gives it",
                            "result": "vanished"})
            if kind == PRODUCER_TYPING:
                a.tried.append({"kind": KNOCK_ON, "cause": f"{op}'s output made by a Reshape to a shape fed at run "
                                                           "time", "result": "vanished"})
            a.trigger, a.kinds, a.family, a.upstream = [what], [KNOCK_ON], op, up
            a.at_consumer = up.finding is None
            who = BACKEND_NAMES.get(finding.backend, finding.backend)
            # a producer's typing, or a rank ONNX cannot tell, fails each reader in the phase that reader checks
            # it (OpenVINO's ConcatFromSequence output: a ReduceMin's import, an EyeLike's compile): one root
            phase = "" if kind in (PRODUCER_TYPING, UNKNOWN_RANK) else f" {finding.phase}"
            a.root = (shaped_at_run_time_root(finding, up.first["reader"]) if kind == RUN_TIME_SHAPE
                      else f"{who}{phase} crash{':' if up.finding is None else ' on'} {what}")
            a.runs, a.seconds, a.compiler_seconds = trial.runs, time.monotonic() - t0, trial.compiler_seconds
            return a
    if named and node is None and finding.oracle != CRASH:
        # wrong values, located at no node of the reduced case: an operand's form names the one node that
        # reads the operands (OpenVINO's SequenceAt of a position fed at run time, beside a MatMul in one case
        # and a ReverseSequence in another)
        varied = {x for v in named for x in _operands(graph, v.kind)}
        readers = [n for n in graph.nodes if varied & set(n.inputs)]
        if varied and len(readers) == 1:
            node, first = readers[0], {"node": readers[0].name}
    if node is not None and (named or not needed) and not swallowed:
        try_siblings()
        if not needed and a.family == node.op:
            a.family = ""  # no trigger and no sibling shows it: the signature stands
        about = [{v.about} if v.kind in (ATTRIBUTE, OPTIONAL) else _slots(graph, node, _operands(graph, v.kind))
                 for v in named]
        if named and all(about):
            a.family = next((name for name, (ops, names) in SHARED_FORM.items() if node.op in ops
                             and all(x <= names for x in about)), a.family)
    a.trigger = [v.cause for v in needed]
    a.kinds = [v.kind for v in needed]
    a.unvaried = unavailable
    if (needed or a.family) and not (named and node is None):  # an operator's trigger, at no one operator: no root
        a.root = root_name(finding, a.trigger, a.family if (named or not needed) else "", a.kinds)
    elif refused:  # what the twin refuses, the bug's variant runs wrongly: one root per refusal, whichever path
        # runs it unchecked (OpenVINO checks Interpolate's axes where its shapes are static and on more than one
        # thread; dynamic shapes defer the check to inference, where one thread swallows it: one check)
        path = DECLINED_TWINS[refused_by]
        a.trigger, a.kinds = [f"a case its twin without {path} does not run"], [refused_by]
        a.root = swallowed_root(finding.backend) if refused_by in SWALLOWED else refusal_root(finding.backend, refused)
    if not a.root and swallowing and BESIDE not in skip:
        def diverges(vs: tuple[Variation, ...], kind: str) -> bool | None:
            """Any divergence of the backend's: the part alone must be right, and the stand-in is read
            whatever its signature (an Identity is no If)."""
            case = applied(vs, graph, feeds, finding.variant)
            found = trial(*case) if case is not None and trial.runs < max_runs else None
            return None if found is None else diverged(found)

        # where the case shows it: the located node, else the producer of the output the control saw differ
        # (the finding's own output is the unreduced graph's)
        outs = [graph.outputs[f.output] for f in controls if f.diverges and 0 <= f.output < len(graph.outputs)]
        shown = suspect(graph, first) or next((n for n in graph.nodes if outs and outs[0] in n.outputs), None)
        beside(a, finding, graph, shown, diverges, note)
    chooser = next((n for n in graph.nodes if n.op == a.family), None)
    if (finding.oracle != CRASH and a.kinds and set(a.kinds) <= {INITIALIZER, BESIDE} and chooser is not None
            and chosen_at_run_time(graph, chooser)):
        # wrong values that need a tensor chosen at run time, its choice fed at run time or beside another part:
        # the compiler's run-time choice, however it shows (OpenVINO lowers a SequenceAt of a position fed at run
        # time into Ifs, and its dynamic-shape If returns unwritten memory: c46, c48, three roots so)
        a.family = RUN_TIME_CHOICE
        a.root = f"{BACKEND_NAMES.get(finding.backend, finding.backend)}: wrong values after {RUN_TIME_CHOICE}"
    a.runs, a.seconds, a.compiler_seconds = trial.runs, time.monotonic() - t0, trial.compiler_seconds
    return a


RUN_TIME_CHOICE = "a tensor chosen at run time (If, SequenceAt)"


def shaped_at_run_time_root(f: Finding, reader: str) -> str:
    """The root of a crash of ``reader`` on an input whose shape only the run tells: a producer computed it at run
    time (``RUN_TIME_SHAPE``), or the backend's dynamic-shape variant left it unknown (``STATIC``: the static
    twin compiles).  One root: the reader's code for a shape unknown when it compiles (OpenVINO's ConvTranspose
    with an output_shape, on a dynamic input and after a ConstantOfShape: c48, hand-checked one defect)."""
    return f"{crash_in(f)}: {reader} on an input shaped at run time"


def chosen_at_run_time(g: Graph, node: Node) -> bool:
    """Whether ``node`` chooses its output at run time: an If of a condition, or a SequenceAt (a chain that
    ends in one) of a position, that is no constant."""
    choice = node.inputs[0] if node.op == "If" else node.inputs[-1] if _last(node.op) == "SequenceAt" else ""
    return bool(choice) and choice in g.values and g.values[choice].kind != CONST_KIND


def beside(a: Analysis, finding: Finding, graph: Graph, node: Node | None,
           run: Callable[[tuple[Variation, ...], str], bool | None],
           note: Callable[[tuple[Variation, ...], bool | None], None]) -> None:
    """Wrong values, with no trigger, that show at ``node`` only beside a part of the case that shares no
    value with it: whose bug is it?  Where an Identity of a fresh input in the operator's place comes back
    right beside the same part, the operator is needed, and the bug is the operator's beside any part
    (OpenVINO's dynamic-shape If returns unwritten memory beside a GRU, an AveragePool, a LayerNormalization:
    one root).  Where the Identity comes back wrong too, the operator is a bystander of the other part (a
    failing node empties every output of a dynamic model), and the signature, keyed on that part, stands.
    The operators upstream of it in its part are tried first, the farthest first: the first whose stand-in
    makes the bug vanish is where it starts (the If, where an Abs or a GatherND after it shows it)."""
    if node is None:
        return
    alone = Variation(BESIDE, "the part it shows in, alone", _alone(node))
    shown = run((alone,), BESIDE)
    note((alone,), shown)
    if shown is not False:  # the part alone shows it (or cannot run): no bug of the parts together
        return
    made_by = {o: n for n in graph.nodes for o in n.outputs}
    upstream: set[str] = set()
    todo = [x for x in node.inputs if x in made_by]
    while todo:
        producer = made_by[todo.pop()]
        if producer.name not in upstream:
            upstream.add(producer.name)
            todo += [x for x in producer.inputs if x in made_by]
    for candidate in [n for n in graph.toposort() if n.name in upstream] + [node]:
        stand_in = Variation(BESIDE, f"{candidate.op} replaced by an Identity", _stand_in(candidate))
        result = run((stand_in,), BESIDE)
        note((stand_in,), result)
        if result is False:
            a.trigger, a.kinds, a.family = ["unrelated operators beside it"], [BESIDE], candidate.op
            a.root = root_name(finding, a.trigger, candidate.op, a.kinds)
            return


def root_name(f: Finding, causes: list[str], family: str = "", kinds: Sequence[str] = ()) -> str:
    """The readable root: the backend, the phase where it is not a run's wrong values (a crash, whichever kind),
    the operator or family where the trigger is in its attributes or version, and the causes.  An
    operator's form (``kinds``: all ``OPERATOR_FORM``, its attributes, version or optional inputs) is one
    root however it shows, as a crash in any phase or as wrong values: TVM's pooling converter sizes
    SAME_LOWER with floor where ONNX says ceil, which gives a wrong shape in one model and negative pads
    that fail the compile in another.  An operand's form (fed at run time, folded as an initializer) is
    not: of nine pairs so joined (crashes in two phases, or a crash and wrong values), four were distinct
    defects (OpenVINO's reference Tile and its CPU plugin's Tile node, say).  A trigger in how the backend
    reads values (``PHASE_FREE``: float64's exact range, an empty initializer) is one root in any phase too."""
    who = BACKEND_NAMES.get(f.backend, f.backend)
    if not (family and kinds and all(k in OPERATOR_FORM for k in kinds)) and not (
            kinds and all(k in PHASE_FREE for k in kinds)):
        if f.oracle == CRASH:  # an error or a signal, as the case's shapes make it: one root
            who += " crash" if kinds and all(k in CRASH_IN_ANY_PHASE for k in kinds) else f" {f.phase} crash"
        elif f.phase and f.phase != "run":
            who += f" {f.phase}"
    if not family:
        return f"{who}: {' with '.join(causes)}"
    if not causes:
        return f"{who}: {family} ({f.kind} mismatch)"
    return f"{who}: {family}" + "".join(f" at {c}" if c.startswith("version ") else f" with {c}" for c in causes)
