"""Depthwise conv2d on the dwmac intrinsic (compiler/topi/depthwise.py) equals a numpy reference bit for bit,
reads the weights packed as vectors, and the sim backend picks it for depthwise layers."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backend.accel.backend import SimAccelBackend
from jit_runtime.host_ops.requant import Requant, apply_requant
from compiler.backend.accel.measure import choose_dw_knobs
from compiler.topi.depthwise import DwShape, dwmac_supported, pack_dw_weight
from isa import make_config

PYNQ = make_config("pynq-z1")


def reference(x, w, bias, rq, stride, pad, pad_value):
    nb, cb, h, wd, B, BI = x.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3]), (0, 0), (0, 0)),
                constant_values=pad_value)
    kh, kw = w.shape[2], w.shape[3]
    oh = (h + pad[0] + pad[2] - kh) // stride[0] + 1
    ow = (wd + pad[1] + pad[3] - kw) // stride[1] + 1
    acc = np.zeros((nb, cb, oh, ow, B, BI), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            tap = w[:, 0, ky, kx, :, 0].astype(np.int64)[None, :, None, None, None, :]
            acc += xp[:, :, ky:ky + stride[0] * oh:stride[0], kx:kx + stride[1] * ow:stride[1]] * tap
    a4 = acc.transpose(0, 4, 1, 5, 2, 3).reshape(nb * B, cb * BI, oh, ow)
    return apply_requant(a4, bias, rq).reshape(nb, B, cb, BI, oh, ow).transpose(0, 2, 4, 5, 1, 3)


@pytest.mark.parametrize("cb,h,w,k,stride,pad", [
    (2, 9, 7, 3, (1, 1), (1, 1, 1, 1)),
    (3, 10, 8, 3, (2, 2), (0, 0, 1, 1)),
    (1, 8, 9, 5, (1, 2), (2, 1, 2, 2)),   # 25 taps > BLOCK_OUT: one WGT row per kernel row
    (2, 5, 6, 1, (1, 1), (0, 0, 0, 0)),
])
def test_depthwise_on_dwmac_matches_numpy(cb, h, w, k, stride, pad):
    rng = np.random.default_rng(cb * 100 + h)
    BI = PYNQ.block_in
    x = rng.integers(-128, 128, (1, cb, h, w, 1, BI)).astype(np.int8)
    wt = rng.integers(-128, 128, (cb, 1, k, k, BI, BI)).astype(np.int8)
    bias = rng.integers(-5000, 5000, cb * BI)
    rq = Requant(0, rng.integers(1 << 20, 1 << 23, cb * BI), rng.integers(20, 27, cb * BI), bool(cb % 2), -128, 127,
                 None, 7)
    be = SimAccelBackend(PYNQ)
    assert be.depthwise_on_dwmac(x, wt, cb * BI)
    out = be.conv2d(x, wt, bias, stride=stride, padding=pad, groups=cb * BI, requant=rq, pad_value=-9)
    np.testing.assert_array_equal(out, reference(x, wt, bias, rq, stride, pad, -9))
    prof = be.last_profile
    ds = DwShape(1, cb, h, w, k, k, stride, pad)
    assert prof["intrinsic"] == "dwmac" and prof["macs"] == ds.oh * ds.ow * cb * k * k * BI
    assert 0 < prof["intrinsic_utilization"] <= 1


def test_block_diagonal_path_agrees():
    """``use_dwmac = False`` runs the same layer as a block-diagonal GEMM: same bytes, more weight traffic."""
    rng = np.random.default_rng(5)
    BI = PYNQ.block_in
    x = rng.integers(-128, 128, (1, 2, 6, 6, 1, BI)).astype(np.int8)
    wt = rng.integers(-128, 128, (2, 1, 3, 3, BI, BI)).astype(np.int8)
    rq = Requant(0, np.full(2 * BI, 1 << 22), np.full(2 * BI, 26), True, -128, 127, None, 0)
    on = SimAccelBackend(PYNQ)
    off = SimAccelBackend(PYNQ)
    off.use_dwmac = False
    a = on.conv2d(x, wt, None, stride=(1, 1), padding=(1, 1, 1, 1), groups=2 * BI, requant=rq)
    b = off.conv2d(x, wt, None, stride=(1, 1), padding=(1, 1, 1, 1), groups=2 * BI, requant=rq)
    np.testing.assert_array_equal(a, b)
    assert on.last_profile["intrinsic"] == "dwmac" and "intrinsic" not in off.last_profile


def test_weight_packing_and_support():
    BI = PYNQ.block_in
    w = np.arange(2 * 3 * 3 * BI * BI).reshape(2, 1, 3, 3, BI, BI).astype(np.int8)
    p = pack_dw_weight(PYNQ, w)
    assert p.shape == (2, PYNQ.block_out, BI)
    assert np.array_equal(p[1, 2 * 3 + 1], w[1, 0, 2, 1, :, 0]) and not p[:, 9:].any()
    assert dwmac_supported(PYNQ, 3, 3) and dwmac_supported(PYNQ, 7, 7) and not dwmac_supported(PYNQ, 1, 17)


def test_tiles_keep_weight_vectors_addressable():
    """The chosen tile fits every scratchpad and its weight vectors fit the micro-op's wgt field."""
    ds = DwShape(1, 60, 7, 7, 3, 3, (1, 1), (1, 1, 1, 1))
    k = choose_dw_knobs(PYNQ, ds, n_consts=1, measure=1)
    assert k.vthreads * k.cb_tile * PYNQ.block_out <= 1 << PYNQ.uop_wgt_bits


