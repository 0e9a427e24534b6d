"""Random valid programs (fixed seeds) for RTL-vs-simulator comparison, for any config.

A program is a chain of blocks; each block loads (INP/WGT), computes (LOAD.UOP/ACC,
GEMM incl. reset and overwrite GEMMs, ALU of every registered op, NOPs) and stores, with tokens that make it race-free:
block ``b+1``'s loads wait for block ``b``'s compute (compute->load) and its compute waits
for block ``b``'s store (store->compute). Every index stays inside its scratchpad, and an overwrite GEMM
writes each of its dst indices once (the simulator rejects anything else).

Besides small 2D transfers with padding, the DMAs include whole-scratchpad transfers, rows longer
than 256 beats (split into several AXI bursts) and rows that cross a 4 KiB boundary (split there).
Hazard chains (docs/timing.md, *Pipeline and hazards*): some compute slots are a run of micro-ops that update
the same accumulator rows again and again at one distance ``k`` (micro-op ``j`` reads the row micro-op ``j - k``
writes), ``k`` from 1 to beyond the pipeline depth: GEMM and DWMAC at every distance (the accumulator is
forwarded), ALU at the distances the hazard rule allows (``k > depth - 2``), back to back with the GEMMs on the same
rows. Every other ALU instruction keeps the rule too (redrawn, or its dst rows laid out distinct).
Some blocks fill the load->compute token queue to its depth: ``dep_queue_depth - 1`` token-only NOP
loads run ahead while compute still waits for the previous block's (long) store, then the real loads;
compute pops them with as many token-only NOP GEMMs. Those runs of NOPs also fill the load and compute
command queues, so fetch stalls on a full queue.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from isa import Alu, Deps, Finish, Gemm, Load, MemType, Store, Uop, encode_stream, encode_uops
from isa.alu import IMM_BITS, alu_ops
from isa.config import HwConfig
from isa.encoding import LOOP_BITS
from isa.timing import alu_hazard, in_flight

REGION = 2048  # smallest data region in bytes (multiple of every element size used)


@dataclass
class RandomProgram:
    name: str
    dram: np.ndarray
    insn_addr: int
    n_insns: int


def _deps(**kw: bool) -> Deps:
    return Deps(**kw)


def random_program(cfg: HwConfig, seed: int, blocks: int | None = None,
                   tensor: tuple[str, ...] = ("gemm",)) -> RandomProgram:  # noqa: C901
    """``tensor``: the declared tensor intrinsics (``isa.intrinsics``) the GEMM-slot instructions draw from
    (one extra draw per slot only when there are several, so the default programs are unchanged)."""
    from isa.intrinsics import declaration, insn_class

    classes = [insn_class(declaration(t)) for t in tensor]
    rng = np.random.default_rng(seed)
    mems = ("inp", "wgt", "acc", "out")
    eb = {m: cfg.elem_bytes(m) for m in mems + ("uop",)}
    # one 4 KiB-aligned region per memory, large enough for a whole-scratchpad transfer plus a 4 KiB crossing
    size = {m: _round(max(REGION, 8 * eb[m], cfg.depth(m) * eb[m] + 4096), 4096) for m in mems}
    base, top = {}, 0
    for m in mems:
        base[m], top = top, top + size[m]
    uop_region = top
    insn_base = uop_region + _round(8 * cfg.uop_depth + 4096, 4096)
    dram = np.zeros(insn_base + 16 * 8192, np.uint8)
    for m in ("inp", "wgt"):
        dram[base[m]:base[m] + size[m]] = rng.integers(0, 256, size[m], dtype=np.uint8)
    acc_vals = rng.integers(-(1 << 12), 1 << 12, (size["acc"] // 4,), dtype=np.int32)
    dram[base["acc"]:base["acc"] + size["acc"]] = acc_vals.view(np.uint8)
    uop_words: list[int] = []
    n_elems = {m: size[m] // eb[m] for m in mems}
    beat = cfg.bus_bytes
    insns = []
    blocks = blocks or int(rng.integers(1, 4))
    fill = [b > 0 and rng.random() < 0.15 for b in range(blocks)] + [False]  # blocks that fill l2c to depth

    def small(mem: str, depth: int, load: bool) -> dict:
        y, x = int(rng.integers(1, 4)), int(rng.integers(1, 5))
        pads = [int(rng.integers(0, 3)) if (load and rng.random() < 0.4) else 0 for _ in range(4)]
        rows, cols = pads[0] + y + pads[1], pads[2] + x + pads[3]
        if rows * cols > depth:
            pads, rows, cols = [0, 0, 0, 0], y, x
        stride = x + int(rng.integers(0, 3))
        sram = int(rng.integers(0, depth - rows * cols + 1))
        dbase = int(rng.integers(0, n_elems[mem] - (y - 1) * stride - x + 1))
        pad_value = int(rng.integers(-128, 128)) if mem == "inp" and any(pads) and rng.random() < 0.5 else 0
        return dict(sram_base=sram, dram_base=base[mem] // eb[mem] + dbase, y_size=y, x_size=x, x_stride=stride,
                    y_pad0=pads[0], y_pad1=pads[1], x_pad0=pads[2], x_pad1=pads[3], pad_value=pad_value)

    def big(mem: str, depth: int, kind: str) -> dict:
        """``whole``: the whole scratchpad in one row; ``long``: rows of more than 256 beats; ``cross``: a row
        across a 4 KiB boundary. Rows start on element (and beat) boundaries."""
        e = eb[mem]
        if depth < 2:
            return small(mem, depth, False)
        if kind == "whole":
            y, x = 1, depth
        elif kind == "long":
            lo = 256 * beat // e + 1  # elements in 257 beats
            if lo > depth:
                return small(mem, depth, False)
            x = int(rng.integers(lo, min(depth, 2 * lo) + 1))
            y = 1 if 2 * x > depth else int(rng.integers(1, 3))
        else:
            x = int(rng.integers(2, max(3, min(depth, 8192 // e)) + 1))  # at least two elements: one each side
            y = 1 if 2 * x > depth else int(rng.integers(1, 3))
        stride = x + int(rng.integers(0, 3))
        sram = int(rng.integers(0, depth - y * x + 1))
        span = (y - 1) * stride + x  # elements the block covers in DRAM
        if kind == "cross":  # the first row starts before a 4 KiB line and ends after it
            line = base[mem] + 4096 * int(rng.integers(1, size[mem] // 4096))
            lo_b = max(base[mem], line - x * e + e)
            first = int(rng.integers(-(-lo_b // e), (line - 1) // e + 1))
            dbase = first - base[mem] // e
            if dbase < 0 or dbase + span > n_elems[mem]:
                dbase = 0
        else:
            dbase = int(rng.integers(0, n_elems[mem] - span + 1))
        return dict(sram_base=sram, dram_base=base[mem] // e + dbase, y_size=y, x_size=x, x_stride=stride)

    def dma(mem: str, depth: int, load: bool) -> dict:
        r = rng.random()
        if r < 0.06:
            return big(mem, depth, "whole")
        if r < 0.12:
            return big(mem, depth, "long")
        if r < 0.2:
            return big(mem, depth, "cross")
        return small(mem, depth, load)

    def loops(depths: tuple[int, int, int]) -> tuple[dict, list[Uop]]:
        """Loop extents/factors and uops whose every index stays below ``depths`` (dst, src, wgt)."""
        n_u = int(rng.integers(1, 4))
        it_o, it_i = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        fac = {}
        span = []
        for k, d in zip(("dst", "src", "wgt"), depths):
            fo, fi = int(rng.integers(0, 3)), int(rng.integers(0, 3))
            fac[k] = (fo, fi)
            span.append(d - (it_o - 1) * fo - (it_i - 1) * fi)
        if min(span) < 1:
            it_o = it_i = 1
            span = list(depths)
        uops = [Uop(int(rng.integers(0, span[0])), int(rng.integers(0, span[1])), int(rng.integers(0, span[2])))
                for _ in range(n_u)]
        return dict(iter_out=it_o, iter_in=it_i, fac=fac), uops

    def dsts_distinct(lp: dict, uops: list[Uop]) -> bool:
        fo, fi = lp["fac"]["dst"]
        d = [u.dst + i0 * fo + i1 * fi for i0 in range(lp["iter_out"]) for i1 in range(lp["iter_in"]) for u in uops]
        return len(set(d)) == len(d)

    def distinct_dst(lp: dict, uops: list[Uop]) -> tuple[dict, list[Uop]]:
        """Re-lay the dst indices as one dense block (uop, then iter_in, then iter_out), so each is written once."""
        n, it_o, it_i = len(uops), lp["iter_out"], lp["iter_in"]
        if n * it_o * it_i > cfg.acc_depth:
            return lp, uops
        d0 = int(rng.integers(0, cfg.acc_depth - n * it_o * it_i + 1))
        fac = dict(lp["fac"], dst=(n * it_i, n))
        return dict(lp, fac=fac), [Uop(d0 + i, u.src, u.wgt) for i, u in enumerate(uops)]

    def load_uops(uops: list[Uop], deps: Deps) -> tuple[Load, int, int]:
        start = int(rng.integers(0, cfg.uop_depth - len(uops) + 1))
        while (4 * len(uop_words)) % beat:  # a uop row starts on a beat boundary
            uop_words.append(0)
        daddr = uop_region // 4 + len(uop_words)
        for u in uops:
            uop_words.append(int(encode_uops([u], cfg)[0]))
        return Load(MemType.UOP, start, daddr, 1, len(uops), len(uops), deps=deps), start, start + len(uops)

    def seq(insn, uops: list[Uop], which: str) -> np.ndarray:
        """The rows (``which``: dst or src) the micro-ops of ``insn`` touch, in issue order."""
        fo, fi = ((insn.dst_factor_out, insn.dst_factor_in) if which == "dst"
                  else (insn.src_factor_out, insn.src_factor_in))
        return np.array([getattr(u, which) + i0 * fo + i1 * fi for i0 in range(insn.iter_out)
                         for i1 in range(insn.iter_in) for u in uops], np.int64)

    def alu_ok(insn: Alu, uops: list[Uop]) -> bool:
        if insn.reset:
            return True
        reads_src = not insn.use_imm and alu_ops_by_name[insn.op].operand == "acc"
        return alu_hazard(seq(insn, uops, "dst"), seq(insn, uops, "src") if reads_src else None,
                          in_flight(cfg, insn)) is None

    chain_classes = [insn_class(declaration(t)) for t in ("gemm", "dwmac") if declaration(t).supported(cfg)]

    def hazard_chain() -> list:
        """Micro-ops on the same rows at one distance ``k``: a tensor intrinsic (GEMM / DWMAC, forwarded) at any
        ``k`` in 1..depth+1, then an ALU op at the smallest distances the rule allows, on the same rows."""
        out = []
        cls = chain_classes[int(rng.integers(0, len(chain_classes)))]
        depth = cls(reset=False, uop_bgn=0, uop_end=1, iter_out=1, iter_in=1)
        depth = in_flight(cfg, depth) + 2
        k = int(rng.integers(1, depth + 2))
        k = min(k, cfg.acc_depth, cfg.uop_depth)
        reps = int(rng.integers(2, 5))
        r0 = int(rng.integers(0, cfg.acc_depth - k + 1))
        uops = [Uop(r0 + (j % k), int(rng.integers(0, cfg.inp_depth)), int(rng.integers(0, cfg.wgt_depth)))
                for j in range(min(k * reps, cfg.uop_depth))]
        ld, u0, u1 = load_uops(uops, Deps())
        out += [ld, cls(reset=False, uop_bgn=u0, uop_end=u1, iter_out=int(rng.integers(1, 3)),
                        iter_in=int(rng.integers(1, 3)))]  # zero factors: the loops repeat the same rows
        acc_ops = [o for o in alu_ops(cfg) if o.operand == "acc"]
        op = acc_ops[int(rng.integers(0, len(acc_ops)))]
        probe = Alu(op=op.name, reset=False, uop_bgn=0, uop_end=1, iter_out=1, iter_in=1)
        ka = max(k, in_flight(cfg, probe) + 1)  # the closest distance the ALU rule allows
        ka = min(ka, cfg.acc_depth - r0, cfg.uop_depth)
        auops = [Uop(r0 + (j % ka), r0 + ((j + 1) % ka), 0) for j in range(min(ka * reps, cfg.uop_depth))]
        alu = Alu(op=op.name, reset=False, uop_bgn=0, uop_end=len(auops), iter_out=1, iter_in=1,
                  use_imm=bool(rng.random() < 0.5), imm=int(rng.integers(-40, 40)))
        if not alu_ok(alu, auops):
            alu = replace(alu, use_imm=True)
        if alu_ok(alu, auops):
            ld, u0, u1 = load_uops(auops, Deps())
            out += [ld, replace(alu, uop_bgn=u0, uop_end=u1)]
        return out

    alu_ops_by_name = {o.name: o for o in alu_ops(cfg)}
    nop_load = Load(MemType.INP, 0, 0, 0, 0, 0)
    nop_gemm = Gemm(reset=False, uop_bgn=0, uop_end=0, iter_out=1, iter_in=1)
    n_fill = cfg.dep_queue_depth - 1
    for b in range(blocks):
        # ---- load
        lds = []
        for _ in range(int(rng.integers(1, 4))):
            mem = "inp" if rng.random() < 0.5 else "wgt"
            if rng.random() < 0.1:
                lds.append(nop_load)
            else:
                lds.append(Load(MemType[mem.upper()], **dma(mem, cfg.depth(mem), True)))
        if fill[b]:  # token-only loads run ahead and fill load->compute; the real loads push the last token
            lds = [_with(nop_load, push_next=True) for _ in range(n_fill)] + lds
        lds[0] = _with(lds[0], pop_next=b > 0)
        lds[-1] = _with(lds[-1], push_next=True)
        insns += lds
        # ---- compute
        cmp: list = []
        for _ in range(int(rng.integers(1, 5))):
            r = rng.random()
            if r < 0.15:
                cmp.append(Load(MemType.ACC, **dma("acc", cfg.acc_depth, True)))
            elif r < 0.55:
                lp, uops = loops((cfg.acc_depth, cfg.inp_depth, cfg.wgt_depth))
                reset = bool(rng.random() < 0.2)
                overwrite = bool(rng.random() < 0.4)
                if overwrite and not reset and rng.random() < 0.5:
                    lp, uops = distinct_dst(lp, uops)
                if overwrite and not reset and not dsts_distinct(lp, uops):
                    overwrite = False  # an overwrite GEMM may write each dst once (else the program is invalid)
                ld, u0, u1 = load_uops(uops, Deps())
                cmp.append(ld)
                cls = classes[int(rng.integers(0, len(classes)))] if len(classes) > 1 else classes[0]
                cmp.append(cls(reset=reset, uop_bgn=u0, uop_end=u1, iter_out=lp["iter_out"],
                                iter_in=lp["iter_in"], dst_factor_out=lp["fac"]["dst"][0],
                                dst_factor_in=lp["fac"]["dst"][1], src_factor_out=lp["fac"]["src"][0],
                                src_factor_in=lp["fac"]["src"][1], wgt_factor_out=lp["fac"]["wgt"][0],
                                wgt_factor_in=lp["fac"]["wgt"][1], overwrite=overwrite))
            elif r < 0.8:
                cmp += hazard_chain()
            elif r < 0.95:
                ops = alu_ops(cfg)
                op = ops[int(rng.integers(0, len(ops)))]
                record = op.operand == "wgt"  # REQUANT: src indexes WGT (random bytes: random records)
                imm = int(rng.integers(-(1 << (IMM_BITS - 1)), 1 << (IMM_BITS - 1)))
                if rng.random() < 0.5:
                    imm = int(rng.integers(-40, 40))
                reset, use_imm = bool(rng.random() < 0.1), not record and bool(rng.random() < 0.5)
                for attempt in range(20):  # the hazard rule: no read of a row one of the last depth-2 micro-ops writes
                    lp, uops = loops((cfg.acc_depth, min(cfg.wgt_depth, 1 << cfg.uop_src_bits) if record
                                      else cfg.acc_depth, 1))
                    if attempt >= 10:
                        lp, uops = distinct_dst(lp, uops)
                    insn = Alu(op=op.name, reset=reset, uop_bgn=0, uop_end=len(uops),
                               iter_out=lp["iter_out"], iter_in=lp["iter_in"], dst_factor_out=lp["fac"]["dst"][0],
                               dst_factor_in=lp["fac"]["dst"][1], src_factor_out=lp["fac"]["src"][0],
                               src_factor_in=lp["fac"]["src"][1], use_imm=use_imm or attempt >= 15, imm=imm)
                    if alu_ok(insn, uops):
                        break
                else:
                    insn = replace(insn, reset=True)  # writes only: no hazard
                ld, u0, u1 = load_uops(uops, Deps())
                cmp.append(ld)
                cmp.append(replace(insn, uop_bgn=u0, uop_end=u1))
            else:
                cmp.append(nop_gemm)
        cmp[0] = _with(cmp[0], pop_prev=True)
        if fill[b]:  # one pop per token-only load; the real work pops the last token (pushed after the real loads)
            cmp = [_with(nop_gemm, pop_prev=True) for _ in range(n_fill)] + cmp
        cmp[0] = _with(cmp[0], pop_next=b > 0)
        cmp[-1] = _with(cmp[-1], push_prev=True, push_next=True)
        insns += cmp
        # ---- store (a whole-OUT store before a filling block keeps compute waiting while the loads run ahead)
        sts = [Store(MemType.OUT, **dma("out", cfg.out_depth, False)) for _ in range(int(rng.integers(1, 3)))]
        if fill[b + 1]:
            sts.append(Store(MemType.OUT, **big("out", cfg.out_depth, "whole")))
        sts[0] = _with(sts[0], pop_prev=True)
        sts[-1] = _with(sts[-1], push_prev=True)
        insns += sts
    insns.append(Finish(deps=Deps(pop_next=True)))
    words = np.array(uop_words, dtype=np.uint32).view(np.uint8)
    dram[uop_region:uop_region + words.size] = words
    stream = encode_stream(insns, cfg).reshape(-1)
    dram[insn_base:insn_base + stream.size] = stream
    dram = dram[:insn_base + stream.size + 64].copy()
    return RandomProgram(f"random_{seed}", dram, insn_base, len(insns))


def _round(n: int, align: int) -> int:
    return -(-n // align) * align


def _with(insn, **flags: bool):
    return replace(insn, deps=replace(insn.deps, **{k: v for k, v in flags.items() if v}))


assert LOOP_BITS >= 2
