"""The ALU datapath generated from the isa registry, against isa.alu.evaluate (numpy)."""
from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw.alu import Alu
from isa.alu import alu_op, alu_ops, evaluate, register_alu_op, unregister_alu_op

WIDTH, LANES = 32, 4


def _pack(vals) -> int:
    return sum((int(v) & 0xFFFFFFFF) << (WIDTH * i) for i, v in enumerate(vals))


def _unpack(word: int) -> np.ndarray:
    out = [(word >> (WIDTH * i)) & 0xFFFFFFFF for i in range(LANES)]
    return np.array([v - (1 << 32) if v >> 31 else v for v in out], np.int64)


def run_alu(cases: list[tuple[int, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    dut = Alu(LANES, WIDTH)
    got = []

    async def tb(ctx):
        for code, a, b in cases:
            ctx.set(dut.op, code)
            ctx.set(dut.a, _pack(a))
            ctx.set(dut.b, _pack(b))
            await ctx.delay(1e-9)
            got.append(_unpack(ctx.get(dut.y)))

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()
    return got


def _operands(rng, name: str):
    a = rng.integers(-(1 << 31), 1 << 31, LANES)
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
