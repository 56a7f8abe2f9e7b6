"""Support profiles: what one compiler version accepts, declines or fails on, per operator, dtype and
attribute feature (NNSmith probes operator x dtype; a decline of TopK ``sorted=0`` or of a Resize mode
needs the attribute too).

A profile counts, for each (operator, key), the tests whose nodes carried that key and that the
compiler accepted (some variant ran them), declined (every failure an explicit decline,
``oracle.unsupported``) or failed on (a crash or an unexplained error: a finding).  Keys are the
operator itself (``*``), the first input's dtype and rank, string and flag attributes, whether any
other attribute is given (``scale=given``: not left to its default), whether each
later input is absent, a constant or a runtime tensor (TVM declines inputs that "must be a constant"),
the first output's dtype, and how many outputs a call with optional outputs asks for.  A later input
that is a constant written as a Shape (``export.onnx.SHAPE_FORM``) is keyed ``in<k>=shape``: TVM 0.27
converts a ShapeExpr for some consumers and says "Node n4 cannot handle ShapeExpr inputs" for others.
A spec may add keys of its own (``OpSpec.features``): the forms of a call no attribute names, such as
LayerNormalization's Scale in the normalized shape or broadcast (``in1.shape=broadcast``).

Constants written as ``Constant`` nodes (``graph.meta["constant_nodes"]``) are not IR nodes: the profile
counts them under the pseudo-operator ``Constant``, keyed by the attribute that holds the value
(``form=value_ints``: TVM 0.27 converts ``value`` alone), and a generator for the compiler only writes
the forms it admits.  A composite operator (spec/sequence.py) is blamed by a decline that names one of the
ONNX operators of its chain.

A profile also keeps the reduced cases that hang the compiler (``hangs``, learned when a campaign
reduces a timeout): a graph holding each of their nodes, with all of its keys, is not run on the compiler
again, since each hit costs a phase's whole limit and the hang is already listed (dtypes and ranks
aside: the reduction itself shrinks and retypes them).

It is built by ``dlcfuzz probe`` (single-operator tests through the real compiler, as a campaign, so a
crash found while probing is a bug like any other), cached per compiler version in the user's cache
folder, and refined online by every campaign: an accepted test credits all its keys, a declined one
debits the keys of the one node that no accepted test vouches for, when there is exactly one such node
(among the nodes of the operator the decline names, when it names one).

A profile admits only what was probed: a generator for the compiler (``admits_op``, ``admits``,
``admits_constant``, ``admits_graph``) writes a key only where some test with it was taken (accepted, or
failed without a decline: the compiler took it) and none declined it without one taken.  An unknown key
(an operator, dtype, version or form no test ever carried to the compiler) is a decline until probed.
The campaign still runs every backend on the tests targeted at the others, skipping only what a profile
knows it declines (``declines_graph``): that is how unknown keys get probed on their first use, and an
operator no profile of a target knows is probed before a targeted campaign starts (``unknown_ops``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path

from dlcfuzz.backends.base import OK, Outcome
from dlcfuzz.ir import CONST_KIND, Graph, Node, Value, op_identity
from dlcfuzz.oracle.unsupported import declined_operators, is_unsupported
from dlcfuzz.solve.types import schema
from dlcfuzz.spec import REGISTRY, onnx_ops

CONSTANT = "Constant"  # the pseudo-operator of constants written as Constant nodes
GIVEN = "=given"  # the key of a number or list attribute given (not left to its default)

ACCEPTED, DECLINED, FAILED = "accepted", "declined", "failed"
STATUSES = (ACCEPTED, DECLINED, FAILED)
FORMAT = 1  # bump when the keys change: profiles written with other keys are rebuilt


class ProfileError(ValueError):
    """A profile file that cannot be read (corrupt, or written by another format)."""


def cache_dir() -> Path:
    """Where profiles are cached: $DLCFUZZ_CACHE, else $XDG_CACHE_HOME/dlcfuzz, else ~/.cache/dlcfuzz."""
    if os.environ.get("DLCFUZZ_CACHE"):
        return Path(os.environ["DLCFUZZ_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dlcfuzz"


def node_keys(node: Node, values: Mapping[str, Value], opset: int | None = None,
              shaped: Collection[str] = ()) -> list[str]:
    """The keys a profile judges ``node`` by (see the module doc); with the model's ``opset``, also the
    operator version it selects (compilers convert or run each version with its own code: ORT 1.31
    has no kernel for RoiAlign-22, though it runs RoiAlign-16)."""
    keys = ["*"]
    known = schema(node.op, opset) if opset is not None else None
    if known is not None:
        keys.append(f"version={known.since_version}")
    first = values[node.inputs[0]] if node.inputs and node.inputs[0] else None
    if first is not None:
        keys += [f"dtype={first.type.dtype}", f"rank={first.type.rank}"]
    for name, v in sorted(node.attrs.items()):
        if isinstance(v, str):
            keys.append(f"{name}={v}")
        elif isinstance(v, (list, tuple)) and v and all(isinstance(s, str) for s in v):
            keys += [f"{name}={s}" for s in sorted(set(v))]
        elif isinstance(v, (bool, int)) and -1 <= int(v) <= 1:  # flags (sorted, ceil_mode, keepdims ...)
            keys.append(f"{name}={int(v)}")
        elif v is not None and not name.startswith("_"):  # a number or list given, not left to its
            keys.append(f"{name}=given")  # default: TVM declines Attention's "custom scale"
    for k, name in enumerate(node.inputs[1:], start=1):
        form = ("absent" if not name else "shape" if name in shaped  # a constant the model computes as a Shape
                else "const" if values[name].kind == CONST_KIND else "runtime")
        keys.append(f"in{k}={form}")
    spec = REGISTRY.get(node.op)
    if spec is not None and spec.features is not None:  # forms no attribute names (LayerNormalization's Scale)
        keys += spec.features(node, values)
    if node.outputs and node.outputs[0] in values:  # the result type: Cast's or EyeLike's target, QLinear*'s
        keys.append(f"out={values[node.outputs[0]].type.dtype}")
    if len(node.outputs) > 1:  # optional outputs asked for (MaxPool's Indices: TVM converts one output)
        keys.append(f"outputs={len(node.outputs)}")
    return keys


def constant_forms_of(graph: Graph) -> set[str]:
    """The Constant attributes the graph's model holds constants in (``export.onnx.constant_nodes``); a
    constant written as a Shape is its consumer's key (``in1=shape``), not a Constant form."""
    from dlcfuzz.export.onnx import SHAPE_FORM, constant_nodes

    return set(constant_nodes(graph).values()) - {SHAPE_FORM}


