"""Wrong programs raise clear SimulatorError subclasses (in both modes) naming instruction, field and bound."""
from __future__ import annotations

import numpy as np
import pytest

import isa
from isa import Alu, Finish, Gemm, Load, MemType, Store, Uop
from simulator import (DeadlockError, DecodeError, DepsError, InvalidInstructionError, MisalignedError,
                       OutOfRangeError, Simulator, SimulatorError, StreamError, TokenOverflowError)
from tests.simulator.helpers import Prog, deps

TINY = isa.HwConfig.from_preset("tiny")
PYNQ = isa.HwConfig.from_preset("pynq-z1")
NOP_LOAD = Load(MemType.INP, 0, 0, 0, 0, 0)
NOP_STORE = Store(MemType.OUT, 0, 0, 0, 0, 0)
NOP_GEMM = Gemm(False, 0, 0, 0, 0)


def expect(cfg, insns, exc, *parts, timing=(True, False), prog=None):
    for t in timing:
        p = prog or Prog(cfg)
        p.insns = list(insns)
        with pytest.raises(exc) as info:
            p.run(timing=t)
        assert isinstance(info.value, SimulatorError) and isinstance(info.value, ValueError)
        for part in parts:
            assert part in str(info.value), (part, str(info.value))


def test_deadlock_on_missing_token():
    expect(TINY, [NOP_LOAD, Gemm(False, 0, 1, 1, 1, deps=deps("pop_prev")), Finish()], DeadlockError,
           "compute unit waits at instruction 1 (GEMM)", "load->compute")


def test_deadlock_on_full_command_queue():
    """Store instruction 5 cannot be dispatched before store 0 runs, which needs a token from a later GEMM."""
    insns = [isa.with_deps(NOP_STORE, pop_prev=True)] * 6 + [isa.with_deps(NOP_GEMM, push_next=True)] * 6
    expect(TINY, insns + [Finish()], DeadlockError, "store unit waits at instruction 0", "compute->store",
           "fetch waits to dispatch instruction 5 (STORE.OUT) into the full store command queue (depth 4)")


def test_token_overflow():
    insns = [isa.with_deps(NOP_LOAD, push_next=True)] * (TINY.dep_queue_depth + 1) + [Finish()]
    expect(TINY, insns, TokenOverflowError, f"instruction {TINY.dep_queue_depth} (LOAD.INP)", "load->compute",
           f"dep_queue_depth={TINY.dep_queue_depth}")


@pytest.mark.parametrize("insn, flag, unit", [
    (isa.with_deps(NOP_LOAD, pop_prev=True), "pop_prev", "load"),
    (isa.with_deps(NOP_LOAD, push_prev=True), "push_prev", "load"),
    (isa.with_deps(NOP_STORE, push_next=True), "push_next", "store"),
    (isa.with_deps(NOP_STORE, pop_next=True), "pop_next", "store")])
def test_pop_push_on_missing_queue(insn, flag, unit):
    expect(TINY, [insn, Finish()], DepsError, "instruction 0", flag, f"the {unit} unit has no such token queue")


def test_stream_without_finish_or_with_trailing_instructions():
    expect(TINY, [NOP_LOAD, NOP_LOAD], StreamError, "does not end with FINISH")
    expect(TINY, [NOP_LOAD, Finish(), NOP_LOAD], StreamError, "instruction 1 is FINISH but 1 instruction(s) follow")


def test_undecodable_instruction():
    p = Prog(TINY)
    addr, n = p.add(NOP_LOAD, Finish()).stream()
    p.dram[addr + 16] = (p.dram[addr + 16] & 0xF8) | 7  # opcode 7 does not exist
    with pytest.raises(DecodeError, match=r"instruction 1 .*opcode 7") as info:
        Simulator(TINY).run(p.dram, addr, n)
    assert isinstance(info.value.__cause__, isa.EncodingError)


