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
    shared intermediates would otherwise be evaluated on every cycle.

    Stages: every value has a *level* (register stages after the lane's inputs, level 0). ``mul``'s product comes
    ``mul_level`` levels after its operands (the lane multiplier's input and output registers, see
    :func:`alu_lane`); a primitive whose operands are at different levels delays the earlier ones with registers
    (``m`` needed), so an op written as one expression (``fn(ops, a, b)``) is a correct pipeline. With ``enable``
    (a function of the level) each result is isolated by its own level's enable instead of ``iso``."""

    def __init__(self, width: int, iso: Callable[[Value], Value] | None = None, *, m: Module | None = None,
                 enable: Callable[[int], Value] | None = None, mul_level: int = 0, mul_in: int | None = None):
        self.width = width
        self.products: list[tuple[Value, Value, Signal]] = []
        self.iso = iso or Value.cast
        self.m, self.enable, self.mul_level = m, enable, mul_level
        #: register stages the op being elaborated may take (None: no automatic registers, see :meth:`cut`)
        self.budget: int | None = None
        #: the level the shared multiplier takes its operands at (None: wherever they are, for a dry elaboration)
        self.mul_in = mul_in
        self.mul_operand_levels: list[int] = []
        self._levels: dict[int, tuple[Value, int]] = {}
        self._delayed: dict[tuple[int, int], Value] = {}

    def cut(self, v, level: int) -> tuple[Value, int]:
        """With a budget (a deep lane, see :func:`alu_lane`): ``v`` registered, one level later, while the op has
        levels left; else ``v`` unchanged. Every primitive's result goes through here, so a deep lane has one
        primitive (one carry chain, compare or shifter) between registers."""
        if self.budget is None or level + 1 > self.budget:
            return v, level
        v = Value.cast(v)
        r = Signal(v.shape())
        with _enabled(self.m, self.enable(level) if self.enable is not None else None):
            self.m.d.sync += r.eq(v)
        self._levels[id(r)] = (r, level + 1)
        return r, level + 1

    def _done(self, v, level: int, isolate: bool = True) -> Value:
        """A primitive's result at ``level``: isolated, then registered by :meth:`cut` when the op has levels."""
        v = self._at(v, level, isolate)
        r, lv = self.cut(v, level)
        return self._at(r, lv, isolate=False) if r is not v else v

    # ---------------------------------------------------------------- levels
    def level(self, v) -> int:
        got = self._levels.get(id(v))
        return got[1] if got is not None and got[0] is v else 0

    def _at(self, v, level: int, isolate: bool = True) -> Value:
        v = Value.cast(v)
        if isolate:
            v = self._iso(v, level)
        self._levels[id(v)] = (v, level)
        return v

    def _iso(self, v, level: int) -> Value:
        if self.enable is None:
            return self.iso(v)
        return _isolated(self.m, self.enable(level), v)

    def delay(self, v, n: int) -> Value:
        """``v`` ``n`` cycles later (registers, shared between uses)."""
        if n <= 0:
            return v
        key = (id(v), n)
        hit = self._delayed.get(key)
        if hit is not None and hit[0] is v:
            return hit[1]
        src = Value.cast(self.delay(v, n - 1))
        got = Signal(src.shape())
        # loaded only in the cycles a micro-op's values are at the source's level (the deep lane's enables): the
        # register then holds, which its users (isolated or registered by their own level's enable) never see
        with _enabled(self.m, self.enable(self.level(v) + n - 1) if self.enable is not None else None):
            self.m.d.sync += got.eq(src)
        self._delayed[key] = (v, got)  # holds v: its id stays unique while cached
        self._levels[id(got)] = (got, self.level(v) + n)
        return got

    def _align(self, *vals):
        top = max(self.level(v) for v in vals)
        return [self.delay(v, top - self.level(v)) for v in vals], top

    # ---------------------------------------------------------------- primitives
    def add(self, a, b):
        (a, b), lv = self._align(a, b)
        return self._done(add_wrapped(a, b, iso=lambda v: self._iso(v, lv)), lv)

    def sub(self, a, b):
        (a, b), lv = self._align(a, b)
        return self._done(add_wrapped(a, b, sub=True, iso=lambda v: self._iso(v, lv)), lv)

    def mul(self, a, b):
        """The lane multiplier's product for operands ``a``, ``b`` (``width``-bit signed), ``mul_level`` levels
        after them (the operands must be at level 0: the multiplier is shared by every op of the lane)."""
        (a, b), lv = self._align(a, b)
        self.mul_operand_levels.append(lv)
        if self.budget is not None:  # a deep lane: operands delayed to the multiplier's own input level
            if self.mul_in is not None:
                if lv > self.mul_in:
                    raise ValueError(f"ALU op: ops.mul operands at level {lv}, after the lane multiplier's inputs "
                                     f"({self.mul_in})")
                a, b, lv = self.delay(a, self.mul_in - lv), self.delay(b, self.mul_in - lv), self.mul_in
        elif lv and self.mul_level:
            raise ValueError("ALU op: ops.mul takes values at the lane's first stage (the lane multiplier's "
                             "registers are shared by every op)")
        p = Signal(signed(2 * self.width), name=f"product{len(self.products)}")
        self.products.append((a, b, p))
        self._levels[id(p)] = (p, lv + self.mul_level)
        return p

    def wrap(self, a):
        return self._at(Value.cast(a)[:self.width].as_signed(), self.level(a), isolate=False)

    def round_shift(self, a, s):
        """``((a >> (s - 1)) + 1) >> 1`` for ``s > 0``, ``a`` for ``s == 0`` (``s`` unsigned).

        ``(t + 1) >> 1`` is computed as ``(t >> 1) + t[0]``, which fits ``len(a)`` bits (no wider adder)."""
        (a, s), lv = self._align(a, s)
        a = Value.cast(a)
        amount = Mux(s == 0, 0, s - 1)[:len(s)]
        t = self._iso(a >> amount, lv)
        t, lv2 = self.cut(t, lv)  # a deep lane registers the shifter's output before the rounding add
        a, s = self.delay(a, lv2 - lv), self.delay(s, lv2 - lv)
        half = add_wrapped(t >> 1, t[0])  # fits len(a) bits: never wraps
        half = half[:len(a)].as_signed() if a.shape().signed else half[:len(a)]
        return self._done(Mux(s == 0, a, half), lv2)

    def min(self, a, b):
        (a, b), lv = self._align(a, b)
        return self._done(Mux(a < b, a, b), lv)

    def max(self, a, b):
        (a, b), lv = self._align(a, b)
        return self._done(Mux(a > b, a, b), lv)

    def select(self, cond, a, b):
        (cond, a, b), lv = self._align(cond, a, b)
        return self._done(Mux(cond, a, b), lv)

    def lt(self, a, b):
        (a, b), lv = self._align(a, b)
        return self._done(a < b, lv, isolate=False)

    def shr(self, a, s):
        """Arithmetic shift right by signed ``s`` (negative: left), amount clamped to width-1."""
        (a, s), lv = self._align(a, s)
        lim = self.width - 1
        bits = max(1, lim.bit_length())
        right = Mux(s > lim, lim, Mux(s < 0, 0, s))[:bits]
        left = Mux(s < -lim, lim, Mux(s > 0, 0, -s))[:bits]
        return self._done(Mux(s >= 0, a >> right, (a << left)[:self.width].as_signed()), lv)

    def stage(self, *values):
        """Identity: an ALU op's stage boundaries are the lane multiplier's registers (see :func:`alu_lane`)."""
        return values[0] if len(values) == 1 else values


def record_of(bits: Value) -> Record:
    """The REQUANT record fields sliced out of ``RECORD_BITS`` bits (signed where the record says)."""
    out = {}
    for f in RECORD_FIELDS:
        v = bits[f.lo:f.lo + f.width]
        out[f.name] = v.as_signed() if f.signed else v
    return Record(**out)


def alu_lane(m: Module, op_code: Value, a: Value, b: Value, width: int, rec: Record | None = None,
             en: Value | None = None, *, enable: Callable[[int], Value] | None = None,
             levels: dict[int, int] | None = None) -> Value:
    """One lane: ``op(a, b)`` wrapped to ``width`` bits, selected by ``op_code`` over every registered op.

    ``rec`` is the lane's REQUANT record; without it record ops are not built (their result is 0).
    With ``en`` the multiplier and the result are 0 while ``en`` is low (operand isolation).

    Pipelined (``enable`` and ``levels``): ``levels[opcode]`` is the register stages an op has between the lane's
    inputs (``a``, ``b``, ``rec``: level 0) and its result; ``enable(level)`` is high when a micro-op's values are
    at that level. The lane multiplier gets an output register when every op that multiplies has a stage for it,
    and input registers too when they all have two (DSP48E1 / MULT18X18D input and output registers); each op's
    result is then delayed by the stages it has left, so op ``c``'s result is ``levels[c]`` cycles after its inputs
    (registers, not a counter)."""
    staged = enable is not None and levels is not None
    deep = _deep_plan(width, a, b, rec, levels) if staged else None
    if deep is not None:
        return _deep_lane(m, op_code, a, b, width, rec, enable, levels, *deep)
    mul_ops = []
    if staged:  # which ops multiply (a dry elaboration, outside any module, counts the products)
        for op in alu_ops():
            if op.operand == "wgt" and rec is None or op.opcode not in levels:
                continue
            dry = AmaranthOps(width)
            (op.datapath or op.fn)(dry, a, rec if op.operand == "wgt" else b)
            if dry.products:
                mul_ops.append(op.opcode)
    mul_level = min([2] + [levels[c] for c in mul_ops]) if staged and mul_ops else 0
    if staged:
        ops = AmaranthOps(width, m=m, enable=enable, mul_level=mul_level)
    else:
        ops = AmaranthOps(width, (lambda v: _isolated(m, en, v)) if en is not None else None)
    cases, mul_of = {}, {}
    for op in alu_ops():
        if op.operand == "wgt" and rec is None:
            continue
        if staged and op.opcode not in levels:
            continue
        n0 = len(ops.products)
        val = (op.datapath or op.fn)(ops, a, rec if op.operand == "wgt" else b)  # the declaration's datapath
        if len(ops.products) - n0 > 1:
            raise ValueError(f"ALU op {op.name} multiplies {len(ops.products) - n0} times; the lane has one multiplier")
        if len(ops.products) > n0:
            mul_of[op.opcode] = ops.products[-1]
        v = ops._at(Value.cast(val)[:width].as_signed(), ops.level(val), isolate=False)
        if staged:
            if ops.level(v) > levels[op.opcode]:
                raise ValueError(f"ALU op {op.name}: its datapath takes {ops.level(v)} register stages; its declared "
                                 f"pipeline leaves {levels[op.opcode]}")
            v = ops.delay(v, levels[op.opcode] - ops.level(v))
        cases[op.opcode] = v
    if mul_of:  # the one multiplier, its operands chosen by the op
        x, y = Signal(signed(width)), Signal(signed(width))
        xv, yv = _mul_operands(mul_of, op_code)
        prod = Signal(signed(2 * width))
        if staged:
            with m.If(enable(0)):
                m.d.comb += [x.eq(xv), y.eq(yv)]
            lv = 0
            if mul_level >= 2:  # input registers
                xr, yr = Signal(signed(width)), Signal(signed(width))
                m.d.sync += [xr.eq(x), yr.eq(y)]
                x, y, lv = xr, yr, 1
            with m.If(enable(lv)):
                m.d.comb += prod.eq(x * y)
            if mul_level >= 1:  # output register
                pr = Signal(signed(2 * width))
                m.d.sync += pr.eq(prod)
                prod = pr
        else:
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


#: DSP48E1 operand widths (signed): the deep lane's multiplier is built from products that fit one DSP each.
DSP_A, DSP_B = 25, 18


def _pieces(v: Value, signed_bits: int) -> list[tuple[Value, int]]:
    """Signed ``v`` as ``sum(piece << offset)``: unsigned low pieces of ``signed_bits - 1`` bits and a signed top
    piece of at most ``signed_bits`` bits, each a DSP operand (``(piece, offset)`` pairs)."""
    n = len(v)
    if n <= signed_bits:
        return [(v.as_signed(), 0)]
    step = signed_bits - 1
    out, lo = [], 0
    while n - lo > signed_bits:
        out.append((Cat(v[lo:lo + step], Const(0, 1)).as_signed(), lo))
        lo += step
    out.append((v[lo:].as_signed(), lo))
    return out


def multiplier_stages(width: int) -> int:
    """Register stages of :func:`deep_multiplier` for ``width``-bit operands: inputs (DSP A/B registers), the partial
    products (M register), again (P register), then one per level of the partial-product adder tree."""
    n = len(_pieces(Const(0, signed(width)), DSP_A)) * len(_pieces(Const(0, signed(width)), DSP_B))
    return 3 + max(n - 1, 0).bit_length()


def deep_multiplier(m: Module, x: Value, y: Value, width: int, enable: Callable[[int], Value] | None = None,
                    level: int = 0) -> Signal:
    """``x * y`` (``2 * width`` signed bits) :func:`multiplier_stages` cycles after ``x``, ``y``: registered
    operands, DSP-sized partial products with the DSP's M and P registers, and an adder tree of the shifted partial
    products (modulo ``2 ** (2 * width)``, exact for the signed product) with a register after every level.
    With ``enable`` (a function of the level, ``x``/``y`` at ``level``) each register loads only while its input
    level's enable is high (a clock enable; the product is read only at its own level's enable)."""
    n = 2 * width

    def reg(v, name, src):  # loaded at input level ``level + src``
        v = Value.cast(v)
        r = Signal(v.shape(), name=name)
        with _enabled(m, enable(level + src) if enable is not None else None):
            m.d.sync += r.eq(v)
        return r

    xr, yr = reg(x, "mul_x", 0), reg(y, "mul_y", 0)
    terms = []
    for xp, xo in _pieces(xr, DSP_A):
        for yp, yo in _pieces(yr, DSP_B):
            p = reg(reg(xp * yp, f"mul_m{xo}_{yo}", 1), f"mul_p{xo}_{yo}", 2)
            terms.append(Cat(Const(0, xo + yo), _sext(p, n - xo - yo)) if xo + yo else _sext(p, n))
    depth = 0
    while len(terms) > 1:
        depth += 1
        nxt = [reg((terms[i] + terms[i + 1])[:n], f"mul_s{depth}_{i // 2}", 2 + depth)
               for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(reg(terms[-1], f"mul_s{depth}_{len(terms) // 2}", 2 + depth))
        terms = nxt
    out = Signal(signed(n))
    m.d.comb += out.eq(terms[0][:n].as_signed())
    return out


def _sext(v: Value, n: int) -> Value:
    """``v`` (signed) sign-extended or cut to ``n`` bits (unsigned bits)."""
    v = Value.cast(v)
    return v[:n] if len(v) >= n else Cat(v, v[-1].replicate(n - len(v)))


def _lane_ops(rec, levels):
    return [op for op in alu_ops() if not (op.operand == "wgt" and rec is None) and op.opcode in levels]


def _deep_plan(width: int, a: Value, b: Value, rec, levels: dict[int, int]) -> tuple[int, int] | None:
    """``(mul_in, mul_stages)`` when every op's datapath fits its declared levels with a register after every
    primitive (a deep lane); None otherwise (the shallow lane: only the multiplier's registers). Found by dry
    elaborations into a throwaway module."""
    ml = multiplier_stages(width)
    ops = _lane_ops(rec, levels)

    def dry(op, mul_in):
        scratch = Module()
        scratch._MustUse__silence = True  # never elaborated: it only holds the dry run's registers
        d = AmaranthOps(width, m=scratch, enable=lambda lv: Const(1), mul_level=ml, mul_in=mul_in)
        d.budget = 1 << 20
        val = (op.datapath or op.fn)(d, a, rec if op.operand == "wgt" else b)
        return d, d.level(val)

    mul_in = 0
    for op in ops:
        d, _ = dry(op, None)
        if d.products:
            mul_in = max([mul_in, *d.mul_operand_levels])
    for op in ops:
        d, depth = dry(op, mul_in)
        if len(d.products) > 1 or depth > levels[op.opcode]:
            return None
    return mul_in, ml


def _deep_lane(m: Module, op_code: Value, a: Value, b: Value, width: int, rec, enable, levels, mul_in: int,
               ml: int) -> Value:
    """:func:`alu_lane` with a register after every primitive (:meth:`AmaranthOps.cut`) and the DSP-sized
    :func:`deep_multiplier`, whose inputs are at level ``mul_in`` (operands of earlier levels are delayed)."""
    ops = AmaranthOps(width, m=m, enable=enable, mul_level=ml, mul_in=mul_in)
    done: dict[int, list[tuple[int, int, Value]]] = {}  # write level -> [(result level, opcode, result)]
    mul_of = {}
    for op in _lane_ops(rec, levels):
        ops.budget = levels[op.opcode]
        n0 = len(ops.products)
        val = (op.datapath or op.fn)(ops, a, rec if op.operand == "wgt" else b)
        if len(ops.products) > n0:
            mul_of[op.opcode] = ops.products[-1]
        v = ops._at(Value.cast(val)[:width].as_signed(), ops.level(val), isolate=False)
        done.setdefault(levels[op.opcode], []).append((ops.level(v), op.opcode, v))
    ops.budget = None
    if mul_of:
        x, y = Signal(signed(width)), Signal(signed(width))
        xv, yv = _mul_operands(mul_of, op_code)
        with m.If(enable(mul_in)):
            m.d.comb += [x.eq(xv), y.eq(yv)]
        prod = deep_multiplier(m, x, y, width, enable=enable, level=mul_in)
        for _, _, p in mul_of.values():
            m.d.comb += p.eq(prod)
    # ops of one write level: each result joins ONE value by opcode at its own level and that value is delayed to
    # the write (not every op's result delayed separately: fewer registers, the Verilated model's per-cycle work)
    out: Value = Value.cast(0)
    for write, results in done.items():
        carry: Value | None = None
        at = 0
        for lv, code, v in sorted(results, key=lambda r: r[0]):
            if carry is not None and lv > at:
                carry = ops.delay(carry, lv - at)
            carry = ops._at(Mux(op_code == code, v, 0 if carry is None else carry), lv, isolate=False)
            at = lv
        carry = ops.delay(carry, write - at)
        out = Mux(Cat(*[op_code == c for _, c, _ in results]).any(), carry, out) if len(done) > 1 else carry
    return out


def _mul_operands(mul_of: dict, op_code: Value) -> tuple[Value, Value]:
    """The lane multiplier's two operands: those of the multiplying op that ``op_code`` selects (else 0)."""
    xv: Value = Value.cast(0)
    yv: Value = Value.cast(0)
    for code, (pa, pb, _) in mul_of.items():
        xv = Mux(op_code == code, pa, xv)
        yv = Mux(op_code == code, pb, yv)
    return xv, yv


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
