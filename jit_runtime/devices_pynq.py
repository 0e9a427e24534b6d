"""The ``pynq`` device: runs programs on the accelerator in a PYNQ overlay, from the board's ARM cores.

It uses the ``pynq`` package's API only (``Overlay``, ``allocate``, ``MMIO``, ``Interrupt``); ``pynq`` is
imported when a device is made without an explicit ``pynq=`` module, so nothing else needs it. The RTL-backed
shim :class:`hw.cosim.pynq_shim.PynqShim` offers the same API for running this code without a board.

One run (:meth:`PynqDevice.run`, or :meth:`~PynqDevice.start` and :meth:`~PynqDevice.finish` apart, so that the
host can prepare the next program while the accelerator runs):
1. every instruction word is checked to decode and the program's DMA ranges (instructions, every LOAD/STORE) to
   lie inside the DRAM image, vectorized over the packed words (no instruction objects: milliseconds for 27k
   instructions, also on a board's ARM core);
2. the image is copied into a physically contiguous buffer (``allocate``, reused between runs), whose
   physical address is aligned for every element size and to 4 KiB (so AXI bursts split as at address 0);
3. every LOAD/STORE ``dram_base`` is relocated by that physical address (the accelerator's AXI master sees
   physical addresses), the buffer is flushed from the CPU caches;
4. INSN_ADDR (physical), INSN_COUNT and CTRL.start are written over MMIO (``start`` returns here); the driver
   waits for the interrupt
   (or polls CTRL.done), invalidates the caches, reads CYCLES and copies the image back (with the
   original, unrelocated instruction words).

When the device is made, the design's SIGNATURE register is compared with the host config's
:func:`isa.signature.config_signature`; a different accelerator is refused before anything runs.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from isa import HwConfig, MemType, Opcode
from isa.encoding import INSN_BYTES, check_stream, field_array, layouts
from isa.registers import CTRL, CTRL_DONE, CYCLES, INSN_ADDR, INSN_COUNT, IP_NAME, REG_SPAN, SIGNATURE
from isa.signature import config_signature
from jit_runtime.device import register_device
from jit_runtime.errors import (BitstreamError, ConfigMismatchError, ContiguousMemoryError, RuntimeApiError)

#: Environment variable naming the bitstream when a ``pynq`` device is made by name.
BITSTREAM_ENV = "VTA_BITSTREAM"


@dataclass
class PynqResult:
    """``cycles``: the accelerator's own CYCLES register (the board's DDR timing, not the contract's)."""

    cycles: int
    profile: dict = field(default_factory=dict)


def _import_pynq():
    try:
        import pynq  # noqa: PLC0415 - optional, board-only dependency
    except ImportError as exc:
        raise BitstreamError("the pynq device needs the 'pynq' package (on the board image: pip install pynq; "
                             "without a board use hw.cosim.pynq_shim.PynqShim as pynq=)") from exc
    return pynq


def _mem_fields(words: np.ndarray, cfg: HwConfig) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """Indices of the LOAD/STORE words (:func:`isa.encoding.stream_words`, all decodable), their MEM-format fields
    and the element size of each one's memory."""
    lay = layouts(cfg)["MEM"]
    opcode = field_array(words, lay.field("opcode"))
    idx = np.flatnonzero((opcode == int(Opcode.LOAD)) | (opcode == int(Opcode.STORE)))
    sub = words[idx]
    f = {n: field_array(sub, lay.field(n)) for n in ("opcode", "mem", "dram_base", "y_size", "x_size", "x_stride")}
    eb = np.array([cfg.elem_bytes(m.name.lower()) for m in sorted(MemType)], np.int64)[f["mem"]]
    return idx, f, eb


