"""``AccelConv2D -> QAdd`` fuses into one accelerator layer; ORT-default-quantized ResNet blocks stay bit-exact."""
import numpy as np
import pytest

from compiler.executor.build import build

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("per_channel", [False, True])
def test_ort_default_resnet_residual_adds_on_the_accelerator(per_channel):
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import resnet18_small

    calib = [{"input": RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    q = ort_quantize_static(resnet18_small(), calib, per_channel=per_channel, symmetric_activations=False)
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    fused, ref = build(q, "pynq-z1", target="sim"), build(q, "pynq-z1", target="ref")
    host = build(q, "pynq-z1", target="sim", fuse_residual=False)
    y = fused(input=x)
    np.testing.assert_array_equal(y, ref(input=x))   # the numpy reference runs the host QAdd after the conv
    np.testing.assert_array_equal(y, host(input=x))  # the unfused graph: QAdd on the host
    n_adds = host.profile_summary()["host_ops"].get("QAdd", 0)
    assert n_adds == 8 and fused.compiled.stats["residual_adds_fused"] == n_adds
    s = fused.profile_summary()
    assert "QAdd" not in s["host_ops"] and s["accel_mac_fraction"] == 1.0
    assert sum(n.attrs.get("residual") is not None for n in fused.compiled.graph.nodes) == n_adds


def test_no_fusion_where_the_config_lacks_requant():
    """On a config without the REQUANT ALU op the Add stays a host QAdd (and the result is the same)."""
    from compiler.graph.residual_fuse import fuse_residual_adds
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import resnet18_small

    calib = [{"input": RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)}]
    q = ort_quantize_static(resnet18_small(), calib, per_channel=False, symmetric_activations=False)
    m = build(q, "pynq-z1", target="ref", fuse_residual=False)
    from isa import make_config

    assert fuse_residual_adds(m.compiled.graph, make_config("tiny")) == 0
    assert fuse_residual_adds(m.compiled.graph, make_config("pynq-z1")) == 8
