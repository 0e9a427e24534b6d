"""What the pynq shim makes observable that a board would: non-coherent memory (a missing flush or invalidate
gives a detected wrong result), the axi_intc + UIO interrupt path, and the driver's interrupt wait on pynq's own
event-loop mechanics (pynq.interrupt.Interrupt / _InterruptController / UioController on the shim's UIO pty):
both default wait modes, repeated runs, and the new-loop-per-wait pattern that hangs there."""
from __future__ import annotations

import asyncio
import os
import select

import numpy as np
import pytest

from isa import make_config
from isa.encoding import INSN_BYTES

CFG = make_config("tiny")  # the overlay and shim fixtures (conftest.py) are built for it
pytestmark = pytest.mark.xdist_group("pynq-shim")


@pytest.fixture(scope="module")
def device(shim, overlay):
    from jit_runtime.devices_pynq import PynqDevice

    shim.overlay or shim.Overlay(str(overlay))
    return PynqDevice(CFG, overlay, pynq=shim.api(), timeout_s=20)


def _reference(dram, p):
    from simulator import Simulator

    ref = dram.copy()
    Simulator(CFG).run(ref, p.insn_addr, p.n_insns)
    return ref


def _program(seed=0):
    """A 32^3 blocked GEMM on seeded operands: self-contained (it loads all it reads), same layout for every seed."""
    from jit_runtime.blocked_gemm import blocked_gemm, default_plan

    return blocked_gemm(CFG, default_plan(CFG, small=True), seed=seed)[0]


def test_flush_and_invalidate_are_what_moves_data(device, shim, monkeypatch):
    p, q = _program(0), _program(1)  # same instructions and layout, other operands
    first = p.dram.copy()
    device.run(first, p.insn_addr, p.n_insns)
    assert np.array_equal(first, _reference(p.dram, p))  # with both: exact
    # new data, same instructions: without the flush the device computes on the previous run's DRAM
    insns = slice(p.insn_addr, p.insn_addr + INSN_BYTES * p.n_insns)
    assert np.array_equal(p.dram[insns], q.dram[insns])
    second = q.dram.copy()
    want = _reference(second, q)
    assert not np.array_equal(want, _reference(p.dram, p))  # the new data changes the result
    monkeypatch.setattr(shim.PynqBuffer, "flush", lambda self: None)
    got = second.copy()
    device.run(got, p.insn_addr, p.n_insns)
    assert not np.array_equal(got, want)
    monkeypatch.undo()
    # without the invalidate the host reads its own stale view: the device's results never arrive
    monkeypatch.setattr(shim.PynqBuffer, "invalidate", lambda self: None)
    got = second.copy()
    device.run(got, p.insn_addr, p.n_insns)
    assert not np.array_equal(got, want) and not np.array_equal(want, second)
    monkeypatch.undo()
    got = second.copy()
    device.run(got, p.insn_addr, p.n_insns)
    assert np.array_equal(got, want)


def test_missing_flush_is_a_detected_mismatch(device, shim, monkeypatch):
    from hw.cosim.pynq_check import CrossCheckDevice

    xc = CrossCheckDevice(CFG, device)
    p, q = _program(2), _program(3)
    xc.run(p.dram.copy(), p.insn_addr, p.n_insns)
    monkeypatch.setattr(shim.PynqBuffer, "flush", lambda self: None)
    xc.run(q.dram.copy(), q.insn_addr, q.n_insns)
    assert [c.ok for c in xc.checks] == [True, False] and not xc.checks[1].dram_equal


def test_axi_intc_model_is_level_sensitive_and_uio_fires_once_per_enable():
    from hw.cosim.pynq_irq import CIE, IAR, IER, IPR, ISR, IVR, MER, SIE, IntcModel, UioPty

    uio = UioPty()
    intc = IntcModel(uio)
    fd = os.open(uio.path, os.O_RDWR)
    try:
        def readable(timeout=0.3):  # negative checks wait 0.3 s; positive ones up to 10 s (a loaded machine)
            return bool(select.select([fd], [], [], timeout)[0])

        intc.set_level(True)
        assert intc.read(ISR) == 1 and intc.read(IPR) == 0 and intc.read(IVR) == 0xFFFF_FFFF  # not enabled
        os.write(fd, bytes([0, 0, 0, 1]))  # UIO enable
        intc.write(SIE, 1)
        assert not readable()  # MER not set: no output
        intc.write(MER, 3)
        assert readable(10) and int.from_bytes(os.read(fd, 4), "little") == 1 and intc.read(IVR) == 0
        intc.write(IAR, 1)  # acknowledged while the input is still high: pending again
        assert intc.read(ISR) == 1
        assert not readable()  # the UIO line stays disabled until enabled again
        os.write(fd, bytes([0, 0, 0, 1]))
        assert readable(10) and int.from_bytes(os.read(fd, 4), "little") == 2
        intc.write(CIE, 1)
        intc.set_level(False)
        intc.write(IAR, 1)
        assert intc.read(ISR) == 0 and intc.read(IER) == 0
        os.write(fd, bytes([0, 0, 0, 1]))
        intc.write(SIE, 1)
        assert not readable()  # nothing pending
    finally:
        os.close(fd)
        uio.close()


