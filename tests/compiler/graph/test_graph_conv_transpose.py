"""ConvTranspose through the accelerator's conv path (zero-inserted input, flipped weights)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from compiler import build
from compiler.frontend.onnx_import import onnx_to_graph
from compiler.graph.conv_transpose import lower_conv_transposes
from compiler.graph.evaluate import evaluate_graph
from compiler.quant.ort_tools import ort_quantize_static, ort_run

RNG = np.random.default_rng(11)


def _f(*s):
    return (RNG.standard_normal(s) * 0.3).astype(np.float32)


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def decoder(attrs, k=2, group=1, c=16, o=16):
    """Conv -> Relu -> ConvTranspose(attrs) -> Relu: a segmentation decoder's upsampling step."""
    nodes = [h.make_node("Conv", ["x", "w0"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("ConvTranspose", ["r", "wt", "bt"], ["u"], **attrs), h.make_node("Relu", ["u"], ["y"])]
    g = h.make_graph(nodes, "dec", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(_f(c, 8, 3, 3), "w0"), nh.from_array(_f(c, o // group, k, k), "wt"),
                      nh.from_array(_f(o), "bt")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


CASES = [({"strides": [2, 2]}, 2, 1),
         ({"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, 3, 1),
         ({"strides": [2, 2], "group": 2}, 4, 2),
         ({"strides": [2, 2], "pads": [2, 0, 1, 0], "dilations": [1, 2]}, 3, 1),
         ({"strides": [3, 2], "pads": [4, 3, 4, 3]}, 3, 1),             # pads past the kernel: the input is cropped
         ({"strides": [2, 2], "output_shape": [12, 11]}, 3, 1),          # output_shape: padding derived
         ({"strides": [2, 1], "auto_pad": "SAME_LOWER"}, 3, 1)]


@pytest.mark.parametrize("attrs,k,group", CASES)
def test_rewrite_is_exact_in_float(attrs, k, group):
    m = decoder(attrs, k, group)
    g = onnx_to_graph(m)
    x = _f(1, 8, 6, 6)
    want = evaluate_graph(g, {"x": x})["y"]
    np.testing.assert_allclose(want, ort_run(m, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert lower_conv_transposes(g) == 1
    assert "ConvTranspose" not in [n.op for n in g.nodes]
    np.testing.assert_allclose(evaluate_graph(g, {"x": x})["y"], want, rtol=1e-4, atol=1e-5)


def test_conv_transpose_runs_on_the_accelerator_ptq_and_ort_qdq():
    m = decoder({"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, k=3)
    cal = [{"x": _f(1, 8, 6, 6) * 3} for _ in range(3)]
    x = _f(1, 8, 6, 6) * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no host fallback
        mod = build(m, target="sim", calibration=cal)
    assert mod.compiled.stats["conv_transposes_as_conv"] == 1
    y = mod.run({"x": x})[0]
    assert mod.profile_summary()["accel_mac_fraction"] == 1.0
    assert cosine(y, ort_run(m, {"x": x})[0]) > 0.995
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(m, cal)
    assert "ConvTranspose" in [n.op_type for n in q.graph.node]
    sim, ref = build(q, target="sim"), build(q, target="ref")
    yq = sim.run({"x": x})[0]
    assert sim.profile_summary()["accel_mac_fraction"] == 1.0
    np.testing.assert_array_equal(yq, ref.run({"x": x})[0])
    assert cosine(yq, ort_run(q, {"x": x})[0]) > 0.99


def test_float_runs_keep_the_host_kernel():
    mod = build(decoder({"strides": [2, 2]}), target="ref", quantize=False)
    assert "ConvTranspose" in [n.op for n in mod.graph.nodes]
