"""The ALU datapath, generated from the ISA's ALU registry (:func:`isa.alu.alu_ops`).

:class:`AmaranthOps` implements the same primitives as :class:`isa.alu.NumpyOps` on
Amaranth values, so every registered op's ``fn(ops, a, b)`` elaborates to gates.
"""
from __future__ import annotations

from amaranth.hdl import Mux, Value, signed, Signal, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.alu import alu_opcode_bits, alu_ops


class AmaranthOps:
    """Primitives on signed Amaranth values of ``width`` bits (results may be wider; the caller wraps)."""

    def __init__(self, width: int):
        self.width = width

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def min(self, a, b):
        return Mux(a < b, a, b)

    def max(self, a, b):
        return Mux(a > b, a, b)

    def select(self, cond, a, b):
        return Mux(cond, a, b)

    def lt(self, a, b):
        return a < b

    def shr(self, a, s):
        """Arithmetic shift right by signed ``s`` (negative: left), amount clamped to width-1."""
        lim = self.width - 1
        bits = max(1, lim.bit_length())
        right = Mux(s > lim, lim, Mux(s < 0, 0, s))[:bits]
        left = Mux(s < -lim, lim, Mux(s > 0, 0, -s))[:bits]
        return Mux(s >= 0, a >> right, (a << left)[:self.width].as_signed())


def alu_lane(op_code: Value, a: Value, b: Value, width: int) -> Value:
    """One lane: ``op(a, b)`` wrapped to ``width`` bits, selected by ``op_code`` over every registered op."""
    ops = AmaranthOps(width)
    result = Signal(signed(width))
    cases = {}
    for op in alu_ops():
        cases[op.opcode] = Value.cast(op.fn(ops, a, b))[:width].as_signed()
    out: Value = Value.cast(0)
    for code, val in cases.items():
        out = Mux(op_code == code, val, out)
    return out


class Alu(wiring.Component):
    """A vector ALU of ``lanes`` lanes of ``width``-bit signed values (combinational)."""

    def __init__(self, lanes: int, width: int):
        self.lanes, self.width = lanes, width
        super().__init__({
            "op": In(alu_opcode_bits()),
            "a": In(lanes * width),
            "b": In(lanes * width),
            "y": Out(lanes * width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        w = self.width
        for j in range(self.lanes):
            a = self.a[j * w:(j + 1) * w].as_signed()
            b = self.b[j * w:(j + 1) * w].as_signed()
            m.d.comb += self.y[j * w:(j + 1) * w].eq(alu_lane(self.op, a, b, w))
        return m
