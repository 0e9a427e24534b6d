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


@pytest.mark.parametrize("depth,gaps", [(0, False), (1, False), (2, False), (3, False), (11, False), (12, True)])
def test_pipelined_lane_gives_each_op_after_its_stages(depth, gaps):
    """``alu_lane`` with ``depth`` register stages per op (the compute pipeline's form): a new micro-op every cycle
    (II = 1, ops mixed), each result ``depth`` cycles after its operands equals numpy's. At depth >= 1 the lane
    multiplier is registered, at >= 2 its inputs too, so REQUANT's record fields must be delayed to meet its
    product: a misaligned stage would mix micro-ops. At 11 every op fits with a register after each primitive and
    the DSP-sized multiplier (the deep lane): REQUANT then takes all 11; at 12 the ops' results wait a level more
    (one value per level, muxed by opcode), and with ``gaps`` micro-ops come with idle cycles between them (the deep
    registers load only while their level holds a micro-op)."""
    from amaranth.hdl import Module, Signal, signed

    from hw.alu import alu_lane, record_of

    rng = np.random.default_rng(depth)
    m = Module()
    op = Signal(8)
    a, b = Signal(signed(WIDTH)), Signal(signed(WIDTH))
    rec_bits = Signal(RECORD_BITS)
    valid = [Signal(name=f"v{k}") for k in range(depth + 1)]
    m.d.sync += [valid[k + 1].eq(valid[k]) for k in range(depth)]
    tick = Signal()
    m.d.sync += tick.eq(~tick)  # a sync domain even at depth 0
    ops = alu_ops()
    levels = {o.opcode: depth for o in ops}
    # the op code is the instruction's (constant while its micro-ops flow): one run per op, ops in turn
    y = alu_lane(m, op, a, b, WIDTH, record_of(rec_bits), enable=lambda lv: valid[lv], levels=levels)
    out = Signal(signed(WIDTH))
    m.d.comb += out.eq(y)
    n = 12

    async def tb(ctx):
        for o in ops:
            cases = [_operands(rng, o.name) for _ in range(n)]
            ctx.set(op, o.opcode)
            got = []
            k = 0
            for t in range(3 * n + depth + 1):
                issue = k < n and not (gaps and t % 3 == 1)
                if issue:
                    av, bv = cases[k]
                    k += 1
                    ctx.set(a, int(av[0]))
                    if isinstance(bv, Record):
                        ctx.set(rec_bits, _pack_records(bv) & ((1 << RECORD_BITS) - 1))
                    else:
                        ctx.set(b, int(bv[0]))
                else:  # an idle cycle's operands are anything: the lane must not use them
                    ctx.set(a, int(rng.integers(-1 << 31, 1 << 31)))
                ctx.set(valid[0], int(issue))
                if ctx.get(valid[depth]):
                    got.append(ctx.get(out))
                await ctx.tick()
            assert len(got) == n
            for (av, bv), g in zip(cases, got):
                bb = Record(**{f.name: np.asarray(getattr(bv, f.name))[:1] for f in RECORD_FIELDS}) \
                    if isinstance(bv, Record) else bv[:1]
                want = int(evaluate(o, av[:1], bb, WIDTH)[0])
                assert g == want, (o.name, depth, int(av[0]), g, want)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
