"""The GPU conv2d (tiled implicit GEMM, shared-memory chunks, register blocking, split-K): values against numpy's
convolution (its loop IR run serially on the CPU), launch shapes from the knobs, PTX that assembles without spills,
and the knobs' checks."""
from __future__ import annotations

import random
import re

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.schedule import create_schedule
from compiler.topi import conv2d_gpu as G
from compiler.topi.conv2d_direct import Conv2dSpec
from jit_runtime.host_ops.conv_kernels import conv2d_nchw
from tests.compiler.gpu_on_cpu import assert_assembles_without_spills, serial_on_cpu

CASES = [
    # spec, knobs (None: the defaults)
    (Conv2dSpec(1, 8, 9, 10, 16, 3, 3, (1, 1), (1, 1, 1, 1)), None),
    (Conv2dSpec(1, 8, 9, 10, 16, 3, 3, (2, 1), (1, 0, 1, 2)), None),
    (Conv2dSpec(2, 3, 15, 15, 24, 7, 7, (2, 2), (3, 3, 3, 3)), None),  # a stem, batch 2, split-K by default
    (Conv2dSpec(1, 64, 7, 7, 64, 3, 3, (1, 1), (1, 1, 1, 1)), None),  # a small map: split 8
    (Conv2dSpec(1, 40, 6, 6, 20, 1, 1), G.GpuConvKnobs(16, 16, 4, 2, 8, 3)),  # K=40 in 3 parts: zero rows
    (Conv2dSpec(1, 6, 11, 11, 12, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2)), G.GpuConvKnobs(8, 32, 2, 8, 5, 1)),  # dilated
    (Conv2dSpec(1, 16, 5, 5, 8, 1, 1, (2, 2)), G.GpuConvKnobs(8, 4, 8, 1, 16, 1)),  # 1x1 stride 2, one pixel tile
]


def _op(spec, knobs, **kw):
    op = G.conv2d(spec, knobs, **kw)
    s = create_schedule(op.out)
    G.schedule_gpu(op, s)
    return op, s


@pytest.mark.parametrize("case", range(len(CASES)))
def test_gpu_conv_values_and_kernels(case):
    spec, knobs = CASES[case]
    knobs = knobs or G.default_knobs(spec)
    rng = np.random.default_rng(case)
    x = rng.standard_normal((spec.n, spec.c, spec.h, spec.w)).astype(np.float32)
    w = rng.standard_normal((spec.o, spec.c, spec.kh, spec.kw)).astype(np.float32)
    b = rng.standard_normal(spec.o).astype(np.float32)
    res = rng.standard_normal((spec.n, spec.o, spec.oh, spec.ow)).astype(np.float32)
    op, s = _op(spec, knobs, bias=True, residual=True, act="relu")
    got = serial_on_cpu(s, op.inputs + [op.out])(x, G.pack_weight(spec, w, knobs), b, res.reshape(G.output_shape(spec)))
    want = np.maximum(conv2d_nchw(x, w, stride=spec.stride, pads=spec.pads, dilations=spec.dilations)
                      + b.reshape(1, -1, 1, 1) + res, 0)
    np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-4, atol=1e-4)
    op, s = _op(spec, knobs, bias=True, residual=True, act="relu")
    cuda = compiler.build_op(s, target="cuda", args=op.inputs + [op.out])
    p = spec.oh * spec.ow
    bo, bp = min(knobs.bo, spec.o), min(knobs.bp, p)
    tiles = (-(-p // bp), -(-spec.o // bo), spec.n * knobs.split)
    assert cuda.kernels[0].grid == tiles
    assert cuda.kernels[0].block == (bp // min(knobs.vp, bp), bo // min(knobs.vo, bo), 1)
    assert len(cuda.kernels) == (1 if knobs.split == 1 else 2)
    assert ".shared" in cuda.ptx and "bar.sync" in cuda.ptx
    assert_assembles_without_spills(cuda)


def test_gpu_conv_int8_with_an_output_stage():
    """int8 x int8 accumulated in int32 (zero-point borders), then an integer stage: exact against numpy."""
    spec = Conv2dSpec(1, 12, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1), dtype="int8", pad_value=-3)
    knobs = G.GpuConvKnobs(16, 16, 4, 4, 8, 2)
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (1, 12, 8, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 12, 3, 3), dtype=np.int8)
    shift = te.placeholder((16,), "int32", "shift")
    stage = ([shift], lambda acc, oc: (acc >> shift[oc]).astype("int8"), "int8")
    op = G.conv2d(spec, knobs, stage=stage)
    s = create_schedule(op.out)
    G.schedule_gpu(op, s)
    sh = rng.integers(8, 12, 16).astype(np.int32)
    got = serial_on_cpu(s, op.inputs + [op.out])(x, G.pack_weight(spec, w, knobs), sh)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-3)
    acc = conv2d_nchw(xp.astype(np.float64), w.astype(np.float64)).astype(np.int64)
    want = (acc >> sh.reshape(1, -1, 1, 1)).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want)


