"""Packing helpers and the numpy reference accelerator backend vs a naive integer reference."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.accel_interface import (AccelBackend, BlockConfig, pack_activation, pack_weight, unpack_activation,
                                            unpack_weight)
from compiler.graph.ref_backend import RefAccelBackend
from jit_runtime.host_ops.requant import Requant, apply_requant

RNG = np.random.default_rng(1)


def _i8(*shape):
    return RNG.integers(-128, 128, shape).astype(np.int8)


def test_pack_activation_positions_and_padding():
    x = _i8(3, 5, 2, 2)
    p = pack_activation(x, batch=2, block=4)
    assert p.shape == (2, 2, 2, 2, 2, 4)
    # element (n=2, c=4, h=1, w=0) lives at block (1, 1), lane (0, 0)
    assert p[1, 1, 1, 0, 0, 0] == x[2, 4, 1, 0]
    assert p[0, 0, 0, 1, 1, 3] == x[1, 3, 0, 1]
    assert np.all(p[1, :, :, :, 1, :] == 0) and np.all(p[:, 1, :, :, :, 1:] == 0)  # padded batch row / channels
    np.testing.assert_array_equal(unpack_activation(p, 3, 5), x)


def test_pack_dense_and_weights_roundtrip():
    x = _i8(1, 10)
    p = pack_activation(x, 1, 8)
    assert p.shape == (1, 2, 1, 8) and p[0, 1, 0, 1] == x[0, 9]
    np.testing.assert_array_equal(unpack_activation(p, 1, 10), x)
    w = _i8(5, 3, 3, 3)
    wp = pack_weight(w, block_out=4, block_in=2)
    assert wp.shape == (2, 2, 3, 3, 4, 2)
    assert wp[1, 1, 2, 0, 0, 0] == w[4, 2, 2, 0]
    np.testing.assert_array_equal(unpack_weight(wp)[:5, :3], w)


def naive_conv(x, w, stride, pads, groups):
    """Direct loops over output pixels (tiny sizes only): int64 accumulators."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - kh) // stride[0] + 1
    ow = (wd + pads[1] + pads[3] - kw) // stride[1] + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
                out[:, oc, i, j] = (patch * w[oc].astype(np.int64)).sum(axis=(1, 2, 3))
    return out


@pytest.mark.parametrize("groups,cin,cout,batch", [(1, 5, 6, 1), (2, 8, 8, 2), (1, 3, 3, 2)])
def test_ref_conv2d_bit_exact(groups, cin, cout, batch):
    cfg = BlockConfig(batch=batch, block_in=4 if groups == 1 else 4, block_out=4 if groups == 1 else 4)
    backend = RefAccelBackend(cfg)
    assert isinstance(backend, AccelBackend)
    x, w = _i8(3, cin, 6, 5), _i8(cout, cin // groups, 3, 3)
    bias = RNG.integers(-5000, 5000, cout).astype(np.int32)
    rq = Requant(pre_shift=2, multiplier=RNG.integers(100, 3000, cout), shift=RNG.integers(8, 14, cout), relu=True)
    stride, pads = (2, 1), (1, 0, 2, 1)
    out = backend.conv2d(pack_activation(x, cfg.batch, cfg.block_in), pack_weight(w, cfg.block_out, cfg.block_in), bias,
                         stride=stride, padding=pads, groups=groups, requant=rq)
    expect = apply_requant(naive_conv(x, w, stride, pads, groups), bias, rq, 1)
    np.testing.assert_array_equal(unpack_activation(out, 3, cout), expect)
    assert backend.last_profile["macs"] > 0 and set(backend.last_profile) >= {"cycles", "macs", "utilization", "bytes"}


def test_ref_dense_bit_exact_and_wraps():
    cfg = BlockConfig(batch=1, block_in=8, block_out=8)
    x, w = _i8(2, 20), _i8(11, 20)
    bias = np.full(11, 2**31 - 100, np.int32)  # forces int32 wrap-around in the bias add
    rq = Requant(multiplier=1, shift=0, out_min=-128, out_max=127)
    out = RefAccelBackend(cfg).dense(pack_activation(x, 1, 8), pack_weight(w, 8, 8), bias, requant=rq)
    acc = x.astype(np.int64) @ w.astype(np.int64).T + bias.astype(np.int64)
    wrapped = (acc + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(unpack_activation(out, 2, 11), np.clip(wrapped, -128, 127))


@pytest.mark.parametrize("c", [16, 24])
def test_depthwise_on_the_accelerator_matches_a_naive_loop(c):
    """Depthwise convs qualify for the accelerator; ref and sim backends agree with a per-channel loop."""
    from compiler.backend.accel.backend import SimAccelBackend
    from compiler.graph.accel_interface import conv_supported_on_accel
    from isa import make_config

    assert conv_supported_on_accel(c, c, c, 16, 16) and not conv_supported_on_accel(c, 2 * c, c, 16, 16)
    x, w = _i8(1, c, 6, 6), _i8(c, 1, 3, 3)
    bias = RNG.integers(-500, 500, c)
    rq = Requant(pre_shift=2, multiplier=3, shift=4, relu=True)
    acc = np.zeros((1, c, 6, 6), np.int64)  # stride 1, pad 1: each channel convolved with its own filter
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for ch in range(c):
        for i in range(3):
            for j in range(3):
                acc[0, ch] += xp[0, ch, i:i + 6, j:j + 6] * int(w[ch, 0, i, j])
    want = apply_requant(acc, bias, rq)
    cfg = make_config("pynq-z1")
    for backend in (RefAccelBackend(cfg), SimAccelBackend(cfg)):
        out = backend.conv2d(pack_activation(x, 1, 16), pack_weight(w, 16, 16), bias, stride=(1, 1),
                             padding=(1, 1, 1, 1), groups=c, requant=rq)
        np.testing.assert_array_equal(unpack_activation(out, 1, c), want)
