"""Graphs as exporters write them: optional outputs, matrix Gemm biases, shape subgraphs, Slice/Split/Concat
under the built-in PTQ, zero-size dimensions, and unimplemented features named before any work."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import build
from compiler.frontend.errors import UnsupportedOperatorError
from compiler.quant.ort_tools import ort_run
from compiler.quant.qdq_export import export_qdq_model
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(7)


def ort_basic(model, feeds):
    """onnxruntime at ORT_ENABLE_BASIC: QDQ nodes run as written (ENABLE_ALL swaps in its own int8 kernels,
    e.g. table-lookup activations, which round differently from the QDQ graph)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _model(nodes, inputs, inits=(), opset=13, outputs=("y",)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _he(*shape):
    return (RNG.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))).astype(np.float32)


def test_unused_optional_outputs_are_not_planned_and_the_model_runs():
    """Dropout's mask, MaxPool's indices and BatchNormalization's second output, all unread."""
    c = 3
    bn = [("g", np.ones(c, np.float32)), ("b", np.zeros(c, np.float32)), ("m", np.zeros(c, np.float32)),
          ("v", np.ones(c, np.float32))]
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"]),
             helper.make_node("MaxPool", ["d"], ["p", "idx"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["p", "g", "b", "m", "v"], ["y"], epsilon=1e-5)]
    model = _model(nodes, [("x", [1, c, 8, 8])], bn)
    x = RNG.standard_normal((1, c, 8, 8)).astype(np.float32)
    mod = build(model, target="ref", quantize=False)
    assert "mask" not in mod.compiled.memory_plan.allocations and "idx" not in mod.compiled.memory_plan.allocations
    expect = x.reshape(1, c, 4, 2, 4, 2).max(axis=(3, 5)) / np.sqrt(np.float32(1 + 1e-5))
    np.testing.assert_allclose(mod.run({"x": x})[0], expect, rtol=1e-6)


def test_used_maxpool_indices_match_onnxruntime():
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    model = _model(nodes, [("x", [2, 3, 7, 7])], outputs=())
    model.graph.output.extend([helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    x = RNG.standard_normal((2, 3, 7, 7)).astype(np.float32)
    ours = build(model, target="ref", quantize=False).run({"x": x})
    ref = ort_run(model, {"x": x})
    np.testing.assert_array_equal(ours[0], ref[0])
    np.testing.assert_array_equal(ours[1], ref[1])


def test_gemm_with_a_matrix_bias_quantizes_and_offloads():
    """C of shape (M, N) with beta != 1: the product is offloaded, beta * C is added on the host."""
    w, cm = RNG.standard_normal((16, 8)).astype(np.float32), RNG.standard_normal((4, 8)).astype(np.float32)
    model = _model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], beta=0.5)], [("x", [4, 16])],
                   [("w", w), ("c", cm)])
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    # calibrated on x too: a range from 4 other rows clips x now and then (cosine down to 0.98, order-dependent)
    mod = build(model, target="ref", calibration=np.concatenate([x, RNG.standard_normal((4, 16)).astype(np.float32)]))
    assert mod.compiled.stats["ops"].get("AccelDense") == 1
    assert cosine(mod.run({"x": x})[0], x @ w + 0.5 * cm) > 0.999


def test_fixed_zero_size_dimensions_are_kept():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", [0, 3])])
    mod = build(model, target="ref", quantize=False)
    assert mod.input_info("x").shape == (0, 3)
    assert mod.run({"x": np.zeros((0, 3), np.float32)})[0].shape == (0, 3)


@pytest.mark.parametrize("node, inits, label", [
    (helper.make_node("LRN", ["x"], ["y"], size=3, foo=1), [], "LRN(attribute foo)"),
    (helper.make_node("Conv", ["x", "w"], ["y"]), [("w", np.zeros((2, 3, 1, 1, 1), np.float32))], "Conv(3-D)"),
    (helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN), [], "Cast(to=FLOAT8E4M3FN)"),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], ceil_mode=2), [], "MaxPool(ceil_mode=2"),
])
def test_unimplemented_features_are_named_before_any_work(node, inits, label):
    model = _model([node], [("x", [1, 3, 4, 4])], inits)
    with pytest.raises(UnsupportedOperatorError) as e:
        build(model, target="ref", quantize=False)
    assert label in str(e.value)


def _slice_shape_model():
    """Conv -> HardSwish -> Slice (channels) -> Conv -> Mul(const) -> Split -> 2 Convs -> Concat -> Add(const)
    -> HardSigmoid -> MaxPool -> Reshape(Concat(Unsqueeze(Gather(Shape)), -1)) -> MatMul."""
    def i64(*v):
        return np.array(v, np.int64)
    inits = [("w1", _he(16, 3, 3, 3)), ("b1", RNG.standard_normal(16).astype(np.float32) * 0.1),
             ("w2", _he(8, 8, 3, 3)), ("w3", _he(8, 4, 1, 1)), ("w4", _he(8, 4, 1, 1)),
             ("wf", (RNG.standard_normal((16 * 8 * 8, 64)) * np.sqrt(1 / 1024)).astype(np.float32)),
             ("st", i64(4)), ("en", i64(12)), ("ax", i64(1)), ("k", np.float32(0.5)), ("a0", np.float32(0.25)),
             ("sp", i64(4, 4)), ("i0", np.array(0, np.int64)), ("m1", i64(-1)), ("u0", i64(0))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c1"], ["h1"]),
             helper.make_node("Slice", ["h1", "st", "en", "ax"], ["s1"]),
             helper.make_node("Conv", ["s1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c2", "k"], ["m2"]),
             helper.make_node("Split", ["m2", "sp"], ["p1", "p2"], axis=1),
             helper.make_node("Conv", ["p1", "w3"], ["c3"]),
             helper.make_node("Conv", ["p2", "w4"], ["c4"]),
             helper.make_node("Concat", ["c3", "c4"], ["cat"], axis=1),
             helper.make_node("Add", ["cat", "a0"], ["add"]),
             helper.make_node("HardSigmoid", ["add"], ["hs"]),
             helper.make_node("MaxPool", ["hs"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Shape", ["mp"], ["shp"]),
             helper.make_node("Gather", ["shp", "i0"], ["n0"], axis=0),
             helper.make_node("Unsqueeze", ["n0", "u0"], ["n1"]),
             helper.make_node("Concat", ["n1", "m1"], ["newshape"], axis=0),
             helper.make_node("Reshape", ["mp", "newshape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "wf"], ["y"])]
    return _model(nodes, [("x", ["N", 3, 16, 16])], inits, opset=14)


def test_float_model_with_slice_and_shape_subgraph_compiles_with_builtin_ptq():
    model = _slice_shape_model()
    shapes = {"x": (2, 3, 16, 16)}
    cal = RNG.standard_normal((8, 3, 16, 16)).astype(np.float32)
    mod = build(model, target="ref", calibration=cal, input_shapes=shapes)
    ops = mod.compiled.stats["ops"]
    assert not {"Shape", "Gather", "Unsqueeze"} & set(ops), ops  # the shape chain is folded at compile time
    assert ops.get("AccelConv2D") == 4 and ops.get("AccelDense") == 1, ops
    x = RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)
    ours = mod.run({"x": x})[0]
    float_ref = ort_run(model, {"x": x})[0]
    qdq_ref = ort_basic(export_qdq_model(model, cal, input_shapes=shapes), {"x": x})[0]
    assert ours.shape == float_ref.shape == (2, 64)
    assert cosine(ours, float_ref) > 0.995
    assert cosine(ours, qdq_ref) > 0.9999