def shaped_constants(graph: Graph) -> set[str]:
    """The constants the graph's model computes as a Shape (TVM converts only some consumers of one)."""
    from dlcfuzz.export.onnx import SHAPE_FORM, constant_nodes

    return {name for name, form in constant_nodes(graph).items() if form == SHAPE_FORM}


def test_status(backend: str, outcomes: Mapping[str, Outcome]) -> str:
    """accepted: some variant ran the test; declined: every variant failed with an explicit decline;
    failed: otherwise (a crash, a timeout, an unexplained error: the compiler took the test, and it is
    a finding)."""
    if any(o.status == OK for o in outcomes.values()):
        return ACCEPTED
    if outcomes and all(o.status == "error" and is_unsupported(backend, o.phase, o.error_type, o.message)
                        for o in outcomes.values()):
        return DECLINED
    return FAILED


Form = list[tuple[str, list[str]]]  # a graph's nodes as (operator, keys)


class SupportProfile:
    """One compiler version's profile: counts[op][key] = [accepted, declined, failed], and the forms of
    the reduced cases that hang it (``hangs``)."""

    def __init__(self, backend: str, version: str, counts: dict[str, dict[str, list[int]]] | None = None,
                 hangs: list[Form] | None = None) -> None:
        self.backend, self.version = backend, version
        self.counts: dict[str, dict[str, list[int]]] = counts or {}
        self.hangs: list[Form] = hangs or []
        self.learned = 0  # tests learned from since loading

    # -- prediction ---------------------------------------------------------------------------------
    def _seen(self, op: str, key: str) -> list[int]:
        return self.counts.get(op, {}).get(key, [0, 0, 0])

    def _declined(self, op: str, key: str) -> bool:
        # one decline with no acceptance is enough: a rare feature (TopK's sorted=0) shows up once in a
        # probe.  A key declined along with the real culprit stays declined only until a test with it is
        # accepted, which targeted tests of other compilers and untargeted campaigns provide.
        a, d, _ = self._seen(op, key)
        return a == 0 and d >= 1

    def _taken(self, op: str, key: str) -> bool:
        """Probed and taken: some test with the key was accepted, or failed without any decline (the
        compiler took it: a crash is a finding, not a decline).  An unknown key is not taken, but for a
        ``=given`` key (a number or list attribute not left to its default): those keys came after the
        packaged profiles were probed, which hold none for most operators (Conv's kernel_shape), so they
        are judged by their declines alone until the profiles are probed again."""
        a, d, f = self._seen(op, key)
        if key.endswith(GIVEN) and a == d == f == 0:
            return True
        return a > 0 or (f > 0 and d == 0)

    def admits_op(self, op: str) -> bool:
        """Whether some test of the operator was taken (an operator never probed is not admitted)."""
        return self._taken(op, "*")

    def admits(self, node: Node, values: Mapping[str, Value], opset: int | None = None,
               shaped: Collection[str] = ()) -> bool:
        """Whether the compiler is known to take ``node`` in a model at ``opset``: every key of it was
        taken in some test (an unknown key is a decline until probed); ``shaped``: constants written
        as a Shape."""
        return all(self._taken(node.op, k) for k in node_keys(node, values, opset, shaped))

    def admits_constant(self, form: str) -> bool:
        """Whether the compiler takes a constant written as a Constant node holding it in ``form``."""
        return self._taken(CONSTANT, "*") and self._taken(CONSTANT, f"form={form}")

    def admits_graph(self, graph: Graph) -> bool:
        """Whether the compiler is known to take the graph (every key of every node probed and taken),
        and not to hang on it as on a known hang."""
        shaped = shaped_constants(graph)
        return all(self.admits(n, graph.values, graph.opset, shaped) for n in graph.nodes) and all(
            self.admits_constant(form) for form in constant_forms_of(graph)) and not self.hangs_on(graph)

    def declines_graph(self, graph: Graph) -> bool:
        """Whether the compiler is known to decline the graph (a key of it declined, never taken) or to
        hang on it: a campaign does not run it there.  Unknown keys are not declines here: running a
        test targeted at another compiler is how this one's profile learns them."""
        shaped = shaped_constants(graph)
        return any(self._declined(n.op, k) for n in graph.nodes
                   for k in node_keys(n, graph.values, graph.opset, shaped)) or any(
            self._declined(CONSTANT, k) for form in constant_forms_of(graph) for k in ("*", f"form={form}")
        ) or self.hangs_on(graph)

    def unknown_ops(self, ops: Collection[str]) -> list[str]:
        """The operators among ``ops`` that no test ever carried to this compiler (to probe)."""
        return sorted(op for op in ops if op not in self.counts or not any(self._seen(op, "*")))

    def hangs_on(self, graph: Graph) -> bool:
        """Whether the graph holds every node of a known hang's reduced case, each with all of its keys
        (but those the reduction changes: dtype and rank)."""
        keyed = _form(graph)
        return any(all(any(op == o and set(keys) <= set(ks) for o, ks in keyed) for op, keys in hang)
                   for hang in self.hangs)

    def learn_hang(self, reduced: Graph) -> None:
        """A reduced case that hangs the compiler: a hang costs a phase's whole limit each time it is hit
        again, and once it is listed and reduced nothing more is learned by hitting it."""
        form = _form(reduced)
        if form and form not in self.hangs:
            self.hangs.append(form)
            self.learned += 1

    def declined_keys(self, op: str) -> list[str]:
        return sorted(k for k in self.counts.get(op, {}) if self._declined(op, k))

    # -- learning -----------------------------------------------------------------------------------
    def learn(self, graph: Graph, outcomes: Mapping[str, Outcome]) -> str:
        """Counts one test's outcomes on this compiler (see the module doc); returns its status."""
        status = test_status(self.backend, outcomes)
        shaped = shaped_constants(graph)
        keyed = [(n.op, node_keys(n, graph.values, graph.opset, shaped)) for n in graph.nodes]
        # one pseudo-node per Constant form: several value_ints constants are one suspect, not several
        keyed += [(CONSTANT, ["*", f"form={form}"]) for form in sorted(constant_forms_of(graph))]
        if status == DECLINED:
            # a decline that names its operator ("does not lower onnx.Softsign") suspects only its nodes
            # (a composite's: those whose chain holds it)
            text = "\n".join(f"{o.message}\n{o.traceback}" for o in outcomes.values())
            named = declined_operators(text)
            # (they name the op_type: a contrib operator is named without its domain, a composite by
            # one of its chain's operators)
            keyed = [(op, keys) for op, keys in keyed if named & {op_identity(o)[1] for o in onnx_ops(op)}] or keyed
            # one that names a node ("Node n7 cannot handle ShapeExpr inputs.", TVM) suspects that node
            at = {n.op for n in graph.nodes if n.name and re.search(rf"\bNode {re.escape(n.name)}\b", text)}
            keyed = [(op, keys) for op, keys in keyed if op in at] or keyed
            # only the node(s) that nothing accepted vouches for can be the declined one
            unproven = [(op, [k for k in keys if self._seen(op, k)[0] == 0]) for op, keys in keyed]
            unproven = [(op, keys) for op, keys in unproven if keys]
            if len(keyed) == 1:
                keyed = unproven or keyed
            elif len(unproven) == 1:
                keyed = unproven
            else:
                keyed = []  # ambiguous: several suspects, learn nothing
        column = STATUSES.index(status)
        for op, keys in keyed:
            for k in keys:
                self._count(op, k)[column] += 1
        self.learned += 1
        return status

    def _count(self, op: str, key: str) -> list[int]:
        return self.counts.setdefault(op, {}).setdefault(key, [0, 0, 0])

    def merged(self, other: SupportProfile) -> SupportProfile:
        """This profile with ``other``'s counts added (sound for one compiler version: a key is declined
        only where no test of either was taken), and both's hangs."""
        counts = {op: {k: list(c) for k, c in keys.items()} for op, keys in self.counts.items()}
        for op, keys in other.counts.items():
            for k, c in keys.items():
                mine = counts.setdefault(op, {}).setdefault(k, [0, 0, 0])
                mine[:] = [a + b for a, b in zip(mine, c, strict=True)]
        return SupportProfile(self.backend, self.version, counts,
                              self.hangs + [h for h in other.hangs if h not in self.hangs])

    def forget(self, ops: set[str]) -> None:
        """Drops what is known of ``ops`` (probing them again)."""
        self.counts = {op: keys for op, keys in self.counts.items() if op not in ops}

    def mixed(self) -> list[str]:
        """Operators taken in some tests and declined in others: which feature is to blame needs more
        tests to tell."""
        return sorted(op for op, keys in self.counts.items()
                      if keys.get("*", [0])[0] and any(c[1] for c in keys.values()))

    # -- storage ------------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "backend": self.backend, "version": self.version,
                           "counts": self.counts, "hangs": self.hangs}, sort_keys=True, indent=0)

    @classmethod
    def from_json(cls, text: str) -> SupportProfile:
        try:
            d = json.loads(text)
            if d.get("format") != FORMAT:
                raise ProfileError(f"format {d.get('format')}, this dlcfuzz writes {FORMAT}")
            counts = {str(op): {str(k): [int(x) for x in c] for k, c in keys.items()}
                      for op, keys in d["counts"].items()}
            if any(len(c) != 3 for keys in counts.values() for c in keys.values()):
                raise ProfileError("a count is not [accepted, declined, failed]")
            hangs = [[(str(op), [str(k) for k in keys]) for op, keys in form] for form in d.get("hangs", [])]
            return cls(str(d["backend"]), str(d["version"]), counts, hangs)
        except ProfileError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ProfileError(f"{type(e).__name__}: {e}") from None


