"""Orders of migrated instances: OPERA's diversity-based prioritization and the baselines of its RQ2.

``prioritize(strategy, instances)`` returns the instance ids in execution order (each exactly once).

- ``opera`` (OPERA, section III-B): operator-instance diversity = operator score x parameter-setting
  diversity, selected greedily (the order of a lazily re-evaluated max-heap, computed with exact
  vectorized scores, see ``_greedy_rounds``).  The operator score
  ``(num_dll(op) + 1) / (num_dlc(op) + 1)`` favours operators the library's tests exercise often and
  the compiler's own frontend tests rarely (``num_dlc`` from the packaged TVM counts, see
  ``compiler_counts``).  The parameter-setting diversity of an instance is the fraction of its
  single-parameter and pairwise partition features (equivalence classes of each parameter value,
  see ``partition``) not covered by the instances of the same operator already selected.
- ``random``: a seeded permutation (OPERA without prioritization).
- ``fast``: FAST-pw of Miranda et al. (ICSE'18) on ``Instance.text()``: k-shingles, minhash, LSH.
- ``total-cov`` / ``additional-cov``: the classic white-box orders on frontend statement coverage.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter, deque
from collections.abc import Hashable, Sequence
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from dlcfuzz.migrate.instances import Instance

STRATEGIES = ("opera", "random", "fast", "total-cov", "additional-cov")
COVERAGE_STRATEGIES = ("total-cov", "additional-cov")

# ----------------------------------------------------------------------------------------------------
# Compiler-side counts (num_dlc)

_COUNT_FILES = {"onnx": "tvm_onnx_counts.json", "torch": "tvm_ep_counts.json"}


@cache
def _packaged_counts(library: str) -> dict[str, int]:
    if library not in _COUNT_FILES:
        raise ValueError(f"no compiler-side counts for library {library!r} (known: {', '.join(_COUNT_FILES)})")
    path = resources.files("dlcfuzz.migrate") / "data" / _COUNT_FILES[library]
    return {str(k): int(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}


def compiler_counts(library: str) -> dict[str, int]:
    """How many of TVM's own frontend tests exercise each operator (the packaged snapshot of apache/tvm
    5d4dc87, see ``dlcfuzz/migrate/data/README.md``): ONNX op type -> models for ``"onnx"``, aten base
    op name -> exported programs for ``"torch"``."""
    return dict(_packaged_counts(library))


# nn.Module class names spell activations and RNNs as acronyms; aten spells them as one word.
_ACRONYMS = re.compile(r"PReLU|RReLU|ReLU|GELU|SELU|CELU|SiLU|ELU|GLU|LSTM|GRU|RNN")
_NAMESPACES = ("linalg", "special", "fft", "nested", "sparse")
# Python-level names whose aten op is spelled differently (the aten name is tried after the given one)
_ATEN_ALIASES = {"cross_entropy": "cross_entropy_loss", "grid_sample": "grid_sampler",
                 "affine_grid": "affine_grid_generator", "rnn": "rnn_tanh"}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def compiler_op_names(library: str, op: str) -> list[str]:
    """Candidate spellings of ``op`` in the compiler-side counts, best first.

    ONNX: the op type itself.  torch (counts keyed by aten base name): ``torch.nn.functional.conv2d``,
    ``torch.conv2d`` and ``torch.Tensor.conv2d`` -> ``conv2d``; ``torch.linalg.svd`` -> ``linalg_svd``
    (aten's namespaced names; also ``special_``, ``fft_``); ``torch.nn.ConvTranspose2d`` ->
    ``convtranspose2d``, ``conv_transpose2d``; ``torch.nn.LeakyReLU`` -> ``leaky_relu``;
    ``torch.nn.BatchNorm2d`` -> ``batch_norm`` (dimension suffix dropped when nothing else matches);
    ``torch.Tensor.__rsub__`` -> ``rsub``, ``sub``; ``opinfo:nn.functional.conv2d:`` -> ``conv2d``;
    ``torch.ops.aten.add.Tensor`` -> ``add``."""
    if library != "torch":
        return [op]
    if op.startswith("opinfo:"):
        name = op.split(":")[1].removeprefix("torch.").removeprefix("nn.functional.")
        base = [name.replace(".", "_"), name.rsplit(".", 1)[-1]]
    else:
        parts = op.split(".")
        last = parts[-1]
        if "aten" in parts[:-1]:
            base = [parts[parts.index("aten") + 1]]
        elif last[:1].isupper():  # an nn.Module class
            base = [last.lower(), _snake(_ACRONYMS.sub(lambda m: m.group(0).capitalize(), last))]
        elif len(parts) >= 3 and parts[0] == "torch" and parts[1] in _NAMESPACES:
            base = [f"{parts[1]}_{last}", last]
        else:
            base = [last]
    out: list[str] = []
    for name in base:
        out.append(name)
        m = re.fullmatch(r"__(\w+?)__", name)
        if m:  # operator dunders: __and__ (counted as such), __rsub__ -> rsub -> sub, __iadd__ -> add_
            inner = m.group(1)
            out.append(inner)
            if inner[0] == "r" and len(inner) > 3:
                out.append(inner[1:])
            if inner[0] == "i" and len(inner) > 3:
                out.append(inner[1:] + "_")
    out += [_ATEN_ALIASES[name] for name in out if name in _ATEN_ALIASES]
    for name in list(out):
        stripped = re.sub(r"(?<=[a-z])[123]d$", "", name)  # batch_norm2d -> batch_norm
        if stripped != name:
            out.append(stripped)
    return list(dict.fromkeys(out))


def compiler_count(library: str, op: str, counts: dict[str, int]) -> int:
    """num_dlc(op): the count of the first candidate spelling found in ``counts``; 0 when none is."""
    for name in compiler_op_names(library, op):
        if name in counts:
            return int(counts[name])
    return 0


def operator_scores(instances: Sequence[Instance], counts: dict[str, dict[str, int]] | None = None,
                    ) -> dict[tuple[str, str], float]:
    """OPERA's operator score per (library, op): (num_dll + 1) / (num_dlc + 1).

    num_dll = instances of the op in this migrated set; num_dlc = the compiler-side count (``counts``
    per library overrides the packaged TVM snapshot).  The paper's ratio num_dll / num_dlc divides by
    zero for exactly the operators that matter most (never tested by the compiler) and gives 0/0 for
    none; add-one (Laplace) smoothing keeps every score finite and positive, keeps the order of
    num_dlc = 0 operators by num_dll, and changes the ratio little for well-tested operators."""
    dll = Counter((i.library, i.op) for i in instances)
    tables: dict[str, dict[str, int]] = {}
    scores = {}
    for (library, op), n in dll.items():
        if library not in tables:
            if counts is not None and library in counts:
                tables[library] = counts[library]
            else:
                tables[library] = _packaged_counts(library) if library in _COUNT_FILES else {}
        scores[(library, op)] = (n + 1) / (compiler_count(library, op, tables[library]) + 1)
    # A set migrated from several libraries: each library's scores are scaled to a maximum of 1, so that
    # one source's scale (ONNX node tests run 30 cases of one operator, OpInfo a few samples) does not
    # put all of its operators before the other's (OPERA prioritizes each frontend's own set).
    top: dict[str, float] = {}
    for (library, _), v in scores.items():
        top[library] = max(top.get(library, 0.0), v)
    if len(top) > 1:
        scores = {k: v / top[k[0]] for k, v in scores.items()}
    return scores


# ----------------------------------------------------------------------------------------------------
# Parameter partitions (OPERA's equivalence classes)

# Integers: OPERA's five subspaces (< -1, -1, 0, 1, > 1; -1 = inferred dimension / last axis, 0 = no
# padding / first axis, 1 = identity stride, scale, ...), plus two more for values outside int32:
# sentinels such as INT64_MAX ("to the end" in ONNX Slice, sys.maxsize in torch slicing) or INT64_MIN,
# where importers that narrow attributes to int32 go wrong.  Between 2 and 2**31 - 1 the magnitude has no
# special meaning for a frontend, so it stays one class.
INT_HUGE = 2**31
# Lists longer than this are partitioned by length class and the set of element classes, not per
# position: 8 covers every shape up to rank 8 and the per-axis lists of 4-d conv/pool (pads has 8 values).
LIST_POSITIONAL = 8
MAX_RANK = 5  # tensor rank classes 0, 1, 2, 3, 4, 5 and ">5": OPERA's seven (plus "none" when unknown)


def partition(value: Any) -> Hashable:
    """The equivalence class (subspace) of one non-tensor parameter value."""
    if value is None or isinstance(value, bool | str):
        return value  # a small set of concrete values: each value is its own class
    if isinstance(value, np.generic):
        return partition(value.item())
    if isinstance(value, int):
        if value >= INT_HUGE:
            return "i:huge"
        if value <= -INT_HUGE:
            return "i:-huge"
        if value < -1:
            return "i:neg"
        if value > 1:
            return "i:>1"
        return f"i:{value}"  # -1, 0, 1
    if isinstance(value, float):
        # OPERA's three (negative, zero, positive), plus nan and +-inf: special values, not magnitudes
        if math.isnan(value):
            return "f:nan"
        if math.isinf(value):
            return "f:inf" if value > 0 else "f:-inf"
        return "f:neg" if value < 0 else "f:0" if value == 0 else "f:pos"
    if isinstance(value, list | tuple):
        parts = [partition(v) for v in value]
        if len(parts) <= LIST_POSITIONAL:
            return ("list", len(parts), tuple(parts))  # shape-like: the length and each element's class
        return ("list", f">{LIST_POSITIONAL}", tuple(sorted(set(parts), key=repr)))
    if isinstance(value, dict):
        return ("dict", tuple((str(k), partition(v)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))))
    return str(value)


def tensor_partition(tensor: dict[str, Any]) -> Hashable:
    """A tensor's class: dtype x rank class (0..5, ">5"; "none" without a shape) x has a zero-sized
    dimension x has a size-1 dimension (the integer classes 0 and 1 of its dimensions; all other
    dimensions are "> 1")."""
    shape = tensor.get("shape")
    if shape is None:
        return ("tensor", tensor.get("dtype"), "none", None, None)
    rank: int | str = len(shape) if len(shape) <= MAX_RANK else f">{MAX_RANK}"
    return ("tensor", tensor.get("dtype"), rank, 0 in shape, 1 in shape)


def instance_singles(inst: Instance) -> list[tuple[str, Hashable]]:
    """The single features (key, class) of an instance, by key: tensors keyed by position ("t0", "t1",
    ...), parameters by name."""
    items: dict[str, Hashable] = {f"t{i}": tensor_partition(t) for i, t in enumerate(inst.tensors)}
    for name, value in inst.params.items():
        items[f"p:{name}" if name in items else name] = partition(value)
    return [(k, items[k]) for k in sorted(items)]


def instance_features(inst: Instance) -> set[Hashable]:
    """Single features (key, class) and pairwise features ((k1, c1), (k2, c2)) with k1 < k2."""
    singles = instance_singles(inst)
    return {*singles, *itertools.combinations(singles, 2)}


# ----------------------------------------------------------------------------------------------------
# Greedy "additional" selection in rounds (OPERA and additional-cov)


def _segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ranges [starts[i], starts[i] + lengths[i]) as one index array."""
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - offsets, lengths)


