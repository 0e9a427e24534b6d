"""The fused residual Add (identity GEMM + ALU passes + REQUANT in the conv's epilogue) on the RTL: every layer's
bytes and cycles equal the simulator's (``rtl-check`` raises on the first layer that differs)."""
import numpy as np

from compiler.executor.build import build


def test_ort_default_resnet_block_with_fused_residual_adds_matches_on_rtl():
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo.resnet import resnet18

    rng = np.random.default_rng(5)
    calib = [{"input": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(2)]
    q = ort_quantize_static(resnet18(1, image_size=16, num_classes=10, base_width=16, seed=0), calib, per_channel=False, symmetric_activations=False)
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    rtl = build(q, "pynq-z1", target="rtl-check", progress=False)
    ref = build(q, "pynq-z1", target="ref", progress=False)
    assert rtl.compiled.stats["residual_adds_fused"] == 8
    np.testing.assert_array_equal(rtl(input=x), ref(input=x))  # and rtl-check compared RTL with the simulator
