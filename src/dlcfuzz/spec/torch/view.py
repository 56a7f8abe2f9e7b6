"""Views and data movement: view, reshape, permute, transpose, expand, narrow, step slicing, select,
unfold, diagonal, movedim, chunk, split, unbind, squeeze/unsqueeze, flatten/unflatten, as_strided, and
the copies that change layout or order (contiguous, clone in channels_last, flip, roll, repeat, cat,
stack).  A view's output aliases its first input: an in-place write through it reaches the base."""

from __future__ import annotations

import math

from dlcfuzz.ir import TensorType
from dlcfuzz.spec.dsl import BOOL, Choice, In, Int, Perm, broadcast_shapes, divisors
from dlcfuzz.spec.shape import Factors
from dlcfuzz.spec.torch.base import ALL, Draw, TorchOpSpec, hull_iv, same_iv, small_domain


def _t(c, shape) -> list[TensorType]:
    return [TensorType(tuple(shape), c.T)]


def view_op(name, inputs, out, attrs, emit, view=True, rank=(0, 5), **kw) -> TorchOpSpec:
    first = In("x", T="T", rank=rank)
    return TorchOpSpec(name, "view", [first, *inputs], out, attrs=attrs, types={"T": ALL}, emit=emit,
                       transfer=kw.pop("transfer", same_iv), vdomain=small_domain(1e4), view=view, **kw)


def _dim(c, lo_rank: int = 1):
    return Int(-c.r, c.r - 1)


def _target_shape(c) -> Draw:
    """A shape of the same element count, at most rank 5, with one -1 a third of the time."""
    def fn(rng):
        k = rng.randint(1, 5)
        dims = Factors(math.prod(c.s), k).sample(rng)
        if rng.random() < 0.33:
            dims[rng.randrange(k)] = -1
        return dims
    return Draw(fn)