@pytest.mark.parametrize("cb,h,stride", [(6, 7, 1), (4, 12, 2)])
def test_sketch_agrees_with_the_generated_program(cb, h, stride):
    """The chooser ranks tiles by ``sketch_dw`` (geometry only); it must agree with ``estimate_dw`` of the lowered
    program (instruction by instruction) within 2 % on every kind of tiling."""
    from compiler.backend.accel.ops import OpBuilder
    from compiler.tir.accel import lower
    from compiler.topi.depthwise import DwKnobs, depthwise_kernel, dw_compute, dw_epilogue, estimate_dw, sketch_dw

    ds = DwShape(1, cb, h, h, 3, 3, (stride, stride), (1, 1, 1, 1))
    rq = Requant(0, np.full(cb * 16, 1 << 21), np.full(cb * 16, 24), True, -128, 127, None, 3)
    n_consts = len(dw_epilogue(PYNQ, ds, dw_compute(PYNQ, ds)[3], None, rq).consts)
    for k in (DwKnobs(1, 1, 1, "h"), DwKnobs(2, 3, 2, "h"), DwKnobs(3, ds.oh, 2, "cb"), DwKnobs(cb // 2, 2, 2, "cb")):
        ops = OpBuilder(lower(depthwise_kernel(PYNQ, ds, None, rq, k).schedule, PYNQ, name="depthwise"), PYNQ).build()
        exact = estimate_dw(PYNQ, ops, k, ds)
        assert abs(sketch_dw(PYNQ, ds, k, 1, n_consts) / exact - 1) < 0.02, k


def test_uneven_thread_splits_rank_last():
    from compiler.topi.depthwise import DwKnobs, _uneven

    ds = DwShape(1, 9, 14, 14, 3, 3, (1, 1), (1, 1, 1, 1))
    assert _uneven(ds, DwKnobs(1, 7, 2, "cb"))       # 9 channel tiles over 2 threads
    assert not _uneven(ds, DwKnobs(3, 7, 3, "cb"))   # 3 tiles, 3 threads
    assert not _uneven(ds, DwKnobs(1, 7, 2, "h"))    # 2 row tiles, 2 threads
    assert _uneven(ds, DwKnobs(1, 4, 2, "h"))        # a partial last row tile
    assert _uneven(ds, DwKnobs(3, 2, 2, "h"))        # 7 row tiles over 2 threads


def test_compiled_layer_preloads_its_micro_kernels_once():
    """Every micro-kernel of the compiled program comes in with one LOAD.UOP, the compute unit's first
    instruction (no GEMM waits for the DRAM port to fetch micro-ops mid-layer)."""
    from isa import Load, MemType
    from isa.instructions import Gemm

    rng = np.random.default_rng(11)
    BI = PYNQ.block_in
    x = rng.integers(-128, 128, (1, 4, 8, 8, 1, BI)).astype(np.int8)
    wt = rng.integers(-128, 128, (4, 1, 3, 3, BI, BI)).astype(np.int8)
    rq = Requant(0, rng.integers(1 << 20, 1 << 22, 4 * BI), np.full(4 * BI, 24), False, -128, 127, None, -2)
    be = SimAccelBackend(PYNQ)
    out = be.conv2d(x, wt, None, stride=(1, 1), padding=(1, 1, 1, 1), groups=4 * BI, requant=rq, pad_value=5)
    np.testing.assert_array_equal(out, reference(x, wt, None, rq, (1, 1), (1, 1, 1, 1), 5))
    infos = be.last_profile["sim_result"].infos
    uop_loads = [i for i, f in enumerate(infos) if isinstance(f.insn, Load) and f.insn.mem == MemType.UOP]
    first_gemm = next(i for i, f in enumerate(infos) if isinstance(f.insn, Gemm))
    assert len(uop_loads) == 1 and uop_loads[0] < first_gemm
    assert be.last_profile["runtime"]["uop_cache"]["misses"] > 1  # several kernels, one load
    # the tiler's measurement (timing contract, no data) is what the simulator reports for the real run
    from compiler.backend.accel.measure import measure_dw

    (rep,) = be._replays.values()
    ds = DwShape(1, 4, 8, 8, 3, 3, (1, 1), (1, 1, 1, 1), 5)
    assert measure_dw(PYNQ, ds, rep.comp.kernel.knobs, None, rq) == be.last_profile["cycles"]
