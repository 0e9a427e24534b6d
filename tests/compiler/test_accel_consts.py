"""The sim backend keeps each kernel's constant inputs by the epilogue's values: same shapes with other bias/requant
values (or a fused residual with other parameters) get their own constants, checked against the numpy reference."""
from __future__ import annotations

import numpy as np

from compiler.backend.accel.backend import SimAccelBackend
from compiler.graph.accel_interface import pack_activation, pack_weight, unpack_activation
from compiler.graph.ref_backend import RefAccelBackend
from jit_runtime.host_ops.requant import Requant
from isa import make_config


def test_other_epilogue_values_get_their_own_constants():
    cfg = make_config("tiny")
    rng = np.random.default_rng(4)
    x = pack_activation(rng.integers(-128, 128, (1, 8, 5, 5)).astype(np.int8), cfg.batch, cfg.block_in)
    w = pack_weight(rng.integers(-128, 128, (8, 8, 3, 3)).astype(np.int8), cfg.block_out, cfg.block_in)
    variants = [(rng.integers(-3000, 3000, 8), Requant(pre_shift=1, multiplier=rng.integers(500, 3000, 8),
                                                        shift=rng.integers(9, 13, 8), relu=r, zero_point=zp))
                for r, zp in ((False, 5), (False, 5), (True, 0))]  # the first two share a compiled kernel
    sim, ref = SimAccelBackend(cfg), RefAccelBackend(cfg)
    kw = dict(stride=(1, 1), padding=(1, 1, 1, 1), groups=1)
    outs = []
    for bias, rq in variants + variants[:1]:  # the first again: served from the kept constants
        got = sim.conv2d(x, w, bias, requant=rq, **kw)
        want = ref.conv2d(x, w, bias, requant=rq, **kw)
        np.testing.assert_array_equal(unpack_activation(got, 1, 8), unpack_activation(want, 1, 8))
        outs.append(got)
    assert not np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[3])
    assert len(sim._consts_memo) == 3
