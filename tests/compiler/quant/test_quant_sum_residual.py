"""A residual written as a two-input ``Sum`` (Caffe2-era exports) quantizes and offloads like ``Add``."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(21)


def _sum_block(n_inputs: int):
    w = lambda *s: numpy_helper.from_array((RNG.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32),
                                           f"w{len(s)}{s[0]}{s[1]}")
    w1, w2, w3 = w(8, 3, 3, 3), w(8, 8, 3, 3), w(4, 8, 1, 1)
    nodes = [helper.make_node("Conv", ["x", w1.name], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Conv", ["ra", w2.name], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Sum", ["ra", "b"][:n_inputs], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Conv", ["r", w3.name], ["y"])]
    g = helper.make_graph(nodes, "sum", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w1, w2, w3])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_two_input_sum_residual_runs_in_the_conv_epilogue():
    model = _sum_block(2)
    calib = [{"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    q = ort_quantize_static(model, calib, per_channel=False, defaults=True)
    assert "Sum" in {n.op_type for n in q.graph.node}  # onnxruntime leaves Sum in float between DQ and Q
    sim, ref = build(q, target="sim"), build(q, target="ref")
    ops = sim.compiled.stats["ops"]
    assert ops.get("AccelConv2D") == 3 and not {"Sum", "Add", "Relu"} & set(ops)
    assert sum(n.attrs.get("residual") is not None for n in sim.graph.nodes) == 1
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    ours = sim.run({"x": x})[0]
    np.testing.assert_array_equal(ours, ref.run({"x": x})[0])
    assert cosine(ours, ort_run(q, {"x": x}, basic=True)[0]) >= 0.999


def test_one_input_sum_is_identity():
    model = _sum_block(1)
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    got = build(model, target="ref", quantize=False).run({"x": x})[0]
    np.testing.assert_allclose(got, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
