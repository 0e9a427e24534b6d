"""Dilated convs (atrous heads) run on the accelerator through zero-inserted kernels, exactly."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.graph.dilation_expand import dilate_kernel
from compiler.graph.offload import HostFallbackWarning
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(37)


def _model(d: int, pads: list[int], hw: int = 12):
    w0 = numpy_helper.from_array((RNG.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32), "w0")
    w1 = numpy_helper.from_array((RNG.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32), "w1")
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w1"], ["y"], pads=pads, dilations=[d, d])]
    g = helper.make_graph(nodes, "atrous", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w0, w1])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_dilate_kernel_places_the_taps():
    w = np.arange(2 * 1 * 2 * 3, dtype=np.int8).reshape(2, 1, 2, 3)
    got = dilate_kernel(w, 2, 3)
    assert got.shape == (2, 1, 3, 7)
    np.testing.assert_array_equal(got[:, :, ::2, ::3], w)
    assert np.count_nonzero(got) == np.count_nonzero(w)


@pytest.mark.parametrize("d, pads", [(2, [2, 2, 2, 2]), (3, [1, 2, 3, 0])])
def test_dilated_conv_runs_on_the_accelerator(d, pads):
    model = _model(d, pads)
    calib = [{"x": RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(4)]
    q = ort_quantize_static(model, calib, per_channel=False, defaults=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostFallbackWarning)
        sim = build(q, target="sim")
    ref = build(q, target="ref")
    assert sim.compiled.stats["ops"].get("AccelConv2D") == 2 and sim.compiled.stats["dilations_expanded"] == 1
    x = RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)
    ours = sim.run({"x": x})[0]
    expect = ort_run(q, {"x": x}, basic=True)[0]
    assert ours.shape == expect.shape
    np.testing.assert_array_equal(ours, ref.run({"x": x})[0])
    assert cosine(ours, expect) >= 0.999
    assert sim.profile_summary()["accel_mac_fraction"] == 1.0


def test_very_dilated_conv_stays_on_the_host_and_is_named():
    model = _model(8, [8, 8, 8, 8], hw=20)  # 17x17 zero-inserted kernel: 32x the MACs
    calib = [{"x": RNG.standard_normal((1, 3, 20, 20)).astype(np.float32)} for _ in range(2)]
    q = ort_quantize_static(model, calib, per_channel=False, defaults=True)
    with pytest.warns(HostFallbackWarning, match=r"dilations \(8, 8\)"):
        build(q, target="ref")
