"""Integer products with zero points on the accelerator: onnxruntime's default QDQ attention MatMuls (uint8
asymmetric activations x activations) and quantize_dynamic's MatMulInteger/ConvInteger, exact against the integer
definitions (numpy references, onnx's reference evaluator)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.executor import build
from compiler.graph.offload import HostFallbackWarning
from jit_runtime.host_ops.requant import apply_requant
from jit_runtime.host_ops.zero_point import (byte_count, byte_epilogue, digit_columns, digit_weights, join_bytes,
                                             row_sum_digits, zero_point_bias)

RNG = np.random.default_rng(23)


def _model(nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, "zp", inputs, outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _build_both(model):
    """(ref module, sim module), asserting no layer falls back to the host."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostFallbackWarning)
        return [build(model, "pynq-z1", target=t, progress=False) for t in ("ref", "sim")]


# ---- host kernels -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("zb", [-128, -3, 1, 127])
def test_row_sum_digits_carry_minus_zb_times_the_row_sums(zb):
    k = 40
    a = RNG.integers(-128, 128, (6, k)).astype(np.int8)
    a[0] = -128  # the extreme row sums
    a[1] = 127
    j = digit_columns(abs(zb) * 128 * k)
    ext = row_sum_digits(a, zb, j)
    assert ext.dtype == np.int8 and ext.shape == (6, k + j)
    np.testing.assert_array_equal(ext[:, :k], a)
    got = ext[:, k:].astype(np.int64) @ digit_weights(j).astype(np.int64)
    np.testing.assert_array_equal(got, -zb * a.astype(np.int64).sum(axis=1))


def test_row_sum_digits_refuses_bad_operands_and_too_few_digits():
    with pytest.raises(ValueError, match="2-D int8"):
        row_sum_digits(np.zeros((2, 3), np.uint8), 5, 1)
    with pytest.raises(ValueError, match="digit"):
        row_sum_digits(np.full((1, 64), 127, np.int8), -128, 1)


def test_zero_point_bias_is_the_per_channel_term():
    w = RNG.integers(-128, 128, (5, 12)).astype(np.int8)
    za, zb = -77, 9
    b = zero_point_bias(w, za, zb, 12)
    want = -za * (w.astype(np.int64).sum(axis=1) - 12 * zb)
    np.testing.assert_array_equal(b, want)
    # with the identity (a - za)(w - zb) = a.w - zb rowsum(a) - za (rowsum(w) - K zb)
    a = RNG.integers(-128, 128, (3, 12)).astype(np.int64)
    lhs = (a - za) @ (w.astype(np.int64) - zb).T
    rhs = a @ w.astype(np.int64).T - zb * a.sum(axis=1, keepdims=True) + b
    np.testing.assert_array_equal(lhs, rhs)


@pytest.mark.parametrize("bound", [100, 40_000, 2_000_000, 2 ** 31 - 1])
def test_byte_epilogue_and_join_bytes_round_trip_int32(bound):
    """The reference epilogue (apply_requant, which the accelerator reproduces) on repeated channels with the
    byte offsets as bias, narrowed to int8 as the OUT scratchpad does, reassembles to the accumulators."""
    n_bytes = byte_count(bound)
    acc = RNG.integers(-bound, bound + 1, (7, 5)).astype(np.int64)
    acc[0, :2] = (-bound, bound)
    rq, offsets = byte_epilogue(5, n_bytes)
    out = apply_requant(np.tile(acc, (1, n_bytes)), offsets, rq, 1).astype(np.int8)
    np.testing.assert_array_equal(join_bytes(out, n_bytes, 1), acc)


def test_join_bytes_refuses_a_partial_byte_group():
    with pytest.raises(ValueError, match="multiple of 3 bytes"):
        join_bytes(np.zeros((2, 7), np.int8), 3, 1)


