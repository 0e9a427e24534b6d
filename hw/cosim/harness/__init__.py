"""The compiled RTL harness: the Verilated accelerator, the DRAM model and the register file driven from C++.

One harness process runs many programs; no Python runs per clock cycle. DRAM images travel
through shared memory (a file in ``/dev/shm`` mapped by both sides), commands and results
through the process's stdin/stdout::

    from hw.cosim.harness import Harness

    with Harness(make_config("pynq-z1")) as h:        # builds (or reuses) the cached binary, starts it
        dram, cycles = h.run(dram_image, insn_addr, n_insns)   # a copy of the final image, CYCLES
        h.write_reg(INSN_ADDR, 0x100); h.read_reg(CYCLES)        # AXI4-Lite register access
        h.step(10)                                               # free-running clock cycles

The binary is built by :mod:`hw.cosim.harness.build` (sources ``tb.cpp`` and ``dram_model.h`` in
this folder) and cached under ``build/rtl/harness/`` by the design hash. The bench drives only the
design's top-level ports (AXI4 master, AXI4-Lite slave, ``irq``), so it works for any design
that keeps those ports.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isa.config import HwConfig

#: Largest image the harness accepts (the AXI address is 32 bits).
MAX_IMAGE_BYTES = 1 << 32


class HarnessError(RuntimeError):
    """The harness process failed or answered with an error."""


@dataclass
class HarnessRun:
    """One program's result: the final DRAM image, the CYCLES register, whether it ran past ``max_cycles``,
    the clock cycles the bench ran and the bytes the program touched outside the image."""

    dram: np.ndarray
    cycles: int
    timeout: bool
    bench_cycles: int
    out_of_image: int


def _shm_dir() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class Harness:
    """A running harness process for one :class:`HwConfig` (built on first use, cached by design hash).

    ``top``: ``"vta_top"`` (the generated accelerator) or ``"vta_accel"`` (the module Vivado instantiates in the
    Zynq shell, :mod:`hw.accel_wrapper`). ``pgo``: the profile-guided build (:func:`build_harness`; a faster
    binary for long runs, twice the build time). ``binary``: run that harness binary instead of the cached build."""

    def __init__(self, cfg: HwConfig, verbose: bool = False, top: str = "vta_top", *, pgo: bool = False,
                 binary: str | Path | None = None):
        from hw.cosim.harness.build import build_harness

        self.cfg, self.top = cfg, top
        if binary is None:
            binary = build_harness(cfg, verbose=verbose, top=top, pgo=pgo, train=pgo_training)
        self.binary = Path(binary)
        if not self.binary.is_file():
            raise FileNotFoundError(f"harness binary {self.binary} does not exist")
        self._dir = tempfile.TemporaryDirectory(prefix="vta-harness-", dir=_shm_dir())
        self._image = Path(self._dir.name) / "dram.bin"
        self._lock = threading.Lock()
        self._proc = subprocess.Popen([str(self.binary), str(cfg.dram_latency), str(cfg.bus_bytes)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, bufsize=1)

    # ------------------------------------------------------------------ protocol
    def _ask(self, line: str) -> list[str]:
        p = self._proc
        if p.poll() is not None:
            raise HarnessError(f"harness process exited with {p.returncode}: {p.stderr.read()[-2000:]}")
        try:
            p.stdin.write(line + "\n")
            p.stdin.flush()
            reply = p.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            raise HarnessError(f"harness process died: {e}") from e
        if not reply:
            p.wait(timeout=5)
            raise HarnessError(f"harness process exited with {p.returncode}: {p.stderr.read()[-2000:]}")
        words = reply.split()
        if words[0] != "ok":
            raise HarnessError(f"harness: {reply.strip()} (command {line.split()[0]!r})")
        return words[1:]

    # ------------------------------------------------------------------ API
    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int, max_cycles: int = 50_000_000) -> HarnessRun:
        """Reset the design (scratchpads keep their contents), run the program at ``insn_addr`` on a copy of
        ``dram`` until ``irq`` or ``max_cycles``; returns the final image and the cycle count."""
        img = np.ascontiguousarray(dram, dtype=np.uint8).reshape(-1)
        if not 0 < img.size < MAX_IMAGE_BYTES:
            raise ValueError(f"DRAM image of {img.size} bytes; allowed 1..{MAX_IMAGE_BYTES - 1}")
        if n_insns < 1 or insn_addr < 0 or insn_addr + 16 * n_insns > img.size:
            raise ValueError(f"program at {insn_addr} with {n_insns} instructions lies outside the "
                             f"{img.size}-byte image")
        if max_cycles < 1:
            raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
        with self._lock:
            mm = np.memmap(self._image, dtype=np.uint8, mode="w+", shape=(img.size,))
            mm[:] = img
            mm.flush()
            cyc, timeout, bench, oob = self._ask(f"run {self._image} {img.size} {int(insn_addr)} {int(n_insns)} "
                                                 f"{int(max_cycles)}")
            out = np.array(mm)
            del mm
        return HarnessRun(out, int(cyc), timeout == "1", int(bench), int(oob))

    def run_many(self, jobs: list[tuple[np.ndarray, int, int]], max_cycles: int = 50_000_000) -> list[HarnessRun]:
        """``(dram, insn_addr, n_insns)`` jobs in order, in this process (scratchpads persist between them)."""
        return [self.run(d, a, n, max_cycles) for d, a, n in jobs]

    def write_reg(self, offset: int, value: int) -> None:
        """An AXI4-Lite write to the register at byte ``offset`` (see :mod:`hw.regfile`)."""
        with self._lock:
            self._ask(f"wr {int(offset)} {int(value) & 0xFFFFFFFF}")

    def read_reg(self, offset: int) -> int:
        """An AXI4-Lite read of the register at byte ``offset``."""
        with self._lock:
            return int(self._ask(f"rd {int(offset)}")[0])

    def reset(self) -> None:
        """Two cycles of ``rst`` (scratchpads keep their contents)."""
        with self._lock:
            self._ask("reset")

    def step(self, n: int) -> bool:
        """Run ``n`` clock cycles (DRAM served from the last run's image); returns ``irq``."""
        with self._lock:
            return self._ask(f"step {int(n)}")[0] == "1"

    def map_memory(self, path: str | Path, nbytes: int, base: int) -> None:
        """Serve the AXI master from the file ``path`` (``nbytes``, shared with the caller, e.g. the pynq shim's
        contiguous memory) at AXI address ``base``; no reset, the design keeps running from where it is."""
        if nbytes < 1 or base < 0 or base + nbytes > MAX_IMAGE_BYTES:
            raise ValueError(f"memory [{base:#x}, {base + nbytes:#x}) must be non-empty and below 4 GiB")
        with self._lock:
            self._ask(f"map {path} {int(nbytes)} {int(base)}")

    def run_until_irq(self, max_cycles: int) -> tuple[bool, int, int]:
        """Run until the interrupt of the run started last (``irq`` seen low since that CTRL start write, then
        high) or ``max_cycles``; returns ``(fired, cycles run, bytes touched outside the mapped memory)``."""
        with self._lock:
            fired, k, oob = self._ask(f"runirq {int(max_cycles)}")
        return fired == "1", int(k), int(oob)

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the harness process has used so far (Linux ``/proc``; 0.0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self._proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        p = self._proc
        if p.poll() is None:
            try:
                p.stdin.write("quit\n")
                p.stdin.flush()
                p.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
                p.wait()
        for f in (p.stdin, p.stdout, p.stderr):
            f.close()
        self._dir.cleanup()

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def pgo_training(exe: Path, cfg: HwConfig) -> None:
    """The PGO training workload on the instrumented binary ``exe``: a seeded 128^3 blocked GEMM (the GEMM-bound
    cycles the long runs spend their time in) and 8 seeded random programs (loads, stores, ALU ops, hazards)."""
    from dataclasses import replace

    from hw.random_programs import random_program
    from jit_runtime.blocked_gemm import blocked_gemm, default_plan

    p, _ = blocked_gemm(cfg, replace(default_plan(cfg), n=128, k=128, m=128))
    with Harness(cfg, binary=exe) as h:
        h.run(p.dram, p.insn_addr, p.n_insns)
        for seed in range(8):
            q = random_program(cfg, seed)
            h.run(q.dram, q.insn_addr, q.n_insns)


_SHARED: dict = {}


def shared_harness(cfg: HwConfig) -> Harness:
    """One harness process per design for the whole Python process (closed at exit)."""
    from hw.cosim.harness.build import harness_key

    key = harness_key(cfg)
    h = _SHARED.get(key)
    if h is None or h._proc.poll() is not None:
        h = _SHARED[key] = Harness(cfg)
    return h
