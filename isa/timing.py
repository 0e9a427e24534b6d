"""The timing contract as functions of ``HwConfig``: what every instruction costs, in cycles.

``docs/timing.md`` explains the rules; this module is the one place both the
simulator and the RTL tests take the numbers from.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from isa.encoding import INSN_BYTES
from isa.intrinsics import timing_of
from isa.instructions import Alu, Finish, Gemm, Instruction, Load, MemType, Store, n_iterations

if TYPE_CHECKING:
    import numpy as np

    from isa.config import HwConfig

#: Requesters of the single DRAM port, highest priority first.
PORT_PRIORITY = ("store", "compute", "load", "fetch")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def row_beats(cfg: "HwConfig", mem: MemType, x_size: int) -> int:
    """Bus beats to move one row of ``x_size`` elements of ``mem``."""
    return ceil_div(x_size * cfg.elem_bytes(MemType(mem).name.lower()), cfg.bus_bytes)


def is_nop(insn: Instruction) -> bool:
    """A LOAD/STORE with an empty block, or a GEMM/ALU with no iterations: takes one cycle, touches nothing."""
    if isinstance(insn, (Load, Store)):
        return insn.y_size == 0 or insn.x_size == 0
    if isinstance(insn, (Gemm, Alu)):
        return n_iterations(insn) == 0
    return False


def pad_elements(insn: Load) -> int:
    rows = insn.y_pad0 + insn.y_size + insn.y_pad1
    cols = insn.x_pad0 + insn.x_size + insn.x_pad1
    return rows * cols - insn.y_size * insn.x_size


def dma_cycles(cfg: "HwConfig", insn: Load | Store) -> int:
    """Cycles a LOAD/STORE holds the DRAM port once granted: latency + data beats + one per pad element."""
    beats = insn.y_size * row_beats(cfg, insn.mem, insn.x_size)
    pads = pad_elements(insn) if isinstance(insn, Load) else 0
    return cfg.dram_latency + beats + pads


def fetch_cycles(cfg: "HwConfig", n_insns: int) -> int:
    """Cycles a fetch burst of ``n_insns`` instructions holds the DRAM port."""
    return cfg.dram_latency + ceil_div(n_insns * INSN_BYTES, cfg.bus_bytes)


def exec_cycles(cfg: "HwConfig", insn: Instruction) -> int:
    """Cycles from start to end of a non-DMA instruction (GEMM, ALU, FINISH, or any NOP)."""
    if is_nop(insn) or isinstance(insn, Finish):
        return 1
    if isinstance(insn, (Gemm, Alu)):  # a tensor intrinsic (GEMM, DWMAC, ...) or ALU: its declared timing
        t = timing_of(insn)
        return n_iterations(insn) * t.ii + t.depth(cfg)
    raise ValueError(f"{type(insn).__name__} is a DMA instruction: use dma_cycles")


def in_flight(cfg: "HwConfig", insn: Gemm | Alu) -> int:
    """Micro-ops of ``insn`` still in its pipeline when a micro-op reads its operands: ``depth - 2``.

    A micro-op issued at ``u`` reads the accumulator at ``u + 1`` and writes it at ``u + depth``
    (docs/timing.md, *Pipeline and hazards*); the read sees writes up to its own cycle, so the ``depth - 2``
    micro-ops issued just before it have not written yet. A tensor intrinsic forwards their results to its
    accumulate stage; an ALU micro-op must not read (as dst or src) a row any of them writes
    (:func:`alu_hazard`)."""
    return max(timing_of(insn).depth(cfg) - 2, 0)


def alu_hazard(dst: "np.ndarray", src: "np.ndarray | None", window: int) -> tuple[int, int, int, str] | None:
    """The first ALU read-after-write hazard in a micro-op sequence, or None.

    ``dst``/``src``: the accumulator rows each micro-op (iteration order) writes / reads besides its dst (None:
    an immediate, a record op or a reset). A micro-op ``j`` that reads a row written by micro-op ``j - k``,
    ``1 <= k <= window`` (:func:`in_flight`), is a hazard: returns ``(j, k, row, "dst" | "src")``."""
    import numpy as np

    dst = np.asarray(dst)
    best = None
    for k in range(1, min(window, dst.size - 1) + 1):
        for name, reads in (("dst", dst), ("src", src)):
            if reads is None:
                continue
            hit = np.flatnonzero(np.asarray(reads)[k:] == dst[:-k])
            if hit.size and (best is None or hit[0] + k < best[0]):
                best = (int(hit[0]) + k, k, int(dst[hit[0]]), name)
    return best


def uses_port(insn: Instruction) -> bool:
    return isinstance(insn, (Load, Store)) and not is_nop(insn)
