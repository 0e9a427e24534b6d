"""ReduceMean as exporters write it (torch's x.mean((2, 3)), tf2onnx's global pooling), opsets 13 and 18."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import build
from compiler.frontend.errors import ModelError
from compiler.graph.offload import float_host_ops_between_accel
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(11)


def _reduce_node(opset: int, axes, keepdims: int, x: str = "x", y: str = "y") -> tuple[list, list]:
    """The ReduceMean node (axes as an attribute before opset 18, as an input from 18) and its initializers."""
    if axes is None:
        return [helper.make_node("ReduceMean", [x], [y], keepdims=keepdims)], []
    if opset >= 18:
        return ([helper.make_node("ReduceMean", [x, "axes"], [y], keepdims=keepdims)],
                [numpy_helper.from_array(np.array(axes, np.int64), "axes")])
    return [helper.make_node("ReduceMean", [x], [y], axes=list(axes), keepdims=keepdims)], []


def _float_model(shape, axes, keepdims, opset):
    nodes, inits = _reduce_node(opset, axes, keepdims)
    g = helper.make_graph(nodes, "rm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes, keepdims", [((2, 3), 1), ((2, 3), 0), ((-1, -2), 0), ((1,), 1), ((1, 3), 0),
                                            ((0, 2), 1), (None, 0)])
def test_reduce_mean_any_axes_matches_numpy(opset, axes, keepdims):
    shape = (2, 5, 3, 4)
    x = RNG.standard_normal(shape).astype(np.float32)
    mod = build(_float_model(shape, axes, keepdims, opset), target="ref", quantize=False)
    expect = np.mean(x.astype(np.float64), axis=None if axes is None else tuple(axes), keepdims=bool(keepdims))
    got = mod.run({"x": x})[0]
    assert got.shape == np.shape(expect)
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [13, 18])
def test_torch_style_mean_pooling_head_quantized_by_ort_defaults(opset):
    """Conv -> Relu -> ReduceMean(2, 3) -> Gemm(transB): the convs and the Gemm run on the accelerator, the
    result matches onnxruntime on the same QDQ model."""
    w1 = (RNG.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (RNG.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    fc = (RNG.standard_normal((10, 16)) * 0.25).astype(np.float32)
    rm, rm_inits = _reduce_node(opset, (2, 3), 0, "r2", "m")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]), *rm,
             helper.make_node("Gemm", ["m", "fc", "fb"], ["y"], transB=1)]
    inits = [numpy_helper.from_array(v, n) for n, v in (("w1", w1), ("w2", w2), ("fc", fc),
                                                        ("fb", np.zeros(10, np.float32)))] + rm_inits
    g = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    calib = [{"x": RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(4)]
    q = ort_quantize_static(model, calib, per_channel=False, defaults=True)
    mod = build(q, target="ref")
    ops = mod.compiled.stats["ops"]
    assert ops.get("AccelConv2D") == 2 and ops.get("AccelDense") == 1
    # onnxruntime leaves DQ -> ReduceMean -> Q (float); it runs as an integer global pool
    assert "GlobalAveragePool" not in ops and float_host_ops_between_accel(mod.graph) == []
    x = RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)
    assert cosine(mod.run({"x": x})[0], ort_run(q, {"x": x}, basic=True)[0]) >= 0.999


def test_reduce_mean_bad_axes_are_named():
    with pytest.raises(ModelError, match=r"axes \[4\] out of range for input rank 4"):
        build(_float_model((1, 2, 3, 3), (4,), 1, 13), target="ref", quantize=False)


def test_reduce_mean_with_run_time_axes_runs_on_the_host():
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)
    g = helper.make_graph([node], "rt", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                                         helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    mod = build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), target="ref",
                quantize=False)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    got = mod.run({"x": x, "axes": np.array([-2], np.int64)})[0]
    np.testing.assert_allclose(got, x.mean(axis=1), rtol=1e-6, atol=1e-6)
