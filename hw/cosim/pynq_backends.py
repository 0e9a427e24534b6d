"""Simulators behind the pynq shim (:mod:`hw.cosim.pynq_shim`): :class:`HarnessBackend` (``vta_accel`` on the
compiled Verilator harness, concurrent with the host) and :class:`CocotbBackend` (cocotb, bare ``vta_top``)."""
from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Protocol

from isa.config import HwConfig
from isa.registers import CTRL

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


class HarnessBackend:
    """``vta_accel`` on the compiled Verilator harness (:mod:`hw.cosim.harness`, ``top="vta_accel"``), DRAM served
    from the shim's memory file at its physical base. A device thread advances the design from each CTRL start
    write until its interrupt (in chunks of ``chunk`` cycles, so register accesses interleave as on a board) and
    reports the interrupt level to the listeners (:meth:`listen`)."""

    concurrent = True

    def __init__(self, cfg: HwConfig, mem_path: str, mem_bytes: int, phys_base: int, max_cycles: int = 50_000_000,
                 chunk: int = 1 << 16):
        from hw.cosim.harness import Harness

        self.h = Harness(cfg, top="vta_accel")
        self.h.map_memory(mem_path, mem_bytes, phys_base)
        self.h.reset()  # the bitstream download
        self.max_cycles, self.chunk = max_cycles, chunk
        self.cycles_run = 0  # clock cycles the device thread ran
        self.busy_s = 0.0  # wall seconds the device thread spent running them (the shim's speed: cycles_run / busy_s)
        self.oob = 0
        self.error: str | None = None
        self._cv = threading.Condition()
        self._host_waiting = 0
        self._active = False
        self._run_cycles = 0
        self._fired = threading.Event()
        self._listeners: list[Callable[[bool], None]] = []
        self.closed = False
        self._thread = threading.Thread(target=self._device, name="vta-shim-device", daemon=True)
        self._thread.start()

    def listen(self, fn: Callable[[bool], None]) -> None:
        """Call ``fn(level)`` whenever the accelerator's ``irq`` changes (from the device thread)."""
        self._listeners.append(fn)

    def _level(self, high: bool) -> None:
        for fn in self._listeners:
            fn(high)

    def _device(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self.closed or (self._active and not self._host_waiting))
                if self.closed:
                    return
                t0 = time.perf_counter()
                try:
                    fired, k, oob = self.h.run_until_irq(min(self.chunk, self.max_cycles - self._run_cycles))
                except Exception as exc:  # the harness died: report it to the waiting host
                    self.error, fired, k, oob = f"the harness failed: {exc}", False, 0, 0
                self.busy_s += time.perf_counter() - t0
                self.cycles_run += k
                self._run_cycles += k
                self.oob = oob
                if not fired and self._run_cycles >= self.max_cycles and self.error is None:
                    self.error = f"no interrupt within {self.max_cycles} cycles (deadlock or too long)"
                if fired or self.error:
                    self._active = False
                    self._fired.set()
                if fired:
                    self._level(True)  # under the lock: a later start write cannot be overtaken

    def _host(self, fn: Callable, *args):
        """Run a register access between two device-thread chunks."""
        with self._cv:
            self._host_waiting += 1
            try:
                return fn(*args)
            finally:
                self._host_waiting -= 1
                self._cv.notify_all()

    def write(self, offset: int, value: int) -> None:
        if self.closed:
            raise RuntimeError("the overlay's simulator was closed")
        start = offset == CTRL and value & 1

        def wr():
            self.h.write_reg(offset, value)
            if start:
                self._fired.clear()
                self._level(False)  # done drops with the start (the harness skips the stale level, see tb.cpp)
                self._active, self._run_cycles, self.error = True, 0, None
        self._host(wr)

    def read(self, offset: int) -> int:
        if self.closed:
            raise RuntimeError("the overlay's simulator was closed")
        return self._host(self.h.read_reg, offset)

    def wait_irq(self) -> int:
        self._fired.wait()
        if self.error:
            raise TimeoutError(self.error)
        return self.cycles_run

    def close(self) -> None:
        if self.closed:
            return
        with self._cv:
            self.closed = True
            self._cv.notify_all()
        self._thread.join(timeout=60)
        self.h.close()
