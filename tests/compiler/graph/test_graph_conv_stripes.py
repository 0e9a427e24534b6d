"""Convs too large for the DMA fields run as exact horizontal stripes."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backend.accel.backend import SimAccelBackend
from compiler.graph.conv_stripes import PLANE_LIMIT, conv2d_in_stripes, stripe_rows
from compiler.graph.accel_interface import BlockConfig, pack_activation, pack_weight
from compiler.graph.ref_backend import RefAccelBackend
from jit_runtime.host_ops.requant import Requant

RNG = np.random.default_rng(3)


def test_stripe_rows_only_when_a_plane_is_too_large():
    assert stripe_rows(224, 224, 7, 7, (2, 2), (3, 3, 3, 3)) is None
    rows = stripe_rows(256, 256, 3, 3, (1, 1), (1, 1, 1, 1))
    assert rows is not None and rows * 256 <= PLANE_LIMIT and ((rows - 1) + 3) * 256 <= PLANE_LIMIT
    with pytest.raises(ValueError, match="too wide"):
        stripe_rows(4, 70000, 3, 3, (1, 1), (1, 1, 1, 1))


@pytest.mark.parametrize("stride,padding,rows", [((1, 1), (1, 1, 1, 1), 3), ((2, 2), (2, 1, 0, 1), 2), ((2, 1), (0, 0, 0, 0), 4)])
@pytest.mark.parametrize("backend", ["ref", "sim"])
def test_stripes_equal_the_whole_conv(stride, padding, rows, backend):
    be = RefAccelBackend(BlockConfig()) if backend == "ref" else SimAccelBackend("pynq-z1", device="sim-functional")
    x = pack_activation(RNG.integers(-128, 128, (1, 16, 11, 9)).astype(np.int8), 1, 16)
    w = pack_weight(RNG.integers(-60, 60, (16, 16, 3, 3)).astype(np.int8), 16, 16)
    bias = RNG.integers(-500, 500, 16)
    rq = Requant(2, 300, 10, zero_point=-4)
    kw = dict(groups=1, requant=rq, pad_value=9)
    whole = be.conv2d(x, w, bias, stride=stride, padding=padding, **kw)
    parts = conv2d_in_stripes(be.conv2d, x, w, bias, stride=stride, padding=padding, rows=rows, **kw)
    np.testing.assert_array_equal(parts, whole)
