"""Write a dlcfuzz Graph directly as a TVM Relax IRModule (BlockBuilder), not via the ONNX frontend.

Structure (HirGen §3.2, Algorithm 2): with a ``Layout``, the graph's nodes, in topological order,
are cut into consecutive segments; each segment becomes a global function whose parameters are
the tensors it reads from earlier code and whose result is a tuple of the tensors later code (or
the graph's outputs) reads; ``main`` calls the functions in order and takes the tuples apart
with tuple indexing.  Each function body is a dataflow block or plain (non-dataflow) bindings.
Runtime graph inputs are ``main``'s parameters in graph order; initializers and constants are
``relax.const`` (pinned runtime inputs: see ``to_relax``).  Operators are translated by the table
in ``export/relax_ops.py``.
"""

from __future__ import annotations

import contextlib
import random
import re
from dataclasses import dataclass, field
from typing import Any

from dlcfuzz.export.relax_ops import OPS, Call, unsupported_call
from dlcfuzz.ir import CONST_KIND, Graph, TensorType


class RelaxExportError(ValueError):
    """The graph holds an operator the Relax table lacks, or one it cannot express."""


@dataclass
class Layout:
    """How the graph is laid out in functions: ``cuts`` are node indices where a new function
    starts (empty: everything in ``main``); ``dataflow[k]`` says whether function k's body is a
    dataflow block (the last entry is ``main``'s)."""

    cuts: list[int] = field(default_factory=list)
    dataflow: list[bool] = field(default_factory=lambda: [True])

    def to_dict(self) -> dict[str, Any]:
        return {"cuts": self.cuts, "dataflow": self.dataflow}


def random_layout(g: Graph, rng: random.Random, split_rate: float = 0.5, dataflow_rate: float = 0.7) -> Layout:
    """With probability ``split_rate``, 1-3 cut points (graphs of >= 2 nodes); each function's
    body is a dataflow block with probability ``dataflow_rate``."""
    cuts: list[int] = []
    if len(g.nodes) >= 2 and rng.random() < split_rate:
        k = rng.randint(1, min(3, len(g.nodes) - 1))
        cuts = sorted(rng.sample(range(1, len(g.nodes)), k))
    return Layout(cuts, [rng.random() < dataflow_rate for _ in range(len(cuts) + 2)])


def untranslated(ops: set[str]) -> list[str]:
    """The operators among ``ops`` that the table has no Relax translation for: a graph with one of
    them is refused whatever its types and attributes."""
    return sorted(set(ops) - OPS.keys())


def supported(g: Graph) -> str | None:
    """Why the graph cannot be written as Relax and run by TVM (None: it can): an operator the
    table lacks, or a call it refuses (a dtype TVM has no kernel for, a form Relax cannot express)."""
    missing = untranslated({n.op for n in g.nodes})
    if missing:
        return f"no Relax translation for {', '.join(missing)}"
    for n in g.nodes:
        why = unsupported_call(n.op, [g.values[x].type if x else None for x in n.inputs], n.attrs)
        if why:
            return why
    return None


def struct_info(t: TensorType):
    from tvm.script import relax as R

    return R.Tensor(t.shape, t.dtype)


