"""RTL datapaths of the declared tensor intrinsics (``isa.intrinsics``), generated from the declarations.

The compute unit gives every declaration a :class:`DatapathContext`: the operands' elements (sliced from
the scratchpad rows; a vector operand's piece selected by the low index bits), a fresh multiplier
``mul``, the one shared ``gemm_array`` and ``stage``, the declaration's register boundaries. A
declaration's ``datapath(ctx)`` returns, per acc lane (the output axes in row-major order), the value added
to (or, with ``overwrite``, stored in) the accumulator. Without a ``datapath`` the semantics is elaborated
directly: each product term with its own multiplier, summed by a balanced adder tree, with registers after
the products and between tree levels (:func:`staged_tree_sum`).

Stages (docs/timing.md, *Pipeline and hazards*): a declaration of pipeline depth ``P`` writes the
accumulator ``P`` cycles after its micro-op issues. The first two cycles read the micro-op and the operand
rows; with ``P >= 3`` the rows are registered as they leave the block RAMs (the BRAM output register) and
the datapath's inputs are those registers; the ``P - 3`` further boundaries are the declaration's: each
``ctx.stage(values)`` registers ``values`` (everything used after it must come from its result) while
boundaries are left, the GEMM array takes its own (the products' register, then tree levels), and those
left over register the datapath's result. The accumulate (old value + term, the old value forwarded from
the micro-ops still in flight) and the write are the last stage.

``gemm_array(A, W)`` computes ``sum_i A[b][i] * W[o][i]`` for every lane on the GEMM array's
multipliers (two products per DSP when they fit, see :func:`pair_products`); several declarations
may use it (DWMAC feeds it a diagonal weight matrix), their inputs muxed by the opcode, so
a new intrinsic on it costs multiplexers, not multipliers.
"""
from __future__ import annotations

import itertools

import numpy as np
from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed

from isa import texpr
from isa.config import HwConfig
from isa.intrinsics import TensorIntrinsic

#: Operand widths of one DSP48E1 multiplier (signed A x B); ``pair_products`` packs two products into one.
DSP_A_BITS, DSP_B_BITS = 25, 18


def tree_sum(values: list[Value]) -> Value:
    """Balanced adder tree."""
    while len(values) > 1:
        nxt = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


def _map(values, fn):
    """``fn`` over the Values in nested lists/tuples ``values`` (the same nesting back)."""
    if isinstance(values, (list, tuple)):
        return type(values)(_map(v, fn) for v in values)
    return fn(values)


class Stager:
    """The register boundaries of one datapath: ``budget`` of them between its inputs (level 0) and its write.

    ``stage(values)`` registers ``values`` (nested lists of Values) and moves to the next level while
    boundaries are left, else returns them unchanged; ``finish(values)`` spends what is left as output
    registers. ``enable(level)`` is high in the cycles a micro-op's values are at ``level`` (the
    datapath's operand isolation, see :func:`isolated`)."""

    def __init__(self, m: Module, budget: int, enable=None):
        self.m, self.budget, self.level = m, max(budget, 0), 0
        self._enable = enable

    @property
    def left(self) -> int:
        return self.budget - self.level

    def enable(self, level: int | None = None) -> Value | None:
        return None if self._enable is None else self._enable(self.level if level is None else level)

    def register(self, v, en: Value | None = None) -> Signal:
        """``v`` registered; with ``en`` the register loads only while ``en`` is high (a clock enable)."""
        v = Value.cast(v)
        r = Signal(v.shape())
        if en is None:
            self.m.d.sync += r.eq(v)
        else:
            with self.m.If(en):
                self.m.d.sync += r.eq(v)
        return r

    def stage(self, values):
        """Register ``values`` at the next boundary. With an enable the boundary's registers load only in the cycles a
        micro-op's values are at the level they leave (their clock enable): between micro-ops they hold, which no
        user sees (every later level is enabled only behind a micro-op), and a Verilated model skips both the
        copy and the logic that feeds them on idle cycles."""
        if self.level >= self.budget:
            return values
        en = self.enable(self.level)
        self.level += 1
        return _map(values, lambda v: self.register(v, en))

    def finish(self, values):
        while self.level < self.budget:
            values = self.stage(values)
        return values


