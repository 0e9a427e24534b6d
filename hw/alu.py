"""The ALU datapath, generated from the ISA's ALU registry (:func:`isa.alu.alu_ops`).

:class:`AmaranthOps` implements the same primitives as :class:`isa.alu.NumpyOps` on
Amaranth values, so every registered op's ``fn(ops, a, b)`` elaborates to gates. Each lane
has ONE multiplier (full ``width x width`` signed product) that every op shares: ``mul``
hands out the product and :func:`alu_lane` drives its operands from the selected op. A
record op (REQUANT, ``operand="wgt"``) takes its parameters from the lane's record
(:mod:`isa.requant`) instead of ``b``.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.alu import alu_opcode_bits, alu_ops
from isa.requant import RECORD_BITS, RECORD_FIELDS, Record


#: Widest intermediate value, as in :class:`isa.alu.NumpyOps` (int64).
INT_BITS = 64


def _ext(v: Value, n: int) -> Value:
    """``v`` extended (sign or zero, by its shape) to exactly ``n`` bits."""
    pad = n - len(v)
    if pad <= 0:
        return v[:n]
    return Cat(v, (v[-1] if v.shape().signed else Const(0, 1)).replicate(pad))


def add_wrapped(a, b, sub: bool = False, iso: Callable[[Value], Value] | None = None) -> Value:
    """``a + b`` (``a - b`` with ``sub``), widened as Amaranth does but wrapped to ``INT_BITS`` signed bits when
    that is wider (the int64 of :class:`isa.alu.NumpyOps`).

    The wrapped sum is built from a ``INT_BITS - 1``-bit adder and the top bit's XOR, so no intermediate is wider
    than ``INT_BITS`` bits (the same adder in hardware; in a Verilated model, no multi-word arithmetic). ``iso``
    (see :class:`AmaranthOps`) wraps the narrower adder's result, which is used twice."""
    a, b = Value.cast(a), Value.cast(b)
    full = a - b if sub else a + b
    if len(full) <= INT_BITS:
        return full
    n = INT_BITS
    a64, b64 = _ext(a, n), _ext(b, n)
    # n bits: the low n-1 bits of the result, then the carry (borrow) into bit n-1
    low = a64[:n - 1] - b64[:n - 1] if sub else a64[:n - 1] + b64[:n - 1]
    if iso is not None:
        low = iso(low)
    return Cat(low[:n - 1], a64[n - 1] ^ b64[n - 1] ^ low[n - 1]).as_signed()


class AmaranthOps:
    """Primitives on signed Amaranth values of ``width`` bits (results may be wider, at most 64 bits like the
    int64 of :class:`isa.alu.NumpyOps`; the caller wraps).

    ``iso`` wraps every computed result (and the intermediates used twice) in a signal held at 0 while the lane is
    idle (:func:`hw.intrinsic.isolated`): a Verilated model then evaluates the lane's logic only on ALU cycles, where
    shared intermediates would otherwise be evaluated on every cycle."""

    def __init__(self, width: int, iso: Callable[[Value], Value] | None = None):
        self.width = width
        self.products: list[tuple[Value, Value, Signal]] = []
        self.iso = iso or Value.cast

    def add(self, a, b):
        return self.iso(add_wrapped(a, b, iso=self.iso))

    def sub(self, a, b):
        return self.iso(add_wrapped(a, b, sub=True, iso=self.iso))

    def mul(self, a, b):
        """The lane multiplier's product for operands ``a``, ``b`` (``width``-bit signed)."""
        p = Signal(signed(2 * self.width), name=f"product{len(self.products)}")
        self.products.append((a, b, p))
        return p

    def wrap(self, a):
        return Value.cast(a)[:self.width].as_signed()

    def round_shift(self, a, s):
        """``((a >> (s - 1)) + 1) >> 1`` for ``s > 0``, ``a`` for ``s == 0`` (``s`` unsigned).

        ``(t + 1) >> 1`` is computed as ``(t >> 1) + t[0]``, which fits ``len(a)`` bits (no wider adder)."""
        a = Value.cast(a)
        amount = Mux(s == 0, 0, s - 1)[:len(s)]
        t = self.iso(a >> amount)
        half = add_wrapped(t >> 1, t[0])  # fits len(a) bits: never wraps
        half = half[:len(a)].as_signed() if a.shape().signed else half[:len(a)]
        return self.iso(Mux(s == 0, a, half))

    def min(self, a, b):
        return self.iso(Mux(a < b, a, b))

    def max(self, a, b):
        return self.iso(Mux(a > b, a, b))

    def select(self, cond, a, b):
        return self.iso(Mux(cond, a, b))

    def lt(self, a, b):
        return a < b

    def shr(self, a, s):
        """Arithmetic shift right by signed ``s`` (negative: left), amount clamped to width-1."""
        lim = self.width - 1
        bits = max(1, lim.bit_length())
        right = Mux(s > lim, lim, Mux(s < 0, 0, s))[:bits]
        left = Mux(s < -lim, lim, Mux(s > 0, 0, -s))[:bits]
        return self.iso(Mux(s >= 0, a >> right, (a << left)[:self.width].as_signed()))


