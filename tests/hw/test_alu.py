"""The ALU datapath generated from the isa registry, against isa.alu.evaluate (numpy)."""
from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw.alu import Alu
from isa.alu import alu_op, alu_ops, evaluate, register_alu_op, unregister_alu_op
from isa.requant import RECORD_BITS, RECORD_FIELDS, Record

WIDTH, LANES = 32, 4


def _pack(vals) -> int:
    return sum((int(v) & 0xFFFFFFFF) << (WIDTH * i) for i, v in enumerate(vals))


def _unpack(word: int) -> np.ndarray:
    out = [(word >> (WIDTH * i)) & 0xFFFFFFFF for i in range(LANES)]
    return np.array([v - (1 << 32) if v >> 31 else v for v in out], np.int64)


def _pack_records(r: Record) -> int:
    word = 0
    for j in range(LANES):
        for f in RECORD_FIELDS:
            v = int(np.asarray(getattr(r, f.name))[j]) & ((1 << f.width) - 1)
            word |= v << (j * RECORD_BITS + f.lo)
    return word


def run_alu(cases: list[tuple]) -> list[np.ndarray]:
    dut = Alu(LANES, WIDTH)
    got = []

    async def tb(ctx):
        for code, a, b in cases:
            ctx.set(dut.op, code)
            ctx.set(dut.a, _pack(a))
            if isinstance(b, Record):
                ctx.set(dut.rec, _pack_records(b))
            else:
                ctx.set(dut.b, _pack(b))
            await ctx.delay(1e-9)
            got.append(_unpack(ctx.get(dut.y)))

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()
    return got


def _record(rng) -> Record:
    """Random REQUANT records, one per lane: every field over its whole range."""
    return Record(bias=rng.integers(-(1 << 31), 1 << 31, LANES), mult=rng.integers(-(1 << 31), 1 << 31, LANES),
                  shift=rng.integers(0, 64, LANES), zp=rng.integers(-(1 << 15), 1 << 15, LANES),
                  lo=rng.integers(-(1 << 15), 0, LANES), hi=rng.integers(0, 1 << 15, LANES))


def _operands(rng, name: str):
    a = rng.integers(-(1 << 31), 1 << 31, LANES)
    if name in {o.name for o in alu_ops() if o.operand == "wgt"}:
        return a, _record(rng)
    b = rng.integers(-(1 << 31), 1 << 31, LANES)
    if name == "SHR":
        b = rng.integers(-40, 40, LANES)
    return a, b


def test_every_registered_op_matches_numpy():
    rng = np.random.default_rng(1)
    cases = []
    for op in alu_ops():
        for _ in range(6):
            a, b = _operands(rng, op.name)
            cases.append((op.opcode, a, b))
    cases.append((alu_op("SHR").opcode, np.array([-5, 7, -(1 << 31), 1]), np.array([31, -31, 40, -40])))
    # REQUANT corners: exact ties round up, shift 0 and 63, the wrap of acc + bias, the clip bounds
    cases.append((alu_op("REQUANT").opcode, np.array([3, -3, (1 << 31) - 1, -(1 << 31)]),
                  Record(bias=np.array([0, 0, 1, -1]), mult=np.array([1, 1, -(1 << 31), (1 << 31) - 1]),
                         shift=np.array([1, 1, 0, 63]), zp=np.array([0, 0, 5, -5]),
                         lo=np.array([-100, -100, -(1 << 15), -(1 << 15)]), hi=np.array([100, 100, (1 << 15) - 1, 7]))))
    for (code, a, b), y in zip(cases, run_alu(cases)):
        want = evaluate(code, a, b, WIDTH)
        assert np.array_equal(y, want), (alu_op(code).name, a, b, y, want)


@pytest.fixture
def absdiff():
    op = register_alu_op("ABSDIFF_T", 23, lambda ops, a, b: ops.select(ops.lt(a, b), ops.sub(b, a), ops.sub(a, b)),
                         "|dst - src| (test op)")
    yield op
    unregister_alu_op("ABSDIFF_T")


def test_new_op_appears_in_hardware(absdiff):
    """A newly registered op is generated into the datapath and computes what numpy computes."""
    rng = np.random.default_rng(2)
    cases = [(absdiff.opcode, *(_operands(rng, "X"))) for _ in range(8)]
    cases += [(alu_op("ADD").opcode, *(_operands(rng, "X")))]
    for (code, a, b), y in zip(cases, run_alu(cases)):
        assert np.array_equal(y, evaluate(code, a, b, WIDTH))
