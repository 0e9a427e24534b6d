"""A straightforward per-micro-op Python reference model of GEMM and ALU (the loop nest, one step at a time)."""
from __future__ import annotations

import numpy as np

from isa.alu import evaluate, wrap
from isa.instructions import Alu, Gemm


def ref_execute(cfg, insn, uops, inp, wgt, acc) -> None:
    """Apply ``insn`` to ``acc`` (int64, modified in place), one micro-op iteration at a time."""
    for i0 in range(insn.iter_out):
        for i1 in range(insn.iter_in):
            for u in uops[insn.uop_bgn:insn.uop_end]:
                d = u.dst + i0 * insn.dst_factor_out + i1 * insn.dst_factor_in
                s = u.src + i0 * insn.src_factor_out + i1 * insn.src_factor_in
                if insn.reset:
                    acc[d] = 0
                elif isinstance(insn, Gemm):
                    w = u.wgt + i0 * insn.wgt_factor_out + i1 * insn.wgt_factor_in
                    prod = inp[s].astype(np.int64) @ wgt[w].astype(np.int64).T
                    acc[d] = wrap((0 if insn.overwrite else acc[d]) + prod, cfg.acc_width)
                else:
                    assert isinstance(insn, Alu)
                    b = np.full_like(acc[d], insn.imm) if insn.use_imm else acc[s].copy()
                    acc[d] = evaluate(insn.op, acc[d].copy(), b, cfg.acc_width)