def test_interrupt_runs_on_pynqs_event_loop_mechanics_both_wait_modes(device, shim):
    pynq = pytest.importorskip("pynq")
    from jit_runtime.devices_pynq import PynqDevice

    assert type(device.irq) is pynq.interrupt.Interrupt and type(device.mmio) is pynq.mmio.MMIO
    uio = pynq.interrupt._InterruptController._uio_devices[61]  # IRQ_F2P[0]: pynq's UioController on the pty
    assert isinstance(uio, pynq.uio.UioController) and uio.uio.name == shim.uio.path
    assert isinstance(device._buffer(64)[0], pynq.buffer.PynqBuffer)
    p = _program(4)
    want = _reference(p.dram, p)
    for wait in ("auto", "irq"):
        dev = device if wait == "auto" else PynqDevice(CFG, device.bitstream, pynq=shim.api(), wait="irq",
                                                       timeout_s=20)
        fired = shim.stats["irq_fired"]
        for _ in range(3):  # repeated waits: asyncio.run per wait would hang from the first one
            got = p.dram.copy()
            dev.run(got, p.insn_addr, p.n_insns)
            assert np.array_equal(got, want)
        assert shim.stats["irq_fired"] - fired >= 3


def test_auto_polls_inside_a_running_loop_and_irq_refuses(device, shim):
    from jit_runtime import RuntimeApiError
    from jit_runtime.devices_pynq import PynqDevice

    p = _program(5)
    want = _reference(p.dram, p)
    irq_dev = PynqDevice(CFG, device.bitstream, pynq=shim.api(), wait="irq", timeout_s=20)

    async def in_jupyter():
        fired = shim.stats["irq_fired"]
        got = p.dram.copy()
        device.run(got, p.insn_addr, p.n_insns)  # wait="auto": polls CTRL.done
        assert np.array_equal(got, want) and shim.stats["irq_fired"] == fired
        writes = shim.stats["mmio_write"]
        with pytest.raises(RuntimeApiError, match="running asyncio event loop.*wait='auto'"):
            irq_dev.run(p.dram.copy(), p.insn_addr, p.n_insns)
        assert shim.stats["mmio_write"] == writes  # refused before the board was touched (nothing started)

    asyncio.run(in_jupyter())
    got = p.dram.copy()
    device.run(got, p.insn_addr, p.n_insns)  # and the interrupt path still works afterwards
    assert np.array_equal(got, want)


@pytest.mark.parametrize("use_pynq", [True, False])
def test_waiting_on_a_new_event_loop_fails_as_on_a_board(overlay, use_pynq):
    """What the driver did before: asyncio.run(irq.wait()) makes a new loop, while the Interrupt's UIO reader
    sits on the loop current when it was made: the wait never ends (pynq) or is refused (the shim's own)."""
    if use_pynq:
        pytest.importorskip("pynq")
    from hw.cosim.pynq_shim import PynqShim
    from isa.registers import CTRL, INSN_ADDR, INSN_COUNT
    from jit_runtime.devices_pynq import PynqDevice

    with PynqShim(mem_bytes=4 << 20, pynq=use_pynq) as s:  # its own overlay: the stale wait poisons nothing else
        dev = PynqDevice(CFG, overlay, pynq=s, timeout_s=20)
        p = _program(6)
        buf, off = dev._buffer(p.dram.size)
        # a trivially finishing run: start the program and wait the old way
        from jit_runtime.devices_pynq import relocate

        base = buf.physical_address + off
        words = dev.check(p.dram, p.insn_addr, p.n_insns)
        buf[off:off + p.dram.size] = p.dram
        buf[off + p.insn_addr:off + p.insn_addr + INSN_BYTES * p.n_insns] = relocate(words, CFG, base)
        buf.flush()
        dev.mmio.write(INSN_ADDR, base + p.insn_addr)
        dev.mmio.write(INSN_COUNT, p.n_insns)
        dev.mmio.write(CTRL, 1)
        if use_pynq:
            with pytest.raises(TimeoutError):
                asyncio.run(asyncio.wait_for(dev.irq.wait(), 1.0))
        else:
            with pytest.raises(RuntimeError, match="other than the one current when it was made"):
                asyncio.run(dev.irq.wait())


@pytest.mark.parametrize("use_pynq", [True, False])
def test_two_drivers_on_one_overlay_share_the_interrupt_line(overlay, use_pynq):
    """A second driver on the loaded overlay (as build(target="pynq") makes): one UIO reader per line, as pynq
    caches its UioController; a reader per Interrupt would let the idle one swallow the other's event."""
    if use_pynq:
        pytest.importorskip("pynq")
    from hw.cosim.pynq_shim import PynqShim
    from jit_runtime.devices_pynq import PynqDevice

    p = _program(7)
    want = _reference(p.dram, p)
    with PynqShim(mem_bytes=4 << 20, pynq=use_pynq) as s:
        first = PynqDevice(CFG, overlay, pynq=s, timeout_s=20)
        second = PynqDevice(CFG, overlay, pynq=s.api(), timeout_s=20)
        for dev in (second, first, second):
            got = p.dram.copy()
            dev.run(got, p.insn_addr, p.n_insns)
            assert np.array_equal(got, want)
        # each run needs its own interrupt (a swallowed one times out); the accelerator's level irq of a finished run
        # may fire once more when the next wait enables the line before the run clears it (the driver's _wait
        # skips such a stale wake-up): 3 to 6 fires, never fewer
        assert 3 <= s.stats["irq_fired"] <= 6


def test_interrupt_wait_times_out_with_a_clear_error(overlay):
    from dataclasses import replace

    from hw.cosim.pynq_shim import PynqShim
    from jit_runtime.blocked_gemm import blocked_gemm, default_plan
    from jit_runtime.devices_pynq import PynqDevice

    p = blocked_gemm(CFG, replace(default_plan(CFG), n=128, k=128, m=128))[0]  # ~0.26 M cycles: > 1 ms here
    with PynqShim(mem_bytes=4 << 20) as s:
        dev = PynqDevice(CFG, overlay, pynq=s, wait="irq", timeout_s=1e-4)
        with pytest.raises(TimeoutError, match=r"no interrupt from the accelerator within 0.0001 s"):
            dev.run(p.dram.copy(), p.insn_addr, p.n_insns)
