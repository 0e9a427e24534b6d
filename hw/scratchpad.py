"""A scratchpad: ``depth`` elements in ``k`` interleaved block-RAM banks.

With ``k > 1`` (elements narrower than a bus beat) one cycle can write or read ``k``
consecutive elements starting at any address, which is what the DMA engines need
to move one beat per cycle. Reads are synchronous (one cycle) and transparent for
the write port, so a read in the cycle of a write returns the new value.
"""
from __future__ import annotations

from amaranth.hdl import Array, Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.common import clog2, log2


class Scratchpad(wiring.Component):
    """Ports: one vector write (``w_addr``, ``w_data``, ``w_count`` elements, ``w_en``), ``n_read`` vector reads."""

    def __init__(self, depth: int, elem_bits: int, k: int = 1, n_read: int = 1):
        assert depth % k == 0, (depth, k)
        self.depth, self.elem_bits, self.k, self.n_read = depth, elem_bits, k, n_read
        self.abits = clog2(depth)
        members = {"w_addr": In(self.abits), "w_data": In(k * elem_bits), "w_count": In(range(k + 1)),
                   "w_en": In(1)}
        for i in range(n_read):
            members[f"r{i}_addr"] = In(self.abits)
            members[f"r{i}_data"] = Out(k * elem_bits)
        super().__init__(members)

    def read(self, i: int) -> tuple[Signal, Signal]:
        return getattr(self, f"r{i}_addr"), getattr(self, f"r{i}_data")

    def elaborate(self, platform) -> Module:
        m = Module()
        k, eb = self.k, self.elem_bits
        lk = log2(k)
        mask = k - 1
        banks = []
        for b in range(k):
            mem = Memory(shape=unsigned(eb), depth=self.depth // k, init=[])
            m.submodules[f"bank{b}"] = mem
            wp = mem.write_port()
            j = (b - self.w_addr)[:lk] if k > 1 else 0
            if k > 1:
                m.d.comb += [wp.addr.eq((self.w_addr + j) >> lk), wp.data.eq(self.w_data.word_select(j, eb)),
                             wp.en.eq(self.w_en & (j < self.w_count))]
            else:
                m.d.comb += [wp.addr.eq(self.w_addr), wp.data.eq(self.w_data), wp.en.eq(self.w_en)]
            rps = []
            for i in range(self.n_read):
                rp = mem.read_port(transparent_for=(wp,))
                addr, _ = self.read(i)
                if k > 1:
                    jr = (b - addr)[:lk]
                    m.d.comb += rp.addr.eq((addr + jr) >> lk)
                else:
                    m.d.comb += rp.addr.eq(addr)
                rps.append(rp)
            banks.append(rps)
        for i in range(self.n_read):
            addr, data = self.read(i)
            if k == 1:
                m.d.comb += data.eq(banks[0][i].data)
                continue
            a_q = Signal(lk, name=f"r{i}_lo_q")
            m.d.sync += a_q.eq(addr[:lk])
            outs = Array(banks[b][i].data for b in range(k))
            for j in range(k):
                m.d.comb += data.word_select(j, eb).eq(outs[(a_q + j)[:lk]])
        return m
