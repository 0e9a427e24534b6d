"""On the tiny config (64 WGT rows, 128 ACC rows) a layer's per-channel constants for 64+ output channels do not
fit beside a tile: the conv and depthwise tilers then load them per channel tile instead of failing with "no
tiling fits". Checked against the ``ref`` executor (the same lowered graph on numpy) bit for bit."""
import warnings

import numpy as np
import pytest

from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static
from compiler.zoo.builder import OnnxBuilder


def _model(depthwise: bool):
    b = OnnxBuilder()
    y = b.op("Relu", [b.conv("input", 8, 96, 1)])
    if depthwise:
        y = b.op("Relu", [b.conv(y, 96, 96, 3, stride=2, groups=96)])
    y = b.conv(y, 96, 64, 3 if not depthwise else 1)
    return b.model("wide", "input", (1, 8, 6, 6), y)


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv96-64", "depthwise96"])
def test_wide_layers_run_on_tiny_bit_exact(depthwise):
    rng = np.random.default_rng(7 + depthwise)
    calib = [{"input": rng.standard_normal((1, 8, 6, 6)).astype(np.float32)} for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(_model(depthwise), calib, defaults=True)
    x = calib[1]["input"]
    mod = build(q, target="sim", config="tiny", progress=False)
    assert sum(r["target"] == "accel" for r in (mod(input=x), mod.profile())[1]) >= 2
    np.testing.assert_array_equal(mod(input=x), build(q, target="ref", config="tiny", progress=False)(input=x))