def _csr(rows: np.ndarray, cols: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(cols sorted by row, start of each row) of the pairs (rows[i], cols[i])."""
    by_row = np.argsort(rows, kind="stable")
    return cols[by_row], np.searchsorted(rows[by_row], np.arange(n_rows + 1))


def _greedy_rounds(rows: Sequence[tuple[Hashable, frozenset[int], float, int]], normalized: bool) -> list[int]:
    """Ids of ``rows`` = (group, feature ids, weight, id) in greedy order.

    Repeatedly selects the row with the highest score, ties by weight (descending) then id.  Score:
    weight x the number of its features not yet covered by the rows selected in the current round
    (feature ids are global: give each group its own ids to cover per group), as a fraction of its
    features when ``normalized``; with ``normalized``, a row without features scores its weight until a
    row of its group is selected in the round, then 0.  When every remaining row scores 0, a new round
    starts with nothing covered; if nothing scores even then, the rest follow by (weight desc, id).

    Rows with the same group and features always score the same and form one class (its rows are
    selected in id order).  This is the order a lazily re-evaluated max-heap produces (scores only fall
    within a round), but with the scores kept exact and vectorized: features that occur in exactly the
    same classes are merged into weighted blocks, an inverted index (block -> classes) lowers the gain of
    the classes a selection affects, and each step takes the maximum over the classes.  A lazy heap
    must pop and re-evaluate every remaining row to see that a round is over, which on coverage with
    many rounds is quadratic in Python; here a step is a few O(classes) numpy passes."""
    by_key: dict[tuple[Hashable, frozenset[int]], int] = {}
    members: list[deque[int]] = []
    groups: list[Hashable] = []
    feats: list[frozenset[int]] = []
    weights: list[float] = []
    for group, fs, weight, iid in sorted(rows, key=lambda r: r[3]):
        c = by_key.get((group, fs))
        if c is None:
            c = by_key[(group, fs)] = len(members)
            members.append(deque())
            groups.append(group)
            feats.append(fs)
            weights.append(float(weight))
        members[c].append(iid)
    n_cls = len(members)
    if n_cls == 0:
        return []
    group_ids: dict[Hashable, int] = {}
    group_of = np.array([group_ids.setdefault(g, len(group_ids)) for g in groups], dtype=np.int64)
    w = np.array(weights, dtype=np.float64)
    head = np.array([m[0] for m in members], dtype=np.int64)

    # class-feature pairs -> blocks of the features that occur in the same classes (hash of the class set)
    lens = np.fromiter((len(f) for f in feats), dtype=np.int64, count=n_cls)
    pair_c = np.repeat(np.arange(n_cls, dtype=np.int64), lens)
    pair_f = np.fromiter(itertools.chain.from_iterable(feats), dtype=np.int64, count=int(lens.sum()))
    pc = pb = np.zeros(0, dtype=np.int64)
    b_weight = np.zeros(0, dtype=np.float64)
    if pair_f.size:
        _, f_inv = np.unique(pair_f, return_inverse=True)
        f_inv = f_inv.reshape(-1)
        n_feat = int(f_inv.max()) + 1
        bits = np.random.default_rng(0x0BE7A).bit_generator.random_raw((2, n_cls))
        h1 = np.zeros(n_feat, dtype=np.uint64)
        h2 = np.zeros(n_feat, dtype=np.uint64)
        np.add.at(h1, f_inv, bits[0][pair_c])
        np.add.at(h2, f_inv, bits[1][pair_c])
        cnt = np.bincount(f_inv, minlength=n_feat).astype(np.uint64)
        _, block_of_f = np.unique(np.stack([h1, h2, cnt], 1), axis=0, return_inverse=True)
        block_of_f = block_of_f.reshape(-1)
        n_blocks = int(block_of_f.max()) + 1
        b_weight = np.bincount(block_of_f, minlength=n_blocks).astype(np.float64)
        cb = np.unique(pair_c * n_blocks + block_of_f[f_inv])
        pc, pb = cb // n_blocks, cb % n_blocks
    # what selecting a class covers: its blocks, plus (normalized) the pseudo-block of its group that
    # stands for "this op was selected in the round", the only block of the group's featureless class
    cover_c, cover_b = pc, pb
    if normalized:
        empty = np.array([c for c in range(n_cls) if not feats[c]], dtype=np.int64)
        if empty.size:
            pseudo = np.full(len(group_ids), -1, dtype=np.int64)
            pseudo[group_of[empty]] = len(b_weight) + np.arange(empty.size)
            b_weight = np.concatenate([b_weight, np.ones(empty.size)])
            pc, pb = np.concatenate([pc, empty]), np.concatenate([pb, pseudo[group_of[empty]]])
            in_group = np.flatnonzero(pseudo[group_of] >= 0)
            cover_c = np.concatenate([cover_c, in_group])
            cover_b = np.concatenate([cover_b, pseudo[group_of[in_group]]])
    cover, cover_start = _csr(cover_c, cover_b, n_cls)
    b_cls, b_start = _csr(pb, pc, len(b_weight))
    b_size = np.diff(b_start)
    total = np.bincount(pc, weights=b_weight[pb], minlength=n_cls)

    gain = total.copy()
    score = w * (gain / np.maximum(total, 1.0)) if normalized else gain.copy()
    dead = np.zeros(n_cls, dtype=bool)
    covered = np.zeros(len(b_weight), dtype=bool)
    order: list[int] = []
    selected_in_round = 0
    while True:
        best = score.max()
        if best < 0:  # every class exhausted
            break
        if best == 0:
            if selected_in_round == 0:  # nothing scores even in a fresh round: the rest as they tie
                rest = sorted((-w[c], m) for c in np.flatnonzero(~dead) for m in members[c])
                order.extend(m for _, m in rest)
                break
            covered[:] = False
            gain = total.copy()
            score = w * (gain / np.maximum(total, 1.0)) if normalized else gain.copy()
            score[dead] = -1.0
            selected_in_round = 0
            continue
        top = np.flatnonzero(score == best)
        if top.size > 1:  # ties: the higher weight (op score), then the lower id
            top = top[w[top] == w[top].max()]
        c = int(top[np.argmin(head[top])]) if top.size > 1 else int(top[0])
        order.append(members[c].popleft())
        selected_in_round += 1
        blocks = cover[cover_start[c]:cover_start[c + 1]]
        new = blocks[~covered[blocks]]
        if new.size:
            covered[new] = True
            affected = b_cls[_segments(b_start[new], b_size[new])]
            np.subtract.at(gain, affected, np.repeat(b_weight[new], b_size[new]))
            if normalized:  # w * (gain / total), as computed at the start of a round
                score[affected] = w[affected] * (gain[affected] / np.maximum(total[affected], 1.0))
            else:
                score[affected] = gain[affected]
            score[affected[dead[affected]]] = -1.0
        if members[c]:
            head[c] = members[c][0]
        else:
            dead[c] = True
            score[c] = -1.0
    return order


def opera_order(instances: Sequence[Instance], counts: dict[str, dict[str, int]] | None = None) -> list[int]:
    """OPERA's order.  Decisions the paper leaves open:

    - diversity is measured against the instances of the same operator selected so far *in the current
      round*; an instance without any feature (no tensors, no parameters) has diversity 1 until its op
      is selected once in the round, then 0;
    - when every remaining instance scores 0 (each only repeats classes its op already covered), a new
      round starts with nothing covered, so the remaining instances are again ordered by op score x
      diversity.  A repeat of covered classes still differs in concrete values and may find a bug, and
      restarting keeps "something new for some op before any repeat" and, among repeats, the operator
      priority (the same reset FAST and additional coverage use);
    - ties: higher op score first, then lower id."""
    scores = operator_scores(instances, counts)
    interned: dict[Hashable, dict[Hashable, int]] = {}
    counter = itertools.count()
    rows = []
    for inst in instances:
        group = (inst.library, inst.op)
        ids = interned.setdefault(group, {})
        singles = [ids[f] if f in ids else ids.setdefault(f, next(counter)) for f in instance_singles(inst)]
        # a pair of (group-specific) single ids as one int above every single id
        pairs = [(a + 1) << 32 | b for a, b in itertools.combinations(singles, 2)]
        rows.append((group, frozenset(singles + pairs), scores[group], inst.id))
    return _greedy_rounds(rows, normalized=True)


def total_coverage_order(ids: Sequence[int], coverage: dict[int, set[str]]) -> list[int]:
    """Descending by covered statements, ties by id; instances without coverage last, by id."""
    have = sorted((i for i in ids if i in coverage), key=lambda i: (-len(coverage[i]), i))
    return have + sorted(i for i in ids if i not in coverage)


def additional_coverage_order(ids: Sequence[int], coverage: dict[int, set[str]]) -> list[int]:
    """Greedy by statements not yet covered (ties by id); when no remaining instance adds any, the
    covered set is reset (the classic "additional" strategy); instances covering nothing follow by id,
    then the instances without coverage, by id."""
    interned: dict[str, int] = {}
    rows = [(None, frozenset(interned[s] if s in interned else interned.setdefault(s, len(interned))
                             for s in coverage[i]), 1.0, i) for i in ids if i in coverage]
    return _greedy_rounds(rows, normalized=False) + sorted(i for i in ids if i not in coverage)


# ----------------------------------------------------------------------------------------------------
# FAST (Miranda et al., ICSE'18), black-box FAST-pw

# The released FAST implementation's parameters (py/prioritize.py: k, n, r, b = 5, 10, 1, 10), which
# OPERA reused: 5-shingles, 10 hash functions in 10 bands of 1 row.
FAST_K, FAST_BANDS, FAST_ROWS = 5, 10, 1
_PRIME = 2**31 - 1  # universal hashing h(x) = (a x + b) mod p over 31-bit shingle ids
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: 40-bit shingle -> well-spread 31 bits
_HASH_SEED = 0xFA57  # the hash family is fixed (as FAST's xxhash seeds); ``seed`` only breaks ties


def minhash_signatures(texts: Sequence[str], n_hashes: int, k: int = FAST_K) -> np.ndarray:
    """(len(texts), n_hashes) minhash signatures of the byte k-shingles (k <= 8) of each text.

    A shingle is its k UTF-8 bytes read as one integer (exact, no salted ``hash()``), mixed to 31 bits;
    texts shorter than k are padded with NULs to one shingle.  Fully vectorized over all texts."""
    if not 1 <= k <= 8:
        raise ValueError(f"shingle size k must be in 1..8, got {k}")
    data = [t.encode("utf-8").ljust(k, b"\0") for t in texts]
    if not data:
        return np.zeros((0, n_hashes), dtype=np.int64)
    lengths = np.fromiter((len(d) for d in data), dtype=np.int64, count=len(data))
    buf = np.frombuffer(b"".join(data), dtype=np.uint8)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    windows = lengths - k + 1
    win_start = np.concatenate(([0], np.cumsum(windows)[:-1]))
    pos = np.arange(int(windows.sum()), dtype=np.int64) + np.repeat(starts - win_start, windows)
    val = np.zeros(len(pos), dtype=np.uint64)
    for t in range(k):
        val = (val << np.uint64(8)) | buf[pos + t].astype(np.uint64)
    x = ((val * _MIX) >> np.uint64(33)) % np.uint64(_PRIME)
    rng = np.random.default_rng(_HASH_SEED)
    a = rng.integers(1, _PRIME, n_hashes, dtype=np.uint64)
    b = rng.integers(0, _PRIME, n_hashes, dtype=np.uint64)
    sig = np.empty((len(data), n_hashes), dtype=np.int64)
    for j in range(n_hashes):
        sig[:, j] = np.minimum.reduceat((a[j] * x + b[j]) % np.uint64(_PRIME), win_start)
    return sig


def _bucket_ids(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LSH buckets of one band (``keys``: (n, rows)): the bucket id of each test and the distinct keys."""
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int32), uniq