def to_relax(g: Graph, layout: Layout | None = None):
    """The graph as an IRModule with ``main`` (and ``f0``, ``f1``, ... per the layout)."""
    import tvm  # noqa: F401 -- registers the relax ops
    from tvm import relax

    why = supported(g)
    if why:
        raise RelaxExportError(why)
    layout = layout or Layout()
    bb = relax.BlockBuilder()
    # pinned runtime inputs (a shape, axes ... fed at run time, always the value they hold) stay main's
    # parameters, and their values are also known here: a translation that needs one at build time
    # (Call.need) bakes it in, one that takes a tensor reads main's parameter, and a function of the
    # layout gets it as a constant (TVM's ONNX frontend is what meets them as runtime operands)
    consts = {v.name: v.data for v in g.values.values() if v.kind == CONST_KIND or v.pinned}
    bounds = [0, *layout.cuts, len(g.nodes)]
    segments = [list(range(bounds[i], bounds[i + 1])) for i in range(len(bounds) - 1)]
    if len(segments) == 1:  # no cuts: every node in main
        segments = []
    later_reads = _later_reads(g, segments)
    funcs = []  # (global var, parameter value names, result value names)
    for k, seg in enumerate(segments):
        defined = {o for i in seg for o in g.nodes[i].outputs}
        params = sorted({x for i in seg for x in g.nodes[i].inputs if x and x not in defined and x not in consts},
                        key=_order(g))
        results = [o for i in seg for o in g.nodes[i].outputs if o in later_reads[k]]
        env = {x: relax.Var(x, struct_info(g.values[x].type)) for x in params}
        with bb.function(f"f{k}", [env[x] for x in params]):
            outs = _body(bb, g, seg, env, consts, results, layout.dataflow[k])
            bb.emit_func_output(relax.Tuple(outs))
        funcs.append((bb.get().get_global_var(f"f{k}"), params, results))

    inputs = [v.name for v in g.inputs]
    env = {x: relax.Var(x, struct_info(g.values[x].type)) for x in inputs}
    with bb.function("main", [env[x] for x in inputs]):
        with _block(bb, layout.dataflow[-1]):
            for gv, params, results in funcs:
                t = _emit(bb, relax.Call(gv, [env[x] for x in params]), layout.dataflow[-1], False)
                for j, name in enumerate(results):
                    env[name] = _emit(bb, relax.TupleGetItem(t, j), layout.dataflow[-1], False)
            rest = range(len(g.nodes)) if not funcs else []
            outs = _emit_nodes(bb, g, rest, env, consts, layout.dataflow[-1], g.outputs)
            outs = [outs.get(o, env.get(o)) for o in g.outputs]
            if layout.dataflow[-1]:
                outs = [bb.emit_output(o) for o in outs]
        bb.emit_func_output(outs[0] if len(outs) == 1 else relax.Tuple(outs))
    return bb.get()


def _order(g: Graph):
    index = {name: i for i, name in enumerate(g.values)}
    return lambda name: index[name]


def _later_reads(g: Graph, segments: list[list[int]]) -> list[set[str]]:
    """Per segment: the values defined before its end that later segments or the outputs read."""
    reads: list[set[str]] = []
    for k in range(len(segments)):
        after = {x for seg in segments[k + 1:] for i in seg for x in g.nodes[i].inputs if x}
        reads.append(after | set(g.outputs))
    return reads


@contextlib.contextmanager
def _block(bb, dataflow: bool):
    if dataflow:
        with bb.dataflow():
            yield
    else:
        yield


def _emit(bb, expr, dataflow: bool, output: bool):
    return bb.emit_output(expr) if dataflow and output else bb.emit(expr)


def _body(bb, g: Graph, seg: list[int], env: dict, consts: dict, results: list[str], dataflow: bool) -> list:
    with _block(bb, dataflow):
        made = _emit_nodes(bb, g, seg, env, consts, dataflow, results)
        outs = [made[r] for r in results]
        if dataflow:
            outs = [bb.emit_output(o) for o in outs]
    return outs


def _emit_nodes(bb, g: Graph, seg, env: dict, consts: dict, dataflow: bool, keep: list[str]) -> dict:
    """Emits the nodes' calls; returns value name -> expression for every output produced."""
    from tvm import relax

    made: dict[str, Any] = {}
    for i in seg:
        node = g.nodes[i]
        args = []
        for x in node.inputs:
            if not x:
                args.append(None)
            elif x in env:
                args.append(env[x])
            else:
                args.append(relax.const(consts[x], consts[x].dtype.name))
        call = Call(args, [g.values[x].type if x else None for x in node.inputs],
                    [consts.get(x) if x else None for x in node.inputs], node.attrs,
                    [g.values[o].type for o in node.outputs], g.opset)
        try:
            outs = OPS[node.op](call)
        except (KeyError, NotImplementedError) as e:
            raise RelaxExportError(f"{node.op}: {e}") from None
        for name, expr in zip(node.outputs, outs, strict=True):
            v = bb.emit(expr)
            t = g.values[name].type
            # a shape that follows from values (NonZero, Unique ...) is symbolic in Relax, or static and
            # an upper bound (all_class_non_max_suppression's (B * C * S, 3), trimmed at run time): the
            # graph knows it, and TVM checks it at run time
            if not _static(v, t):
                if _static(v, None):  # a static bound: forget it first (no cast joins two static shapes)
                    from tvm.script import relax as R

                    v = bb.match_cast(v, R.Tensor(dtype=t.dtype, ndim=t.rank))
                v = bb.match_cast(v, struct_info(t))
            env[name] = made[name] = v
    return made


