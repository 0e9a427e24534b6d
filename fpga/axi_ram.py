"""An on-chip AXI4 slave over block RAM: the accelerator's "DRAM" on a board without a memory controller.

One burst at a time (``arready``/``awready`` only when idle; a write address wins over a read
address in the same cycle). Reads: the first beat is valid three cycles after the AR handshake (an
address stage, the block RAM read, an output register: the contract's smallest DRAM latency), then one
beat per cycle while ``rready``. Writes: one beat per cycle with byte strobes, ``bvalid`` after the
last beat. This is a real memory, not the contract's fixed-latency model (docs/timing.md): cycle
counts on it are the RTL's own. A second read port (``dbg_*``) lets a checker read the memory while
no burst is active.
"""
from __future__ import annotations

import numpy as np
from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.common import clog2


def image_words(image: np.ndarray, bus_bytes: int, words: int) -> list[int]:
    """A byte image as little-endian ``bus_bytes``-byte words, zero-padded to ``words`` words."""
    raw = np.zeros(words * bus_bytes, np.uint8)
    raw[:image.size] = image
    return [int.from_bytes(raw[i * bus_bytes:(i + 1) * bus_bytes].tobytes(), "little") for i in range(words)]


class AxiRam(wiring.Component):
    """``size`` bytes (a power of two) of ``bus_bytes``-wide words, initialised from ``image`` (uint8)."""

    def __init__(self, bus_bytes: int, size: int, image: np.ndarray | None = None):
        assert size & (size - 1) == 0 and size % bus_bytes == 0
        self.bb, self.size = bus_bytes, size
        self.words = size // bus_bytes
        self.image = np.zeros(0, np.uint8) if image is None else np.asarray(image, np.uint8)
        assert self.image.size <= size, f"image of {self.image.size} bytes does not fit {size}"
        bw = 8 * bus_bytes
        super().__init__({
            "araddr": In(32), "arlen": In(8), "arvalid": In(1), "arready": Out(1),
            "rdata": Out(bw), "rlast": Out(1), "rvalid": Out(1), "rready": In(1),
            "awaddr": In(32), "awlen": In(8), "awvalid": In(1), "awready": Out(1),
            "wdata": In(bw), "wstrb": In(bus_bytes), "wlast": In(1), "wvalid": In(1), "wready": Out(1),
            "bvalid": Out(1), "bready": In(1),
            "dbg_addr": In(clog2(self.words)), "dbg_data": Out(bw), "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        ab = clog2(self.words)
        lb = clog2(self.bb)
        m.submodules.mem = mem = Memory(shape=unsigned(8 * self.bb), depth=self.words,
                                        init=image_words(self.image, self.bb, self.words))
        wp = mem.write_port(granularity=8)
        dp = mem.read_port()
        m.d.comb += [dp.addr.eq(self.dbg_addr), self.dbg_data.eq(dp.data)]
        addr, left = Signal(ab), Signal(9)

        # The read pipeline: an address stage (addr -> the block RAM), the block RAM's read, then the output
        # register (the RAM's own output register where the FPGA has one). ``adv`` moves all stages at once,
        # so a beat waits in the output register while ``rready`` is low.
        rp = mem.read_port()
        issue = Signal()  # the address stage holds a beat to read
        v_ram, v_out, last_ram, last_out = Signal(), Signal(), Signal(), Signal()
        out = Signal(8 * self.bb)
        adv = ~v_out | self.rready
        m.d.comb += [rp.addr.eq(addr), rp.en.eq(adv), self.rvalid.eq(v_out), self.rlast.eq(v_out & last_out),
                     self.rdata.eq(out)]
        with m.If(adv):
            m.d.sync += [v_ram.eq(issue), last_ram.eq(issue & (left == 1)), v_out.eq(v_ram), last_out.eq(last_ram)]
            with m.If(v_ram):
                m.d.sync += out.eq(rp.data)
            with m.If(issue):
                m.d.sync += [addr.eq(addr + 1), left.eq(left - 1)]
                with m.If(left == 1):
                    m.d.sync += issue.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.awready.eq(1)
                with m.If(self.awvalid):
                    m.d.sync += [addr.eq(self.awaddr[lb:]), left.eq(self.awlen + 1)]
                    m.next = "W"
                with m.Else():
                    m.d.comb += self.arready.eq(1)
                    with m.If(self.arvalid):
                        m.d.sync += [addr.eq(self.araddr[lb:]), left.eq(self.arlen + 1), issue.eq(1)]
                        m.next = "R"
            with m.State("R"):  # until the last beat leaves the output register
                m.d.comb += self.busy.eq(1)
                with m.If(v_out & last_out & self.rready):
                    m.next = "IDLE"
            with m.State("W"):
                m.d.comb += [self.busy.eq(1), self.wready.eq(1), wp.addr.eq(addr), wp.data.eq(self.wdata),
                             wp.en.eq(Mux(self.wvalid, self.wstrb, 0))]
                with m.If(self.wvalid):
                    m.d.sync += addr.eq(addr + 1)
                    with m.If(self.wlast):
                        m.next = "B"
            with m.State("B"):
                m.d.comb += [self.busy.eq(1), self.bvalid.eq(1)]
                with m.If(self.bready):
                    m.next = "IDLE"
        return m
