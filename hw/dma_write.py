"""2D write DMA from the OUT scratchpad to DRAM (STORE).

Started in the grant cycle ``g``: AW bursts go out from ``g``, the scratchpad is read from
``g`` into a small FIFO that feeds the W channel; ``last`` is high in the cycle of the last
B response (``e - 1``). The DRAM model answers a burst's B after ``L`` + its beats, so
the W data must arrive in time: that needs ``dram_latency >= 3``.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hw.burst import ADDR_BITS, BurstIssuer
from hw.common import bpe as _bpe, epb as _epb
from hw.dma_read import dma_members, drive_bursts
from isa.config import HwConfig

FIFO_DEPTH = 4


class DmaWrite(wiring.Component):
    """Stores ``y_size`` rows of ``x_size`` elements from ``sram_base`` (contiguous) to DRAM rows ``x_stride`` apart."""

    def __init__(self, cfg: HwConfig, elem_bytes: int, abits: int):
        self.cfg, self.eb, self.abits = cfg, elem_bytes, abits
        self.k = _epb(cfg, elem_bytes)
        bb = cfg.bus_bytes
        super().__init__(dma_members(
            abits, aw_valid=Out(1), aw_ready=In(1), aw_addr=Out(ADDR_BITS), aw_len=Out(8),
            w_valid=Out(1), w_ready=In(1), w_data=Out(bb * 8), w_strb=Out(bb), w_last=Out(1), b_valid=In(1),
            r_addr=Out(abits), r_data=In(self.k * elem_bytes * 8)))

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, eb, k = self.cfg, self.eb, self.k
        bb = cfg.bus_bytes
        nb = _bpe(cfg, eb)

        # ---- AW bursts, their lengths queued for WLAST
        m.submodules.bursts = bi = BurstIssuer(bb)
        m.submodules.lens = lens = SyncFIFO(width=8, depth=FIFO_DEPTH)
        drive_bursts(m, cfg, self, bi)
        m.d.comb += [self.aw_valid.eq(bi.valid & lens.w_rdy), bi.ready.eq(self.aw_ready & lens.w_rdy),
                     self.aw_addr.eq(bi.addr), self.aw_len.eq(bi.len),
                     lens.w_data.eq(bi.len), lens.w_en.eq(bi.valid & self.aw_ready & lens.w_rdy)]

        # ---- scratchpad reader -> data FIFO
        ent_bits = k * eb * 8
        cnt_bits = max(1, (k).bit_length())
        m.submodules.data = fifo = SyncFIFO(width=ent_bits + cnt_bits, depth=FIFO_DEPTH)
        active = Signal()
        ra_r, r_r, x_r, y_r, xs_r = Signal(32), Signal(16), Signal(16), Signal(16), Signal(16)
        # a start comes only while the reader is not ``active``: select (and track) the inputs by that flip-flop,
        # not by ``start`` (a deep signal: queue head, tokens, arbiter)
        ra = Mux(active, ra_r, self.sram_base)
        rr = Mux(active, r_r, 0)
        xx = Mux(active, x_r, 0)
        ys = Mux(active, y_r, self.y_size)
        xs = Mux(active, xs_r, self.x_size)
        inflight = Signal()
        cnt_q = Signal(cnt_bits)
        go = (self.start | active) & (fifo.level + inflight < FIFO_DEPTH)
        m.d.comb += self.r_addr.eq(ra)
        m.d.sync += inflight.eq(go)
        m.d.comb += [fifo.w_en.eq(inflight), fifo.w_data.eq(Cat(self.r_data, cnt_q))]
        with m.If(~active):
            m.d.sync += [ra_r.eq(self.sram_base), r_r.eq(0), x_r.eq(0), y_r.eq(ys), xs_r.eq(xs)]
        with m.If(self.start):
            m.d.sync += active.eq(1)
        with m.If(go):
            if k == 1:
                n = 1
                row_end = xx + 1 == xs
                m.d.sync += cnt_q.eq(1)
            else:
                left = xs - xx
                n = Mux(left < k, left, k)
                row_end = left <= k
                m.d.sync += cnt_q.eq(n)
            m.d.sync += [ra_r.eq(ra + n), x_r.eq(xx + n), r_r.eq(rr)]
            with m.If(row_end):
                m.d.sync += [x_r.eq(0), r_r.eq(rr + 1)]
                with m.If(rr + 1 == ys):
                    m.d.sync += active.eq(0)

        # ---- W channel
        wb = Signal(range(nb)) if nb > 1 else None
        bc = Signal(8)
        entry = fifo.r_data[:ent_bits]
        count = fifo.r_data[ent_bits:]
        wvalid = fifo.r_rdy & lens.r_rdy
        wlast = bc == lens.r_data
        m.d.comb += [self.w_valid.eq(wvalid), self.w_last.eq(wlast)]
        if k == 1:
            m.d.comb += [self.w_data.eq(entry.word_select(wb, bb * 8) if nb > 1 else entry),
                         self.w_strb.eq(Const((1 << bb) - 1, bb))]
        else:
            strb = Mux(count >= k, (1 << bb) - 1, (Const(1, bb + 1) << (count * eb)) - 1)
            m.d.comb += [self.w_data.eq(entry), self.w_strb.eq(strb)]
        with m.If(wvalid & self.w_ready):
            m.d.sync += bc.eq(bc + 1)
            with m.If(wlast):
                m.d.sync += bc.eq(0)
                m.d.comb += lens.r_en.eq(1)
            if nb > 1:
                m.d.sync += wb.eq(wb + 1)
                with m.If(wb == nb - 1):
                    m.d.sync += wb.eq(0)
                    m.d.comb += fifo.r_en.eq(1)
            else:
                m.d.comb += fifo.r_en.eq(1)

        # ---- B responses
        # b_n1: the responses received + 1 (a register, so no adder before the compare that ends the transfer)
        aw_n, b_n1 = Signal(24), Signal(24, init=1)
        running = Signal()
        with m.If(~running):
            m.d.sync += [aw_n.eq(0), b_n1.eq(1)]
        with m.If(self.start):
            m.d.sync += running.eq(1)
        aw_fire = self.aw_valid & self.aw_ready  # only in the start cycle or while running
        with m.If(aw_fire):
            m.d.sync += aw_n.eq(Mux(running, aw_n, 0) + 1)
        with m.If(self.b_valid & running):
            m.d.sync += b_n1.eq(b_n1 + 1)
            with m.If(~bi.busy & (b_n1 == aw_n)):
                m.d.comb += self.last.eq(1)
                m.d.sync += running.eq(0)
        m.d.comb += self.busy.eq(running)
        return m
