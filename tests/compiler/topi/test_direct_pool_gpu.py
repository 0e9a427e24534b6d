"""The cuda schedules of grouped convs (:func:`compiler.topi.conv2d_direct.schedule_gpu`) and pools
(:func:`compiler.topi.pool.schedule_gpu`) with their knobs: values against numpy (loop IR run serially on the CPU)
for random geometries and knobs, the default knobs give the untuned kernels, launch shapes follow the knobs, PTX
assembles without spills, and bad knobs are named."""
from __future__ import annotations

import random
import re

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.schedule import create_schedule
from compiler.topi import conv2d_direct as D
from compiler.topi import pool as P
from jit_runtime.host_ops.conv_kernels import conv2d_nchw
from jit_runtime.host_ops.pooling import average_pool, max_pool, pool_axes
from tests.compiler.gpu_on_cpu import assert_assembles_without_spills, serial_on_cpu


def _ptx(s, args) -> str:
    """The PTX of a schedule, its module's serial number left out."""
    return re.sub(r"vta_te_k_\d+", "vta_te_k", compiler.build_op(s, target="cuda", args=args, name="k").ptx)


def _conv(spec, knobs, **kw):
    sp = knobs.apply(spec) if knobs is not None else spec
    op = D.conv2d(sp, **kw)
    s = create_schedule(op.out)
    D.schedule_gpu(op, s, knobs)
    return sp, op, s


def _random_direct_knobs(rnd: random.Random, spec: D.Conv2dSpec) -> D.DirectGpuKnobs:
    per = spec.o if spec.depthwise else spec.og
    while True:
        k = D.DirectGpuKnobs(rnd.choice([b for b in (1, 2, 4, 8) if per % b == 0]), rnd.choice((32, 64, 128, 256)),
                             rnd.choice((1, 2, 3, 4, 8)), rnd.choice((1, 2, 3)), rnd.random() < 0.5)
        try:
            k.check(spec)
        except te.TeError:
            continue
        return k


