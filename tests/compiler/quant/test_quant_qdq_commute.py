"""Q/DQ moved across the ops they commute with (compiler.quant.qdq_commute): exact, and what it exposes."""
from __future__ import annotations

import copy

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.frontend.onnx_import import onnx_to_graph
from compiler.graph.evaluate import evaluate_graph
from compiler.graph.offload import float_host_ops_between_accel
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.quant.qdq_commute import commute_qdq
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(5)


def _init(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


def test_rewrites_are_exact_on_a_hand_built_graph():
    """DQ -> MaxPool (padded) -> Q, float op -> Reshape -> Q, float op -> MaxPool -> Q: same values after."""
    inits = [_init("s", np.float32(0.05)), _init("z", np.int8(3)), _init("s2", np.float32(0.11)),
             _init("z2", np.int8(-7)), _init("shape", np.array([1, -1], np.int64))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
             helper.make_node("MaxPool", ["xf"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq0"]),                 # cancels after sinking
             helper.make_node("Identity", ["pq0"], ["pq"]),
             helper.make_node("Sigmoid", ["xf"], ["sg"]),
             helper.make_node("MaxPool", ["sg"], ["sp"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1]),
             helper.make_node("QuantizeLinear", ["sp", "s2", "z2"], ["spq"]),              # Q hoisted over MaxPool
             helper.make_node("GlobalAveragePool", ["xf"], ["gap"]),
             helper.make_node("Reshape", ["gap", "shape"], ["flat"]),
             helper.make_node("QuantizeLinear", ["flat", "s2", "z2"], ["y"])]              # Q hoisted over Reshape
    outs = [helper.make_tensor_value_info(n, TensorProto.INT8, None) for n in ("pq", "spq", "y")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 4, 7, 7])], outs,
                              inits)
    g = onnx_to_graph(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8))
    before = copy.deepcopy(g)
    assert commute_qdq(g) == 4  # one sink, one cancel, two hoists
    ops = [n.op for n in g.nodes]
    assert ops.count("DequantizeLinear") == 1 and ops.count("QuantizeLinear") == 2
    pools = [n for n in g.nodes if n.op == "MaxPool"]
    assert len(pools) == 2 and all(g.tensors[n.inputs[0]].dtype == np.int8 for n in pools)
    for _ in range(3):
        x = RNG.integers(-128, 128, (1, 4, 7, 7), dtype=np.int8)
        want, got = evaluate_graph(before, {"x": x}), evaluate_graph(g, {"x": x})
        for k in ("pq", "spq", "y"):
            np.testing.assert_array_equal(got[k], want[k])


def test_opset11_float_pool_chain_between_accel_layers_runs_in_int8():
    """onnxruntime at opset 11 leaves ``DQ -> MaxPool -> AveragePool -> Flatten -> Q`` in float (as in inception
    heads). DQ sinks under the MaxPool, Q rises over the Flatten: int8 MaxPool, integer QAveragePool, no float
    op left between the accelerator layers, results match onnxruntime."""
    w1 = _init("w1", (RNG.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32))
    fc = _init("fc", (RNG.standard_normal((10, 16 * 4 * 4)) * 0.05).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["a"], ["f"]), helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "o11", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w1, fc])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)
    calib = [{"x": RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(4)]
    q = ort_quantize_static(model, calib, per_channel=False, defaults=True)
    qops = [n.op_type for n in q.graph.node]
    i = qops.index("MaxPool")
    assert qops[i - 1:i + 4] == ["DequantizeLinear", "MaxPool", "AveragePool", "Flatten", "QuantizeLinear"]
    sim, ref = build(q, target="sim"), build(q, target="ref")
    ops = sim.compiled.stats["ops"]
    assert ops.get("AccelConv2D") == 1 and ops.get("AccelDense") == 1 and "AveragePool" not in ops
    assert float_host_ops_between_accel(sim.graph) == []
    x = RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)
    ours = sim.run({"x": x})[0]
    np.testing.assert_array_equal(ours, ref.run({"x": x})[0])
    assert cosine(ours, ort_run(q, {"x": x}, basic=True)[0]) >= 0.999


def test_layout_op_between_different_quantizers_runs_on_int8_after_a_requant_table():
    """Q(s1) -> DQ -> MaxPool -> Flatten -> Q(s2): the int8 data is requantized by an identity table (exactly
    Q(DQ(x))) and pooled/flattened as int8; results equal onnxruntime's on every element."""
    inits = [_init("s1", np.float32(0.03)), _init("z1", np.int8(4)), _init("s2", np.float32(0.047)),
             _init("z2", np.int8(-11))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s1", "z1"], ["xf"]),
             helper.make_node("MaxPool", ["xf"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("QuantizeLinear", ["f", "s2", "z2"], ["fq"]),
             helper.make_node("DequantizeLinear", ["fq", "s2", "z2"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 36])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    mod = build(model, target="ref")
    ops = mod.compiled.stats["ops"]
    assert ops.get("QLookup") == 1 and ops.get("Flatten") == 1 and ops.get("DequantizeLinear") == 1
    for _ in range(3):
        x = (RNG.standard_normal((1, 4, 6, 6)) * 3).astype(np.float32)
        np.testing.assert_array_equal(mod.run({"x": x})[0], ort_run(model, {"x": x}, basic=True)[0])
