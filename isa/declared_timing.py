"""``Timing``: the initiation interval and pipeline depth an intrinsic declaration carries.

Shared by the tensor-intrinsic declarations (:mod:`isa.intrinsics`) and the ALU op declarations
(:mod:`isa.alu`); the timing contract (:mod:`isa.timing`) and the RTL's pipeline stages read it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from isa.config import HwConfig

#: Deepest compute pipeline (register stages from a micro-op's issue to its accumulator write; HwConfig's: 2..16).
MAX_PIPELINE = 16
#: Shallowest: the micro-op read, then the operand read, compute and write in one stage (docs/timing.md).
MIN_PIPELINE = 2


@dataclass(frozen=True)
class Timing:
    """Initiation interval (cycles between micro-ops) and pipeline depth: the register stages from a micro-op's issue
    to its accumulator write, which is also the cycles the instruction takes after its last issue.

    ``pipeline`` is an int or a function of ``HwConfig`` (GEMM: ``cfg.gemm_pipeline``)."""

    ii: int = 1
    pipeline: int | Callable[["HwConfig"], int] = 4

    def depth(self, cfg: "HwConfig") -> int:
        return int(self.pipeline(cfg) if callable(self.pipeline) else self.pipeline)

    def problem(self) -> str:
        """Why the compute pipeline cannot run this timing (empty when it can)."""
        if self.ii != 1:
            return (f"initiation interval {self.ii}; the compute pipeline issues one micro-op per cycle (ii=1)")
        p = self.pipeline
        if not callable(p) and not (isinstance(p, int) and MIN_PIPELINE <= p <= MAX_PIPELINE):
            return (f"pipeline depth {p!r}; it must be an integer in {MIN_PIPELINE}..{MAX_PIPELINE} (or a function of "
                    f"HwConfig): the micro-op read and the operand read + write take at least {MIN_PIPELINE} stages")
        return ""


#: The ALU family's default timing: one micro-op per cycle, ``cfg.alu_pipeline`` cycles of pipeline.
ALU_TIMING = Timing(1, lambda cfg: cfg.alu_pipeline)