# ---- onnxruntime static QDQ defaults: activation x activation MatMul with zero points --------------------------------
def _act_matmul_model(za, zb, zy):
    """a, b (float) -> Q/DQ (uint8, zero points za, zb) -> MatMul -> Q/DQ (uint8, zy) -> y (float)."""
    inits = [("sa", np.float32(0.02)), ("za", np.uint8(za)), ("sb", np.float32(0.03)), ("zb", np.uint8(zb)),
             ("sy", np.float32(0.05)), ("zy", np.uint8(zy))]
    nodes = [helper.make_node("QuantizeLinear", ["a", "sa", "za"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["af"]),
             helper.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bf"]),
             helper.make_node("MatMul", ["af", "bf"], ["yf"]),
             helper.make_node("QuantizeLinear", ["yf", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 5, 12]),
           helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 12, 6])]
    return _model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 6])], inits)


@pytest.mark.parametrize("za,zb", [(128, 128), (140, 121), (0, 128), (128, 0), (255, 3)])
def test_asymmetric_activation_matmul_runs_exactly_on_the_accelerator(za, zb):
    """(0, 128): P x V with a softmax-like P (zero point 0); (128, 0): the weight side needs many digit columns, so
    the transposed product runs instead. The result is the integer definition of DQ -> MatMul -> Q."""
    m = _act_matmul_model(za, zb, 100)
    feed = {"a": RNG.normal(0, 1.5, (2, 5, 12)).astype(np.float32),
            "b": RNG.normal(0, 2.0, (2, 12, 6)).astype(np.float32)}
    ref, sim = _build_both(m)
    y = sim.run(feed)[0]
    np.testing.assert_array_equal(y, ref.run(feed)[0])
    assert sim.profile_summary()["accel_mac_fraction"] == 1.0
    aq = np.clip(np.rint(feed["a"] / np.float32(0.02)) + za, 0, 255).astype(np.int64)
    bq = np.clip(np.rint(feed["b"] / np.float32(0.03)) + zb, 0, 255).astype(np.int64)
    acc = (aq - za) @ (bq - zb)
    want = np.clip(np.rint(acc * (np.float64(np.float32(0.02)) * np.float64(np.float32(0.03)) / np.float32(0.05)))
                   + 100, 0, 255)
    y = np.rint(y / np.float32(0.05)).astype(np.int64) + 100  # back to the uint8 codes
    assert np.abs(y - want).max() <= 1  # the fixed-point multiplier may round a tie the other way
    assert np.mean(y == want) > 0.98


# ---- quantize_dynamic: MatMulInteger / ConvInteger -----------------------------------------------------------
def _matmul_integer_model(w, wz, x_shape, dynamic=True):
    """x (float) -> DynamicQuantizeLinear -> MatMulInteger(xq, w, xz, wz) -> y (int32); or x (uint8) and xz given."""
    inits = [("w", w), ("wz", wz)]
    if dynamic:
        nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])]
        ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    else:
        nodes = []
        ins = [helper.make_tensor_value_info("xq", TensorProto.UINT8, list(x_shape)),
               helper.make_tensor_value_info("xz", TensorProto.UINT8, [])]
    nodes.append(helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["y"]))
    return _model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits, opset=13)


@pytest.mark.parametrize("wdtype,per_column", [(np.int8, False), (np.uint8, True)])
def test_matmul_integer_runs_on_the_accelerator_exactly(wdtype, per_column):
    k, n = 24, 10
    if wdtype == np.int8:
        w = RNG.integers(-128, 128, (k, n)).astype(np.int8)
        wz = np.int8(0)
    else:  # uint8 weights whose zero point keeps w - wz within int8
        wz = RNG.integers(100, 150, n).astype(np.uint8) if per_column else np.uint8(128)
        w = (wz.astype(np.int64) + RNG.integers(-128, 128, (k, n))).clip(0, 255).astype(np.uint8)
    m = _matmul_integer_model(w, wz, (2, 3, k))
    x = RNG.normal(0.5, 2.0, (2, 3, k)).astype(np.float32)
    ref, sim = _build_both(m)
    y = sim.run({"x": x})[0]
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, ref.run({"x": x})[0])
    np.testing.assert_array_equal(y, ReferenceEvaluator(m).run(None, {"x": x})[0])  # the ONNX definition
    assert sim.profile_summary()["accel_mac_fraction"] == 1.0
    assert sim.compiled.stats["integer_ops_lowered"] == 1