def staged_tree_sums(lanes: list[list[Value]], stager: Stager | None = None, boundaries: int = 0) -> list[Value]:
    """:func:`tree_sum` of every list in ``lanes``, reduced level by level together, with up to ``boundaries`` of
    ``stager``'s registers placed evenly between the levels (every lane registered at the same cuts)."""
    lanes = [list(v) for v in lanes]
    levels = max((max(len(v) - 1, 0).bit_length() for v in lanes), default=0)
    boundaries = min(boundaries, stager.left if stager is not None else 0, max(levels - 1, 0))
    cuts = {round(levels * (j + 1) / (boundaries + 1)) for j in range(boundaries)}
    for level in range(1, levels + 1):
        nxt = []
        for values in lanes:
            red = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
            if len(values) % 2:
                red.append(values[-1])
            nxt.append(red)
        lanes = stager.stage(nxt) if level in cuts else nxt
    return [v[0] for v in lanes]


def pair_products(x: Value, w0: Value, w1: Value, m: Module | None = None,
                  en: Value | None = None) -> tuple[Value, Value]:
    """``(x * w0, x * w1)`` for signed ``x``, ``w0``, ``w1`` from ONE multiplier: ``(w1 << s + w0) * x``.

    With ``s = len(x) + len(w0)`` the low product ``w0 * x`` fits in ``s`` signed bits, so it is the low
    ``s`` bits of the wide product read as signed, and ``w1 * x`` is the rest plus the borrow the negative
    low part took from it. For 8-bit operands the wide multiplier is 25 x 8 bits, one DSP48E1 (25 x 18),
    which halves the DSPs of the GEMM array (the ``int8`` packing trick). With ``m`` and ``en`` the wide
    product is a signal held at 0 while ``en`` is low (operand isolation, see :func:`isolated`).
    """
    wide, s = _wide_product(x, w0, w1)
    if m is not None and en is not None:
        wide = isolated(m, en, wide)
    return wide[:s].as_signed(), wide[s:].as_signed() + wide[s - 1]


def pair_products_offset(x: Value, w0: Value, w1: Value, m: Module | None = None,
                         en: Value | None = None) -> tuple[tuple[Value, int], tuple[Value, int]]:
    """:func:`pair_products` in offset binary: ``((x * w0 + b0, b0), (x * w1 + b1, b1))``, unsigned values and
    their biases (see :func:`offset_binary`), for :func:`offset_tree_sum`.

    The wide product plus ``b1 << s | b0`` never wraps and splits exactly into the two biased products (the low
    one is in ``[0, 2**s)``, so no borrow crosses into the high one): one constant add replaces the borrow
    correction (yosys ``synth_xilinx`` of two lanes: the same DSPs and no more LUTs than :func:`pair_products`)."""
    wide, s = _wide_product(x, w0, w1)
    n = len(wide)
    b0, b1 = 1 << (s - 1), 1 << (n - s - 1)
    biased = (wide.as_unsigned() + ((b1 << s) | b0))[:n]
    if m is not None and en is not None:
        biased = isolated(m, en, biased)
    return (biased[:s], b0), (biased[s:], b1)


def _wide_product(x: Value, w0: Value, w1: Value) -> tuple[Value, int]:
    """``(w1 << s + w0) * x`` (``len(w1) + s + 1 + len(x)`` signed bits) and ``s``."""
    s = len(x) + len(w0)
    return (w1.as_signed().shift_left(s) + w0.as_signed()) * x.as_signed(), s


def offset_binary(value: Value) -> tuple[Value, int]:
    """A signed ``k``-bit ``value`` as the unsigned ``value + 2**(k - 1)`` (its top bit inverted) and that bias."""
    v = Value.cast(value)
    k = len(v)
    return Cat(v[:k - 1], ~v[k - 1]), 1 << (k - 1)


def offset_tree_sum(terms: list[tuple[Value, int]]) -> Value:
    """The exact signed sum of offset-binary ``terms`` (``(unsigned value, bias)``, see :func:`offset_binary`).

    The same sum as :func:`tree_sum` of the signed values, built from unsigned adders and one constant
    subtraction: no sign extension inside the tree. Synthesis maps both forms to the same adder tree; the Verilated
    model evaluates this one with plain machine adds (a signed widening add costs two sign extensions there)."""
    total = tree_sum([u for u, _ in terms])
    return total - sum(b for _, b in terms)


