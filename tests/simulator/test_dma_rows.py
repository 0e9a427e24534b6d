"""DMA row views (plain reshape or strided at the DRAM's end, overlapping rows), whole-row accumulator writes and
the dense GEMM's destination orders, each against a row-by-row numpy reference."""
from __future__ import annotations

import numpy as np
import pytest

import isa
from isa import Finish, Gemm, Load, MemType, Store, Uop
from simulator import Simulator
from simulator.scratchpads import Scratchpads
from tests.simulator.helpers import Prog, deps
from tests.simulator.reference import ref_execute

TINY = isa.HwConfig.from_preset("tiny")


@pytest.mark.parametrize("stride", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("at_end", [False, True])
def test_strided_load_rows(stride, at_end):
    """y rows of x elements, pitch ``stride`` (0: the same row; < x: overlapping rows), ending at the last DRAM
    byte or not."""
    cfg, y, x = TINY, 4, 3
    eb = cfg.inp_elem_bytes
    p = Prog(cfg, 1 << 13)
    span = (y - 1) * stride + x  # elements from the first to one past the last
    base = p.dram.size // eb - span if at_end else 1024 // eb
    src = np.random.default_rng(stride).integers(-128, 128, (span, cfg.batch, cfg.block_in))
    p.put("inp", base, src)
    p.add(Load(MemType.INP, 2, base, y, x, stride, x_pad0=1), Finish())
    sim = Simulator(cfg)
    p.run(sim=sim)
    expect = np.zeros((y, 1 + x, cfg.batch, cfg.block_in), np.int64)
    for r in range(y):
        expect[r, 1:] = src[r * stride:r * stride + x]
    assert np.array_equal(sim.scratchpads["inp"][2:2 + y * (1 + x)], expect.reshape(-1, cfg.batch, cfg.block_in))


@pytest.mark.parametrize("stride", [1, 2, 3, 4, 6])
def test_store_rows_overlapping_or_strided(stride):
    """Rows written in order: where pitch < row length a later row overwrites the earlier row's tail."""
    cfg, y, x = TINY, 3, 3
    rng = np.random.default_rng(stride)
    p = Prog(cfg)
    acc = rng.integers(-(1 << 20), 1 << 20, (y * x, 1, 4))
    a = p.place("acc", acc)
    o = p.alloc("out", 24)
    p.put("out", o, np.full((24, 1, 4), 77))
    p.add(Load(MemType.ACC, 0, a, 1, y * x, y * x, deps=deps("push_next")),
          Store(MemType.OUT, 0, o + 1, y, x, stride, deps=deps("pop_prev")), Finish())
    p.run()
    expect = np.full((24, 1, 4), 77)
    for r in range(y):
        expect[1 + r * stride:1 + r * stride + x] = acc[r * x:(r + 1) * x]
    assert np.array_equal(p.get("out", o, 24), ((expect + 128) % 256) - 128)


def test_write_acc_by_rows_keeps_numpy_assignment_semantics():
    """Index arrays (repeats: the last write wins), slices and broadcast values; OUT holds the low bits."""
    rng = np.random.default_rng(0)
    sp, ref_acc = Scratchpads(TINY), np.zeros((TINY.acc_depth, 1, 4), np.int64)
    for idx in (np.array([3, 5, 3, 9]), np.array([7]), slice(10, 14), np.array([20, 21, 20, 20])):
        n = len(range(TINY.acc_depth)[idx]) if isinstance(idx, slice) else idx.size
        vals = rng.integers(-(1 << 31), 1 << 31, (n, 1, 4))
        for v in (vals, vals.astype(np.int32), 0):
            sp.write_acc(idx, v)
            ref_acc[idx] = v
            assert np.array_equal(sp.acc, ref_acc)
            assert np.array_equal(sp.out.astype(np.int64), ((ref_acc + 128) % 256) - 128)
    assert sp.acc[3, 0].tolist() == ref_acc[3, 0].tolist() and sp.acc[20, 0].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("order, sliced", [("m_major", True), ("n_major", True), ("gaps", False)])
@pytest.mark.parametrize("log_batch", [0, 1])
def test_dense_gemm_destination_orders(order, sliced, log_batch):
    """The product lands in acc rows ``m*N + n`` (its own order), ``n*M + m`` (transposed into a slice) or rows
    with gaps (scattered); batch 2 interleaves the batch rows."""
    cfg = isa.make_config("tiny", log_batch=log_batch)
    rng = np.random.default_rng(7)
    M, K, N = 5, 3, 2
    B = cfg.batch
    inp, wgt = rng.integers(-128, 128, (M * K, B, 4)), rng.integers(-128, 128, (N * K, 4, 4))
    dst_m, dst_n = {"m_major": (N, 1), "n_major": (1, M), "gaps": (2 * N, 1)}[order]
    acc = rng.integers(-(1 << 30), 1 << 30, (2 * M * N, B, 4))
    uops = [Uop(n * dst_n, k, n * K + k) for n in range(N) for k in range(K)]
    insn = Gemm(False, 0, len(uops), M, 1, dst_factor_out=dst_m, src_factor_out=K)
    sim = Simulator(cfg)
    sim.sp.write_uops(0, isa.encode_uops(uops, cfg))
    sim.scratchpads["inp"][:len(inp)] = inp
    sim.scratchpads["wgt"][:len(wgt)] = wgt
    sim.sp.write_acc(slice(0, len(acc)), acc)
    p = Prog(cfg, 1 << 14)
    p.add(insn, Finish()).run(sim=sim)
    ref = acc.copy()
    ref_execute(cfg, insn, uops, inp, wgt, ref)
    assert np.array_equal(sim.scratchpads["acc"][:len(acc)], ref)
    assert np.array_equal(sim.scratchpads["out"][:len(acc)].astype(np.int64), ((ref + 128) % 256) - 128)
    (plan,) = sim._gemm._plans.values()
    assert type(plan).__name__ == "_Dense" and (plan.dslice is not None) == sliced
