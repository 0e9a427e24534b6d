"""MaxPool on packed int8 activations equals the plain-layout MaxPool."""
from __future__ import annotations

import numpy as np
import pytest

from jit_runtime.host_ops.kernels import KERNELS
from jit_runtime.host_ops.pool_kernels import packed_max_pool
from compiler.graph.accel_interface import pack_activation, unpack_activation


@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
                                   {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [0, 1, 2, 0]}])
def test_packed_max_pool_matches_plain(attrs):
    x = np.random.default_rng(0).integers(-128, 128, (2, 20, 9, 7)).astype(np.int8)
    # the plain reference computed independently: windows of the -128-padded tensor
    expect = KERNELS["MaxPool"](attrs, x)
    got = unpack_activation(packed_max_pool(attrs, pack_activation(x, 1, 16)), 2, 20)
    np.testing.assert_array_equal(got, expect)
    assert got.dtype == np.int8


def test_block_aligned_channel_concat_stays_packed():
    from onnx import TensorProto, helper, numpy_helper

    from compiler.executor import build

    r = np.random.default_rng(1)
    inits = {"s": np.float32(0.05), "z": np.int8(0), "ws": np.float32(0.01), "wz": np.int8(0),
             "w1": r.integers(-100, 100, (16, 8, 1, 1)).astype(np.int8),
             "w2": r.integers(-100, 100, (20, 8, 1, 1)).astype(np.int8),
             "w3": r.integers(-100, 100, (8, 36, 1, 1)).astype(np.int8)}
    q, dq = "QuantizeLinear", "DequantizeLinear"
    nodes = [helper.make_node(q, ["x", "s", "z"], ["xq"]), helper.make_node(dq, ["xq", "s", "z"], ["xf"])]
    for w, y in (("w1", "a"), ("w2", "b")):
        nodes += [helper.make_node(dq, [w, "ws", "wz"], [w + "f"]), helper.make_node("Conv", ["xf", w + "f"], [y + "c"]),
                  helper.make_node(q, [y + "c", "s", "z"], [y + "q"]), helper.make_node(dq, [y + "q", "s", "z"], [y])]
    nodes += [helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
              helper.make_node(q, ["cat", "s", "z"], ["catq"]), helper.make_node(dq, ["catq", "s", "z"], ["catf"]),
              helper.make_node(dq, ["w3", "ws", "wz"], ["w3f"]), helper.make_node("Conv", ["catf", "w3f"], ["o"]),
              helper.make_node(q, ["o", "s", "z"], ["oq"]), helper.make_node(dq, ["oq", "s", "z"], ["y"])]
    graph = helper.make_graph(nodes, "cat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    m = build(model, "pynq-z1", target="ref")
    ops = m.compiled.stats["ops"]
    assert ops.get("AccelConv2D") == 3 and ops.get("Concat") == 1 and ops.get("PackActivation") == 1  # the input only
    x = r.standard_normal((1, 8, 5, 5)).astype(np.float32)
    # reference: the same model with the concat on plain tensors (integer, exact)
    from compiler.graph import layout

    orig = layout._packed_channel_concat
    layout._packed_channel_concat = lambda *a: False
    try:
        plain = build(model, "pynq-z1", target="ref")
    finally:
        layout._packed_channel_concat = orig
    assert plain.compiled.stats["ops"].get("PackActivation") == 2
    np.testing.assert_array_equal(m(x=x), plain(x=x))