def isolated(m: Module, en: Value, value: Value) -> Signal:
    """``value`` while ``en`` is high, else 0 (operand isolation).

    The S2 datapath (tensor products and sums, ALU lanes) only matters on cycles with a micro-op in S2; holding it
    at 0 otherwise costs no extra logic level in hardware and lets the Verilated model skip the whole datapath on
    other cycles (its logic sits under ``if (en)``), which is most of the RTL co-simulation's time."""
    value = Value.cast(value)
    sig = Signal(value.shape())
    with m.If(en):
        m.d.comb += sig.eq(value)
    return sig


def can_pair(cfg: HwConfig) -> bool:
    """Whether two GEMM products sharing an input fit one DSP48E1 (``pair_products``)."""
    s = cfg.inp_width + cfg.wgt_width
    return cfg.block_out % 2 == 0 and s + cfg.wgt_width + 1 <= DSP_A_BITS and cfg.inp_width <= DSP_B_BITS


class GemmArray:
    """The shared ``BATCH x BLOCK_OUT x BLOCK_IN`` multiplier array; users register inputs with a select.

    With a ``stager`` the array takes ``stages`` of its boundaries: the products' register (the DSP's output
    register), then cuts between adder-tree levels; every user must have them left when it calls ``use``."""

    def __init__(self, cfg: HwConfig, m: Module | None = None, en: Value | None = None,
                 stager: "Stager | None" = None, stages: int = 0):
        """``m``/``en``: hold the array's products at 0 while ``en`` is low (see :func:`isolated`)."""
        self.cfg, self.m, self.en = cfg, m, en
        self.stager, self.stages = stager, (min(stages, stager.left) if stager is not None else 0)
        #: the DSPs' input registers (A/B) before the multiply: when the array has a stage for them beside the
        #: products' (M) register and a tree cut (:func:`array_stages`)
        self.in_reg = stager is not None and stager.left >= 4 and self.stages >= 3
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        self.a = [[Signal(signed(cfg.inp_width), name=f"arr_a_{b}_{i}") for i in range(BI)] for b in range(B)]
        self.w = [[Signal(signed(cfg.wgt_width), name=f"arr_w_{o}_{i}") for i in range(BI)] for o in range(BO)]
        self.users: list[tuple[Value, list, list]] = []

    def use(self, sel: Value, a: list, w: list) -> list[Value]:
        """Feed ``a`` ([b][i]) and ``w`` ([o][i]) when ``sel``; returns the lane sums (b-major, then o)."""
        self.users.append((sel, a, w))
        return self.sums

    def elaborate(self, m: Module) -> None:
        cfg = self.cfg
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        for grid, which in ((self.a, 1), (self.w, 2)):
            for r, row in enumerate(grid):
                for c, sig in enumerate(row):
                    v: Value = self.users[0][which][r][c]  # the first user (GEMM) is the default: no mux
                    for user in reversed(self.users[1:]):
                        v = Mux(user[0], user[which][r][c], v)
                    m.d.comb += sig.eq(v)

    @property
    def sums(self) -> list[Value]:
        if not hasattr(self, "_sums"):
            cfg = self.cfg
            B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
            out = []
            paired = can_pair(cfg)
            lanes: list[list[tuple[Value, int]]] = []
            for b in range(B):
                products: list[list[tuple[Value, int]]] = [[] for _ in range(BO)]  # offset binary
                for i in range(BI):
                    x = self.a[b][i]
                    wv = [self.w[o][i] for o in range(BO)]
                    if paired:
                        for o in range(0, BO, 2):
                            lo, hi = pair_products_offset(x, wv[o], wv[o + 1], self.m, self.en)
                            products[o].append(lo)
                            products[o + 1].append(hi)
                    else:
                        for o in range(BO):
                            products[o].append(offset_binary(x.as_signed() * wv[o].as_signed()))
                lanes += products
            st = self.stager
            if st is None or self.stages == 0:
                self._sums = [offset_tree_sum(p) for p in lanes]
                return self._sums
            st0 = Stager(self.m, self.stages, st._enable)  # the array's own boundaries, from the user's level 0
            if self.in_reg:
                self._sums = self._deep_sums(st0)
                return self._sums
            vals = st0.stage([[u for u, _ in p] for p in lanes])  # the products' register (DSP output register)
            sums = staged_tree_sums(vals, st0, st0.left)
            en = st0.enable()
            self._sums = [t - sum(b for _, b in p) for t, p in zip(sums, lanes)]
            if en is not None:
                self._sums = [isolated(self.m, en, v) for v in self._sums]
        return self._sums


    def _deep_sums(self, st0: "Stager") -> list[Value]:
        """The lane sums with the DSPs' input registers (level 1), their product registers (level 2) and the
        adder tree's cuts from the stages left but one; the last stage registers the exact sums (after the offset
        binary's constant)."""
        cfg = self.cfg
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        paired = can_pair(cfg)
        en = st0.enable(0)
        s = cfg.inp_width + cfg.wgt_width
        # level 0 -> 1: the multiplier operands, isolated while no micro-op is at level 0, then registered
        ops_in = []
        for b in range(B):
            row = []
            for i in range(BI):
                x = self.a[b][i].as_signed()
                if paired:
                    ws = [self.w[o + 1][i].as_signed().shift_left(s) + self.w[o][i].as_signed()  # _wide_product's
                          for o in range(0, BO, 2)]
                else:
                    ws = [self.w[o][i].as_signed() for o in range(BO)]
                row.append([x, *ws])
            ops_in.append(row)
        if en is not None:
            ops_in = _map(ops_in, lambda v: isolated(self.m, en, v))
        regs = st0.stage(ops_in)
        # level 1 -> 2: the products (DSP M register)
        prods = st0.stage([[[r[0].as_signed() * w.as_signed() for w in r[1:]] for r in row] for row in regs])
        lanes: list[list[tuple[Value, int]]] = []
        for b in range(B):
            per_o: list[list[tuple[Value, int]]] = [[] for _ in range(BO)]
            for i in range(BI):
                for k, wide in enumerate(prods[b][i]):
                    if paired:
                        n = len(wide)
                        b0, b1 = 1 << (s - 1), 1 << (n - s - 1)
                        biased = (wide.as_unsigned() + ((b1 << s) | b0))[:n]
                        per_o[2 * k].append((biased[:s], b0))
                        per_o[2 * k + 1].append((biased[s:], b1))
                    else:
                        per_o[k].append(offset_binary(wide))
            lanes += per_o
        sums = staged_tree_sums([[u for u, _ in p] for p in lanes], st0, max(st0.left - 1, 0))
        out = [t - sum(bb for _, bb in p) for t, p in zip(sums, lanes)]
        out = st0.finish(out)
        en_out = st0.enable()
        return [isolated(self.m, en_out, v) for v in out] if en_out is not None else out


