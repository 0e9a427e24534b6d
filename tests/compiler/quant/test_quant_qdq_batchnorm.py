"""A BatchNormalization no conv absorbs (pre-activation, DenseNet-style), quantized by onnxruntime: on the accelerator."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.graph.offload import float_host_ops_between_accel
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(23)


def _preact_model(c: int = 16):
    def he(*s):
        return (RNG.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)
    bn = [RNG.uniform(0.5, 1.5, c), RNG.standard_normal(c) * 0.1, RNG.standard_normal(c) * 0.1, RNG.uniform(0.5, 1.5, c)]
    inits = [numpy_helper.from_array(v, n) for n, v in (("w0", he(8, 3, 3, 3)), ("w1", he(8, 8, 3, 3)),
                                                         ("w2", he(8, c, 1, 1)))]
    inits += [numpy_helper.from_array(v.astype(np.float32), n) for n, v in zip(("g", "b", "m", "v"), bn)]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Conv", ["ra", "w1"], ["b1"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["ra", "b1"], ["cat"], axis=1),
             helper.make_node("BatchNormalization", ["cat", "g", "b", "m", "v"], ["bn"], epsilon=1e-5),
             helper.make_node("Relu", ["bn"], ["rbn"]), helper.make_node("Conv", ["rbn", "w2"], ["y"])]
    g = helper.make_graph(nodes, "preact", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("per_channel", [False, True])
def test_preactivation_batchnorm_runs_as_an_accelerator_depthwise_conv(per_channel):
    calib = [{"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    q = ort_quantize_static(_preact_model(), calib, per_channel=per_channel, defaults=True)
    assert "BatchNormalization" in {n.op_type for n in q.graph.node}  # onnxruntime keeps it in float
    sim, ref = build(q, target="sim"), build(q, target="ref")
    ops = sim.compiled.stats["ops"]
    assert "BatchNormalization" not in ops and ops.get("AccelConv2D") == 4
    assert float_host_ops_between_accel(sim.graph) == []
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    ours = sim.run({"x": x})[0]
    np.testing.assert_array_equal(ours, ref.run({"x": x})[0])
    assert cosine(ours, ort_run(q, {"x": x}, basic=True)[0]) >= 0.999