def _resolved(c, dims) -> list[int]:
    n = math.prod(c.s)
    known = math.prod(d for d in dims if d != -1)
    return [n // known if d == -1 else d for d in dims]


def _expand_sizes(c) -> Draw:
    def fn(rng):
        lead = [rng.randint(1, 3) for _ in range(rng.randint(0, 5 - c.r))]
        own = [(rng.randint(1, 4) if d == 1 else (-1 if rng.random() < 0.3 else d)) for d in c.s]
        return lead + own
    return Draw(fn)


def _slice(c) -> Draw:
    def fn(rng):
        n = c.s[c.dim]
        start = rng.randint(0, n - 1)
        stop = rng.randint(start + 1, n)
        return [start, stop, rng.choice((1, 1, 2, 3))]
    return Draw(fn)


def _slice_emit(a, k) -> str:
    start, stop, step = k["bounds"]
    idx = ", ".join([":"] * k["dim"] + [f"{start}:{stop}:{step}"])
    return f"{a[0]}[{idx}]"


def _slice_out(c) -> list[TensorType]:
    start, stop, step = c.bounds
    s = list(c.s)
    s[c.dim] = len(range(start, stop, step))
    return _t(c, s)


def _diag_len(s1: int, s2: int, off: int) -> int:
    return max(0, min(s1, s2 - off) if off >= 0 else min(s1 + off, s2))


def _diagonal_out(c) -> list[TensorType]:
    d1, d2 = c.dim1 % c.r, c.dim2 % c.r
    rest = [d for i, d in enumerate(c.s) if i not in (d1, d2)]
    return _t(c, [*rest, _diag_len(c.s[d1], c.s[d2], c.offset)])


def _pieces(n: int, size: int) -> list[int]:
    k = math.ceil(n / size)
    return [size] * (k - 1) + [n - size * (k - 1)]


def _chunk_out(c) -> list[TensorType]:
    d = c.dim % c.r
    n = c.s[d]
    return [TensorType(tuple(p if i == d else x for i, x in enumerate(c.s)), c.T)
            for p in _pieces(n, math.ceil(n / c.chunks))]


def _split_out(c) -> list[TensorType]:
    d = c.dim % c.r
    return [TensorType(tuple(p if i == d else x for i, x in enumerate(c.s)), c.T) for p in _pieces(c.s[d], c.size)]


def _strided(c) -> Draw:
    """Sizes and strides of a window inside a contiguous tensor's storage (overlapping ones included)."""
    def fn(rng):
        n = math.prod(c.s)
        k = rng.randint(1, 3)
        sizes = [rng.randint(1, 4) for _ in range(k)]
        strides = [rng.choice((0, 1, 1, 2, 3, 4)) for _ in range(k)]
        while sum((a - 1) * b for a, b in zip(sizes, strides, strict=True)) >= n:
            i = max(range(k), key=lambda j: (sizes[j] - 1) * strides[j])
            sizes[i] = max(1, sizes[i] - 1) if sizes[i] > 1 else 1
            strides[i] = strides[i] // 2 if sizes[i] == 1 else strides[i]
        offset = rng.randint(0, n - 1 - sum((a - 1) * b for a, b in zip(sizes, strides, strict=True)))
        return [sizes, strides, offset]
    return Draw(fn)


def _cat_shape(c):
    from dlcfuzz.spec.dsl import Dims

    d = c.dim % c.r
    return Dims([Int(1, 4) if i == d else x for i, x in enumerate(c.s)])


def _repeat_sizes(c) -> Draw:
    return Draw(lambda rng: [rng.randint(1, 2) for _ in range(rng.randint(0, 5 - c.r))] +
                [rng.choice((1, 1, 2, 3)) for _ in c.s])


SPECS = [
    view_op("view", [], lambda c: _t(c, _resolved(c, c.shape)), {"shape": _target_shape},
            lambda a, k: f"{a[0]}.view({k['shape']})"),
    view_op("reshape", [], lambda c: _t(c, _resolved(c, c.shape)), {"shape": _target_shape},
            lambda a, k: f"{a[0]}.reshape({k['shape']})"),
    view_op("permute", [], lambda c: _t(c, [c.s[p] for p in c.dims]), {"dims": lambda c: Perm(c.r)},
            lambda a, k: f"{a[0]}.permute({k['dims']})", rank=(1, 5)),
    view_op("transpose", [], lambda c: _t(c, _swap(c.s, c.dim0, c.dim1)),
            {"dim0": _dim, "dim1": _dim}, lambda a, k: f"{a[0]}.transpose({k['dim0']}, {k['dim1']})", rank=(1, 5)),
    view_op("t", [], lambda c: _t(c, c.s[::-1]), {}, lambda a, k: f"{a[0]}.t()", rank=(0, 2)),
    view_op("mT", [], lambda c: _t(c, (*c.s[:-2], c.s[-1], c.s[-2])), {}, lambda a, k: f"{a[0]}.mT", rank=(2, 5)),
    view_op("expand", [], lambda c: _t(c, [*c.sizes[:len(c.sizes) - c.r],
                                            *(x if d == -1 else d for d, x in zip(c.sizes[len(c.sizes) - c.r:], c.s,
                                                                                  strict=True))]),
            {"sizes": _expand_sizes}, lambda a, k: f"{a[0]}.expand({k['sizes']})"),
    view_op("narrow", [], lambda c: _t(c, [c.length if i == c.dim % c.r else x for i, x in enumerate(c.s)]),
            {"dim": _dim, "start": lambda c: Int(0, c.s[c.dim] - 1),
             "length": lambda c: Int(1, c.s[c.dim] - c.start)},
            lambda a, k: f"{a[0]}.narrow({k['dim']}, {k['start']}, {k['length']})", rank=(1, 5)),
    view_op("slice", [], _slice_out, {"dim": lambda c: Int(0, c.r - 1), "bounds": _slice}, _slice_emit,
            rank=(1, 5)),
    view_op("select", [], lambda c: _t(c, [x for i, x in enumerate(c.s) if i != c.dim % c.r]),
            {"dim": _dim, "index": lambda c: Int(-c.s[c.dim], c.s[c.dim] - 1)},
            lambda a, k: f"{a[0]}.select({k['dim']}, {k['index']})", rank=(1, 5)),
    view_op("unfold", [], lambda c: _t(c, [(x - c.size) // c.step + 1 if i == c.dim % c.r else x
                                            for i, x in enumerate(c.s)] + [c.size]),
            {"dim": _dim, "size": lambda c: Int(1, c.s[c.dim]), "step": Int(1, 3)},
            lambda a, k: f"{a[0]}.unfold({k['dim']}, {k['size']}, {k['step']})", rank=(1, 4)),
    view_op("diagonal", [], _diagonal_out,
            {"dim1": _dim, "dim2": lambda c: Choice([d for d in range(-c.r, c.r) if d % c.r != c.dim1 % c.r]),
             "offset": lambda c: Int(-(c.s[c.dim1] - 1), c.s[c.dim2] - 1)},
            lambda a, k: f"torch.diagonal({a[0]}, {k['offset']}, {k['dim1']}, {k['dim2']})", rank=(2, 5)),
    view_op("movedim", [], lambda c: _t(c, _moved(c.s, c.source, c.destination)),
            {"source": _dim, "destination": _dim},
            lambda a, k: f"torch.movedim({a[0]}, {k['source']}, {k['destination']})", rank=(1, 5)),
    view_op("chunk", [], _chunk_out, {"dim": _dim, "chunks": lambda c: Int(1, c.s[c.dim])},
            lambda a, k: f"torch.chunk({a[0]}, {k['chunks']}, {k['dim']})", rank=(1, 5)),
    view_op("split", [], _split_out, {"dim": _dim, "size": lambda c: Int(1, c.s[c.dim])},
            lambda a, k: f"torch.split({a[0]}, {k['size']}, {k['dim']})", rank=(1, 5)),
    view_op("unbind", [], lambda c: [TensorType(tuple(x for i, x in enumerate(c.s) if i != c.dim % c.r), c.T)
                                     for _ in range(c.s[c.dim])],
            {"dim": _dim}, lambda a, k: f"torch.unbind({a[0]}, {k['dim']})", rank=(1, 5)),
    view_op("squeeze", [], lambda c: _t(c, [x for i, x in enumerate(c.s) if not (i == c.dim % c.r and x == 1)]),
            {"dim": _dim}, lambda a, k: f"{a[0]}.squeeze({k['dim']})", rank=(1, 5)),
    view_op("unsqueeze", [], lambda c: _t(c, _unsq(c.s, c.dim)), {"dim": lambda c: Int(-c.r - 1, c.r)},
            lambda a, k: f"{a[0]}.unsqueeze({k['dim']})", rank=(0, 4)),
    view_op("flatten", [], lambda c: _t(c, [*c.s[:c.start], math.prod(c.s[c.start:c.end + 1]), *c.s[c.end + 1:]]),
            {"start": lambda c: Int(0, c.r - 1), "end": lambda c: Int(c.start, c.r - 1)},
            lambda a, k: f"{a[0]}.flatten({k['start']}, {k['end']})", rank=(1, 5)),
    view_op("unflatten", [], lambda c: _t(c, [*c.s[:c.dim], *c.sizes, *c.s[c.dim + 1:]]),
            {"dim": lambda c: Int(0, c.r - 1), "sizes": lambda c: Factors(c.s[c.dim], 2)},
            lambda a, k: f"{a[0]}.unflatten({k['dim']}, {k['sizes']})", rank=(1, 4)),
    view_op("as_strided", [], lambda c: _t(c, c.window[0]), {"window": _strided},
            lambda a, k: f"{a[0]}.contiguous().as_strided({k['window'][0]}, {k['window'][1]}, {k['window'][2]})"),
    view_op("contiguous", [], lambda c: [c.x], {}, lambda a, k: f"{a[0]}.contiguous()", view=False),
    view_op("channels_last", [], lambda c: [c.x], {"clone": BOOL},
            lambda a, k: (f"{a[0]}.clone(memory_format=torch.channels_last)" if k["clone"] else
                          f"{a[0]}.contiguous(memory_format=torch.channels_last)"), view=False, rank=(4, 4)),
    view_op("clone", [], lambda c: [c.x], {}, lambda a, k: f"{a[0]}.clone()", view=False),
    view_op("flip", [], lambda c: [c.x], {"dims": lambda c: Draw(lambda rng: sorted(
        rng.sample(range(c.r), rng.randint(1, c.r))))}, lambda a, k: f"torch.flip({a[0]}, {k['dims']})",
            view=False, rank=(1, 5)),
    view_op("roll", [], lambda c: [c.x], {"dim": _dim, "shift": Int(-3, 3)},
            lambda a, k: f"torch.roll({a[0]}, {k['shift']}, {k['dim']})", view=False, rank=(1, 5)),
    view_op("repeat", [], lambda c: _t(c, _repeated(c.s, c.sizes)), {"sizes": _repeat_sizes},
            lambda a, k: f"{a[0]}.repeat({k['sizes']})", view=False),
    TorchOpSpec("cat", "view", [In("x", T="T", rank=(1, 5), variadic=True, shape=_cat_shape)],
                lambda c: _t(c, [sum(t.shape[c.dim % c.r] for t in c.ins) if i == c.dim % c.r else x
                                 for i, x in enumerate(c.s)]),
                attrs={"dim": _dim}, arity=(2, 3), types={"T": ALL}, transfer=hull_iv(), vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.cat([{', '.join(a)}], {k['dim']})"),
    TorchOpSpec("stack", "view", [In("x", T="T", rank=(0, 4), variadic=True, shape=lambda c: c.s)],
                lambda c: _t(c, _unsq(c.s, c.dim, c.n)), attrs={"dim": lambda c: Int(-c.r - 1, c.r)}, arity=(2, 3),
                types={"T": ALL}, transfer=hull_iv(), vdomain=small_domain(1e4),
                emit=lambda a, k: f"torch.stack([{', '.join(a)}], {k['dim']})"),
    view_op("broadcast_like", [In("y", T="T1", shape=lambda c: c.bcast(c.s))],
            lambda c: _t(c, broadcast_shapes(c.s, c.ins[1].shape)), {},
            lambda a, k: f"{a[0]}.expand(torch.broadcast_shapes({a[0]}.shape, {a[1]}.shape))"),
    view_op("tile", [], lambda c: _t(c, _repeated((1,) * max(0, len(c.sizes) - c.r) + c.s,
                                                   [1] * max(0, c.r - len(c.sizes)) + c.sizes)),
            {"sizes": lambda c: Draw(lambda rng: [rng.choice((1, 2)) for _ in range(rng.randint(1, 5))])},
            lambda a, k: f"torch.tile({a[0]}, {k['sizes']})", view=False, rank=(0, 4)),
    view_op("pixel_shuffle", [], lambda c: _t(c, (*c.s[:-3], c.s[-3] // c.r_ ** 2, c.s[-2] * c.r_, c.s[-1] * c.r_)),
            {"r_": lambda c: Choice([r for r in (2, 3) if c.s[-3] % (r * r) == 0] or [1])},
            lambda a, k: f"F.pixel_shuffle({a[0]}, {k['r_']})", view=False, rank=(3, 5)),
    view_op("pixel_unshuffle", [], lambda c: _t(c, (*c.s[:-3], c.s[-3] * c.r_ ** 2, c.s[-2] // c.r_,
                                                     c.s[-1] // c.r_)),
            {"r_": lambda c: Choice([r for r in divisors(math.gcd(c.s[-2], c.s[-1])) if r <= 3])},
            lambda a, k: f"F.pixel_unshuffle({a[0]}, {k['r_']})", view=False, rank=(3, 5)),
]


def _swap(s, a, b):
    s = list(s)
    a, b = a % len(s), b % len(s)
    s[a], s[b] = s[b], s[a]
    return s


def _moved(s, src, dst):
    s = list(s)
    d = s.pop(src % len(s))
    s.insert(dst % (len(s) + 1), d)
    return s


def _unsq(s, dim, n=1):
    s = list(s)
    s.insert(dim % (len(s) + 1), n)
    return s


def _repeated(s, sizes):
    lead = len(sizes) - len(s)
    full = [1] * lead + list(s)
    return [a * b for a, b in zip(full, sizes, strict=True)]

# views and copies of empty tensors (not view/reshape/unflatten: their factorizations of 0 elements; not
# slice or unbind: steps over, and no results of, a dim of length 0; not as_strided, cat, stack; not
# pixel_(un)shuffle: eager returns an empty input's shape unchanged)
EMPTY_OK = frozenset(f"torch.{n}" for n in (
    "permute", "transpose", "t", "mT", "expand", "narrow", "select", "unfold", "diagonal", "movedim", "chunk",
    "split", "squeeze", "unsqueeze", "flatten", "contiguous", "channels_last", "clone", "flip", "roll", "repeat",
    "broadcast_like", "tile"))
for _s in SPECS:
    _s.empty = _s.op in EMPTY_OK
