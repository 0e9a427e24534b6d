"""A pynq-compatible shim backed by the RTL: ``Overlay``, ``MMIO``, ``allocate``, ``Interrupt`` with pynq's
signatures, so host code written for a PYNQ board (``jit_runtime.devices_pynq``) runs unchanged against
the Verilator model of the accelerator.

- **The design**: ``vta_accel``, the module Vivado instantiates in the Zynq shell (:mod:`hw.accel_wrapper`), on
  the compiled Verilator harness (:class:`HarnessBackend`, the default); it runs concurrently with the host in a
  device thread from the CTRL start write to its interrupt, as on a board. :class:`CocotbBackend` (cocotb, the
  bare ``vta_top``, ~100x slower) is kept as a cross-check.
- **Memory, not coherent**: the contiguous region exists twice: the DRAM the accelerator's AXI master reads and
  writes (a shared-memory file at a DDR-like physical base, mapped by the simulator) and the CPU's view of it
  (what ``allocate``'d buffers show to the host). ``flush()`` copies the buffer's bytes from the CPU's view to
  DRAM, ``invalidate()`` from DRAM to the CPU's view; nothing else moves them. A driver that forgets either
  gives a wrong result (the strict form of a write-back cache that never evicts on its own).
- **Interrupts, axi_intc-like**: the accelerator's level ``irq`` drives input 0 of an interrupt controller model
  with the ``axi_intc`` registers pynq uses (ISR, IPR, IER, IAR, SIE, CIE, IVR, MER; level input: an acknowledged
  ISR bit is set again while the input is high), whose output is the PS interrupt (``IRQ_F2P``/``pl_ps_irq0``)
  served by a UIO device: a pseudo-terminal in raw mode that, like ``/dev/uioN``, takes a 4-byte write to
  enable the interrupt and gives a 4-byte count when it fires (then stays disabled until enabled again).
- **pynq's own classes** (when the ``pynq`` package imports; ``pynq="auto"``): buffers are
  ``pynq.buffer.PynqBuffer`` (pynq's flush/invalidate/offset logic calling the shim as its device), ``MMIO`` is
  ``pynq.mmio.MMIO`` on a register device, and ``Interrupt`` is ``pynq.interrupt.Interrupt`` with its
  ``_InterruptController`` and ``UioController`` (reader attached to the event loop current when it is made) on
  the pty; the shim replaces only the board lookups (``PL``, ``get_uio_irq``, the MMIO device). Without pynq the
  shim's own classes keep the same semantics (incl. the interrupt's loop affinity).
- **Overlay(bitfile)**: reads ``<name>.hwh`` beside it (:meth:`fpga.zynq_shell.Shell.hwh`) into
  ``ip_dict``/``interrupt_pins`` and starts the simulator for the config the stand-in ``<name>.bit`` names
  (:func:`write_sim_bitstream`); the design is reset once, like a board after a bitstream download.
"""
from __future__ import annotations

import asyncio
import functools
import json
import os
import tempfile
import time
import types
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

import numpy as np

from hw.cosim.pynq_backends import CocotbBackend, HarnessBackend, ShimBackend  # noqa: F401 - the shim's API
from hw.cosim.pynq_irq import CIE, IAR, IPR, MER, RAW_IRQ, SIE, IntcModel, UioPty
from isa.config import HwConfig, make_config
from isa.registers import ADDR_BITS

PAGE = 4096
SIM_BITSTREAM_MAGIC = "vta-stack RTL shim overlay"


def write_sim_bitstream(path: str | Path, cfg: HwConfig, phys_base: int = 0, ddr_bytes: int = 0) -> Path:
    """The stand-in ``.bit`` the shim loads: it names the config of the design to simulate."""
    path = Path(path)
    path.write_text(json.dumps({"format": SIM_BITSTREAM_MAGIC, "config": cfg.to_dict(),
                                "phys_base_hint": phys_base, "ddr_bytes": ddr_bytes}, indent=1))
    return path


def read_sim_bitstream(path: str | Path) -> HwConfig:
    try:
        spec = json.loads(Path(path).read_text())
        if spec.get("format") != SIM_BITSTREAM_MAGIC:
            raise ValueError
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a shim overlay (write one with fpga.vivado_project.write_sim_overlay); "
                         f"a Vivado bitstream needs a real board") from exc
    return make_config(dict(spec["config"]))


