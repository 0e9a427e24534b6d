"""amaranth.sim unit tests: scratchpad banks, burst splitting, arbiter, token queue, 2D load DMA."""
from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw.arbiter import Arbiter
from hw.burst import BurstIssuer
from hw.dma_read import DmaRead
from hw.scratchpad import Scratchpad
from hw.tokens import TokenQueue
from isa import make_config
from isa.timing import PORT_PRIORITY


def _run(dut, tb) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_scratchpad_banked_vector_writes_and_reads():
    k, eb, depth = 4, 8, 32
    dut = Scratchpad(depth, eb, k, n_read=1)
    model = np.zeros(depth, np.int64)
    rng = np.random.default_rng(0)
    addr_r, data_r = dut.read(0)

    async def tb(ctx):
        for _ in range(40):
            a, n = int(rng.integers(0, depth - k + 1)), int(rng.integers(1, k + 1))
            vals = rng.integers(0, 256, k)
            ctx.set(dut.w_addr, a)
            ctx.set(dut.w_data, sum(int(v) << (eb * i) for i, v in enumerate(vals)))
            ctx.set(dut.w_count, n)
            ctx.set(dut.w_en, 1)
            model[a:a + n] = vals[:n]
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        for a in range(depth - k + 1):
            ctx.set(addr_r, a)
            await ctx.tick()
            word = ctx.get(data_r)
            got = [(word >> (eb * i)) & 0xFF for i in range(k)]
            assert got == list(model[a:a + k]), a

    _run(dut, tb)


