"""The constraint DSL: one declarative ``OpSpec`` per ONNX operator.

A spec is data that follows Isra's instantiation order, so that every draw is satisfiable:

1. ``arity``   -- the indegree (how many times a variadic input repeats);
2. ``inputs[0]`` -- the first input's type: type variable, rank range (or shape domain), room to
                  grow; its data, where the spec draws them (``In.value``), come after step 3;
3. ``attrs``   -- attribute domains, in order; each may be a ``Dom`` or a function of the
                  context ``c`` (first input, earlier attributes).  Names starting with ``_``
                  are solver variables that are not ONNX attributes; a ``None`` value omits
                  the attribute so that the operator's default is exercised;
4. the other ``inputs`` -- each a shape domain that is a function of ``c``; a later input may
                  reuse a compatible existing tensor or becomes a new one;
5. ``out``     -- output types, a function of ``c``;
6. ``checks``  -- named predicates on the complete call: the constraints the domains were
                  written to satisfy (tests assert them; disruptive mode breaks them).

Domains are *propagated by construction*: a domain written in terms of earlier choices only
holds values that can be extended to a full valid call (operation-level global consistency).
The context ``c`` exposes ``c.x`` (first input type), ``c.s`` (its shape), ``c.r`` (its rank),
``c.T`` / ``c.types`` (bound type variables), ``c.n`` (indegree), ``c.ins`` (input types so far),
``c.cfg`` (limits), ``c.rng`` (random.Random) and every attribute drawn so far as ``c.<name>``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlcfuzz.ir import Node, TensorType, Value, op_identity, op_name


class EmptyDomain(Exception):
    """A domain had no value: a spec is not propagated well enough (counted as a retry)."""


# ---------------------------------------------------------------------------------------------
# Value domains
# ---------------------------------------------------------------------------------------------
class Dom:
    """A finite or continuous set of values to draw from."""

    def sample(self, rng: random.Random) -> Any:
        raise NotImplementedError

    def __contains__(self, v: Any) -> bool:
        raise NotImplementedError

    def size(self) -> int:
        """How many distinct values (an estimate for continuous domains), for diversity metrics."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Int(Dom):
    lo: int
    hi: int

    def sample(self, rng: random.Random) -> int:
        if self.lo > self.hi:
            raise EmptyDomain(f"Int({self.lo}, {self.hi})")
        return rng.randint(self.lo, self.hi)

    def __contains__(self, v: Any) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi

    def size(self) -> int:
        return max(0, self.hi - self.lo + 1)


@dataclass(frozen=True, slots=True)
class Float(Dom):
    """A float in [lo, hi], rounded to 3 decimals so that reports stay readable."""

    lo: float
    hi: float

    def sample(self, rng: random.Random) -> float:
        return round(rng.uniform(self.lo, self.hi), 3)

    def __contains__(self, v: Any) -> bool:
        return isinstance(v, float) and self.lo <= v <= self.hi

    def size(self) -> int:
        return 8  # GenCoG counts a continuous attribute as a handful of distinguishable values


@dataclass(frozen=True, slots=True)
class Choice(Dom):
    values: tuple[Any, ...]

    def __init__(self, values: Sequence[Any]):
        object.__setattr__(self, "values", tuple(values))

    def sample(self, rng: random.Random) -> Any:
        if not self.values:
            raise EmptyDomain("Choice()")
        return self.values[rng.randrange(len(self.values))]

    def __contains__(self, v: Any) -> bool:
        return v in self.values

    def size(self) -> int:
        return len(self.values)


BOOL = Choice((0, 1))


