"""The ``rtl`` device: runs a program on the generated Verilog under Verilator (cocotb co-simulation).

Registered with the runtime as ``"rtl"`` by :mod:`jit_runtime.devices_rtl`. Each ``run`` starts
one simulator process (the Verilator model is built once per design and cached);
:meth:`RtlDevice.run_many` runs several programs in one process.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa.config import HwConfig


@dataclass
class RtlResult:
    """``cycles`` as counted by the RTL's own cycle counter (register CYCLES)."""

    cycles: int
    profile: dict = field(default_factory=dict)


class RtlDevice:
    """``run(dram, insn_addr, n_insns)`` on the RTL; ``dram`` is modified in place."""

    def __init__(self, cfg: HwConfig, trace: bool = False, max_cycles: int = 50_000_000):
        self.cfg, self.trace, self.max_cycles = cfg, trace, max_cycles

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> RtlResult:
        return self.run_many([(dram, insn_addr, n_insns)])[0]

    def run_many(self, jobs: list[tuple[np.ndarray, int, int]]) -> list[RtlResult]:
        from hw.cosim.runner import run_programs

        out = []
        for (dram, _, _), r in zip(jobs, run_programs(self.cfg, jobs, max_cycles=self.max_cycles)):
            if r.timeout:
                raise RuntimeError(f"RTL run did not finish within {self.max_cycles} cycles (deadlock or too long)")
            dram[...] = r.dram[:dram.size]
            out.append(RtlResult(r.cycles, {"device": "rtl", "cycles": r.cycles, "config": self.cfg.name}))
        return out


def make_rtl_device(cfg: HwConfig, trace: bool = False) -> RtlDevice:
    return RtlDevice(cfg, trace=trace)
