"""Integer QAdd/QMul/QLookup/QGlobalAveragePool against float QDQ semantics, and the offload report."""
from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.graph.offload import HostFallbackWarning
from jit_runtime.host_ops.int_elementwise import choose_qadd, choose_qgap, choose_qmul, lookup_table, qadd, qgap, qlookup, qmul
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(5)


def _q(real, s, z):
    return np.clip(np.rint(real / s) + z, -128, 127).astype(np.int64)


def test_qadd_with_differing_scales_matches_float_within_one_step():
    a, b = RNG.integers(-128, 128, 4000), RNG.integers(-128, 128, 4000)
    (sa, za), (sb, zb), (sy, zy) = (0.031, -7), (0.0047, 60), (0.05, -20)
    p = choose_qadd(sa, za, sb, zb, sy, zy)
    ref = _q((a - za) * sa + (b - zb) * sb, sy, zy)
    got = qadd(a.astype(np.int8), b.astype(np.int8), p).astype(np.int64)
    assert np.abs(got - ref).max() <= 1 and np.mean(got == ref) > 0.99
    # hand-computed: (10 - 0) * 0.5 + (4 - 2) * 0.25 = 5.5 -> 5.5 / 1.0 rounds (half up) to 6, + zy 3 = 9
    assert int(qadd(np.int8(10), np.int8(4), choose_qadd(0.5, 0, 0.25, 2, 1.0, 3))) == 9
    relu = choose_qadd(sa, za, sb, zb, sy, zy, out_min=zy)
    assert qadd(a.astype(np.int8), b.astype(np.int8), relu).min() == zy


def test_qmul_and_qgap_match_float_within_one_step():
    a, b = RNG.integers(-128, 128, (2, 8, 5, 5)), RNG.integers(-128, 128, (2, 8, 1, 1))
    p = choose_qmul(0.02, 3, 0.004, -128, 0.01, -5)
    ref = _q((a - 3) * 0.02 * ((b + 128) * 0.004), 0.01, -5)
    assert np.abs(qmul(a.astype(np.int8), b.astype(np.int8), p) - ref).max() <= 1
    g = choose_qgap(0.02, 3, 0.015, -1, 25)
    ref = _q(((a - 3) * 0.02).mean(axis=(2, 3), keepdims=True), 0.015, -1)
    assert np.abs(qgap(a.astype(np.int8), g).astype(np.int64) - ref).max() <= 1


