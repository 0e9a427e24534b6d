"""A pynq-compatible shim backed by the RTL: ``Overlay``, ``MMIO``, ``allocate``, ``Interrupt`` with pynq's
signatures, so host code written for a PYNQ board (``jit_runtime.devices_pynq``) runs unchanged against
the Verilator model of the accelerator.

- **Memory**: a contiguous region (a shared-memory file, mapped by the host and by the simulator) at a
  DDR-like physical base address; ``allocate`` hands out page-aligned buffers in it whose
  ``physical_address`` is what the accelerator's AXI4 master sees. ``flush``/``invalidate`` are counted
  (the region is coherent) so tests can check the driver calls them.
- **Overlay(bitfile)**: reads ``<name>.hwh`` beside it (the address map and interrupt nets, see
  :meth:`fpga.zynq_shell.Shell.hwh`) into ``ip_dict``/``interrupt_pins`` and starts the simulator for the
  config that the stand-in ``<name>.bit`` names (:func:`write_sim_bitstream`).
- **MMIO**: AXI4-Lite reads/writes on the accelerator's register window.
- **Interrupt(pin).wait()**: runs the design until its ``irq``.

The simulator is a backend behind a small interface (:class:`ShimBackend`): :class:`CocotbBackend` runs
the cocotb/Verilator co-simulation (:mod:`hw.cosim.pynq_server`) in a child process; a faster compiled
harness can take its place.
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

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


class ShimBackend(Protocol):
    """What the shim needs from a simulator of the design."""

    def write(self, offset: int, value: int) -> None: ...

    def read(self, offset: int) -> int: ...

    def wait_irq(self) -> int: ...

    def close(self) -> None: ...


class CocotbBackend:
    """The design under cocotb + Verilator in a child process, DRAM served from the shim's memory file."""

    def __init__(self, cfg: HwConfig, mem_path: str, mem_bytes: int, phys_base: int, max_cycles: int = 50_000_000):
        from cocotb_tools.runner import get_runner

        from hw.cosim.runner import ROOT, _env_path, build

        bdir = build(cfg)
        _env_path()
        self._td = tempfile.TemporaryDirectory(prefix="vta-pynq-shim-")
        sock_path = os.path.join(self._td.name, "shim.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(sock_path)
        srv.listen(1)
        srv.settimeout(600)
        spec = {"socket": sock_path, "mem": mem_path, "mem_bytes": mem_bytes, "phys_base": phys_base,
                "latency": cfg.dram_latency, "bus_bytes": cfg.bus_bytes, "max_cycles": max_cycles}
        runner = get_runner("verilator")
        self.error: BaseException | None = None

        def sim() -> None:
            try:
                runner.test(test_module="hw.cosim.pynq_server", hdl_toplevel="vta_top", hdl_toplevel_lang="verilog",
                            build_dir=bdir, test_dir=self._td.name,
                            extra_env={"VTA_PYNQ_SHIM": json.dumps(spec), "PYTHONPATH": str(ROOT)},
                            log_file=os.path.join(self._td.name, "sim.log"))
            except BaseException as exc:  # reported on the next request
                self.error = exc

        self._thread = threading.Thread(target=sim, daemon=True)
        self._thread.start()
        try:
            self._conn, _ = srv.accept()
        except socket.timeout as exc:
            raise RuntimeError(f"the RTL simulator did not start; log: {self._log_tail()}") from exc
        finally:
            srv.close()
        self._r, self._w = self._conn.makefile("r"), self._conn.makefile("w")
        self.closed = False

    def _log_tail(self) -> str:
        p = Path(self._td.name) / "sim.log"
        return p.read_text(errors="replace")[-2000:] if p.exists() else "(none)"

    def _call(self, **req) -> dict:
        if self.closed:
            raise RuntimeError("the overlay's simulator was closed")
        self._w.write(json.dumps(req) + "\n")
        self._w.flush()
        line = self._r.readline()
        if not line:
            raise RuntimeError(f"the RTL simulator exited; log tail:\n{self._log_tail()}")
        return json.loads(line)

    def write(self, offset: int, value: int) -> None:
        self._call(op="write", off=offset, val=value)

    def read(self, offset: int) -> int:
        return int(self._call(op="read", off=offset)["val"])

    def wait_irq(self) -> int:
        r = self._call(op="wait_irq")
        if not r["ok"]:
            raise TimeoutError(r["error"])
        return int(r["cycles_served"])

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._call(op="close")
        except (RuntimeError, OSError):
            pass
        self.closed = True
        self._conn.close()
        self._thread.join(timeout=60)
        self._td.cleanup()


class PynqShim:
    """The ``pynq`` module's API, backed by the RTL: pass it where a driver takes ``pynq=``.

    ``phys_base``: the physical address of the contiguous region (page aligned, below 4 GiB);
    ``mem_bytes``: its size; ``backend``: ``factory(cfg, mem_path, mem_bytes, phys_base) -> ShimBackend``.
    """

    def __init__(self, phys_base: int = 0x1800_0000, mem_bytes: int = 64 << 20,
                 backend: Callable[..., ShimBackend] = CocotbBackend):
        if phys_base % PAGE or phys_base + mem_bytes > 1 << 32:
            raise ValueError(f"phys_base {phys_base:#x} must be page aligned and the region must end below 4 GiB")
        self.phys_base, self.mem_bytes, self._backend_factory = phys_base, mem_bytes, backend
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, self.mem_path = tempfile.mkstemp(prefix="vta-pynq-mem-", dir=shm)
        os.ftruncate(fd, mem_bytes)
        os.close(fd)
        self.mem = np.memmap(self.mem_path, dtype=np.uint8, mode="r+", shape=(mem_bytes,))
        self._free: list[tuple[int, int]] = [(0, mem_bytes)]
        self.stats = {"flush": 0, "invalidate": 0, "allocate": 0, "mmio_write": 0, "mmio_read": 0, "irq_wait": 0}
        self.backend: ShimBackend | None = None
        self.overlay: "PynqShim.Overlay | None" = None
        shim = self

        class PynqBuffer(np.ndarray):
            """A contiguous buffer in the shim's region (pynq.buffer.PynqBuffer's attributes)."""

            def __array_finalize__(self, obj):
                if isinstance(obj, PynqBuffer) and getattr(obj, "device_address", None) is not None:
                    delta = self.__array_interface__["data"][0] - obj.__array_interface__["data"][0]
                    self.device_address = obj.device_address + delta
                    self._root = getattr(obj, "_root", obj)
                else:
                    self.device_address = None

            @property
            def physical_address(self) -> int:
                return self.device_address

            cacheable = True
            coherent = False

            def flush(self) -> None:
                shim.stats["flush"] += 1

            def invalidate(self) -> None:
                shim.stats["invalidate"] += 1

            sync_to_device, sync_from_device = flush, invalidate

            def freebuffer(self) -> None:
                if getattr(self, "_block", None) is not None:
                    shim._release(*self._block)
                    self._block = None

            close = freebuffer

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
                self.config = cfg
                if shim.backend is not None:
                    shim.backend.close()
                shim.backend = shim._backend_factory(cfg, shim.mem_path, shim.mem_bytes, shim.phys_base)
                shim.overlay = self

            def free(self) -> None:
                if shim.overlay is self and shim.backend is not None:
                    shim.backend.close()
                    shim.backend = None

        class MMIO:
            """``pynq.MMIO(base_addr, length)`` on the accelerator's register window."""

            def __init__(self, base_addr: int, length: int = 4, **_):
                ov = shim.overlay
                if ov is None:
                    raise RuntimeError("no overlay is loaded")
                self.base_addr, self.length = base_addr, length
                for ip in ov.ip_dict.values():
                    if ip.get("phys_addr") is not None and \
                            ip["phys_addr"] <= base_addr and base_addr + length <= ip["phys_addr"] + ip["addr_range"]:
                        self._offset = base_addr - ip["phys_addr"]
                        break
                else:
                    raise ValueError(f"no IP of the overlay covers MMIO [{base_addr:#x}, {base_addr + length:#x})")

            def _check(self, offset: int) -> int:
                if offset < 0 or offset % 4 or offset + 4 > self.length:
                    raise ValueError(f"MMIO offset {offset:#x} must be word aligned and inside {self.length} bytes")
                return (self._offset + offset) & ((1 << ADDR_BITS) - 1)

            def read(self, offset: int = 0, length: int = 4, word_order: str = "little") -> int:
                if length != 4:
                    raise ValueError("the shim's MMIO reads 4-byte words")
                shim.stats["mmio_read"] += 1
                return shim.backend.read(self._check(offset))

            def write(self, offset: int, data: int) -> None:
                if not isinstance(data, (int, np.integer)):
                    raise ValueError("the shim's MMIO writes integers")
                shim.stats["mmio_write"] += 1
                shim.backend.write(self._check(offset), int(data) & 0xFFFF_FFFF)

        class Interrupt:
            """``pynq.Interrupt(pinname)``; ``await wait()`` runs the design until the pin's interrupt."""

            def __init__(self, pinname: str):
                if shim.overlay is None or pinname not in shim.overlay.interrupt_pins:
                    raise ValueError(f"No Pin of name {pinname} found")
                self.pinname = pinname

            async def wait(self) -> None:
                shim.stats["irq_wait"] += 1
                shim.backend.wait_irq()

        self.PynqBuffer, self.Overlay, self.MMIO, self.Interrupt = PynqBuffer, Overlay, MMIO, Interrupt

    # ------------------------------------------------------------------ pynq.allocate
    def allocate(self, shape, dtype="u4", target=None, **kwargs):
        """``pynq.allocate``: a page-aligned contiguous buffer in the shim's region."""
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
        buf = np.ndarray.__new__(self.PynqBuffer, shape, dt, buffer=self.mem, offset=start)
        buf.device_address = self.phys_base + start
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

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None
        try:
            os.unlink(self.mem_path)
        except OSError:
            pass

    def __enter__(self) -> "PynqShim":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
