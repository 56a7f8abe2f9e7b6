"""Each torch spec against its OpInfo (``torch.testing._internal.common_methods_invocations.op_db``):
which OpInfo entry a spec answers to, how the OpInfo samples' positional arguments and keywords name the
spec's attributes, and, for the specs whose domain leaves out some of what the OpInfo samples take, why
(``OPINFO_EXEMPT``).  ``tests/test_torch_opinfo.py`` checks that the float32 CPU samples' ranks, dtypes and
attribute values lie inside each spec's domain, or that the spec is listed here with its reason.

Nothing here imports torch: these are tables, read by the test."""

from __future__ import annotations

# spec -> (OpInfo name, the OpInfo variants that call what the spec calls; None: all of them).  A spec not
# listed answers to the OpInfo named like it (``torch.sin`` -> ``sin``), or ``nn.functional.<name>``, or,
# for an in-place spec (``add_``), its out-of-place operator's (whose samples the in-place call takes).
OPINFO_NAME: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "torch.div": ("div", ("no_rounding_mode",)),
    "torch.div_": ("div", ("no_rounding_mode",)),
    "torch.div_floor": ("div", ("floor_rounding",)),
    "torch.round": ("round", ("",)),
    "torch.max": ("max", ("reduction_with_dim",)),
    "torch.min": ("min", ("reduction_with_dim",)),
    "torch.norm": ("norm", ("", "inf")),
    "torch.pad": ("nn.functional.pad", ("constant", "reflect", "replicate", "circular")),
    "torch.getitem": ("__getitem__", None),
    "torch.sdpa": ("nn.functional.scaled_dot_product_attention", None),
    "torch.bce_with_logits": ("nn.functional.binary_cross_entropy_with_logits", None),
    "torch.relu_": ("nn.functional.relu", None),
    "torch.sin_int": ("sin", None),
    "torch.batch_norm": ("nn.functional.batch_norm", ("",)),
    "torch.split": ("split", ("",)),
    "torch.squeeze": ("squeeze", ("",)),
    "torch.as_strided": ("as_strided", ("",)),
    "torch.softmax": ("softmax", ("",)),
    "torch.log_softmax": ("log_softmax", ("",)),
}

# spec -> the attribute each positional argument after the sample's input names (None: a tensor
# operand or an argument the spec does not draw)
OPINFO_ARGS: dict[str, tuple[str | None, ...]] = {
    **{f"torch.{n}": ("dim", "keepdim") for n in ("sum", "mean", "prod", "amax", "amin", "max", "min", "argmax",
                                                  "argmin", "all", "any", "logsumexp")},
    **{f"torch.{n}": ("dim",) for n in ("cumsum", "cumprod", "cummax", "logcumsumexp", "softmax", "log_softmax",
                                        "squeeze", "unsqueeze", "unbind", "glu", "count_nonzero")},
    "torch.narrow": ("dim", "start", "length"),
    "torch.select": ("dim", "index"),
    "torch.transpose": ("dim0", "dim1"),
    "torch.unfold": ("dim", "size", "step"),
    "torch.diagonal": ("offset", "dim1", "dim2"),
    "torch.movedim": ("source", "destination"),
    "torch.chunk": ("chunks", "dim"),
    "torch.split": ("size", "dim"),
    "torch.flatten": ("start", "end"),
    "torch.unflatten": ("dim", "sizes"),
    "torch.flip": ("dims",),
    "torch.roll": ("shift", "dim"),
    "torch.topk": ("k", "dim", "largest"),
    "torch.kthvalue": ("k", "dim", "keepdim"),
    "torch.sort": ("dim", "descending"),
    "torch.argsort": ("dim", "descending"),
    "torch.clamp": ("min", "max"),
    "torch.leaky_relu": ("slope",),
    "torch.hardtanh": ("lo", "hi"),
    "torch.elu": ("alpha",),
    "torch.celu": ("alpha",),
    "torch.lerp": (None, "weight"),
    "torch.lerp_": (None, "weight"),
    "torch.index_select": ("dim",),
    "torch.gather": ("dim",),
    "torch.scatter": ("dim",),
    "torch.scatter_add": ("dim",),
    "torch.scatter_reduce": ("dim", None, None, "reduce"),
    "torch.index_add": ("dim",),
    "torch.index_copy": ("dim",),
    "torch.index_fill": ("dim",),
    "torch.norm": ("p", "dim", "keepdim"),
}

