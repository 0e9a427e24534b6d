"""The CISC instructions (LOAD, STORE, GEMM, ALU, FINISH) and the RISC micro-op.

Instructions are plain frozen dataclasses; :mod:`isa.encoding` turns them into
128-bit words and back. Every instruction carries the four dependency flags.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import IntEnum
from functools import lru_cache


class Opcode(IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4


class Unit(IntEnum):
    """The units that execute instructions (fetch dispatches to the other three)."""

    LOAD = 0
    COMPUTE = 1
    STORE = 2


@dataclass(frozen=True)
class Deps:
    """VTA-style dependency flags. prev/next are relative to the unit: load -> compute -> store."""

    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    def names(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name)]


NO_DEPS = Deps()


@dataclass(frozen=True)
class _Mem:
    """Fields shared by LOAD and STORE: a 2D block of ``y_size`` rows of ``x_size`` elements.

    ``dram_base`` and ``x_stride`` count elements of ``mem``.
    """

    mem: MemType
    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    y_pad0: int = 0
    y_pad1: int = 0
    x_pad0: int = 0
    x_pad1: int = 0
    deps: Deps = NO_DEPS
    pad_value: int = 0


@dataclass(frozen=True)
class Load(_Mem):
    """2D DMA from DRAM into a scratchpad, with padding around the copied block.

    The block written is ``(y_pad0 + y_size + y_pad1)`` rows of ``(x_pad0 + x_size + x_pad1)``
    elements, stored contiguously from ``sram_base``. Every lane of a pad element holds
    ``pad_value`` (signed, sign-extended to the lane width; non-zero only for LOAD.INP, e.g. an
    activation zero point so that padding represents real zero); otherwise pads are zero.
    """

    opcode = Opcode.LOAD


@dataclass(frozen=True)
class Store(_Mem):
    """2D DMA from the OUT scratchpad to DRAM (row pitch ``x_stride``); pads and ``pad_value`` must be zero."""

    opcode = Opcode.STORE


@dataclass(frozen=True)
class Gemm:
    """acc[dst] += inp[src] x wgt[wgt]^T over uops [uop_bgn, uop_end) and two loop levels (or acc[dst] = 0 if reset).

    For ``i0 < iter_out``, ``i1 < iter_in`` and each uop u:
    ``dst = u.dst + i0*dst_factor_out + i1*dst_factor_in`` (likewise src, wgt).
    With ``overwrite`` the old accumulator is not read: acc[dst] = inp[src] x wgt[wgt]^T, so the first
    step of a reduction needs no separate reset pass; each dst may then be written at most once per
    instruction. ``reset`` takes precedence over ``overwrite``.
    """

    reset: bool
    uop_bgn: int
    uop_end: int
    iter_out: int
    iter_in: int
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    deps: Deps = NO_DEPS
    overwrite: bool = False
    opcode = Opcode.GEMM
    intrinsic = "gemm"  # the declaration (isa.intrinsics) this instruction runs; subclasses name theirs


@dataclass(frozen=True)
class Alu:
    """acc[dst] = op(acc[dst], acc[src] or imm) over the same uop loops as GEMM (or acc[dst] = 0 if reset)."""

    op: str
    reset: bool
    uop_bgn: int
    uop_end: int
    iter_out: int
    iter_in: int
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    use_imm: bool = False
    imm: int = 0
    deps: Deps = NO_DEPS
    opcode = Opcode.ALU


@dataclass(frozen=True)
class Finish:
    """Ends the program once every unit is idle."""

    deps: Deps = NO_DEPS
    opcode = Opcode.FINISH


Instruction = Load | Store | Gemm | Alu | Finish


@dataclass(frozen=True)
class Uop:
    """A RISC micro-op: scratchpad indices for the destination (acc), source (inp or acc) and weight."""

    dst: int
    src: int
    wgt: int = 0


def unit_of(insn: Instruction) -> Unit:
    """The unit that executes ``insn``: LOAD INP/WGT on load, LOAD UOP/ACC, GEMM, ALU, FINISH on compute."""
    if isinstance(insn, Load):
        return Unit.LOAD if insn.mem in (MemType.INP, MemType.WGT) else Unit.COMPUTE
    if isinstance(insn, Store):
        return Unit.STORE
    return Unit.COMPUTE


@lru_cache(maxsize=1024)
def _deps_with(deps: Deps, flags: tuple[tuple[str, bool], ...]) -> Deps:
    return replace(deps, **dict(flags))


def with_deps(insn: Instruction, **flags: bool) -> Instruction:
    """A copy of ``insn`` with some dependency flags changed (``dataclasses.replace`` of its ``deps``, made
    without re-running ``__init__``: the instructions are plain frozen dataclasses, so the copy is equal; it is
    the command queue's most frequent edit)."""
    deps = _deps_with(insn.deps, tuple(sorted(flags.items())))
    if not hasattr(insn, "__dict__") or hasattr(insn, "__post_init__"):  # a declaration's own class may check
        return replace(insn, deps=deps)
    out = object.__new__(type(insn))
    out.__dict__.update(insn.__dict__)
    out.__dict__["deps"] = deps
    return out


def n_iterations(insn: Gemm | Alu) -> int:
    """Micro-op executions of a GEMM/ALU instruction."""
    return insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)
