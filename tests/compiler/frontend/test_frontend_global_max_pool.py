"""GlobalMaxPool (torch's adaptive_max_pool2d(x, 1)): float exact, and int8 on ORT-quantized models."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler import build
from compiler.graph.offload import float_host_ops_between_accel
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(31)


def _model():
    w = numpy_helper.from_array((RNG.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    fc = numpy_helper.from_array((RNG.standard_normal((10, 16)) * 0.25).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalMaxPool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "gmp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w, fc])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_global_max_pool_float_matches_onnxruntime():
    model = _model()
    x = RNG.standard_normal((1, 3, 9, 7)).astype(np.float32)
    got = build(model, target="ref", quantize=False).run({"x": x})[0]
    np.testing.assert_allclose(got, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_global_max_pool_quantized_runs_in_int8_between_accelerator_layers():
    calib = [{"x": RNG.standard_normal((1, 3, 9, 7)).astype(np.float32)} for _ in range(4)]
    q = ort_quantize_static(_model(), calib, per_channel=False, defaults=True)
    mod = build(q, target="ref")
    ops = mod.compiled.stats["ops"]
    assert ops.get("AccelConv2D") == 1 and ops.get("AccelDense") == 1
    assert float_host_ops_between_accel(mod.graph) == []
    x = RNG.standard_normal((1, 3, 9, 7)).astype(np.float32)
    assert cosine(mod.run({"x": x})[0], ort_run(q, {"x": x}, basic=True)[0]) >= 0.999