@dataclass(frozen=True, slots=True)
class Subset(Dom):
    """A sorted subset of ``universe`` with between ``lo`` and ``hi`` elements."""

    universe: tuple[int, ...]
    lo: int = 0
    hi: int | None = None

    def __init__(self, universe: Sequence[int], lo: int = 0, hi: int | None = None):
        object.__setattr__(self, "universe", tuple(universe))
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def sample(self, rng: random.Random) -> list[int]:
        hi = len(self.universe) if self.hi is None else min(self.hi, len(self.universe))
        if self.lo > hi:
            raise EmptyDomain(f"Subset of {self.universe} with {self.lo}..{hi} elements")
        k = rng.randint(self.lo, hi)
        return sorted(rng.sample(self.universe, k))

    def __contains__(self, v: Any) -> bool:
        hi = len(self.universe) if self.hi is None else self.hi
        return len(set(v)) == len(v) and set(v) <= set(self.universe) and self.lo <= len(v) <= hi

    def size(self) -> int:
        hi = len(self.universe) if self.hi is None else min(self.hi, len(self.universe))
        return sum(math.comb(len(self.universe), k) for k in range(self.lo, hi + 1))


@dataclass(frozen=True, slots=True)
class Perm(Dom):
    """A permutation of range(n)."""

    n: int

    def sample(self, rng: random.Random) -> list[int]:
        p = list(range(self.n))
        rng.shuffle(p)
        return p

    def __contains__(self, v: Any) -> bool:
        return sorted(v) == list(range(self.n))

    def size(self) -> int:
        return math.factorial(self.n)


@dataclass(frozen=True, slots=True)
class Seq(Dom):
    """A list whose i-th element is drawn from ``item(i, prefix)`` (a Dom), of a given length.

    Elements may depend on the ones before (e.g. a pad end that needs the pad begin).
    """

    length: int
    item: Callable[[int, list[Any]], Dom]

    def sample(self, rng: random.Random) -> list[Any]:
        out: list[Any] = []
        for i in range(self.length):
            out.append(self.item(i, out).sample(rng))
        return out

    def __contains__(self, v: Any) -> bool:
        return len(v) == self.length and all(x in self.item(i, list(v[:i])) for i, x in enumerate(v))

    def size(self) -> int:
        return self.item(0, []).size() ** self.length if self.length else 1


@dataclass(frozen=True, slots=True)
class Axes(Dom):
    """Between ``lo`` and ``hi`` distinct axes of a rank-``rank`` tensor (taken from ``among``,
    default all), in any order, each written in its non-negative or its negative form."""

    rank: int
    lo: int = 0
    hi: int | None = None
    among: tuple[int, ...] | None = None

    def _universe(self) -> tuple[int, ...]:
        return tuple(range(self.rank)) if self.among is None else tuple(self.among)

    def sample(self, rng: random.Random) -> list[int]:
        universe = self._universe()
        hi = len(universe) if self.hi is None else min(self.hi, len(universe))
        if self.lo > hi:
            raise EmptyDomain(f"Axes of rank {self.rank} with {self.lo}..{hi} elements")
        axes = rng.sample(universe, rng.randint(self.lo, hi))
        return [a - self.rank if rng.random() < 0.5 else a for a in axes]

    def __contains__(self, v: Any) -> bool:
        if not all(isinstance(a, int) and -self.rank <= a < self.rank for a in v):
            return False
        norm = [a % self.rank for a in v]
        hi = len(self._universe()) if self.hi is None else self.hi
        return len(set(norm)) == len(norm) and set(norm) <= set(self._universe()) and self.lo <= len(v) <= hi

    def size(self) -> int:
        n = len(self._universe())
        hi = n if self.hi is None else min(self.hi, n)
        return sum(math.perm(n, k) * 2**k for k in range(self.lo, hi + 1))


@dataclass(frozen=True, slots=True)
class OneOf(Dom):
    """A value of one of several domains, the domain picked uniformly."""

    doms: tuple[Dom, ...]

    def sample(self, rng: random.Random) -> Any:
        return self.doms[rng.randrange(len(self.doms))].sample(rng)

    def __contains__(self, v: Any) -> bool:
        return any(v in d for d in self.doms)

    def size(self) -> int:
        return sum(d.size() for d in self.doms)


@dataclass(frozen=True, slots=True)
class Upto(Dom):
    """A dimension length in [1, hi]; fresh draws stay within [1, fresh] (reused tensors may be longer)."""

    hi: int
    fresh: int

    def sample(self, rng: random.Random) -> int:
        if self.hi < 1:
            raise EmptyDomain(f"Upto({self.hi})")
        return rng.randint(1, min(self.hi, self.fresh))

    def __contains__(self, v: Any) -> bool:
        return isinstance(v, int) and 1 <= v <= self.hi

    def size(self) -> int:
        return max(0, self.hi)


