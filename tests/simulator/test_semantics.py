"""Exact integer semantics: DMA (padding, strides), GEMM, every registered ALU op, sequential hazards."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import isa
from isa import Alu, Finish, Gemm, Load, MemType, Store, Uop
from isa.alu import alu_ops, evaluate
from simulator import Simulator
from simulator.errors import InvalidInstructionError
from tests.simulator.helpers import Prog, deps
from tests.simulator.reference import ref_execute

TINY = isa.HwConfig.from_preset("tiny")
PYNQ = isa.HwConfig.from_preset("pynq-z1")
#: TINY with ALU pipeline depth 2: no ALU micro-op is still in flight when the next one reads, so ALU loops that read
#: what the previous micro-op wrote are valid (the hazard rule, docs/timing.md) and have sequential semantics.
SEQ = isa.make_config(TINY, alu_pipeline=2)


def rand(rng, shape, bits=8):
    return rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), shape)


def run_compute(cfg, insns, uops, inp=None, wgt=None, acc=None, timing=True):
    """Run ``insns`` + FINISH on a simulator whose scratchpads are preset; returns the simulator."""
    sim = Simulator(cfg, timing=timing)
    sp = sim.scratchpads
    sim.sp.write_uops(0, isa.encode_uops(uops, cfg))
    for name, arr in (("inp", inp), ("wgt", wgt), ("acc", acc)):
        if arr is not None:
            sp[name][:len(arr)] = arr
    if acc is not None:
        sp["out"][:len(acc)] = np.asarray(acc).astype(sp["out"].dtype)
    p = Prog(cfg, 1 << 14)
    p.add(*insns, Finish())
    p.run(sim=sim)
    return sim


@pytest.mark.parametrize("mem", ["inp", "wgt", "acc", "uop"])
def test_padded_load_every_side(mem):
    rng = np.random.default_rng(1)
    cfg = TINY
    p = Prog(cfg)
    y, x, stride = 3, 2, 5
    if mem == "uop":
        src = rng.integers(0, 1 << 20, (y * stride,), dtype=np.uint32)
    else:
        shape = {"inp": (cfg.batch, cfg.block_in), "wgt": (cfg.block_out, cfg.block_in),
                 "acc": (cfg.batch, cfg.block_out)}[mem]
        src = rand(rng, (y * stride,) + shape, 32 if mem == "acc" else 8)
    base = p.place(mem, src)
    pads = dict(y_pad0=1, y_pad1=2, x_pad0=2, x_pad1=1)
    p.add(Load(MemType[mem.upper()], 3, base + 1, y, x, stride, **pads), Finish())
    sim = Simulator(cfg)
    p.run(sim=sim)
    rows, cols = 1 + y + 2, 2 + x + 1
    expect = np.zeros((rows, cols) + src.shape[1:], np.int64)
    block = np.stack([src[1 + r * stride:1 + r * stride + x] for r in range(y)]).astype(np.int64)
    expect[1:1 + y, 2:2 + x] = block
    got = sim.scratchpads[mem][3:3 + rows * cols].astype(np.int64)
    assert np.array_equal(got, expect.reshape((rows * cols,) + src.shape[1:]))
    if mem == "acc":  # the OUT mirror holds the low out_width bits
        out = sim.scratchpads["out"][3:3 + rows * cols].astype(np.int64)
        assert np.array_equal(out, ((got + 128) % 256) - 128)
    if mem == "uop":
        d, s, w = isa.encoding.decode_uop_array(expect.reshape(-1), cfg)
        assert np.array_equal(sim.sp.uop_dst[3:3 + rows * cols], d)
        assert np.array_equal(sim.sp.uop_wgt[3:3 + rows * cols], w)


def test_strided_store_leaves_gaps_untouched():
    rng = np.random.default_rng(2)
    cfg = TINY
    p = Prog(cfg)
    acc = rand(rng, (6, 1, 4), 32)
    a = p.place("acc", acc)
    o = p.alloc("out", 20)
    p.put("out", o, np.full((20, 1, 4), 77))
    p.add(Load(MemType.ACC, 0, a, 1, 6, 6, deps=deps("push_next")),
          Store(MemType.OUT, 0, o + 1, 2, 3, 7, deps=deps("pop_prev")), Finish())
    p.run()
    got = p.get("out", o, 20)
    expect = np.full((20, 1, 4), 77)
    expect[1:4] = acc[0:3]
    expect[8:11] = acc[3:6]
    assert np.array_equal(got, ((expect + 128) % 256) - 128)


def test_gemm_program_all_units_with_tokens():
    """C = A @ W^T through LOAD, GEMM (reset + accumulate over both loop levels), ALU, STORE and tokens."""
    rng = np.random.default_rng(3)
    cfg = PYNQ
    BI, BO = cfg.block_in, cfg.block_out
    M, KB, NB = 3, 2, 2
    A = rand(rng, (M, KB, 1, BI))
    W = rand(rng, (NB, KB, BO, BI))
    p = Prog(cfg, 1 << 16)
    a, w, o = p.place("inp", A.reshape(-1, 1, BI)), p.place("wgt", W.reshape(-1, BO, BI)), p.alloc("out", M * NB)
    # uop (n): dst=n, src=0, wgt=n*KB; outer loop over m (dst += NB, src += KB), inner loop over k (src, wgt += 1)
    u = p.place_uops([Uop(n, 0, n * KB) for n in range(NB)] + [Uop(0, 0, 0)])
    p.add(Load(MemType.UOP, 0, u, 1, NB + 1, NB + 1),
          Load(MemType.INP, 0, a, 1, M * KB, M * KB),
          Load(MemType.WGT, 0, w, 1, NB * KB, NB * KB, deps=deps("push_next")),
          Gemm(True, NB, NB + 1, M, NB, dst_factor_out=NB, dst_factor_in=1),
          Gemm(False, 0, NB, M, KB, dst_factor_out=NB, src_factor_out=KB, src_factor_in=1, wgt_factor_in=1,
               deps=deps("pop_prev")),
          Alu("SHR", False, NB, NB + 1, M, NB, dst_factor_out=NB, dst_factor_in=1, use_imm=True, imm=4),
          Alu("MAX", False, NB, NB + 1, M * NB, 1, dst_factor_out=1, use_imm=True, imm=-3, deps=deps("push_next")),
          Store(MemType.OUT, 0, o, 1, M * NB, M * NB, deps=deps("pop_prev")), Finish())
    for timing in (True, False):
        p.put("out", o, np.zeros((M * NB, 1, BO)))
        p.run(timing=timing)
        ref = np.einsum("mkbi,nkoi->mnbo", A, W)
        ref = np.maximum(ref >> 4, -3)
        assert np.array_equal(p.get("out", o, M * NB).reshape(M, NB, 1, BO), ((ref + 128) % 256) - 128)


@pytest.mark.parametrize("op", [o.name for o in alu_ops(TINY)])
@pytest.mark.parametrize("use_imm", [True, False])
def test_every_alu_op(op, use_imm):
    rng = np.random.default_rng(4)
    cfg = TINY
    acc = rand(rng, (16, 1, 4), 32)
    acc[8:] = rng.integers(-40, 40, (8, 1, 4))  # small tensor operands: meaningful shifts
    for imm in ([-(1 << 15), -7, 0, 5, (1 << 15) - 1] if use_imm else [0]):
        insn = Alu(op, False, 0, 1, 8, 1, dst_factor_out=1, src_factor_out=1, use_imm=use_imm, imm=imm)
        sim = run_compute(cfg, [insn], [Uop(0, 8)], acc=acc)
        b = np.full((8, 1, 4), imm) if use_imm else acc[8:16]
        expect = evaluate(op, acc[:8], b, cfg.acc_width)
        assert np.array_equal(sim.scratchpads["acc"][:8], expect)
        assert np.array_equal(sim.scratchpads["acc"][8:16], acc[8:16])
        assert np.array_equal(sim.scratchpads["out"][:8].astype(np.int64), ((expect + 128) % 256) - 128)


@pytest.mark.parametrize("timing", [True, False])
def test_requant_reads_its_records_from_wgt_at_src(timing):
    """REQUANT: acc row d uses the records of WGT element src(d); lane o reads row o of that element."""
    from isa.requant import pack_records

    rng = np.random.default_rng(7)
    cfg = PYNQ
    n, BO = 6, cfg.block_out
    acc = rng.integers(-(1 << 31), 1 << 31, (n, 1, BO))
    bias, mult = rng.integers(-(1 << 20), 1 << 20, 2 * BO), rng.integers(1 << 29, 1 << 31, 2 * BO)
    shift, zp = rng.integers(20, 50, 2 * BO), rng.integers(-100, 100, 2 * BO)
    wgt = pack_records(cfg, bias=bias, mult=mult, shift=shift, zp=zp, lo=-128, hi=127, n_channels=2 * BO)
    # uops: acc rows 0..2 use wgt element 5, rows 3..5 element 6 (loop over rows, src fixed per uop)
    uops = [Uop(0, 5), Uop(3, 6)]
    insn = Alu("REQUANT", False, 0, 2, 3, 1, dst_factor_out=1, src_factor_out=0)
    full = np.zeros((7, BO, cfg.block_in), np.int8)
    full[5:7] = wgt
    sim = run_compute(cfg, [insn], uops, wgt=full, acc=acc, timing=timing)
    ch = np.concatenate([np.zeros(3, int), np.ones(3, int)])[:, None] * BO + np.arange(BO)[None, :]
    x = (acc[:, 0] + bias[ch] + (1 << 31)) % (1 << 32) - (1 << 31)
    p = [[int(x[i, o]) * int(mult[ch[i, o]]) for o in range(BO)] for i in range(n)]
    want = np.array([[min(max(((p[i][o] + (1 << (int(shift[ch[i, o]]) - 1))) >> int(shift[ch[i, o]]))
                              + int(zp[ch[i, o]]), -128), 127) for o in range(BO)] for i in range(n)])
    assert np.array_equal(sim.scratchpads["acc"][:n, 0], want)


def test_requant_is_rejected_where_it_cannot_run():
    from simulator.errors import OutOfRangeError

    with pytest.raises(InvalidInstructionError, match="ALU.REQUANT reads a 128-bit parameter record .* 'tiny'"):
        run_compute(TINY, [Alu("REQUANT", False, 0, 1, 1, 1)], [Uop(0, 0)])
    with pytest.raises(InvalidInstructionError, match="has no immediate form"):
        run_compute(PYNQ, [Alu("REQUANT", False, 0, 1, 1, 1, use_imm=True)], [Uop(0, 0)])
    with pytest.raises(OutOfRangeError, match="src index 1024 .* wgt scratchpad"):
        run_compute(PYNQ, [Alu("REQUANT", False, 0, 1, 1, 1)], [Uop(0, 1024)])


def test_alu_builtin_values_pinned():
    """A few values worked out by hand (wrap at 32 bits, SHR with negative amounts, MUL low bits)."""
    cfg = TINY
    acc = np.zeros((4, 1, 4), np.int64)
    acc[0, 0] = [2**31 - 1, -8, 100, -1]
    cases = {("ADD", 1): [-2**31, -7, 101, 0], ("SHR", 2): [2**29 - 1, -2, 25, -1], ("SHR", -3): [-8, -64, 800, -8],
             ("MUL", 2**15 - 1): [2**31 - 32767, -262136, 3276700, -32767], ("MIN", -9): [-9, -9, -9, -9],
             ("MAX", -9): [2**31 - 1, -8, 100, -1]}
    for (op, imm), want in cases.items():
        sim = run_compute(cfg, [Alu(op, False, 0, 1, 1, 1, use_imm=True, imm=imm)], [Uop(0, 0)], acc=acc)
        assert sim.scratchpads["acc"][0, 0].tolist() == want, (op, imm)


def test_gemm_repeated_dst_sums_everything():
    rng = np.random.default_rng(5)
    cfg = TINY
    inp, wgt = rand(rng, (4, 1, 4)), rand(rng, (4, 4, 4))
    acc = rand(rng, (2, 1, 4), 16)
    uops = [Uop(0, i, i) for i in range(4)] + [Uop(1, 3, 0)]
    insn = Gemm(False, 0, 5, 2, 1, src_factor_out=0, wgt_factor_out=0)  # every uop twice
    sim = run_compute(cfg, [insn], uops, inp, wgt, acc)
    ref = acc.copy()
    ref_execute(cfg, insn, uops, inp, wgt, ref)
    assert np.array_equal(sim.scratchpads["acc"][:2], ref)


@pytest.mark.parametrize("dense", [True, False])
def test_gemm_overwrite_ignores_old_accumulators(dense):
    rng = np.random.default_rng(8)
    cfg = TINY
    inp, wgt = rand(rng, (8, 1, 4)), rand(rng, (8, 4, 4))
    acc = rand(rng, (8, 1, 4), 32)
    # dense: a regular grid of 2 x 3 outputs; general: a permuted uop table
    uops = [Uop(n, 0, n) for n in range(3)] if dense else [Uop(2, 1, 0), Uop(0, 3, 5), Uop(1, 0, 2)]
    insn = Gemm(False, 0, 3, 2, 1, dst_factor_out=3, src_factor_out=1, overwrite=True)
    sim = run_compute(cfg, [insn], uops, inp, wgt, acc)
    expect = acc.copy()
    for i0 in range(2):
        for u in uops:  # hand-written: acc = product, the old value is dropped
            expect[u.dst + 3 * i0] = inp[u.src + i0].astype(np.int64) @ wgt[u.wgt].astype(np.int64).T
    assert np.array_equal(sim.scratchpads["acc"][:8], expect)
    ref = acc.copy()
    ref_execute(cfg, insn, uops, inp, wgt, ref)
    assert np.array_equal(ref, expect)


def test_gemm_overwrite_twice_is_an_error():
    insn = Gemm(False, 0, 2, 1, 1, overwrite=True)
    with pytest.raises(InvalidInstructionError, match=r"overwrite GEMM writes acc index 0 twice .*uop=0 .*uop=1"):
        run_compute(TINY, [insn], [Uop(0, 0, 0), Uop(0, 1, 1)])


def test_alu_reads_results_of_earlier_iterations():
    """A running sum and a chain: each iteration reads what the previous one wrote (valid where no ALU micro-op is
    in flight when the next reads: depth 2)."""
    cfg = SEQ
    acc = np.arange(40).reshape(10, 1, 4)
    prefix = Alu("ADD", False, 0, 1, 9, 1, dst_factor_out=1, src_factor_out=1)  # acc[i+1] += acc[i]
    uops = [Uop(1, 0)]
    sim = run_compute(cfg, [prefix], uops, acc=acc)
    ref = acc.copy()
    ref_execute(cfg, prefix, uops, None, None, ref)
    assert np.array_equal(sim.scratchpads["acc"][:10], ref)
    assert np.array_equal(ref[:, 0, 0], np.cumsum(np.arange(0, 40, 4)))  # the reference really is sequential


@pytest.mark.parametrize("depth,dist,ok", [(4, 1, False), (4, 2, False), (4, 3, True), (5, 3, False), (5, 4, True),
                                           (3, 1, False), (3, 2, True), (2, 1, True)])
@pytest.mark.parametrize("operand", ["dst", "src"])
def test_alu_hazard_rule(depth, dist, ok, operand):
    """An ALU micro-op must not read (dst or src) a row one of the ``depth - 2`` micro-ops before it writes; further
    back it sees the written value. A row written ``dist`` micro-ops earlier: rows 0..dist-1 cycled."""
    from isa.timing import alu_hazard
    from simulator import HazardError

    cfg = isa.make_config(TINY, alu_pipeline=depth)
    n = 3 * dist
    if operand == "dst":  # acc[j % dist] += 1: micro-op j reads the row micro-op j - dist wrote
        uops = [Uop(j % dist, 0) for j in range(n)]
        insn = Alu("ADD", False, 0, n, 1, 1, use_imm=True, imm=1)
    else:  # acc[8 + j] = max(acc[8 + j], acc[j - dist]) after acc[j] was written by micro-op j
        uops = [Uop(j, 20 + j) for j in range(dist)] + [Uop(8 + j, j) for j in range(dist)]
        insn = Alu("MAX", False, 0, len(uops), 1, 1)
    acc = np.arange(32 * 4).reshape(32, 1, 4) - 50
    if ok:
        sim = run_compute(cfg, [insn], uops, acc=acc)
        ref = acc.copy()
        ref_execute(cfg, insn, uops, None, None, ref)
        assert np.array_equal(sim.scratchpads["acc"][:32], ref)
    else:
        for timing in (True, False):
            with pytest.raises(HazardError, match=rf"instruction 0 \(ALU.\w+\): micro-op iteration {dist} reads acc row "
                               rf"0 \(its {operand}\), which iteration 0 writes only {dist} micro-op"):
                run_compute(cfg, [insn], uops, acc=acc, timing=timing)
    d = np.array([u.dst for u in uops])
    s = None if operand == "dst" else np.array([u.src for u in uops])
    assert (alu_hazard(d, s, depth - 2) is None) == ok


def test_alu_hazard_across_loop_repetitions():
    """The rule counts micro-op iterations of the whole loop nest: one micro-op repeated by iter_out on the same row
    is a distance-1 chain (rejected at depth 4), a 3-row micro-op list repeated is distance 3 (valid)."""
    from simulator import HazardError

    with pytest.raises(HazardError, match="iteration 1 reads acc row 5"):
        run_compute(TINY, [Alu("ADD", False, 0, 1, 4, 1, use_imm=True, imm=1)], [Uop(5, 0)])
    acc = np.zeros((32, 1, 4), np.int64)
    sim = run_compute(TINY, [Alu("ADD", False, 0, 3, 4, 1, use_imm=True, imm=1)], [Uop(5, 0), Uop(6, 0), Uop(7, 0)],
                      acc=acc)
    assert (sim.scratchpads["acc"][5:8] == 4).all()


def test_large_dense_gemm_matches_reference():
    rng = np.random.default_rng(6)
    cfg = PYNQ
    M, K, N = 8, 4, 3
    inp, wgt = rand(rng, (M * K, 1, 16)), rand(rng, (N * K, 16, 16))
    acc = rand(rng, (M * N, 1, 16), 32)
    uops = [Uop(n, k, n * K + k) for n in range(N) for k in range(K)]
    insn = Gemm(False, 0, len(uops), M, 1, dst_factor_out=N, src_factor_out=K)
    sim = run_compute(cfg, [insn], uops, inp, wgt, acc)
    ref = acc.copy()
    ref_execute(cfg, insn, uops, inp, wgt, ref)
    assert np.array_equal(sim.scratchpads["acc"][:M * N], ref)
    assert sim._gemm._plans and type(next(iter(sim._gemm._plans.values()))).__name__ == "_Dense"


@pytest.mark.parametrize("overwrite", [False, True])
def test_conv_shaped_gemm_takes_dense_path(overwrite):
    """A convolution's GEMM: pixels in the loops, uops over kernel row x kernel column x output block
    (a three-dim uop table), extreme int8 values; equals the per-uop reference and runs as one product."""
    rng = np.random.default_rng(11)
    cfg = PYNQ
    OH, OW, KH, KW, NB, W = 3, 4, 2, 3, 2, 6  # input rows are W wide; output block n at dst offset n*OH*OW
    inp = rand(rng, (64, 1, 16))
    inp[:5] = -128  # the largest products: (-128) * (-128)
    wgt = rand(rng, (NB * KH * KW, 16, 16))
    wgt[0] = -128
    acc = rand(rng, (NB * OH * OW, 1, 16), 32)
    uops = [Uop(n * OH * OW, ky * W + kx, n * KH * KW + ky * KW + kx)
            for ky in range(KH) for kx in range(KW) for n in range(NB)]
    insn = Gemm(False, 0, len(uops), OH, OW, dst_factor_out=OW, dst_factor_in=1, src_factor_out=W, src_factor_in=1,
                overwrite=False)
    if overwrite:  # each dst once: one kernel position only
        uops = [Uop(n * OH * OW, 1, n) for n in range(NB)]
        insn = Gemm(False, 0, len(uops), OH, OW, dst_factor_out=OW, dst_factor_in=1, src_factor_out=W,
                    src_factor_in=1, overwrite=True)
    sim = run_compute(cfg, [insn], uops, inp, wgt, acc)
    ref = acc.copy()
    if overwrite:
        ref[:] = 0
    ref_execute(cfg, insn, uops, inp, wgt, ref)
    if overwrite:  # untouched rows keep their old values
        ref[NB * OH * OW:] = acc[NB * OH * OW:]
    assert np.array_equal(sim.scratchpads["acc"][:len(acc)], ref)
    assert np.array_equal(sim.scratchpads["out"][:len(acc)], ref.astype(np.int8))
    assert [type(p).__name__ for p in sim._gemm._plans.values()] == ["_Dense"]


@pytest.mark.parametrize("kblocks", [64, 65])
def test_dense_gemm_exact_at_the_float32_bound(kblocks):
    """64 k-blocks x 16 = 1024 products of (-128)(-128): sums of exactly 2**24 (the float32 limit); 65 k-blocks
    go past it (float64). Both exact, checked against Python integers."""
    cfg = PYNQ
    inp = np.full((kblocks, 1, 16), -128)
    wgt = np.full((kblocks, 16, 16), -128)
    wgt[-1, 3, 5] = 127  # one different product in one column
    acc = np.full((1, 1, 16), -5)
    uops = [Uop(0, k, k) for k in range(kblocks)]
    sim = run_compute(cfg, [Gemm(False, 0, kblocks, 1, 1)], uops, inp, wgt, acc)
    expect = [-5 + 16 * kblocks * 16384] * 16
    expect[3] += -128 * 127 - 16384
    expect = [((v + 2**31) % 2**32) - 2**31 for v in expect]
    assert sim.scratchpads["acc"][0, 0].tolist() == expect


@pytest.mark.parametrize("overwrite", [False, True])
def test_dense_gemm_with_batch_two(overwrite):
    """batch > 1: the dense path moves the batch rows next to the M rows and back."""
    cfg = isa.make_config("tiny", log_batch=1)
    rng = np.random.default_rng(3)
    M, K, N = 5, 3, 2
    inp, wgt = rand(rng, (M * K, 2, 4)), rand(rng, (N * K, 4, 4))
    acc = rand(rng, (M * N, 2, 4), 32)
    uops = ([Uop(n, 0, n * K) for n in range(N)] if overwrite
            else [Uop(n, k, n * K + k) for n in range(N) for k in range(K)])
    insn = Gemm(False, 0, len(uops), M, 1, dst_factor_out=N, src_factor_out=K, overwrite=overwrite)
    sim = run_compute(cfg, [insn], uops, inp, wgt, acc)
    ref = np.zeros_like(acc) if overwrite else acc.copy()
    ref_execute(cfg, insn, uops, inp, wgt, ref)
    assert np.array_equal(sim.scratchpads["acc"][:M * N], ref)
    assert [type(p).__name__ for p in sim._gemm._plans.values()] == ["_Dense"]


def test_factor_uops_mixed_radix():
    from simulator.loops import factor_uops

    d = np.array([16, 408] * 6)
    s = np.array([58, 58, 116, 116, 59, 59, 117, 117, 60, 60, 118, 118])
    w = np.array([3, 12, 6, 15, 4, 13, 7, 16, 5, 14, 8, 17])
    assert factor_uops(d, s, w) == ((16, 58, 3), [(3, 0, 1, 1), (2, 0, 58, 3), (2, 392, 0, 9)])
    assert factor_uops(np.array([0, 2, 1]), np.zeros(3, int), np.zeros(3, int)) is None  # not a grid
    assert factor_uops(np.array([3, 1]), np.zeros(2, int), np.zeros(2, int)) is None  # negative step


def test_general_gemm_sums_repeated_dsts_by_segment():
    """A permuted uop table with repeated dsts (no affine grid): the general path's per-dst sums."""
    rng = np.random.default_rng(12)
    cfg = TINY
    inp, wgt, acc = rand(rng, (16, 1, 4)), rand(rng, (16, 4, 4)), rand(rng, (8, 1, 4), 32)
    uops = [Uop(3, 1, 2), Uop(0, 5, 1), Uop(3, 2, 7), Uop(1, 0, 0), Uop(0, 4, 4), Uop(3, 9, 3)]
    insn = Gemm(False, 0, len(uops), 2, 1, dst_factor_out=4, src_factor_out=1, wgt_factor_out=1)
    sim = run_compute(cfg, [insn], uops, inp, wgt, acc)
    ref = acc.copy()
    ref_execute(cfg, insn, uops, inp, wgt, ref)
    assert np.array_equal(sim.scratchpads["acc"][:8], ref)
    assert [type(p).__name__ for p in sim._gemm._plans.values()] == ["_General"]