def fast_order(texts: Sequence[str], *, seed: int = 0, k: int = FAST_K, bands: int = FAST_BANDS,
               rows: int = FAST_ROWS) -> list[int]:
    """FAST-pw: indices into ``texts`` in prioritized order.

    The tests selected since the last reset are represented by one signature U (the elementwise min of
    their signatures = the signature of the union of their shingles).  Candidates are the remaining
    tests that share no LSH bucket with U (no band whose ``rows`` values all equal U's); among them the
    one farthest from U by estimated Jaccard distance (fewest signature values equal to U's) is
    selected, ties by a seeded random rank (FAST shuffles the suite and picks the first test at
    random).  When no candidate remains, U is reset to the empty set's signature.

    Each step compares U's bucket per band with every remaining test's (one vectorized pass over the
    band-major bucket ids, O(remaining x bands)); selected tests are dropped from the arrays whenever
    they are half of them.  With r = 1 (FAST's default) a candidate shares no value with U at all, so
    every candidate is at estimated distance 1 and the seeded rank decides."""
    n = len(texts)
    if n == 0:
        return []
    n_hashes = bands * rows
    sig = minhash_signatures(texts, n_hashes, k)
    band_ids, band_keys = zip(*(_bucket_ids(sig[:, b * rows:(b + 1) * rows]) for b in range(bands)), strict=True)
    bucket = np.stack(band_ids)  # (bands, n): bucket of each test per band
    lookup = [{tuple(key): i for i, key in enumerate(keys.tolist())} for keys in band_keys] if rows > 1 else []
    # arrays in the seeded random rank order, so that the first candidate is the tie-break winner
    idx = np.random.default_rng([seed, _HASH_SEED]).permutation(n)  # not random's permutation of the seed
    sig, bucket = sig[idx], np.ascontiguousarray(bucket[:, idx])  # band-major rows: fast compares
    alive = np.ones(n, dtype=bool)
    u = np.full(n_hashes, _PRIME, dtype=np.int64)  # the empty set's signature (above every hash value)
    u_bucket = np.full(bands, -1, dtype=np.int32)  # U's bucket per band (-1: none, or U empty)
    order: list[int] = []
    n_dead = 0
    fresh = True  # U is the empty set's signature
    for _ in range(n):
        s = -1
        if not fresh:
            ok = alive & ~(bucket == u_bucket[:, None]).any(0)  # shares no bucket with U (-1 matches nothing)
            if rows == 1:  # a candidate shares no value with U: all at distance 1, the first in rank wins
                s = int(ok.argmax())
                s = s if ok[s] else -1
            else:
                cand = np.flatnonzero(ok)
                if cand.size:  # fewest values equal to U's (largest distance), then rank
                    s = int(cand[np.argmin((sig[cand] == u).sum(1))])
        if s < 0:  # every remaining test shares a bucket with U (or U is empty): reset
            u[:] = _PRIME
            u_bucket[:] = -1
            s = int(alive.argmax())
        fresh = False
        order.append(int(idx[s]))
        alive[s] = False
        n_dead += 1
        np.minimum(u, sig[s], out=u)
        if rows == 1:
            u_bucket = np.where(u == sig[s], bucket[:, s], u_bucket)
        else:
            for b in range(bands):
                u_bucket[b] = lookup[b].get(tuple(u[b * rows:(b + 1) * rows].tolist()), -1)
        if n_dead * 2 > len(idx) and n_dead < len(idx):
            keep = np.flatnonzero(alive)
            sig, bucket, alive, idx = sig[keep], np.ascontiguousarray(bucket[:, keep]), alive[keep], idx[keep]
            n_dead = 0
    return order


