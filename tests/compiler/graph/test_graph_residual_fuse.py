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


def _two_conv_add_model():
    """Two convs of one input, added (+ Relu); both conv results are also graph outputs, so the Add cannot be
    fused into either conv."""
    from onnx import TensorProto, helper, numpy_helper

    w1 = RNG.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1
    w2 = RNG.standard_normal((32, 16, 1, 1)).astype(np.float32) * 0.3
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["y1"]),
             helper.make_node("Conv", ["x", "w2"], ["y2"]),
             helper.make_node("Add", ["y1", "y2"], ["a"]),
             helper.make_node("Relu", ["a"], ["out"])]
    g = helper.make_graph(nodes, "two_convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("out", "y1", "y2")],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_standalone_add_of_two_accelerator_results():
    from compiler.quant.ort_tools import ort_quantize_static

    calib = [{"x": RNG.standard_normal((1, 16, 8, 8)).astype(np.float32)} for _ in range(2)]
    q = ort_quantize_static(_two_conv_add_model(), calib, per_channel=False, symmetric_activations=False)
    x = RNG.standard_normal((1, 16, 8, 8)).astype(np.float32)
    sim, ref = build(q, "pynq-z1", target="sim"), build(q, "pynq-z1", target="ref")
    host = build(q, "pynq-z1", target="sim", fuse_residual=False)
    outs = sim(x=x)
    for got, want_ref, want_host in zip(outs, ref(x=x), host(x=x)):
        np.testing.assert_array_equal(got, want_ref)
        np.testing.assert_array_equal(got, want_host)
    assert sim.compiled.stats["residual_adds_fused"] == 0 and sim.compiled.stats["residual_adds_standalone"] == 1
    assert host.profile_summary()["host_ops"]["QAdd"] == 1 and "QAdd" not in sim.profile_summary()["host_ops"]
    assert sim.profile_summary()["accel_mac_fraction"] == 1.0  # the identity conv adds no real MACs