def record_of(bits: Value) -> Record:
    """The REQUANT record fields sliced out of ``RECORD_BITS`` bits (signed where the record says)."""
    out = {}
    for f in RECORD_FIELDS:
        v = bits[f.lo:f.lo + f.width]
        out[f.name] = v.as_signed() if f.signed else v
    return Record(**out)


def alu_lane(m: Module, op_code: Value, a: Value, b: Value, width: int, rec: Record | None = None,
             en: Value | None = None) -> Value:
    """One lane: ``op(a, b)`` wrapped to ``width`` bits, selected by ``op_code`` over every registered op.

    ``rec`` is the lane's REQUANT record; without it record ops are not built (their result is 0).
    With ``en`` the multiplier and the result are 0 while ``en`` is low (operand isolation)."""
    ops = AmaranthOps(width, (lambda v: _isolated(m, en, v)) if en is not None else None)
    cases, mul_of = {}, {}
    for op in alu_ops():
        if op.operand == "wgt" and rec is None:
            continue
        n0 = len(ops.products)
        val = (op.datapath or op.fn)(ops, a, rec if op.operand == "wgt" else b)  # the declaration's datapath
        if len(ops.products) - n0 > 1:
            raise ValueError(f"ALU op {op.name} multiplies {len(ops.products) - n0} times; the lane has one multiplier")
        if len(ops.products) > n0:
            mul_of[op.opcode] = ops.products[-1]
        cases[op.opcode] = Value.cast(val)[:width].as_signed()
    if mul_of:  # the one multiplier, its operands chosen by the op
        x, y = Signal(signed(width)), Signal(signed(width))
        xv: Value = Value.cast(0)
        yv: Value = Value.cast(0)
        for code, (pa, pb, _) in mul_of.items():
            xv = Mux(op_code == code, pa, xv)
            yv = Mux(op_code == code, pb, yv)
        prod = Signal(signed(2 * width))
        with _enabled(m, en):
            m.d.comb += [x.eq(xv), y.eq(yv), prod.eq(x * y)]
        for _, _, p in mul_of.values():
            m.d.comb += p.eq(prod)
    out: Value = Value.cast(0)
    for code, val in cases.items():
        out = Mux(op_code == code, val, out)
    if en is None:
        return out
    res = Signal(signed(width))
    with m.If(en):
        m.d.comb += res.eq(out)
    return res


def _isolated(m: Module, en: Value, value) -> Signal:
    """``value`` while ``en``, else 0 (as :func:`hw.intrinsic.isolated`)."""
    value = Value.cast(value)
    sig = Signal(value.shape())
    with m.If(en):
        m.d.comb += sig.eq(value)
    return sig


def _enabled(m: Module, en: Value | None):
    """``m.If(en)``, or a no-op context without ``en``."""
    return m.If(en) if en is not None else nullcontext()


class Alu(wiring.Component):
    """A vector ALU of ``lanes`` lanes of ``width``-bit signed values (combinational).

    ``rec`` holds one REQUANT record (``RECORD_BITS`` bits) per lane."""

    def __init__(self, lanes: int, width: int):
        self.lanes, self.width = lanes, width
        super().__init__({
            "op": In(alu_opcode_bits()),
            "a": In(lanes * width),
            "b": In(lanes * width),
            "rec": In(lanes * RECORD_BITS),
            "y": Out(lanes * width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        w = self.width
        for j in range(self.lanes):
            a = self.a[j * w:(j + 1) * w].as_signed()
            b = self.b[j * w:(j + 1) * w].as_signed()
            rec = record_of(self.rec[j * RECORD_BITS:(j + 1) * RECORD_BITS])
            m.d.comb += self.y[j * w:(j + 1) * w].eq(alu_lane(m, self.op, a, b, w, rec))
        return m