# ----------------------------------------------------------------------------------------------------


def prioritize(strategy: str, instances: Sequence[Instance], *, seed: int = 0,
               coverage: dict[int, set[str]] | None = None,
               counts: dict[str, dict[str, int]] | None = None) -> list[int]:
    """Instance ids in execution order (every instance exactly once).

    ``coverage`` (instance id -> covered "file:line" keys) is required by the coverage strategies;
    instances without an entry go last, by id.  ``counts`` (library -> op -> compiler-side count)
    overrides the packaged TVM counts for opera.  ``seed`` drives random and fast's tie-breaking."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown prioritization strategy {strategy!r} (choose from {', '.join(STRATEGIES)})")
    ordered = sorted(instances, key=lambda i: i.id)
    ids = [i.id for i in ordered]
    if len(set(ids)) != len(ids):
        raise ValueError("instance ids must be unique to prioritize (store the instances first)")
    if strategy in COVERAGE_STRATEGIES and coverage is None:
        raise ValueError(f"strategy {strategy!r} needs frontend coverage (coverage=instance id -> statements)")
    if strategy == "opera":
        return opera_order(ordered, counts)
    if strategy == "random":
        return [ids[j] for j in np.random.default_rng(seed).permutation(len(ids))]
    if strategy == "fast":
        return [ids[j] for j in fast_order([i.text() for i in ordered], seed=seed)]
    assert coverage is not None
    if strategy == "total-cov":
        return total_coverage_order(ids, coverage)
    return additional_coverage_order(ids, coverage)
