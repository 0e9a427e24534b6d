"""A self-test system for a board: the accelerator, an on-chip AXI RAM holding a program, and a checker.

After reset (and on every press of ``button``) the controller writes INSN_ADDR, INSN_COUNT and
CTRL.start over AXI4-Lite, waits for ``irq``, then compares the output words of the RAM with the
simulator's result for the same program (a ROM built at elaboration time). LEDs: 0 done, 1 pass,
2 fail, 3 running; the other LEDs show the low bits of the RTL's cycle count (register CYCLES is
the RTL's own count on this memory, not a contract figure: docs/timing.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Elaboratable, Module, Signal, unsigned
from amaranth.lib.memory import Memory

from fpga.axi_ram import AxiRam, image_words
from hw.common import clog2
from hw.regfile import CTRL, CYCLES, INSN_ADDR, INSN_COUNT
from hw.top import Accelerator
from isa.config import HwConfig


@dataclass
class SelfTest:
    """A program image, where its instructions are, and the word range its result is checked on."""

    image: np.ndarray
    insn_addr: int
    n_insns: int
    expected: np.ndarray  # the image after a simulator run
    check_words: tuple[int, int]  # [first, end) bus words compared after the run


def self_test_for(cfg: HwConfig, case: str = "relu") -> SelfTest:
    """An instruction-suite program for ``cfg`` (default ``relu``) and its simulated result."""
    from jit_runtime.suite import suite_cases
    from simulator import Simulator

    prog, _ = suite_cases(cfg)[case]()
    image = prog.dram.copy()
    expected = image.copy()
    Simulator(cfg).run(expected, prog.insn_addr, prog.n_insns)
    lo = min(prog.buffers[n].addr for n in prog.expected)
    hi = max(prog.buffers[n].addr + prog.buffers[n].nbytes for n in prog.expected)
    bb = cfg.bus_bytes
    return SelfTest(image, prog.insn_addr, prog.n_insns, expected, (lo // bb, -(-hi // bb)))


def ram_size_for(test: SelfTest) -> int:
    return max(1024, 1 << int(test.image.size - 1).bit_length())


class SelfTestSoC(Elaboratable):
    """Accelerator + :class:`AxiRam` + controller/checker; the board-independent part of the board tops."""

    def __init__(self, cfg: HwConfig, test: SelfTest):
        self.cfg, self.test = cfg, test
        self.restart = Signal()
        self.done, self.passed, self.failed, self.running = Signal(), Signal(), Signal(), Signal()
        self.cycles = Signal(32)

    def elaborate(self, platform) -> Module:  # noqa: C901 - one controller FSM
        m = Module()
        cfg, t = self.cfg, self.test
        bb = cfg.bus_bytes
        m.submodules.acc = acc = Accelerator(cfg)
        m.submodules.ram = ram = AxiRam(bb, ram_size_for(t), t.image)
        for ch in ("araddr", "arlen", "arvalid", "awaddr", "awlen", "awvalid", "wdata", "wstrb", "wlast", "wvalid"):
            m.d.comb += getattr(ram, ch).eq(getattr(acc, f"m_axi_{ch}"))
        for ch in ("arready", "rdata", "rlast", "rvalid", "awready", "wready", "bvalid"):
            m.d.comb += getattr(acc, f"m_axi_{ch}").eq(getattr(ram, ch))
        m.d.comb += [ram.rready.eq(acc.m_axi_rready), ram.bready.eq(acc.m_axi_bready)]

        first, end = t.check_words
        n_check = end - first
        exp_words = image_words(t.expected[first * bb:end * bb], bb, n_check)
        m.submodules.rom = rom = Memory(shape=unsigned(8 * bb), depth=n_check, init=exp_words)
        rp = rom.read_port()
        idx = Signal(clog2(n_check + 1))
        mismatch = Signal()
        m.d.comb += [rp.addr.eq(idx), ram.dbg_addr.eq(first + idx)]

        def axil_write(state: str, reg: int, value: int, nxt: str) -> None:
            with m.State(state):
                m.d.comb += [acc.s_axil_awaddr.eq(reg), acc.s_axil_awvalid.eq(1), acc.s_axil_wdata.eq(value),
                             acc.s_axil_wstrb.eq(0xF), acc.s_axil_wvalid.eq(1), acc.s_axil_bready.eq(1)]
                with m.If(acc.s_axil_awready):
                    m.next = state + "_B"
            with m.State(state + "_B"):
                m.d.comb += acc.s_axil_bready.eq(1)
                with m.If(acc.s_axil_bvalid):
                    m.next = nxt

        with m.FSM():
            with m.State("BOOT"):
                m.d.sync += [self.done.eq(0), self.passed.eq(0), self.failed.eq(0)]
                m.next = "ADDR"
            axil_write("ADDR", INSN_ADDR, t.insn_addr, "COUNT")
            axil_write("COUNT", INSN_COUNT, t.n_insns, "START")
            axil_write("START", CTRL, 1, "SETTLE")
            with m.State("SETTLE"):  # done/irq drops the cycle after the start pulse
                m.d.sync += self.running.eq(1)
                m.next = "RUN"
            with m.State("RUN"):
                with m.If(acc.irq):
                    m.d.sync += [idx.eq(0), self.running.eq(0)]
                    m.next = "READ_CYCLES"
            with m.State("READ_CYCLES"):
                m.d.comb += [acc.s_axil_araddr.eq(CYCLES), acc.s_axil_arvalid.eq(1), acc.s_axil_rready.eq(1)]
                with m.If(acc.s_axil_arready):
                    m.next = "READ_CYCLES_R"
            with m.State("READ_CYCLES_R"):
                m.d.comb += acc.s_axil_rready.eq(1)
                with m.If(acc.s_axil_rvalid):
                    m.d.sync += self.cycles.eq(acc.s_axil_rdata)
                    m.next = "CHECK_ADDR"
            with m.State("CHECK_ADDR"):  # ROM and RAM debug port read idx; data next cycle
                m.next = "CHECK_DATA"
            with m.State("CHECK_DATA"):  # the compare into a register: the block RAM reads stay off the FSM's path
                m.d.sync += mismatch.eq(ram.dbg_data != rp.data)
                m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(mismatch):
                    m.d.sync += [self.failed.eq(1), self.done.eq(1)]
                    m.next = "HOLD"
                with m.Elif(idx == n_check - 1):
                    m.d.sync += [self.passed.eq(1), self.done.eq(1)]
                    m.next = "HOLD"
                with m.Else():
                    m.d.sync += idx.eq(idx + 1)
                    m.next = "CHECK_ADDR"
            with m.State("HOLD"):
                with m.If(self.restart):
                    m.next = "BOOT"
        return m


class BoardTop(Elaboratable):
    """:class:`SelfTestSoC` on a board: LEDs and an optional restart button."""

    def __init__(self, cfg: HwConfig, test: SelfTest, button: str | None = None):
        self.soc, self.button = SelfTestSoC(cfg, test), button

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.soc = soc = self.soc
        leds = [platform.request("led", i).o for i in range(8) if ("led", i) in platform.resources]
        status = [soc.done, soc.passed, soc.failed, soc.running] + [soc.cycles[i] for i in range(4)]
        for led, s in zip(leds, status):
            m.d.comb += led.eq(s)
        if self.button:
            btn = platform.request(self.button, 0).i
            prev = Signal()
            m.d.sync += prev.eq(btn)
            m.d.comb += soc.restart.eq(btn & ~prev)
        return m
