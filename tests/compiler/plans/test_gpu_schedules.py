"""The library's GPU schedules: PTX for every op, and their loop IR (bound loops run serially) checked on the CPU."""
from __future__ import annotations

import numpy as np
import pytest

import compiler
from compiler.backend.cuda.nvcc import assemble_ptx, have_ptxas
from jit_runtime.host_ops.conv_kernels import conv2d_nchw
from jit_runtime.host_ops.kernels import KERNELS
from compiler.graph.ir import Node, TensorInfo
from compiler.backend.plans.plans import build_schedule, plan_node
from tests.compiler.gpu_on_cpu import serial_on_cpu

RNG = np.random.default_rng(11)


def _case(op, inputs, attrs, consts=()):
    names = [f"t{i}" for i in range(len(inputs))]
    node = Node(op, names, ["y"], dict(attrs), name=op.lower())
    infos = [TensorInfo(a.shape, a.dtype) for a in inputs]
    return node, infos, {names[i]: inputs[i] for i in consts}


W = RNG.standard_normal((16, 8, 3, 3)).astype(np.float32)
WD = RNG.standard_normal((8, 1, 3, 3)).astype(np.float32)
B = RNG.standard_normal(16).astype(np.float32)
X = RNG.standard_normal((1, 8, 9, 10)).astype(np.float32)
X16, W16 = RNG.standard_normal((1, 16, 5, 7)).astype(np.float32), RNG.standard_normal((16, 16, 3, 3)).astype(np.float32)
XD, WM = RNG.standard_normal((3, 40)).astype(np.float32), RNG.standard_normal((24, 40)).astype(np.float32)
CASES = {
    "conv": (("Conv", [X, W, B], {"strides": [2, 1], "pads": [1, 1, 1, 1]}, (1, 2)),
             lambda: conv2d_nchw(X, W, stride=(2, 1), pads=(1, 1, 1, 1)) + B.reshape(1, -1, 1, 1)),
    "conv-flat-pixels": (("Conv", [X16, W16, B], {"pads": [1, 1, 1, 1]}, (1, 2)),
                         lambda: conv2d_nchw(X16, W16, pads=(1, 1, 1, 1)) + B.reshape(1, -1, 1, 1)),
    "conv-flat-strided": (("Conv", [X16, W16], {"strides": [1, 2], "pads": [1, 1, 1, 1]}, (1,)),
                          lambda: conv2d_nchw(X16, W16, stride=(1, 2), pads=(1, 1, 1, 1))),
    "depthwise": (("Conv", [X, WD], {"pads": [1, 0, 1, 2], "group": 8}, (1,)),
                  lambda: conv2d_nchw(X, WD, pads=(1, 0, 1, 2), groups=8)),
    "maxpool": (("MaxPool", [X], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, ()),
                lambda: KERNELS["MaxPool"]({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, X)),
    "gap": (("GlobalAveragePool", [X], {}, ()), lambda: X.mean((2, 3), keepdims=True)),
    "softmax": (("Softmax", [X], {"axis": 1}, ()), lambda: KERNELS["Softmax"]({"axis": 1}, X)),
    "hardswish": (("HardSwish", [X], {}, ()), lambda: KERNELS["HardSwish"]({}, X)),
    "add": (("Add", [X, B[:10].copy()], {}, ()), lambda: X + B[:10]),
    "dense": (("Gemm", [XD, WM], {"transB": 1}, (1,)), lambda: XD @ WM.T),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_schedule_values_and_ptx(name):
    (op, inputs, attrs, consts), want = CASES[name]
    node, infos, cmap = _case(op, inputs, attrs, consts)
    plan = plan_node(node, infos, cmap, "cuda")
    s, args = build_schedule(plan)
    got = serial_on_cpu(s, args)(*plan.args(inputs))
    np.testing.assert_allclose(np.asarray(got).reshape(plan.out_shape), want(), rtol=1e-5, atol=1e-5)
    s, args = build_schedule(plan)
    ptx = compiler.build_op(s, target="cuda", args=args).ptx
    assert ".entry" in ptx and "%tid.x" in ptx and "%ctaid.x" in ptx
    if have_ptxas():
        assert len(assemble_ptx(ptx)) > 0
