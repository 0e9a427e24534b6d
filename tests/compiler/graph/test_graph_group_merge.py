"""Grouped convs whose groups do not fill accelerator blocks (ShuffleNet, ResNeXt) are regrouped onto the accelerator."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.graph.group_merge import merge_factor, merge_weight
from compiler.graph.offload import HostFallbackWarning
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(17)


@pytest.mark.parametrize("c, o, groups, want", [
    (112, 112, 4, 4),    # ShuffleNet: 28 channels per group -> one group of 112
    (24, 112, 4, 4),     # 6 in / 28 out per group
    (128, 128, 32, 4),   # ResNeXt: 4 per group -> 8 groups of 16
    (96, 96, 6, None),   # 16 per group: fits as it is
    (64, 64, 64, None),  # depthwise: its own path
    (96, 96, 3, None),   # 32 per group: fits
    (34, 34, 17, None),  # 2 per group: 17 groups, no divisor k <= 16 makes whole blocks
])
def test_merge_factor(c, o, groups, want):
    assert merge_factor(c, o, groups, 16, 16) == want


def _conv_model(w, groups, shape):
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], group=groups, pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("c, o, groups, k", [(12, 24, 4, 2), (12, 24, 4, 4), (6, 6, 6, 3)])
def test_merged_weight_computes_the_same_conv(c, o, groups, k):
    w = RNG.standard_normal((o, c // groups, 3, 3)).astype(np.float32)
    x = RNG.standard_normal((1, c, 5, 5)).astype(np.float32)
    want = ort_run(_conv_model(w, groups, x.shape), {"x": x})[0]
    got = ort_run(_conv_model(merge_weight(w, groups, k), groups // k, x.shape), {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_shufflenet_style_grouped_convs_run_on_the_accelerator_exactly():
    """1x1 grouped conv (3 groups of 8 -> 8), channel shuffle, 3x3 grouped conv (3 groups of 8), quantized by
    onnxruntime defaults: every conv on the accelerator, no fallback warning, sim == ref, close to ORT."""
    def he(*s):
        return (RNG.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)
    inits = [numpy_helper.from_array(v, n) for n, v in (("w0", he(24, 3, 3, 3)), ("w1", he(24, 8, 1, 1)),
                                                         ("w2", he(24, 8, 3, 3)), ("s1", np.array([1, 3, 8, 8, 8])),
                                                         ("s2", np.array([1, 24, 8, 8])))]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Conv", ["ra", "w1"], ["b"], group=3), helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Reshape", ["rb", "s1"], ["r5"]),
             helper.make_node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t5", "s2"], ["sh"]),
             helper.make_node("Conv", ["sh", "w2"], ["y"], group=3, pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "shuffle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24, 8, 8])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    calib = [{"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    q = ort_quantize_static(model, calib, per_channel=True, defaults=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostFallbackWarning)
        sim = build(q, target="sim")
    ref = build(q, target="ref")
    assert sim.compiled.stats["ops"].get("AccelConv2D") == 3 and sim.compiled.stats["conv_groups_merged"] == 2
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    ours = sim.run({"x": x})[0]
    np.testing.assert_array_equal(ours, ref.run({"x": x})[0])
    assert cosine(ours, ort_run(q, {"x": x}, basic=True)[0]) >= 0.999
    s = sim.profile_summary()
    assert s["accel_mac_fraction"] == 1.0
    shapes = {tuple(n.attrs["orig_weight_shape"]) for n in sim.graph.nodes if n.op == "AccelConv2D"}
    assert {(24, 8, 1, 1), (24, 8, 3, 3)} <= shapes  # MACs are counted on the real grouped weights
