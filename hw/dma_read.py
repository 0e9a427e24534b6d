"""2D read DMA into one scratchpad, with padding (LOAD of any memory type).

Timing (docs/timing.md): started in the grant cycle ``g``; the first AR goes out in
cycle ``g``; data beats arrive from the DRAM; then one pad element is written per
cycle for every pad element (zero, or ``pad_value`` in every lane for an engine built
with ``pad_lane_bits``: LOAD.INP). ``last`` is high in the final cycle (``e - 1``).

The start cycle only latches the instruction's fields; the scratchpad addresses that need a
multiply (``y_pad0 * W`` rows before the first data row, the pad phases' sizes) are computed from
those registers in ``g + 1`` and ``g + 2``, so the first data beat may arrive at ``g + 3`` at the
earliest: the contract's smallest DRAM latency (``dram_latency >= 3``; :class:`fpga.axi_ram.AxiRam`
also answers three cycles after the AR handshake). No cycle count changes.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.burst import ADDR_BITS, BurstIssuer
from hw.common import bpe as _bpe, epb as _epb, log2
from isa.config import HwConfig
from isa.encoding import layouts

IDLE, RECV, TOP, SIDES, BOTTOM = range(5)


def dma_members(abits: int, **middle) -> dict:
    """The signature shared by :class:`DmaRead` and :class:`hw.dma_write.DmaWrite`: the instruction's
    block fields, then ``middle`` (the engine's own ports), then ``last``/``busy``."""
    return {"start": In(1), "sram_base": In(abits), "dram_base": In(32), "y_size": In(16), "x_size": In(16),
            "x_stride": In(16), **middle, "last": Out(1), "busy": Out(1)}


def drive_bursts(m: Module, cfg: HwConfig, eng, bi: BurstIssuer) -> None:
    """Start ``bi`` with ``eng``'s block in DRAM: ``y_size`` rows of ``x_size`` elements, ``x_stride`` apart."""
    eb, k, nb = eng.eb, eng.k, _bpe(cfg, eng.eb)
    row_beats = (eng.x_size << log2(nb)) if k == 1 else ((eng.x_size + (k - 1)) >> log2(k))
    m.d.comb += [bi.start.eq(eng.start), bi.base.eq(eng.dram_base << log2(eb)),
                 bi.stride.eq(eng.x_stride << log2(eb)), bi.rows.eq(eng.y_size), bi.row_beats.eq(row_beats)]


class DmaRead(wiring.Component):
    """Moves ``y_size`` rows of ``x_size`` elements (``elem_bytes`` each) from DRAM to a scratchpad of ``abits`` address bits.

    With ``pad_lane_bits`` the engine has a signed ``pad_value`` input (the MEM format's field) and writes it,
    sign-extended, into every ``pad_lane_bits``-bit lane of a pad element; otherwise pads are zero.
    """

    def __init__(self, cfg: HwConfig, elem_bytes: int, abits: int, pad_lane_bits: int = 0):
        self.cfg, self.eb, self.abits = cfg, elem_bytes, abits
        self.k = _epb(cfg, elem_bytes)
        self.pad_lane_bits = pad_lane_bits
        bb = cfg.bus_bytes
        pad_port = {"pad_value": In(signed(layouts(cfg)["MEM"].field("pad_value").width))} if pad_lane_bits else {}
        super().__init__(dma_members(
            abits, y_pad0=In(4), y_pad1=In(4), x_pad0=In(4), x_pad1=In(4), **pad_port,
            ar_valid=Out(1), ar_ready=In(1), ar_addr=Out(ADDR_BITS), ar_len=Out(8),
            r_valid=In(1), r_data=In(bb * 8),
            w_addr=Out(abits), w_data=Out(self.k * elem_bytes * 8), w_count=Out(range(self.k + 1)), w_en=Out(1)))

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, eb, k = self.cfg, self.eb, self.k
        bb = cfg.bus_bytes
        nb = _bpe(cfg, eb)
        A = 32  # internal address arithmetic width (wrapped to abits on use)

        m.submodules.bursts = bi = BurstIssuer(bb)
        drive_bursts(m, cfg, self, bi)
        m.d.comb += [self.ar_valid.eq(bi.valid), bi.ready.eq(self.ar_ready), self.ar_addr.eq(bi.addr),
                     self.ar_len.eq(bi.len)]

        state = Signal(range(5))
        y, x_size, xp0, xp1 = Signal(16), Signal(16), Signal(4), Signal(4)
        yp0, yp1 = Signal(4), Signal(4)
        width = Signal(A)  # padded row length W
        base = Signal(A)
        r, x = Signal(16), Signal(16)
        bcnt = Signal(range(nb)) if nb > 1 else None
        shbuf = Signal((nb - 1) * bb * 8) if nb > 1 else None
        row_sram = Signal(A)
        pa, pcnt = Signal(A), Signal(A)
        sr, sc = Signal(16), Signal(5)
        # the ends of a row / of the rows / of a side pad run are compared against registered sizes minus one (set in
        # g+1 from the latched fields), and with elements narrower than a beat the elements left in the row are
        # counted down: no adder or subtractor before the compares that end the transfer (``last``, the tokens)
        y_m1, xs_m1, xp_m1 = Signal(16), Signal(16), Signal(5)
        left = Signal(16)  # x_size - x (k > 1)
        wbits = k * eb * 8
        if self.pad_lane_bits:  # the pad word: pad_value (latched at start) sign-extended into every lane
            lane = self.pad_lane_bits
            pv = Signal(signed(len(self.pad_value)))
            m.d.sync += pv.eq(Mux(state == IDLE, self.pad_value, pv))
            pad_word = Cat(*[pv.as_signed()[:lane] if len(pv) >= lane else
                             Cat(pv, pv[-1].replicate(lane - len(pv))) for _ in range(wbits // lane)])
        else:
            pad_word = 0

        w_start = self.x_pad0 + self.x_size + self.x_pad1
        # address precompute, one register level per cycle after the start (no multiply on the instruction's
        # combinational path): g+1: top = yp0 * W, bot = yp1 * W, base + xp0; g+2: the first data row's
        # address and the side / bottom pad bases (the sides' first address). ``bot_pa`` then follows the data
        # rows (+W per row).
        top_words, bot_words, base_x0 = Signal(A), Signal(A), Signal(A)
        bot_pa = Signal(A)
        # the side pads' write address is kept in registers (``sa``: this cycle's, ``row_sa``: the row's first),
        # stepped by 1, or 1 + x_size across the data: no adds between them and the scratchpad's address
        base_s0, side_sa, row_sa, sa = Signal(A), Signal(A), Signal(A), Signal(A)
        prep = Signal(2)  # bit 0: in g+1, bit 1: in g+2
        m.d.sync += prep.eq(Cat(self.start, prep[0]))
        with m.If(prep[0]):
            m.d.sync += [top_words.eq(yp0 * width), bot_words.eq(yp1 * width), base_x0.eq(base + xp0),
                         base_s0.eq(base + Mux(xp0 == 0, x_size, 0)),  # a row's first side pad: right if no left
                         y_m1.eq(y - 1), xs_m1.eq(x_size - 1), xp_m1.eq(xp0 + xp1 - 1), left.eq(x_size)]
        with m.If(prep[1]):
            m.d.sync += [row_sram.eq(base_x0 + top_words), bot_pa.eq(base + top_words),
                         side_sa.eq(base_s0 + top_words)]
        # the fields are tracked while idle (so the registers hold the start cycle's values) rather than loaded
        # on ``start``: ``start`` (queue head, tokens, arbiter) then drives a few flip-flops, not every field's
        with m.If(state == IDLE):
            m.d.sync += [y.eq(self.y_size), x_size.eq(self.x_size), xp0.eq(self.x_pad0),
                         xp1.eq(self.x_pad1), yp0.eq(self.y_pad0), yp1.eq(self.y_pad1), width.eq(w_start),
                         base.eq(self.sram_base), r.eq(0), x.eq(0)]
            if nb > 1:
                m.d.sync += bcnt.eq(0)
        with m.If(self.start):
            m.d.sync += state.eq(RECV)
        m.d.comb += self.busy.eq(state != IDLE)

        top_ne, side_ne, bot_ne = yp0 != 0, (xp0 + xp1) != 0, yp1 != 0
        last = self.last

        def enter_top():
            m.d.sync += [state.eq(TOP), pa.eq(base), pcnt.eq(top_words)]

        def enter_sides():
            m.d.sync += [state.eq(SIDES), sr.eq(0), sc.eq(0), row_sa.eq(side_sa), sa.eq(side_sa)]

        def enter_bottom(from_recv: bool):
            # bot_pa = base + (yp0 + rows done) * W; leaving RECV, the last row's +W is still being added
            m.d.sync += [state.eq(BOTTOM), pa.eq(bot_pa + width if from_recv else bot_pa), pcnt.eq(bot_words)]

        def after(phases):
            """Go to the first non-empty phase of ``phases`` or finish (``last``) if none."""
            from_recv = TOP in phases
            table = {TOP: (top_ne, enter_top), SIDES: (side_ne, enter_sides),
                     BOTTOM: (bot_ne, lambda: enter_bottom(from_recv))}
            first = True
            for ph in phases:
                cond, fn = table[ph]
                with (m.If(cond) if first else m.Elif(cond)):
                    fn()
                first = False
            with (m.Else() if phases else m.If(1)):
                m.d.comb += last.eq(1)
                m.d.sync += state.eq(IDLE)

        with m.Switch(state):
            with m.Case(RECV):
                with m.If(self.r_valid):
                    row_end = Signal()
                    if k == 1:
                        elem_done = (bcnt == nb - 1) if nb > 1 else 1
                        data = Cat(shbuf, self.r_data) if nb > 1 else self.r_data
                        if nb > 1:
                            m.d.sync += [shbuf.eq(Cat(shbuf[bb * 8:], self.r_data)), bcnt.eq(bcnt + 1)]
                        m.d.comb += [self.w_addr.eq(row_sram + x), self.w_data.eq(data), self.w_count.eq(1),
                                     self.w_en.eq(elem_done), row_end.eq(elem_done & (x == xs_m1))]
                        with m.If(elem_done):
                            m.d.sync += x.eq(x + 1)
                            if nb > 1:
                                m.d.sync += bcnt.eq(0)
                    else:
                        m.d.comb += [self.w_addr.eq(row_sram + x), self.w_data.eq(self.r_data),
                                     self.w_count.eq(Mux(left < k, left, k)), self.w_en.eq(1),
                                     row_end.eq(left <= k)]
                        m.d.sync += [x.eq(x + k), left.eq(left - k)]
                    with m.If(row_end):
                        m.d.sync += [x.eq(0), r.eq(r + 1), row_sram.eq(row_sram + width), bot_pa.eq(bot_pa + width)]
                        if k > 1:
                            m.d.sync += left.eq(x_size)
                        with m.If(r == y_m1):
                            after([TOP, SIDES, BOTTOM])
            with m.Case(TOP, BOTTOM):
                m.d.comb += [self.w_addr.eq(pa), self.w_data.eq(pad_word), self.w_count.eq(1), self.w_en.eq(1)]
                m.d.sync += [pa.eq(pa + 1), pcnt.eq(pcnt - 1)]
                with m.If(pcnt == 1):
                    with m.If(state == TOP):
                        after([SIDES, BOTTOM])
                    with m.Else():
                        after([])
            with m.Case(SIDES):
                # sa = the row's base + (sc < xp0 ? sc : sc + x_size)
                m.d.comb += [self.w_addr.eq(sa), self.w_data.eq(pad_word), self.w_count.eq(1), self.w_en.eq(1)]
                m.d.sync += [sc.eq(sc + 1), sa.eq(sa + Mux(sc + 1 == xp0, x_size + 1, 1))]
                with m.If(sc == xp_m1):
                    m.d.sync += [sc.eq(0), sr.eq(sr + 1), row_sa.eq(row_sa + width), sa.eq(row_sa + width)]
                    with m.If(sr == y_m1):
                        after([BOTTOM])
        return m
