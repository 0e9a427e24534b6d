"""Which ONNX operators, attributes and tensor types the compiler implements, checked before any other work.

``OP_SPECS`` is the one table of what is implemented: per operator, the attributes it accepts (with
the values allowed, or ``None`` for every value the ONNX specification allows) and, for window
operators, the spatial ranks. :func:`check_supported` rejects everything else, naming the node,
the operator and the attribute, before the model is converted or compiled; model validation reads
the same table.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Mapping

import onnx
from onnx import numpy_helper

from compiler.frontend.errors import UnsupportedOperatorError

_WINDOW = {"auto_pad": None, "kernel_shape": None, "pads": None, "strides": None, "dilations": None}
_RESIZE = {
    "mode": ("nearest", "linear", "cubic"),
    "coordinate_transformation_mode": ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                       "asymmetric", "tf_crop_and_resize"),
    "nearest_mode": ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"),
    "cubic_coeff_a": None, "exclude_outside": (0, 1), "extrapolation_value": None, "antialias": (0, 1), "axes": None,
    "keep_aspect_ratio_policy": ("stretch", "not_larger", "not_smaller"),
}


@dataclass(frozen=True)
class OpSpec:
    """What the compiler implements of one operator."""

    attrs: Mapping[str, tuple | None] = field(default_factory=dict)  # accepted attribute -> allowed values / None
    spatial: tuple[int, ...] | None = None  # window ops: accepted numbers of spatial axes


OP_SPECS: dict[str, OpSpec] = {
    "Conv": OpSpec({**_WINDOW, "group": None}, spatial=(1, 2)),
    "QLinearConv": OpSpec({**_WINDOW, "group": None}, spatial=(2,)),
    "MaxPool": OpSpec({**_WINDOW, "ceil_mode": (0, 1), "storage_order": (0, 1)}, spatial=(1, 2, 3)),
    "AveragePool": OpSpec({**_WINDOW, "ceil_mode": (0, 1), "count_include_pad": (0, 1)}, spatial=(1, 2, 3)),
    "GlobalAveragePool": OpSpec(),
    "GlobalMaxPool": OpSpec(),
    "ReduceMean": OpSpec({"axes": None, "keepdims": (0, 1), "noop_with_empty_axes": (0, 1)}),
    "Gemm": OpSpec({"alpha": None, "beta": None, "transA": (0, 1), "transB": (0, 1)}),
    "MatMul": OpSpec(), "QLinearMatMul": OpSpec(),
    "Relu": OpSpec(), "Sigmoid": OpSpec(), "HardSwish": OpSpec(),
    "HardSigmoid": OpSpec({"alpha": None, "beta": None}),
    "LeakyRelu": OpSpec({"alpha": None}),
    "PRelu": OpSpec(),
    "Clip": OpSpec({"min": None, "max": None}),
    "Add": OpSpec(), "Sub": OpSpec(), "Mul": OpSpec(), "Div": OpSpec(), "Sum": OpSpec(),
    "BatchNormalization": OpSpec({"epsilon": None, "momentum": None, "training_mode": (0, 1), "spatial": (1,)}),
    "LRN": OpSpec({"alpha": None, "beta": None, "bias": None, "size": None}),
    "Softmax": OpSpec({"axis": None}),
    "Flatten": OpSpec({"axis": None}),
    "Reshape": OpSpec({"allowzero": (0, 1)}),
    "Concat": OpSpec({"axis": None}),
    "Split": OpSpec({"axis": None, "split": None, "num_outputs": None}),
    "Slice": OpSpec(),
    "Transpose": OpSpec({"perm": None}),
    "Pad": OpSpec({"mode": ("constant", "reflect", "edge", "wrap"), "pads": None, "value": None}),
    "Resize": OpSpec(_RESIZE),
    "Shape": OpSpec({"start": None, "end": None}),
    "Gather": OpSpec({"axis": None}),
    "Unsqueeze": OpSpec({"axes": None}),
    "Squeeze": OpSpec({"axes": None}),
    "Cast": OpSpec({"to": None, "saturate": None}),
    "QuantizeLinear": OpSpec({"axis": None, "block_size": None, "output_dtype": None, "saturate": None}),
    "DequantizeLinear": OpSpec({"axis": None, "block_size": None}),
    "Identity": OpSpec(),
    "Dropout": OpSpec({"ratio": None, "seed": None, "is_test": None}),
    "Constant": OpSpec({"value": None, "value_float": None, "value_int": None, "value_floats": None, "value_ints": None}),
    "ConstantOfShape": OpSpec({"value": None}),
    # transformers, detectors, segmentation decoders (kernels: jit_runtime.host_ops.transformer_kernels)
    "ConvTranspose": OpSpec({**_WINDOW, "group": None, "output_padding": None, "output_shape": None},
                            spatial=(1, 2, 3)),
    "LayerNormalization": OpSpec({"axis": None, "epsilon": None, "stash_type": (1,)}),
    "InstanceNormalization": OpSpec({"epsilon": None}),
    "GroupNormalization": OpSpec({"epsilon": None, "num_groups": None, "stash_type": (1,)}),
    "Erf": OpSpec(), "Tanh": OpSpec(), "Pow": OpSpec(), "Sqrt": OpSpec(),
    "Where": OpSpec(), "IsNaN": OpSpec(), "Equal": OpSpec(), "And": OpSpec(), "Expand": OpSpec(), "Range": OpSpec(),
    "GatherND": OpSpec({"batch_dims": None}), "GatherElements": OpSpec({"axis": None}),
    "MatMulInteger": OpSpec(), "ConvInteger": OpSpec({**_WINDOW, "group": None}, spatial=(2,)),
    "DynamicQuantizeLinear": OpSpec(),
    # elementwise math, comparisons, reductions (kernels: jit_runtime.host_ops.math_kernels)
    **{op: OpSpec() for op in ("Exp", "Log", "Neg", "Reciprocal", "Abs", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos",
                               "Softplus", "Softsign", "Mish", "Min", "Max", "Greater", "Less", "GreaterOrEqual",
                               "LessOrEqual", "Or", "Xor", "Not")},
    "Elu": OpSpec({"alpha": None}), "Celu": OpSpec({"alpha": None}), "ThresholdedRelu": OpSpec({"alpha": None}),
    "Selu": OpSpec({"alpha": None, "gamma": None}), "Gelu": OpSpec({"approximate": ("none", "tanh")}),
    **{op: OpSpec({"axes": None, "keepdims": (0, 1), "noop_with_empty_axes": (0, 1)})
       for op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                  "ReduceLogSumExp")},
    "ArgMax": OpSpec({"axis": None, "keepdims": (0, 1), "select_last_index": (0, 1)}),
    "ArgMin": OpSpec({"axis": None, "keepdims": (0, 1), "select_last_index": (0, 1)}),
    "LogSoftmax": OpSpec({"axis": None}),
    # rearrangement and indexing (kernels: jit_runtime.host_ops.index_kernels)
    **{op: OpSpec() for op in ("Tile", "NonZero", "Size", "Mean")},
    "DepthToSpace": OpSpec({"blocksize": None, "mode": ("DCR", "CRD")}),
    "SpaceToDepth": OpSpec({"blocksize": None, "mode": ("DCR", "CRD")}),
    "Trilu": OpSpec({"upper": (0, 1)}),
    "ScatterND": OpSpec({"reduction": ("none", "add", "mul", "max", "min")}),
    "ScatterElements": OpSpec({"axis": None, "reduction": ("none", "add", "mul", "max", "min")}),
    "OneHot": OpSpec({"axis": None}),
    "TopK": OpSpec({"axis": None, "largest": (0, 1), "sorted": (0, 1)}),
    "CumSum": OpSpec({"exclusive": (0, 1), "reverse": (0, 1)}),
    "CastLike": OpSpec({"saturate": None}),
    "Mod": OpSpec({"fmod": (0, 1)}),
    "NonMaxSuppression": OpSpec({"center_point_box": (0, 1)}),
    "Einsum": OpSpec({"equation": None}),
    **{op: OpSpec() for op in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                               "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")},
    "Swish": OpSpec({"alpha": None}),
    "IsInf": OpSpec({"detect_negative": (0, 1), "detect_positive": (0, 1)}),
    "ReduceLogSum": OpSpec({"axes": None, "keepdims": (0, 1), "noop_with_empty_axes": (0, 1)}),
    "BitShift": OpSpec({"direction": ("LEFT", "RIGHT")}),
    "CumProd": OpSpec({"exclusive": (0, 1), "reverse": (0, 1)}),
    "EyeLike": OpSpec({"dtype": None, "k": None}),
    "RMSNormalization": OpSpec({"axis": None, "epsilon": None, "stash_type": (1,)}),
    # fused transformer operators (kernels: jit_runtime.host_ops.attention_kernels)
    "Attention": OpSpec({"is_causal": (0, 1), "kv_num_heads": None, "q_num_heads": None, "scale": None,
                         "softcap": None, "softmax_precision": (1, 10, 11, 16), "qk_matmul_output_mode": (0, 1, 2, 3),
                         "left_window_size": None, "right_window_size": None}),
    "RotaryEmbedding": OpSpec({"interleaved": (0, 1), "num_heads": None, "rotary_embedding_dim": None}),
}
SUPPORTED_OPS: frozenset[str] = frozenset(OP_SPECS)
_DEFAULT_DOMAINS = ("", "ai.onnx")

# Element types the accelerator and the CPU kernels hold. Excluded: 8-, 4- and 2-bit floats and 4-/2-bit
# integers (no hardware or numpy arithmetic for them), strings and complex numbers.
TENSOR_TYPES: frozenset[int] = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
    onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16, onnx.TensorProto.UINT16,
    onnx.TensorProto.INT32, onnx.TensorProto.UINT32, onnx.TensorProto.INT64, onnx.TensorProto.UINT64,
    onnx.TensorProto.BOOL,
})


def type_name(elem_type: int) -> str:
    return onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else str(elem_type)


def attr_value(a: onnx.AttributeProto):
    """Python value of an ONNX attribute: strings decoded, tensors as numpy arrays."""
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    return v


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return attr_value(a)
    return default


def _spatial_rank(node: onnx.NodeProto, inits: Mapping[str, onnx.TensorProto]) -> int | None:
    k = _attr(node, "kernel_shape")
    if k is not None:
        return len(k) if isinstance(k, list) else None  # a malformed kernel_shape is the validator's to report
    w = node.input[3] if node.op_type == "QLinearConv" else (node.input[1] if len(node.input) > 1 else "")
    return len(inits[w].dims) - 2 if w in inits else None


@functools.lru_cache(maxsize=None)
def _arity(op_type: str) -> tuple[int, int, int, int] | None:
    """(min inputs, max inputs, min outputs, max outputs) over every opset of ``op_type``, None if unknown."""
    schemas = [s for s in onnx.defs.get_all_schemas_with_history() if s.name == op_type and s.domain in _DEFAULT_DOMAINS]
    if not schemas:
        return None
    return (min(s.min_input for s in schemas), max(s.max_input for s in schemas),
            min(s.min_output for s in schemas), max(s.max_output for s in schemas))


def _wrong_arity(node: onnx.NodeProto) -> bool:
    a = _arity(node.op_type)
    return a is not None and not (a[0] <= len(node.input) <= a[1] and a[2] <= len(node.output) <= a[3])


def node_support_key(node: onnx.NodeProto, inits: Mapping[str, onnx.TensorProto] | None = None) -> str | None:
    """None if the node is supported, else a label such as ``'MaxPool(storage_order=2)'``,
    ``'Conv(3-D)'``, ``'Gemm(attribute foo)'`` or ``'com.x.Foo'``."""
    if node.domain not in _DEFAULT_DOMAINS:
        return f"{node.domain}.{node.op_type}"
    spec = OP_SPECS.get(node.op_type)
    if spec is None:
        return node.op_type
    if _wrong_arity(node):
        return None  # a malformed node (input/output count outside the schema): the validator names it
    for a in node.attribute:
        if a.name not in spec.attrs:
            return f"{node.op_type}(attribute {a.name})"
        allowed = spec.attrs[a.name]
        if allowed is not None and attr_value(a) not in allowed:
            return f"{node.op_type}({a.name}={attr_value(a)!r}; allowed {list(allowed)})"
    if spec.spatial is not None:
        r = _spatial_rank(node, inits or {})
        if r is not None and r not in spec.spatial:
            return f"{node.op_type}({r}-D)"
    for key in ("to", "output_dtype"):
        t = _attr(node, key)
        if t and (not isinstance(t, int) or t not in TENSOR_TYPES):  # (a mangled attribute may hold a list)
            return f"{node.op_type}({key}={type_name(t) if isinstance(t, int) else repr(t)})"
    if node.op_type in ("Constant", "ConstantOfShape"):
        v = next((a for a in node.attribute if a.name == "value"), None)
        if v is not None and v.t.data_type not in TENSOR_TYPES:
            return f"{node.op_type}(value of type {type_name(v.t.data_type)})"
    return None


def _value_problem(vi: onnx.ValueInfoProto) -> str | None:
    t = vi.type
    kind = t.WhichOneof("value")
    if kind is None:
        return None
    if kind != "tensor_type":
        return f"{kind.replace('_type', '')} values (tensors only)"
    if t.tensor_type.elem_type and t.tensor_type.elem_type not in TENSOR_TYPES:
        return f"tensor type {type_name(t.tensor_type.elem_type)}"
    return None


def unsupported_reasons(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Unsupported feature label -> names of the nodes / tensors that use it (empty when all is supported)."""
    bad: dict[str, list[str]] = {}
    inits = {t.name: t for t in model.graph.initializer}
    for i, node in enumerate(model.graph.node):
        key = node_support_key(node, inits)
        if key is not None:
            bad.setdefault(key, []).append(node.name or f"<unnamed #{i}>")
    for vi in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        p = _value_problem(vi)
        if p is not None:
            bad.setdefault(p, []).append(vi.name)
    for t in model.graph.initializer:
        if t.data_type not in TENSOR_TYPES:
            bad.setdefault(f"tensor type {type_name(t.data_type)}", []).append(t.name)
    return bad


def check_supported(model: onnx.ModelProto) -> None:
    """Raise :class:`UnsupportedOperatorError` listing every unsupported operator, attribute or type and its users."""
    bad = unsupported_reasons(model)
    if bad:
        raise UnsupportedOperatorError(bad, sorted(SUPPORTED_OPS))
