"""The load unit: LOAD.INP (2D DMA, padding with the instruction's pad value) / LOAD.WGT (zero padding)."""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.burst import ADDR_BITS
from hw.common import clog2, epb, field
from hw.dma_read import DmaRead
from hw.unit import IDLE, REQ, dma_control, frontend, push
from isa.config import HwConfig
from isa.instructions import MemType

DMA_FIELDS = ("sram_base", "dram_base", "y_size", "x_size", "x_stride", "y_pad0", "y_pad1", "x_pad0", "x_pad1")


def mem_ports(cfg: HwConfig, mem: str) -> dict:
    """Signature members of a vector write port into scratchpad ``mem``."""
    eb = cfg.elem_bytes(mem)
    k = epb(cfg, eb)
    return {f"{mem}_w_addr": Out(clog2(cfg.depth(mem))), f"{mem}_w_data": Out(k * eb * 8),
            f"{mem}_w_count": Out(range(k + 1)), f"{mem}_w_en": Out(1)}


def read_port(cfg: HwConfig, mem: str, name: str | None = None) -> dict:
    """Signature members of a vector read port of scratchpad ``mem`` (named ``name``, default ``mem``)."""
    eb = cfg.elem_bytes(mem)
    k = epb(cfg, eb)
    name = name or mem
    return {f"{name}_r_addr": Out(clog2(cfg.depth(mem))), f"{name}_r_data": In(k * eb * 8)}


def read_master(cfg: HwConfig) -> dict:
    return {"ar_valid": Out(1), "ar_ready": In(1), "ar_addr": Out(ADDR_BITS), "ar_len": Out(8),
            "r_valid": In(1), "r_data": In(cfg.bus_width)}


def connect_engine(m: Module, cfg: HwConfig, eng: DmaRead, cur, start, unit, mem: str | None) -> None:
    """Drive a DmaRead's instruction fields from ``cur`` and its write port onto ``unit``'s ``mem`` port
    (``mem=None``: the caller routes the write port itself)."""
    for f in DMA_FIELDS + (("pad_value",) if getattr(eng, "pad_lane_bits", 0) else ()):
        m.d.comb += getattr(eng, f).eq(field(cur, cfg, "MEM", f))
    m.d.comb += [eng.start.eq(start), eng.ar_ready.eq(unit.ar_ready), eng.r_valid.eq(unit.r_valid),
                 eng.r_data.eq(unit.r_data)]
    if mem is not None:
        for p in ("w_addr", "w_data", "w_count", "w_en"):
            m.d.comb += getattr(unit, f"{mem}_{p}").eq(getattr(eng, p))


def mux_read_masters(m: Module, unit, a: DmaRead, b: DmaRead) -> None:
    """``unit``'s AR channel from two engines (at most one is active) and its ``port_last``."""
    m.d.comb += [unit.ar_valid.eq(a.ar_valid | b.ar_valid), unit.ar_addr.eq(Mux(a.ar_valid, a.ar_addr, b.ar_addr)),
                 unit.ar_len.eq(Mux(a.ar_valid, a.ar_len, b.ar_len)), unit.port_last.eq(a.last | b.last)]


class LoadUnit(wiring.Component):
    """Executes LOAD.INP/LOAD.WGT; pops compute->load (pop_next), pushes load->compute (push_next)."""

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        super().__init__({
            "q_data": In(128), "q_rdy": In(1), "q_en": Out(1),
            "next_avail": In(1), "pop_next": Out(1), "push_next": Out(1),
            "req": Out(1), "grant": In(1), "port_last": Out(1), "idle": Out(1),
            **read_master(cfg), **mem_ports(cfg, "inp"), **mem_ports(cfg, "wgt"),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        state, insn = Signal(range(4)), Signal(128)
        cur, start = frontend(m, cfg, self, state, insn, [("pop_next", self.next_avail, self.pop_next)])
        mem = field(cur, cfg, "MEM", "mem")
        nop = (field(cur, cfg, "MEM", "y_size") == 0) | (field(cur, cfg, "MEM", "x_size") == 0)
        engines = {}
        for name, mt in (("inp", MemType.INP), ("wgt", MemType.WGT)):
            eng = DmaRead(cfg, cfg.elem_bytes(name), clog2(cfg.depth(name)),
                          pad_lane_bits=cfg.inp_width if mt == MemType.INP else 0)
            m.submodules[f"dma_{name}"] = eng
            requesting = (start & ~nop) | (state == REQ)
            connect_engine(m, cfg, eng, cur, requesting & self.grant & (mem == mt), self, name)
            engines[name] = eng
        mux_read_masters(m, self, engines["inp"], engines["wgt"])
        last = Signal()
        dma_control(m, start=start, nop=nop, is_dma=1, state=state, req=self.req, grant=self.grant,
                    port_last=self.port_last, last=last)
        push(m, cfg, cur, last, [("push_next", self.push_next)])
        m.d.comb += self.idle.eq(state == IDLE)
        return m
