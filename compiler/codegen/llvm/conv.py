"""QConv2D: int8 NCHW x int8 OIHW direct convolution (any groups/stride/pad/dilation) + requant epilogue.

Accumulation, the bias add and the legacy pre-shift are int32 with wrap-around; the multiply is
the exact 64-bit product and the shift, zero point and clip work on it, which is exactly
``compiler.requant.apply_requant`` (and the accelerator's fused REQUANT op).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.llvm.irutil import I32, I64, Kernel, i64
from compiler.codegen.llvm.plan import Plan, contiguous, ptr, sig
from compiler.codegen.llvm.pool import valid_range


def _round_shift(k: Kernel, v, s):
    """(v + (1 << (s-1))) >> s for s > 0, v for s == 0 (s an i32 value), wrapping in int32."""
    b = k.b
    pos = b.icmp_signed(">", s, ir.Constant(I32, 0))
    rnd = b.select(pos, b.shl(ir.Constant(I32, 1), b.select(pos, b.sub(s, ir.Constant(I32, 1)), ir.Constant(I32, 0))),
                   ir.Constant(I32, 0))
    return b.ashr(b.add(v, rnd), s)


def _round_shift_wide(k: Kernel, p, s):
    """((p >> (s-1)) + 1) >> 1 for s > 0, p for s == 0 (p, s i64): round half up without overflow."""
    b = k.b
    pos = b.icmp_signed(">", s, i64(0))
    t = b.ashr(p, b.select(pos, b.sub(s, i64(1)), i64(0)))
    return b.select(pos, b.ashr(b.add(t, i64(1)), i64(1)), p)


def _epilogue(k: Kernel, acc, bias, mult, shift, pre_shift: int, zp: int, bounds: tuple[int, int], out_t):
    """bias add and pre-shift (int32), 64-bit multiply and rounding shift, + zero point, clamp to ``bounds``
    (relu already folded into the low bound)."""
    b = k.b
    v = acc if bias is None else b.add(acc, bias)
    v = _round_shift(k, v, ir.Constant(I32, int(pre_shift)))
    y = _round_shift_wide(k, b.mul(b.sext(v, I64), b.sext(mult, I64)), b.sext(shift, I64))
    y = b.add(y, i64(zp))
    lo_c, hi_c = i64(bounds[0]), i64(bounds[1])
    y = b.select(b.icmp_signed("<", y, lo_c), lo_c, y)  # numpy: clip(y, lo, hi)
    y = b.select(b.icmp_signed(">", y, hi_c), hi_c, y)
    return b.trunc(y, out_t)


def plan_qconv(node, ins) -> Plan | None:
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    a = node.attrs
    rq = a.get("requant")
    if rq is None or x.dtype != np.int8 or w.dtype != np.int8 or x.ndim != 4 or w.ndim != 4:
        return None
    if int(a.get("pad_value", 0)):  # the kernel pads with zero: zero-point borders run in numpy
        return None
    if bias is not None and (bias.dtype.kind not in "iu" or bias.size != w.shape[0]):
        return None
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    g = int(a.get("group", 1))
    sh, sw = (int(v) for v in a["strides"])
    t, l, bt, r = (int(v) for v in a["pads"])
    dh, dw = (int(v) for v in a.get("dilations", (1, 1)))
    if c != cg * g or o % g:
        return None
    oh, ow = (h + t + bt - ((kh - 1) * dh + 1)) // sh + 1, (wd + l + r - ((kw - 1) * dw + 1)) // sw + 1
    if oh < 1 or ow < 1:
        return None
    og = o // g
    out_dt = np.dtype(np.int8) if rq.out_min >= -128 and rq.out_max <= 127 else np.dtype(np.int32)
    bounds = (rq.clip_low, int(rq.out_max))

    def emit() -> Kernel:
        k = Kernel("qconv2d", ["int8", "int8", "int32", "int32", "int32", out_dt])
        px, pw, pb, pm, ps, dst = k.args
        b = k.b
        out_t = dst.type.pointee
        acc = b.alloca(ir.ArrayType(I32, oh * ow))
        accp = b.bitcast(acc, I32.as_pointer())
        with k.loop(n) as ni, k.loop(g) as gi, k.loop(og) as oi:
            oc = k.madd((gi, og), (oi, 1))
            with k.loop(oh * ow) as i:
                k.store(ir.Constant(I32, 0), accp, i)
            with k.loop(cg) as ci:
                xb = k.madd((ni, c * h * wd), (gi, cg * h * wd), (ci, h * wd))
                wb = k.madd((oc, cg * kh * kw), (ci, kh * kw))
                for y in range(kh):
                    ylo, yhi = valid_range(y * dh, sh, t, h, oh)
                    for xk in range(kw):
                        xlo, xhi = valid_range(xk * dw, sw, l, wd, ow)
                        if ylo >= yhi or xlo >= xhi:
                            continue
                        wv = b.sext(k.load(pw, b.add(wb, i64(y * kw + xk))), I32)
                        with k.loop(yhi, start=ylo) as yo:
                            irow = b.add(xb, b.add(k.madd((yo, sh * wd)), i64((y * dh - t) * wd + xk * dw - l)))
                            arow = k.madd((yo, ow))
                            with k.loop(xhi, start=xlo) as xo:
                                ai = b.add(arow, xo)
                                xv = b.sext(k.load(px, b.add(irow, k.madd((xo, sw)))), I32)
                                k.store(b.add(k.load(accp, ai), b.mul(xv, wv)), accp, ai)
            bias_v = k.load(pb, oc) if bias is not None else None
            mult, shift = k.load(pm, oc), k.load(ps, oc)
            ob = k.madd((ni, o * oh * ow), (oc, oh * ow))
            with k.loop(oh * ow) as i:
                v = _epilogue(k, k.load(accp, i), bias_v, mult, shift, int(rq.pre_shift), int(rq.zero_point), bounds,
                              out_t)
                k.store(v, dst, b.add(ob, i))
        return k

    def run(fn, ins):
        xs, ws = contiguous(ins[0]), contiguous(ins[1])
        bs = zero_bias if bias is None else np.ascontiguousarray(ins[2], dtype=np.int32)
        out = np.empty((n, o, oh, ow), out_dt)
        fn(ptr(xs), ptr(ws), ptr(bs), ptr(mult_arr), ptr(shift_arr), ptr(out))
        return [out]
    zero_bias = np.zeros(1, np.int32)
    mult_arr = np.ascontiguousarray(np.broadcast_to(np.asarray(rq.multiplier, np.int64), (o,)), dtype=np.int32)
    shift_arr = np.ascontiguousarray(np.broadcast_to(np.asarray(rq.shift, np.int64), (o,)), dtype=np.int32)
    key = ("QConv2D", sig(x), sig(w), bias is not None, g, sh, sw, t, l, bt, r, dh, dw, int(rq.pre_shift),
           int(rq.zero_point), bounds)
    return Plan(key, emit, run)
