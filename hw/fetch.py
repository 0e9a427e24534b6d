"""The fetch unit: reads the program in bursts of up to ``fetch_burst`` instructions and dispatches them.

Burst requested at cycle 0 (after ``start``); when its transaction ends at ``c`` the
instructions are dispatched in order, at most one per cycle, each when its unit's command
queue has room; the next burst is requested the cycle after the last dispatch.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.burst import BurstIssuer
from hw.common import field, log2
from hw.load import read_master
from isa.config import HwConfig
from isa.instructions import MemType, Opcode

OFF, REQ, READ, DISPATCH = range(4)


class FetchUnit(wiring.Component):
    """``start`` with ``insn_addr``/``insn_count``; dispatches into the load, compute and store queues."""

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        super().__init__({
            "start": In(1), "insn_addr": In(32), "insn_count": In(32), "done": Out(1),
            "req": Out(1), "grant": In(1), "port_last": Out(1),
            **read_master(cfg),
            **{f"{u}_w_data": Out(128) for u in ("load", "compute", "store")},
            **{f"{u}_w_rdy": In(1) for u in ("load", "compute", "store")},
            **{f"{u}_w_en": Out(1) for u in ("load", "compute", "store")},
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        F, bb = cfg.fetch_burst, cfg.bus_bytes
        max_beats = -(-16 * F // bb)
        state = Signal(range(4))
        addr, left = Signal(32), Signal(32)
        n = Signal(range(F + 1))  # instructions in this burst
        beat = Signal(range(max_beats + 1))
        kidx = Signal(range(F + 1))
        buf = Signal(max_beats * bb * 8)

        m.submodules.bursts = bi = BurstIssuer(bb)
        n_now = Mux(left < F, left, F)
        grant_now = (state == REQ) & self.grant
        m.d.comb += [bi.start.eq(grant_now), bi.base.eq(addr), bi.stride.eq(0), bi.rows.eq(1),
                     bi.row_beats.eq((n_now * 16 + bb - 1) >> log2(bb)),
                     self.ar_valid.eq(bi.valid), bi.ready.eq(self.ar_ready), self.ar_addr.eq(bi.addr),
                     self.ar_len.eq(bi.len)]

        with m.If(self.start):
            m.d.sync += [state.eq(REQ), addr.eq(self.insn_addr), left.eq(self.insn_count)]
        m.d.comb += self.done.eq(state == OFF)

        with m.Switch(state):
            with m.Case(REQ):
                m.d.comb += self.req.eq(1)
                with m.If(self.grant):
                    m.d.sync += [state.eq(READ), n.eq(n_now), beat.eq(0), kidx.eq(0)]
            with m.Case(READ):
                with m.If(self.r_valid):
                    m.d.sync += [buf.word_select(beat, bb * 8).eq(self.r_data), beat.eq(beat + 1)]
                    total = (n * 16 + bb - 1) >> log2(bb)
                    with m.If(beat + 1 == total):
                        m.d.comb += self.port_last.eq(1)
                        m.d.sync += state.eq(DISPATCH)
            with m.Case(DISPATCH):
                word = buf.word_select(kidx, 128)
                op = field(word, cfg, "FINISH", "opcode")
                mem = field(word, cfg, "MEM", "mem")
                to_load = (op == Opcode.LOAD) & ((mem == MemType.INP) | (mem == MemType.WGT))
                to_store = op == Opcode.STORE
                to_comp = ~to_load & ~to_store
                rdy = (to_load & self.load_w_rdy) | (to_store & self.store_w_rdy) | (to_comp & self.compute_w_rdy)
                for u, c in (("load", to_load), ("store", to_store), ("compute", to_comp)):
                    m.d.comb += [getattr(self, f"{u}_w_data").eq(word), getattr(self, f"{u}_w_en").eq(c & rdy)]
                with m.If(rdy):
                    m.d.sync += kidx.eq(kidx + 1)
                    with m.If(kidx + 1 == n):
                        m.d.sync += [addr.eq(addr + (n << 4)), left.eq(left - n)]
                        m.d.sync += state.eq(Mux(left == n, OFF, REQ))
        return m
