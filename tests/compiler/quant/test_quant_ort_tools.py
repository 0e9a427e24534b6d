"""compiler.quant.ort_tools on models exporters write at opsets older than 13."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(29)


def test_per_channel_on_an_opset11_model_gives_a_valid_model():
    """onnxruntime writes DequantizeLinear(axis=...) per-channel weights, which opset 11 lacks: the helper
    converts to opset 13 first, and the result runs in onnxruntime and on the accelerator path."""
    w = numpy_helper.from_array((RNG.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    clip = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.float32(v)))
            for n, v in (("lo", 0.0), ("hi", 6.0))]
    nodes = [*clip, helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    g = helper.make_graph(nodes, "o11", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], ir_version=6)
    calib = [{"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    q = ort_quantize_static(model, calib, per_channel=True, defaults=True)
    assert next(o.version for o in q.opset_import if o.domain == "") >= 13
    dq_w = [n for n in q.graph.node if n.op_type == "DequantizeLinear" and n.input[0].startswith("w")]
    assert dq_w and numpy_helper.to_array(next(t for t in q.graph.initializer if t.name == dq_w[0].input[1])).size == 16
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    mod = build(q, target="ref")
    assert mod.compiled.stats["ops"].get("AccelConv2D") == 1
    assert cosine(mod.run({"x": x})[0], ort_run(q, {"x": x}, basic=True)[0]) >= 0.999
