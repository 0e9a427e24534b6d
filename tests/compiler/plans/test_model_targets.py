"""Whole models on the llvm target (fp32 vs onnxruntime, int8 vs the ``ref`` executor) and the cuda build."""
from __future__ import annotations

import logging
import warnings

import numpy as np
import onnx
import pytest

from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.backend.plans.plans import UnsupportedOnTarget
from compiler.backend.cuda.runtime import NoGpuError, gpu_present
from compiler.zoo import mobilenet_v2_small, mobilenet_v3_small, resnet18_small
from compiler.zoo.builder import OnnxBuilder

logging.getLogger().setLevel(logging.ERROR)
RNG = np.random.default_rng(7)
X = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)


def rel_err(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())


@pytest.mark.parametrize("factory", [resnet18_small, mobilenet_v2_small, mobilenet_v3_small])
def test_fp32_model_on_llvm_matches_onnxruntime(factory):
    model = factory()
    mod = build(model, target="llvm", progress=False)
    got = mod(input=X)
    want = ort_run(model, {"input": X})[0]
    assert got.shape == want.shape and got.dtype == np.float32
    assert rel_err(got, want) < 1e-4
    rows = mod.profile()
    assert {r["cpu_backend"] for r in rows} <= {"llvm", "view"}  # every layer is a library kernel (or a view)
    assert not any(r["op"] in ("Relu", "Clip") for r in rows)  # activations ride in the conv output stage
    assert mod.compiled.stats["epilogues_fused"] > 0
    np.testing.assert_array_equal(mod(input=X), got)  # cached kernels, same bytes


@pytest.mark.parametrize("factory,per_channel", [(resnet18_small, True), (mobilenet_v2_small, True),
                                                 (resnet18_small, False)])
