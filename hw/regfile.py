"""The AXI4-Lite control register file; the register map is :mod:`isa.registers` (CTRL, INSN_ADDR,
INSN_COUNT, CYCLES, CYCLES_NOW and the read-only config SIGNATURE)."""
from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.registers import ADDR_BITS, CTRL, CYCLES, CYCLES_NOW, INSN_ADDR, INSN_COUNT, SIGNATURE

__all__ = ["RegFile", "ADDR_BITS", "CTRL", "CYCLES", "CYCLES_NOW", "INSN_ADDR", "INSN_COUNT", "SIGNATURE"]


class RegFile(wiring.Component):
    """AXI4-Lite slave (``s_axil_*``) driving ``start``/``insn_addr``/``insn_count`` and reading status.

    ``signature`` is the constant read at SIGNATURE (:func:`isa.signature.config_signature`)."""

    def __init__(self, signature: int = 0):
        self.sig_value = signature & 0xFFFF_FFFF
        super().__init__({
            "s_axil_awaddr": In(ADDR_BITS), "s_axil_awvalid": In(1), "s_axil_awready": Out(1),
            "s_axil_wdata": In(32), "s_axil_wstrb": In(4), "s_axil_wvalid": In(1), "s_axil_wready": Out(1),
            "s_axil_bresp": Out(2), "s_axil_bvalid": Out(1), "s_axil_bready": In(1),
            "s_axil_araddr": In(ADDR_BITS), "s_axil_arvalid": In(1), "s_axil_arready": Out(1),
            "s_axil_rdata": Out(32), "s_axil_rresp": Out(2), "s_axil_rvalid": Out(1), "s_axil_rready": In(1),
            "start": Out(1), "insn_addr": Out(32), "insn_count": Out(32),
            "running": In(1), "done": In(1), "cycles": In(32), "cycles_now": In(32),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        wr = self.s_axil_awvalid & self.s_axil_wvalid & ~self.s_axil_bvalid
        m.d.comb += [self.s_axil_awready.eq(wr), self.s_axil_wready.eq(wr)]
        m.d.sync += self.start.eq(0)
        with m.If(wr):
            m.d.sync += self.s_axil_bvalid.eq(1)
            with m.Switch(self.s_axil_awaddr):
                with m.Case(CTRL):
                    m.d.sync += self.start.eq(self.s_axil_wdata[0])
                with m.Case(INSN_ADDR):
                    m.d.sync += self.insn_addr.eq(self.s_axil_wdata)
                with m.Case(INSN_COUNT):
                    m.d.sync += self.insn_count.eq(self.s_axil_wdata)
        with m.If(self.s_axil_bvalid & self.s_axil_bready):
            m.d.sync += self.s_axil_bvalid.eq(0)
        rd = self.s_axil_arvalid & ~self.s_axil_rvalid
        m.d.comb += self.s_axil_arready.eq(rd)
        with m.If(rd):
            m.d.sync += self.s_axil_rvalid.eq(1)
            with m.Switch(self.s_axil_araddr):
                with m.Case(CTRL):
                    m.d.sync += self.s_axil_rdata.eq(self.running | (self.done << 1))
                with m.Case(INSN_ADDR):
                    m.d.sync += self.s_axil_rdata.eq(self.insn_addr)
                with m.Case(INSN_COUNT):
                    m.d.sync += self.s_axil_rdata.eq(self.insn_count)
                with m.Case(CYCLES):
                    m.d.sync += self.s_axil_rdata.eq(self.cycles)
                with m.Case(CYCLES_NOW):
                    m.d.sync += self.s_axil_rdata.eq(self.cycles_now)
                with m.Case(SIGNATURE):
                    m.d.sync += self.s_axil_rdata.eq(self.sig_value)
                with m.Default():
                    m.d.sync += self.s_axil_rdata.eq(0)
        with m.If(self.s_axil_rvalid & self.s_axil_rready):
            m.d.sync += self.s_axil_rvalid.eq(0)
        return m
