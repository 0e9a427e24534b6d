"""The compute unit: LOAD.UOP/LOAD.ACC, the declared tensor intrinsics (GEMM, DWMAC, ...), ALU and FINISH.

Tensor intrinsics and ALU issue one micro-op per cycle from ``s`` through ``P`` register stages, ``P`` the
instruction's declared depth (docs/timing.md, *Pipeline and hazards*): S0 reads the uop, S1 adds the loop offsets
and reads inp/wgt/acc, S2 receives the rows (registered there when ``P >= 3``: the BRAM output register; deep
pipelines register them again in S3, :data:`SECOND_ROW_REGISTER`, and register the micro-op word before S1,
:data:`UOP_REGISTER`), the datapath's own stages follow (:class:`hw.intrinsic.Stager`: the GEMM array's product and
tree registers, a declaration's ``ctx.stage``, the ALU lane's multiplier registers) and stage ``P`` accumulates and
writes acc (and the narrowed OUT mirror). The micro-op's valid bit, dst and a mark on the last micro-op travel down
the stages; the unit ends when the marked micro-op writes (``e = s + n + P``). A tensor intrinsic's accumulate
takes the old value from the newest of the row read in S1 and the writes of the ``P - 2`` cycles since
(forwarding); the ALU relies on the hazard rule the simulator enforces. A record ALU op (REQUANT) reads WGT at the
src index in S1 (the WGT port is otherwise idle during ALU instructions); lane ``(b, o)`` takes its record from the
first ``RECORD_BITS`` bits of the element's row ``o``. Every tensor intrinsic shares the micro-op loop (its format
starts with GEMM's fields) and gets its datapath from its declaration (:mod:`hw.intrinsic`); a vector operand's row
is read at ``index >> log2(k)`` and its piece chosen by the low bits at the datapath's first stage.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.alu import alu_lane, record_of
from hw.common import clog2, epb, field, log2
from hw.intrinsic import DatapathContext, GemmArray, Stager, array_stages, can_pair, isolated, lane_terms, pair_products, tree_sum  # noqa: F401
from hw.dma_read import DmaRead
from hw.load import connect_engine, mem_ports, mux_read_masters, read_master, read_port
from hw.unit import IDLE, REQ, dma_control, frontend, push
from isa.alu import IMM_BITS, alu_opcode_bits, alu_ops
from isa.requant import RECORD_BITS, record_supported
from isa.config import HwConfig
from isa.instructions import MemType, Opcode
from isa.intrinsics import intrinsics, tensor_declarations

EXEC, DRAIN = 4, 5
#: Fewest stages a compute pipeline can have: the micro-op read, then operand read + compute + write.
MIN_DEPTH = 2


#: Datapath boundaries (after S2) from which a tensor intrinsic accumulates a stage early (``early`` in
#: :meth:`ComputeUnit.elaborate`): the GEMM array then has the 4 or more it needs for its deep form besides.
EARLY_ACCUMULATE = 5

#: Declared depth from which a datapath's operand rows get a second register (S3) after the block RAMs' output
#: register (S2): synthesis folds the first into the RAM's synchronous read (yosys moved it to the address side,
#: so the RAM's 2.45 ns clock-to-out reached the first ALU primitive on the Xilinx estimate); with the second the
#: datapath's level 0 starts at flip-flops, at the cost of one of its boundaries.
SECOND_ROW_REGISTER = 8

#: Smallest declared depth (over the config's ALU ops and tensor intrinsics) from which the micro-op word is
#: registered as it leaves the UOP scratchpad, before the index adds: the UOP block RAM's clock-to-out (and, on
#: pynq-z1, its bank mux) no longer runs through the adders into the operand RAMs' addresses. It takes one stage:
#: the rest of the pipeline is built for ``depth - 1`` (the operand rows are read a cycle later, which the ALU
#: hazard rule of ``depth`` covers, and the forwarding of tensor intrinsics spans one cycle less).
UOP_REGISTER = 9


def _or(values: list[Value]) -> Value:
    out = values[0]
    for v in values[1:]:
        out = out | v
    return out


def _reg(m: Module, v: Value, name: str, en: Value | None = None) -> Signal:
    """``v`` registered (loaded only while ``en`` is high, with ``en``)."""
    r = Signal(Value.cast(v).shape(), name=name)
    with m.If(1 if en is None else en):
        m.d.sync += r.eq(v)
    return r


class ComputeUnit(wiring.Component):
    """Pops load->compute (pop_prev) and store->compute (pop_next); pushes compute->load and compute->store."""

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        super().__init__({
            "q_data": In(128), "q_rdy": In(1), "q_en": Out(1),
            "prev_avail": In(1), "next_avail": In(1), "pop_prev": Out(1), "pop_next": Out(1),
            "push_prev": Out(1), "push_next": Out(1),
            "req": Out(1), "grant": In(1), "port_last": Out(1), "idle": Out(1), "finish": Out(1),
            **read_master(cfg), **mem_ports(cfg, "uop"), **mem_ports(cfg, "acc"), **mem_ports(cfg, "out"),
            **read_port(cfg, "uop"), **read_port(cfg, "inp"), **read_port(cfg, "wgt"),
            **read_port(cfg, "acc", "acc0"), **read_port(cfg, "acc", "acc1"),
        })

    def elaborate(self, platform) -> Module:  # noqa: C901 - one FSM
        m = Module()
        cfg = self.cfg
        state, insn = Signal(range(6)), Signal(128)
        cur, start = frontend(m, cfg, self, state, insn, [("pop_prev", self.prev_avail, self.pop_prev),
                                                          ("pop_next", self.next_avail, self.pop_next)])
        opcode = field(cur, cfg, "FINISH", "opcode")
        is_load = opcode == Opcode.LOAD
        decls = tensor_declarations(cfg)
        intrs = intrinsics(cfg)
        is_alu, is_fin = opcode == Opcode.ALU, opcode == Opcode.FINISH
        is_gemm = Cat(*[opcode == d.opcode for d in decls]).any()  # any tensor intrinsic (GEMM's loop fields)
        mem = field(cur, cfg, "MEM", "mem")
        dma_nop = (field(cur, cfg, "MEM", "y_size") == 0) | (field(cur, cfg, "MEM", "x_size") == 0)

        def g(name: str) -> Value:
            return field(cur, cfg, "GEMM", name)

        def a(name: str) -> Value:
            return field(cur, cfg, "ALU", name)

        bgn, end, it_out, it_in = g("uop_bgn"), g("uop_end"), g("iter_out"), g("iter_in")
        loop_nop = (end <= bgn) | (it_out == 0) | (it_in == 0)
        nop = Mux(is_load, dma_nop, Mux(is_gemm | is_alu, loop_nop, 1))

        # ---------------------------------------------------------------- DMA (LOAD.UOP / LOAD.ACC)
        last = Signal()
        engines = {}
        requesting = (start & is_load & ~nop) | (state == REQ)
        for name, mt in (("uop", MemType.UOP), ("acc", MemType.ACC)):
            eng = DmaRead(cfg, cfg.elem_bytes(name), clog2(cfg.depth(name)))
            m.submodules[f"dma_{name}"] = eng
            # the acc engine's write port is muxed with the pipeline's write-back below
            connect_engine(m, cfg, eng, cur, requesting & self.grant & (mem == mt), self,
                           "uop" if name == "uop" else None)
            engines[name] = eng
        ea = engines["acc"]
        mux_read_masters(m, self, engines["uop"], ea)

        # ---------------------------------------------------------------- declared depths
        alu_depths = {o.opcode: o.timing.depth(cfg) for o in alu_ops(cfg)}
        tensor_depths = {d.opcode: d.timing.depth(cfg) for d in decls}
        for what, depths in (("ALU op", {o.name: alu_depths[o.opcode] for o in alu_ops(cfg)}),
                             ("intrinsic", {d.name: tensor_depths[d.opcode] for d in decls})):
            for name, depth in depths.items():
                if depth < MIN_DEPTH:
                    raise ValueError(f"{what} {name}: pipeline depth {depth}; the compute pipeline has at least "
                                     f"{MIN_DEPTH} stages (micro-op read, operand read + compute + write)")
        # the micro-op register (UOP_REGISTER) takes a stage from every datapath: depths below are the pipeline's
        # after it (declared - 1)
        uop_reg = int(min([*alu_depths.values(), *tensor_depths.values()]) >= UOP_REGISTER)
        alu_depths = {code: depth - uop_reg for code, depth in alu_depths.items()}
        tensor_depths = {code: depth - uop_reg for code, depth in tensor_depths.items()}
        p_max = max([*alu_depths.values(), *tensor_depths.values()])
        # the current instruction's depth (an ALU op's, or a tensor intrinsic's by opcode): its write stage
        common = max(set(alu_depths.values()), key=list(alu_depths.values()).count)
        pipe: Value = Const(common, 5)
        for code, depth in alu_depths.items():
            if depth != common:
                pipe = Mux(is_alu & (a("alu_opcode") == code), depth, pipe)
        for d in decls:
            pipe = Mux(opcode == d.opcode, tensor_depths[d.opcode], pipe)

        # ---------------------------------------------------------------- loop issue (S0)
        k_r, i1_r, i0_r = Signal(cfg.uop_idx_bits + 1), Signal(14), Signal(14)
        ab, ib, wb = cfg.acc_idx_bits, cfg.inp_idx_bits, cfg.wgt_idx_bits
        sb = max(ab, ib)
        od_r, os_r, ow_r = Signal(ab), Signal(sb), Signal(wb)
        bd_r, bs_r, bw_r = Signal(ab), Signal(sb), Signal(wb)
        issue = Signal()
        in_exec = state == EXEC
        kk = Mux(in_exec, k_r, bgn)
        i1 = Mux(in_exec, i1_r, 0)
        i0 = Mux(in_exec, i0_r, 0)
        od, os, ow = Mux(in_exec, od_r, 0), Mux(in_exec, os_r, 0), Mux(in_exec, ow_r, 0)
        bd, bs, bw = Mux(in_exec, bd_r, 0), Mux(in_exec, bs_r, 0), Mux(in_exec, bw_r, 0)
        sfo = Mux(is_alu, a("src_factor_out"), g("src_factor_out"))
        sfi = Mux(is_alu, a("src_factor_in"), g("src_factor_in"))
        dfo, dfi = g("dst_factor_out"), g("dst_factor_in")
        wfo, wfi = g("wgt_factor_out"), g("wgt_factor_in")
        m.d.comb += issue.eq((start & (is_gemm | is_alu) & ~nop) | in_exec)
        final = Signal()
        with m.If(issue):
            m.d.sync += [k_r.eq(kk + 1), i1_r.eq(i1), i0_r.eq(i0), od_r.eq(od), os_r.eq(os), ow_r.eq(ow),
                         bd_r.eq(bd), bs_r.eq(bs), bw_r.eq(bw)]
            with m.If(kk + 1 == end):
                m.d.sync += [k_r.eq(bgn), i1_r.eq(i1 + 1), od_r.eq(od + dfi), os_r.eq(os + sfi), ow_r.eq(ow + wfi)]
                with m.If(i1 + 1 == it_in):
                    m.d.sync += [i1_r.eq(0), i0_r.eq(i0 + 1), od_r.eq(bd + dfo), os_r.eq(bs + sfo),
                                 ow_r.eq(bw + wfo), bd_r.eq(bd + dfo), bs_r.eq(bs + sfo), bw_r.eq(bw + wfo)]
                    m.d.comb += final.eq(i0 + 1 == it_out)
            m.d.sync += state.eq(EXEC)
            with m.If(final):
                m.d.sync += state.eq(DRAIN)  # the pipeline drains: the unit ends when the last micro-op writes
        m.d.comb += self.uop_r_addr.eq(kk)

        # ---------------------------------------------------------------- S1: indices, operand reads
        # per-micro-op control travels down the stages (valid, dst, the last micro-op's mark); everything else is
        # the current instruction's (``cur`` holds it until the unit ends)
        v1, fin1, od1, os1, ow1 = Signal(), Signal(), Signal(ab), Signal(sb), Signal(wb)
        s1_in = [issue, issue & final, od, os, ow]
        uword = self.uop_r_data[:32]
        if uop_reg:  # the micro-op and its loop offsets wait a cycle in registers (see UOP_REGISTER)
            s1_in = [_reg(m, v, f"s0q_{k}") for k, v in enumerate(s1_in)]
            uword = _reg(m, uword, "uop_q")
        m.d.sync += [r.eq(v) for r, v in zip([v1, fin1, od1, os1, ow1], s1_in)]
        rst = g("reset")  # the same bit in the ALU format
        ovw = is_gemm & g("overwrite")  # GEMM overwrite: the old accumulator is not added (reset still wins)
        u_dst, u_src, u_wgt = (field(uword, cfg, "UOP", f) for f in ("dst", "src", "wgt"))
        dst1, src1, wgt1 = Signal(ab), Signal(sb), Signal(wb)
        m.d.comb += [dst1.eq(u_dst + od1), src1.eq(u_src + os1), wgt1.eq(u_wgt + ow1)]
        records = record_supported(cfg)
        rec_codes = [o.opcode for o in alu_ops(cfg) if o.operand == "wgt"]
        rec1 = Signal()  # a record op: WGT is read at the src index
        if rec_codes:
            m.d.comb += rec1.eq(is_alu & Cat(*[a("alu_opcode") == c for c in rec_codes]).any())
        # a vector operand (k pieces per row): the row at index >> log2(k), the piece (low bits) chosen later
        inp_addr: Value = src1
        wgt_addr: Value = wgt1
        for d in decls:
            vk = intrs[d.name].vectors
            for o in d.operands:
                if vk[o.name] > 1:
                    sh = log2(vk[o.name])
                    if o.scope == "inp":
                        inp_addr = Mux(opcode == d.opcode, src1 >> sh, inp_addr)
                    else:
                        wgt_addr = Mux(opcode == d.opcode, wgt1 >> sh, wgt_addr)
        m.d.comb += [self.inp_r_addr.eq(inp_addr), self.wgt_r_addr.eq(Mux(rec1, src1, wgt_addr)),
                     self.acc0_r_addr.eq(dst1), self.acc1_r_addr.eq(src1)]

        # stage k (k >= 2) holds the micro-op that was in S1 k - 1 cycles ago
        def chain(first: Value, n: int, name: str) -> list[Value]:
            out = [None, first]
            for k in range(2, n + 1):
                r = Signal(Value.cast(first).shape(), name=f"{name}{k}")
                m.d.sync += r.eq(out[-1])
                out.append(r)
            return out

        vk_ = chain(v1, p_max, "v")
        dstk = chain(dst1, p_max, "dst")
        fink = chain(fin1, p_max, "fin")
        isubk = chain(src1, 4, "isub")  # a vector operand's piece: the low bits of the src / wgt index
        wsubk = chain(wgt1, 4, "wsub")

        # ---------------------------------------------------------------- S2: operand rows; the BRAM output register
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        ww, aw, ow_ = cfg.wgt_width, cfg.acc_width, cfg.out_width
        lanes = B * BO
        raw = {"inp": self.inp_r_data, "wgt": self.wgt_r_data, "acc_d": self.acc0_r_data, "acc_s": self.acc1_r_data}
        rows = {2: raw}
        # the row registers load only behind a micro-op (their clock enable: the stage's valid bit); between
        # micro-ops they hold, which no datapath sees (each reads them behind its own stage's valid bit)
        if p_max >= 3:  # the rows registered as they leave the block RAMs (level 0 of every datapath of depth >= 3)
            rows[3] = {k: _reg(m, v, f"{k}_q", vk_[2]) for k, v in raw.items()}
        if p_max >= SECOND_ROW_REGISTER:  # and again, for the deep datapaths (see SECOND_ROW_REGISTER)
            rows[4] = {k: _reg(m, v, f"{k}_q2", vk_[3]) for k, v in rows[3].items()}
        tensor_max = max(tensor_depths.values(), default=2)
        accd = [None] + chain(self.acc0_r_data, max(tensor_max - 1, 1), "accd")  # accd[k]: the dst row at stage k
        # the pipeline's writes of the last cycles (hist_*[k]: k cycles ago), for the tensor intrinsics' forwarding
        hist_n = max(tensor_max - 2, 0)
        hist_v = [None] + [Signal(name=f"hist_v{k}") for k in range(1, hist_n + 1)]
        hist_a = [None] + [Signal(ab, name=f"hist_a{k}") for k in range(1, hist_n + 1)]
        hist_d = [None] + [Signal(lanes * aw, name=f"hist_d{k}") for k in range(1, hist_n + 1)]

        def first_stage(depth: int) -> int:
            """The stage a datapath of ``depth`` takes its operand rows at (its level 0)."""
            return 2 if depth == 2 else 4 if depth >= SECOND_ROW_REGISTER else 3

        v_w, dst_w, fin_w = Signal(), Signal(ab), Signal()  # the write stage's micro-op (driven below)
        fwd_by_depth: dict[int, Value] = {}

        def forwarded(depth: int) -> Value:
            """The old accumulator row for the micro-op at stage ``depth`` (its write stage): the newest of the
            pipeline's writes of the last ``depth - 2`` cycles to its dst, else the row read in S1. Which one is
            decided a stage early (stage ``depth - 1`` compares against the write now and the history one younger)
            and registered as a one-hot select, so the write stage only muxes before its adder."""
            if depth in fwd_by_depth:
                return fwd_by_depth[depth]
            n = depth - 2
            if n <= 0:
                fwd_by_depth[depth] = accd[depth]
                return accd[depth]
            d1 = dstk[depth - 1]
            hits = [v_w & (dst_w == d1)] + [hist_v[k] & (hist_a[k] == d1) for k in range(1, n)]
            onehot = [Signal(name=f"fwd{depth}_sel{k}") for k in range(1, n + 1)]  # onehot[k-1]: k cycles ago
            none = Signal(name=f"fwd{depth}_none")
            taken: Value = Const(0, 1)
            for k, h in enumerate(hits):
                m.d.sync += onehot[k].eq(h & ~taken)
                taken = taken | h
            m.d.sync += none.eq(~taken)
            out: Value = accd[depth] & none.replicate(lanes * aw)
            for k in range(1, n + 1):
                out = out | (hist_d[k] & onehot[k - 1].replicate(lanes * aw))
            sig = Signal(lanes * aw, name=f"fwd{depth}")
            m.d.comb += sig.eq(out)
            fwd_by_depth[depth] = sig
            return sig

        def early(depth: int) -> int:
            """1 when a tensor intrinsic of ``depth`` accumulates a stage before its write (deep pipelines: the sum is
            registered and the write stage only writes), else 0 (it accumulates in the write stage)."""
            return int(depth - first_stage(depth) >= EARLY_ACCUMULATE)

        early_sel: dict[int, Value] = {}
        tq_all: list[list[Signal]] = []  # the early accumulates' registered sums (per declaration, per lane)
        newest_sigs: list[Signal] = []

        def forwarded_early(depth: int) -> Value:
            """The old accumulator row for the micro-op at stage ``depth - 1`` (where an early declaration adds): the
            newest of the sum registered for the micro-op just before it (now at the write stage), the writes of the
            last ``depth - 3`` cycles and the row read in S1; the choice is made at stage ``depth - 2`` and registered
            as a one-hot select (with the overwrite bit folded in: no old value at all)."""
            if depth in early_sel:
                return early_sel[depth]
            n = depth - 3  # history entries still needed
            d2 = dstk[depth - 2]
            hits = [vk_[depth - 1] & (dstk[depth - 1] == d2), v_w & (dst_w == d2)]
            hits += [hist_v[k] & (hist_a[k] == d2) for k in range(1, n)]
            onehot = [Signal(name=f"efwd{depth}_sel{k}") for k in range(len(hits))]
            none = Signal(name=f"efwd{depth}_none")
            taken: Value = Const(0, 1)
            for k, h in enumerate(hits):
                m.d.sync += onehot[k].eq(h & ~taken & ~ovw)
                taken = taken | h
            m.d.sync += none.eq(~taken & ~ovw)
            w = lanes * aw
            newest = Signal(w, name=f"efwd{depth}_newest")  # the early sums of every declaration (0 but the active)
            newest_sigs.append(newest)  # driven once every declaration's sums exist
            out: Value = (accd[depth - 1] & none.replicate(w)) | (newest & onehot[0].replicate(w))
            for k in range(1, n + 1):
                out = out | (hist_d[k] & onehot[k].replicate(w))
            sig = Signal(w, name=f"efwd{depth}")
            m.d.comb += sig.eq(out)
            early_sel[depth] = sig
            return sig

        # ---------------------------------------------------------------- tensor intrinsics: stages, accumulate
        ten = is_gemm & ~rst
        gemm_depth = tensor_depths[decls[0].opcode] if decls else 3
        g0 = first_stage(gemm_depth)
        levels = max(BI - 1, 0).bit_length()
        g_budget = gemm_depth - g0 - early(gemm_depth)
        arr_stager = Stager(m, g_budget, lambda lv: vk_[g0 + lv] & ten)
        array = GemmArray(cfg, m, vk_[g0] & ten, arr_stager, array_stages(cfg, g_budget))
        array.s0 = g0
        tensor_res: list[Value] = [Const(0, aw)] * lanes  # per lane: the OR of every declaration's (isolated) result
        for d in decls:
            intr = intrs[d.name]
            depth = tensor_depths[d.opcode]
            s0 = first_stage(depth)
            sel = opcode == d.opcode
            subs = {}
            for o in d.operands:
                k = intr.vectors[o.name]
                subs[o.scope] = (isubk if o.scope == "inp" else wsubk)[s0][:max(1, log2(k))]
            st = Stager(m, depth - s0 - early(depth), lambda lv, s0=s0, sel=sel: vk_[s0 + lv] & sel & ~rst)
            ctx = DatapathContext(cfg, intr, {"inp": rows[s0]["inp"], "wgt": rows[s0]["wgt"]}, subs, sel, array, st)
            ctx.s0 = s0
            terms = lane_terms(ctx)
            if early(depth):  # accumulate at stage depth - 1 into a register; the write stage writes it
                go_e = vk_[depth - 1] & sel & ~rst
                fwd = forwarded_early(depth)
                regs = []
                for j in range(lanes):
                    old = fwd[j * aw:][:aw].as_signed()  # 0 on overwrite (folded into the select)
                    regs.append(_reg(m, isolated(m, go_e, (old + terms[j])[:aw]), f"tq{d.opcode}_{j}"))
                tq_all.append(regs)
                for j in range(lanes):
                    tensor_res[j] = tensor_res[j] | regs[j]
                continue
            go = vk_[depth] & sel & ~rst
            # the old accumulator at the write stage: the row read in S1, or the newest result written since
            fwd = forwarded(depth)
            for j in range(lanes):
                old = fwd[j * aw:][:aw].as_signed()
                base = Mux(ovw, 0, old)  # overwrite: acc[dst] = term, the old value is not read
                tensor_res[j] = tensor_res[j] | isolated(m, go, (base + terms[j])[:aw])
        for newest in newest_sigs:
            m.d.comb += newest.eq(Cat(*[_or([regs[j] for regs in tq_all]) for j in range(lanes)]))
        if array.users:
            array.elaborate(m)

        # ---------------------------------------------------------------- ALU lanes
        alu_min = min(alu_depths.values())
        a0 = first_stage(alu_min)
        alu_levels = {code: depth - a0 for code, depth in alu_depths.items()}
        # the lanes (stages >= S1, state EXEC/DRAIN) take the instruction from ``insn``, the register ``cur`` equals
        # then: through ``cur`` the state and token logic of the take cycle reached the lane multiplier (tiny's
        # routed critical path on ECP5, 44.55 MHz: tokens -> cur -> immediate -> bias add -> MULT18X18D)
        def ai(name: str) -> Value:
            return field(insn, cfg, "ALU", name)

        alu_on = (field(insn, cfg, "FINISH", "opcode") == Opcode.ALU) & ~field(insn, cfg, "GEMM", "reset")
        imm = ai("imm")
        ar = rows[a0]
        alu_res = []
        for b in range(B):
            for o in range(BO):
                j = b * BO + o
                av = ar["acc_d"][j * aw:][:aw].as_signed()
                bv = Mux(ai("use_imm"), imm.as_signed(), ar["acc_s"][j * aw:][:aw].as_signed())
                rec = record_of(ar["wgt"][o * BI * ww:][:RECORD_BITS]) if records else None
                lane = alu_lane(m, ai("alu_opcode"), av, bv, aw, rec, enable=lambda lv: vk_[a0 + lv] & alu_on,
                                levels=alu_levels)
                alu_res.append(lane)

        # ---------------------------------------------------------------- the write stage
        at = {k: pipe == k for k in sorted({*alu_depths.values(), *tensor_depths.values()})}
        for k, hit in at.items():
            with m.If(hit):
                m.d.comb += [v_w.eq(vk_[k]), dst_w.eq(dstk[k]), fin_w.eq(fink[k])]
        alu_go = v_w & alu_on
        res = Signal(lanes * aw)  # every datapath is 0 unless it is the micro-op's (and all are 0 on reset)
        m.d.comb += res.eq(Cat(*[tv | isolated(m, alu_go, al)[:aw] for tv, al in zip(tensor_res, alu_res)]))
        with m.If(fin_w):  # the last micro-op writes: the instruction ends (e = its write cycle + 1)
            m.d.comb += last.eq(1)
            m.d.sync += state.eq(IDLE)
            # every micro-op of the instruction has written (none issues after the last): clear the stages, so a
            # next instruction of another depth, whose write stage is another tap, sees no stale micro-op
            m.d.sync += [v.eq(0) for v in vk_[2:]] + [f.eq(0) for f in fink[2:]]
        # the writes of the last cycles, newest first, for the tensor intrinsics' forwarding
        hv, ha, hd = v_w, dst_w, res
        for k in range(1, hist_n + 1):
            m.d.sync += [hist_v[k].eq(hv), hist_a[k].eq(ha), hist_d[k].eq(hd)]
            hv, ha, hd = hist_v[k], hist_a[k], hist_d[k]

        # acc / out writes: the pipeline's write stage or the acc DMA
        ka = epb(cfg, cfg.acc_elem_bytes)
        acc_data = Signal(ka * lanes * aw)
        with m.If(v_w):
            m.d.comb += [self.acc_w_addr.eq(dst_w), acc_data.eq(res), self.acc_w_count.eq(1), self.acc_w_en.eq(1)]
        with m.Else():
            m.d.comb += [self.acc_w_addr.eq(ea.w_addr), acc_data.eq(ea.w_data), self.acc_w_count.eq(ea.w_count),
                         self.acc_w_en.eq(ea.w_en)]
        m.d.comb += self.acc_w_data.eq(acc_data)
        narrow = [acc_data[(e * lanes + j) * aw:][:ow_] for e in range(ka) for j in range(lanes)]
        m.d.comb += [self.out_w_addr.eq(self.acc_w_addr), self.out_w_data.eq(Cat(*narrow)),
                     self.out_w_count.eq(self.acc_w_count), self.out_w_en.eq(self.acc_w_en)]

        # ---------------------------------------------------------------- control
        dma_control(m, start=start, nop=nop, is_dma=is_load, state=state, req=self.req, grant=self.grant,
                    port_last=self.port_last, last=last)
        m.d.comb += self.finish.eq(last & is_fin)
        push(m, cfg, cur, last, [("push_prev", self.push_prev), ("push_next", self.push_next)])
        m.d.comb += self.idle.eq(state == IDLE)
        return m
