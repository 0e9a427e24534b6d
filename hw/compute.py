"""The compute unit: LOAD.UOP/LOAD.ACC, the declared tensor intrinsics (GEMM, DWMAC, ...), ALU and FINISH.

Tensor intrinsics and ALU issue one micro-op per cycle from ``s`` through a three-stage pipeline:
S0 reads the uop, S1 adds the loop offsets and reads inp/wgt/acc, S2 computes and writes
acc (and the narrowed OUT mirror). A record ALU op (REQUANT) reads WGT at the src index in S1
(the WGT port is otherwise idle during ALU instructions); lane ``(b, o)`` takes its record from
the first ``RECORD_BITS`` bits of the element's row ``o``. The acc read ports are transparent for the acc write
port, which forwards a result to the next micro-op's read in the same cycle, so no
hazard is visible. The unit ends at ``e = s + n + pipeline`` (docs/timing.md), ``pipeline`` the
instruction's declared depth. Every tensor intrinsic shares the micro-op loop (its format starts
with GEMM's fields) and gets its S2 datapath from its declaration (:mod:`hw.intrinsic`); a vector
operand's row is read at ``index >> log2(k)`` and its piece chosen by the low bits in S2.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.alu import alu_lane, record_of
from hw.common import clog2, epb, field, log2
from hw.intrinsic import DatapathContext, GemmArray, can_pair, isolated, lane_terms, pair_products, tree_sum  # noqa: F401
from hw.dma_read import DmaRead
from hw.load import connect_engine, mem_ports, mux_read_masters, read_master, read_port
from hw.unit import IDLE, REQ, dma_control, frontend, push
from isa.alu import IMM_BITS, alu_opcode_bits, alu_ops
from isa.requant import RECORD_BITS, record_supported
from isa.config import HwConfig
from isa.instructions import MemType, Opcode
from isa.intrinsics import intrinsics, tensor_declarations

EXEC, TAIL = 4, 5


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

        # ---------------------------------------------------------------- loop issue (S0)
        k_r, i1_r, i0_r = Signal(cfg.uop_idx_bits + 1), Signal(14), Signal(14)
        ab, ib, wb = cfg.acc_idx_bits, cfg.inp_idx_bits, cfg.wgt_idx_bits
        sb = max(ab, ib)
        od_r, os_r, ow_r = Signal(ab), Signal(sb), Signal(wb)
        bd_r, bs_r, bw_r = Signal(ab), Signal(sb), Signal(wb)
        tail = Signal(5)
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
                m.d.sync += state.eq(TAIL)
        # the declared pipeline depth: an ALU op's (isa.alu.AluDecl; the ops' common depth needs no mux) or a
        # tensor intrinsic's (by opcode)
        alu_depths = {o.opcode: o.timing.depth(cfg) for o in alu_ops(cfg)}
        common = max(set(alu_depths.values()), key=list(alu_depths.values()).count)
        pipe: Value = Const(common, 5)
        for code, depth in alu_depths.items():
            if depth != common:
                pipe = Mux(is_alu & (a("alu_opcode") == code), depth, pipe)
        for d in decls:
            pipe = Mux(opcode == d.opcode, d.timing.depth(cfg), pipe)
        with m.If(issue & final):
            m.d.sync += tail.eq(pipe)
        with m.If(state == TAIL):
            m.d.sync += tail.eq(tail - 1)
            with m.If(tail == 1):
                m.d.comb += last.eq(1)
                m.d.sync += state.eq(IDLE)
        m.d.comb += self.uop_r_addr.eq(kk)

        # ---------------------------------------------------------------- S1: indices, operand reads
        op_bits = alu_opcode_bits()
        v1, od1, os1, ow1 = Signal(), Signal(ab), Signal(sb), Signal(wb)
        alu1, rst1, op1, ui1, imm1 = Signal(), Signal(), Signal(op_bits), Signal(), Signal(IMM_BITS)
        ovw1 = Signal()  # GEMM overwrite: the old accumulator is not added (reset still wins)
        opc1 = Signal(3)
        m.d.sync += [v1.eq(issue), od1.eq(od), os1.eq(os), ow1.eq(ow), alu1.eq(is_alu), rst1.eq(g("reset")),
                     ovw1.eq(is_gemm & g("overwrite")), opc1.eq(opcode),
                     op1.eq(a("alu_opcode")), ui1.eq(a("use_imm")), imm1.eq(a("imm"))]
        uword = self.uop_r_data[:32]
        u_dst, u_src, u_wgt = (field(uword, cfg, "UOP", f) for f in ("dst", "src", "wgt"))
        dst1, src1, wgt1 = Signal(ab), Signal(sb), Signal(wb)
        m.d.comb += [dst1.eq(u_dst + od1), src1.eq(u_src + os1), wgt1.eq(u_wgt + ow1)]
        records = record_supported(cfg)
        rec_codes = [o.opcode for o in alu_ops(cfg) if o.operand == "wgt"]
        rec1 = Signal()  # a record op: WGT is read at the src index
        if rec_codes:
            m.d.comb += rec1.eq(alu1 & Cat(*[op1 == c for c in rec_codes]).any())
        # a vector operand (k pieces per row): the row at index >> log2(k), the piece (low bits) chosen in S2
        inp_addr: Value = src1
        wgt_addr: Value = wgt1
        for d in decls:
            vk = intrs[d.name].vectors
            for o in d.operands:
                if vk[o.name] > 1:
                    sh = log2(vk[o.name])
                    if o.scope == "inp":
                        inp_addr = Mux(opc1 == d.opcode, src1 >> sh, inp_addr)
                    else:
                        wgt_addr = Mux(opc1 == d.opcode, wgt1 >> sh, wgt_addr)
        m.d.comb += [self.inp_r_addr.eq(inp_addr), self.wgt_r_addr.eq(Mux(rec1, src1, wgt_addr)),
                     self.acc0_r_addr.eq(dst1), self.acc1_r_addr.eq(src1)]
        v2, dst2, alu2, rst2, op2, ui2 = Signal(), Signal(ab), Signal(), Signal(), Signal(op_bits), Signal()
        imm2, ovw2, opc2 = Signal(IMM_BITS), Signal(), Signal(3)
        isub2, wsub2 = Signal(sb), Signal(wb)  # the S1 src / wgt indices: a vector operand's piece is their low bits
        m.d.sync += [v2.eq(v1), dst2.eq(dst1), alu2.eq(alu1), rst2.eq(rst1), op2.eq(op1), ui2.eq(ui1),
                     imm2.eq(imm1), ovw2.eq(ovw1), opc2.eq(opc1), isub2.eq(src1), wsub2.eq(wgt1)]

        # ---------------------------------------------------------------- S2: compute, write back
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        ww, aw, ow_ = cfg.wgt_width, cfg.acc_width, cfg.out_width
        inp = self.inp_r_data
        wgt = self.wgt_r_data
        acc_d = self.acc0_r_data
        acc_s = self.acc1_r_data
        lanes = B * BO
        tensor_go, alu_go = Signal(name="tensor_go"), Signal(name="alu_go")  # a tensor / an ALU micro-op in S2 (operand isolation of each datapath)
        m.d.comb += [tensor_go.eq(v2 & ~rst2 & ~alu2), alu_go.eq(v2 & ~rst2 & alu2)]
        array = GemmArray(cfg, m, tensor_go)
        terms = {}
        for d in decls:  # each declared tensor intrinsic's lane values (GEMM first: the array's default user)
            intr = intrs[d.name]
            subs = {}
            for o in d.operands:
                k = intr.vectors[o.name]
                subs[o.scope] = (isub2 if o.scope == "inp" else wsub2)[:max(1, log2(k))]
            ctx = DatapathContext(cfg, intr, {"inp": inp, "wgt": wgt}, subs, opc2 == d.opcode, array)
            terms[d.opcode] = lane_terms(ctx)
        if array.users:
            array.elaborate(m)
        tensor_res, alu_res = [], []
        for b in range(B):
            for o in range(BO):
                j = b * BO + o
                av = acc_d[j * aw:][:aw].as_signed()
                base = Mux(ovw2, 0, av)  # overwrite: acc[dst] = term, the old value is not read
                t: Value = terms[decls[0].opcode][j]
                for d in decls[1:]:
                    t = Mux(opc2 == d.opcode, terms[d.opcode][j], t)
                tensor_res.append(isolated(m, tensor_go, (base + t)[:aw]))
                bv = Mux(ui2, imm2.as_signed(), acc_s[j * aw:][:aw].as_signed())
                rec = record_of(wgt[o * BI * ww:][:RECORD_BITS]) if records else None
                alu_res.append(alu_lane(m, op2, av, bv, aw, rec, en=alu_go)[:aw])
        res = Signal(lanes * aw)  # both datapaths are 0 unless theirs is the micro-op (and 0 on reset)
        m.d.comb += res.eq(Cat(*[tv | al for tv, al in zip(tensor_res, alu_res)]))

        # acc / out writes: the pipeline (S2) or the acc DMA
        ka = epb(cfg, cfg.acc_elem_bytes)
        acc_data = Signal(ka * lanes * aw)
        with m.If(v2):
            m.d.comb += [self.acc_w_addr.eq(dst2), acc_data.eq(res), self.acc_w_count.eq(1), self.acc_w_en.eq(1)]
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
