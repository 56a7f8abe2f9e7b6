"""The share of generated torch-native programs that eager torch accepts (the rest are eager's own
refusals, counted as the generator's declines), and the top refusal messages.

    python benchmarks/torch_program_validity.py [--programs 300] [--ops 5:10] [--seed 0] [--backward]

Each program is written as source (``export.torch_program``), built, and run once eagerly on its
``make_inputs()`` (forward; with ``--backward``, also a backward pass where the program asks for one).
Prints the share accepted, the refusals grouped by message (numbers and shapes normalized away), and
how many programs have a runtime input with a dim of length 0 and of length 1, and the data-dependent
and control-flow calls they make.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter

import torch

from dlcfuzz.export.torch_program import build, to_program_source
from dlcfuzz.gen.torch_program import TorchProgramGenerator
from dlcfuzz.seeds import derive_seed

DYNAMIC_OPS = ("torch.nonzero", "torch.unique", "torch.masked_select", "torch.item", "torch.cond")


def _normalized(msg: str) -> str:
    first = (msg.strip().splitlines() or [""])[0]
    return re.sub(r"\d+", "N", first)[:140]


def _run(graph, backward: bool) -> None:
    ns = build(to_program_source(graph))
    args = ns["make_inputs"]()
    model = ns["Model"]()
    if not (backward and graph.meta.get("backward")):
        with torch.no_grad():
            model(*args)
        return
    outs = model(*args)
    floats = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    if floats:
        torch.autograd.backward(floats, [torch.ones_like(o) for o in floats])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--programs", type=int, default=300)
    p.add_argument("--ops", default="5:10")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backward", action="store_true")
    a = p.parse_args()
    lo, hi = (int(x) for x in a.ops.split(":"))
    torch.set_num_threads(1)
    gen = TorchProgramGenerator(op_range=(lo, hi))
    refused: Counter[str] = Counter()
    empty = one = 0
    calls: Counter[str] = Counter()
    t0 = time.perf_counter()
    gen_s = 0.0
    for i in range(a.programs):
        t = time.perf_counter()
        g = gen.generate(derive_seed(a.seed, i))
        gen_s += time.perf_counter() - t
        shapes = [v.type.shape for v in g.inputs if not v.pinned]
        empty += any(0 in s for s in shapes)
        one += any(1 in s for s in shapes)
        for n in g.nodes:
            if n.op in DYNAMIC_OPS:
                calls[n.op] += 1
        try:
            _run(g, a.backward)
        except Exception as e:  # eager's own refusal: the generator's decline
            refused[f"{type(e).__name__}: {_normalized(str(e))}"] += 1
    n = a.programs
    ok = n - sum(refused.values())
    print(f"programs {n} of {lo}-{hi} calls: eager accepts {ok} ({100 * ok / n:.1f}%), "
          f"generation {gen_s:.1f} s, all {time.perf_counter() - t0:.1f} s")
    print(f"programs with an input dim of length 0: {empty} ({100 * empty / n:.1f}%), "
          f"of length 1: {one} ({100 * one / n:.1f}%)")
    print("data-dependent and control-flow calls: " + (", ".join(f"{k} {v}" for k, v in calls.most_common())
                                                        or "none"))
    for msg, k in refused.most_common(10):
        print(f"  {k:4d}  {msg}")


if __name__ == "__main__":
    main()
