"""The residual QAdd fused into the conv epilogue on the simulator equals the host QAdd bit for bit."""
import zlib

import numpy as np
import pytest

from compiler.backend.accel.backend import SimAccelBackend
from jit_runtime.host_ops.int_elementwise import choose_qadd, qadd
from jit_runtime.host_ops.requant import Requant
from compiler.topi.residual import Residual, residual_supported
from isa import make_config

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _rng_per_test(request):
    """Each test draws from its own seeded generator: the data does not depend on which tests ran before
    it in the same worker (pytest-xdist distributes them differently from run to run)."""
    global RNG
    RNG = np.random.default_rng([5, zlib.crc32(request.node.name.encode())])


def _case(per_channel: bool, groups: int = 1, stride=(1, 1)):
    x = RNG.integers(-128, 128, (1, 2, 7, 9, 1, 16), dtype=np.int8)
    if groups == 1:
        w = RNG.integers(-128, 128, (2, 2, 3, 3, 16, 16), dtype=np.int8)
    else:  # depthwise, packed (C//BO, 1, KH, KW, BO, BI) with input column 0 used
        w = RNG.integers(-128, 128, (2, 1, 3, 3, 16, 16), dtype=np.int8)
    bias = RNG.integers(-20000, 20000, 32)
    if per_channel:
        mult = (1 << 30) + RNG.integers(-(1 << 28), 1 << 28, 32)
        shift = RNG.integers(38, 42, 32)
    else:
        mult, shift = np.int64((1 << 30) + 12345), np.int64(40)
    rq = Requant(0, mult, shift, False, -128, 127, None, int(RNG.integers(-20, 20)))
    return x, w, bias, rq, dict(stride=stride, padding=(1, 1, 1, 1), groups=groups)


@pytest.mark.parametrize("per_channel,groups,stride,relu,conv_is_a", [
    (False, 1, (1, 1), False, True),
    (True, 1, (1, 1), True, False),
    (True, 1, (2, 2), True, True),
    (False, 32, (1, 1), False, False),
])
def test_fused_residual_equals_host_qadd(per_channel, groups, stride, relu, conv_is_a):
    be = SimAccelBackend("pynq-z1")
    x, w, bias, rq, kw = _case(per_channel, groups, stride)
    y = be.conv2d(x, w, bias, requant=rq, **kw)
    assert np.unique(y).size > 100  # the conv result is not saturated: the test sees real values
    r = RNG.integers(-128, 128, y.shape, dtype=np.int8)
    for sa, sb, sy in ((0.02, 0.035, 0.04), (0.11, 0.013, 0.05)):  # differing scales, either larger
        zy = int(RNG.integers(-30, 30))
        p = choose_qadd(sa, int(RNG.integers(-128, 128)), sb, int(RNG.integers(-128, 128)), sy, zy,
                        out_min=zy if relu else -128)
        z = be.conv2d(x, w, bias, requant=rq, residual=r, residual_add=Residual(p, conv_is_a), **kw)
        want = qadd(y, r, p) if conv_is_a else qadd(r, y, p)
        np.testing.assert_array_equal(z, want)
        assert be.last_profile["cycles"] > 0


def test_fused_residual_hand_case():
    """One channel block, 1x1 identity-like conv: every step computed by hand."""
    be = SimAccelBackend("pynq-z1")
    x = np.zeros((1, 1, 1, 2, 1, 16), np.int8)
    x[0, 0, 0, :, 0, 0] = (10, -6)
    w = np.zeros((1, 1, 1, 1, 16, 16), np.int8)
    w[0, 0, 0, 0, :, 0] = 1  # every output channel = input channel 0
    rq = Requant(0, 1, 0, False, -128, 127, None, 0)  # a = x[c0]: 10 and -6
    r = np.full((1, 1, 1, 2, 1, 16), 4, np.int8)
    # QAdd: a_mult 3, b_mult 5, shift 2, za 1, zb -2, zy 7, relu at zy
    # pixel 0: (3*(10-1) + 5*(4+2)) = 57 -> (57 + 2) >> 2 = 14 -> + 7 = 21
    # pixel 1: (3*(-6-1) + 30) = 9 -> (9 + 2) >> 2 = 2 -> + 7 = 9
    from jit_runtime.host_ops.int_elementwise import QAddParams

    p = QAddParams(3, 5, 2, 1, -2, 7, 7, 127)
    z = be.conv2d(x, w, None, stride=(1, 1), padding=(0, 0, 0, 0), groups=1, requant=rq, residual=r,
                  residual_add=Residual(p, True))
    assert z[0, 0, 0, :, 0, 0].tolist() == [21, 9]


