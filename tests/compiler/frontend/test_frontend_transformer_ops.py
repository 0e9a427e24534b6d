"""Operators of transformer / detector / segmentation exports, built and run (ref target) vs onnxruntime."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from compiler import build
from jit_runtime.host_ops.kernels import KERNELS
from compiler.frontend.onnx_import import onnx_to_graph
from compiler.quant.ort_tools import ort_run

RNG = np.random.default_rng(3)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _model(nodes, inputs, outputs, inits=None, opset=17):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                     [h.make_tensor_value_info(n, t, None) for n, t in outputs],
                     [nh.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)],
        ir_version=max(8, h.find_min_ir_version_for([h.make_opsetid("", opset)])))


def _check(model, feeds, exact=False):
    mod = build(model, target="ref", quantize=False)
    got, want = mod.run(feeds), ort_run(model, feeds)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        if exact or a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    return mod


CT = [  # (x shape, w shape, attrs)
    ((1, 3, 5, 5), (3, 4, 3, 3), {}),
    ((2, 4, 4, 6), (4, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    ((1, 4, 3, 3), (4, 3, 2, 2), {"strides": [2, 2], "group": 2}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "dilations": [2, 1], "pads": [0, 1, 2, 0]}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 3, 3), (2, 1, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 2, 7), (2, 3, 3), {"strides": [2]}),
    ((1, 2, 3, 3, 2), (2, 2, 2, 2, 2), {"strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CT)
def test_conv_transpose_matches_onnxruntime(xs, ws, attrs):
    m = _model([h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)], [("x", T.FLOAT, list(xs))],
               [("y", T.FLOAT)], {"w": _f(*ws), "b": _f(ws[1] * attrs.get("group", 1))})
    _check(m, {"x": _f(*xs)})


def test_layer_normalization_and_gelu_forms():
    x = _f(2, 5, 8)
    nodes = [h.make_node("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
             # GELU, erf form: 0.5 * x * (1 + erf(x / sqrt(2)))
             h.make_node("Div", ["ln", "sq2"], ["t0"]), h.make_node("Erf", ["t0"], ["t1"]),
             h.make_node("Add", ["t1", "one"], ["t2"]), h.make_node("Mul", ["ln", "t2"], ["t3"]),
             h.make_node("Mul", ["t3", "half"], ["gelu_erf"]),
             # GELU, tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
             h.make_node("Pow", ["ln", "three"], ["u0"]), h.make_node("Mul", ["u0", "c"], ["u1"]),
             h.make_node("Add", ["ln", "u1"], ["u2"]), h.make_node("Mul", ["u2", "k"], ["u3"]),
             h.make_node("Tanh", ["u3"], ["u4"]), h.make_node("Add", ["u4", "one"], ["u5"]),
             h.make_node("Mul", ["ln", "u5"], ["u6"]), h.make_node("Mul", ["u6", "half"], ["gelu_tanh"]),
             h.make_node("Sqrt", ["a"], ["s"]), h.make_node("Add", ["gelu_tanh", "s"], ["y2"])]
    inits = {"g": _f(8), "b": _f(8), "sq2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5),
             "three": np.float32(3), "c": np.float32(0.044715), "k": np.float32(np.sqrt(2 / np.pi))}
    m = _model(nodes, [("x", T.FLOAT, [2, 5, 8]), ("a", T.FLOAT, [8])], [("gelu_erf", T.FLOAT), ("y2", T.FLOAT)],
               inits)
    _check(m, {"x": x, "a": np.abs(_f(8))})


def _decomposed_ln(axes, square="Pow", opset=13):
    nodes = [h.make_node("ReduceMean", ["x"], ["m"], axes=axes), h.make_node("Sub", ["x", "m"], ["d"]),
             h.make_node("Pow", ["d", "two"], ["p"]) if square == "Pow" else h.make_node("Mul", ["d", "d"], ["p"]),
             h.make_node("ReduceMean", ["p"], ["v"], axes=axes), h.make_node("Add", ["v", "eps"], ["ve"]),
             h.make_node("Sqrt", ["ve"], ["s"]), h.make_node("Div", ["d", "s"], ["n"]),
             h.make_node("Mul", ["n", "gamma"], ["y0"]), h.make_node("Add", ["y0", "beta"], ["y"])]
    inits = {"two": np.float32(2), "eps": np.float32(1e-6), "gamma": _f(6), "beta": _f(6)}
    return _model(nodes, [("x", T.FLOAT, [2, 3, 6])], [("y", T.FLOAT)], inits, opset=opset)


@pytest.mark.parametrize("square", ["Pow", "Mul"])
def test_decomposed_layernorm_is_one_op(square):
    m = _decomposed_ln([-1], square)
    assert [n.op for n in onnx_to_graph(m).nodes] == ["LayerNormalization"]
    _check(m, {"x": _f(2, 3, 6)})


def test_mean_over_leading_axes_is_not_a_layernorm():
    m = _decomposed_ln([0, 1])
    assert "LayerNormalization" not in [n.op for n in onnx_to_graph(m).nodes]
    _check(m, {"x": _f(2, 3, 6)})


def test_mask_and_index_plumbing():
    x = _f(2, 3, 4)
    idx = RNG.integers(-3, 3, (2, 3, 4)).astype(np.int64)
    nd = RNG.integers(0, 2, (2, 2)).astype(np.int64)
    nodes = [h.make_node("IsNaN", ["x"], ["nan"]), h.make_node("Equal", ["ids", "zero"], ["eq"]),
             h.make_node("And", ["eq", "flag"], ["both"]), h.make_node("Where", ["both", "x", "neg"], ["w"]),
             h.make_node("Where", ["nan", "neg", "w"], ["w2"]),
             h.make_node("GatherElements", ["w2", "idx"], ["ge"], axis=1),
             h.make_node("GatherND", ["ge", "nd"], ["gn"]),
             h.make_node("Expand", ["bias", "shape"], ["ex"]), h.make_node("Add", ["ge", "ex"], ["y"]),
             h.make_node("Range", ["r0", "r1", "r2"], ["rg"])]
    inits = {"zero": np.int64(0), "neg": np.float32(-1e4), "idx": idx, "nd": nd, "bias": _f(1, 4),
             "shape": np.array([2, 3, 1], np.int64), "r0": np.int64(1), "r1": np.int64(10), "r2": np.int64(3)}
    m = _model(nodes, [("x", T.FLOAT, [2, 3, 4]), ("ids", T.INT64, [2, 1, 4]), ("flag", T.BOOL, [1, 3, 1])],
               [("y", T.FLOAT), ("gn", T.FLOAT), ("rg", T.INT64)], inits)
    x[0, 0, 0] = np.nan
    feeds = {"x": x, "ids": RNG.integers(0, 2, (2, 1, 4)).astype(np.int64),
             "flag": np.array([True, False, True]).reshape(1, 3, 1)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the NaN input is reported (NonFiniteInputWarning)
        _check(m, feeds)


def test_quantize_dynamic_integer_ops():
    xq = RNG.integers(0, 256, (1, 4, 5, 5)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (3, 4, 3, 3)).astype(np.int8)
    a = RNG.integers(0, 256, (3, 4, 8)).astype(np.uint8)
    b = RNG.integers(0, 256, (8, 5)).astype(np.uint8)  # u8 x u8: onnxruntime's u8 x s8 kernel saturates (below)
    nodes = [h.make_node("ConvInteger", ["xq", "wq", "xz", "wz"], ["ci"], pads=[1, 1, 1, 1]),
             h.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["mi"]),
             h.make_node("DynamicQuantizeLinear", ["f"], ["fq", "fs", "fz"])]
    inits = {"wq": wq, "b": b, "xz": np.uint8(7), "wz": np.int8(0), "az": np.uint8(128), "bz": np.uint8(3)}
    m = _model(nodes, [("xq", T.UINT8, [1, 4, 5, 5]), ("a", T.UINT8, [3, 4, 8]), ("f", T.FLOAT, [6, 7])],
               [("ci", T.INT32), ("mi", T.INT32), ("fq", T.UINT8), ("fs", T.FLOAT), ("fz", T.UINT8)], inits)
    _check(m, {"xq": xq, "a": a, "f": _f(6, 7) * 3}, exact=True)


def test_matmul_integer_s8_weights_are_exact():
    """onnxruntime's u8 x s8 MatMulInteger saturates int16 pair sums on x86 (off by up to ~2**14 on full-range
    data); ours is the exact integer definition."""
    a = RNG.integers(0, 256, (3, 4, 8)).astype(np.uint8)
    b = RNG.integers(-128, 128, (8, 5)).astype(np.int8)
    zb = np.array([1, -2, 3, 0, 5], np.int8)  # per output column
    got = KERNELS["MatMulInteger"]({}, a, b, np.uint8(128), zb)
    want = (a.astype(np.int64) - 128) @ (b.astype(np.int64) - zb.astype(np.int64))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_sigmoid_of_large_negatives_is_quiet_and_right():
    x = np.array([-1000, -100, -20, 0, 20, 100], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = KERNELS["Sigmoid"]({}, x)
    with np.errstate(over="ignore"):  # the naive reference overflows to inf (-> 0), as it should
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-30)
