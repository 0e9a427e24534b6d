"""Zoo models (small variants fully, full-size ResNet-18 lightly) and the digits demo."""
from __future__ import annotations

import logging

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.zoo import digits_model_path, get_model, load_digits_split, mobilenet_v2_small, resnet18, resnet18_small
from tests.compiler.helpers import cosine

logging.getLogger().setLevel(logging.ERROR)
RNG = np.random.default_rng(6)


@pytest.mark.parametrize("fn", [resnet18_small, mobilenet_v2_small])
def test_small_models_float_and_int8(fn):
    model = fn()
    ops = {n.op_type for n in model.graph.node}
    assert "BatchNormalization" in ops and "Add" in ops
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    ref = ort_run(model, {"input": x})[0]
    assert ref.shape == (1, 10)
    np.testing.assert_allclose(build(model, target="ref", quantize=False)(input=x), ref, rtol=1e-3, atol=1e-4)
    calib = RNG.standard_normal((8, 3, 32, 32)).astype(np.float32)
    assert cosine(build(model, target="ref", calibration=calib)(input=x), ref) >= 0.99
    q = ort_quantize_static(model, [{"input": c[None]} for c in calib], reduce_range=True)
    assert cosine(build(q, target="ref")(input=x), ort_run(q, {"input": x})[0]) >= 0.999


def test_resnet18_full_size_light():
    model = resnet18()
    onnx.checker.check_model(model)
    inferred = onnx.shape_inference.infer_shapes(model)
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [1, 1000]
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 20
    x = RNG.standard_normal((1, 3, 224, 224)).astype(np.float32)
    m = build(model, target="ref", calibration=x, progress=False)
    assert m.compiled.stats["ops"]["AccelConv2D"] == 20
    out = m(input=x)
    assert cosine(out, ort_run(model, {"input": x})[0]) >= 0.99


def test_get_model_unknown():
    assert get_model("mobilenet_v2_small").graph.input[0].name == "input"
    with pytest.raises(ValueError, match="resnet18"):
        get_model("vgg")


def test_digits_split_is_deterministic():
    a, b = load_digits_split(), load_digits_split()
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    xtr, ytr, xte, yte = a
    assert xte.shape == (450, 1, 8, 8) and xtr.shape == (1347, 1, 8, 8) and xte.dtype == np.float32
    assert digits_model_path().stat().st_size < 100_000


def test_digits_int8_reference_vs_onnxruntime_int8():
    xtr, _, xte, yte = load_digits_split()
    calib = [{"input": xtr[i:i + 1]} for i in range(0, 400, 4)]
    q = ort_quantize_static(digits_model_path(), calib, reduce_range=True)
    ours = build(q, target="ref", input_shapes={"input": xte.shape})(input=xte).argmax(1)
    theirs = ort_run(q, {"input": xte})[0].argmax(1)
    acc_ours, acc_ort = (ours == yte).mean(), (theirs == yte).mean()
    assert abs(acc_ours - acc_ort) <= 0.005
    assert (ours == theirs).mean() >= 0.99
    float_acc = (ort_run(digits_model_path(), {"input": xte})[0].argmax(1) == yte).mean()
    assert acc_ours >= float_acc - 0.01 and acc_ours >= 0.95


def test_digits_builtin_quantizer():
    xtr, _, xte, yte = load_digits_split()
    m = build(digits_model_path(), target="ref", calibration=xtr[:256], input_shapes={"input": xte.shape})
    float_acc = (ort_run(digits_model_path(), {"input": xte})[0].argmax(1) == yte).mean()
    assert (m(input=xte).argmax(1) == yte).mean() >= float_acc - 0.01


def test_digits_8bit_weights_vs_onnxruntime_qdq_semantics():
    xtr, _, xte, _ = load_digits_split()
    q = ort_quantize_static(digits_model_path(), [{"input": xtr[i:i + 1]} for i in range(0, 400, 4)])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    theirs = ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"input": xte})[0]
    ours = build(q, target="ref", input_shapes={"input": xte.shape})(input=xte)
    assert (ours.argmax(1) == theirs.argmax(1)).mean() >= 0.99
    assert cosine(ours, theirs) >= 0.999
