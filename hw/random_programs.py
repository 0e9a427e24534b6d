"""Random valid programs (fixed seeds) for RTL-vs-simulator comparison.

A program is a chain of blocks; each block loads (INP/WGT), computes (LOAD.UOP/ACC,
GEMM incl. reset and overwrite GEMMs, ALU of every registered op, NOPs) and stores, with tokens that make it race-free:
block ``b+1``'s loads wait for block ``b``'s compute (compute->load) and its compute waits
for block ``b``'s store (store->compute). Every index stays inside its scratchpad, and an overwrite GEMM
writes each of its dst indices once (the simulator rejects anything else).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import Alu, Deps, Finish, Gemm, Load, MemType, Store, Uop, encode_stream, encode_uops
from isa.alu import IMM_BITS, alu_ops
from isa.config import HwConfig
from isa.encoding import LOOP_BITS

REGION = 2048  # bytes per data region (multiple of every element size used)


@dataclass
class RandomProgram:
    name: str
    dram: np.ndarray
    insn_addr: int
    n_insns: int


def _deps(**kw: bool) -> Deps:
    return Deps(**kw)


def random_program(cfg: HwConfig, seed: int, blocks: int | None = None) -> RandomProgram:  # noqa: C901
    rng = np.random.default_rng(seed)
    eb = {m: cfg.elem_bytes(m) for m in ("inp", "wgt", "acc", "out", "uop")}
    region = max(REGION, *(8 * v for v in eb.values()))
    region = -(-region // 64) * 64
    base = {"inp": 0, "wgt": region, "acc": 2 * region, "out": 3 * region, "uop": 4 * region}
    uop_region = 4 * region
    insn_base = 6 * region
    dram = np.zeros(insn_base + 16 * 4096, np.uint8)
    dram[:3 * region] = rng.integers(0, 256, 3 * region, dtype=np.uint8)
    acc_vals = rng.integers(-(1 << 12), 1 << 12, (region // 4,), dtype=np.int32)
    dram[base["acc"]:base["acc"] + region] = acc_vals.view(np.uint8)
    uop_words: list[int] = []
    n_elems = {m: region // eb[m] for m in ("inp", "wgt", "acc", "out")}
    insns = []
    blocks = blocks or int(rng.integers(1, 4))

    def dma(mem: str, depth: int, load: bool) -> dict:
        y, x = int(rng.integers(1, 4)), int(rng.integers(1, 5))
        pads = [int(rng.integers(0, 3)) if (load and rng.random() < 0.4) else 0 for _ in range(4)]
        rows, cols = pads[0] + y + pads[1], pads[2] + x + pads[3]
        stride = x + int(rng.integers(0, 3))
        sram = int(rng.integers(0, depth - rows * cols + 1))
        dram_elems = n_elems[mem]
        dbase = int(rng.integers(0, dram_elems - (y - 1) * stride - x + 1))
        pad_value = int(rng.integers(-128, 128)) if mem == "inp" and any(pads) and rng.random() < 0.5 else 0
        return dict(sram_base=sram, dram_base=base[mem] // eb[mem] + dbase, y_size=y, x_size=x, x_stride=stride,
                    y_pad0=pads[0], y_pad1=pads[1], x_pad0=pads[2], x_pad1=pads[3], pad_value=pad_value)

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
        daddr = uop_region // 4 + len(uop_words)
        for u in uops:
            uop_words.append(int(encode_uops([u], cfg)[0]))
        return Load(MemType.UOP, start, daddr, 1, len(uops), len(uops), deps=deps), start, start + len(uops)

    for b in range(blocks):
        # ---- load
        lds = []
        for _ in range(int(rng.integers(1, 4))):
            mem = "inp" if rng.random() < 0.5 else "wgt"
            if rng.random() < 0.1:
                lds.append(Load(MemType.INP, 0, 0, 0, 0, 0))  # NOP
            else:
                lds.append(Load(MemType[mem.upper()], **dma(mem, cfg.depth(mem), True)))
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
                cmp.append(Gemm(reset=reset, uop_bgn=u0, uop_end=u1, iter_out=lp["iter_out"],
                                iter_in=lp["iter_in"], dst_factor_out=lp["fac"]["dst"][0],
                                dst_factor_in=lp["fac"]["dst"][1], src_factor_out=lp["fac"]["src"][0],
                                src_factor_in=lp["fac"]["src"][1], wgt_factor_out=lp["fac"]["wgt"][0],
                                wgt_factor_in=lp["fac"]["wgt"][1], overwrite=overwrite))
            elif r < 0.95:
                ops = alu_ops(cfg)
                op = ops[int(rng.integers(0, len(ops)))]
                record = op.operand == "wgt"  # REQUANT: src indexes WGT (random bytes: random records)
                lp, uops = loops((cfg.acc_depth, min(cfg.wgt_depth, 1 << cfg.uop_src_bits) if record else cfg.acc_depth, 1))
                ld, u0, u1 = load_uops(uops, Deps())
                imm = int(rng.integers(-(1 << (IMM_BITS - 1)), 1 << (IMM_BITS - 1)))
                if rng.random() < 0.5:
                    imm = int(rng.integers(-40, 40))
                cmp.append(ld)
                cmp.append(Alu(op=op.name, reset=bool(rng.random() < 0.1), uop_bgn=u0, uop_end=u1,
                               iter_out=lp["iter_out"], iter_in=lp["iter_in"], dst_factor_out=lp["fac"]["dst"][0],
                               dst_factor_in=lp["fac"]["dst"][1], src_factor_out=lp["fac"]["src"][0],
                               src_factor_in=lp["fac"]["src"][1], use_imm=not record and bool(rng.random() < 0.5),
                               imm=imm))
            else:
                cmp.append(Gemm(reset=False, uop_bgn=0, uop_end=0, iter_out=1, iter_in=1))  # NOP
        cmp[0] = _with(cmp[0], pop_prev=True, pop_next=b > 0)
        cmp[-1] = _with(cmp[-1], push_prev=True, push_next=True)
        insns += cmp
        # ---- store
        sts = [Store(MemType.OUT, **dma("out", cfg.out_depth, False)) for _ in range(int(rng.integers(1, 3)))]
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


def _with(insn, **flags: bool):
    from dataclasses import replace

    return replace(insn, deps=replace(insn.deps, **{k: v for k, v in flags.items() if v}))


assert LOOP_BITS >= 2