@pytest.mark.parametrize("shape,packed", [((1, 3, 4, 4, 2, 16), True), ((2, 5, 7, 9), False), ((1, 2, 300, 300), False)])
def test_qgap_sums_exactly(shape, packed):
    """The float32 sum (counts up to 2**16) and the int64 one (above) agree with an int64 reference, -128 maps too."""
    x = RNG.integers(-128, 128, shape).astype(np.int8)
    x.reshape(-1)[: x.size // 2] = -128
    axes = (2, 3)
    count = shape[2] * shape[3]
    g = choose_qgap(0.02, 3, 0.015, -1, count)
    s = x.astype(np.int64).sum(axis=axes, keepdims=True) - count * g.in_zp
    want = np.clip(((s * g.mult + (1 << (g.shift - 1))) >> g.shift) + g.out_zp, -128, 127)
    np.testing.assert_array_equal(qgap(x, g, packed=packed), want)


def test_lookup_table_is_the_quantized_function():
    hswish = lambda v: v * np.clip(v + 3, 0, 6) / 6  # noqa: E731
    t = lookup_table(hswish, 0.05, 10, 0.03, -100)
    v = np.array([-128, 10, 127], np.int8)
    expect = [_q(hswish((x - 10) * 0.05), 0.03, -100) for x in (-128, 10, 127)]
    np.testing.assert_array_equal(qlookup(v, t), expect)


def _qdq_residual_model(dilation: int = 2):
    """conv(x) with one scale, x with another, Add -> Relu -> Q, then a HardSwish and a dilated conv."""
    r = np.random.default_rng(0)
    inits = {"s1": np.float32(0.02), "z1": np.int8(5), "s2": np.float32(0.07), "z2": np.int8(-9),
             "s3": np.float32(0.05), "z3": np.int8(-128), "s4": np.float32(0.04), "z4": np.int8(-30),
             "w": r.integers(-100, 100, (16, 16, 3, 3)).astype(np.int8), "ws": np.float32(0.003), "wz": np.int8(0),
             "w2": r.integers(-100, 100, (16, 16, 3, 3)).astype(np.int8)}
    q, dq = "QuantizeLinear", "DequantizeLinear"
    nodes = [helper.make_node(q, ["x", "s1", "z1"], ["xq"]), helper.make_node(dq, ["xq", "s1", "z1"], ["xf"]),
             helper.make_node(dq, ["w", "ws", "wz"], ["wf"]), helper.make_node(dq, ["w2", "ws", "wz"], ["w2f"]),
             helper.make_node("Conv", ["xf", "wf"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node(q, ["c", "s2", "z2"], ["cq"]), helper.make_node(dq, ["cq", "s2", "z2"], ["cf"]),
             helper.make_node("Add", ["cf", "xf"], ["a"]), helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node(q, ["ar", "s3", "z3"], ["aq"]), helper.make_node(dq, ["aq", "s3", "z3"], ["af"]),
             helper.make_node("HardSwish", ["af"], ["h"]),
             helper.make_node(q, ["h", "s4", "z4"], ["hq"]), helper.make_node(dq, ["hq", "s4", "z4"], ["hf"]),
             helper.make_node("Conv", ["hf", "w2f"], ["d"], kernel_shape=[3, 3], pads=[dilation] * 4,
                              dilations=[dilation] * 2, name="dilated"),
             helper.make_node(q, ["d", "s2", "z2"], ["dq"]), helper.make_node(dq, ["dq", "s2", "z2"], ["y"])]
    graph = helper.make_graph(nodes, "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_residual_add_stays_integer_and_fallbacks_are_reported():
    # dilation 6: a zero-inserted 13x13 kernel would be 19x the MACs, so this conv stays on the host
    # (milder dilations run on the accelerator: tests/compiler/graph/test_graph_dilation_expand.py)
    model = _qdq_residual_model(dilation=6)
    with pytest.warns(HostFallbackWarning, match=r"dilated \(QConv2D\): dilations \(6, 6\)"):
        m = build(model, "pynq-z1", target="ref")
    ops = m.compiled.stats["ops"]
    assert ops.get("QLookup") == 1 and "Add" not in ops and "HardSwish" not in ops
    # the integer Add runs in the accelerator conv's epilogue (its other operand is the host conv's output)
    assert "QAdd" not in ops and sum(n.attrs.get("residual") is not None for n in m.graph.nodes) == 1
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = RNG.standard_normal((1, 16, 8, 8)).astype(np.float32)
    assert np.abs(m(x=x) - sess.run(None, {"x": x})[0]).max() <= 0.07 * 2 + 1e-6  # two output steps
    s = m.profile_summary()
    assert s["accel_mac_fraction"] == pytest.approx(0.5)  # two equal convs, the dilated one on the host
    assert "QAdd" not in s["host_ops"] and s["host_ops"]["QConv2D"] == 1
    assert s["end_to_end_ms"] == pytest.approx(s["accel_time_ms"] + s["cpu_time_ms"])


def test_fully_offloaded_model_does_not_warn():
    model = _qdq_residual_model(dilation=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostFallbackWarning)
        m = build(model, "pynq-z1", target="ref")
    m(x=np.zeros((1, 16, 8, 8), np.float32))
    assert m.profile_summary()["accel_mac_fraction"] == 1.0


def test_uint8_input_pad_and_concat_stay_integer():
    """uint8 graph input -> DQ -> Pad(0) -> Q -> conv ; concat(conv, input) with different scales -> Q -> DQ."""
    r = np.random.default_rng(2)
    inits = {"s0": np.float32(0.02), "z0": np.uint8(100), "s1": np.float32(0.05), "z1": np.uint8(120),
             "w": r.integers(-100, 100, (16, 16, 3, 3)).astype(np.int8), "ws": np.float32(0.004), "wz": np.int8(0),
             "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "s2": np.float32(0.03), "z2": np.uint8(128)}
    q, dq = "QuantizeLinear", "DequantizeLinear"
    nodes = [helper.make_node(dq, ["x", "s0", "z0"], ["xf"]), helper.make_node(dq, ["w", "ws", "wz"], ["wf"]),
             helper.make_node("Pad", ["xf", "pads"], ["p"]),
             helper.make_node(q, ["p", "s0", "z0"], ["pq"]), helper.make_node(dq, ["pq", "s0", "z0"], ["pf"]),
             helper.make_node("Conv", ["pf", "wf"], ["c"], kernel_shape=[3, 3]),
             helper.make_node(q, ["c", "s1", "z1"], ["cq"]), helper.make_node(dq, ["cq", "s1", "z1"], ["cf"]),
             helper.make_node("Concat", ["cf", "xf"], ["cat"], axis=1),
             helper.make_node(q, ["cat", "s2", "z2"], ["catq"]), helper.make_node(dq, ["catq", "s2", "z2"], ["y"])]
    graph = helper.make_graph(nodes, "u8", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 16, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    m = build(model, "pynq-z1", target="ref")
    ops = m.compiled.stats["ops"]
    assert ops.get("AccelConv2D") == 1 and ops.get("RebaseUint8") == 1
    assert "Conv" not in ops and ops.get("DequantizeLinear") == 1  # only the output's
    pad = next(n for n in m.graph.nodes if n.op == "Pad")
    assert m.graph.tensors[pad.outputs[0]].dtype == np.int8 and int(m.graph.constants[pad.inputs[2]]) == 100 - 128
    cat = next(n for n in m.graph.nodes if n.op == "Concat")
    assert cat.attrs["axis"] == 1 and m.graph.tensors[cat.outputs[0]].dtype == np.int8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = RNG.integers(0, 256, (1, 16, 6, 6)).astype(np.uint8)
    # the conv may be one of its steps (0.05) off float: up to two output steps (0.03) after the concat's requant
    assert np.abs(m(x=x) - sess.run(None, {"x": x})[0]).max() <= 0.06 + 1e-6


def test_qmul_extreme_operands_do_not_overflow():
    # the largest product (255 * 255) with a 15-bit multiplier and the largest shifts: int64 fallback keeps it exact
    for sa, sy in ((0.5, 1.0), (1e-4, 1.0), (1e-6, 1.0)):
        p = choose_qmul(sa, -128, 1.0, -128, sy, 0)
        got = qmul(np.array([127], np.int8), np.array([127], np.int8), p)
        assert int(got[0]) == int(np.clip(np.floor(255 * 255 * sa / sy + 0.5), -128, 127)), (sa, p)


def test_add_and_mul_with_quantized_constants_stay_integer():
    """x -> Q -> DQ -> Add(DQ(uint8 const bias)) -> Q -> DQ -> Mul(DQ(int8 const)) -> Q -> DQ."""
    r = np.random.default_rng(4)
    inits = {"s": np.float32(0.05), "z": np.int8(3), "bq": r.integers(0, 256, (1, 8, 1, 1)).astype(np.uint8),
             "bs": np.float32(0.02), "bz": np.uint8(130), "mq": r.integers(-128, 128, (8, 1, 1)).astype(np.int8),
             "ms": np.float32(0.01), "mz": np.int8(0), "s2": np.float32(0.06), "z2": np.int8(-4),
             "s3": np.float32(0.004), "z3": np.int8(1)}
    q, dq = "QuantizeLinear", "DequantizeLinear"
    nodes = [helper.make_node(q, ["x", "s", "z"], ["xq"]), helper.make_node(dq, ["xq", "s", "z"], ["xf"]),
             helper.make_node(dq, ["bq", "bs", "bz"], ["bf"]), helper.make_node(dq, ["mq", "ms", "mz"], ["mf"]),
             helper.make_node("Add", ["xf", "bf"], ["a"]),
             helper.make_node(q, ["a", "s2", "z2"], ["aq"]), helper.make_node(dq, ["aq", "s2", "z2"], ["af"]),
             helper.make_node("Mul", ["mf", "af"], ["m"]),
             helper.make_node(q, ["m", "s3", "z3"], ["mq2"]), helper.make_node(dq, ["mq2", "s3", "z3"], ["y"])]
    graph = helper.make_graph(nodes, "consts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    m = build(model, "pynq-z1", target="ref")
    ops = m.compiled.stats["ops"]
    assert ops.get("QAdd") == 1 and ops.get("QMul") == 1 and "Add" not in ops and "Mul" not in ops
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = RNG.standard_normal((1, 8, 4, 4)).astype(np.float32) * 3
    # the Add may be one step (0.06) off, scaled by |const| <= 1.28 into the Mul's steps (0.004): 20 steps + 1
    ours, ref = m(x=x), sess.run(None, {"x": x})[0]
    assert np.abs(ours - ref).max() <= 0.06 * 1.28 + 0.004 + 1e-6 and cosine(ours, ref) >= 0.999


@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
                                   {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}])
def test_average_pool_is_integer_and_matches_qdq(attrs):
    inits = {"s": np.float32(0.05), "z": np.int8(-20), "s2": np.float32(0.03), "z2": np.int8(7)}
    q, dq = "QuantizeLinear", "DequantizeLinear"
    nodes = [helper.make_node(q, ["x", "s", "z"], ["xq"]), helper.make_node(dq, ["xq", "s", "z"], ["xf"]),
             helper.make_node("AveragePool", ["xf"], ["p"], **attrs),
             helper.make_node(q, ["p", "s2", "z2"], ["pq"]), helper.make_node(dq, ["pq", "s2", "z2"], ["y"])]
    graph = helper.make_graph(nodes, "avg", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 7, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    m = build(model, "pynq-z1", target="ref")
    assert m.compiled.stats["ops"].get("QAveragePool") == 1 and "AveragePool" not in m.compiled.stats["ops"]
    # onnxruntime also returns the float average before requantization: the reference for every output
    model.graph.output.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = RNG.standard_normal((1, 4, 7, 9)).astype(np.float32) * 3
    ref, p = sess.run(None, {"x": x})
    ours = m(x=x)
    code, ref_code = np.rint(ours / 0.03) + 7, np.rint(ref / 0.03) + 7
    exact = np.clip(p.astype(np.float64) / 0.03 + 7, -128, 127)  # the average in output steps, before rounding
    tie = np.abs(exact - np.floor(exact) - 0.5) < 1e-3
    # away from ties both round to the nearest step; at a tie (2x2 windows make many) ours rounds half up,
    # onnxruntime half to even, so ours is one of the two neighbours
    assert np.array_equal(code[~tie], ref_code[~tie])
    assert np.all((code[tie] == np.floor(exact[tie])) | (code[tie] == np.ceil(exact[tie])))
    assert np.abs(ours - ref).max() <= 0.03 + 1e-6


def test_qadd_broadcasts_a_smaller_first_operand():
    """``Add(bias, x)`` as torch.onnx writes it (the constant first): the same as ``Add(x, bias)``."""
    bias, x = RNG.integers(-128, 128, 8).astype(np.int8), RNG.integers(-128, 128, (2, 3, 8)).astype(np.int8)
    ab, ba = choose_qadd(0.02, 1, 0.05, -3, 0.06, 2), choose_qadd(0.05, -3, 0.02, 1, 0.06, 2)
    got = qadd(bias, x, ab)
    assert got.shape == (2, 3, 8) and np.array_equal(got, qadd(x, bias, ba))
    assert np.abs(got.astype(np.int64) - _q((bias - 1) * 0.02 + (x.astype(np.int64) + 3) * 0.05, 0.06, 2)).max() <= 1
