"""hw.alu.add_wrapped: a + b / a - b wrapped to INT_BITS signed bits with no wider adder, against Python ints."""
from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

import hw.alu as alu


@pytest.mark.parametrize("sub", [False, True])
@pytest.mark.parametrize("wa,sa,wb,sb", [(8, True, 8, True), (8, True, 3, True), (8, True, 1, False),
                                         (7, False, 8, True), (8, False, 8, False), (4, True, 4, True)])
def test_add_wrapped_matches_int64_style_wrap(monkeypatch, sub, wa, sa, wb, sb):
    monkeypatch.setattr(alu, "INT_BITS", 8)  # small width: the same construction, checkable exhaustively
    a, b = Signal(signed(wa) if sa else wa), Signal(signed(wb) if sb else wb)
    m = Module()
    expr = alu.add_wrapped(a, b, sub=sub)
    y = Signal(expr.shape())
    m.d.comb += y.eq(expr)
    ra = range(-(1 << (wa - 1)), 1 << (wa - 1)) if sa else range(1 << wa)
    rb = range(-(1 << (wb - 1)), 1 << (wb - 1)) if sb else range(1 << wb)
    pairs = [(x, z) for x in ra for z in rb]
    random.Random(0).shuffle(pairs)
    bad = []

    async def tb(ctx):
        for x, z in pairs[:600]:
            ctx.set(a, x)
            ctx.set(b, z)
            want = x - z if sub else x + z
            if len(expr) == 8 or max(wa, wb) + 1 > 8:  # wrapped: two's complement 8 bits
                want = ((want + 128) % 256) - 128
            if ctx.get(y) != want:
                bad.append((x, z, ctx.get(y), want))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    assert len(expr) <= 8 and not bad, bad[:5]
