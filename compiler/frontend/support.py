"""Which ONNX operators the frontend accepts, checked before any other work."""
from __future__ import annotations

import onnx
from onnx import numpy_helper

from compiler.frontend.errors import UnsupportedOperatorError

SUPPORTED_OPS: frozenset[str] = frozenset({
    "Conv", "Gemm", "MatMul", "Relu", "Clip", "Add", "Sub", "Mul", "Div", "MaxPool", "AveragePool",
    "GlobalAveragePool", "Flatten", "Reshape", "Concat", "BatchNormalization", "Softmax", "HardSigmoid",
    "HardSwish", "PRelu", "LeakyRelu", "Sigmoid", "Transpose", "Pad", "Resize", "QuantizeLinear",
    "DequantizeLinear", "QLinearConv", "QLinearMatMul", "Identity", "Dropout", "Constant", "Shape",
    "Gather", "Unsqueeze", "Squeeze", "Cast",
})
_DEFAULT_DOMAINS = ("", "ai.onnx")


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


def node_support_key(node: onnx.NodeProto) -> str | None:
    """None if the node is supported, else a label like ``'Resize(mode=linear)'`` or ``'com.x.Foo'``."""
    if node.domain not in _DEFAULT_DOMAINS:
        return f"{node.domain}.{node.op_type}"
    if node.op_type not in SUPPORTED_OPS:
        return node.op_type
    if node.op_type == "Resize" and _attr(node, "mode", "nearest") != "nearest":
        return f"Resize(mode={_attr(node, 'mode')})"
    kernel = _attr(node, "kernel_shape", [1, 1])
    if node.op_type in ("MaxPool", "AveragePool") and isinstance(kernel, list) and len(kernel) != 2:
        return f"{node.op_type}({len(kernel)}-D)"  # a kernel_shape that is not a list is left to the validator
    if node.op_type == "Pad" and _attr(node, "mode", "constant") not in ("constant", "reflect", "edge", "wrap"):
        return f"Pad(mode={_attr(node, 'mode')})"
    return None


def check_supported(model: onnx.ModelProto) -> None:
    """Raise :class:`UnsupportedOperatorError` listing every unsupported op type and its nodes."""
    bad: dict[str, list[str]] = {}
    for i, node in enumerate(model.graph.node):
        key = node_support_key(node)
        if key is not None:
            bad.setdefault(key, []).append(node.name or f"<unnamed #{i}>")
    if bad:
        raise UnsupportedOperatorError(bad, sorted(SUPPORTED_OPS))
