"""What user code adds on top of torch's operators, as models and training loops write it:

- custom operators (``torch.library.custom_op``) with a fake (meta) function and, for the functional ones,
  an autograd formula: Inductor calls them as opaque fallback kernels (``ir.FallbackKernel``; under
  cpp_wrapper and AOTInductor through the proxy executor), and a mutating one goes through
  ``auto_functionalized`` and the re-inplacing pass (``fx_passes/reinplace.py``);
- the multi-tensor (``torch._foreach_*``) steps of torch.optim's foreach optimizers, out of place or in place
  on the parameters: Inductor's foreach lowerings and its horizontal fusion of their kernels
  (``ForeachKernelSchedulerNode``).

A custom operator's definition is code at the head of the program (the spec's ``imports``), guarded so
that a worker that builds many programs registers it once; the program's source stays standalone.  Each
call's ``plain`` spelling is the operator's body (or the per-tensor ops of the foreach step) written inline,
so that the trigger analysis can tell a bug of the mechanism from one of the arithmetic.
"""

from __future__ import annotations

from dlcfuzz.ir import TensorType
from dlcfuzz.solve import intervals as iv
from dlcfuzz.spec.dsl import BOOL, Choice, Float, In
from dlcfuzz.spec.torch.base import FLOATS, TorchOpSpec, grow_iv, same_type, small_domain, uni_shape

FAMILY = "library"
CUSTOM = "a custom operator"  # the mechanisms (TorchOpSpec.mechanism)
FOREACH = "a foreach (multi-tensor) step"

# each definition registers once per process (a second custom_op of one name raises)
_SCALE_TANH = '''if not hasattr(torch.ops.dlcfuzz, "scale_tanh"):
    @torch.library.custom_op("dlcfuzz::scale_tanh", mutates_args=())
    def _scale_tanh(x: torch.Tensor, a: float) -> torch.Tensor:
        return torch.tanh(x) * a + x * 0.5

    _scale_tanh.register_fake(lambda x, a: torch.empty_like(x))
    _scale_tanh.register_autograd(
        lambda ctx, g: (g * (ctx.a * (1 - torch.tanh(ctx.x) ** 2) + 0.5), None),
        setup_context=lambda ctx, inputs, output: setattr(ctx, "x", inputs[0]) or setattr(ctx, "a", inputs[1]))'''
_ROW_SUM = '''if not hasattr(torch.ops.dlcfuzz, "row_sum"):
    @torch.library.custom_op("dlcfuzz::row_sum", mutates_args=())
    def _row_sum(x: torch.Tensor) -> torch.Tensor:
        return x.sum(-1)

    _row_sum.register_fake(lambda x: x.new_empty(x.shape[:-1]))
    _row_sum.register_autograd(
        lambda ctx, g: g.unsqueeze(-1).expand(ctx.shape),
        setup_context=lambda ctx, inputs, output: setattr(ctx, "shape", inputs[0].shape))'''
_ADD_INTO = '''if not hasattr(torch.ops.dlcfuzz, "add_into_"):
    @torch.library.custom_op("dlcfuzz::add_into_", mutates_args=("out",))
    def _add_into_(out: torch.Tensor, y: torch.Tensor, alpha: float) -> None:
        out.add_(y, alpha=alpha)

    _add_into_.register_fake(lambda out, y, alpha: None)'''


# ---------------------------------------------------------------------------------------------
# torch.optim's foreach steps on two parameters (x, y) and their gradients (gx, gy)
# ---------------------------------------------------------------------------------------------
# rule -> (the step on lists p, g, as torch.optim's multi-tensor path writes it; the same on one tensor)
FOREACH_RULES = {
    "sgd": ("torch._foreach_add{_}({p}, {g}, alpha=-0.1)", "{p}.add({g}, alpha=-0.1)"),
    "momentum": ("torch._foreach_add{_}(torch._foreach_mul{_}({p}, 0.9), {g}, alpha=0.5)",
                 "({p} * 0.9).add({g}, alpha=0.5)"),
    "adam": ("torch._foreach_addcdiv{_}({p}, {g}, torch._foreach_add(torch._foreach_sqrt(torch._foreach_mul({g}, "
             "{g})), 1.0), value=-0.1)", "torch.addcdiv({p}, {g}, ({g} * {g}).sqrt() + 1.0, value=-0.1)"),
    "lerp": ("torch._foreach_lerp{_}({p}, {g}, 0.25)", "torch.lerp({p}, {g}, 0.25)"),
    "maximum": ("torch._foreach_maximum{_}({p}, {g})", "torch.maximum({p}, {g})"),
}


