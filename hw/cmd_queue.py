"""A unit's command queue: a first-word-fall-through FIFO whose head is a register.

Cycle for cycle the same queue as :class:`amaranth.lib.fifo.SyncFIFO` of the same depth (an entry written in
cycle ``c`` is readable from ``c + 1``; ``w_rdy`` is ``level != depth``, ``r_rdy`` is ``level != 0``), so the
timing contract does not see it. The difference is where the head comes from: a register instead of the
storage's asynchronous read (LUT RAM and its read multiplexer on an FPGA), so a unit decodes its next instruction
from flip-flops (the decode feeds the unit's start, the DMA engines' fields and the DRAM port arbitration).
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out


class CommandQueue(wiring.Component):
    """``depth`` entries of ``width`` bits: ``w_data``/``w_en``/``w_rdy`` in, ``r_data``/``r_en``/``r_rdy`` out."""

    def __init__(self, width: int, depth: int):
        if depth < 1:
            raise ValueError(f"a command queue needs depth >= 1, not {depth}")
        self.width, self.depth = width, depth
        super().__init__({"w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
                          "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
                          "level": Out(range(depth + 1))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.body = body = SyncFIFO(width=self.width, depth=self.depth - 1)  # the entries behind the head
        head, head_v = Signal(self.width), Signal()
        m.d.comb += [self.r_data.eq(head), self.r_rdy.eq(head_v), self.w_rdy.eq(self.level != self.depth)]
        do_read = self.r_en & head_v
        do_write = self.w_en & self.w_rdy
        refill = ~head_v | do_read  # the head register takes the next entry this cycle
        m.d.comb += body.w_data.eq(self.w_data)
        with m.If(refill):
            with m.If(body.r_rdy):  # the oldest entry behind the head moves up; a write goes behind it
                m.d.comb += [body.r_en.eq(1), body.w_en.eq(do_write)]
                m.d.sync += [head.eq(body.r_data), head_v.eq(1)]
            with m.Else():  # nothing behind: a write goes straight into the head
                m.d.sync += [head.eq(self.w_data), head_v.eq(do_write)]
        with m.Else():
            m.d.comb += body.w_en.eq(do_write)
        with m.If(do_write & ~do_read):
            m.d.sync += self.level.eq(self.level + 1)
        with m.If(do_read & ~do_write):
            m.d.sync += self.level.eq(self.level - 1)
        return m
