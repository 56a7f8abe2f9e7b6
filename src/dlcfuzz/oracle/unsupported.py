"""The one place that says which compiler errors mean "not supported" rather than "bug".

Each rule is (backend, phase or "*", regex over "ErrorType: message").  An error matching a
rule is reported as unsupported for that backend, counted, and never becomes a bug.  Keep each
pattern as specific as the compiler's wording allows: a rule that is too broad hides bugs.
"""

from __future__ import annotations

import re

RULES: list[tuple[str, str, str]] = [
    # ONNX Runtime: no kernel registered for the op/dtype at this opset
    ("ort", "*", r"NOT_IMPLEMENTED : Could not find an implementation for"),
    ("reference", "*", r"No registered implementation for operator|No implementation for operator '\w+' domain '' "
                       r"and version \d+, found"),
    ("reference", "*", r"NotImplementedError"),
    # TVM Relax's ONNX frontend: operators, dtypes and forms it declines
    ("tvm", "import", r"The following operators are not supported for frontend ONNX"),
    # the frontend's explicit declines of a feature it has not implemented (raised by its converters:
    # "TopK sorted must be 1 for Relax frontend", "Dynamic pads are not supported yet.", "... blocked
    # quantization is not supported yet.", "Type ... for scale is currently unsupported.", "Position must be
    # a constant.", "... requires a statically known input rank.")
    ("tvm", "import", r"^(ValueError|NotImplementedError|OpNotImplemented|OpAttributeUnImplemented): .*("
                      r"for Relax frontend|not supported yet|is currently unsupported|must be a constant|"
                      r"requires a statically known|not supported for convolution)"),
    # its Constant converter reads the ``value`` attribute alone and refuses the others on purpose
    # ("if 'value' not in attr: raise ValueError('no value in Constant')"): value_float(s), value_int(s)
    ("tvm", "import", r"^ValueError: no value in Constant"),
    ("tvm", "compile", r"power only applies to float"),
    ("tvm", "import", r"Binary operators must have the same datatype for both operands.*R\.power"),
    ("tvm", "import", r"requires the input tensor to have float dtype"),
    # converters that return fewer outputs than the operator defines (MaxPool: no Indices; the contrib
    # SkipLayerNormalization: no input_skip_bias_sum, EmbedLayerNormalization: no embedding_sum)
    ("tvm", "import", r"Missing outputs during conversion\. Expected \d+ but Got \d+ in "
                      r"(MaxPool|SkipLayerNormalization|EmbedLayerNormalization)\b"),
    # the contrib Attention converter's limit, in its own words: "For now, we only support case 2 & 3"
    ("tvm", "import", r"mask index should be in shape of \(batch_size, seq_len\)"),
    ("tvm", "import", r"Only resize1d/resize2d/resize3d are supported"),
    ("tvm", "import", r"cannot handle ShapeExpr inputs"),
    # the normalization converters pass ONNX's broadcastable Scale on to Relax's layer_norm and rms_norm,
    # which take the normalized shape only (their scale is "gamma" or "weight")
    ("tvm", "import", r"gamma and beta shapes do not match|requires the input (gamma|weight).*(to have size same as "
                      r"the lengths|to have as many dimensions)|relax\.nn\.layer_norm.*is out of range"),
    # a kernel's stated dtype limit ("layer_norm: only support float16 and float32 for now")
    ("tvm", "compile", r"\bonly supports? [^.\n]{0,80}\bfor now\b"),
    # torch: dtypes without kernels (the exporter's op table gaps are dlcfuzz's, reported as bugs)
    ("inductor", "*", r"not implemented for '(UInt16|UInt32|UInt64)'"),
    # torch's CUDA kernels lack some dtypes its CPU kernels have ("addmm_cuda" not implemented for 'Long')
    ("inductor", "*", r"\"\w+_cuda\" not implemented for '\w+'"),
    ("inductor", "import", r"ExportError: torch has no kernels for \w+"),
    # Dynamo's documented limit on data-dependent values ("Could not guard on data-dependent expression ...
    # Consider annotating your code using torch._check*()"): a capture limit, not Inductor's code generation
    # (a GPU run of an LSTM with sequence_lens showed the other spelling, "Could not extract specialized
    # integer from data-dependent expression u0")
    ("inductor", "compile", r"Could not (guard on|extract specialized integer from) data-dependent expression"),
    # ONNX operators a frontend has no converter for (migrated ONNX node tests reach every operator)
    ("openvino", "import", r"No conversion rule found for operations"),
    ("ort", "*", r"is not a registered function/op"),
    # an operator version newer than ORT's own schemas (Attention-24's left_window_size in ORT 1.31): ORT
    # calls the model invalid, but it only lacks that version
    ("ort", "*", r"Unrecognized attribute: \w+ for operator"),
    # ORT's kernels state their limits and ask for a feature request ("Batchwise recurrent operations
    # (layout == 1) are not supported. If you need support create a github issue with justification.")
    ("ort", "*", r"not supported\. If you need support create a github issue"),
    # a case ORT's kernel deliberately leaves out ("ReduceMax is not defined for empty set with bool type")
    ("ort", "*", r"\w+ is not defined for .+ type"),
    # OpenVINO: resize only on spatial dims, tf_crop_and_resize, and dynamic-shape limits of the CPU plugin
    ("openvino", "*", r"only supports resize on spatial dimensions"),
    ("openvino", "*", r"tf_crop_and_resize - this type of coordinate transformation mode is not supported"),
    # the CPU plugin's documented limit: "dynamic rank is not supported" for its nodes (any operation)
    ("openvino", "*", r"CPU plug-in doesn't support \w+ operation with dynamic rank"),
    # ONNX RNN/GRU/LSTM: "Optional activation functions: Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
    # HardSigmoid, Elu, Softsign, Softplus" (only Relu, Tanh and Sigmoid are required)
    ("openvino", "*", r"Unsupported activation|Unknown activation function"),
    ("openvino", "*", r"Doesn't support dynamic weights shape|Doesn't support dynamic shapes for 'weights' and "
                      r"'output_shape' inputs"),
    ("openvino", "*", r"Supported primitive descriptors list is empty for node: \S*ConvolutionBackpropData"),
    # a CPU plugin node's stated limit (FakeQuantize of a dynamic model: "FakeQuantize node with name 'q'
    # doesn't support non per-tensor quantization for axis: 2", which the static model compiles)
    ("openvino", "compile", r"node with name '[^']*' doesn't support "),
    # the CPU plugin has neither a kernel nor a reference for a node and says so ("Unsupported operation of
    # type: ReduceL2 ... Not Implemented: Second tensor is not constant ... Cannot fallback on ngraph
    # reference implementation": int32 ReduceL2 with its axes fed at run time)
    ("openvino", "compile", r"Unsupported operation of type: \w+ name: [\s\S]*Cannot fallback on ngraph reference "
                            r"implementation"),
    # a converter that makes fewer outputs than the operator defines, in OpenVINO's words (the contrib
    # EmbedLayerNormalization: no embedding_sum), as TVM's "Missing outputs during conversion" above
    ("openvino", "import", r"Expected output number of \S+ node is \d+ while the implementation provides \d+ outputs"),
    # OpenVINO's ONNX Pad converter takes the constant, reflect and edge modes and says so for the others
    # ("Unsupported padding mode: [wrap]", wrap being opset 19's)
    ("openvino", "import", r"Unsupported padding mode"),
    # OpenVINO requires GatherElements indices to match data off the axis (ONNX does not say; ORT accepts less)
    ("openvino", "*", r"must have equal or intersecting dimensions, except for the dimension at axis"),
    # IREE: an ONNX operator (or a form of it) that the ONNX-to-torch lowering leaves as an opaque
    # torch.operator, which then cannot legalize; the backend re-raises it naming the operator
    ("iree", "compile", r"^IreeUnsupported: IREE's ONNX importer does not lower onnx\.\w+"),
    # the torch lowering has no pattern for quantized tensors (QLinearMatMul imported as a torch.aten.bmm of
    # !torch.qint8): a gap of quantized support, not a wrong lowering; other types failing to legalize stay bugs
    ("iree", "compile", r"failed to legalize operation 'torch\.aten\.\w+'[^\n]*!torch\.qu?int\d+"),
    # a lowering's own statement of a case it leaves out ("unimplemented: dim is not constant": a Slice of axes fed
    # at run time), as TVM's "not supported yet" above
    ("iree", "compile", r"^IreeCompileError: error: unimplemented: "),
]

