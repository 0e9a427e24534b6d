"""Acceptance: full-size ResNet-18 and MobileNetV2 (random weights, 1x3x224x224) end to end on "sim".

Each model is quantized twice -- by onnxruntime's quantize_static (QDQ) and by the built-in
quantizer (exported as a QDQ ONNX model with our scales) -- and the logits must reach cosine
similarity >= 0.999 to onnxruntime's output for the same quantized model. Built models are
shared through module-scoped fixtures; each simulator run takes ~15 s on 2 cores.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

from compiler.executor import available_accel_backends, build
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.quant.qdq_export import export_qdq_model
from compiler.zoo import mobilenet_v2, resnet18
from tests.compiler.helpers import cosine

logging.getLogger().setLevel(logging.ERROR)
pytestmark = pytest.mark.slow
SHAPE = (1, 3, 224, 224)
# accelerator layers: ResNet-18 20 convs + fc; MobileNetV2 35 pointwise/full convs + 17 depthwise + fc
ACCEL_LAYERS = {"resnet18": 21, "mobilenet_v2": 53}


def _need_sim() -> None:
    assert "sim" in available_accel_backends(), (
        f"accelerator backend 'sim' is not registered (have {available_accel_backends()})")


@pytest.fixture(scope="module", params=["resnet18", "mobilenet_v2"])
def case(request):
    _need_sim()
    fn = {"resnet18": resnet18, "mobilenet_v2": mobilenet_v2}[request.param]
    rng = np.random.default_rng(7)
    model = fn()
    calib = rng.standard_normal((4,) + SHAPE[1:]).astype(np.float32)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    return request.param, model, calib, x


def _check_run(name: str, mod, x, ort_model) -> None:
    ours = mod(input=x)
    ref = ort_run(ort_model, {"input": x})[0]
    assert ours.shape == ref.shape == (1, 1000)
    c = cosine(ours, ref)
    assert c >= 0.999, f"{name}: cosine {c:.6f} < 0.999"
    s = mod.profile_summary()
    # and a depthwise 1x1 layer for each BatchNormalization the quantizer left standalone (onnxruntime <= 1.30's
    # quant_pre_process does not fold them into the convs; 1.32's does)
    standalone_bns = sum(n.op_type == "BatchNormalization" for n in ort_model.graph.node)
    assert s["accel_layers"] == ACCEL_LAYERS[name] + standalone_bns
    assert s["accel_cycles"] > 0 and s["macs"] > 0


def test_ort_quantized_model_on_sim(case):
    name, model, calib, x = case
    # 7-bit weights (reduce_range) keep onnxruntime's AVX2 int8 kernels exact for the QDQ semantics
    q = ort_quantize_static(model, [{"input": c[None]} for c in calib], reduce_range=True)
    _check_run(name, build(q, "pynq-z1", target="sim", progress=False), x, q)


def test_builtin_quantizer_on_sim(case):
    name, model, calib, x = case
    exported = export_qdq_model(model, calib)
    ops = {n.op_type for n in exported.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops and "BatchNormalization" not in ops
    # the exported QDQ model is exactly the graph our quantizer compiles (bit-identical on "ref")
    ours_ref = build(model, "pynq-z1", target="ref", calibration=calib, progress=False)(input=x)
    exported_ref = build(exported, "pynq-z1", target="ref", progress=False)(input=x)
    np.testing.assert_array_equal(ours_ref, exported_ref)
    _check_run(name, build(model, "pynq-z1", target="sim", calibration=calib, progress=False), x, exported)


def test_ort_quantized_8bit_weights_on_sim():
    """Full 8-bit weights (quantize_static defaults). onnxruntime's fused AVX2 u8s8 kernels saturate int16
    partial sums on CPUs without VNNI (the reason quantize_static has reduce_range), so the reference here is
    onnxruntime with graph optimizations at BASIC, which computes the QDQ model's own semantics."""
    import onnxruntime as ort

    _need_sim()
    rng = np.random.default_rng(8)
    model = resnet18()
    calib = rng.standard_normal((4,) + SHAPE[1:]).astype(np.float32)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    q = ort_quantize_static(model, [{"input": c[None]} for c in calib])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"input": x})[0]
    ours = build(q, "pynq-z1", target="sim", progress=False)(input=x)
    c = cosine(ours, ref)
    assert c >= 0.999, f"resnet18 8-bit weights: cosine {c:.6f} < 0.999"
    fused = ort_run(q, {"input": x})[0]
    print(f"cosine vs ORT basic {c:.6f}, vs ORT fused {cosine(ours, fused):.6f}")
