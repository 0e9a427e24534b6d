"""The requant epilogue (:func:`jit_runtime.host_ops.requant.apply_requant`) as one TE expression in plain integer math.

For the CPU/GPU targets: ``v = wrap32(acc + bias[c])``, the legacy rounding pre-shift, the exact 64-bit
product with ``multiplier[c]``, ``((p >> (s-1)) + 1) >> 1`` for ``s = shift[c] > 0``, + zero point, clip to
``[clip_low, out_max]``; bit-exact with the numpy reference and the accelerator's REQUANT op. (The
accelerator builds the same epilogue from its ALU ops: :mod:`compiler.topi.requant`.)
"""
from __future__ import annotations

import numpy as np

from compiler import te
from jit_runtime.host_ops.requant import Requant
from compiler.te import Tensor


def requant_params(rq: Requant, bias: np.ndarray | None, channels: int) -> list[np.ndarray]:
    """The per-channel int32 arrays ``[bias, multiplier, shift]`` the stage reads (in that order)."""
    def per(v):
        return np.ascontiguousarray(np.broadcast_to(np.asarray(0 if v is None else v, np.int64), (channels,)), np.int32)
    return [per(bias), per(rq.multiplier), per(rq.shift)]


def out_dtype(rq: Requant) -> str:
    return "int8" if rq.out_min >= -128 and rq.out_max <= 127 else "int32"


def requant_stage(rq: Requant, channels: int) -> tuple[list[Tensor], "callable", str]:
    """``(placeholders [bias, mult, shift], fn(acc_int32, channel) -> value, out dtype)`` for conv2d/dense."""
    bias = te.placeholder((channels,), "int32", "rq_bias")
    mult = te.placeholder((channels,), "int32", "rq_mult")
    shift = te.placeholder((channels,), "int32", "rq_shift")
    pre = int(rq.pre_shift)
    zp, lo, hi = int(rq.zero_point), int(rq.clip_low), int(rq.out_max)
    dt = out_dtype(rq)

    def fn(acc: te.Expr, c: te.Expr) -> te.Expr:
        v = acc + bias[c]  # int32: wraps
        if pre:
            v = (v + te.const(1 << (pre - 1), "int32")) >> te.const(pre, "int32")
        p = v.astype("int64") * mult[c].astype("int64")
        s = shift[c].astype("int64")
        t = p >> te.max_(s - te.const(1, "int64"), te.const(0, "int64"))
        y = te.select(s > te.const(0, "int64"), (t + te.const(1, "int64")) >> te.const(1, "int64"), p)
        y = te.min_(te.max_(y + te.const(zp, "int64"), te.const(lo, "int64")), te.const(hi, "int64"))
        return y.astype(dt)

    return [bias, mult, shift], fn, dt