def test_int8_qdq_model_on_llvm_is_bit_exact_with_ref(factory, per_channel):
    calib = [{"input": RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(factory(), calib, per_channel=per_channel)
        mod = build(q, target="llvm", progress=False)
        ref = build(q, target="ref", progress=False)
    accel = sum(n.op.startswith("Accel") for n in mod.graph.nodes)
    assert mod.compiled.stats["int8_layers_compiled"] == accel > 0
    assert mod.accel.packed_layers == accel  # every int8 conv/dense runs on the packed layout (no numpy repack)
    assert not any(n.op == "FoldTaps" for n in mod.graph.nodes)  # the stem's zero channels are skipped instead
    got, want = mod(input=X), ref(input=X)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    backends = {r["cpu_backend"] for r in mod.profile() if r["target"] == "cpu"}
    assert "llvm" in backends  # quantize/dequantize run as library kernels
    # the int8 convs ran on the CPU: profiled as CPU layers, their time in end_to_end_ms, no accelerator MACs
    rows, summ = mod.profile(), mod.profile_summary()
    assert {r["target"] for r in rows} == {"cpu"} and summ["accel_layers"] == 0
    assert summ["accel_mac_fraction"] == 0.0 and summ["host_macs"] > 0
    assert summ["end_to_end_ms"] == pytest.approx(sum(r["time_ms"] for r in rows))
    assert ref.profile_summary()["accel_mac_fraction"] == 1.0  # the accelerator targets keep theirs


def test_cuda_target_compiles_every_kernel_and_runs_only_with_a_gpu():
    model = resnet18_small()
    mod = build(model, target="cuda", progress=False)  # compiles every layer's kernel for the GPU
    kernels = [fn for _, fn in mod.cpu._plans.values()]
    assert mod.cpu.name == "cuda" and len(kernels) >= 10
    assert all(".entry" in fn.ptx and "%ctaid.x" in fn.ptx for fn in kernels)  # PTX with block-indexed kernels
    calib = [{"input": RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(model, calib, per_channel=True)
        qmod = build(q, target="cuda", progress=False)  # int8 layers compiled for the GPU too (NCHW QConv2D)
    qconvs = [n for n in qmod.graph.nodes if n.op == "QConv2D"]
    assert qconvs and all(".entry" in qmod.cpu._plans[id(n)][1].ptx for n in qconvs)
    if gpu_present():
        np.testing.assert_allclose(mod(input=X), ort_run(model, {"input": X})[0], rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(qmod(input=X), build(q, target="ref", progress=False)(input=X))
    else:
        with pytest.raises(NoGpuError, match="no GPU"):
            mod(input=X)


def _tan_model() -> onnx.ModelProto:
    b = OnnxBuilder()
    y = b.op("Tan", [b.conv("input", 3, 4, 3)])
    return b.model("tan", "input", (1, 3, 8, 8), y)


def test_unsupported_operator_is_named_at_build_time():
    with pytest.raises(UnsupportedOnTarget, match=r"Tan is not in the operator library for target 'llvm'"):
        build(_tan_model(), target="llvm", progress=False)


def test_model_target_rejects_accelerator_only_arguments():
    with pytest.raises(ValueError, match=r"\['cpu'\] apply only to accelerator targets"):
        build(resnet18_small(), target="llvm", cpu="llvm")


def test_unsupported_dtypes_and_attributes_are_named():
    from compiler.graph.ir import Node, TensorInfo
    from compiler.backend.plans.plans import plan_node

    def plan(op, dtypes, attrs=None, shape=(2, 3, 4, 4)):
        node = Node(op, [f"x{i}" for i in range(len(dtypes))], ["y"], attrs or {}, name="n")
        return plan_node(node, [TensorInfo(shape, np.dtype(d)) for d in dtypes], {}, "llvm")

    with pytest.raises(UnsupportedOnTarget, match=r"Relu\): dtype int64 not supported \(float32; relu/clip also"):
        plan("Relu", ["int64"])
    with pytest.raises(UnsupportedOnTarget, match=r"HardSwish\): dtype int8 not supported"):
        plan("HardSwish", ["int8"])
    with pytest.raises(UnsupportedOnTarget, match=r"Div\): operands int32/int32"):
        plan("Div", ["int32", "int32"])
    with pytest.raises(UnsupportedOnTarget, match="dilated pooling is not in the library"):
        plan("MaxPool", ["float32"], {"kernel_shape": [2, 2], "dilations": [2, 2]})
    with pytest.raises(UnsupportedOnTarget, match="the weight must be a constant initializer"):
        plan("Conv", ["float32", "float32"], {}, (1, 3, 8, 8))


def test_data_movement_nodes_run_on_numpy_inside_a_llvm_model():
    b = OnnxBuilder()
    c1, c2 = b.conv("input", 3, 8, 3), b.conv("input", 3, 8, 1)
    cat = b.op("Concat", [c1, c2], axis=1)
    y = b.op("Relu", [b.op("Transpose", [cat], perm=[0, 1, 3, 2])])
    model = b.model("cat", "input", (1, 3, 8, 8), y)
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    mod = build(model, target="llvm", progress=False)
    assert rel_err(mod(input=x), ort_run(model, {"input": x})[0]) < 1e-5
    by = {r["op"]: r["cpu_backend"] for r in mod.profile()}
    assert by["Concat"] == by["Transpose"] == "numpy" and by["FusedConv"] == "llvm" and by["Relu"] == "llvm"


def test_preactivation_batchnorm_and_nary_sum_on_llvm_match_onnxruntime():
    """Exporters' graphs: a BatchNormalization no Conv absorbs (pre-activation) and a 3-input broadcasting Sum."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    c = 8
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("g", rng.uniform(0.5, 1.5, c)), ("b", rng.standard_normal(c) * 0.1), ("m", rng.standard_normal(c) * 0.1),
        ("v", rng.uniform(0.5, 1.5, c)), ("w", rng.standard_normal((c, c, 3, 3)) * 0.2),
        ("bias_c", rng.standard_normal((c, 1, 1))))]
    nodes = [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["bn"], epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Sum", ["y", "x", "bias_c"], ["out"])]
    graph = helper.make_graph(nodes, "preact", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 10, 10])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, c, 10, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = rng.standard_normal((1, c, 10, 10)).astype(np.float32)
    mod = build(model, target="llvm", progress=False)
    got = mod(x=x)
    assert rel_err(got, ort_run(model, {"x": x})[0]) < 1e-4
    ops = {r["op"] for r in mod.profile()}
    assert {"BatchNormalization", "Sum"} <= ops  # both ran as library kernels, not folded away


@pytest.mark.parametrize("size", [3, 4])  # odd and even (asymmetric) channel windows
def test_lrn_on_llvm_matches_onnxruntime(size):
    from onnx import TensorProto, helper

    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=2e-3, beta=0.75, bias=2.0)
    graph = helper.make_graph([node], "lrn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 7, 5, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7, 5, 6])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = (np.random.default_rng(size).standard_normal((1, 7, 5, 6)) * 4).astype(np.float32)
    got = build(model, target="llvm", progress=False)(x=x)
    # the ONNX definition in float64: channels [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped
    xd, want = x.astype(np.float64), np.empty(x.shape)
    for c in range(7):
        lo, hi = max(0, c - (size - 1) // 2), min(6, c + size // 2)
        want[:, c] = xd[:, c] / (2.0 + 2e-3 / size * (xd[:, lo:hi + 1] ** 2).sum(axis=1)) ** 0.75
    assert rel_err(got, want) < 1e-5
    if size % 2:  # onnxruntime implements odd sizes only
        assert rel_err(got, ort_run(model, {"x": x})[0]) < 1e-5


def test_lrn_with_non_positive_bias_is_refused_at_build():
    from onnx import TensorProto, helper

    node = helper.make_node("LRN", ["x"], ["y"], size=3, bias=0.0)
    graph = helper.make_graph([node], "lrn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    with pytest.raises(UnsupportedOnTarget, match="bias must be > 0"):
        build(model, target="llvm", progress=False)
