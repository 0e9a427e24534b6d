"""The DRAM port arbiter: fixed priority store > compute > load > fetch, one transaction at a time.

In a cycle in which the port is free the highest-priority request is granted
combinationally; the owner holds the port until it asserts ``last`` (its final cycle),
so the port is free again in the next cycle.
"""
from __future__ import annotations

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.timing import PORT_PRIORITY


class Arbiter(wiring.Component):
    """Per requester ``<name>_req``/``<name>_last`` in, ``<name>_grant``/``<name>_own`` out (names: isa.timing.PORT_PRIORITY)."""

    def __init__(self):
        members = {"free": Out(1)}
        for n in PORT_PRIORITY:
            members.update({f"{n}_req": In(1), f"{n}_last": In(1), f"{n}_grant": Out(1), f"{n}_own": Out(1)})
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        owner = Signal(range(len(PORT_PRIORITY) + 1))  # 0 = free, i + 1 = PORT_PRIORITY[i]
        m.d.comb += self.free.eq(owner == 0)
        higher = Const(0, 1)
        for i, n in enumerate(PORT_PRIORITY):
            req = getattr(self, f"{n}_req")
            grant = getattr(self, f"{n}_grant")
            m.d.comb += [grant.eq(self.free & req & ~higher), getattr(self, f"{n}_own").eq(owner == i + 1)]
            with m.If(grant):
                m.d.sync += owner.eq(i + 1)
            with m.If((owner == i + 1) & getattr(self, f"{n}_last")):
                m.d.sync += owner.eq(0)
            higher = higher | req
        return m
