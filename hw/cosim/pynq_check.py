"""Cross-checking a device against the simulator, program by program (for the pynq shim's tests and benchmark)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

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


class CrossCheckDevice:
    """A runtime device that runs each program on ``device`` (in place) and on one shared simulator (a copy),
    recording whether the DRAM bytes and cycle counts agree. The simulator keeps its scratchpads between
    programs, as the accelerator does between runs.

    The simulator runs on a worker thread while ``device`` runs the same program (``concurrent=True``): the
    device's driver mostly waits for the accelerator (an RTL simulation in another process, or a board), so the
    check costs little wall time beyond the device's own. Either way :meth:`run` returns when both finished."""

    def __init__(self, cfg: HwConfig, device, *, concurrent: bool = True):
        from simulator import Simulator

        self.cfg, self.device, self.sim = cfg, device, Simulator(cfg)
        self.checks: list[Check] = []
        self.label = "program"
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="vta-crosscheck-sim") if concurrent else None

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int):
        ref = dram.copy()
        if self._pool is None:
            sim_res = self.sim.run(ref, insn_addr, n_insns)
            res = self.device.run(dram, insn_addr, n_insns)
        else:
            sim = self._pool.submit(self.sim.run, ref, insn_addr, n_insns)
            try:
                res = self.device.run(dram, insn_addr, n_insns)
            except BaseException:
                wait([sim])  # the device's error wins; the simulator is idle again before it propagates
                raise
            sim_res = sim.result()
        self.checks.append(Check(f"{self.label}#{len(self.checks)}", int(sim_res.cycles), int(res.cycles),
                                 bool(np.array_equal(ref, dram))))
        return res

    def close(self) -> None:
        """Stop the simulator's worker thread."""
        if self._pool is not None:
            self._pool.shutdown()

    @property
    def mismatches(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]
