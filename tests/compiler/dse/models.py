"""A tiny int8 (QDQ) model for the sweep tests, built from seeded code."""
from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=None)
def tiny_qdq_model() -> bytes:
    """Two 3x3 convs (8 -> 16 -> 16 channels) + ReLU on an 8x8 image, quantized by onnxruntime; its bytes."""
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo.builder import OnnxBuilder

    b = OnnxBuilder(seed=3)
    y = b.op("Relu", [b.conv("input", 8, 16, 3)])
    y = b.op("Relu", [b.conv(y, 16, 16, 3)])
    model = b.model("tiny", "input", (1, 8, 8, 8), y)
    rng = np.random.default_rng(0)
    calib = [{"input": rng.standard_normal((1, 8, 8, 8)).astype(np.float32)} for _ in range(2)]
    return ort_quantize_static(model, calib).SerializeToString()
