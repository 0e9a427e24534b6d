"""The ``rtl`` device: runs a program on the generated Verilog under Verilator.

Registered with the runtime as ``"rtl"`` by :mod:`hw.register_devices`. By default it runs the
compiled harness (:mod:`hw.cosim.harness`): one harness process per design, shared by every
``rtl`` device of this Python process, built once and cached by the design hash.
``engine="cocotb"`` runs the cocotb bench instead (one simulator process per :meth:`RtlDevice.run_many`
call; slow, kept for unit tests and for cross-checking the harness).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa.config import HwConfig

ENGINES = ("harness", "cocotb")


@dataclass
class RtlResult:
    """``cycles`` as counted by the RTL's own cycle counter (register CYCLES)."""

    cycles: int
    profile: dict = field(default_factory=dict)


class RtlDevice:
    """``run(dram, insn_addr, n_insns)`` on the RTL; ``dram`` is modified in place."""

    def __init__(self, cfg: HwConfig, trace: bool = False, max_cycles: int = 50_000_000, engine: str = "harness"):
        if engine not in ENGINES:
            raise ValueError(f"unknown RTL engine {engine!r}; allowed: {', '.join(ENGINES)}")
        self.cfg, self.trace, self.max_cycles, self.engine = cfg, trace, max_cycles, engine

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> RtlResult:
        return self.run_many([(dram, insn_addr, n_insns)])[0]

    def run_many(self, jobs: list[tuple[np.ndarray, int, int]]) -> list[RtlResult]:
        if self.engine == "harness":
            from hw.cosim.harness import shared_harness

            h = shared_harness(self.cfg)
            runs = [h.run(d, a, n, self.max_cycles) for d, a, n in jobs]
        else:
            from hw.cosim.runner import run_programs

            runs = run_programs(self.cfg, jobs, max_cycles=self.max_cycles)
        out = []
        for (dram, _, _), r in zip(jobs, runs):
            if r.timeout:
                raise RuntimeError(f"RTL run did not finish within {self.max_cycles} cycles (deadlock or too long)")
            dram[...] = r.dram[:dram.size]
            out.append(RtlResult(r.cycles, {"device": "rtl", "engine": self.engine, "cycles": r.cycles,
                                            "config": self.cfg.name}))
        return out


def make_rtl_device(cfg: HwConfig, trace: bool = False) -> RtlDevice:
    return RtlDevice(cfg, trace=trace)


class CheckedRtlDevice:
    """The ``rtl-check`` device: runs every program on the RTL (compiled harness) and on the simulator and
    raises :class:`jit_runtime.errors.DeviceMismatchError` when the DRAM bytes or the cycle counts differ.

    Returns the simulator's result (with its per-instruction events, for traces); ``dram`` gets the
    (identical) final image."""

    def __init__(self, cfg: HwConfig, trace: bool = False, max_cycles: int = 50_000_000):
        from simulator import Simulator

        self.cfg = cfg
        self.sim = Simulator(cfg, trace=trace)
        self.rtl = RtlDevice(cfg, max_cycles=max_cycles)

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int):
        from jit_runtime.errors import DeviceMismatchError

        rtl_img = dram.copy()
        res = self.sim.run(dram, insn_addr, n_insns)
        rtl = self.rtl.run(rtl_img, insn_addr, n_insns)
        diff = np.flatnonzero(rtl_img != dram)
        if diff.size or rtl.cycles != int(res.cycles):
            what = [f"cycles: simulator {int(res.cycles)}, RTL {rtl.cycles}"]
            if diff.size:
                a = int(diff[0])
                what.append(f"{diff.size} DRAM byte(s) differ, first at address {a:#x} (simulator {int(dram[a])}, "
                            f"RTL {int(rtl_img[a])})")
            raise DeviceMismatchError(f"RTL and simulator disagree on {self.cfg.name}: " + "; ".join(what))
        return res


def make_checked_rtl_device(cfg: HwConfig, trace: bool = False) -> CheckedRtlDevice:
    return CheckedRtlDevice(cfg, trace=trace)
