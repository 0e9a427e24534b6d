"""Splits a 2D DMA (``rows`` rows of ``row_beats`` beats, ``stride`` bytes apart) into AXI4 bursts.

A burst never crosses a 4 KiB boundary and has at most 256 beats. The first burst is
offered in the ``start`` cycle itself (combinationally), then at most one per cycle.
"""
from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.common import log2

ADDR_BITS = 32
BEAT_BITS = 24


class BurstIssuer(wiring.Component):
    """``valid``/``ready``/``addr``/``len`` (AXI len = beats - 1); ``busy`` while bursts remain after this cycle."""

    def __init__(self, bus_bytes: int):
        self.bus_bytes = bus_bytes
        super().__init__({
            "start": In(1), "base": In(ADDR_BITS), "stride": In(ADDR_BITS), "rows": In(16),
            "row_beats": In(BEAT_BITS),
            "valid": Out(1), "ready": In(1), "addr": Out(ADDR_BITS), "len": Out(8), "beats": Out(9),
            "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        lb = log2(self.bus_bytes)
        busy = Signal()
        addr_r, row_r = Signal(ADDR_BITS), Signal(ADDR_BITS)
        rem_r, row_beats_r = Signal(BEAT_BITS), Signal(BEAT_BITS)
        rows_r, stride_r = Signal(16), Signal(ADDR_BITS)

        # A start comes only while no bursts remain (``~busy``): the inputs are selected (and tracked into the
        # registers) by ``busy``, a flip-flop, not by ``start`` (a deep signal: queue head, tokens, arbiter), which
        # then drives only ``valid`` and ``busy``.
        addr = Mux(busy, addr_r, self.base)
        row = Mux(busy, row_r, self.base)
        rem = Mux(busy, rem_r, self.row_beats)
        rows = Mux(busy, rows_r, self.rows)
        stride = Mux(busy, stride_r, self.stride)
        rbeats = Mux(busy, row_beats_r, self.row_beats)
        # n = min(rem, to_4k, 256), its comparisons side by side instead of in a chain (the Xilinx estimate's
        # critical path was the chain: 12-bit subtract -> compare -> mux -> 24-bit compare -> mux -> subtract -> == 0):
        # to_4k < 256 compares the address with a constant; rem <= lim also says the row ends with this burst
        to_4k = Signal(range(4096 // self.bus_bytes + 1))
        m.d.comb += to_4k.eq((4096 - addr[:12]) >> lb)
        near_4k = addr[:12] > 4096 - (256 << lb) if (256 << lb) < 4096 else Const(1)  # to_4k < 256 (<= 256 if 1)
        lim = Signal(9)
        m.d.comb += lim.eq(Mux(near_4k, to_4k, 256))
        row_end = Signal()  # the row's last burst: rem <= lim, so n = rem and nothing is left
        m.d.comb += row_end.eq(rem <= lim)
        n = Signal(9)
        m.d.comb += n.eq(Mux(row_end, rem, lim))
        # AXI len = n - 1 without an adder after n's mux (the start cycle's burst goes out combinationally, so this
        # is on the path from the instruction to the AR port): rem - 1, or lim - 1, where to_4k - 1 is the floor of
        # (4096 - 2**lb - addr) / 2**lb (the same floor division, a cycle of carry chain shorter)
        to_4k_m1 = (Const(4096 - (1 << lb), 14) - addr[:12])[:14].as_signed() >> lb
        len_m1 = Signal(8)
        m.d.comb += len_m1.eq(Mux(row_end, rem - 1, Mux(near_4k, to_4k_m1, 255)))
        valid = self.start | busy
        m.d.comb += [self.valid.eq(valid), self.addr.eq(addr), self.len.eq(len_m1), self.beats.eq(n),
                     self.busy.eq(busy)]

        with m.If(~busy):
            m.d.sync += [stride_r.eq(self.stride), row_beats_r.eq(self.row_beats), addr_r.eq(self.base),
                         row_r.eq(self.base), rem_r.eq(self.row_beats), rows_r.eq(self.rows)]
        with m.If(self.start):
            m.d.sync += busy.eq(1)
        with m.If(valid & self.ready):
            with m.If(row_end):
                nrow = row + stride
                m.d.sync += [row_r.eq(nrow), addr_r.eq(nrow), rem_r.eq(rbeats), rows_r.eq(rows - 1)]
                m.d.sync += busy.eq(rows != 1)
            with m.Else():  # n = lim here: the next address and the beats left do not wait for n's mux
                m.d.sync += [addr_r.eq(addr + (lim << lb)), rem_r.eq(rem - lim), rows_r.eq(rows), busy.eq(1)]
        return m