def _foreach_emit(a: list[str], k: dict) -> str:
    step = FOREACH_RULES[k["rule"]][0]
    g = f"[{a[2]}, {a[3]}]"
    if not k["inplace"]:
        return step.format(_="", p=f"[{a[0]}, {a[1]}]", g=g)
    # in place on the parameters, as optimizer.step() writes them; the call's result is the first parameter
    # (an output aliases input 0, as every in-place call's does), the second is written all the same
    return f"(lambda p: ({step.format(_='_', p='p', g=g)}, p[0])[1])([{a[0]}, {a[1]}])"


def _foreach_plain(a: list[str], k: dict) -> str:
    one = FOREACH_RULES[k["rule"]][1]
    if k["inplace"]:  # the first parameter's new value, written nowhere (as an in-place call's plain form)
        return one.format(p=a[0], g=a[2])
    return f"[{one.format(p=a[0], g=a[2])}, {one.format(p=a[1], g=a[3])}]"


def _foreach_iv(c: iv.Call) -> list[iv.Iv]:
    m = max(iv.amax(c.ivs[k]) for k in range(4) if c.ivs[k] is not None) * 1.5 + 1
    return [iv.widen((-m, m), c.n, 4.0, absolute=1.0) for _ in c.outs]


SPECS = [
    TorchOpSpec("custom_scale_tanh", FAMILY, [In("x", T="T", rank=(0, 5))], same_type, attrs={"a": Float(-2.0, 2.0)},
                types={"T": FLOATS}, imports=(_SCALE_TANH,), mechanism=CUSTOM,
                emit=lambda a, k: f"torch.ops.dlcfuzz.scale_tanh({a[0]}, {k['a']})",
                plain=lambda a, k: f"(torch.tanh({a[0]}) * {k['a']} + {a[0]} * 0.5)",
                transfer=lambda c: [iv.widen(iv.hull(iv.scale(c.x, 0.5), (-2.0, 2.0)), c.n, 4.0, absolute=2.0)],
                vdomain=small_domain(16.0)),
    TorchOpSpec("custom_row_sum", FAMILY, [In("x", T="T", rank=(1, 5))],
                lambda c: [TensorType(tuple(c.s[:-1]), c.T)], types={"T": FLOATS}, imports=(_ROW_SUM,),
                mechanism=CUSTOM, emit=lambda a, k: f"torch.ops.dlcfuzz.row_sum({a[0]})",
                plain=lambda a, k: f"{a[0]}.sum(-1)",
                transfer=lambda c: [iv.widen(iv.scale(c.x, float(max(1, c.types[0].shape[-1]))), c.n, 8.0,
                                             absolute=1.0)],
                vdomain=small_domain(16.0)),
    # the operand added is detached: a mutating custom operator has no autograd formula (torch.library
    # refuses one), so only the written tensor's own gradient, which the addition passes through, is defined
    TorchOpSpec("custom_add_into_", FAMILY, [In("x", T="T", rank=(0, 5)), In("y", T="T", shape=uni_shape)], same_type,
                attrs={"alpha": Choice((1.0, -0.5, 2.0))}, types={"T": FLOATS}, imports=(_ADD_INTO,),
                mechanism=CUSTOM, mutates=0,
                emit=lambda a, k: f"(lambda t: (torch.ops.dlcfuzz.add_into_(t, {a[1]}.detach(), {k['alpha']}), "
                                  f"t)[1])({a[0]})",
                plain=lambda a, k: f"{a[0]}.add({a[1]}.detach(), alpha={k['alpha']})",
                transfer=grow_iv(), vdomain=small_domain(8.0)),
    TorchOpSpec("foreach_step", FAMILY,
                [In("x", T="T", rank=(0, 4)), In("y", T="T", shape=lambda c: c.bcast(c.s)),
                 In("gx", T="T", shape=lambda c: tuple(c.s)), In("gy", T="T", shape=lambda c: tuple(c.ins[1].shape))],
                lambda c: [c.x] if c.inplace else [c.x, c.ins[1]],
                attrs={"rule": Choice(tuple(FOREACH_RULES)), "inplace": BOOL},
                types={"T": FLOATS}, mechanism=FOREACH, emit=_foreach_emit, plain=_foreach_plain,
                mutates=lambda k: (0, 1) if k["inplace"] else (), transfer=_foreach_iv, vdomain=small_domain(8.0)),
]
