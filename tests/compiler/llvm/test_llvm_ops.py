"""Each LLVM kernel against the numpy CPU backend on random inputs with edge values (bit-exact ints)."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backend.plans.backend import TargetCpuBackend
from compiler.graph.cpu_backend import NumpyCpuBackend
from compiler.graph.ir import Node
from jit_runtime.host_ops.requant import Requant

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
RNG = np.random.default_rng(1)
LL, NP = TargetCpuBackend("llvm", lazy=True), NumpyCpuBackend()


def i8(*s):
    a = RNG.integers(-128, 128, s).astype(np.int8)
    a.flat[:2] = (-128, 127)  # saturation edges
    return a


def f32(*s, scale=3.0):
    a = (RNG.standard_normal(s) * scale).astype(np.float32)
    a.flat[:4] = (0.0, -0.0, 1e-30, -3e38)
    return a


def same(node, ins, exact=True):
    got = LL.run_node(node, ins)
    assert LL.last_backend == "llvm", f"{node.op} fell back to {LL.last_backend}"
    ref = NP.run_node(node, ins)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        if exact:
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=0)


@pytest.mark.parametrize("make", [i8, f32, lambda *s: RNG.integers(0, 256, s).astype(np.uint8)])
def test_relu_clip(make):
    x = make(2, 3, 5, 7)
    same(Node("Relu", ["x"], ["y"]), [x])
    same(Node("Clip", ["x", "lo", "hi"], ["y"]), [x, np.asarray(3, x.dtype), np.asarray(100, x.dtype)])
    same(Node("Clip", ["x", "", "hi"], ["y"]), [x, None, np.asarray(6, x.dtype)])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("shapes", [((2, 3, 5, 7), (2, 3, 5, 7)), ((2, 3, 5, 7), (3, 1, 7)), ((4, 1), (1, 6))])
def test_binary_broadcast(op, shapes):
    same(Node(op, ["a", "b"], ["c"]), [f32(*shapes[0]), f32(*shapes[1])])
    same(Node(op, ["a", "b"], ["c"]), [i8(*shapes[0]), i8(*shapes[1])])  # int8 wraps like numpy


def test_div_float_and_int_fallback():
    same(Node("Div", ["a", "b"], ["c"]), [f32(3, 8), f32(3, 8) + np.float32(0.5)])
    out = LL.run_node(Node("Div", ["a", "b"], ["c"]), [np.int32([7, -7]), np.int32([2, 2])])
    assert LL.last_backend == "numpy" and out[0].tolist() == [3, -3]  # ONNX integer Div truncates toward zero


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [0, 1, 2, 0], "ceil_mode": 1},
])
@pytest.mark.parametrize("make", [i8, f32])
def test_maxpool(attrs, make):
    same(Node("MaxPool", ["x"], ["y"], dict(attrs)), [make(2, 3, 9, 10)])


@pytest.mark.parametrize("shape", [(2, 5, 2, 2), (1, 4, 7, 7), (1, 3, 30, 30), (2, 3, 1, 1), (1, 40, 3, 3),
                                   (1, 6, 8, 8), (1, 5, 16, 16), (1, 64, 7, 7)])
def test_global_avg_pool_bit_exact(shape):
    same(Node("GlobalAveragePool", ["x"], ["y"]), [f32(*shape, scale=10.0)])
    same(Node("GlobalAveragePool", ["x"], ["y"]), [i8(*shape)])


def test_quantize_edges_and_per_axis():
    halves = np.float32([0.5, 1.5, 2.5, -0.5, -1.5, 127.5, -128.5, 1e9, -1e9, np.inf, -np.inf, 0.0, -0.0])
    same(Node("QuantizeLinear", ["x", "s", "z"], ["y"]), [halves, np.float32(1.0), np.int8(0)])
    same(Node("QuantizeLinear", ["x", "s"], ["y"]), [halves, np.float32(1.0)])  # uint8 without zero point
    same(Node("QuantizeLinear", ["x", "s", "z"], ["y"]), [f32(2, 3, 5, 7, scale=40), np.float32(0.37), np.int8(-3)])
    same(Node("QuantizeLinear", ["x", "s", "z"], ["y"], {"axis": 1}),
         [f32(2, 3, 5, 7, scale=40), np.float32([0.3, 0.5, 0.25]), np.uint8([3, 100, 0])])


def test_dequantize():
    same(Node("DequantizeLinear", ["x", "s", "z"], ["y"]), [i8(2, 3, 5, 7), np.float32(0.37), np.int8(3)])
    same(Node("DequantizeLinear", ["x", "s"], ["y"], {"axis": 0}), [i8(3, 4), np.float32([0.1, 0.2, 0.3])])
    big = RNG.integers(-2 ** 31, 2 ** 31, (3, 5), dtype=np.int64).astype(np.int32)
    same(Node("DequantizeLinear", ["x", "s", "z"], ["y"], {"axis": 0}), [big, np.float32([0.1, 2.0, 3e-5]), np.int32([0, 5, -7])])


@pytest.mark.parametrize("shape,batch,block", [((3, 20, 5, 7), 2, 16), ((1, 32, 4, 4), 1, 16), ((3, 40), 1, 16),
                                               ((1, 3, 130, 131), 1, 16)])  # 272K packed: parallel over rows
def test_pack_unpack_roundtrip(shape, batch, block):
    for make in (i8, f32):
        x = make(*shape)
        same(Node("PackActivation", ["x"], ["p"], {"batch": batch, "block": block}), [x])
        packed = NP.run_node(Node("PackActivation", ["x"], ["p"], {"batch": batch, "block": block}), [x])[0]
        same(Node("UnpackActivation", ["p"], ["y"], {"n": shape[0], "c": shape[1]}), [packed])
        same(Node("UnpackActivation", ["p"], ["y"], {"n": 1, "c": 3}), [packed])  # crop inside the first block


@pytest.mark.parametrize("shape,axis", [((4, 10), 1), ((4, 10, 3), 1), ((2, 3, 130), -1)])
def test_softmax(shape, axis):
    same(Node("Softmax", ["x"], ["y"], {"axis": axis}), [f32(*shape)], exact=False)


@pytest.mark.parametrize("case", [
    dict(c=8, o=8, g=8, k=(3, 3), s=(2, 2), p=(1, 1, 1, 1), d=(1, 1), pre=2, relu=True, lo=-128, hi=127, bias=True),
    dict(c=6, o=4, g=2, k=(3, 2), s=(1, 2), p=(0, 2, 1, 0), d=(2, 1), pre=0, relu=False, lo=-1000, hi=100000, bias=False),
    dict(c=4, o=6, g=1, k=(1, 1), s=(1, 1), p=(0, 0, 0, 0), d=(1, 1), pre=31, relu=False, lo=-5, hi=9, bias=True),
])
def test_qconv2d_requant(case):
    o = case["o"]
    rq = Requant(pre_shift=case["pre"], multiplier=RNG.integers(-32768, 32768, o), shift=RNG.integers(0, 32, o),
                 relu=case["relu"], out_min=case["lo"], out_max=case["hi"])
    attrs = {"requant": rq, "strides": list(case["s"]), "pads": list(case["p"]), "group": case["g"],
             "dilations": list(case["d"])}
    bias = RNG.integers(-2 ** 31, 2 ** 31, o, dtype=np.int64).astype(np.int32) if case["bias"] else None
    x, w = i8(2, case["c"], 9, 11), i8(o, case["c"] // case["g"], *case["k"])
    same(Node("QConv2D", ["x", "w", "b" if bias is not None else ""], ["y"], attrs), [x, w, bias])


@pytest.mark.parametrize("zp,relu", [(0, False), (-9, True), (17, False)])
def test_qconv2d_wide_requant_with_zero_point(zp, relu):
    """The 31-bit multiplier contract (64-bit product, shifts up to 63, zero point) is bit-exact with numpy."""
    o, c = 8, 16
    rq = Requant(multiplier=RNG.integers(1 << 30, 1 << 31, o), shift=RNG.integers(30, 64, o), relu=relu,
                 zero_point=zp)
    attrs = {"requant": rq, "strides": [1, 1], "pads": [1, 1, 1, 1], "group": 1, "dilations": [1, 1]}
    bias = RNG.integers(-2 ** 20, 2 ** 20, o).astype(np.int32)
    x, w = i8(1, c, 7, 7), i8(o, c, 3, 3)
    same(Node("QConv2D", ["x", "w", "b"], ["y"], attrs), [x, w, bias])
    assert LL.last_backend == "llvm"


def test_views_and_fallback_are_labelled():
    x = i8(2, 3, 4, 4)
    y = LL.run_node(Node("Flatten", ["x"], ["y"], {"axis": 1}), [x])[0]
    assert LL.last_backend == "view" and y.shape == (2, 48) and np.shares_memory(x, y)
    LL.run_node(Node("Transpose", ["x"], ["y"], {"perm": [0, 2, 3, 1]}), [x])
    assert LL.last_backend == "numpy"
    assert LL.supports("Transpose") and LL.compiles("MaxPool") and not LL.compiles("Transpose")
    assert not LL.supports("NoSuchOp")


def test_kernel_cache_reuses_compiled_code():
    from compiler.backend.plans.compile import compiled_kernels

    x = f32(3, 17)
    LL.run_node(Node("Relu", ["x"], ["y"]), [x])
    before = compiled_kernels()
    LL.run_node(Node("Relu", ["x2"], ["y2"]), [f32(3, 17)])  # another node, same signature: no new kernel
    assert compiled_kernels() == before
    LL.run_node(Node("Relu", ["x3"], ["y3"]), [f32(3, 18)])
    assert compiled_kernels() == before + 1