def test_residual_errors():
    be = SimAccelBackend("pynq-z1")
    x, w, bias, rq, kw = _case(False)
    p = choose_qadd(0.02, 0, 0.03, 0, 0.04, 0)
    with pytest.raises(ValueError, match="both residual"):
        be.conv2d(x, w, bias, requant=rq, residual_add=Residual(p), **kw)
    with pytest.raises(ValueError, match="int8 packed like the output"):
        be.conv2d(x, w, bias, requant=rq, residual=np.zeros((1, 2, 7, 9, 1, 16), np.int32),
                  residual_add=Residual(p), **kw)
    assert "no REQUANT" in residual_supported(make_config("tiny"), Residual(p))
    assert residual_supported(make_config("pynq-z1"), Residual(p)) is None
    from jit_runtime.host_ops.int_elementwise import QAddParams

    big = Residual(QAddParams(40000, 1, 3, 0, 0, 0))
    assert "16-bit ALU immediate" in residual_supported(make_config("pynq-z1"), big)
    with pytest.raises(ValueError, match="cannot be fused: QAdd multipliers 40000"):
        be.conv2d(x, w, bias, requant=rq, residual=np.zeros((1, 2, 7, 9, 1, 16), np.int8), residual_add=big, **kw)


def test_striped_conv_adds_on_the_host(monkeypatch):
    """A conv too large for the DMA fields runs in row stripes; its residual Add then runs as the host QAdd."""
    import compiler.backend.accel.backend as ab

    be = SimAccelBackend("pynq-z1")
    x, w, bias, rq, kw = _case(False)
    y = be.conv2d(x, w, bias, requant=rq, **kw)
    r = RNG.integers(-128, 128, y.shape, dtype=np.int8)
    p = choose_qadd(0.02, 5, 0.03, -9, 0.04, 2, out_min=2)
    monkeypatch.setattr(ab, "stripe_rows", lambda h, w_, *a: 3 if h == 7 else None)  # 3-row stripes of the 7-row input
    z = be.conv2d(x, w, bias, requant=rq, residual=r, residual_add=Residual(p, False), **kw)
    assert be.last_profile["stripes"] == 3
    np.testing.assert_array_equal(z, qadd(r, y, p))


def test_batch_two_config():
    cfg = make_config("pynq-z1", log_batch=1)
    be = SimAccelBackend(cfg)
    x = RNG.integers(-128, 128, (1, 1, 5, 6, 2, 16), dtype=np.int8)
    w = RNG.integers(-128, 128, (2, 1, 1, 1, 16, 16), dtype=np.int8)
    rq = Requant(0, np.int64((1 << 30) + 777), np.int64(38), False, -128, 127, None, -3)
    kw = dict(stride=(1, 1), padding=(0, 0, 0, 0), groups=1)
    y = be.conv2d(x, w, None, requant=rq, **kw)
    r = RNG.integers(-128, 128, y.shape, dtype=np.int8)
    p = choose_qadd(0.05, -4, 0.01, 11, 0.03, -1)
    z = be.conv2d(x, w, None, requant=rq, residual=r, residual_add=Residual(p, True), **kw)
    np.testing.assert_array_equal(z, qadd(y, r, p))