def ints(length: int, lo: int, hi: int) -> Seq:
    """``length`` independent integers in [lo, hi]."""
    dom = Int(lo, hi)
    return Seq(length, lambda i, prefix: dom)


@dataclass(frozen=True, slots=True)
class Maybe(Dom):
    """``None`` (attribute omitted: the default is used) with probability ``p_none``, else ``dom``."""

    dom: Dom
    p_none: float = 0.25

    def sample(self, rng: random.Random) -> Any:
        return None if rng.random() < self.p_none else self.dom.sample(rng)

    def __contains__(self, v: Any) -> bool:
        return v is None or v in self.dom

    def size(self) -> int:
        return self.dom.size() + 1


# ---------------------------------------------------------------------------------------------
# Shape domains (for inputs after the first)
# ---------------------------------------------------------------------------------------------
class ShapeDom:
    """A set of shapes; ``ranks`` narrows the search for existing tensors (None: any rank)."""

    ranks: tuple[int, ...] | None = None

    def accepts(self, shape: tuple[int, ...]) -> bool:
        raise NotImplementedError

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        raise NotImplementedError


@dataclass(slots=True)
class Exact(ShapeDom):
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        self.shape = tuple(self.shape)
        self.ranks = (len(self.shape),)

    def accepts(self, shape: tuple[int, ...]) -> bool:
        return shape == self.shape

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        return self.shape


@dataclass(slots=True)
class Dims(ShapeDom):
    """A fixed rank; dimension i is drawn from ``dims[i]`` (an int or a Dom)."""

    dims: Sequence[int | Dom]

    def __post_init__(self) -> None:
        self.ranks = (len(self.dims),)

    def accepts(self, shape: tuple[int, ...]) -> bool:
        if len(shape) != len(self.dims):
            return False
        return all(s == d if isinstance(d, int) else s in d for s, d in zip(shape, self.dims, strict=True))

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        return tuple(d if isinstance(d, int) else d.sample(rng) for d in self.dims)


@dataclass(slots=True)
class Broadcast(ShapeDom):
    """Shapes that broadcast (numpy style, both directions) with ``shape``.

    ``uni=True`` narrows to shapes that broadcast *to* ``shape`` (ONNX unidirectional).
    New dimensions (where ``shape`` has 1, or leading ones) are bounded so that the broadcast
    result keeps at most ``max_numel`` elements.
    """

    shape: tuple[int, ...]
    max_rank: int
    max_dim: int
    max_numel: int
    uni: bool = False

    def __post_init__(self) -> None:
        self.ranks = tuple(range(0, (len(self.shape) if self.uni else self.max_rank) + 1))

    def accepts(self, shape: tuple[int, ...]) -> bool:
        a, b = self.shape, shape
        if self.uni and len(b) > len(a):
            return False
        numel = 1
        for i in range(1, max(len(a), len(b)) + 1):
            x = a[-i] if i <= len(a) else 1
            y = b[-i] if i <= len(b) else 1
            if x != y and x != 1 and y != 1:
                return False
            if self.uni and y != x and y != 1:
                return False
            numel *= max(x, y)
        return numel <= self.max_numel

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        a = self.shape
        room = self.max_numel
        for d in a:
            room //= max(1, d)  # a dim of length 0 (torch programs' empty tensors) leaves the room as it was
        rank = rng.randint(0, len(a) if self.uni else self.max_rank)
        out = []
        for i in range(1, rank + 1):
            x = a[-i] if i <= len(a) else 1
            if x != 1:
                out.append(x if rng.random() < 0.75 else 1)
            elif self.uni:
                out.append(1)
            else:  # a new dimension: grow the result within the element budget
                y = rng.randint(1, max(1, min(self.max_dim, room)))
                room //= y
                out.append(y)
        return tuple(reversed(out))