def _static(v, t: TensorType | None) -> bool:
    """Whether a Relax value's struct info is a static shape, ``t``'s if given (or not a tensor's)."""
    from tvm import relax, tirx

    ty = v.ty
    return not isinstance(ty, relax.TensorType) or (
        isinstance(ty.shape, relax.ShapeExpr) and all(isinstance(d, tirx.IntImm) for d in ty.shape.values)
        and (t is None or tuple(int(d) for d in ty.shape.values) == t.shape))


# -- function rewrites (HirGen §3.3.2): the call chain changes, the results must not ----------------
REWRITES = ("closure", "wrap", "call")


def rewrite(mod, fname: str, form: str):
    """``mod`` with global function ``fname`` rewritten and every call to it redirected:

    - ``closure``: f becomes a local closure of a new global g(params) that binds it and calls it;
      f leaves the module;
    - ``wrap``: a new global g() returns f itself; every ``f(args)`` becomes ``g()(args)``;
    - ``call``: a new global g(params) returns ``f(params)``; every call to f calls g.
    """
    import tvm
    from tvm import relax

    f_gv = mod.get_global_var(fname)
    f = mod[f_gv]
    params = [relax.Var(p.name, p.ty) for p in f.params]
    ret = f.ret_ty
    if form == "closure":
        local = relax.Function(f.params, f.body, ret, f.is_pure)  # f's own vars: f leaves the module
        lf = relax.Var("local_" + fname, local.ty)
        out = relax.Var("out", ret)
        body = relax.SeqExpr([relax.BindingBlock([relax.VarBinding(lf, local),
                                                  relax.VarBinding(out, relax.Call(lf, params))])], out)
        g = relax.Function(params, body, ret, f.is_pure)
    elif form == "wrap":
        g = relax.Function([], relax.SeqExpr([], f_gv), f.ty, True)
    elif form == "call":
        out = relax.Var("out", ret)
        block = relax.BindingBlock([relax.VarBinding(out, relax.Call(f_gv, params))])
        g = relax.Function(params, relax.SeqExpr([block], out), ret, f.is_pure)
    else:
        raise ValueError(f"unknown rewrite {form!r}; known: {', '.join(REWRITES)}")

    base = tvm.IRModule({gv: fn for gv, fn in mod.functions.items()
                         if not (form == "closure" and gv.same_as(f_gv))})
    bb = relax.BlockBuilder(base)
    g_gv = bb.add_func(g, f"{fname}_{form}")  # typed by the builder: calls to it normalize

    @relax.expr_functor.mutator
    class Redirect(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if isinstance(call.op, relax.GlobalVar) and call.op.same_as(f_gv):
                target = self.builder_.normalize(relax.Call(g_gv, [])) if form == "wrap" else g_gv
                return relax.Call(target, call.args)
            return call

    redirect = Redirect(bb.get())
    for gv, fn in list(base.functions.items()):
        if isinstance(fn, relax.Function):
            bb.update_func(gv, redirect.visit_expr(fn))
    return relax.transform.Normalize()(bb.get())


# -- TVMScript that parses back (TVM 0.27 segfaults printing constants as metadata) -----------------
_META = re.compile(r'metadata\["ir\.GenericConst"\]\[(\d+)\]')


def to_tvmscript(mod) -> tuple[str, list]:
    """(TVMScript of ``mod`` with constants written ``R.const(CONSTS[i])``, the arrays CONSTS).

    The printer numbers non-scalar constants by first occurrence, functions in name order; parsing the text
    with ``extra_vars={"CONSTS": arrays}`` gives back a structurally equal module."""
    import tvm
    from tvm import relax

    consts: list = []

    def visit(e) -> None:  # scalars are printed inline, the rest go to the metadata
        if (isinstance(e, tvm.ir.expr.GenericConst) and e.value.numpy().ndim
                and not any(c.same_as(e) for c in consts)):
            consts.append(e)

    for gv in sorted(mod.functions, key=lambda g: g.name_hint):
        relax.analysis.post_order_visit(mod[gv], visit)
    text = _META.sub(r"R.const(CONSTS[\1])", mod.script(show_meta=False))
    return text, [c.value.numpy() for c in consts]


def from_tvmscript(text: str, consts: list):
    import tvm
    from tvm.script import ir as I
    from tvm.script import relax as R
    from tvm.script import tirx as T

    return tvm.script.from_source(text, extra_vars={"CONSTS": consts, "I": I, "R": R, "T": T})