def array_stages(cfg: HwConfig, budget: int) -> int:
    """Register stages the GEMM array takes of a datapath's ``budget``: with 4 or more, the DSPs' input and product
    registers, a cut after every adder-tree level but the last and a register on the exact sums (at most
    ``3 + levels - 1``, the rest left to the datapath); with fewer, the products' register and tree cuts (the
    shallow array)."""
    levels = max(cfg.block_in - 1, 0).bit_length()
    if budget >= 4:
        return min(budget, 3 + max(levels - 1, 0))
    return min(budget, 1 + max(levels - 1, 0))


class DatapathContext:
    """What one declaration's datapath generator sees in S2 (see the module docstring)."""

    def __init__(self, cfg: HwConfig, intr: TensorIntrinsic, rows: dict[str, Value], subs: dict[str, Value],
                 sel: Value, array: GemmArray, stager: Stager | None = None):
        self.cfg, self.intr, self.sel, self.array = cfg, intr, sel, array
        self.rows, self.subs = rows, subs
        self.stager = stager

    def stage(self, values):
        """Register ``values`` (a Value or nested lists of them) at the datapath's next boundary while the declared
        pipeline has boundaries left, else return them unchanged. Everything used after a stage must come from its
        result (values not passed through it would be a cycle early)."""
        return values if self.stager is None else self.stager.stage(values)

    @property
    def stages_left(self) -> int:
        """Register boundaries the declared pipeline depth still has for this datapath."""
        return 0 if self.stager is None else self.stager.left

    def bits(self, name: str) -> int:
        return next(o.bits for o in self.intr.inputs if o.name == name)

    def const(self, value: int, bits: int) -> Value:
        return Const(value, signed(bits))

    def elements(self, name: str):
        """Operand ``name``'s elements as nested lists in its axes' order (signed Values)."""
        op = next(o for o in self.intr.inputs if o.name == name)
        shape = self.intr.shape(op)
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        k = self.intr.vectors[name]
        row, bits = self.rows[op.scope], op.bits
        flat = []
        for j in range(n):
            pieces = [row[(p * n + j) * bits:][:bits].as_signed() for p in range(k)]
            flat.append(pieces[0] if k == 1 else Array(pieces)[self.subs[op.scope]])
        return _nest(flat, shape)

    def mul(self, a: Value, b: Value) -> Value:
        """A fresh multiplier (own DSP)."""
        return a.as_signed() * b.as_signed()

    def gemm_array(self, a: list, w: list) -> list[Value]:
        """``sum_i a[b][i] * w[o][i]`` per lane on the shared GEMM array (selected by this intrinsic's opcode).

        The array's pipeline registers count as this datapath's boundaries: call it on level-0 values (before any
        ``stage``); the sums come back that many levels later."""
        st = self.stager
        if st is not None and self.array.stager is not None:
            if getattr(self, "s0", None) != getattr(self.array, "s0", None):
                raise ValueError(
                    f"intrinsic {self.intr.name}: the GEMM array's inputs are the rows of pipeline stage "
                    f"{getattr(self.array, 's0', '?')} (its pipeline depth); this declaration's depth puts its "
                    f"inputs at stage {getattr(self, 's0', '?')}: declare a depth of at least 3 (or the GEMM's)")
            if st.level != 0 or st.left < self.array.stages:
                raise ValueError(
                    f"intrinsic {self.intr.name}: the GEMM array takes its inputs at the datapath's first stage and "
                    f"returns its sums {self.array.stages} register stage(s) later; this datapath is at stage "
                    f"{st.level} with {st.left} boundary(ies) left (declare a pipeline depth of at least "
                    f"{self.array.stages + 3} and call gemm_array before ctx.stage)")
            st.level += self.array.stages
        return self.array.use(self.sel, a, w)


