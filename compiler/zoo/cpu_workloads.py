"""The zoo workloads the CPU backends are compared on (shared by tests and the benchmark)."""
from __future__ import annotations

from typing import Callable

import numpy as np


def zoo_workloads(seed: int = 0) -> dict[str, Callable[[], tuple]]:
    """name -> factory returning ``(model, build_kwargs, feeds)``; int8 models on the ``ref`` target."""
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import digits_model_path, load_digits_split, mobilenet_v2_small, resnet18_small

    rng = np.random.default_rng(seed)
    calib = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)

    def builtin(fn):
        return lambda: (fn(), {"calibration": calib}, {"input": x})

    def ort(fn):
        return lambda: (ort_quantize_static(fn(), [{"input": c[None]} for c in calib], reduce_range=True), {}, {"input": x})

    def digits():
        xtr, _, xte, _ = load_digits_split()
        q = ort_quantize_static(digits_model_path(), [{"input": xtr[i:i + 1]} for i in range(0, 400, 4)], reduce_range=True)
        return q, {"input_shapes": {"input": xte.shape}}, {"input": xte}

    return {"resnet18_small": builtin(resnet18_small), "resnet18_small_ort": ort(resnet18_small),
            "mobilenet_v2_small": builtin(mobilenet_v2_small), "mobilenet_v2_small_ort": ort(mobilenet_v2_small),
            "digits": digits}