def _burst_model(base, stride, rows, row_beats, bb):
    out = []
    for r in range(rows):
        addr, left = base + r * stride, row_beats
        while left:
            n = min(left, 256, (4096 - addr % 4096) // bb)
            out.append((addr, n))
            addr, left = addr + n * bb, left - n
    return out


def test_burst_issuer_splits_at_4k_and_256_beats():
    bb = 8
    dut = BurstIssuer(bb)
    cases = [(4096 - 24, 8 * 40, 3, 5), (0, 0, 1, 600), (8 * 500, 8192, 2, 300)]

    async def tb(ctx):
        for base, stride, rows, beats in cases:
            ctx.set(dut.base, base)
            ctx.set(dut.stride, stride)
            ctx.set(dut.rows, rows)
            ctx.set(dut.row_beats, beats)
            ctx.set(dut.start, 1)
            ctx.set(dut.ready, 1)
            got = []
            for cyc in range(200):
                if ctx.get(dut.valid):
                    got.append((ctx.get(dut.addr), ctx.get(dut.len) + 1))
                await ctx.tick()
                ctx.set(dut.start, 0)
                if not ctx.get(dut.busy):
                    break
            assert got == _burst_model(base, stride, rows, beats, bb)

    _run(dut, tb)


@pytest.mark.parametrize("bb", [4, 8, 16])
def test_burst_issuer_random_rows_and_backpressure(bb):
    """Random bursts at every bus width (16 bytes: 256 beats reach 4 KiB, so only the boundary limits), with the
    AR channel stalling at random: the bursts (address, len + 1 = beats) equal the model's, one per accepted AR."""
    rng = np.random.default_rng(bb)
    dut = BurstIssuer(bb)
    cases = [(int(rng.integers(0, 1 << 16)) * bb, int(rng.integers(0, 3000)) * bb, int(rng.integers(1, 4)),
              int(rng.integers(1, 700))) for _ in range(6)]
    cases.append((4096 - bb, bb, 2, 1))  # one beat before the boundary

    async def tb(ctx):
        for base, stride, rows, beats in cases:
            ctx.set(dut.base, base)
            ctx.set(dut.stride, stride)
            ctx.set(dut.rows, rows)
            ctx.set(dut.row_beats, beats)
            ctx.set(dut.start, 1)
            got = []
            for cyc in range(2000):
                ready = int(rng.random() < 0.6)
                ctx.set(dut.ready, ready)
                if ctx.get(dut.valid) and ready:
                    assert ctx.get(dut.beats) == ctx.get(dut.len) + 1
                    got.append((ctx.get(dut.addr), ctx.get(dut.len) + 1))
                await ctx.tick()
                ctx.set(dut.start, 0)
                if not ctx.get(dut.busy):
                    break
            assert got == _burst_model(base, stride, rows, beats, bb)

    _run(dut, tb)


def test_arbiter_fixed_priority_and_hold():
    dut = Arbiter()

    async def tb(ctx):
        for n in PORT_PRIORITY:
            ctx.set(getattr(dut, f"{n}_req"), 1)
        assert ctx.get(dut.store_grant) and not ctx.get(dut.compute_grant)
        await ctx.tick()
        ctx.set(dut.store_req, 0)
        assert not ctx.get(dut.free) and not ctx.get(dut.compute_grant)  # store holds the port
        ctx.set(dut.store_last, 1)
        await ctx.tick()
        ctx.set(dut.store_last, 0)
        assert ctx.get(dut.free) and ctx.get(dut.compute_grant)  # free in the cycle after last
        ctx.set(dut.compute_req, 0)
        ctx.set(dut.load_req, 0)
        assert ctx.get(dut.fetch_grant)

    _run(dut, tb)


def test_token_queue_counts():
    dut = TokenQueue(3)

    async def tb(ctx):
        ctx.set(dut.push, 1)
        for want in (1, 2, 3, 3):
            await ctx.tick()
            assert ctx.get(dut.count) == want
        ctx.set(dut.push, 0)
        ctx.set(dut.pop, 1)
        await ctx.tick()
        assert ctx.get(dut.count) == 2 and ctx.get(dut.avail)

    _run(dut, tb)


@pytest.mark.parametrize("pads", [(1, 1, 2, 1), (0, 2, 0, 0), (3, 0, 0, 0), (0, 0, 1, 2), (2, 1, 0, 0),
                                  (0, 0, 0, 0)])
@pytest.mark.parametrize("where", [("tiny", "acc"), ("pynq-z1", "uop"), ("ultra96", "uop")])
def test_dma_read_padding_layout_and_duration(pads, where):
    """A 2 x 3 block with pads (y_pad0, y_pad1, x_pad0, x_pad1, every phase order: top, sides, bottom straight after
    the data, none), elements of 4 beats (tiny's ACC) or 2 / 4 to a beat (pynq-z1's / ultra96's UOP: the rows'
    last beat half full or less): writes the padded block; last after beats + pads. The first beat comes 3 cycles
    after the start (the contract's smallest DRAM latency)."""
    cfg = make_config(where[0])
    eb, bb = cfg.elem_bytes(where[1]), cfg.bus_bytes
    nb, k = max(1, eb // bb), max(1, bb // eb)  # beats per element, elements per beat
    dut = DmaRead(cfg, eb, 7)
    y, x = 2, 3
    rows, cols = pads[0] + y + pads[1], pads[2] + x + pads[3]
    rng = np.random.default_rng(3)
    elems = [[int.from_bytes(rng.bytes(eb), "little") for _ in range(x)] for _ in range(y)]
    per_row = -(-x // k) * nb  # beats in a row
    beats = []
    for row in elems:
        if k == 1:  # an element is nb beats, low first
            beats += [(e >> (8 * bb * i)) & ((1 << (8 * bb)) - 1) for e in row for i in range(nb)]
        else:  # k elements a beat, the row's last beat padded with zeros
            beats += [sum(e << (8 * eb * j) for j, e in enumerate(row[c:c + k])) for c in range(0, x, k)]
    assert len(beats) == y * per_row
    mem: dict[int, int] = {}
    stamps = {}
    lat = 3

    async def tb(ctx):
        for f, v in dict(sram_base=5, dram_base=0, y_size=y, x_size=x, x_stride=x, y_pad0=pads[0], y_pad1=pads[1],
                         x_pad0=pads[2], x_pad1=pads[3]).items():
            ctx.set(getattr(dut, f), v)
        ctx.set(dut.start, 1)
        ctx.set(dut.ar_ready, 1)
        todo = list(beats)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for cyc in range(1, 200):
            if todo and cyc >= lat:
                ctx.set(dut.r_valid, 1)
                ctx.set(dut.r_data, todo.pop(0))
            else:
                ctx.set(dut.r_valid, 0)
            if ctx.get(dut.w_en):
                word = ctx.get(dut.w_data)
                for j in range(ctx.get(dut.w_count)):
                    assert ctx.get(dut.w_addr) + j not in mem
                    mem[ctx.get(dut.w_addr) + j] = (word >> (8 * eb * j)) & ((1 << (8 * eb)) - 1)
            if ctx.get(dut.last):
                stamps["last"] = cyc
                break
            await ctx.tick()

    _run(dut, tb)
    assert stamps["last"] == lat - 1 + y * per_row + (rows * cols - y * x)
    want = np.zeros((rows, cols), dtype=object)
    for r in range(y):
        for c in range(x):
            want[pads[0] + r, pads[2] + c] = elems[r][c]
    assert sorted(mem) == list(range(5, 5 + rows * cols))
    assert [mem[5 + i] for i in range(rows * cols)] == list(want.reshape(-1))


def test_pair_products_two_int8_products_from_one_multiplier():
    """``hw.compute.pair_products``: one 25x8 multiplier gives x*w0 and x*w1 exactly (corners + random)."""
    from amaranth.hdl import Module, Signal, signed

    from hw.compute import pair_products

    x, w0, w1 = Signal(signed(8)), Signal(signed(8)), Signal(signed(8))
    lo, hi = pair_products(x, w0, w1)
    lo_s, hi_s = Signal(signed(17)), Signal(signed(17))
    m = Module()
    m.d.comb += [lo_s.eq(lo), hi_s.eq(hi)]
    corners = [-128, -127, -1, 0, 1, 127]
    rng = np.random.default_rng(1)
    cases = [(a, b, c) for a in corners for b in corners for c in corners]
    cases += [tuple(int(v) for v in rng.integers(-128, 128, 3)) for _ in range(1500)]

    async def tb(ctx):
        for a, b, c in cases:
            ctx.set(x, a)
            ctx.set(w0, b)
            ctx.set(w1, c)
            assert (ctx.get(lo_s), ctx.get(hi_s)) == (a * b, a * c), (a, b, c)

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()


def test_pair_products_offset_are_the_biased_products():
    """``hw.intrinsic.pair_products_offset``: the two unsigned values minus their biases are x*w0 and x*w1
    (corners + random); with ``en`` low both are held at 0."""
    from amaranth.hdl import Module, Signal, signed

    from hw.intrinsic import pair_products_offset

    m = Module()
    x, w0, w1, en = Signal(signed(8)), Signal(signed(8)), Signal(signed(8)), Signal()
    (lo, b0), (hi, b1) = pair_products_offset(x, w0, w1, m, en)
    assert (b0, b1) == (1 << 15, 1 << 16)
    lo_s, hi_s = Signal(len(lo)), Signal(len(hi))
    m.d.comb += [lo_s.eq(lo), hi_s.eq(hi)]
    corners = [-128, -127, -1, 0, 1, 127]
    rng = np.random.default_rng(2)
    cases = [(a, b, c) for a in corners for b in corners for c in corners]
    cases += [tuple(int(v) for v in rng.integers(-128, 128, 3)) for _ in range(1000)]

    async def tb(ctx):
        ctx.set(en, 1)
        for a, b, c in cases:
            ctx.set(x, a)
            ctx.set(w0, b)
            ctx.set(w1, c)
            assert (ctx.get(lo_s) - b0, ctx.get(hi_s) - b1) == (a * b, a * c), (a, b, c)
        ctx.set(en, 0)
        assert (ctx.get(lo_s), ctx.get(hi_s)) == (0, 0)

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()


def test_offset_tree_sum_is_the_signed_sum():
    """``hw.intrinsic.offset_tree_sum`` of offset-binary terms equals the plain signed sum (extremes + random)."""
    from amaranth.hdl import Module, Signal, signed

    from hw.intrinsic import offset_binary, offset_tree_sum

    m = Module()
    vals = [Signal(signed(17 if k % 3 else 9), name=f"v{k}") for k in range(7)]
    total = offset_tree_sum([offset_binary(v) for v in vals])
    out = Signal(signed(32))
    m.d.comb += out.eq(total)
    rng = np.random.default_rng(3)
    lows = [-(1 << (len(v) - 1)) for v in vals]
    highs = [(1 << (len(v) - 1)) - 1 for v in vals]
    cases = [lows, highs] + [[int(rng.integers(lo, hi + 1)) for lo, hi in zip(lows, highs)] for _ in range(300)]

    async def tb(ctx):
        for case in cases:
            for v, c in zip(vals, case):
                ctx.set(v, c)
            assert ctx.get(out) == sum(case), case

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()


def _array_ports(cfg, m, arr) -> tuple[list, list, list]:
    """Operand signals ``a`` ([b][i]) and ``w`` ([o][i]) fed to the GemmArray ``arr`` (elaborated into ``m``) and
    one 40-bit signal per lane sum."""
    from amaranth.hdl import Signal, signed

    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    a = [[Signal(signed(cfg.inp_width)) for _ in range(BI)] for _ in range(B)]
    w = [[Signal(signed(cfg.wgt_width)) for _ in range(BI)] for _ in range(BO)]
    sums = arr.use(Signal(), a, w)
    arr.elaborate(m)
    outs = [Signal(signed(40)) for _ in sums]
    m.d.comb += [o.eq(v) for o, v in zip(outs, sums)]
    return a, w, outs


def _set_operands(ctx, a, w, av, wv) -> None:
    for sig, x in zip([s for row in a for s in row], av.reshape(-1)):
        ctx.set(sig, int(x))
    for sig, x in zip([s for row in w for s in row], wv.reshape(-1)):
        ctx.set(sig, int(x))


def test_gemm_array_sums_paired_and_unpaired():
    """``hw.intrinsic.GemmArray`` lane sums (offset-binary trees) equal numpy's ``A @ W.T``, with paired products
    (tiny: int8) and without (int16 weights do not fit one DSP48E1 twice), at the operand extremes and random."""
    from amaranth.hdl import Module

    from hw.intrinsic import GemmArray, can_pair

    for cfg in (make_config("tiny"), make_config("tiny", wgt_width=16)):
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        m = Module()
        arr = GemmArray(cfg)
        a, w, outs = _array_ports(cfg, m, arr)
        ia, iw = 1 << (cfg.inp_width - 1), 1 << (cfg.wgt_width - 1)
        rng = np.random.default_rng(4)
        cases = [(np.full((B, BI), -ia), np.full((BO, BI), -iw)), (np.full((B, BI), -ia), np.full((BO, BI), iw - 1))]
        cases += [(rng.integers(-ia, ia, (B, BI)), rng.integers(-iw, iw, (BO, BI))) for _ in range(40)]

        async def tb(ctx, cases=cases, a=a, w=w, outs=outs):
            for av, wv in cases:
                _set_operands(ctx, a, w, av, wv)
                want = (av.astype(np.int64) @ wv.astype(np.int64).T).reshape(-1)
                assert [ctx.get(o) for o in outs] == [int(v) for v in want]

        assert can_pair(cfg) == (cfg.wgt_width == 8)
        sim = Simulator(m)
        sim.add_testbench(tb)
        sim.run()


def test_staged_gemm_array_streams_one_product_per_cycle():
    """A ``GemmArray`` with register stages (products, then tree cuts): fed a new ``A``, ``W`` every cycle, each
    cycle's sums come out ``stages`` cycles later, equal to numpy's ``A @ W.T``."""
    from amaranth.hdl import Module

    from hw.intrinsic import GemmArray, Stager

    cfg = make_config("tiny", log_block_in=3)  # 8 products per lane: a 3-level tree, room for two cuts
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    for stages in (1, 2, 3):
        m = Module()
        arr = GemmArray(cfg, m, None, Stager(m, stages), stages)
        a, w, outs = _array_ports(cfg, m, arr)
        rng = np.random.default_rng(stages)
        cases = [(rng.integers(-128, 128, (B, BI)), rng.integers(-128, 128, (BO, BI))) for _ in range(10)]

        async def tb(ctx, cases=cases, a=a, w=w, outs=outs, stages=stages):
            got = []
            for t in range(len(cases) + stages):
                if t < len(cases):
                    av, wv = cases[t]
                    _set_operands(ctx, a, w, av, wv)
                if t >= stages:
                    got.append([ctx.get(o) for o in outs])
                await ctx.tick()
            for (av, wv), g in zip(cases, got):
                assert g == [int(v) for v in (av.astype(np.int64) @ wv.astype(np.int64).T).reshape(-1)]

        assert arr.stages == stages
        _run(m, tb)


def test_stager_registers_load_only_while_their_level_is_enabled():
    """A Stager with an enable: each boundary's register loads its input in the cycles the level it leaves is
    enabled and holds otherwise (a clock enable), against a hand-written model of two enabled registers."""
    from amaranth.hdl import Module, Signal

    from hw.intrinsic import Stager

    m = Module()
    en = [Signal(name=f"en{k}") for k in range(2)]
    x = Signal(8)
    st = Stager(m, 2, lambda lv: en[lv])
    r1 = st.stage(x)
    r2 = st.stage(r1)
    rng = np.random.default_rng(3)
    stim = [(int(rng.integers(256)), int(rng.random() < 0.5), int(rng.random() < 0.5))
            for _ in range(60)]

    async def tb(ctx):
        want1 = want2 = 0
        for xv, e0, e1 in stim:
            assert (ctx.get(r1), ctx.get(r2)) == (want1, want2)
            ctx.set(x, xv)
            ctx.set(en[0], e0)
            ctx.set(en[1], e1)
            await ctx.tick()
            want1, want2 = (xv if e0 else want1), (want1 if e1 else want2)

    _run(m, tb)


def test_enabled_gemm_array_with_bubbles_matches_numpy():
    """The staged ``GemmArray`` with its stage enables (a micro-op's valid bit delayed one cycle per level, as the
    compute unit drives them): fed products with random gaps between them, each valid output equals numpy's
    ``A @ W.T`` (registers that hold through the gaps must not leak into the next micro-op)."""
    from amaranth.hdl import Module, Signal

    from hw.intrinsic import GemmArray, Stager

    cfg = make_config("tiny", log_block_in=3)
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    for stages in (2, 3):
        m = Module()
        valid = [Signal(name=f"v{k}") for k in range(stages + 1)]
        m.d.sync += [valid[k + 1].eq(valid[k]) for k in range(stages)]
        arr = GemmArray(cfg, m, valid[0], Stager(m, stages, lambda lv, valid=valid: valid[lv]), stages)
        a, w, outs = _array_ports(cfg, m, arr)
        rng = np.random.default_rng(10 + stages)
        feed = [(rng.random() < 0.5, rng.integers(-128, 128, (B, BI)), rng.integers(-128, 128, (BO, BI)))
                for _ in range(40)]
        seen = {"valid": 0}

        async def tb(ctx, feed=feed, a=a, w=w, outs=outs, stages=stages, valid=valid):
            for t in range(len(feed) + stages):
                if t < len(feed):
                    v, av, wv = feed[t]
                    ctx.set(valid[0], int(v))
                    _set_operands(ctx, a, w, av, wv)
                else:
                    ctx.set(valid[0], 0)
                if t >= stages and feed[t - stages][0]:
                    _, av, wv = feed[t - stages]
                    assert ctx.get(valid[stages]) == 1
                    want = (av.astype(np.int64) @ wv.astype(np.int64).T).reshape(-1)
                    assert [ctx.get(o) for o in outs] == [int(x) for x in want]
                    seen["valid"] += 1
                await ctx.tick()

        _run(m, tb)
        assert seen["valid"] > 10


@pytest.mark.parametrize("depth", [1, 2, 4, 5])
def test_command_queue_is_cycle_for_cycle_a_sync_fifo(depth):
    """CommandQueue (head in a register) against amaranth's SyncFIFO of the same depth, random writes/reads:
    the same r_rdy / r_data / w_rdy / level every cycle, so the timing contract cannot tell them apart."""
    from amaranth.hdl import Module
    from amaranth.lib.fifo import SyncFIFO

    from hw.cmd_queue import CommandQueue

    m = Module()
    m.submodules.q = q = CommandQueue(16, depth)
    m.submodules.ref = ref = SyncFIFO(width=16, depth=depth)
    rng = np.random.default_rng(depth)
    seen = {"reads": 0}

    async def tb(ctx):
        for cyc in range(400):
            w, r, d = int(rng.random() < 0.55), int(rng.random() < (0.3 if cyc % 100 < 50 else 0.7)), int(rng.integers(1 << 16))
            for f in (q, ref):
                ctx.set(f.w_en, w)
                ctx.set(f.r_en, r)
                ctx.set(f.w_data, d)
            assert ctx.get(q.r_rdy) == ctx.get(ref.r_rdy) and ctx.get(q.w_rdy) == ctx.get(ref.w_rdy), cyc
            assert ctx.get(q.level) == ctx.get(ref.level), cyc
            if ctx.get(ref.r_rdy):
                assert ctx.get(q.r_data) == ctx.get(ref.r_data), cyc
                seen["reads"] += r
            await ctx.tick()

    _run(m, tb)
    assert seen["reads"] > 50