def test_default_knobs_fill_the_gpu():
    """ResNet-18's layers: every default fits (threads, shared memory) and gives at least 128 blocks, the small
    maps by splitting the reduction; the stem needs no split."""
    layers = [Conv2dSpec(1, 3, 224, 224, 64, 7, 7, (2, 2), (3, 3, 3, 3))] + [
        Conv2dSpec(1, c, h, h, c, 3, 3, (1, 1), (1, 1, 1, 1)) for c, h in ((64, 56), (128, 28), (256, 14), (512, 7))]
    for spec in layers:
        k = G.default_knobs(spec)
        k.check(spec)
        p = spec.oh * spec.ow
        blocks = -(-p // k.bp) * -(-spec.o // k.bo) * k.split
        assert blocks >= 128, (spec, k, blocks)
    assert G.default_knobs(layers[0]).split == 1 and G.default_knobs(layers[-1]).split >= 8


@pytest.mark.parametrize("channels, knobs, match", [
    (8, G.GpuConvKnobs(64, 64, 3, 4), "vo=3 must divide bo=64"),
    (8, G.GpuConvKnobs(64, 64, 1, 1), "4096 threads a block; 1..1024"),
    (8, G.GpuConvKnobs(64, 64, 4, 4, 0), "knob rk must be a positive int"),
    (8, G.GpuConvKnobs(64, 64, 4, 4, 8, 1000), "split=1000 exceeds the reduction's 72 steps"),
    (8, G.GpuConvKnobs(64, 64, 4, 4, 40, 2), "rk=40 exceeds the 36 reduction steps of a part"),
    (256, G.GpuConvKnobs(128, 128, 8, 8, 64), "rk x (bo + bp) = 65536 bytes of shared memory; at most 49152"),
])
def test_knobs_that_do_not_fit_are_named(channels, knobs, match):
    spec = Conv2dSpec(1, channels, 9, 10, 16, 3, 3, (1, 1), (1, 1, 1, 1))
    with pytest.raises(te.TeError, match=re.escape(match)):
        knobs.check(spec)
    with pytest.raises(te.TeError, match="one group"):
        G.GpuConvKnobs().check(Conv2dSpec(1, 8, 9, 10, 16, 3, 3, groups=2))


def test_random_gpu_convs_match_numpy():
    """Random geometries and random valid knobs (a seeded draw, values checked against numpy)."""
    rnd = random.Random(17)
    done = 0
    while done < 6:
        c, o, h, w = rnd.randint(1, 20), rnd.randint(1, 24), rnd.randint(3, 12), rnd.randint(3, 12)
        k, st = rnd.choice((1, 3, 5)), rnd.choice((1, 2))
        pads = tuple(rnd.randint(0, k // 2) for _ in range(4))
        spec = Conv2dSpec(1, c, h, w, o, k, k, (st, st), pads)
        try:
            spec.check()
        except te.TeError:
            continue
        kk = c * k * k
        vo, vp = rnd.choice((1, 2, 4)), rnd.choice((1, 2, 4))
        split = rnd.randint(1, min(4, kk))
        knobs = G.GpuConvKnobs(vo * rnd.choice((2, 4, 8)), vp * rnd.choice((2, 4, 8)), vo, vp,
                               rnd.randint(1, -(-kk // split)), split)
        rng = np.random.default_rng(done)
        x = rng.standard_normal((1, c, h, w)).astype(np.float32)
        wt = rng.standard_normal((o, c, k, k)).astype(np.float32)
        op, s = _op(spec, knobs)
        got = serial_on_cpu(s, op.inputs + [op.out])(x, G.pack_weight(spec, wt, knobs))
        want = conv2d_nchw(x, wt, stride=spec.stride, pads=spec.pads)
        np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{spec} {knobs}")
        done += 1
