"""Decode and statically check an instruction stream: one :class:`InsnInfo` per instruction.

Everything that does not depend on scratchpad contents is checked here, before the
run: opcode/field decoding, memory types, pads, dependency flags, scratchpad bounds
of LOAD/STORE, sub-beat row alignment and (per run) DRAM bounds.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, fields

import numpy as np

from isa import EncodingError, decode
from isa.alu import alu_op, alu_ops, op_supported, unsupported_reason
from isa.asm import disassemble_one, mnemonic
from isa.config import HwConfig
from isa.encoding import INSN_BYTES
from isa.intrinsics import registry_version
from isa.instructions import Alu, Deps, Finish, Gemm, Instruction, Load, MemType, Store, unit_of
from isa.timing import dma_cycles, exec_cycles, is_nop, uses_port
from simulator.errors import (DecodeError, DepsError, InvalidInstructionError, MisalignedError, OutOfRangeError,
                              StreamError)

UNITS = ("load", "compute", "store")
#: The four dependency-token queues, by id.
QUEUES = ("load->compute", "compute->load", "compute->store", "store->compute")
# (unit, flag) -> queue id; a flag missing here is a queue the unit does not have
_POP = {(0, "pop_next"): 1, (1, "pop_prev"): 0, (1, "pop_next"): 3, (2, "pop_prev"): 2}
_PUSH = {(0, "push_next"): 0, (1, "push_prev"): 1, (1, "push_next"): 2, (2, "push_prev"): 3}
_FLAGS = tuple(f.name for f in fields(Deps))  # in the order Deps.names() lists them
_MEM_NAMES = {int(m): m.name.lower() for m in MemType}


@dataclass(frozen=True, slots=True)
class InsnInfo:
    """A decoded instruction and what the timing engine needs to know about it."""

    insn: Instruction
    unit: int  # 0 load, 1 compute, 2 store
    kind: str  # LOAD.INP, GEMM, ALU.ADD, ...
    pops: tuple[int, ...]
    pushes: tuple[int, ...]
    port: bool  # holds the DRAM port
    dur: int  # port duration D if ``port`` else start-to-end cycles
    nop: bool
    dram_end: int = 0  # one past the last DRAM byte a LOAD/STORE touches (0: none)

    @property
    def asm(self) -> str:
        return disassemble_one(self.insn)


def _where(i: int, insn: Instruction) -> str:
    return f"instruction {i} ({mnemonic(insn)})"


def _deps(i: int, insn: Instruction, unit: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    pops, pushes = [], []
    deps = insn.deps
    for flag in _FLAGS:
        if not getattr(deps, flag):
            continue
        table = _POP if flag.startswith("pop") else _PUSH
        q = table.get((unit, flag))
        if q is None:
            have = [f for (u, f) in list(_POP) + list(_PUSH) if u == unit]
            raise DepsError(f"{_where(i, insn)} sets {flag}, but the {UNITS[unit]} unit has no such token queue "
                            f"(it has: {', '.join(have)})")
        (pops if table is _POP else pushes).append(q)
    return tuple(pops), tuple(pushes)


def _check_dma(i: int, insn: Load | Store, cfg: HwConfig) -> None:
    if isinstance(insn, Store):
        if insn.mem != MemType.OUT:
            raise InvalidInstructionError(f"{_where(i, insn)}: STORE only stores from OUT, not {MemType(insn.mem).name}")
        pads = {p: getattr(insn, p) for p in ("y_pad0", "y_pad1", "x_pad0", "x_pad1", "pad_value") if getattr(insn, p)}
        if pads:
            raise InvalidInstructionError(f"{_where(i, insn)}: a STORE cannot pad, but has "
                                          + ", ".join(f"{k}={v}" for k, v in pads.items()))
    elif insn.pad_value and insn.mem != MemType.INP:
        raise InvalidInstructionError(f"{_where(i, insn)}: pad_value={insn.pad_value}, but only LOAD.INP pads with a "
                                      f"value (other memories pad with 0)")
    elif insn.mem == MemType.OUT:
        raise InvalidInstructionError(f"{_where(i, insn)}: LOAD cannot write the OUT scratchpad "
                                      f"(it mirrors ACC); load UOP, WGT, INP or ACC")
    if is_nop(insn):
        return
    mem = _MEM_NAMES[insn.mem]
    depth = cfg.depth(mem)
    rows = insn.y_size + (insn.y_pad0 + insn.y_pad1 if isinstance(insn, Load) else 0)
    cols = insn.x_size + (insn.x_pad0 + insn.x_pad1 if isinstance(insn, Load) else 0)
    if insn.sram_base + rows * cols > depth:
        raise OutOfRangeError(
            f"{_where(i, insn)}: sram_base={insn.sram_base} + {rows}x{cols} elements = {insn.sram_base + rows * cols} "
            f"exceeds the {mem} scratchpad depth {depth} (allowed sram_base <= {depth - rows * cols})")
    eb, bus = cfg.elem_bytes(mem), cfg.bus_bytes
    if eb < bus:
        if (insn.dram_base * eb) % bus:
            raise MisalignedError(
                f"{_where(i, insn)}: {mem} elements of {eb} bytes are smaller than a {bus}-byte beat, so every row "
                f"must start on a beat boundary; dram_base={insn.dram_base} is byte {insn.dram_base * eb} "
                f"(dram_base must be a multiple of {bus // eb})")
        if insn.y_size > 1 and (insn.x_stride * eb) % bus:
            raise MisalignedError(
                f"{_where(i, insn)}: {mem} rows must start on {bus}-byte beat boundaries; x_stride={insn.x_stride} "
                f"elements = {insn.x_stride * eb} bytes (x_stride must be a multiple of {bus // eb})")


def _check_loop(i: int, insn: Gemm | Alu, cfg: HwConfig) -> None:
    if insn.uop_bgn > insn.uop_end:
        raise InvalidInstructionError(f"{_where(i, insn)}: uop_bgn={insn.uop_bgn} > uop_end={insn.uop_end}; the "
                                      f"micro-op range [uop_bgn, uop_end) needs uop_bgn <= uop_end")
    if isinstance(insn, Alu):
        op = alu_op(insn.op)
        if not op_supported(op, cfg):
            raise InvalidInstructionError(f"{_where(i, insn)}: {unsupported_reason(op, cfg)}")
        if op.operand == "wgt" and insn.use_imm and not insn.reset:
            raise InvalidInstructionError(f"{_where(i, insn)}: ALU.{op.name} reads its parameter record from "
                                          f"wgt[src] and has no immediate form (use_imm must be 0)")
    if is_nop(insn):
        return
    if insn.uop_end > cfg.uop_depth:
        raise OutOfRangeError(f"{_where(i, insn)}: uop_end={insn.uop_end} exceeds the uop scratchpad depth "
                              f"{cfg.uop_depth}")


def make_info(i: int, insn: Instruction, cfg: HwConfig) -> InsnInfo:
    """Check ``insn`` (instruction ``i``) against ``cfg`` and describe it for the engine."""
    unit = int(unit_of(insn))
    pops, pushes = _deps(i, insn, unit)
    if isinstance(insn, (Load, Store)):
        _check_dma(i, insn, cfg)
    elif isinstance(insn, (Gemm, Alu)):
        _check_loop(i, insn, cfg)
    port = uses_port(insn)
    dur = dma_cycles(cfg, insn) if port else exec_cycles(cfg, insn)
    nop = is_nop(insn)
    end = 0
    if isinstance(insn, (Load, Store)) and not nop:
        end = (insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size) * cfg.elem_bytes(_MEM_NAMES[insn.mem])
    return InsnInfo(insn, unit, mnemonic(insn), pops, pushes, port, dur, nop, end)


def check_dram(i: int, info: InsnInfo, cfg: HwConfig, dram_bytes: int) -> None:
    """DRAM bounds of a LOAD/STORE against a DRAM of ``dram_bytes`` bytes."""
    insn = info.insn
    if info.dram_end <= dram_bytes:
        return
    mem = _MEM_NAMES[insn.mem]
    eb = cfg.elem_bytes(mem)
    last = insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size  # one past the last element
    if last * eb > dram_bytes:
        raise OutOfRangeError(
            f"{_where(i, insn)}: DRAM elements [{insn.dram_base}, {last}) of {mem} ({eb} bytes each; dram_base="
            f"{insn.dram_base}, y_size={insn.y_size}, x_size={insn.x_size}, x_stride={insn.x_stride}) end at byte "
            f"{last * eb}, beyond the DRAM of {dram_bytes} bytes (allowed element index < {dram_bytes // eb})")


@dataclass(eq=False)
class Program:
    """A decoded, checked instruction stream, cached by its bytes (:meth:`Decoder.decode`).

    ``derived`` holds what runs compute from the program alone while it stays cached (the timed
    run's event order, :mod:`simulator.replay`); it is dropped with the program."""

    infos: list[InsnInfo]
    derived: dict = field(default_factory=dict)


#: Most instructions the decoded programs of one :class:`Decoder` may hold together (least recently used go first).
PROGRAM_CACHE_INSNS = 1 << 19


def _registry_key() -> tuple:
    """What decoding depends on besides the config: the registered ALU ops and tensor-intrinsic declarations."""
    return registry_version(), tuple(map(id, alu_ops()))


class Decoder:
    """Decodes and checks instruction words, caching by word and whole programs by their bytes
    (both dropped when an ALU op or a tensor intrinsic is registered or removed)."""

    def __init__(self, cfg: HwConfig, max_cached_insns: int = PROGRAM_CACHE_INSNS):
        self.cfg = cfg
        self._cache: dict[tuple[int, bytes], InsnInfo] = {}
        self._programs: OrderedDict[tuple[bytes, int], Program] = OrderedDict()
        self._cached_insns = 0
        self.max_cached_insns = max_cached_insns
        self._registry = _registry_key()

    @property
    def cached_insns(self) -> int:
        """Instructions held by the cached programs (at most ``max_cached_insns``)."""
        return self._cached_insns

    def program(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> list[InsnInfo]:
        """Decode ``n_insns`` instructions from ``dram`` at byte ``insn_addr`` and check the stream."""
        return self.decode(dram, insn_addr, n_insns).infos

    def decode(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> Program:
        """:meth:`program` as a cached :class:`Program`: the same bytes (and DRAM size) give the same object."""
        if insn_addr % INSN_BYTES or insn_addr < 0:
            raise StreamError(f"insn_addr={insn_addr} must be a non-negative multiple of {INSN_BYTES}")
        if n_insns < 1:
            raise StreamError(f"n_insns={n_insns}: a program needs at least a FINISH instruction")
        end = insn_addr + INSN_BYTES * n_insns
        if end > dram.size:
            raise StreamError(f"instructions [{insn_addr}, {end}) run past the DRAM of {dram.size} bytes")
        registry = _registry_key()
        if registry != self._registry:  # an ALU op or tensor intrinsic was (un)registered: words may decode anew
            self._cache.clear()
            self._programs.clear()
            self._cached_insns = 0
            self._registry = registry
        raw = dram[insn_addr:end].tobytes()
        key = (raw, dram.size)
        prog = self._programs.get(key)
        if prog is not None:
            self._programs.move_to_end(key)
            return prog
        prog = Program(self._infos(raw, insn_addr, n_insns, dram.size))
        if n_insns <= self.max_cached_insns:
            self._programs[key] = prog
            self._cached_insns += n_insns
            while self._cached_insns > self.max_cached_insns:
                _, old = self._programs.popitem(last=False)
                self._cached_insns -= len(old.infos)
        return prog

    def _infos(self, raw: bytes, insn_addr: int, n_insns: int, dram_bytes: int) -> list[InsnInfo]:
        cache, cfg, out = self._cache, self.cfg, []
        for i in range(n_insns):
            key = raw[16 * i:16 * i + 16]
            info = cache.get(key)
            if info is None:
                try:
                    insn = decode(int.from_bytes(key, "little"), cfg)
                except EncodingError as exc:
                    raise DecodeError(f"instruction {i} (byte address {insn_addr + 16 * i}): {exc}") from exc
                info = make_info(i, insn, cfg)
                if len(cache) > 65536:
                    cache.clear()
                cache[key] = info
            out.append(info)
        for i, info in enumerate(out):
            if isinstance(info.insn, Finish) and i != n_insns - 1:
                raise StreamError(f"instruction {i} is FINISH but {n_insns - 1 - i} instruction(s) follow it; "
                                  f"FINISH must be the last instruction")
        if not isinstance(out[-1].insn, Finish):
            raise StreamError(f"the stream of {n_insns} instructions does not end with FINISH "
                              f"(last is instruction {n_insns - 1}, {out[-1].kind})")
        if max(info.dram_end for info in out) > dram_bytes:
            for i, info in enumerate(out):
                check_dram(i, info, cfg, dram_bytes)
        return out
