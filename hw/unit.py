"""The front end every execution unit shares: take from the command queue, wait for tokens, start.

``take_j = max(d_j + 1, e_{j-1})``: the unit takes in any cycle it is IDLE and its queue is
non-empty; ``s_j`` is the first cycle >= take at which every popped token queue is non-empty
(possibly the take cycle itself). Token pushes are asserted by the unit in its last cycle.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value

from hw.common import field
from isa.config import HwConfig

IDLE, WAIT, REQ, DMA = 0, 1, 2, 3


def frontend(m: Module, cfg: HwConfig, unit, state: Signal, insn: Signal,
             pops: list[tuple[str, Value, Value]]) -> tuple[Signal, Signal]:
    """Build take/wait/start; ``pops`` lists ``(flag, available, pop_out)``. Returns ``(cur, start)``."""
    cur = Signal(128)
    m.d.comb += cur.eq(Mux(state == IDLE, unit.q_data, insn))
    take = (state == IDLE) & unit.q_rdy
    m.d.comb += unit.q_en.eq(take)
    with m.If(state == IDLE):  # tracks the queue head while idle: holds the taken instruction from the take on
        m.d.sync += insn.eq(unit.q_data)
    with m.If(take):
        m.d.sync += state.eq(WAIT)
    ok: Value = Value.cast(1)
    for flag, avail, _ in pops:
        ok = ok & (~field(cur, cfg, "FINISH", flag) | avail)
    start = Signal()
    m.d.comb += start.eq((take | (state == WAIT)) & ok)
    for flag, _, out in pops:
        m.d.comb += out.eq(start & field(cur, cfg, "FINISH", flag))
    return cur, start


def push(m: Module, cfg: HwConfig, cur: Value, last: Value, pushes: list[tuple[str, Value]]) -> None:
    """Assert each pushed token in the instruction's last cycle (visible to the other unit at ``e``)."""
    for flag, out in pushes:
        m.d.comb += out.eq(last & field(cur, cfg, "FINISH", flag))


def dma_control(m: Module, *, start: Value, nop: Value, is_dma: Value, state: Signal, req: Value, grant: Value,
                port_last: Value, last: Signal) -> None:
    """The LOAD/STORE end of a unit: a NOP ends in its start cycle (``e = s + 1``); a DMA requests the
    DRAM port from its start cycle (a grant may come at once) and ends in the port's last cycle."""
    with m.If(start):
        with m.If(nop):
            m.d.comb += last.eq(1)
            m.d.sync += state.eq(IDLE)
        with m.Elif(is_dma):
            m.d.comb += req.eq(1)
            m.d.sync += state.eq(REQ)
            with m.If(grant):
                m.d.sync += state.eq(DMA)
    with m.If(state == REQ):
        m.d.comb += req.eq(1)
        with m.If(grant):
            m.d.sync += state.eq(DMA)
    with m.If(state == DMA):
        with m.If(port_last):
            m.d.comb += last.eq(1)
            m.d.sync += state.eq(IDLE)