@dataclass(slots=True)
class AnyOf(ShapeDom):
    """The shapes of any of several domains; a fresh shape comes from one of them, drawn uniformly."""

    doms: tuple[ShapeDom, ...]

    def __post_init__(self) -> None:
        ranks = [d.ranks for d in self.doms]
        self.ranks = None if None in ranks else tuple(sorted({r for rs in ranks for r in rs}))

    def accepts(self, shape: tuple[int, ...]) -> bool:
        return any(d.accepts(shape) for d in self.doms)

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        return self.doms[rng.randrange(len(self.doms))].sample(rng)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The numpy broadcast of shapes (assumed compatible)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i in range(1, len(s) + 1):
            if s[-i] != 1:
                out[-i] = s[-i]
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Inputs and the spec
# ---------------------------------------------------------------------------------------------
Fn = Callable[["Ctx"], Any]


@dataclass(slots=True)
class In:
    """A tensor input.

    The first input takes ``rank`` (range, clamped to the configured max rank) and ``room``
    (its element count leaves room to grow ``room``-fold, for operators that enlarge tensors);
    later inputs take ``shape`` (a function of ``c`` returning a ShapeDom or a tuple); a variadic
    first input uses ``shape`` for its repeats.  A first input that is not variadic may take
    ``shape`` too, for dims that are fixed by the operator (NonMaxSuppression's boxes end in 4):
    a function of ``c`` before anything is drawn (``c.cfg``, ``c.n`` and the random streams only),
    whose shape domain narrows the rank range (and ``room``).
    ``T`` names a type variable (ONNX's name; None: taken from the ONNX schema).  ``optional``
    inputs are present when the solver variable ``_has_<name>`` is 1, drawn with the attributes.
    ``variadic`` repeats the input to the indegree.  ``weight`` inputs may become initializers.
    ``hint`` (a dict, or a function of ``c``) tells input synthesis which values keep the
    operator defined, e.g. ``{"nonzero": 1}`` for an integer divisor.
    ``value`` (a function of ``c``, called after the attributes) draws the input's data, for the
    operators whose output *shape* depends on input values (NonZero, Unique, NonMaxSuppression):
    the input is then a new constant of the solved type holding exactly that array (never a reused
    tensor), so that the spec knows the output shape when it writes ``out``.
    """

    name: str
    T: str | None = None
    rank: tuple[int, int] | Fn = (0, 99)
    room: int = 1
    shape: Fn | None = None
    optional: bool = False
    variadic: bool = False
    weight: bool = False
    hint: dict[str, Any] | Fn | None = None
    value: Fn | None = None


@dataclass(slots=True)
class Const:
    """A constant input whose value follows from the attributes (axes, shapes, pads ...).

    ``value(c)`` returns a numpy array, or None to omit an optional input.
    """

    name: str
    value: Fn


@dataclass(frozen=True)
class Composite:
    """How a composite operator is written in ONNX: one IR node (tensors in, tensors out) that the
    exporter expands into a short chain of ONNX operators whose values in between are sequences or
    optionals, which the IR does not type (spec/sequence.py).

    ``ops``: the ONNX operators of the chain, in order (the composite's name joins them with "+").
    ``types``: each of the spec's type variables -> the (ONNX operator, its type variable) pairs that
    carry it; the dtypes it may take are those every pair allows (the element types of a sequence or
    optional type), per opset, in the ONNX schemas and in a target's kernels alike.
    ``nodes``: the IR node and the graph's value types -> the chain as IR nodes of ONNX operators; the
    IR node's inputs are the chain's inputs, its outputs the chain's outputs, and the values in between
    are named after the node's first output (``inner``), so that they are unique in the model.  The
    types (possibly empty) let a chain type what it writes inside (an If branch's output).
    """

    ops: tuple[str, ...]
    types: dict[str, tuple[tuple[str, str], ...]]
    nodes: Callable[[Node, Mapping[str, TensorType]], list[Node]]


def inner(node: Node, k: int) -> str:
    """The name of the k-th value inside a composite node's chain (not an IR value)."""
    return f"{node.outputs[0]}.{k}"


