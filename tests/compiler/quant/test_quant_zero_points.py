"""Zero points on the accelerator: exact integer convs (padding, stride, int8/uint8), uint8 rebasing, tap folding."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from jit_runtime.host_ops.conv_kernels import qconv2d
from compiler.executor import build
from compiler.graph.tap_fold import fold_plan, fold_taps
from jit_runtime.host_ops.requant import Requant, apply_requant

RNG = np.random.default_rng(11)


def qdq_conv_model(c, o, k, stride, pad, act_dtype, zx, zy, per_channel, hw=9, seed=0):
    """x -> Q(act_dtype, zx) -> DQ -> Conv(DQ(int8 w), int32 bias) -> Q(zy) -> DQ -> y."""
    r = np.random.default_rng(seed)
    w = r.integers(-127, 128, (o, c, k, k)).astype(np.int8)
    ws = (r.random(o) * 0.01 + 0.002).astype(np.float32) if per_channel else np.float32(0.006)
    xs, ys = np.float32(0.03), np.float32(0.5)
    b = r.integers(-3000, 3000, o).astype(np.int32)
    bs = (xs * ws).astype(np.float32) * np.ones(o, np.float32)
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in
             [("xs", xs), ("xz", np.asarray(zx, act_dtype)), ("w", w), ("ws", np.asarray(ws)),
              ("wz", np.zeros(o if per_channel else (), np.int8)), ("b", b), ("bs", bs), ("bz", np.zeros(o, np.int32)),
              ("ys", ys), ("yz", np.asarray(zy, act_dtype))]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bf"], axis=0),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"], kernel_shape=[k, k], strides=[stride, stride],
                              pads=[pad] * 4),
             helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "zp_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), w, b


def int_reference(xq, zx, w, b, rq, stride, pad):
    """Exact accumulators of sum(w * (x - zx)) with real-zero padding (int64 loops over taps), then the epilogue."""
    x = np.pad(xq.astype(np.int64) - zx, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    o, c, k, _ = w.shape
    oh = (x.shape[2] - k) // stride + 1
    ow = (x.shape[3] - k) // stride + 1
    acc = np.zeros((1, o, oh, ow), np.int64)
    for ky in range(k):
        for kx in range(k):
            patch = x[:, :, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (ow - 1) + 1:stride]
            acc += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx].astype(np.int64))
    crop = Requant(rq.pre_shift, np.asarray(rq.multiplier)[:o] if np.ndim(rq.multiplier) else rq.multiplier,
                   np.asarray(rq.shift)[:o] if np.ndim(rq.shift) else rq.shift, rq.relu, rq.out_min, rq.out_max,
                   zero_point=rq.zero_point)
    return apply_requant(acc, b, crop, 1)


CASES = [  # (C, O, k, stride, pad, activation dtype, zx, zy, per-channel, target)
    (5, 20, 3, 2, 1, np.int8, 37, -11, False, "ref"),
    (5, 20, 3, 2, 1, np.uint8, 200, 90, True, "ref"),
    (20, 24, 3, 2, 1, np.uint8, 7, 255, True, "ref"),  # not folded: the accelerator pads with the zero point
    (16, 16, 3, 1, 1, np.int8, -70, 5, True, "sim"),
    (3, 16, 7, 2, 3, np.uint8, 140, 128, False, "sim"),  # the stem: taps folded, zero point in the folded border
    (20, 18, 1, 2, 0, np.uint8, 3, 250, True, "sim"),
]


@pytest.mark.parametrize("c,o,k,stride,pad,dt,zx,zy,pc,target", CASES)
def test_zero_point_conv_is_exact(c, o, k, stride, pad, dt, zx, zy, pc, target):
    model, w, b = qdq_conv_model(c, o, k, stride, pad, dt, zx, zy, pc, hw=12 if k == 7 else 9)
    m = build(model, "pynq-z1", target=target)
    convs = [n for n in m.graph.nodes if n.op == "AccelConv2D"]
    assert len(convs) == 1 and "Conv" not in m.compiled.stats["ops"]
    x = RNG.standard_normal((1, c, 12 if k == 7 else 9, 12 if k == 7 else 9)).astype(np.float32) * 2
    ours = m(x=x)
    xq = np.clip(np.rint(x / np.float32(0.03)) + zx, np.iinfo(dt).min, np.iinfo(dt).max).astype(np.int64)
    shift = 128 if dt == np.uint8 else 0  # the int8 rebasing of uint8 tensors
    ref_q = int_reference(xq, zx, w, b, convs[0].attrs["requant"], stride, pad).astype(np.int64) + shift
    np.testing.assert_array_equal(np.rint(ours / 0.5).astype(np.int64) + zy, ref_q)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    ort_y = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(ours - ort_y).max() <= 0.5 + 1e-6  # fixed-point requant: at most one output step from float


def test_uint8_tensors_are_rebased_to_int8():
    model, _, _ = qdq_conv_model(20, 20, 3, 2, 1, np.uint8, 200, 90, False)
    m = build(model, "pynq-z1", target="ref")
    assert m.compiled.stats["uint8_rebased"] == 2
    conv = next(n for n in m.graph.nodes if n.op == "AccelConv2D")
    assert conv.attrs["pad_value"] == 200 - 128 and conv.attrs["requant"].zero_point == 90 - 128


@pytest.mark.parametrize("c,kh,kw,s,pads", [(3, 7, 7, 2, (3, 3, 3, 3)), (2, 3, 5, 1, (1, 2, 0, 1)), (4, 3, 3, 2, (0, 1, 1, 0))])
@pytest.mark.parametrize("full", [False, True])
def test_fold_taps_matches_the_direct_conv(c, kh, kw, s, pads, full):
    x = RNG.integers(-128, 128, (1, c, 11, 13)).astype(np.int8)
    w = RNG.integers(-127, 128, (6, c, kh, kw)).astype(np.int8)
    rq = Requant(0, 1, 0, out_min=-(2 ** 31), out_max=2 ** 31 - 1)
    direct = qconv2d(x, w, None, rq, stride=(s, s), pads=pads, pad_value=-9)
    fkh = kh if full else 1
    xf = fold_taps(x, kw=kw, sx=s, pads=pads, pad_value=-9, kh=fkh, sy=s if full else 1)
    if full:
        wf, st = w.reshape(6, c * kh * kw, 1, 1), (1, 1)
    else:
        wf, st = w.transpose(0, 1, 3, 2).reshape(6, c * kw, kh, 1), (s, 1)
    np.testing.assert_array_equal(qconv2d(xf, wf, None, rq, stride=st, pads=(0, 0, 0, 0)), direct)


def test_fold_plan_picks_the_fewest_padded_macs():
    assert fold_plan(3, 7, 7, 16) == 7    # 160 < 224 (KW only) < 784 (unfolded)
    assert fold_plan(3, 3, 3, 16) == 3    # 32 < 48 = 16*3 (KW only) < 144
    assert fold_plan(16, 3, 3, 16) == 0   # a full block: nothing to gain
    assert fold_plan(3, 1, 1, 16) == 0


def test_fold_taps_packed_equals_pack_of_plain():
    from compiler.graph.accel_interface import pack_activation

    x = RNG.integers(-128, 128, (1, 3, 10, 12)).astype(np.int8)
    kw = dict(kw=7, sx=2, pads=(3, 3, 3, 3), pad_value=4, kh=7, sy=2)
    np.testing.assert_array_equal(fold_taps(x, **kw, batch=1, block=16), pack_activation(fold_taps(x, **kw), 1, 16))


def test_omitted_zero_points_are_uint8_zero():
    model, _, _ = qdq_conv_model(20, 20, 3, 1, 1, np.uint8, 0, 0, False)
    for n in model.graph.node:  # QuantizeLinear/DequantizeLinear without a zero point: uint8, zero point 0
        if n.input[0] in ("x", "xq", "yf", "yq"):
            del n.input[2:]
    m = build(model, "pynq-z1", target="ref")
    conv = next(n for n in m.graph.nodes if n.op == "AccelConv2D")
    assert conv.attrs["pad_value"] == -128 and conv.attrs["requant"].zero_point == -128
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    x = RNG.standard_normal((1, 20, 9, 9)).astype(np.float32)
    ort_y = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(m(x=x) - ort_y).max() <= 0.5 + 1e-6


def test_uint8_weights_with_zero_point_are_requantized_and_flagged():
    from onnx import numpy_helper as nh

    from compiler.graph.offload import LossyWeightsWarning

    model, w, _ = qdq_conv_model(20, 20, 3, 1, 1, np.uint8, 120, 100, False)
    inits = {i.name: i for i in model.graph.initializer}
    w_u8 = (w.astype(np.int16) + 128).astype(np.uint8)  # uint8 weights with zero point 100: w - 100 spans -99..155
    inits["w"].CopyFrom(nh.from_array(w_u8, "w"))
    inits["wz"].CopyFrom(nh.from_array(np.uint8(100), "wz"))
    with pytest.warns(LossyWeightsWarning, match="re-quantized"):
        m = build(model, "pynq-z1", target="ref")
    conv = next(n for n in m.graph.nodes if n.op == "AccelConv2D")
    assert conv.attrs["weights_requantized"] and "Conv" not in m.compiled.stats["ops"]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    x = RNG.standard_normal((1, 20, 9, 9)).astype(np.float32)
    ort_y = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ours = m(x=x)
    assert np.abs(ours - ort_y).max() <= 2 * 0.5 + 1e-6  # lossy, but within two output steps


def test_ort_default_resnet_small_is_bit_equal_on_sim_and_ref():
    """onnxruntime's default quantization (asymmetric int8 activations): the simulator equals the numpy reference."""
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import resnet18_small

    calib = [{"input": RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    q = ort_quantize_static(resnet18_small(), calib, per_channel=False, symmetric_activations=False)
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    sim, ref = build(q, "pynq-z1", target="sim"), build(q, "pynq-z1", target="ref")
    np.testing.assert_array_equal(sim(input=x), ref(input=x))
    s = sim.profile_summary()
    assert s["accel_mac_fraction"] == 1.0 and s["accel_cycles"] > 0 and "Conv" not in s["host_ops"]