# keys a reduction changes by itself (it shrinks ranks and retypes to float32): not part of a hang's form
_REDUCED_AWAY = ("dtype=", "rank=", "out=")


def _form(graph: Graph) -> Form:
    """The graph's nodes as (operator, keys), without the keys a reduction changes."""
    shaped = shaped_constants(graph)
    return sorted((n.op, [k for k in node_keys(n, graph.values, graph.opset, shaped)
                          if not k.startswith(_REDUCED_AWAY)]) for n in graph.nodes)


def profile_path(backend: str, version: str, folder: Path | None = None) -> Path:
    safe = "".join(c if c.isalnum() or c in ".-_+" else "_" for c in version)
    return (folder or cache_dir()) / "profiles" / f"{backend}-{safe}.json"


def load_profile(backend: str, version: str, folder: Path | None = None,
                 warn=lambda line: None) -> SupportProfile | None:
    """The cached profile of exactly this compiler version; None when there is none, or when the file
    is corrupt or of another version (``warn`` gets one line saying so; the caller rebuilds it)."""
    path = profile_path(backend, version, folder)
    if not path.exists():
        return None
    try:
        p = SupportProfile.from_json(path.read_text())
    except (OSError, ProfileError) as e:
        warn(f"support profile {path} is unreadable ({e}); it is rebuilt")
        return None
    if (p.backend, p.version) != (backend, version):
        warn(f"support profile {path} is for {p.backend} {p.version}, not {version}; it is rebuilt")
        return None
    return p