@dataclass
class OpSpec:
    op: str
    family: str
    inputs: list[In | Const]
    out: Callable[[Ctx], list[TensorType]]
    attrs: dict[str, Dom | Fn] = field(default_factory=dict)
    arity: tuple[int, int] = (1, 1)
    types: dict[str, Sequence[str]] = field(default_factory=dict)
    checks: dict[str, Callable[[Ctx], bool]] = field(default_factory=dict)
    since: int = 1  # the default domain's opset that introduced it (contrib operators: 1, any opset)
    doc: str = ""
    # the operator's domain ("": ONNX's own); the spec's name ``op`` is then qualified by it
    # ("com.microsoft.FastGelu", see ``ir.op_identity``), given either way
    domain: str = ""
    composite: Composite | None = None  # a chain of ONNX operators, not one (spec/sequence.py)
    # forms of a call that compilers treat apart and no attribute names, as support-profile keys
    # (``run/profile.node_keys``): TVM converts a LayerNormalization whose Scale has the normalized shape only
    features: Callable[[Node, Mapping[str, Value]], list[str]] | None = None

    def __post_init__(self) -> None:
        if self.domain and op_identity(self.op)[0] != self.domain:
            self.op = op_name(self.domain, self.op)
        self.domain = op_identity(self.op)[0]
        first = self.inputs[0]
        if not isinstance(first, In) or first.optional:
            raise TypeError(f"{self.op}: the first input must be a required In")
        if first.value is not None and first.variadic:
            raise TypeError(f"{self.op}: a variadic first input cannot have its values drawn")
        for inp in self.inputs[1:]:
            if isinstance(inp, In) and inp.shape is None:
                raise TypeError(f"{self.op}: input {inp.name} needs a shape function")
            if isinstance(inp, In) and inp.optional:
                self.attrs.setdefault(f"_has_{inp.name}", BOOL)
            if isinstance(inp, In) and inp.value is not None:
                raise TypeError(f"{self.op}: input {inp.name} draws its values: make it a Const")

    def first_shape(self, c: Ctx) -> ShapeDom | None:
        """The first input's shape domain (None: its rank range alone), for a context with nothing
        drawn yet."""
        first = self.inputs[0]
        assert isinstance(first, In)
        if first.shape is None or first.variadic:
            return None
        sd = first.shape(c)
        return Exact(sd) if isinstance(sd, tuple) else sd

    @property
    def op_type(self) -> str:
        """The node's op_type in an ONNX model (the name without its domain)."""
        return op_identity(self.op)[1]

    @property
    def data_inputs(self) -> list[In]:
        return [i for i in self.inputs if isinstance(i, In)]

    @property
    def variadic(self) -> bool:
        return any(isinstance(i, In) and i.variadic for i in self.inputs)


class Ctx:
    """The partial instantiation of one operator call; attributes land here as fields."""

    def __init__(self, cfg: Any, rng: random.Random, nprng: np.random.Generator) -> None:
        self.cfg = cfg
        self.rng = rng
        self.np = nprng
        self.types: dict[str, str] = {}
        self.ins: list[TensorType | None] = []
        self.n = 1
        self.attrs: dict[str, Any] = {}
        # the number of outputs of a call that exists (the reducer's candidates); None while solving
        self.outs: int | None = None

    # first-input shorthands, bound by the solver
    x: TensorType
    s: tuple[int, ...]
    r: int
    T: str

    def set(self, name: str, value: Any) -> None:
        self.attrs[name] = value
        setattr(self, name, value)

    def bcast(self, shape: tuple[int, ...], uni: bool = False) -> Broadcast:
        """Shapes that broadcast with ``shape`` within the configured limits."""
        cfg = self.cfg
        return Broadcast(shape, cfg.max_rank, cfg.max_dim, cfg.max_numel, uni)

    def dim(self, lo: int = 1) -> Int:
        """A fresh dimension length."""
        return Int(lo, max(lo, self.cfg.max_dim))

    def has(self, name: str) -> bool:
        return bool(self.attrs.get(f"_has_{name}", 0))


def axis_dom(rank: int, negative: bool = True) -> Int:
    """An axis of a rank-``rank`` tensor, in ONNX's [-rank, rank-1] (or [0, rank-1])."""
    return Int(-rank if negative else 0, rank - 1)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def i64(values: Sequence[int] | int) -> np.ndarray:
    return np.array(values, dtype=np.int64)