def _import_pynq(use: bool | str):
    """The pynq package's modules the shim uses, or None (``use="auto"`` and pynq does not import)."""
    if use is False:
        return None
    try:
        import pynq.buffer  # noqa: PLC0415 - optional
        import pynq.interrupt
        import pynq.mmio
    except ImportError as exc:
        if use == "auto":
            return None
        raise RuntimeError("PynqShim(pynq=True) needs the 'pynq' package (pip install --no-deps pynq==4.0.0 "
                           "pynqmetadata pynqutils; its numpy<2 pin conflicts with this stack)") from exc
    return pynq


class PynqShim:
    """The ``pynq`` module's API, backed by the RTL: pass it where a driver takes ``pynq=``.

    ``phys_base``: the physical address of the contiguous region (page aligned, below 4 GiB); ``mem_bytes``: its
    size; ``backend``: ``factory(cfg, mem_path, mem_bytes, phys_base) -> ShimBackend`` (default
    :class:`HarnessBackend`); ``pynq``: use pynq's own buffer, MMIO and interrupt classes (``"auto"``: when the
    package imports; ``True``: required; ``False``: the shim's own).
    """

    def __init__(self, phys_base: int = 0x1800_0000, mem_bytes: int = 64 << 20,
                 backend: Callable[..., ShimBackend] | None = None, pynq: bool | str = "auto"):
        if phys_base % PAGE or phys_base + mem_bytes > 1 << 32:
            raise ValueError(f"phys_base {phys_base:#x} must be page aligned and the region must end below 4 GiB")
        if pynq not in (True, False, "auto"):
            raise ValueError(f"pynq={pynq!r}: allowed are True, False, 'auto'")
        self.phys_base, self.mem_bytes = phys_base, mem_bytes
        self._backend_factory = backend or HarnessBackend
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, self.mem_path = tempfile.mkstemp(prefix="vta-pynq-mem-", dir=shm)
        os.ftruncate(fd, mem_bytes)
        os.close(fd)
        self.mem = np.memmap(self.mem_path, dtype=np.uint8, mode="r+", shape=(mem_bytes,))  # DRAM (the device's)
        self.host = np.zeros(mem_bytes, np.uint8)  # the CPU's view of the same physical range
        self._free: list[tuple[int, int]] = [(0, mem_bytes)]
        self.stats = {"flush": 0, "invalidate": 0, "allocate": 0, "mmio_write": 0, "mmio_read": 0, "irq_wait": 0,
                      "irq_fired": 0}
        self.backend: ShimBackend | None = None
        self.overlay = None
        self.intc: IntcModel | None = None
        self.uio: UioPty | None = None
        self.pynq = _import_pynq(pynq)
        self._patched: list[tuple[object, str, object]] = []
        self._uio_reader = None
        self._uio_controllers: list = []  # pynq UioControllers on this shim's pty
        shim = self

        # ---------------------------------------------------------------- the device pynq's classes talk to
        class Device:
            """What pynq's PynqBuffer (flush/invalidate) and MMIO (REGISTER_RW) call."""

            def has_capability(self, cap: str) -> bool:
                return cap == "REGISTER_RW"

            def flush(self, bo, offset, vaddr, nbytes):
                shim._sync(bo + offset, nbytes, to_device=True)

            def invalidate(self, bo, offset, vaddr, nbytes):
                shim._sync(bo + offset, nbytes, to_device=False)

            def read_registers(self, address: int, length: int) -> bytes:
                return shim._reg_read(address, length).to_bytes(length, "little")

            def write_registers(self, address: int, data: bytes) -> None:
                shim._reg_write(address, int.from_bytes(data, "little"))

        self.device = Device()

        # ---------------------------------------------------------------- buffers
        if self.pynq is not None:
            class PynqBuffer(self.pynq.buffer.PynqBuffer):
                """pynq's PynqBuffer (its flush/invalidate/offset logic) in the shim's region."""

                # numpy 2's ndarray has a read-only ``device`` (array API); pynq 4.0 (numpy<2) assigns its own there
                device = property(lambda self: self.__dict__.get("_pynq_device"),
                                  lambda self, v: self.__dict__.__setitem__("_pynq_device", v))

                def freebuffer(self) -> None:
                    if getattr(self, "_block", None) is not None:
                        shim._release(*self._block)
                        self._block = None
        else:
            class PynqBuffer(np.ndarray):
                """A contiguous buffer in the shim's region (pynq.buffer.PynqBuffer's attributes and semantics)."""

                def __array_finalize__(self, obj):
                    if isinstance(obj, PynqBuffer) and getattr(obj, "device_address", None) is not None:
                        delta = self.__array_interface__["data"][0] - obj.__array_interface__["data"][0]
                        self.device_address = obj.device_address + delta
                        self.bo, self.offset, self.coherent = obj.bo, obj.offset + delta, obj.coherent
                    else:
                        self.device_address = None

                @property
                def physical_address(self) -> int:
                    return self.device_address

                @property
                def cacheable(self) -> bool:
                    return not self.coherent

                def flush(self) -> None:
                    if not self.coherent:
                        shim.device.flush(self.bo, self.offset, 0, self.nbytes)

                def invalidate(self) -> None:
                    if not self.coherent:
                        shim.device.invalidate(self.bo, self.offset, 0, self.nbytes)

                sync_to_device, sync_from_device = flush, invalidate

                def freebuffer(self) -> None:
                    if getattr(self, "_block", None) is not None:
                        shim._release(*self._block)
                        self._block = None

                close = freebuffer

        # ---------------------------------------------------------------- overlay
        class Overlay:
            """``pynq.Overlay(bitfile)``: parses ``<name>.hwh`` and starts the simulator of the design."""

            def __init__(self, bitfile_name: str, download: bool = True, **_):
                bit = Path(bitfile_name)
                if not bit.is_file():
                    raise IOError(f"Bitstream file {bitfile_name} does not exist.")
                hwh = bit.with_suffix(".hwh")
                if not hwh.is_file():
                    raise ValueError(f"Cannot find HWH file {hwh}.")
                cfg = read_sim_bitstream(bit)
                self.bitfile_name = str(bit)
                self.ip_dict, self.interrupt_pins = parse_hwh(hwh)
                self.interrupt_controllers = parse_intc(hwh)
                self.timestamp = f"{bit.resolve()}@{time.time_ns()}"
                self.config = cfg
                shim._unload()
                shim.backend = shim._backend_factory(cfg, shim.mem_path, shim.mem_bytes, shim.phys_base)
                shim.overlay = self
                if getattr(shim.backend, "concurrent", False):
                    shim.uio = UioPty(shim.stats)
                    shim.intc = IntcModel(shim.uio)
                    shim.backend.listen(shim.intc.set_level)
                    if shim.pynq is not None:
                        shim._patch_pynq_interrupts()

            def free(self) -> None:
                if shim.overlay is self:
                    shim._unload()

        # ---------------------------------------------------------------- MMIO
        if self.pynq is not None:
            MMIO = functools.partial(self.pynq.mmio.MMIO, device=self.device)
        else:
            class MMIO:
                """``pynq.MMIO(base_addr, length)`` (pynq's checks: int data only, aligned offsets)."""

                def __init__(self, base_addr: int, length: int = 4, **_):
                    if base_addr < 0 or length < 0:
                        raise ValueError("Base address or length cannot be negative.")
                    self.base_addr, self.length = base_addr, length

                def read(self, offset: int = 0, length: int = 4, word_order: str = "little") -> int:
                    if length != 4:
                        raise ValueError("the shim's MMIO reads 4-byte words")
                    if offset < 0 or offset % 4:
                        raise MemoryError("Unaligned read: offset must be multiple of 4.")
                    return shim._reg_read(self.base_addr + offset, 4)

                def write(self, offset: int, data: int) -> None:
                    if offset < 0 or offset % 4:
                        raise MemoryError("Unaligned write: offset must be multiple of 4.")
                    if type(data) is not int:  # pynq's MMIO.write_reg: int or bytes only (not numpy integers)
                        raise ValueError("Data type must be int or bytes.")
                    shim._reg_write(self.base_addr + offset, data)

        # ---------------------------------------------------------------- Interrupt
        if self.pynq is not None:
            def Interrupt(pinname: str):
                """``pynq.interrupt.Interrupt(pinname)`` on the shim's interrupt controller and UIO pty."""
                if shim.overlay is None:
                    raise ValueError(f"No Pin of name {pinname} found")
                if shim.uio is None:
                    raise RuntimeError("pynq's Interrupt needs a concurrent backend (HarnessBackend)")
                irq = shim.pynq.interrupt.Interrupt(pinname)
                for dev in shim.pynq.interrupt._InterruptController._uio_devices.values():
                    if getattr(getattr(dev, "uio", None), "name", None) == shim.uio.path and \
                            dev not in shim._uio_controllers:
                        shim._uio_controllers.append(dev)  # detached when this overlay unloads
                return irq
        else:
            class UioReader:
                """One per overlay, shared by its Interrupts (pynq caches its UioController per interrupt line):
                the UIO device opened and its reader attached to the event loop current when it is made."""

                def __init__(self):
                    self.uio = open(shim.uio.path, "r+b", buffering=0)
                    self.loop = _current_loop()
                    self.loop.add_reader(self.uio, self._callback)
                    self.events: list[asyncio.Event] = []

                def _callback(self) -> None:
                    self.uio.read(4)
                    events, self.events = self.events, []
                    for e in events:
                        e.set()

                def close(self) -> None:
                    if not self.loop.is_closed():
                        self.loop.remove_reader(self.uio)
                    self.uio.close()

            class Interrupt:
                """``pynq.Interrupt(pinname)`` with pynq's mechanics: ``await wait()`` enables the controller's input
                and the UIO line and waits for the UIO's 4-byte event on the loop that holds the UIO reader."""

                def __init__(self, pinname: str):
                    if shim.overlay is None or pinname not in shim.overlay.interrupt_pins:
                        raise ValueError(f"No Pin of name {pinname} found")
                    self.pinname = pinname
                    if shim.uio is not None and shim._uio_reader is None:
                        shim._uio_reader = UioReader()
                    self.reader = shim._uio_reader

                async def wait(self) -> None:
                    shim.stats["irq_wait"] += 1
                    if shim.intc is None:  # a synchronous backend (cocotb): run the design to its irq
                        shim.backend.wait_irq()
                        return
                    if asyncio.get_running_loop() is not self.reader.loop:
                        raise RuntimeError(f"Interrupt {self.pinname} waited on an event loop other than the one "
                                           f"current when it was made, which holds its UIO reader")
                    e = asyncio.Event()
                    first = not self.reader.events
                    self.reader.events.append(e)
                    shim.intc.write(SIE, 1)
                    if first:
                        self.reader.uio.write(bytes([0, 0, 0, 1]))
                    shim.intc.write(MER, 3)
                    await e.wait()
                    shim.intc.write(CIE, 1)
                    shim.intc.write(IAR, shim.intc.read(IPR))

        self.PynqBuffer, self.Overlay, self.MMIO, self.Interrupt = PynqBuffer, Overlay, MMIO, Interrupt

    # ------------------------------------------------------------------ the API of a loaded overlay
    def api(self) -> types.SimpleNamespace:
        """A pynq-like module whose ``Overlay`` returns the loaded overlay (a second driver on the same design)."""
        return types.SimpleNamespace(Overlay=lambda path, **_: self.overlay, MMIO=self.MMIO, Interrupt=self.Interrupt,
                                     allocate=self.allocate)

    # ------------------------------------------------------------------ registers
    def _window(self, address: int) -> tuple[str, int]:
        ov = self.overlay
        if ov is None:
            raise RuntimeError("no overlay is loaded")
        for name, ip in ov.ip_dict.items():
            if ip.get("phys_addr") is not None and ip["phys_addr"] <= address < ip["phys_addr"] + ip["addr_range"]:
                return name, address - ip["phys_addr"]
        raise ValueError(f"no IP of the overlay is at address {address:#x}")

    def _reg_read(self, address: int, length: int) -> int:
        if length != 4 or address % 4:
            raise ValueError(f"register read of {length} bytes at {address:#x}: 4-byte aligned words only")
        name, off = self._window(address)
        self.stats["mmio_read"] += 1
        if name in self.overlay.interrupt_controllers:
            return self.intc.read(off)
        return self.backend.read(off & ((1 << ADDR_BITS) - 1))

    def _reg_write(self, address: int, value: int) -> None:
        if address % 4:
            raise ValueError(f"register write at {address:#x}: 4-byte aligned words only")
        name, off = self._window(address)
        self.stats["mmio_write"] += 1
        if name in self.overlay.interrupt_controllers:
            self.intc.write(off, value & 0xFFFF_FFFF)
        else:
            self.backend.write(off & ((1 << ADDR_BITS) - 1), value & 0xFFFF_FFFF)

    # ------------------------------------------------------------------ memory
    def _sync(self, start: int, nbytes: int, to_device: bool) -> None:
        if start < 0 or start + nbytes > self.mem_bytes:
            raise ValueError(f"cache maintenance on [{start:#x}, {start + nbytes:#x}) outside the region")
        if to_device:
            self.stats["flush"] += 1
            self.mem[start:start + nbytes] = self.host[start:start + nbytes]
        else:
            self.stats["invalidate"] += 1
            self.host[start:start + nbytes] = self.mem[start:start + nbytes]

    def allocate(self, shape, dtype="u4", target=None, **kwargs):
        """``pynq.allocate``: a page-aligned contiguous buffer in the shim's region (the CPU's view)."""
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        size = max(PAGE, -(-n // PAGE) * PAGE)
        for i, (start, length) in enumerate(self._free):
            if length >= size:
                self._free[i:i + 1] = [(start + size, length - size)] if length > size else []
                break
        else:
            raise RuntimeError(f"Failed to allocate Memory! ({n} bytes; the shim's contiguous region has "
                               f"{sum(f[1] for f in self._free)} bytes free)")
        self.stats["allocate"] += 1
        if self.pynq is not None:
            buf = self.PynqBuffer(shape, dt, buffer=self.host, offset=start, device=self.device,
                                  device_address=self.phys_base + start, bo=start, coherent=False)
        else:
            buf = np.ndarray.__new__(self.PynqBuffer, shape, dt, buffer=self.host, offset=start)
            buf.device_address, buf.bo, buf.offset, buf.coherent = self.phys_base + start, start, 0, False
        buf._block = (start, size)
        return buf

    def _release(self, start: int, size: int) -> None:
        self._free.append((start, size))
        self._free.sort()
        merged: list[tuple[int, int]] = []
        for s, n in self._free:
            if merged and merged[-1][0] + merged[-1][1] == s:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((s, n))
        self._free = merged

    # ------------------------------------------------------------------ pynq's interrupt classes on the shim
    def _patch_pynq_interrupts(self) -> None:
        """Point pynq.interrupt's board lookups at this overlay: ``PL`` (ip_dict, interrupt pins and controllers,
        timestamp), ``MMIO`` (the register device) and ``get_uio_irq`` (the UIO pty of the PS interrupt)."""
        mod, ov = self.pynq.interrupt, self.overlay
        raw = {c["raw_irq"] for c in ov.interrupt_controllers.values()}
        pl = types.SimpleNamespace(ip_dict=ov.ip_dict, interrupt_pins=ov.interrupt_pins,
                                   interrupt_controllers=ov.interrupt_controllers, timestamp=ov.timestamp)
        uio = self.uio.path
        real_lookup = mod.get_uio_irq if not self._patched else self._patched[-1][2]
        for irq in raw:  # a UioController of an earlier shim on the same GIC line (that shim detaches it)
            mod._InterruptController._uio_devices.pop(irq, None)
        self._unpatch()
        def get_uio_irq(irq):  # pynq then opens the path and attaches its reader to get_event_loop()
            if irq not in raw:
                return real_lookup(irq)
            _UIO_LOOPS[uio] = _current_loop()
            return uio

        for name, value in (("PL", pl), ("MMIO", functools.partial(self.pynq.mmio.MMIO, device=self.device)),
                            ("get_uio_irq", get_uio_irq)):
            self._patched.append((mod, name, getattr(mod, name)))
            setattr(mod, name, value)
        self._raw_irqs = raw

    def _unpatch(self) -> None:
        for mod, name, value in reversed(self._patched):
            setattr(mod, name, value)
        self._patched = []

    def _unload(self) -> None:
        if self.pynq is not None and self._patched:
            cache = self.pynq.interrupt._InterruptController._uio_devices
            for irq in getattr(self, "_raw_irqs", ()):
                if cache.get(irq) in self._uio_controllers:
                    cache.pop(irq)
            for dev in self._uio_controllers:
                _detach_uio(dev)
            self._uio_controllers = []
            self._unpatch()
        if self._uio_reader is not None:
            self._uio_reader.close()
            self._uio_reader = None
        if self.backend is not None:
            self.backend.close()
            self.backend = None
        if self.uio is not None:
            self.uio.close()
            self.uio = self.intc = None
        self.overlay = None

    def close(self) -> None:
        self._unload()
        try:
            os.unlink(self.mem_path)
        except OSError:
            pass

    def __enter__(self) -> "PynqShim":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: the event loop each UIO pty's pynq UioController attached its reader to (recorded when pynq looked the pty up)
_UIO_LOOPS: dict[str, asyncio.AbstractEventLoop] = {}


def _detach_uio(dev) -> None:
    """What unloading the overlay's UIO driver does on a board, for a pynq ``UioController`` on a shim's pty:
    its reader removed from its loop, its file closed, and its ``__del__`` (which calls ``get_event_loop()``,
    an error when no loop is current) made a no-op."""
    if dev is None:
        return
    loop = _UIO_LOOPS.pop(dev.uio.name, None)
    if loop is not None and not loop.is_closed():
        loop.remove_reader(dev.uio)
    dev.uio.close()
    dev.__class__ = type("DetachedUioController", (type(dev),), {"__del__": lambda self: None})


def _current_loop() -> asyncio.AbstractEventLoop:
    """The running event loop, else the one current in this thread (made if none): what pynq's UioController
    attaches its reader to."""
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


def parse_intc(path: str | Path) -> dict:
    """``interrupt_controllers`` as pynq's parser gives them: ``{intc: {"parent": "", "index": i, "raw_irq": n}}``
    for every ``axi_intc`` whose ``irq`` drives the PS's PL-to-PS interrupt (GIC id :data:`RAW_IRQ` + line)."""
    root = ET.parse(path).getroot()
    arch = root.find("SYSTEMINFO").get("ARCH")
    out = {}
    for m in root.iter("MODULE"):
        if m.get("MODTYPE") != "axi_intc":
            continue
        for p in m.iter("PORT"):
            if p.get("NAME") == "irq":
                for c in p.iter("CONNECTION"):
                    if c.get("PORT") in ("IRQ_F2P", "pl_ps_irq0"):
                        out[m.get("INSTANCE")] = {"parent": "", "index": 0, "raw_irq": RAW_IRQ[arch]}
    return out


def parse_hwh(path: str | Path) -> tuple[dict, dict]:
    """``(ip_dict, interrupt_pins)`` from a hardware handoff, with the keys pynq's parser gives them:
    ``ip_dict[name] = {phys_addr, addr_range, type, fullpath, mem_id, interrupts}``,
    ``interrupt_pins["cell/pin"] = {controller, index, fullpath}``."""
    root = ET.parse(path).getroot()
    mods = {m.get("INSTANCE"): m for m in root.iter("MODULE")}
    ip_dict: dict = {}
    for m in mods.values():
        if m.get("MODTYPE") not in ("processing_system7", "zynq_ultra_ps_e"):
            continue
        for r in m.iter("MEMRANGE"):
            inst = r.get("INSTANCE")
            base, high = int(r.get("BASEVALUE"), 16), int(r.get("HIGHVALUE"), 16)
            ip_dict[inst] = {"phys_addr": base, "addr_range": high - base + 1, "type": mods[inst].get("VLNV"),
                             "fullpath": inst, "mem_id": r.get("SLAVEBUSINTERFACE"), "interrupts": {},
                             "state": None}
    pins: dict = {}
    for name, m in mods.items():
        if m.get("MODTYPE") != "axi_intc":
            continue
        for p in m.iter("PORT"):
            if p.get("NAME") == "intr":
                for i, c in enumerate(p.iter("CONNECTION")):
                    full = f"{c.get('INSTANCE')}/{c.get('PORT')}"
                    pins[full] = {"controller": name, "index": i, "fullpath": full}
                    if c.get("INSTANCE") in ip_dict:
                        ip_dict[c.get("INSTANCE")]["interrupts"][c.get("PORT")] = pins[full]
    return ip_dict, pins
