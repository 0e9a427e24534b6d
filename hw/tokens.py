"""A dependency-token queue: a counter of up to ``depth`` tokens (push in the pusher's last cycle, pop at start)."""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class TokenQueue(wiring.Component):
    """``avail`` when at least one token is queued; ``clear`` empties it (at program start)."""

    def __init__(self, depth: int):
        self.depth = depth
        super().__init__({"push": In(1), "pop": In(1), "clear": In(1), "avail": Out(1),
                          "count": Out(range(depth + 1))})

    def elaborate(self, platform) -> Module:
        m = Module()
        nxt = Signal.like(self.count)
        m.d.comb += nxt.eq(self.count)
        with m.If(self.clear):
            m.d.comb += nxt.eq(0)
        with m.Elif(self.push & ~self.pop):
            m.d.comb += nxt.eq(Mux(self.count == self.depth, self.count, self.count + 1))
        with m.Elif(self.pop & ~self.push):
            m.d.comb += nxt.eq(self.count - 1)
        # ``avail`` is a register (``count != 0`` one cycle early): it feeds every unit's start decision
        avail = Signal()
        m.d.sync += [self.count.eq(nxt), avail.eq(nxt != 0)]
        m.d.comb += self.avail.eq(avail)
        return m