def _nest(flat: list, shape: tuple[int, ...]):
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0]
    return [_nest(flat[r * step:(r + 1) * step], shape[1:]) for r in range(shape[0])]


def semantics_datapath(ctx: DatapathContext) -> list[Value]:
    """The default datapath: the declared semantics elaborated term by term (own multipliers)."""
    intr = ctx.intr
    terms, red = texpr.products(intr.tree)
    elems = {o.name: ctx.elements(o.name) for o in intr.inputs}
    out_axes = intr.output.axes

    def pick(acc: texpr.Access, env: dict[str, int]) -> Value:
        v = elems[acc.operand.name]
        for a in acc.axes:
            v = v[env[a]]
        return v

    lanes = []
    for out_idx in itertools.product(*[range(intr.extents[a]) for a in out_axes]):
        env = dict(zip(out_axes, out_idx))
        vals = []
        for t in terms:
            for r_idx in itertools.product(*[range(intr.extents[a]) for a in red]):
                env.update(zip(red, r_idx))
                xs = [pick(acc, env) for acc in t]
                vals.append(xs[0] if len(xs) == 1 else ctx.mul(xs[0], xs[1]))
        lanes.append(vals)
    lanes = ctx.stage(lanes)  # the products' register
    return staged_tree_sums(lanes, ctx.stager, ctx.stages_left) if ctx.stager is not None else \
        [tree_sum(v) for v in lanes]


def lane_terms(ctx: DatapathContext) -> list[Value]:
    """The declaration's datapath (or the default one) for ``ctx``; checks it returns one value per lane."""
    decl = ctx.intr.decl
    lanes = (decl.datapath or semantics_datapath)(ctx) if decl is not None else []
    want = ctx.cfg.batch * ctx.cfg.block_out
    if len(lanes) != want:
        raise ValueError(f"intrinsic {ctx.intr.name}: its datapath returned {len(lanes)} lanes; the accumulator "
                         f"row has {want} (BATCH x BLOCK_OUT)")
    lanes = [Value.cast(v) for v in lanes]
    return ctx.stager.finish(lanes) if ctx.stager is not None else lanes
