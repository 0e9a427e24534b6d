"""QDQ int8 models (onnxruntime quantize_static, QLinear ops) and the built-in quantizer."""
from __future__ import annotations

import logging

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.zoo.builder import OnnxBuilder
from tests.compiler.helpers import cosine

logging.getLogger().setLevel(logging.ERROR)
RNG = np.random.default_rng(4)


def small_cnn(seed=0, act="Relu"):
    b = OnnxBuilder(seed)
    y = b.op("Relu", [b.conv("input", 3, 16, 3)]) if act == "Relu" else b.conv("input", 3, 16, 3)
    y = b.conv_bn(y, 16, 32, 3, stride=2, act="Relu6")
    z = b.conv_bn(y, 32, 32, 3, act=None)
    y = b.op("Relu", [b.op("Add", [y, z])])
    y = b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    return b.model("small", "input", (1, 3, 12, 12), b.gemm(y, 32, 10))


def _convs(q) -> int:
    """AccelConv2D layers expected of ``small_cnn``'s quantized model: its 3 convs, and a depthwise 1x1 conv for each
    BatchNormalization the quantizer left standalone (onnxruntime <= 1.30's ``quant_pre_process`` does not fold
    them into the convs; 1.32's does)."""
    return 3 + sum(n.op_type == "BatchNormalization" for n in q.graph.node)


def _calib(n=8):
    return [{"input": RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1])
def test_ort_qdq_model_matches_onnxruntime_int8(seed):
    # reduce_range: 7-bit weights keep onnxruntime's AVX2 u8s8 kernels free of int16 saturation,
    # so onnxruntime's fused int8 result is a faithful reference.
    q = ort_quantize_static(small_cnn(seed), _calib(), reduce_range=True)
    m = build(q, target="ref")
    assert m.compiled.stats["ops"].get("AccelConv2D") == _convs(q) and m.compiled.stats["ops"].get("AccelDense") == 1
    for _ in range(3):
        x = RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)
        assert cosine(m(input=x), ort_run(q, {"input": x})[0]) >= 0.999


def test_symmetric_model_folds_the_post_add_relu_into_qadd():
    q = ort_quantize_static(small_cnn(1), _calib())  # symmetric activations: ORT keeps Add -> Q -> DQ -> Relu -> Q
    m = build(q, target="ref")
    ops = m.compiled.stats["ops"]
    fused = [n.attrs["residual"] for n in m.graph.nodes if n.attrs.get("residual") is not None]
    assert len(fused) == 1 and "QAdd" not in ops and "Relu" not in ops  # the QAdd runs in a conv's epilogue
    qadd = fused[0].params
    assert qadd.out_zp == 0 and qadd.out_min == 0
    x = RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)
    assert cosine(m(input=x), _ort_basic(q).run(None, {"input": x})[0]) >= 0.999


def test_ort_qdq_8bit_weights_match_qdq_reference_semantics():
    q = ort_quantize_static(small_cnn(2), _calib())
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC  # DQ -> float op -> Q, exact
    sess = ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
    m = build(q, target="ref")
    x = RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)
    assert cosine(m(input=x), sess.run(None, {"input": x})[0]) >= 0.999


def test_builtin_quantizer_close_to_float():
    model = small_cnn(3)
    calib = np.concatenate([c["input"] for c in _calib(16)])
    m = build(model, target="ref", calibration=calib)
    ops = m.compiled.stats["ops"]
    assert ops["AccelConv2D"] == 3 and ops["AccelDense"] == 1 and "Relu" not in ops and "QAdd" not in ops
    # relu in the QAdd, fused into the conv epilogue
    assert sum(n.attrs.get("residual") is not None for n in m.graph.nodes) == 1
    conv_relu = next(n for n in m.graph.nodes if n.op == "AccelConv2D")
    assert conv_relu.attrs["requant"].relu  # relu folded into the first conv's epilogue
    relu6 = [n for n in m.graph.nodes if n.op == "AccelConv2D"][1].attrs["requant"]
    assert relu6.out_min == 0 and 0 < relu6.out_max <= 127  # Clip(0, 6) folded as an output range
    for _ in range(3):
        x = RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)
        assert cosine(m(input=x), ort_run(model, {"input": x})[0]) >= 0.995


def test_qlinearconv_and_qlinearmatmul_models():
    x_s, w_s, y_s = np.float32(0.02), np.array([0.01, 0.02, 0.015, 0.01], np.float32), np.float32(0.05)
    w = RNG.integers(-100, 100, (4, 2, 3, 3)).astype(np.int8)
    b = RNG.integers(-500, 500, 4).astype(np.int32)
    wm = RNG.integers(-100, 100, (4 * 5 * 5, 6)).astype(np.int8)
    z = np.int8(0)
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in
             [("xs", x_s), ("xz", z), ("w", w), ("ws", w_s), ("wz", np.zeros(4, np.int8)), ("ys", y_s), ("yz", z),
              ("b", b), ("wm", wm), ("wms", np.float32(0.01)), ("os", np.float32(0.1)), ("shape", np.array([1, -1]))]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["yq"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["yq", "shape"], ["fq"]),
             helper.make_node("QLinearMatMul", ["fq", "ys", "yz", "wm", "wms", "xz", "os", "yz"], ["oq"]),
             helper.make_node("DequantizeLinear", ["oq", "os", "yz"], ["out"])]
    graph = helper.make_graph(nodes, "ql", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    m = build(model, target="ref")
    assert m.compiled.stats["ops"].get("AccelConv2D") == 1 and m.compiled.stats["ops"].get("AccelDense") == 1
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    ours, ref = m(x=x), ort_run(model, {"x": x})[0]
    assert np.abs(ours - ref).max() <= 0.1 + 1e-6  # at most one output quantum
    assert cosine(ours, ref) >= 0.999


def _ort_basic(q):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC  # DQ -> float op -> Q
    return ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("per_channel", [False, True])
def test_asymmetric_activation_model_runs_on_the_accelerator(per_channel):
    q = ort_quantize_static(small_cnn(5), _calib(4), symmetric_activations=False, per_channel=per_channel)
    m = build(q, target="ref")
    ops = m.compiled.stats["ops"]
    assert ops.get("AccelConv2D") == _convs(q) and ops.get("AccelDense") == 1 and "Conv" not in ops
    assert "QAdd" not in ops and "Add" not in ops  # the residual add stays integer, fused into a conv epilogue
    assert sum(n.attrs.get("residual") is not None for n in m.graph.nodes) == 1
    assert any(n.attrs.get("pad_value") for n in m.graph.nodes if n.op == "AccelConv2D")
    sess = _ort_basic(q)
    for _ in range(3):
        x = RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)
        assert cosine(m(input=x), sess.run(None, {"input": x})[0]) >= 0.999