def test_invalid_memory_types_and_store_pads():
    expect(TINY, [Store(MemType.ACC, 0, 0, 1, 1, 1), Finish()], InvalidInstructionError, "instruction 0",
           "STORE only stores from OUT, not ACC")
    expect(TINY, [Load(MemType.OUT, 0, 0, 1, 1, 1), Finish()], InvalidInstructionError, "LOAD cannot write the OUT")
    expect(TINY, [Store(MemType.OUT, 0, 64, 1, 1, 1, x_pad0=1), Finish()], InvalidInstructionError,
           "a STORE cannot pad", "x_pad0=1")
    expect(TINY, [Store(MemType.OUT, 0, 64, 1, 1, 1, pad_value=3), Finish()], InvalidInstructionError,
           "a STORE cannot pad", "pad_value=3")
    expect(TINY, [Load(MemType.WGT, 0, 0, 1, 1, 1, x_pad0=1, pad_value=-2), Finish()], InvalidInstructionError,
           "instruction 0 (LOAD.WGT)", "pad_value=-2, but only LOAD.INP pads with a value")


def test_out_of_range_scratchpad_and_dram():
    depth = TINY.inp_depth
    expect(TINY, [Load(MemType.INP, depth - 1, 16, 1, 2, 2), Finish()], OutOfRangeError, "instruction 0 (LOAD.INP)",
           f"sram_base={depth - 1}", f"scratchpad depth {depth}")
    expect(TINY, [NOP_LOAD, Store(MemType.OUT, 0, 1 << 20, 2, 1, 1), Finish()], OutOfRangeError,
           "instruction 1 (STORE.OUT)", "beyond the DRAM of 65536 bytes")
    expect(TINY, [Gemm(False, TINY.uop_depth - 1, TINY.uop_depth + 1, 1, 1), Finish()], OutOfRangeError,
           f"uop_end={TINY.uop_depth + 1}", f"depth {TINY.uop_depth}")


def test_out_of_range_micro_op_indices():
    p = Prog(TINY)
    u = p.place_uops([Uop(0, 0, 0), Uop(1, 250, 0)])
    load = Load(MemType.UOP, 0, u, 1, 2, 2)
    expect(TINY, [load, Gemm(False, 0, 2, 2, 1, src_factor_out=10), Finish()], OutOfRangeError,
           "instruction 1 (GEMM)", "src index 260", "i_out=1, i_in=0, uop=1", "inp scratchpad (depth 256", prog=p)
    acc = TINY.acc_depth
    expect(TINY, [load, Alu("ADD", False, 0, 1, 3, 1, dst_factor_out=acc // 2, use_imm=True), Finish()],
           OutOfRangeError, "instruction 1 (ALU.ADD)", f"dst index {acc}", "i_out=2", prog=p)
    expect(TINY, [load, Alu("MAX", False, 0, 2, 1, 1), Finish()], OutOfRangeError, "src index 250",
           f"acc scratchpad (depth {acc}", prog=p)


def test_misaligned_sub_beat_rows():
    # pynq-z1: 4-byte micro-ops on an 8-byte bus: rows must start at even uop indices
    expect(PYNQ, [Load(MemType.UOP, 0, 17, 1, 2, 2), Finish()], MisalignedError, "instruction 0 (LOAD.UOP)",
           "dram_base=17", "multiple of 2")
    expect(PYNQ, [Load(MemType.UOP, 0, 16, 2, 2, 3), Finish()], MisalignedError, "x_stride=3", "multiple of 2")
    # aligned rows of an odd number of uops are fine (the last beat is partly used)
    assert Prog(PYNQ).add(Load(MemType.UOP, 0, 16, 3, 3, 4), Finish()).run().cycles > 0


def test_bad_arguments():
    p = Prog(TINY).add(Finish())
    addr, n = p.stream()
    with pytest.raises(StreamError, match="multiple of 16"):
        Simulator(TINY).run(p.dram, addr + 8, n)
    with pytest.raises(SimulatorError, match="uint8"):
        Simulator(TINY).run(p.dram.astype(np.int16), addr, n)