def test_wide_operands_stay_exact():
    """32-bit inp/wgt: products overflow float64's 53 bits, so the int64 path must be taken."""
    cfg = isa.make_config("tiny", inp_width=32, wgt_width=32, acc_width=32, out_width=32, bus_width=128,
                          inp_buff_size=4096, wgt_buff_size=4096)
    rng = np.random.default_rng(7)
    inp, wgt = rand(rng, (2, 1, 4), 32), rand(rng, (2, 4, 4), 32)
    acc = rand(rng, (2, 1, 4), 32)
    uops = [Uop(0, 0, 0), Uop(1, 1, 1)]
    insn = Gemm(False, 0, 2, 1, 1)
    sim = run_compute(cfg, [insn], uops, inp, wgt, acc)
    expect = [[int(acc[d, 0, o]) + sum(int(inp[d, 0, i]) * int(wgt[d, o, i]) for i in range(4)) for o in range(4)]
              for d in range(2)]
    expect = [[((v + 2**31) % 2**32) - 2**31 for v in row] for row in expect]
    assert sim.scratchpads["acc"][:2, 0].tolist() == expect


_uop = st.builds(Uop, st.integers(0, 6), st.integers(0, 6), st.integers(0, 6))


@st.composite
def loop_insn(draw):
    kind = draw(st.sampled_from(["gemm", "alu"]))
    n_uops = draw(st.integers(1, 4))
    bgn = draw(st.integers(0, 2))
    f = st.integers(0, 3)
    common = dict(reset=draw(st.booleans()) and draw(st.booleans()), uop_bgn=bgn, uop_end=bgn + n_uops,
                  iter_out=draw(st.integers(1, 3)), iter_in=draw(st.integers(1, 3)), dst_factor_out=draw(f),
                  dst_factor_in=draw(f), src_factor_out=draw(f), src_factor_in=draw(f))
    if kind == "gemm":
        return Gemm(wgt_factor_out=draw(f), wgt_factor_in=draw(f), **common)
    return Alu(op=draw(st.sampled_from([o.name for o in alu_ops(TINY)])), use_imm=draw(st.booleans()),
               imm=draw(st.integers(-(1 << 15), (1 << 15) - 1)), **common)


@settings(max_examples=60, deadline=None)
@given(uops=st.lists(_uop, min_size=6, max_size=6), insns=st.lists(loop_insn(), min_size=1, max_size=3),
       seed=st.integers(0, 2**31), timing=st.booleans())
def test_random_programs_match_per_uop_reference(uops, insns, seed, timing):
    rng = np.random.default_rng(seed)
    cfg = SEQ  # any ALU loop is valid at depth 2 (TINY's depth 4 rejects reads of rows still in flight)
    inp, wgt = rand(rng, (32, 1, 4)), rand(rng, (32, 4, 4))
    acc = rand(rng, (32, 1, 4), int(rng.choice([8, 32])))
    sim = run_compute(cfg, insns, uops, inp, wgt, acc, timing=timing)
    ref = acc.copy()
    for insn in insns:
        ref_execute(cfg, insn, uops, inp, wgt, ref)
    assert np.array_equal(sim.scratchpads["acc"][:32], ref)
    assert np.array_equal(sim.scratchpads["out"][:32].astype(np.int64), ((ref + 128) % 256) - 128)