def test_matmul_integer_full_range_where_onnxruntime_saturates():
    """Full-range uint8 x int8 data: onnxruntime on x86 saturates its int16 pair sums; we equal the definition."""
    k, n = 32, 8
    w = RNG.choice(np.array([-128, 127], np.int8), (k, n))
    m = _matmul_integer_model(w, np.int8(0), (4, k), dynamic=False)
    xq = RNG.choice(np.array([0, 255], np.uint8), (4, k))
    feed = {"xq": xq, "xz": np.uint8(3)}
    ref, sim = _build_both(m)
    y = sim.run(feed)[0]
    np.testing.assert_array_equal(y, (xq.astype(np.int64) - 3) @ w.astype(np.int64))
    np.testing.assert_array_equal(y, ref.run(feed)[0])


@pytest.mark.parametrize("pads,zp_const", [((1, 1, 1, 1), False), ((0, 1, 2, 0), True), ((0, 0, 0, 0), False)])
def test_conv_integer_runs_on_the_accelerator_exactly(pads, zp_const):
    """Padding holds the real zero: the run-time zero point pads on the host, a constant one is the conv's
    pad value."""
    c, o = 3, 5
    w = RNG.integers(-128, 128, (o, c, 3, 3)).astype(np.int8)
    inits = [("w", w), ("wz", np.int8(0))] + ([("xz", np.uint8(37))] if zp_const else [])
    ins = [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, c, 7, 7])]
    if not zp_const:
        ins.append(helper.make_tensor_value_info("xz", TensorProto.UINT8, []))
    nodes = [helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["y"], kernel_shape=[3, 3], pads=list(pads),
                              strides=[1, 2])]
    m = _model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits)
    feed = {"xq": RNG.integers(0, 256, (1, c, 7, 7)).astype(np.uint8)}
    if not zp_const:
        feed["xz"] = np.uint8(201)
    ref, sim = _build_both(m)
    y = sim.run(feed)[0]
    np.testing.assert_array_equal(y, ref.run(feed)[0])
    np.testing.assert_array_equal(y, ReferenceEvaluator(m).run(None, feed)[0])
    assert sim.profile_summary()["accel_mac_fraction"] == 1.0


def test_matmul_integer_left_on_the_host_is_named():
    """uint8 weights far from their zero point leave int8 after subtracting it: the layer stays on the host (still
    exact), named with the reason in the HostFallbackWarning."""
    w = np.concatenate([np.zeros((8, 2), np.uint8), np.full((8, 2), 255, np.uint8)], axis=1)
    m = _matmul_integer_model(w, np.uint8(100), (3, 8), dynamic=False)
    with pytest.warns(HostFallbackWarning, match="leaves int8"):
        mod = build(m, "pynq-z1", target="ref", progress=False)
    feed = {"xq": RNG.integers(0, 256, (3, 8)).astype(np.uint8), "xz": np.uint8(9)}
    np.testing.assert_array_equal(mod.run(feed)[0], ReferenceEvaluator(m).run(None, feed)[0])


def test_integer_layers_on_the_llvm_target_equal_the_definition():
    """The llvm target runs the byte epilogue and the zero-point glue like ref (its int8 layers on the CPU)."""
    w = RNG.integers(-128, 128, (24, 10)).astype(np.int8)
    m = _matmul_integer_model(w, np.int8(0), (4, 24), dynamic=False)
    feed = {"xq": RNG.integers(0, 256, (4, 24)).astype(np.uint8), "xz": np.uint8(77)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = build(m, "pynq-z1", target="llvm", progress=False).run(feed)[0]
    np.testing.assert_array_equal(got, (feed["xq"].astype(np.int64) - 77) @ w.astype(np.int64))
    m = _act_matmul_model(140, 121, 100)
    feed = {"a": RNG.normal(0, 1.5, (2, 5, 12)).astype(np.float32),
            "b": RNG.normal(0, 2.0, (2, 12, 6)).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = build(m, "pynq-z1", target="llvm", progress=False).run(feed)[0]
        want = build(m, "pynq-z1", target="ref", progress=False).run(feed)[0]
    np.testing.assert_array_equal(got, want)
