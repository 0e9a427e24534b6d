"""Cross-checking a device against the simulator, program by program (for the pynq shim's tests and benchmark)."""
from __future__ import annotations

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
    programs, as the accelerator does between runs."""

    def __init__(self, cfg: HwConfig, device):
        from simulator import Simulator

        self.cfg, self.device, self.sim = cfg, device, Simulator(cfg)
        self.checks: list[Check] = []
        self.label = "program"

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int):
        ref = dram.copy()
        sim_res = self.sim.run(ref, insn_addr, n_insns)
        res = self.device.run(dram, insn_addr, n_insns)
        self.checks.append(Check(f"{self.label}#{len(self.checks)}", int(sim_res.cycles), int(res.cycles),
                                 bool(np.array_equal(ref, dram))))
        return res

    @property
    def mismatches(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]
