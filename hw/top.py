"""The accelerator top level: fetch, load, compute, store, queues, tokens, scratchpads, DRAM port, registers.

Ports: ``m_axi_*`` (AXI4 master to DRAM, one shared port), ``s_axil_*`` (AXI4-Lite control,
see :mod:`hw.regfile`) and ``irq`` (high while the last run is done).
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.arbiter import Arbiter
from hw.cmd_queue import CommandQueue
from hw.common import epb, log2
from hw.compute import ComputeUnit
from hw.fetch import FetchUnit
from hw.load import LoadUnit
from hw.regfile import ADDR_BITS as REG_BITS, RegFile
from hw.scratchpad import Scratchpad
from hw.store import StoreUnit
from hw.tokens import TokenQueue
from isa.config import HwConfig
from isa.signature import config_signature


def axi_master(cfg: HwConfig) -> dict:
    bw, bb = cfg.bus_width, cfg.bus_bytes
    return {
        "m_axi_araddr": Out(32), "m_axi_arlen": Out(8), "m_axi_arsize": Out(3), "m_axi_arburst": Out(2),
        "m_axi_arvalid": Out(1), "m_axi_arready": In(1),
        "m_axi_rdata": In(bw), "m_axi_rresp": In(2), "m_axi_rlast": In(1), "m_axi_rvalid": In(1),
        "m_axi_rready": Out(1),
        "m_axi_awaddr": Out(32), "m_axi_awlen": Out(8), "m_axi_awsize": Out(3), "m_axi_awburst": Out(2),
        "m_axi_awvalid": Out(1), "m_axi_awready": In(1),
        "m_axi_wdata": Out(bw), "m_axi_wstrb": Out(bb), "m_axi_wlast": Out(1), "m_axi_wvalid": Out(1),
        "m_axi_wready": In(1),
        "m_axi_bresp": In(2), "m_axi_bvalid": In(1), "m_axi_bready": Out(1),
    }


def axil_slave() -> dict:
    return {
        "s_axil_awaddr": In(REG_BITS), "s_axil_awvalid": In(1), "s_axil_awready": Out(1),
        "s_axil_wdata": In(32), "s_axil_wstrb": In(4), "s_axil_wvalid": In(1), "s_axil_wready": Out(1),
        "s_axil_bresp": Out(2), "s_axil_bvalid": Out(1), "s_axil_bready": In(1),
        "s_axil_araddr": In(REG_BITS), "s_axil_arvalid": In(1), "s_axil_arready": Out(1),
        "s_axil_rdata": Out(32), "s_axil_rresp": Out(2), "s_axil_rvalid": Out(1), "s_axil_rready": In(1),
    }


def scratchpad(cfg: HwConfig, mem: str, n_read: int) -> Scratchpad:
    eb = cfg.elem_bytes(mem)
    return Scratchpad(cfg.depth(mem), eb * 8, epb(cfg, eb), n_read)


class Accelerator(wiring.Component):
    """The whole accelerator for one :class:`HwConfig`."""

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        super().__init__({**axi_master(cfg), **axil_slave(), "irq": Out(1)})

    def elaborate(self, platform) -> Module:  # noqa: C901 - wiring only
        m = Module()
        cfg = self.cfg
        m.submodules.regs = regs = RegFile(config_signature(cfg))
        m.submodules.fetch = fetch = FetchUnit(cfg)
        m.submodules.load = load = LoadUnit(cfg)
        m.submodules.compute = comp = ComputeUnit(cfg)
        m.submodules.store = store = StoreUnit(cfg)
        m.submodules.arbiter = arb = Arbiter()
        for name, member in axil_slave().items():
            port, inner = getattr(self, name), getattr(regs, name)
            m.d.comb += port.eq(inner) if member.flow == wiring.Out else inner.eq(port)

        # ---- run control and the cycle counter
        running, done, finished = Signal(), Signal(), Signal()
        counter, cycles = Signal(32), Signal(32)
        start = regs.start
        m.d.comb += [fetch.start.eq(start), fetch.insn_addr.eq(regs.insn_addr), fetch.insn_count.eq(regs.insn_count),
                     # CTRL reads "running, not done" already in the start cycle (done drops one cycle later)
                     regs.running.eq(running | start), regs.done.eq(done & ~start), regs.cycles.eq(cycles),
                     regs.cycles_now.eq(counter), self.irq.eq(done)]

        # ---- command queues
        queues = {}
        for u, unit in (("load", load), ("compute", comp), ("store", store)):
            q = CommandQueue(128, cfg.cmd_queue_depth)
            m.submodules[f"{u}_q"] = q
            m.d.comb += [q.w_data.eq(getattr(fetch, f"{u}_w_data")), q.w_en.eq(getattr(fetch, f"{u}_w_en")),
                         getattr(fetch, f"{u}_w_rdy").eq(q.w_rdy),
                         unit.q_data.eq(q.r_data), unit.q_rdy.eq(q.r_rdy), q.r_en.eq(unit.q_en)]
            queues[u] = q

        # ---- dependency tokens
        tq = {}
        for name, pusher, pop_unit, pop_sig in (
                ("l2c", load.push_next, comp, "pop_prev"), ("c2l", comp.push_prev, load, "pop_next"),
                ("c2s", comp.push_next, store, "pop_prev"), ("s2c", store.push_prev, comp, "pop_next")):
            t = TokenQueue(cfg.dep_queue_depth)
            m.submodules[f"tok_{name}"] = t
            m.d.comb += [t.push.eq(pusher), t.pop.eq(getattr(pop_unit, pop_sig)), t.clear.eq(start)]
            tq[name] = t
        m.d.comb += [comp.prev_avail.eq(tq["l2c"].avail), load.next_avail.eq(tq["c2l"].avail),
                     store.prev_avail.eq(tq["c2s"].avail), comp.next_avail.eq(tq["s2c"].avail)]

        with m.If(start):
            m.d.sync += [running.eq(1), done.eq(0), finished.eq(0), counter.eq(0)]
        with m.Elif(running):
            m.d.sync += counter.eq(counter + 1)
        with m.If(comp.finish):
            m.d.sync += finished.eq(1)
        all_idle = (fetch.done & finished & load.idle & comp.idle & store.idle
                    & ~queues["load"].r_rdy & ~queues["compute"].r_rdy & ~queues["store"].r_rdy)
        with m.If(running & all_idle & ~start):
            m.d.sync += [running.eq(0), done.eq(1), cycles.eq(counter)]

        # ---- DRAM port: arbiter and AXI4 master
        readers = {"fetch": fetch, "load": load, "compute": comp}
        for n, u in (("store", store), ("compute", comp), ("load", load), ("fetch", fetch)):
            m.d.comb += [getattr(arb, f"{n}_req").eq(u.req), u.grant.eq(getattr(arb, f"{n}_grant")),
                         getattr(arb, f"{n}_last").eq(u.port_last)]
        araddr, arlen = 0, 0
        arvalid = 0
        for n, u in readers.items():
            arvalid = arvalid | u.ar_valid
            araddr = Mux(u.ar_valid, u.ar_addr, araddr)
            arlen = Mux(u.ar_valid, u.ar_len, arlen)
            m.d.comb += [u.ar_ready.eq(self.m_axi_arready), u.r_valid.eq(self.m_axi_rvalid & getattr(arb, f"{n}_own")),
                         u.r_data.eq(self.m_axi_rdata)]
        lb = log2(cfg.bus_bytes)
        m.d.comb += [self.m_axi_arvalid.eq(arvalid), self.m_axi_araddr.eq(araddr), self.m_axi_arlen.eq(arlen),
                     self.m_axi_arsize.eq(lb), self.m_axi_arburst.eq(1), self.m_axi_rready.eq(1),
                     self.m_axi_awvalid.eq(store.aw_valid), self.m_axi_awaddr.eq(store.aw_addr),
                     self.m_axi_awlen.eq(store.aw_len), self.m_axi_awsize.eq(lb), self.m_axi_awburst.eq(1),
                     store.aw_ready.eq(self.m_axi_awready),
                     self.m_axi_wvalid.eq(store.w_valid), self.m_axi_wdata.eq(store.w_data),
                     self.m_axi_wstrb.eq(store.w_strb), self.m_axi_wlast.eq(store.w_last),
                     store.w_ready.eq(self.m_axi_wready), store.b_valid.eq(self.m_axi_bvalid),
                     self.m_axi_bready.eq(1)]

        # ---- scratchpads
        m.submodules.sp_uop = sp_uop = scratchpad(cfg, "uop", 1)
        m.submodules.sp_inp = sp_inp = scratchpad(cfg, "inp", 1)
        m.submodules.sp_wgt = sp_wgt = scratchpad(cfg, "wgt", 1)
        m.submodules.sp_acc = sp_acc = scratchpad(cfg, "acc", 2)
        m.submodules.sp_out = sp_out = scratchpad(cfg, "out", 1)
        for sp, writer, mem in ((sp_uop, comp, "uop"), (sp_inp, load, "inp"), (sp_wgt, load, "wgt"),
                                (sp_acc, comp, "acc"), (sp_out, comp, "out")):
            for p in ("w_addr", "w_data", "w_count", "w_en"):
                m.d.comb += getattr(sp, p).eq(getattr(writer, f"{mem}_{p}"))
        for sp, i, reader, name in ((sp_uop, 0, comp, "uop"), (sp_inp, 0, comp, "inp"), (sp_wgt, 0, comp, "wgt"),
                                    (sp_acc, 0, comp, "acc0"), (sp_acc, 1, comp, "acc1"), (sp_out, 0, store, "out")):
            addr, data = sp.read(i)
            m.d.comb += [addr.eq(getattr(reader, f"{name}_r_addr")), getattr(reader, f"{name}_r_data").eq(data)]
        return m
