"""Run programs on the simulator and on the RTL and compare DRAM bytes and cycle counts."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw.cosim.runner import run_programs
from isa.config import HwConfig


@dataclass
class Comparison:
    name: str
    sim_cycles: int
    rtl_cycles: int
    dram_equal: bool
    timeout: bool

    @property
    def ok(self) -> bool:
        return self.dram_equal and self.sim_cycles == self.rtl_cycles and not self.timeout


def compare(cfg: HwConfig, programs: list[tuple[str, np.ndarray, int, int]]) -> list[Comparison]:
    """``programs``: ``(name, dram, insn_addr, n_insns)``. The simulator keeps one Simulator across the
    programs, like the RTL keeps its scratchpads across runs in one process."""
    from simulator import Simulator

    sim = Simulator(cfg)
    sim_out = []
    for _, dram, addr, n in programs:
        img = np.array(dram, np.uint8, copy=True)
        res = sim.run(img, addr, n)
        sim_out.append((img, int(res.cycles)))
    rtl = run_programs(cfg, [(d, a, n) for _, d, a, n in programs])
    out = []
    for (name, *_), (img, cyc), r in zip(programs, sim_out, rtl):
        eq = img.shape == r.dram.shape and bool(np.array_equal(img, r.dram))
        out.append(Comparison(name, cyc, r.cycles, eq, r.timeout))
    return out
