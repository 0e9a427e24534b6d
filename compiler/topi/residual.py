"""The quantized residual Add (+ Relu) fused into a conv's epilogue, on the existing ISA.

``QAdd`` (:mod:`jit_runtime.host_ops.int_elementwise`) computes
``clip(zy + round_shift(ma*(a - za) + mb*(b - zb), shift), lo, hi)``. Here ``a`` is the conv's
requantized int8 result, already in an acc tile, and ``b`` (the other operand, int8, packed like the
output) is brought into a second acc tile by a GEMM with an identity weight block (exact: ``acc = b``).
Then four ALU passes reproduce QAdd bit for bit:

1. ``MUL`` the conv tile by the immediate ``ma`` (skipped when ``ma == 1``);
2. ``MUL`` the residual tile by the immediate ``mb`` (skipped when ``mb == 1``);
3. ``ADD`` the residual tile into the conv tile (tensor-tensor);
4. the fused ``REQUANT`` with bias ``-(ma*za + mb*zb)``, multiplier 1, shift ``shift``, zero point ``zy``
   and bounds ``lo``/``hi`` (relu is ``lo = zy``): ``round_shift`` is the same round-half-up shift.

Every intermediate stays below 2**24 (|a - za|, |b - zb| <= 255, multipliers < 2**15), so no step wraps.
Needs the REQUANT op (:func:`compiler.topi.requant.fused_ok`) and ``block_in == block_out``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from compiler import te
from compiler.topi.requant import IMM_MAX, IMM_MIN, I16_MAX, I16_MIN
from isa.alu import alu_op, op_supported
from isa.requant import pack_records

if TYPE_CHECKING:
    from jit_runtime.host_ops.int_elementwise import QAddParams
    from isa.config import HwConfig


@dataclass(frozen=True)
class Residual:
    """A residual Add fused after a conv: ``QAdd(conv, other)`` (``conv_is_a``) or ``QAdd(other, conv)``."""

    params: "QAddParams"
    conv_is_a: bool = True

    @property
    def conv_mult(self) -> int:
        return self.params.a_mult if self.conv_is_a else self.params.b_mult

    @property
    def other_mult(self) -> int:
        return self.params.b_mult if self.conv_is_a else self.params.a_mult

    @property
    def bias(self) -> int:
        p = self.params
        return -(p.a_mult * p.a_zp + p.b_mult * p.b_zp)

    def key(self) -> tuple:
        """What changes the compiled kernel's structure (multipliers are immediates)."""
        return (self.conv_mult, self.other_mult)


def residual_supported(cfg: "HwConfig", res: Residual) -> str | None:
    """None when ``res`` can run fused on ``cfg``; else the reason it cannot."""
    p = res.params
    if not op_supported(alu_op("REQUANT"), cfg):
        return f"config {cfg.name} has no REQUANT ALU op"
    if cfg.block_in != cfg.block_out:
        return f"the identity GEMM needs block_in == block_out (got {cfg.block_in}, {cfg.block_out})"
    if not all(IMM_MIN <= m <= IMM_MAX for m in (p.a_mult, p.b_mult)):
        return f"QAdd multipliers {p.a_mult}, {p.b_mult} do not fit the 16-bit ALU immediate"
    if not all(I16_MIN <= v <= I16_MAX for v in (p.out_zp, p.out_min, p.out_max)) or not 0 <= p.shift <= 63:
        return "QAdd zero point/bounds must be int16 and its shift 0..63"
    if not all(-128 <= v <= 127 for v in (p.a_zp, p.b_zp)):
        return "QAdd input zero points must be int8"
    return None


def identity_block(cfg: "HwConfig") -> np.ndarray:
    """The WGT block ``eye(BO, BI)`` as a (1, 1, BO, BI) int8 tensor value."""
    return np.eye(cfg.block_out, cfg.block_in, dtype=np.int8).reshape(1, 1, cfg.block_out, cfg.block_in)


def residual_stages(cfg: "HwConfig", a: te.Tensor, res: Residual, n_channels: int, chan_index, chan_shape):
    """``(other, eye, other_acc, stages, consts, out)``: the residual operand placeholder (packed like ``a``),
    the identity weight placeholder, the GEMM stage loading it into acc, the ALU stages in order, the
    constant tensors (identity block, REQUANT records) and the final int32 stage."""
    BI, BO = cfg.block_in, cfg.block_out
    other = te.placeholder(a.shape, "int8", "residual")
    eye = te.placeholder((1, 1, BO, BI), "int8", "res_eye")
    ii = te.reduce_axis(BI, "rii")
    nd = a.ndim
    other_acc = te.compute(
        a.shape,
        lambda *i: te.sum(other[tuple(i[:nd - 1]) + (ii,)].astype("int32")
                          * eye[0, 0, i[nd - 1], ii].astype("int32"), [ii]),
        name="res_load", dtype="int32")
    stages: list[te.Tensor] = []
    cur_a, cur_b = a, other_acc
    if res.conv_mult != 1:
        src = cur_a
        cur_a = te.compute(a.shape, lambda *i: src[i] * te.const(int(res.conv_mult)), name="res_mul_a",
                           dtype="int32", axis_names=tuple(f"rma{k}" for k in range(nd)))
        stages.append(cur_a)
    if res.other_mult != 1:
        src_b = cur_b
        cur_b = te.compute(a.shape, lambda *i: src_b[i] * te.const(int(res.other_mult)), name="res_mul_b",
                           dtype="int32", axis_names=tuple(f"rmb{k}" for k in range(nd)))
        stages.append(cur_b)
    xa, xb = cur_a, cur_b
    summed = te.compute(a.shape, lambda *i: xa[i] + xb[i], name="res_add", dtype="int32",
                        axis_names=tuple(f"rad{k}" for k in range(nd)))
    stages.append(summed)
    p = res.params
    recs = pack_records(cfg, bias=res.bias, mult=1, shift=p.shift, zp=p.out_zp, lo=p.out_min, hi=p.out_max,
                        n_channels=n_channels).reshape(chan_shape + (BO, BI))
    rec = te.placeholder(recs.shape, f"int{cfg.wgt_width}", "res_rec")
    nc = len(chan_shape)

    def body(*i):
        ci = chan_index(*i)
        return te.alu("REQUANT", summed[i], rec[tuple(ci[:nc]) + (ci[-1], 0)])

    out = te.compute(a.shape, body, name="res_requant", dtype="int32",
                     axis_names=tuple(f"rrq{k}" for k in range(nd)))
    stages.append(out)
    consts = [(eye, identity_block(cfg)), (rec, recs)]
    return other, eye, other_acc, stages, consts, out