def save_profile(p: SupportProfile, folder: Path | None = None) -> Path:
    """Writes the profile atomically (a campaign killed mid-write leaves the old file)."""
    path = profile_path(p.backend, p.version, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(p.to_json())
    tmp.replace(path)
    return path


class JointProfile:
    """Admits what two profiles both admit: a test's target compiler and its baseline (ORT), so that
    every targeted test has a baseline that can run it."""

    def __init__(self, first: SupportProfile, second: SupportProfile) -> None:
        self.first, self.second = first, second

    def admits_op(self, op: str) -> bool:
        return self.first.admits_op(op) and self.second.admits_op(op)

    def admits(self, node: Node, values: Mapping[str, Value], opset: int | None = None,
               shaped: Collection[str] = ()) -> bool:
        return self.first.admits(node, values, opset, shaped) and self.second.admits(node, values, opset, shaped)

    def admits_constant(self, form: str) -> bool:
        return self.first.admits_constant(form) and self.second.admits_constant(form)


def find_profile(backend: str, version: str, warn=lambda line: None) -> SupportProfile | None:
    """This compiler version's profile: the user's cache, else the one packaged with dlcfuzz for the
    pinned versions (built by ``dlcfuzz probe``), else None (to be probed)."""
    got = load_profile(backend, version, warn=warn)
    if got is None:
        from importlib.resources import as_file, files

        with as_file(files("dlcfuzz.data")) as data:
            got = load_profile(backend, version, Path(data), warn)
    return got
