"""The depthwise intrinsic (DWMAC) on the RTL: random programs using it and a compiled depthwise layer give the
same DRAM bytes and cycles on the compiled Verilator harness as on the simulator (tiny config)."""
from __future__ import annotations

import numpy as np

from hw.cosim.harness import Harness
from hw.random_programs import random_program
from isa import make_config
from isa.encoding import decode_stream

TINY = make_config("tiny")


def test_random_programs_with_dwmac_match_simulator():
    from simulator import Simulator

    n_dw = 0
    with Harness(TINY) as h:
        sim = Simulator(TINY)
        for seed in range(24):
            p = random_program(TINY, 20_000 + seed, tensor=("gemm", "dwmac"))
            insns = decode_stream(p.dram[p.insn_addr:p.insn_addr + 16 * p.n_insns], TINY)
            n_dw += sum(getattr(i, "intrinsic", "") == "dwmac" for i in insns)
            img = p.dram.copy()
            s = sim.run(img, p.insn_addr, p.n_insns)
            r = h.run(p.dram, p.insn_addr, p.n_insns)
            assert (r.cycles, r.timeout) == (int(s.cycles), False), p.name
            assert np.array_equal(r.dram, img), p.name
    assert n_dw >= 10  # the programs do exercise the intrinsic


def _reference(x, w, bias, rq, stride, pad, pad_value):
    """numpy depthwise conv + requant on packed operands (channel c = block * BI + lane)."""
    from jit_runtime.host_ops.requant import apply_requant

    nb, cb, h, wd, B, BI = x.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3]), (0, 0), (0, 0)),
                constant_values=pad_value)
    kh, kw = w.shape[2], w.shape[3]
    oh = (h + pad[0] + pad[2] - kh) // stride + 1
    ow = (wd + pad[1] + pad[3] - kw) // stride + 1
    acc = np.zeros((nb, cb, oh, ow, B, BI), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            tap = w[:, 0, ky, kx, :, 0].astype(np.int64)[None, :, None, None, None, :]
            acc += xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride] * tap
    a4 = acc.transpose(0, 4, 1, 5, 2, 3).reshape(nb * B, cb * BI, oh, ow)
    out = apply_requant(a4, bias, rq)
    return out.reshape(nb, B, cb, BI, oh, ow).transpose(0, 2, 4, 5, 1, 3)


def test_compiled_depthwise_layer_rtl_equals_simulator_and_numpy():
    from compiler.backend.accel.backend import SimAccelBackend
    from jit_runtime.host_ops.requant import Requant

    rng = np.random.default_rng(7)
    B, BI = TINY.batch, TINY.block_in
    cb, h, w = 3, 7, 6
    x = rng.integers(-128, 128, (1, cb, h, w, B, BI)).astype(np.int8)
    wt = rng.integers(-100, 100, (cb, 1, 3, 3, BI, BI)).astype(np.int8)
    bias = rng.integers(-300, 300, cb * BI)
    rq = Requant(0, rng.integers(1 << 8, 1 << 10, cb * BI), np.full(cb * BI, 12), True, -128, 127, None, -5)
    got = {}
    for dev in ("sim", "rtl-check"):  # rtl-check runs the RTL and the simulator and fails on any difference
        be = SimAccelBackend(TINY, device=dev)
        assert be.depthwise_on_dwmac(x, wt, cb * BI)
        for stride, pad in ((1, (1, 1, 1, 1)), (2, (0, 0, 1, 1))):
            out = be.conv2d(x, wt, bias, stride=(stride, stride), padding=pad, groups=cb * BI, requant=rq,
                            pad_value=3)
            assert be.last_profile.get("intrinsic") == "dwmac"
            got[dev, stride] = (out, be.last_profile["cycles"])
            np.testing.assert_array_equal(out, _reference(x, wt, bias, rq, stride, pad, 3))
    for stride in (1, 2):
        assert np.array_equal(got["sim", stride][0], got["rtl-check", stride][0])
        assert got["sim", stride][1] == got["rtl-check", stride][1]
