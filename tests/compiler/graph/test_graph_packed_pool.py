"""MaxPool on packed int8 activations equals the plain-layout MaxPool."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.cpu.kernels import KERNELS
from compiler.cpu.pool_kernels import packed_max_pool
from compiler.graph.accel_interface import pack_activation, unpack_activation


@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
                                   {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [0, 1, 2, 0]}])
def test_packed_max_pool_matches_plain(attrs):
    x = np.random.default_rng(0).integers(-128, 128, (2, 20, 9, 7)).astype(np.int8)
    # the plain reference computed independently: windows of the -128-padded tensor
    expect = KERNELS["MaxPool"](attrs, x)
    got = unpack_activation(packed_max_pool(attrs, pack_activation(x, 1, 16)), 2, 20)
    np.testing.assert_array_equal(got, expect)
    assert got.dtype == np.int8
