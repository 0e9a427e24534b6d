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


def uniform_scale(rq: Requant) -> tuple[int, int] | None:
    """``(multiplier, shift)`` when every channel has the same ones, no pre-shift and ``shift >= 33`` (per-tensor
    scales: the 32-bit form of :func:`requant_stage` applies), else None."""
    m, s = np.unique(np.asarray(rq.multiplier)), np.unique(np.asarray(rq.shift))
    if m.size != 1 or s.size != 1 or int(rq.pre_shift) or not 33 <= int(s[0]) <= 63:
        return None
    return int(m[0]), int(s[0])


def requant_stage(rq: Requant, channels: int, specialize: bool = False) -> tuple[list[Tensor], "callable", str]:
    """``(placeholders [bias, mult, shift], fn(acc_int32, channel) -> value, out dtype)`` for conv2d/dense.

    ``specialize`` with :func:`uniform_scale` (one multiplier ``m``, shift ``s >= 33``): ``m`` and ``s`` are compiled
    in and the rounding shift runs in int32 on the product's high word (``floor(p / 2^(s-1)) =
    floor(floor(p / 2^32) / 2^(s-33))``; ``|p| < 2^62`` so ``+1`` cannot overflow): the same values, without 64-bit
    vector shifts (the kernel then reads ``mult``/``shift`` nowhere)."""
    bias = te.placeholder((channels,), "int32", "rq_bias")
    mult = te.placeholder((channels,), "int32", "rq_mult")
    shift = te.placeholder((channels,), "int32", "rq_shift")
    pre = int(rq.pre_shift)
    zp, lo, hi = int(rq.zero_point), int(rq.clip_low), int(rq.out_max)
    dt = out_dtype(rq)
    uni = uniform_scale(rq) if specialize else None
    if uni is not None:
        m, sh = uni

        def fn_uniform(acc: te.Expr, c: te.Expr) -> te.Expr:
            v = acc + bias[c]  # int32: wraps
            high = ((v.astype("int64") * te.const(m, "int64")) >> te.const(32, "int64")).astype("int32")
            a = sh - 33
            if (abs(zp) + 1) << (a + 1) < 1 << 30:  # ((h >> a) + 1) >> 1 + zp = (h + 2^a + zp 2^(a+1)) >> (a + 1)
                # (floor(floor(h / 2^a) / 2) = floor(h / 2^(a+1)); a multiple of 2^(a+1) passes the shift); |h| <= 2^30
                y = (high + te.const((1 << a) + zp * (1 << (a + 1)), "int32")) >> te.const(a + 1, "int32")
            else:
                y = ((high >> te.const(a, "int32")) + te.const(1, "int32")) >> te.const(1, "int32")
                y = y + te.const(zp, "int32")
            y = te.min_(te.max_(y, te.const(lo, "int32")), te.const(hi, "int32"))
            return y.astype(dt)

        return [bias, mult, shift], fn_uniform, dt

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