def dma_ranges(words: np.ndarray, cfg: HwConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(index, is_store, first byte, end byte)`` arrays of the DRAM bytes each LOAD/STORE (with a non-empty
    block) of the stream ``words`` (:func:`isa.encoding.check_stream`) touches."""
    idx, f, eb = _mem_fields(words, cfg)
    keep = (f["y_size"] > 0) & (f["x_size"] > 0)
    lo = f["dram_base"] * eb
    hi = (f["dram_base"] + (f["y_size"] - 1) * f["x_stride"] + f["x_size"]) * eb
    return idx[keep], (f["opcode"] == int(Opcode.STORE))[keep], lo[keep], hi[keep]


def relocate(words: np.ndarray, cfg: HwConfig, base: int) -> np.ndarray:
    """The instruction bytes with every LOAD/STORE ``dram_base`` moved by ``base`` bytes (a multiple of every
    element size): only the ``dram_base`` field of the LOAD/STORE words is rewritten, every other bit is copied
    (the same bytes as re-encoding each instruction with the moved address). ``words``: the checked stream
    (:func:`isa.encoding.check_stream`). Vectorized over the words: a 27k-instruction GEMM takes milliseconds,
    also on a board's ARM core."""
    out = np.array(words, dtype=np.uint64)
    idx, f, eb = _mem_fields(words, cfg)
    fld = layouts(cfg)["MEM"].field("dram_base")
    new = f["dram_base"] + base // eb
    over = np.flatnonzero((new < fld.lo_value) | (new > fld.hi_value))
    if over.size:
        k = int(over[0])
        kind = "STORE" if f["opcode"][k] == int(Opcode.STORE) else "LOAD"
        raise ContiguousMemoryError(
            f"instruction {int(idx[k])} ({kind}): dram_base {int(new[k])} at the physical address does not fit its "
            f"{fld.width}-bit field; allocate the contiguous buffer lower")
    for half in (0, 1):  # write the field's bits into the half (or halves) of the 128-bit word that hold them
        lo, hi = max(fld.lo, 64 * half), min(fld.lo + fld.width, 64 * half + 64)
        if lo >= hi:
            continue
        part = ((new.astype(np.uint64) >> np.uint64(lo - fld.lo)) & np.uint64((1 << (hi - lo)) - 1))
        mask = np.uint64(((1 << (hi - lo)) - 1) << (lo - 64 * half))
        out[idx, half] = (out[idx, half] & ~mask) | (part << np.uint64(lo - 64 * half))
    return out.view(np.uint8).reshape(-1)


def base_alignment(cfg: HwConfig) -> int:
    """Alignment of the image's physical address: 4 KiB (bursts split as at 0) and every element size."""
    align = 4096
    for mem in ("uop", "inp", "wgt", "acc", "out"):
        align = int(np.lcm(align, cfg.elem_bytes(mem)))
    return align


class PynqDevice:
    """A :class:`jit_runtime.device.Device` on a PYNQ overlay built by ``vta hw build --board``.

    ``bitstream``: the ``.bit`` (its ``.hwh`` must sit beside it); ``pynq``: the pynq module or a
    compatible object (default: ``import pynq``); ``wait``: ``"irq"``, ``"poll"`` or ``"auto"`` (the interrupt
    when the overlay routes one and no asyncio loop is running, else polling); ``timeout_s`` for either (the
    interrupt is awaited on the event loop current when the device was made: pynq's ``Interrupt`` attaches its UIO
    reader to that loop).
    """

    def __init__(self, cfg: HwConfig, bitstream: str | Path, *, pynq: Any = None, wait: str = "auto",
                 timeout_s: float = 60.0):
        if wait not in ("auto", "irq", "poll"):
            raise RuntimeApiError(f"wait={wait!r}: allowed are 'auto', 'irq', 'poll'")
        bit = Path(bitstream)
        if bit.suffix != ".bit" or not bit.is_file():
            raise BitstreamError(f"bitstream {str(bit)!r} does not exist or is not a .bit file "
                                 f"(vta hw build --board BOARD -o DIR writes DIR/vta.bit)")
        hwh = bit.with_suffix(".hwh")
        if not hwh.is_file():
            raise BitstreamError(f"{hwh.name} is missing beside {bit}: pynq.Overlay needs the hardware handoff "
                                 f"that the Vivado build wrote next to {bit.name}; copy both files to the board")
        self.cfg, self.bitstream, self.timeout_s = cfg, bit, timeout_s
        self.pynq = pynq if pynq is not None else _import_pynq()
        self.overlay = self.pynq.Overlay(str(bit))
        self.ip_name, ip = self._find_ip()
        if ip["addr_range"] < REG_SPAN:
            raise BitstreamError(f"{self.ip_name}'s register window is {ip['addr_range']} bytes; the register "
                                 f"file needs {REG_SPAN}")
        self.mmio = self.pynq.MMIO(ip["phys_addr"], ip["addr_range"])
        self.signature = config_signature(cfg)
        got = int(self.mmio.read(SIGNATURE))
        if got != self.signature:
            raise ConfigMismatchError(
                f"bitstream {bit.name} was built for a different accelerator: its SIGNATURE register reads "
                f"0x{got:08X}, the host config {cfg.name!r} has signature 0x{self.signature:08X}. Run with the "
                f"config the bitstream was built for (its report.json names it) or rebuild the bitstream with "
                f"`vta hw build --board BOARD --config {cfg.name}`; nothing was run")
        cell = ip.get("fullpath", self.ip_name).split("/")[0]
        pins = [p for p in getattr(self.overlay, "interrupt_pins", {}) if p == f"{cell}/irq"]
        self.irq, self._loop = None, None
        if pins and wait != "poll":
            # pynq's Interrupt attaches its UIO reader to the event loop current now: every wait runs on that loop
            self._loop = _current_loop()
            self.irq = self.pynq.Interrupt(pins[0])
        if wait == "irq" and self.irq is None:
            raise BitstreamError(f"wait='irq' but the overlay routes no interrupt from {cell}/irq")
        self.wait = wait
        self._buf = None
        self._align = base_alignment(cfg)
        self._running: tuple | None = None  # the program start() started, until finish()

    def _find_ip(self) -> tuple[str, dict]:
        found = [(k, v) for k, v in self.overlay.ip_dict.items()
                 if f":{IP_NAME}:" in str(v.get("type", "")) and v.get("phys_addr") is not None]
        if len(found) != 1:
            raise BitstreamError(f"the overlay {self.bitstream.name} has {len(found)} {IP_NAME} accelerators "
                                 f"(IPs: {', '.join(self.overlay.ip_dict) or 'none'}); expected exactly one")
        return found[0]

    # ------------------------------------------------------------------ memory
    def _buffer(self, nbytes: int):
        """The contiguous buffer (reused, grown when needed) and the offset of the aligned image base in it."""
        need = nbytes + self._align
        if self._buf is None or self._buf.nbytes < need:
            if self._buf is not None:
                self._buf.freebuffer()
                self._buf = None
            self._buf = self.pynq.allocate(shape=(need,), dtype=np.uint8)
        phys = getattr(self._buf, "physical_address", None)
        if phys is None:
            raise ContiguousMemoryError("allocate() returned a buffer without a physical address: it is not in "
                                        "contiguous memory the accelerator can reach")
        off = -phys % self._align
        if phys + off + nbytes > 1 << 32:
            raise ContiguousMemoryError(f"the contiguous buffer at {phys:#x} ends above 4 GiB; the accelerator's "
                                        f"AXI master has 32 address bits")
        return self._buf, off

    # ------------------------------------------------------------------ running
    def check(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> np.ndarray:
        """Validate a program before anything touches the board (every word decodes, every DMA range lies in the
        image; vectorized over the words, no instruction objects); returns its words
        (:func:`isa.encoding.stream_words`)."""
        if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1:
            raise RuntimeApiError("the DRAM image must be a 1-D uint8 numpy array")
        if n_insns < 1:
            raise RuntimeApiError(f"n_insns={n_insns}: a program has at least one instruction")
        end = insn_addr + INSN_BYTES * n_insns
        if insn_addr < 0 or end > dram.size:
            raise ContiguousMemoryError(f"instructions [{insn_addr:#x}, {end:#x}) lie outside the {dram.size}-byte "
                                        f"DRAM image that is copied into contiguous memory")
        if insn_addr % self.cfg.bus_bytes:
            raise RuntimeApiError(f"insn_addr {insn_addr:#x} must be a multiple of the bus width "
                                  f"({self.cfg.bus_bytes} bytes)")
        words = check_stream(dram[insn_addr:end], self.cfg)  # the decoder's error for an undecodable word
        idx, store, lo, hi = dma_ranges(words, self.cfg)
        out = np.flatnonzero((lo < 0) | (hi > dram.size))
        if out.size:
            k = int(out[0])
            raise ContiguousMemoryError(
                f"instruction {int(idx[k])} ({'STORE' if store[k] else 'LOAD'}) reaches DRAM bytes [{int(lo[k]):#x}, "
                f"{int(hi[k]):#x}), outside the {dram.size}-byte image that is copied into contiguous memory: every "
                f"buffer of the program must be in the image (allocate it with the CommandQueue); nothing was run")
        return words

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> PynqResult:
        """Run a program on the accelerator and wait for it: :meth:`start` then :meth:`finish`."""
        self.start(dram, insn_addr, n_insns)
        return self.finish()

    def start(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> None:
        """Check the program, copy it into contiguous memory, relocate, flush and start the accelerator; return
        while it runs (the host may prepare the next program meanwhile). :meth:`finish` waits and copies the
        image back into ``dram``; one program at a time."""
        if self._running is not None:
            raise RuntimeApiError("a program is already running on the accelerator: call finish() before starting "
                                  "the next one")
        self._refuse_irq_in_loop()  # before the board is touched: a refused run must not leave it running
        words = self.check(dram, insn_addr, n_insns)
        buf, off = self._buffer(dram.size)
        base = buf.physical_address + off
        patched = relocate(words, self.cfg, base)
        n = dram.size
        original = dram[insn_addr:insn_addr + patched.size].copy()
        buf[off:off + n] = dram
        buf[off + insn_addr:off + insn_addr + patched.size] = patched
        buf.flush()
        self.mmio.write(INSN_ADDR, int(base + insn_addr))  # pynq's MMIO takes int (not numpy integers)
        self.mmio.write(INSN_COUNT, int(n_insns))
        t0 = time.perf_counter()
        self.mmio.write(CTRL, 1)
        self._running = (dram, insn_addr, off, base, patched, original, t0)

    def finish(self) -> PynqResult:
        """Wait for the program :meth:`start` started, invalidate the caches, read CYCLES and copy the image back
        (with the original, unrelocated instruction words)."""
        if self._running is None:
            raise RuntimeApiError("finish() without a started program: call start() (or run()) first")
        (dram, insn_addr, off, base, patched, original, t0), self._running = self._running, None
        self._wait()
        seconds = time.perf_counter() - t0
        buf = self._buf
        buf.invalidate()
        cycles = int(self.mmio.read(CYCLES))
        dram[:] = buf[off:off + dram.size]
        region = dram[insn_addr:insn_addr + patched.size]
        if np.array_equal(region, patched):  # put back the image's own (unrelocated) instruction words
            region[:] = original
        return PynqResult(cycles, {"device": "pynq", "cycles": cycles, "config": self.cfg.name,
                                   "bitstream": str(self.bitstream), "image_phys_addr": base,
                                   "wall_seconds": seconds})

    def _refuse_irq_in_loop(self) -> None:
        if self.irq is not None and self.wait == "irq" and _loop_running():
            raise RuntimeApiError("wait='irq' inside a running asyncio event loop (e.g. Jupyter): run() is "
                                  "synchronous and cannot wait on that loop; use wait='auto' (polls there) or "
                                  "'poll'")

    def _wait(self) -> None:
        if self.irq is not None and (self.wait == "irq" or not _loop_running()):
            self._refuse_irq_in_loop()  # start() outside the loop, finish() inside it
            for _ in range(3):  # a stale level interrupt of the previous run may wake the first wait
                try:  # on the loop that holds the Interrupt's UIO reader (not asyncio.run: a new loop each time)
                    self._loop.run_until_complete(asyncio.wait_for(self.irq.wait(), self.timeout_s))
                except TimeoutError:
                    raise TimeoutError(f"no interrupt from the accelerator within {self.timeout_s} s") from None
                if self.mmio.read(CTRL) & CTRL_DONE:
                    return
        deadline = time.monotonic() + self.timeout_s
        while not self.mmio.read(CTRL) & CTRL_DONE:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the accelerator did not finish within {self.timeout_s} s (CTRL.done never set)")

    def close(self) -> None:
        if self._running is not None:
            self.finish()
        if self._buf is not None:
            self._buf.freebuffer()
            self._buf = None


def _current_loop() -> asyncio.AbstractEventLoop:
    """The running event loop, else this thread's current one (made if none): the loop pynq's ``UioController``
    attaches its reader to when an ``Interrupt`` is made."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    try:
        return asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:  # none set (e.g. after asyncio.run): make one current, so pynq's get_event_loop() finds it
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        return loop


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


def make_pynq_device(cfg: HwConfig, trace: bool = False, bitstream: str | Path | None = None,
                     pynq: Any = None, **kw: Any) -> PynqDevice:
    """Factory for ``make_device("pynq", cfg)``: the bitstream comes from ``bitstream`` or ``$VTA_BITSTREAM``."""
    bitstream = bitstream or os.environ.get(BITSTREAM_ENV)
    if not bitstream:
        raise BitstreamError(f"the pynq device needs a bitstream: pass bitstream=... (vta run --bitstream FILE) "
                             f"or set {BITSTREAM_ENV}")
    return PynqDevice(cfg, bitstream, pynq=pynq, **kw)


try:
    register_device("pynq", make_pynq_device)
except RuntimeApiError:  # already registered
    pass