def test_random_grouped_convs_match_numpy():
    """Seeded random depthwise and grouped convs (strides, pads, dilations, ragged tiles) with random valid knobs,
    bias and relu: the serial loop IR equals numpy's convolution."""
    rnd = random.Random(5)
    done = 0
    while done < 8:
        groups = rnd.choice((2, 4, 8, 16))
        depthwise = rnd.random() < 0.6
        c = groups if depthwise else groups * rnd.choice((1, 2))
        o = groups if depthwise else groups * rnd.choice((2, 4))
        k, st, dil = rnd.choice((1, 3, 5)), rnd.choice((1, 2)), rnd.choice((1, 1, 2))
        h, w = rnd.randint(3, 13), rnd.randint(3, 13)
        pads = tuple(rnd.randint(0, k // 2) for _ in range(4))
        spec = D.Conv2dSpec(rnd.choice((1, 2)), c, h, w, o, k, k, (st, st), pads, (dil, dil), groups)
        try:
            spec.check()
        except te.TeError:
            continue
        knobs = _random_direct_knobs(rnd, spec)
        rng = np.random.default_rng(done)
        x = rng.standard_normal((spec.n, c, h, w)).astype(np.float32)
        wt = rng.standard_normal((o, c // groups, k, k)).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        sp, op, s = _conv(spec, knobs, bias=True, act="relu")
        got = serial_on_cpu(s, op.inputs + [op.out])(x, D.pack_weight(sp, wt), b)
        want = np.maximum(conv2d_nchw(x, wt, stride=spec.stride, pads=pads, dilations=spec.dilations, groups=groups)
                          + b.reshape(1, -1, 1, 1), 0)
        np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{spec} {knobs}")
        done += 1


def _pool_case(rnd: random.Random):
    kind = rnd.choice(("MaxPool", "AveragePool", "GlobalAveragePool"))
    n, c, h, w = rnd.randint(1, 2), rnd.randint(1, 9), rnd.randint(2, 12), rnd.randint(2, 12)
    if kind == "GlobalAveragePool":
        return kind, {}, P.PoolSpec(n, c, h, w, h, w, (1, 1), (0, 0, 0, 0), 1, 1), (n, c, h, w)
    kh, kw = rnd.randint(1, min(h, 4)), rnd.randint(1, min(w, 4))
    attrs = {"kernel_shape": [kh, kw], "strides": [rnd.randint(1, 3), rnd.randint(1, 3)],
             "pads": [rnd.randint(0, kh - 1), rnd.randint(0, kw - 1), rnd.randint(0, kh - 1), rnd.randint(0, kw - 1)],
             "ceil_mode": rnd.randint(0, 1), "count_include_pad": rnd.randint(0, 1)}
    ax = pool_axes(attrs, (h, w))
    spec = P.PoolSpec(n, c, h, w, kh, kw, (ax[0].s, ax[1].s), (ax[0].begin, ax[1].begin, ax[0].end, ax[1].end),
                      ax[0].out, ax[1].out)
    return kind, attrs, spec, (n, c, h, w)


def test_random_pools_match_numpy():
    """Seeded random max/average/global pools (ceil mode, pads, count_include_pad) with random knobs: max pooling
    equals numpy's exactly, the averages to rounding."""
    rnd = random.Random(11)
    for case in range(12):
        kind, attrs, spec, shape = _pool_case(rnd)
        knobs = P.PoolGpuKnobs(rnd.choice((32, 64, 128)), rnd.choice((1, 2, 3, 4, 8)), rnd.choice(P.POOL_AXES),
                               rnd.random() < 0.5, rnd.random() < 0.5)
        x = np.random.default_rng(case).standard_normal(shape).astype(np.float32)
        ins, y, stages = P.float_pool(kind, spec, bool(attrs.get("count_include_pad")))
        s = create_schedule(y)
        P.schedule_gpu(s, stages, knobs)
        got = np.asarray(serial_on_cpu(s, ins + [y])(x))
        if kind == "MaxPool":
            np.testing.assert_array_equal(got, max_pool(attrs, x), err_msg=f"{spec} {knobs}")
        elif kind == "AveragePool":
            np.testing.assert_allclose(got, average_pool(attrs, x), rtol=1e-5, atol=1e-6, err_msg=f"{spec} {knobs}")
        else:
            np.testing.assert_allclose(got, x.mean((2, 3), keepdims=True), rtol=1e-5, atol=1e-6)


def test_default_knobs_give_the_untuned_kernels():
    """The default knobs compile to the same PTX as the schedules without knobs (an untuned build is unchanged)."""
    spec = D.Conv2dSpec(1, 32, 14, 14, 32, 3, 3, (2, 2), (1, 1, 1, 1), groups=32)
    ptx = []
    for knobs in (None, D.default_gpu_knobs(spec)):
        _, op, s = _conv(spec, knobs, bias=True, act="relu")
        ptx.append(_ptx(s, op.inputs + [op.out]))
    assert ptx[0] == ptx[1] and "vta_te_k_k0" in ptx[0]
    pspec = P.PoolSpec(1, 8, 9, 9, 3, 3, (2, 2), (1, 1, 1, 1), 5, 5)
    for kind in ("MaxPool", "AveragePool"):
        ptx = []
        for knobs in (None, P.PoolGpuKnobs()):
            ins, y, stages = P.float_pool(kind, pspec, True)
            s = create_schedule(y)
            P.schedule_gpu(s, stages, knobs)
            ptx.append(_ptx(s, ins + [y]))
        assert ptx[0] == ptx[1]


def test_knobs_set_the_launch_and_the_ptx_assembles():
    """Non-default knobs: the grid and block follow them, fused pools run one kernel, and the PTX assembles
    without register spills (where ptxas is installed)."""
    spec = D.Conv2dSpec(1, 64, 28, 28, 64, 3, 3, (1, 1), (1, 1, 1, 1), groups=64)
    # grid: (row tiles x pixel tiles, channel blocks); block: a row's pixel tiles (at most threads // ob) x ob
    for knobs, launch in ((D.DirectGpuKnobs(8, 128, 4, 2, True), ((14, 8, 1), (56, 1, 1))),
                          (D.DirectGpuKnobs(1, 64, 8, 4, False), ((7, 64, 1), (4, 1, 1))),
                          (D.DirectGpuKnobs(16, 64, 2, 1, True), ((28 * 4, 4, 1), (64, 1, 1)))):
        _, op, s = _conv(spec, knobs, bias=True, residual=True, act="relu")
        cuda = compiler.build_op(s, target="cuda", args=op.inputs + [op.out])
        assert len(cuda.kernels) == 3  # pad, conv, output stage
        assert (cuda.kernels[1].grid, cuda.kernels[1].block) == launch, knobs
        assert_assembles_without_spills(cuda)
    pspec = P.PoolSpec(1, 64, 112, 112, 3, 3, (2, 2), (1, 1, 1, 1), 56, 56)
    for kind, knobs, launches in (
            ("MaxPool", P.PoolGpuKnobs(256, 4, "flat", False, True), [((196, 1, 1), (256, 1, 1))]),
            ("MaxPool", P.PoolGpuKnobs(128, 2, "plane", False, False), [((13, 64, 1), (128, 1, 1))]),
            ("AveragePool", P.PoolGpuKnobs(128, 1, "flat", True, True), [((1568, 1, 1), (128, 1, 1))]),
            ("AveragePool", P.PoolGpuKnobs(512, 8, "flat", False, False), [((49, 1, 1), (512, 1, 1))] * 2)):
        ins, y, stages = P.float_pool(kind, pspec, False)
        s = create_schedule(y)
        P.schedule_gpu(s, stages, knobs)
        cuda = compiler.build_op(s, target="cuda", args=ins + [y])
        assert [(k.grid, k.block) for k in cuda.kernels] == launches, (kind, knobs)
        assert_assembles_without_spills(cuda)


@pytest.mark.parametrize("knobs, match", [
    (D.DirectGpuKnobs(3), "knob ob=3 must divide the 16 channels"),
    (D.DirectGpuKnobs(8, 0), "knob threads must be a positive int, got 0"),
    (D.DirectGpuKnobs(8, 2048), "knob threads=2048 must be a multiple of ob=8 and at most 1024"),
    (D.DirectGpuKnobs(8, 256, 11), "knobs xt=11 and yt=1 must be at most the output's 10 pixels and 9 rows"),
    (D.DirectGpuKnobs(8, 256, 8, 9), "xt x yt = 72 accumulators a thread; at most 64"),
    (D.DirectGpuKnobs(8, 256, 1, 1, 1), "knob unroll must be a bool, got 1"),
    (D.DirectGpuKnobs(8, 256, "2"), "knob xt must be a positive int, got '2'"),
])
def test_direct_knobs_that_do_not_fit_are_named(knobs, match):
    spec = D.Conv2dSpec(1, 16, 9, 10, 16, 3, 3, (1, 1), (1, 1, 1, 1), groups=16)
    with pytest.raises(ValueError, match=re.escape(match)):
        knobs.check(spec)
    with pytest.raises(ValueError, match="DirectGpuKnobs take grouped convs"):
        D.DirectGpuKnobs().check(D.Conv2dSpec(1, 8, 9, 10, 16, 3, 3))
    with pytest.raises(ValueError, match=re.escape("knob ob=4 must divide the 2 output channels a group")):
        D.DirectGpuKnobs(4).check(D.Conv2dSpec(1, 8, 9, 10, 8, 3, 3, groups=4))


def test_schedule_refuses_knobs_for_another_block():
    spec = D.Conv2dSpec(1, 16, 9, 10, 16, 3, 3, (1, 1), (1, 1, 1, 1), groups=16)
    op = D.conv2d(spec)
    with pytest.raises(te.TeError, match="knobs for ob=1, but the op was built with blocks of 8"):
        D.schedule_gpu(op, create_schedule(op.out), D.DirectGpuKnobs(1))


@pytest.mark.parametrize("knobs, match", [
    (P.PoolGpuKnobs(0), "knob threads must be a positive int, got 0"),
    (P.PoolGpuKnobs(2048), "knob threads=2048; at most 1024"),
    (P.PoolGpuKnobs(64, 1.5), "knob vt must be a positive int, got 1.5"),
    (P.PoolGpuKnobs(64, 1, "rows"), "knob axes='rows'; allowed: flat, plane"),
    (P.PoolGpuKnobs(64, 1, "flat", "yes"), "knob fused must be a bool, got 'yes'"),
    (P.PoolGpuKnobs(64, 1, "flat", False, None), "knob unroll must be a bool, got None"),
])
def test_pool_knobs_that_are_bad_are_named(knobs, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        knobs.check()
    ins, y, stages = P.float_pool("MaxPool", P.PoolSpec(1, 2, 4, 4, 2, 2, (2, 2), (0, 0, 0, 0), 2, 2))
    with pytest.raises(ValueError, match=re.escape(match)):
        P.schedule_gpu(create_schedule(y), stages, knobs)
