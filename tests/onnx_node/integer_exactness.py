"""Count integer conv outputs that differ from the exact QDQ reference (issue 17, item 4).

A QDQ conv (int8 activations, per-channel int8 weights, int32 bias) is compiled with ``build`` and
compared with the QDQ semantics evaluated exactly: integer accumulators, the real rescale
``(acc + bias) * in_scale * w_scale / out_scale`` in float64, round half to even, saturate.
Outputs whose exact rescaled value is a rounding tie (x.5) are counted apart: either rounding is
defensible there.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from jit_runtime.host_ops.conv_kernels import int_conv2d_acc


def qdq_conv_case(seed: int = 0, c: int = 32, o: int = 48, hw: int = 14):
    """(model, x, expected int8 output, tie mask) for a padded 3x3 QDQ conv with seeded random data."""
    rng = np.random.default_rng(seed)
    xs, ys = np.float32(0.02), np.float32(0.05)
    wq = rng.integers(-127, 128, (o, c, 3, 3)).astype(np.int8)
    ws = (rng.uniform(0.5, 1.5, o) / 127 / 8).astype(np.float32)
    bq = rng.integers(-2000, 2000, o).astype(np.int32)
    bs = (np.float64(xs) * ws.astype(np.float64)).astype(np.float32)
    x = (rng.standard_normal((1, c, hw, hw)) * 0.8).astype(np.float32)
    inits = [numpy_helper.from_array(v, n) for n, v in (("xs", xs), ("xz", np.int8(0)), ("wq", wq), ("ws", ws),
                                                        ("bq", bq), ("bs", bs), ("ys", ys), ("yz", np.int8(0)))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["wq", "ws"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs"], ["bf"], axis=0),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    xq = np.clip(np.rint(x / xs), -128, 127).astype(np.int8)
    acc = int_conv2d_acc(xq, wq, stride=(1, 1), pads=(1, 1, 1, 1)).astype(np.int64) + bq.reshape(1, -1, 1, 1)
    real = acc * (np.float64(xs) * ws.astype(np.float64)).reshape(1, -1, 1, 1) / np.float64(ys)
    expect = np.clip(np.rint(real), -128, 127).astype(np.int8)
    ties = np.abs(real - np.floor(real)) == 0.5
    return model, x, expect, ties


def count_differences(target: str = "ref", seed: int = 0) -> dict:
    """Outputs of ``build`` differing from the exact QDQ result: total, one step, beyond one step, ties."""
    from compiler import build

    model, x, expect, ties = qdq_conv_case(seed)
    got = build(model, target=target).run({"x": x})[0].astype(np.int64)
    diff = np.abs(got - expect.astype(np.int64))
    off = (diff > 0) & ~ties
    return {"outputs": int(expect.size), "differ": int(off.sum()), "one_step": int((off & (diff == 1)).sum()),
            "beyond_one_step": int((diff > 1).sum()), "ties": int(ties.sum()),
            "fraction": float(off.sum()) / expect.size}
