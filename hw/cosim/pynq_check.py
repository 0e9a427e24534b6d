"""Cross-checking a device against the simulator, program by program (for the pynq shim's tests and benchmark)."""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context

import numpy as np

from isa.config import HwConfig


@dataclass
class Check:
    name: str
    sim_cycles: int
    dev_cycles: int
    dram_equal: bool

    @property
    def ok(self) -> bool:
        return self.dram_equal and self.sim_cycles == self.dev_cycles


_WORKER_SIM = None  # the simulator of a worker process (worker="process")


def _worker_start(cfg: HwConfig) -> None:
    global _WORKER_SIM
    from simulator import Simulator

    _WORKER_SIM = Simulator(cfg)


def _worker_run(dram: np.ndarray, insn_addr: int, n_insns: int) -> tuple[np.ndarray, int]:
    res = _WORKER_SIM.run(dram, insn_addr, n_insns)
    return dram, int(res.cycles)


class CrossCheckDevice:
    """A runtime device that runs each program on ``device`` (in place) and on one shared simulator (a copy),
    recording whether the DRAM bytes and cycle counts agree. The simulator keeps its scratchpads between
    programs, as the accelerator does between runs.

    ``worker``: where the simulator runs while ``device`` runs the same program: ``"thread"`` (a worker thread:
    the device's driver mostly waits for the accelerator, an RTL simulation in another process or a board),
    ``"process"`` (a worker process, started here: the simulator does not share this interpreter's lock with the
    driver; the image goes there and back by pickling) or ``"none"`` (one after the other, in this thread).
    Either way :meth:`run` returns when both finished, and checks are made in the order of the runs."""

    def __init__(self, cfg: HwConfig, device, *, worker: str = "thread"):
        if worker not in ("thread", "process", "none"):
            raise ValueError(f"worker={worker!r}: allowed are 'thread', 'process', 'none'")
        self.cfg, self.device, self.worker = cfg, device, worker
        self.sim = None
        self.checks: list[Check] = []
        self.label = "program"
        self._pool = None
        self._running: tuple | None = None  # the program start() started, until finish()
        if worker == "process":
            self._pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_worker_start,
                                             initargs=(cfg,))
            self._pool.submit(int).result()  # started (interpreter, imports, simulator) before the first run
        else:
            from simulator import Simulator

            self.sim = Simulator(cfg)
            if worker == "thread":
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="vta-crosscheck-sim")

    def _simulate(self, ref: np.ndarray, insn_addr: int, n_insns: int) -> tuple[np.ndarray, int]:
        return ref, int(self.sim.run(ref, insn_addr, n_insns).cycles)

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int):
        if not hasattr(self.device, "start"):
            ref = dram.copy()
            sim = self._submit(ref, insn_addr, n_insns)
            try:
                res = self.device.run(dram, insn_addr, n_insns)
            except BaseException:
                if sim is not None:
                    wait([sim])  # the device's error wins; the simulator is idle again before it propagates
                raise
            return self._record(self.label, dram, ref, sim, res, insn_addr, n_insns)
        self.start(dram, insn_addr, n_insns)
        return self.finish()

    def start(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> None:
        """Start the program on the device (its ``start``: the device runs while the caller goes on) and on the
        simulator's worker; :meth:`finish` waits for both and records the check."""
        if self._running is not None:
            raise RuntimeError("a program is already running: call finish() first")
        ref = dram.copy()
        sim = self._submit(ref, insn_addr, n_insns)
        try:
            self.device.start(dram, insn_addr, n_insns)
        except BaseException:
            if sim is not None:
                wait([sim])
            raise
        self._running = (self.label, dram, ref, sim, insn_addr, n_insns)  # the label when started

    def finish(self):
        """Wait for the started program on the device and the simulator; record and return the device's result."""
        if self._running is None:
            raise RuntimeError("finish() without a started program")
        (label, dram, ref, sim, insn_addr, n_insns), self._running = self._running, None
        try:
            res = self.device.finish()
        except BaseException:
            if sim is not None:
                wait([sim])
            raise
        return self._record(label, dram, ref, sim, res, insn_addr, n_insns)

    def _submit(self, ref: np.ndarray, insn_addr: int, n_insns: int):
        if self._pool is None:
            return None  # worker="none": simulated in _record
        return self._pool.submit(_worker_run if self.worker == "process" else self._simulate, ref, insn_addr,
                                 n_insns)

    def _record(self, label: str, dram: np.ndarray, ref: np.ndarray, sim, res, insn_addr: int, n_insns: int):
        ref, sim_cycles = self._simulate(ref, insn_addr, n_insns) if sim is None else sim.result()
        self.checks.append(Check(f"{label}#{len(self.checks)}", sim_cycles, int(res.cycles),
                                 bool(np.array_equal(ref, dram))))
        return res

    def close(self) -> None:
        """Stop the simulator's worker (thread or process)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    @property
    def mismatches(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]
