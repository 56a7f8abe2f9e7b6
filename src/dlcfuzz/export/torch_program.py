"""A torch-native program (a Graph of ``spec.torch`` operators, ``gen/torch_program.py``) as standalone
Python source that needs only torch:

- ``Model``: a ``torch.nn.Module`` whose ``forward`` makes the program's calls in order (views, in-place
  writes through them, multi-output calls unpacked), with the program's float constants as parameters
  and its other constants as buffers;
- ``make_inputs(seed=0, sizes=None)``: the argument tuple, each runtime tensor in the layout the
  program chose (contiguous, channels_last, transposed, step-sliced, offset, expanded: stride 0), its
  values drawn in the range that keeps the program defined; pinned operands (index tensors) hold their
  exact values.  ``sizes`` maps a dimension length to another for every runtime input (a second call
  at other sizes, for dynamic shapes);
- ``NOT_COMPARED`` (outputs that are indices among ties), ``MUTATED`` (argument positions written in
  place), ``BACKWARD`` and ``DYNAMIC`` (what the program asks of the runner);
- a ``__main__`` block that runs the model eagerly and prints each output's shape, dtype and strides.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from dlcfuzz.ir import CONST_KIND, Graph, Value
from dlcfuzz.ir.hints import value_range
from dlcfuzz.spec.torch import TORCH_REGISTRY
from dlcfuzz.spec.torch.base import is_float

PROGRAM_MODULE = "dlcfuzz_program"
# calls that return a sequence of tensors even when it holds one
SEQUENCE_OPS = frozenset({"torch.chunk", "torch.split", "torch.unbind"})

_HELPERS = '''

def _values(shape, dtype, lo, hi, nonzero, g):
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if dtype.is_floating_point:
        t = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
        if nonzero:
            t = torch.where(t.abs() < 0.1, torch.full_like(t, 0.5), t)
        return t.to(dtype)
    t = torch.randint(int(lo), int(hi) + 1, shape, generator=g, dtype=torch.int64)
    if nonzero:
        t = torch.where(t == 0, torch.full_like(t, int(hi) or int(lo) or 1), t)
    return t.to(dtype)


def _make(shape, dtype, lo, hi, nonzero, layout, g, sizes=None):
    """A tensor of ``shape`` in ``layout`` (its strides, not its values, differ between layouts)."""
    shape = [sizes.get(d, d) if sizes else d for d in shape]
    kind = layout.get("kind", "contiguous")
    store = list(shape)
    if kind == "transposed":
        store = [shape[p] for p in layout["perm"]]
    elif kind == "sliced":
        store[layout["dim"]] = shape[layout["dim"]] * layout["step"]
    elif kind == "offset":
        store[0] = shape[0] + 1
    elif kind == "expanded":
        for d in layout["dims"]:
            store[d] = 1
    t = _values(store, dtype, lo, hi, nonzero, g)
    if kind == "transposed":
        inverse = sorted(range(len(store)), key=lambda i: layout["perm"][i])
        t = t.permute(inverse)
    elif kind == "channels_last":
        t = t.contiguous(memory_format=torch.channels_last if t.dim() == 4 else torch.channels_last_3d)
    elif kind == "sliced":
        t = t[(slice(None),) * layout["dim"] + (slice(None, None, layout["step"]),)]
    elif kind == "offset":
        t = t[1:]
    elif kind == "expanded":
        t = t.expand(shape)
    return t
'''

_MAIN = '''

if __name__ == "__main__":
    outputs = Model()(*make_inputs())
    for i, o in enumerate(outputs):
        print(i, tuple(o.shape), o.dtype, o.stride())
'''


def _literal(a: np.ndarray, dtype: str) -> str:
    data = a.astype(np.float64 if is_float(dtype) else a.dtype).tolist() if dtype != "bool" else a.tolist()
    if is_float(dtype):
        data = _floats(data)
    return f"torch.tensor({data!r}, dtype=torch.{dtype})"


def _floats(x: Any) -> Any:
    if isinstance(x, list):
        return [_floats(v) for v in x]
    return float(np.float32(x))


def _input_expr(v: Value, layout: dict) -> str:
    if v.data is not None:  # a pinned operand: exactly its value
        return _literal(v.data, v.type.dtype)
    lo, hi = value_range(v.type, v.hint)
    nonzero = bool(v.hint and v.hint.get("nonzero"))
    return (f"_make({list(v.type.shape)}, torch.{v.type.dtype}, {lo!r}, {hi!r}, {nonzero}, {layout!r}, g, sizes)")


def _call_lines(op: str, inputs: list[str], outputs: list[str], attrs: dict[str, Any], names: dict[str, str],
                indent: str, plain: bool = False) -> list[str]:
    """One call's lines (its outputs bound by name in ``names``); torch.cond's (``attrs["branches"]``) start
    with its two branch functions, whose parameters are its operands after the predicate's.  ``plain``: the
    call spelled without its mechanism (``TorchOpSpec.plain``)."""
    spec = TORCH_REGISTRY[op]
    emit = spec.plain if plain and spec.plain is not None else spec.emit
    assert emit is not None
    lines: list[str] = []
    if "branches" in attrs:
        params = [x for x in inputs[1:]]
        for side, calls, result in zip(("true", "false"), attrs["branches"], attrs["results"], strict=True):
            local = {x: x for x in params}
            lines.append(f"{indent}def {attrs['fn']}_{side}({', '.join(params)}):")
            for c in calls:
                lines += _call_lines(c["op"], c["inputs"], c["outputs"], c["attrs"], local, indent + "    ")
            # torch.cond takes branch results of one layout: both contiguous
            lines.append(f"{indent}    return ({local[result]}.contiguous(),)")
    args = [names[x] if x else "" for x in inputs]
    expr = emit(args, attrs)
    if len(outputs) == 1 and op not in SEQUENCE_OPS and not attrs.get("as_tuple") and "branches" not in attrs:
        lines.append(f"{indent}{outputs[0]} = {expr}  # {op}")
    else:
        lines.append(f"{indent}{', '.join(outputs)}, = {expr}  # {op}")
    for o in outputs:
        names[o] = o
    return lines


def to_program_source(graph: Graph) -> str:
    """The program as standalone source (see the module doc)."""
    consts = [v for v in graph.values.values() if v.kind == CONST_KIND]
    inputs = graph.inputs
    names: dict[str, str] = {v.name: v.name for v in inputs}
    init: list[str] = []
    for v in consts:
        attr = f"self.{v.name}"
        names[v.name] = attr
        assert v.data is not None
        if is_float(v.type.dtype):
            init.append(f"        {attr} = torch.nn.Parameter({_literal(v.data, v.type.dtype)})")
        else:
            init.append(f"        self.register_buffer({v.name!r}, {_literal(v.data, v.type.dtype)})")
    body: list[str] = []
    plain = set(graph.meta.get("plain", []))
    for n in graph.nodes:
        body += _call_lines(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), names, "        ",
                            bool(n.outputs) and n.outputs[0] in plain)
    outs = ", ".join(graph.outputs)
    body.append(f"        return ({outs},)")
    layouts = graph.meta.get("layouts", {})
    imports = sorted({line for n in graph.nodes for line in TORCH_REGISTRY[n.op].imports})
    arg_names = [v.name for v in inputs]
    not_compared = [i for i, o in enumerate(graph.outputs) if o in set(graph.meta.get("ties", []))]
    mutated = [i for i, v in enumerate(inputs) if v.name in set(graph.meta.get("mutated", []))]
    lines = [
        f'"""dlcfuzz torch program (seed {graph.meta.get("seed", 0)}): {len(graph.nodes)} calls."""',
        "",
        "import torch",
        "import torch.nn.functional as F",
        *imports,
        "",
        f"NOT_COMPARED = {not_compared!r}  # outputs that are indices among ties",
        f"MUTATED = {mutated!r}  # argument positions the program writes in place",
        f"BACKWARD = {bool(graph.meta.get('backward'))!r}",
        f"DYNAMIC = {bool(graph.meta.get('dynamic'))!r}",
        "",
        "",
        "class Model(torch.nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        *init,
        "",
        f"    def forward(self, {', '.join(arg_names)}):" if arg_names else "    def forward(self):",
        *body,
        _HELPERS,
        "",
        "def make_inputs(seed=0, sizes=None):",
        "    g = torch.Generator().manual_seed(seed)",
        "    return (",
        *(f"        {_input_expr(v, layouts.get(v.name, {}))}," for v in inputs),
        "    )",
        _MAIN,
    ]
    return "\n".join(lines)


def build(source: str) -> dict[str, Any]:
    """Executes program source into a fresh module's namespace (Model, make_inputs, ...).  The module is
    ``sys.modules["dlcfuzz_program"]`` (the latest built): Dynamo imports a traced function's module by its
    name to read its globals (torch.cond's branches, in eager torch too)."""
    module = types.ModuleType(PROGRAM_MODULE)
    sys.modules[PROGRAM_MODULE] = module
    exec(compile(source, "<dlcfuzz program>", "exec"), module.__dict__)
    return module.__dict__
