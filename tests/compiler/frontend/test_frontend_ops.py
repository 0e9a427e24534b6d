"""Each supported float operator, imported and run on the numpy CPU backend, vs onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend.onnx_import import onnx_to_graph
from compiler.graph.evaluate import evaluate_graph
from compiler.quant.ort_tools import ort_run

RNG = np.random.default_rng(0)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def single_op_model(op, x_shape, inits=(), attrs=None, extra_inputs=(), opset=13, n_inputs=1, in_type=TensorProto.FLOAT,
                    out_type=None):
    """A model ``y = op(x, *extra_inputs)`` where extra inputs are initializers (name, array)."""
    ins = [f"x{i}" if i else "x" for i in range(n_inputs)]
    node = helper.make_node(op, ins + [n for n, _ in inits] + list(extra_inputs), ["y"], **(attrs or {}))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, in_type, list(x_shape)) for n in ins],
                              [helper.make_tensor_value_info("y", out_type or in_type, None)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def run_both(model, feeds):
    g = onnx_to_graph(model)
    ours = evaluate_graph(g, feeds)[g.outputs[0]]
    ref = ort_run(model, feeds)[0]
    return ours, ref


CASES = [
    ("Conv", (1, 3, 7, 7), [("w", _f(4, 3, 3, 3)), ("b", _f(4))], {"pads": [1, 0, 1, 2], "strides": [2, 1]}),
    ("Conv", (1, 4, 6, 6), [("w", _f(4, 1, 3, 3))], {"group": 4, "auto_pad": "SAME_UPPER"}),
    ("Conv", (1, 2, 9, 9), [("w", _f(3, 2, 3, 3))], {"dilations": [2, 2]}),
    ("Gemm", (2, 5), [("w", _f(3, 5)), ("c", _f(3))], {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    ("MatMul", (2, 5), [("w", _f(5, 3))], {}),
    ("Relu", (2, 3, 4), [], {}),
    ("Clip", (2, 3, 4), [("lo", np.float32(-0.5)), ("hi", np.float32(0.7))], {}),
    ("Add", (2, 3, 4, 4), [("c", _f(3, 1, 1))], {}),
    ("Mul", (2, 3, 4, 4), [("c", _f(1, 4))], {}),
    ("MaxPool", (1, 2, 7, 7), [], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", (1, 2, 6, 6), [], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", (1, 2, 7, 7), [], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", (1, 2, 7, 7), [], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("GlobalAveragePool", (2, 3, 5, 5), [], {}),
    ("Flatten", (2, 3, 4, 5), [], {"axis": 2}),
    ("Reshape", (2, 3, 4), [("s", np.array([0, -1], np.int64))], {}),
    ("BatchNormalization", (2, 3, 4, 4), [("g", _f(3)), ("b", _f(3)), ("m", _f(3)), ("v", np.abs(_f(3)) + 0.5)], {}),
    ("Softmax", (2, 3, 4), [], {"axis": 1}),
    ("HardSigmoid", (2, 8), [], {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", (2, 8), [], {}, 14),
    ("PRelu", (1, 3, 4, 4), [("s", _f(3, 1, 1))], {}),
    ("LeakyRelu", (2, 8), [], {"alpha": 0.2}),
    ("Transpose", (2, 3, 4), [], {"perm": [2, 0, 1]}),
    ("Pad", (1, 2, 3, 3), [("p", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)), ("v", np.float32(0.5))], {}),
    ("Pad", (1, 2, 4, 4), [("p", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64))], {"mode": "reflect"}),
    ("Resize", (1, 2, 3, 4), [("roi", np.zeros(0, np.float32)), ("sc", np.array([1, 1, 2, 1.5], np.float32))],
     {"mode": "nearest"}),
    ("Resize", (1, 2, 3, 4), [("roi", np.zeros(0, np.float32)), ("sc", np.array([1, 1, 2, 2], np.float32))],
     {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
    ("Sigmoid", (2, 8), [], {}),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_matches_onnxruntime(case):
    op, shape, inits, attrs, *opset = case
    model = single_op_model(op, shape, inits, attrs, opset=opset[0] if opset else 13)
    ours, ref = run_both(model, {"x": _f(*shape)})
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def test_concat_two_inputs():
    model = single_op_model("Concat", (1, 2, 3), attrs={"axis": 1}, n_inputs=2)
    ours, ref = run_both(model, {"x": _f(1, 2, 3), "x1": _f(1, 2, 3)})
    np.testing.assert_array_equal(ours, ref)


def test_quantize_dequantize_linear():
    q = single_op_model("QuantizeLinear", (2, 6), [("s", np.float32(0.05)), ("z", np.int8(3))], out_type=TensorProto.INT8)
    x = _f(2, 6) * 4
    ours, ref = run_both(q, {"x": x})
    np.testing.assert_array_equal(ours, ref)
    dq = single_op_model("DequantizeLinear", (2, 3), [("s", np.array([0.1, 0.2, 0.3], np.float32)),
                                                      ("z", np.array([1, -2, 0], np.int8))], {"axis": 1},
                         in_type=TensorProto.INT8, out_type=TensorProto.FLOAT)
    xi = RNG.integers(-128, 128, (2, 3)).astype(np.int8)
    ours, ref = run_both(dq, {"x": xi})
    np.testing.assert_allclose(ours, ref, rtol=1e-6)


def test_old_opset_is_converted():
    model = single_op_model("Clip", (2, 5), attrs={"min": -0.25, "max": 0.5}, opset=10)
    ours, ref = run_both(model, {"x": _f(2, 5)})
    np.testing.assert_array_equal(ours, ref)


def test_symbolic_batch_defaults_to_one_and_can_be_set():
    model = single_op_model("Relu", ("N", 3))
    assert onnx_to_graph(model).tensors["x"].shape == (1, 3)
    assert onnx_to_graph(model, {"x": (5, 3)}).tensors["y"].shape == (5, 3)
