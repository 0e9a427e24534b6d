"""The store unit: STORE from the OUT scratchpad to DRAM."""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.burst import ADDR_BITS
from hw.common import clog2, field
from hw.load import read_port
from hw.dma_write import DmaWrite
from hw.unit import IDLE, REQ, dma_control, frontend, push
from isa.config import HwConfig


class StoreUnit(wiring.Component):
    """Executes STORE; pops compute->store (pop_prev), pushes store->compute (push_prev)."""

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        super().__init__({
            "q_data": In(128), "q_rdy": In(1), "q_en": Out(1),
            "prev_avail": In(1), "pop_prev": Out(1), "push_prev": Out(1),
            "req": Out(1), "grant": In(1), "port_last": Out(1), "idle": Out(1),
            "aw_valid": Out(1), "aw_ready": In(1), "aw_addr": Out(ADDR_BITS), "aw_len": Out(8),
            "w_valid": Out(1), "w_ready": In(1), "w_data": Out(cfg.bus_width), "w_strb": Out(cfg.bus_bytes),
            "w_last": Out(1), "b_valid": In(1),
            **read_port(cfg, "out"),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        state, insn = Signal(range(4)), Signal(128)
        cur, start = frontend(m, cfg, self, state, insn, [("pop_prev", self.prev_avail, self.pop_prev)])
        nop = (field(cur, cfg, "MEM", "y_size") == 0) | (field(cur, cfg, "MEM", "x_size") == 0)
        m.submodules.dma = dma = DmaWrite(cfg, cfg.out_elem_bytes, clog2(cfg.out_depth))
        requesting = (start & ~nop) | (state == REQ)
        m.d.comb += dma.start.eq(requesting & self.grant)
        for f in ("sram_base", "dram_base", "y_size", "x_size", "x_stride"):
            m.d.comb += getattr(dma, f).eq(field(cur, cfg, "MEM", f))
        for p in ("aw_valid", "aw_addr", "aw_len", "w_valid", "w_data", "w_strb", "w_last"):
            m.d.comb += getattr(self, p).eq(getattr(dma, p))
        m.d.comb += [dma.aw_ready.eq(self.aw_ready), dma.w_ready.eq(self.w_ready), dma.b_valid.eq(self.b_valid),
                     self.out_r_addr.eq(dma.r_addr), dma.r_data.eq(self.out_r_data),
                     self.port_last.eq(dma.last)]
        last = Signal()
        dma_control(m, start=start, nop=nop, is_dma=1, state=state, req=self.req, grant=self.grant,
                    port_last=dma.last, last=last)
        push(m, cfg, cur, last, [("push_prev", self.push_prev)])
        m.d.comb += self.idle.eq(state == IDLE)
        return m
