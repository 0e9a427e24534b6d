"""Quantized models on the cuda target keep NCHW int8 layers whose kernels run on the device's arena: one upload
and one download a run, replayed like float models, bit for bit with the ``ref`` integer executor (checked on the
emulated device, ``VTA_CUDA_DEVICE=emulate``)."""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from compiler.backend.cuda.run_replay import DeviceReplay
from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static
from compiler.zoo import mobilenet_v2_small, resnet18_small
from compiler.zoo.builder import OnnxBuilder

logging.getLogger().setLevel(logging.ERROR)
SHAPE = (1, 3, 32, 32)


def biasless_cnn():
    """Convs without bias, each before a BatchNorm (which onnxruntime <= 1.30's quantizer leaves standalone, as
    :func:`_quantized` does here for this model): their int8 layers have an absent bias input, and their weights must
    still be pinned on the device (on an H200 they were not: each such layer uploaded its weight every run, ~0.1 ms,
    and no run was replayed)."""
    b = OnnxBuilder(3)
    y = b.conv_bn("input", 3, 8, 3)
    y = b.conv_bn(y, 8, 16, 3, stride=2)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    return b.model("biasless", "input", SHAPE, b.gemm(y, 16, 4))


def _quantized(make, per_channel: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    calib = [{"input": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if make is biasless_cnn:  # its BatchNorms kept standalone (as onnxruntime <= 1.30's preprocessing does);
            # symmetric int8 activations: no zero point folds into a bias, so the convs' int8 layers have none
            return ort_quantize_static(make(), calib, per_channel=per_channel, preprocess=False)
        return ort_quantize_static(make(), calib, per_channel=per_channel, defaults=True)


@pytest.mark.parametrize("make,per_channel", [(resnet18_small, False), (mobilenet_v2_small, True),
                                              (biasless_cnn, False)])
def test_quantized_model_runs_on_the_device_bit_exact(emulated, make, per_channel, monkeypatch):
    q = _quantized(make, per_channel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = build(q, target="ref", progress=False, fuse_residual=False)
    mod = build(q, target="cuda", progress=False)
    ops = {n.op for n in mod.graph.nodes}
    assert "QConv2D" in ops and not ops & {"AccelConv2D", "AccelDense", "FoldTaps"}
    if make is biasless_cnn:  # the convs' int8 layers have no bias (the BatchNorms' depthwise layers have one)
        assert sum(n.inputs[2:] == [""] for n in mod.graph.nodes if n.op == "QConv2D") == 2
    replayed = []
    real = DeviceReplay.run
    monkeypatch.setattr(DeviceReplay, "run", lambda self, on_device=False: replayed.append(1) or real(self, on_device))
    rng = np.random.default_rng(1)
    for i in range(6):
        x = (rng.standard_normal(SHAPE) * (1 + i)).astype(np.float32)
        up, down = emulated.uploads, emulated.downloads
        got = np.asarray(mod(input=x))
        if i:  # after the first run (weights uploaded once): the input up, the output down
            assert (emulated.uploads - up, emulated.downloads - down) == (1, 1)
        np.testing.assert_array_equal(got, np.asarray(ref(input=x)))
    assert len(replayed) == 3  # runs 4-6: runs 2 and 3 made the same device operations
    rows = mod.profile()
    assert {r["cpu_backend"] for r in rows if r["op"] in ("QConv2D", "QGlobalAveragePool")} == {"cuda"}


def test_llvm_keeps_the_packed_layout():
    """The llvm target's int8 convs run on the accelerator's packed layout (no NCHW QConv2D layers)."""
    mod = build(_quantized(resnet18_small, False), target="llvm", progress=False)
    ops = {n.op for n in mod.graph.nodes}
    assert "AccelConv2D" in ops and "QConv2D" not in ops


def test_attention_products_keep_the_packed_layout(emulated):
    """An int8 product of two activations (a ViT's attention) takes its weight at run time, which the NCHW
    layers' kernels do not: such a model keeps the packed layout on cuda too, and still equals ``ref``."""
    from compiler.zoo.modern import sample_inputs, vit

    model = vit()
    calib = sample_inputs(model, 2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(model, calib, per_channel=False, defaults=True)
        ref = build(q, target="ref", progress=False, fuse_residual=False)
    mod = build(q, target="cuda", progress=False)
    ops = {n.op for n in mod.graph.nodes}
    assert "AccelDense" in ops and "QDense" not in ops
    for feeds in sample_inputs(model, 2, seed=3):
        got, want = mod.run(feeds), ref.run(feeds)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)  # the float tail (LayerNorm, Softmax) may differ in order