# ---- OPERA: migrated torch calls through the PyTorch frontends (backends tvm-torch, openvino-torch, inductor-torch)
# torch itself could not capture the call (torch.export for TVM, torch.jit.trace for OpenVINO): not the compiler's fault
_TORCH_CAPTURE = r"^TorchExportError: torch\.(export|jit\.trace|compile) failed"
RULES += [
    ("tvm-torch", "import", _TORCH_CAPTURE),
    ("openvino-torch", "import", _TORCH_CAPTURE),
    # TVM's ExportedProgram importer has no converter for an aten op
    ("tvm-torch", "import", r"^AssertionError: Unsupported function types \["),
    # OpenVINO's PyTorch frontend has no converter for an op, or declines one of its arguments: its
    # translators' own checks say "Translation for X do not support ..." or "Unsupported ord ",
    # "Unsupported approximate for Gelu: ", "Unsupported RNN variant."
    ("openvino-torch", "import", r"No conversion rule found for operations"),
    ("openvino-torch", "import", r"\[PyTorch Frontend\] (Translation for \S+ do not support|Unsupported )"),
    # Dynamo cannot capture the call as one graph (fullgraph=True): "Dynamo does not support this"
    ("inductor-torch", "compile", r"^Unsupported: "),
    # torch.compile(backend="eager") fails the same way (backends/inductor.py re-captures every failed
    # compile so): Dynamo's capture declined the call, e.g. a data-dependent guard; Inductor never saw it
    ("inductor-torch", "compile", _TORCH_CAPTURE),
]
# Explicit declines by a frontend's own wording, whatever the operator (OPERA §III-C counts a frontend that
# says it does not support an input as unsupported, not as a bug).  A *bug* is a crash that does not say so.
_SAYS_UNSUPPORTED = (
    # TVM's frontends raise these types to decline (tvm/error.py: OpNotImplemented "Operator is not
    # implemented.", OpAttributeUnImplemented "Attribute is not supported in a certain frontend.")
    r"^(OpNotImplemented|OpAttributeUnImplemented|NotImplementedError): "
    # the frontend states the limit of what it converts: "... is not supported (yet)", "... are not
    # supported yet", "X is only supported for 4D input tensors", "Only constant depth currently
    # supported": the feature gaps OpenVINO's frontends ("Tuples are not supported yet", "GridSample is
    # only supported for 4D input tensors") and TVM's importers (OneHot: "Only constant depth currently
    # supported.", Split with a runtime split input: "Dynamic Split not yet supported", "Generating
    # column-major MaxPool results is supported only for inputs with static rank") name in their own messages
    r"|\b(is|are) not (yet |currently )?supported\b|\bnot supported yet\b|\bnot yet supported\b"
    r"|\b[Oo]nly\b[^.\n]{0,80}?\bsupported\b|\bsupported only\b"
    # TVM's contrib converters: "custom scale is not currently supported", "SkipLayerNormalization import
    # currently only supports required beta and bias"
    r"|\bcurrently only supports\b"
    # a message that opens by saying so: "Unsupported transposed convolution dimensionality: 5" (TVM's
    # exported-program importer)
    r"|^\w+: Unsupported "
)
RULES += [(b, "import", _SAYS_UNSUPPORTED) for b in ("tvm", "tvm-torch", "openvino", "openvino-torch")]
# TVM's runtime kernels state the dtypes they lack when called ("InternalError: Unsupported input dtype:
# int16" from its sort behind TopK), the same limit its Relax builder declines up front (export/relax_ops.py)
RULES += [("tvm", "run", r"^\w+: Unsupported ")]
RULES += [
    # OpenVINO's torch frontend keeps complex tensors as its internal ComplexTypeMark, which only its
    # complex-aware translators consume; its own declines: "Operation does not support complex type tensor
    # on input." (a translator without complex support) and "ComplexTypeMark with a message: This is
    # OpenVINO internal type. Consumer: opset1::Result" (a complex model output).  Sequence outputs end
    # unconverted in prim::ListConstruct/TupleConstruct (its "Tuples are not supported yet" limit)
    ("openvino-torch", "import", r"complex type tensor|ComplexTypeMark with a message|(prim::(TupleConstruct|"
                                 r"ListConstruct|TupleUnpack|ListUnpack)) with a message"),
]
# the same compiler behind both frontends: its compile/run limits hold for either
RULES += [("tvm-torch", ph, p) for b, ph, p in list(RULES) if b == "tvm" and ph != "import"]
RULES += [("openvino-torch", ph, p) for b, ph, p in list(RULES) if b == "openvino"]
RULES += [("inductor-torch", ph, p) for b, ph, p in list(RULES) if b == "inductor" and ph != "import"]

