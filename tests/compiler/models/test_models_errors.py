"""Unsupported operators are rejected before compilation; the QDQ export on small models."""
from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compiler.executor import build
from compiler.frontend.errors import UnsupportedOperatorError
from compiler.quant.ort_tools import ort_run
from compiler.quant.qdq_export import export_qdq_model, graph_to_onnx
from compiler.zoo import mobilenet_v2_small, resnet18_small
from compiler.zoo.builder import OnnxBuilder
from tests.compiler.helpers import cosine

logging.getLogger().setLevel(logging.ERROR)


def model_with_op(op: str = "Hardmax") -> onnx.ModelProto:
    b = OnnxBuilder(0)
    y = b.op(op, [b.conv("input", 3, 16, 3)], "weird")
    return b.model("bad", "input", (1, 3, 8, 8), b.op("Relu", [y]))


def test_unsupported_operator_rejected_before_compilation(monkeypatch):
    import sys

    build_mod = sys.modules["compiler.executor.build"]  # the package attribute `build` is the function

    def boom(*a, **k):  # compilation must never start
        raise AssertionError("compile_model reached")

    monkeypatch.setattr(build_mod, "compile_model", boom)
    model = model_with_op("Hardmax")
    erf = next(n.name for n in model.graph.node if n.op_type == "Hardmax")
    with pytest.raises(UnsupportedOperatorError) as ei:
        build(model, target="ref", calibration=np.zeros((1, 3, 8, 8), np.float32))
    assert "Hardmax" in str(ei.value) and ei.value.unsupported == {"Hardmax": [erf]}


@pytest.mark.parametrize("fn", [resnet18_small, mobilenet_v2_small])
def test_qdq_export_small_models(fn):
    rng = np.random.default_rng(3)
    model = fn()
    calib = rng.standard_normal((4, 3, 32, 32)).astype(np.float32)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    exported = export_qdq_model(model, calib)
    ours = build(model, target="ref", calibration=calib)(input=x)
    np.testing.assert_array_equal(ours, build(exported, target="ref")(input=x))
    # onnxruntime at ORT_ENABLE_BASIC runs the export as DQ -> float op -> Q (its fused int8 kernels of the default
    # level vary 0.998..0.9995 with the seed on these 10 logits); the exact check is the line above
    assert cosine(ours, ort_run(exported, {"input": x}, basic=True)[0]) >= 0.999
    # the export quantizes: weights are int8 initializers, biases int32
    dtypes = {onnx.helper.tensor_dtype_to_np_dtype(t.data_type) for t in exported.graph.initializer}
    assert np.dtype(np.int8) in dtypes and np.dtype(np.int32) in dtypes


def test_graph_to_onnx_rejects_lowered_graphs():
    m = build(resnet18_small(), target="ref", calibration=np.zeros((1, 3, 32, 32), np.float32))
    with pytest.raises(ValueError, match="internal operators"):
        graph_to_onnx(m.graph)


def test_export_needs_quantizable_ops():
    g = helper.make_graph([helper.make_node("Relu", ["input"], ["y"])], "g",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    with pytest.raises(ValueError, match="no Conv/Gemm/MatMul"):
        export_qdq_model(m, np.zeros((1, 4), np.float32))
