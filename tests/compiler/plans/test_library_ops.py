"""Operator-library kernels compiled for llvm against the numpy kernels (the graph-level reference)."""
from __future__ import annotations

import numpy as np
import pytest

from jit_runtime.host_ops.conv_kernels import conv2d_nchw, qconv2d
from jit_runtime.host_ops.kernels import KERNELS
from jit_runtime.host_ops.pooling import pool_axes
from jit_runtime.host_ops.requant import Requant
from compiler.backend.plans.compile import compile_plan
from compiler.backend.plans.plans import OpPlan
from compiler.topi import conv2d_direct as cd
from compiler.topi import elementwise, pool, quantize, requant_int, softmax

RNG = np.random.default_rng(3)


def run(make, *args):
    key = ("test", id(make), RNG.integers(1 << 62))
    return np.asarray(compile_plan(OpPlan(key, make, list), "llvm")(*args))


def _conv_make(spec, **kw):
    def make():
        op = cd.conv2d(spec, **kw)
        return op.inputs, op.out, lambda s: cd.schedule_cpu(op, s)
    return make


CONVS = [cd.Conv2dSpec(1, 16, 10, 10, 16, 3, 3, (1, 1), (1, 1, 1, 1)),            # 3x3, ragged pixel tile
         cd.Conv2dSpec(1, 8, 9, 11, 24, 3, 3, (2, 2), (1, 0, 1, 2), groups=2),      # grouped, strided, odd pads
         cd.Conv2dSpec(1, 16, 8, 8, 16, 3, 3, (2, 2), (1, 1, 1, 1), groups=16),    # depthwise
         cd.Conv2dSpec(2, 3, 7, 6, 5, 2, 3, (1, 2), (0, 1, 1, 0), (2, 1)),          # batch 2, no 8-block, dilated
         cd.Conv2dSpec(2, 32, 9, 14, 32, 3, 3, (1, 1), (1, 2, 1, 0)),              # 6 x 16 tiles, ragged (14 = 6+6+2)
         cd.Conv2dSpec(1, 16, 5, 13, 32, 1, 1),                                    # 6 x 16 ragged, no padding
         cd.Conv2dSpec(2, 16, 7, 5, 32, 3, 3, (1, 1), (1, 1, 0, 2)),              # 6 x 16 over flattened pixels
         cd.Conv2dSpec(1, 16, 11, 9, 32, 3, 3, (2, 2), (1, 1, 1, 0)),             # flat, columns by phase
         cd.Conv2dSpec(1, 16, 10, 13, 16, 3, 3, (2, 3), (0, 1, 2, 2), (1, 2))]    # flat, stride 3 x dilation 2


@pytest.mark.parametrize("spec", CONVS, ids=["3x3", "grouped", "depthwise", "dilated", "wide-ragged", "1x1-ragged", "flat", "flat-s2", "flat-s3-d2"])
def test_float_conv_with_bias_residual_clip(spec):
    x = RNG.standard_normal((spec.n, spec.c, spec.h, spec.w)).astype(np.float32)
    w = RNG.standard_normal((spec.o, spec.cg, spec.kh, spec.kw)).astype(np.float32)
    b = RNG.standard_normal(spec.o).astype(np.float32)
    r = RNG.standard_normal((spec.n, spec.o, spec.oh, spec.ow)).astype(np.float32)
    got = run(_conv_make(spec, bias=True, residual=True, act="clip", act_params=(0.0, 6.0)), x,
              cd.pack_weight(spec, w), b, r.reshape(cd.output_shape(spec)))
    got = got.reshape(r.shape)
    want = np.clip(conv2d_nchw(x, w, stride=spec.stride, pads=spec.pads, dilations=spec.dilations, groups=spec.groups)
                   + b.reshape(1, -1, 1, 1) + r, 0, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", CONVS[:3], ids=["3x3", "grouped", "depthwise"])
def test_int8_conv_with_requant_is_bit_exact(spec):
    s8 = cd.Conv2dSpec(spec.n, spec.c, spec.h, spec.w, spec.o, spec.kh, spec.kw, spec.stride, spec.pads,
                       spec.dilations, spec.groups, "int8", pad_value=-5)
    x = RNG.integers(-128, 128, (s8.n, s8.c, s8.h, s8.w)).astype(np.int8)
    w = RNG.integers(-128, 128, (s8.o, s8.cg, s8.kh, s8.kw)).astype(np.int8)
    bias = RNG.integers(-20000, 20000, s8.o)
    rq = Requant(0, RNG.integers(1 << 29, 1 << 31, s8.o), RNG.integers(28, 40, s8.o), True, -128, 127, zero_point=-5)
    extra, fn, dt = requant_int.requant_stage(rq, s8.o)
    got = run(_conv_make(s8, stage=(extra, fn, dt)), x, cd.pack_weight(s8, w), *requant_int.requant_params(rq, bias, s8.o))
    got = got.reshape(s8.n, s8.o, s8.oh, s8.ow)
    want = qconv2d(x, w, bias, rq, stride=s8.stride, pads=s8.pads, groups=s8.groups, pad_value=-5)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("attrs", [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                                   dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 1, 0], ceil_mode=1,
                                        count_include_pad=1)])
