"""Today's model families (compiler.zoo.modern, small sizes) fully on the accelerator under the built-in PTQ."""
from __future__ import annotations

import tempfile
import warnings

import numpy as np
import pytest

from compiler import build
from compiler.graph.offload import HostFallbackWarning
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.zoo import modern

SMALL = {"bert": dict(tokens=8, hidden=32, heads=2, layers=1, vocab=64),
         "vit": dict(image=16, patch=8, hidden=32, heads=2, layers=1),
         "yolo": dict(image=32, width=16, classes=2),
         "dbnet": dict(image=32, width=16),
         "recognizer": dict(height=16, width=32, hidden=32, heads=2)}


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_builtin_ptq_runs_every_mac_on_the_accelerator(name):
    model = modern.MODELS[name](**SMALL[name])
    cal = modern.sample_inputs(model, 3, seed=1)
    feed = modern.sample_inputs(model, 1, seed=2)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostFallbackWarning)  # every MAC-doing layer on the accelerator
        mod = build(model, "pynq-z1", target="ref", calibration=cal, progress=False)
    y = mod.run(feed)[0]
    assert mod.profile_summary()["accel_mac_fraction"] == 1.0
    assert cosine(y, ort_run(model, feed)[0]) > 0.99


@pytest.mark.parametrize("name", ["yolo", "dbnet", "bert", "vit"])
def test_ort_quantize_static_defaults_match_onnxruntime(name):
    """onnxruntime's default QDQ (uint8 asymmetric activations, the attention MatMuls' zero points included): all on
    the accelerator, sim == ref, close to ORT."""
    model = modern.MODELS[name](**SMALL[name])
    cal = modern.sample_inputs(model, 3, seed=1)
    feed = modern.sample_inputs(model, 1, seed=2)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(model, cal, defaults=True)
    sim = build(q, "pynq-z1", target="sim", progress=False)
    y = sim.run(feed)[0]
    assert sim.profile_summary()["accel_mac_fraction"] == 1.0
    np.testing.assert_array_equal(y, build(q, "pynq-z1", target="ref", progress=False).run(feed)[0])
    assert cosine(y, ort_run(q, feed)[0]) > 0.99


@pytest.mark.parametrize("name", ["bert", "vit"])
def test_ort_quantize_dynamic_encoders_run_their_integer_layers_on_the_accelerator(name):
    """quantize_dynamic (DynamicQuantizeLinear -> MatMulInteger/ConvInteger -> Cast -> Mul): every integer layer on
    the accelerator, bit-equal to the integer layers run by the host kernels; only the attention MatMuls that
    onnxruntime leaves in float stay on the host, named."""
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    model = modern.MODELS[name](**SMALL[name])
    feed = modern.sample_inputs(model, 1, seed=2)[0]
    with tempfile.TemporaryDirectory() as d:
        onnx.save(model, f"{d}/f.onnx")
        quantize_dynamic(f"{d}/f.onnx", f"{d}/q.onnx")
        dyn = onnx.load(f"{d}/q.onnx")
    with pytest.warns(HostFallbackWarning, match="quantize_dynamic leaves"):
        sim = build(dyn, "pynq-z1", target="sim", progress=False)
    assert {op for _name, op, _why in sim.compiled.stats["host_fallbacks"]} == {"MatMul"}
    y = sim.run(feed)[0]
    host = build(dyn, "pynq-z1", target="ref", progress=False, quantize=False).run(feed)[0]
    np.testing.assert_array_equal(y, host)
    assert sim.compiled.stats["integer_ops_lowered"] == sum(n.op_type in ("MatMulInteger", "ConvInteger")
                                                            for n in dyn.graph.node)
    assert sim.profile_summary()["accel_mac_fraction"] >= 0.9
    assert cosine(y, ort_run(dyn, feed)[0]) > 0.99
