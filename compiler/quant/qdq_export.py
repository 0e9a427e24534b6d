"""Export the built-in quantizer's result as a QDQ ONNX model that onnxruntime can run.

The exported model is "our quantized graph": BatchNorm folded, activation Q/DQ pairs with the
calibrated symmetric scales of :func:`insert_qdq`, weights as ``DequantizeLinear(int8, per-channel
scale)`` and biases as ``DequantizeLinear(int32, in_scale * w_scale)`` -- the same integers that
:func:`lower_qdq` derives when it compiles the float model with the same calibration data.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.frontend.onnx_import import load_model, onnx_to_graph
from compiler.graph.bn_fold import fold_batchnorm
from compiler.graph.const_fold import fold_constants
from compiler.graph.ir import Graph, Node
from compiler.quant.calibrate import QUANT_OPS, insert_qdq
from compiler.quant.qdq_lower import quantize_bias, quantize_weight_per_channel, weight_out_axis

EXPORT_OPSET = 13


def _add_dq(g: Graph, q_name: str, scale: np.ndarray, axis: int | None, base: str) -> str:
    s = g.add_constant(g.fresh_name(f"{base}/scale"), np.asarray(scale, np.float32))
    out = g.fresh_name(f"{base}/dq")
    g.set_info(out, g.tensors[q_name].shape, np.float32)
    attrs = {} if axis is None else {"axis": axis}
    g.nodes.append(Node("DequantizeLinear", [q_name, s], [out], attrs, out))
    return out


def quantize_weights_qdq(g: Graph) -> int:
    """Replace float weights/biases of Q/DQ-covered ops by DQ(int8)/DQ(int32); returns how many ops."""
    prod = g.producers()
    count = 0
    for n in list(g.nodes):
        if n.op not in QUANT_OPS or n.inputs[1] not in g.constants:
            continue
        dq = prod.get(n.inputs[0])
        if dq is None or dq.op != "DequantizeLinear":
            continue
        w = g.constants[n.inputs[1]]
        if not np.issubdtype(w.dtype, np.floating):
            continue
        axis = weight_out_axis(n)
        wq, w_scale = quantize_weight_per_channel(w.astype(np.float64), axis)
        in_scale = float(np.asarray(g.constants[dq.inputs[1]]).reshape(()))
        wq_name = g.add_constant(g.fresh_name(f"{n.name}/wq"), wq)
        n.inputs[1] = _add_dq(g, wq_name, w_scale, axis, f"{n.name}/w")
        if len(n.inputs) > 2 and n.inputs[2] in g.constants:
            acc_scale = in_scale * w_scale  # rounded as lower_qdq rounds it; stored as float32
            b = np.asarray(g.constants[n.inputs[2]], np.float64).reshape(-1)
            bq = quantize_bias(b, acc_scale)
            bq_name = g.add_constant(g.fresh_name(f"{n.name}/bq"), bq)
            n.inputs[2] = _add_dq(g, bq_name, acc_scale.astype(np.float32), 0, f"{n.name}/b")
        count += 1
    g.toposort()
    return count


def _attr_value(v):
    if isinstance(v, np.ndarray):
        return numpy_helper.from_array(v)
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    if isinstance(v, tuple):
        return list(v)
    return v


def graph_to_onnx(g: Graph, opset: int = EXPORT_OPSET) -> onnx.ModelProto:
    """Serialize a graph of standard ONNX ops (no internal ops) as a checked ModelProto."""
    internal = sorted({n.op for n in g.nodes if n.op.startswith(("Accel", "Q", "Pack", "Unpack"))
                       and n.op not in ("QuantizeLinear",)})
    if internal:
        raise ValueError(f"graph_to_onnx: the graph holds internal operators {internal}; export before lowering")

    def vi(name: str):
        t = g.tensors[name]
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(t.dtype), list(t.shape))

    used = {i for n in g.nodes for i in n.inputs if i}
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in g.constants.items() if k in used or k in g.outputs]
    nodes = [helper.make_node(n.op, list(n.inputs), list(n.outputs), name=n.name,
                              **{k: _attr_value(v) for k, v in n.attrs.items()}) for n in g.nodes]
    graph = helper.make_graph(nodes, g.name, [vi(i) for i in g.inputs], [vi(o) for o in g.outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8,
                              producer_name="vta-stack.qdq_export")
    onnx.checker.check_model(model)
    return model


def export_qdq_model(model: str | Path | onnx.ModelProto, calibration, *,
                     input_shapes: dict | None = None) -> onnx.ModelProto:
    """Quantize a float model with the built-in quantizer and return it as a QDQ ONNX model."""
    model = load_model(model)
    opset = max([EXPORT_OPSET] + [int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")])
    g = onnx_to_graph(model, input_shapes)
    fold_constants(g)
    fold_batchnorm(g)
    if insert_qdq(g, calibration) == 0:
        raise ValueError("export_qdq_model: the model has no Conv/Gemm/MatMul with constant weights to quantize")
    quantize_weights_qdq(g)
    g.remove_dead()
    return graph_to_onnx(g, opset)