_COMPILED: dict[str, list[re.Pattern[str]]] = {}
_COMPILED_RULES = [0]  # how many rules _COMPILED holds: a plugin backend may append its own later


def is_unsupported(backend: str, phase: str, error_type: str, message: str) -> bool:
    if _COMPILED_RULES[0] != len(RULES):
        _COMPILED.clear()
        _COMPILED_RULES[0] = len(RULES)
        for b, ph, p in RULES:
            _COMPILED.setdefault(f"{b}/{ph}", []).append(re.compile(p, re.S))
    text = f"{error_type}: {message}"
    pats = _COMPILED.get(f"{backend}/{phase}", []) + _COMPILED.get(f"{backend}/*", [])
    return any(p.search(text) for p in pats)


# Declines that name the operator they refuse: the support profile blames that operator's node, not
# whichever node of the graph happens to be the only unproven one (run/profile.py)
_NAMES_OPERATORS = re.compile(
    r"does not lower onnx\.(?P<iree>\w+)"  # IREE
    r"|not supported for frontend ONNX: (?P<tvm>[\w, ]+)"  # TVM: "... ONNX: Celu, GRU"
    r"|while converting onnx\.(?P<converter>\w+)"  # a note dlcfuzz's TVM backend adds to a converter's error
    r"|Could not find an implementation for (?P<ort>\w+)\(\d+\)"  # ORT: "... for RoiAlign(22) node ..."
    r"|No conversion rule found for operations: (?P<openvino>[^\n]+)")  # OpenVINO


def declined_operators(message: str) -> set[str]:
    """The operator types a decline message (or its traceback, which holds the notes added to it)
    names (empty when it names none)."""
    m = _NAMES_OPERATORS.search(message)
    if m is None:
        return set()
    return set(re.findall(r"[A-Z]\w*", next(g for g in m.groups() if g)))