# OpInfo keyword -> spec attribute, where the spec names it otherwise
OPINFO_KWARGS: dict[str, str] = {
    "start_dim": "start", "end_dim": "end", "negative_slope": "slope", "min_val": "lo", "max_val": "hi",
    "dims": "dims", "shifts": "shift", "correction": "correction", "unbiased": "correction",
}

# spec -> why its domain leaves out some of what its OpInfo's samples take
_UNBATCHED = "unbatched inputs (no batch dim) are not drawn: the spec's geometry reads the channel at dim 1"
_SCALAR_INDEX = "a 0-d input is not drawn: the index (a constant the spec draws in range) needs a dim to index"
OPINFO_EXEMPT: dict[str, str] = {
    "torch.where": "OpInfo's where calls self first (the condition is an argument); the spec's first input is "
                   "the condition",
    **{f"torch.{n}": _UNBATCHED for n in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                          "conv_transpose3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
                                          "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d")},
    **{f"torch.{n}": _SCALAR_INDEX for n in ("index_add", "index_add_", "index_copy", "index_copy_", "index_fill",
                                             "index_fill_", "index_select")},
    "torch.all": "dim=[] (reduce nothing) is not drawn: no dim or some dims",
    "torch.any": "dim=[] (reduce nothing) is not drawn: no dim or some dims",
    "torch.batch_norm": "momentum outside (0, 1] (OpInfo's -1.2 and 0.0) and a 1-D input (no channel dim) are "
                        "not drawn",
    "torch.cosine_similarity": "0-d inputs are not drawn: dim indexes a dim of the inputs",
    "torch.cross_entropy": "K-dimensional inputs (N, C, d1, ...) are not drawn: the target constant is (N,)",
    "torch.flatten": "start and end are drawn non-negative (end >= start); OpInfo writes end=-1",
    "torch.unflatten": "dim is drawn non-negative and sizes as two factors; OpInfo's dim=-1 and sizes of one or "
                       "three factors are not drawn",
    "torch.hardtanh": "min_val and max_val are drawn on either side of 0 (OpInfo's min_val == max_val == 0 is not)",
    "torch.layer_norm": "eps is drawn among 1e-5 and 1e-3: OpInfo's eps=0.5 and -0.5 are not a model's",
    "torch.rms_norm": "eps is drawn among 1e-6 and 1e-3: OpInfo's eps=0.5 and -0.5 are not a model's",
    "torch.logsumexp": "dim is one int of a tensor of rank >= 1 (OpInfo's dim lists and 0-d inputs are not drawn)",
    "torch.movedim": "source and destination are one dim each (OpInfo's lists of dims are not drawn)",
    "torch.norm": "p is drawn among 1, 2, 3 and inf: the value interval bounds a p < 1 quasi-norm and -inf "
                  "(a minimum) would need their own rules",
    "torch.normalize": "p is drawn among 1 and 2 (OpInfo's 0.5 and -1 need their own interval bounds)",
    "torch.permute": "a 0-d input is not drawn: nothing to permute",
    "torch.unfold": "a 0-d input is not drawn: unfold needs a dim to window",
    "torch.prelu": "inputs of rank < 2 are not drawn: the per-channel weight reads dim 1",
    **{f"torch.{n}": "a 0-d input is not drawn: one element gives a data-dependent size of 0 or 1, which Dynamo "
                     "and Inductor take to be neither (by design; see index._data_size)"
       for n in ("nonzero", "unique", "unique_consecutive")},
    "torch.sin_int": "sin of an integer tensor (a float32 result): OpInfo's float32 samples are sin's own",
}