def test_pools(attrs):
    x = RNG.standard_normal((1, 8, 9, 10)).astype(np.float32)
    ax = pool_axes(attrs, (9, 10))
    spec = pool.PoolSpec(1, 8, 9, 10, ax[0].k, ax[1].k, (ax[0].s, ax[1].s), (ax[0].begin, ax[1].begin, ax[0].end,
                                                                              ax[1].end), ax[0].out, ax[1].out)

    def make_max():
        ins, y = pool.max_pool(spec)
        return ins, y, lambda s: pool.schedule_cpu(s, [y])

    def make_avg():
        ins, y = pool.avg_pool(spec, bool(attrs.get("count_include_pad")))
        return ins, y, lambda s: pool.schedule_cpu(s, [y.op.inputs[0], y])

    np.testing.assert_array_equal(run(make_max, x), KERNELS["MaxPool"](attrs, x))
    np.testing.assert_allclose(run(make_avg, x), KERNELS["AveragePool"](attrs, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n,c,h,w", [(1, 64, 7, 7), (2, 24, 3, 3), (1, 16, 2, 2), (1, 8, 8, 16), (1, 3, 1, 1),
                                     (1, 5, 10, 20)])
def test_cpu_global_avg_pool_sums_as_numpy(n, c, h, w):
    """The CPU GlobalAveragePool: numpy's 8 pairwise accumulators (one vector of contiguous loads), its tree and
    ragged tail, then / P: bit-exact with ``np.mean`` up to 128 pixels, within float rounding beyond (200 pixels:
    numpy splits the run in halves there)."""
    from compiler.backend.plans.plans_float import plan_pool
    from compiler.graph.ir import Node, TensorInfo

    x = (RNG.standard_normal((n, c, h, w)) * 10).astype(np.float32)
    op = plan_pool(Node("GlobalAveragePool", ["x"], ["y"]), [TensorInfo(x.shape, np.float32)], {}, "llvm")
    fn = compile_plan(op, "llvm")
    got = np.asarray(fn(*op.args([x]))).reshape(op.out_shape)
    want = x.mean(axis=(2, 3), keepdims=True)
    if h * w <= pool.GAP_EXACT_MAX:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    if h * w >= 8:
        assert "<8 x float>" in fn.llvm_ir and "gather" not in fn.llvm_ir


def test_softmax_and_activations():
    x = (RNG.standard_normal((3, 37)) * 4).astype(np.float32)

    def make_sm():
        ins, st = softmax.softmax(x.shape)
        return ins, st[-1], lambda s: softmax.schedule_cpu(s, st)

    np.testing.assert_allclose(run(make_sm, x), KERNELS["Softmax"]({"axis": -1}, x), rtol=1e-5, atol=1e-7)
    for kind, params, op, attrs in (("hardswish", (), "HardSwish", {}), ("sigmoid", (), "Sigmoid", {}),
                                    ("hardsigmoid", (0.3, 0.4), "HardSigmoid", {"alpha": 0.3, "beta": 0.4})):
        def make(kind=kind, params=params):
            from compiler.topi.injective import schedule_injective

            ins, y = elementwise.unary(x.shape, "float32", kind, params)
            return ins, y, lambda s: schedule_injective(s, y, "llvm")

        np.testing.assert_allclose(run(make, x), KERNELS[op](attrs, x), rtol=1e-6, atol=1e-6, err_msg=kind)


def test_quantize_dequantize_per_channel():
    x = (RNG.standard_normal((1, 4, 5, 6)) * 60).astype(np.float32)
    x[0, 0, 0, :4] = [0.5, 1.5, 2.5, -0.5]  # ties: round half to even
    scale = np.array([1.0, 0.5, 2.0, 0.25], np.float32)
    zp = np.array([0, -3, 7, 1], np.int32)

    def make_q():
        from compiler.topi.injective import schedule_injective

        ins, y = quantize.quantize(x.shape, "int8", 1, True)
        return ins, y, lambda s: schedule_injective(s, y, "llvm", vector=False)

    q = run(make_q, x, scale, zp)
    want = KERNELS["QuantizeLinear"]({"axis": 1}, x, scale, zp.astype(np.int8))
    np.testing.assert_array_equal(q.astype(np.int8), want)

    def make_dq():
        from compiler.topi.injective import schedule_injective

        ins, y = quantize.dequantize(x.shape, "int8", 1, True)
        return ins, y, lambda s: schedule_injective(s, y, "llvm")

    np.testing.assert_array_equal(run(make_dq, want, scale, zp),
                                  KERNELS["DequantizeLinear"]({"axis": 1}, want, scale, zp.astype(np.int8)))


def test_qdense_and_data_movement_nodes():
    from jit_runtime.host_ops.conv_kernels import qdense
    from compiler.graph.ir import Node, TensorInfo
    from compiler.backend.plans.backend import TargetCpuBackend
    from compiler.backend.plans.plans import NUMPY_GLUE_OPS, plan_node

    x = RNG.integers(-128, 128, (3, 40)).astype(np.int8)
    w = RNG.integers(-128, 128, (24, 40)).astype(np.int8)
    bias = RNG.integers(-5000, 5000, 24).astype(np.int32)
    rq = Requant(0, RNG.integers(1 << 29, 1 << 30, 24), RNG.integers(30, 38, 24), False, -128, 127, zero_point=3)
    node = Node("QDense", ["x", "w", "b"], ["y"], {"requant": rq}, "qd")
    plan = plan_node(node, [TensorInfo(x.shape, x.dtype), TensorInfo(w.shape, w.dtype), TensorInfo(bias.shape, bias.dtype)],
                     {"w": w, "b": bias}, "llvm")
    got = np.asarray(compile_plan(plan, "llvm")(*plan.args([x, w, bias]))).reshape(plan.out_shape)
    np.testing.assert_array_equal(got, qdense(x, w, bias, rq))
    assert "Transpose" in NUMPY_GLUE_OPS and TargetCpuBackend("llvm").supports("Concat")
