"""QuantizeLinear / DequantizeLinear with per-tensor or per-axis scale and zero point."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.llvm.irutil import F32, I32, I64, Kernel
from compiler.codegen.llvm.plan import Plan, contiguous, ptr, sig

QDTYPES = ("int8", "uint8")


def _split(x: np.ndarray, axis: int) -> tuple[int, int, int]:
    """(outer, channels, inner) of ``x`` around ``axis``."""
    if x.ndim == 0:
        return 1, 1, 1
    ax = axis % x.ndim
    return int(np.prod(x.shape[:ax])), int(x.shape[ax]), int(np.prod(x.shape[ax + 1:]))


def _per_channel(p: np.ndarray | None, x: np.ndarray, axis: int) -> bool | None:
    """False: one value; True: one per channel of ``axis``; None: a shape numpy would reject."""
    if p is None or np.size(p) == 1:
        return False
    if x.ndim == 0 or np.ndim(p) != 1 or p.size != x.shape[axis % x.ndim]:
        return None
    return True


def _params(node, ins, x):
    axis = int(node.attrs.get("axis", 1))
    scale = ins[1]
    zp = ins[2] if len(ins) > 2 else None
    flags = (_per_channel(scale, x, axis), _per_channel(zp, x, axis))
    return axis, scale, zp, flags


def _loop_channels(k: Kernel, dims, body) -> None:
    outer, ch, inner = dims
    with k.loop(outer) as o:
        with k.loop(ch) as c:
            base = k.madd((o, ch * inner), (c, inner))
            with k.loop(inner) as i:
                body(c, k.b.add(base, i))


def plan_quantize(node, ins) -> Plan | None:
    x = ins[0]
    axis, scale, zp, flags = _params(node, ins, x)
    if x.dtype != np.float32 or scale is None or scale.dtype != np.float32 or None in flags:
        return None
    out_dt = np.dtype(np.uint8) if zp is None else zp.dtype
    if out_dt.name not in QDTYPES:
        return None
    info = np.iinfo(out_dt)
    dims = _split(x, axis)

    def emit() -> Kernel:
        k = Kernel("quantize", ["float32", "float32", out_dt, out_dt])
        src, psc, pzp, dst = k.args
        rnd = k.intrinsic("llvm.roundeven", F32)
        lo, hi = ir.Constant(F32, float(info.min)), ir.Constant(F32, float(info.max))
        zero = ir.Constant(I64, 0)

        def body(c, idx):
            s = k.load(psc, c if flags[0] else zero)
            q = k.b.call(rnd, [k.b.fdiv(k.load(src, idx), s)])
            if zp is not None:
                z = k.load(pzp, c if flags[1] else zero)
                q = k.b.fadd(q, k.b.uitofp(z, F32) if out_dt == np.uint8 else k.b.sitofp(z, F32))
            q = k.b.select(k.b.fcmp_ordered("<", q, lo), lo, q)
            q = k.b.select(k.b.fcmp_ordered(">", q, hi), hi, q)
            k.store(k.b.trunc(k.b.fptosi(q, I32), dst.type.pointee), dst, idx)
        _loop_channels(k, dims, body)
        return k

    def run(fn, ins):
        xs, s = contiguous(ins[0]), contiguous(ins[1])
        z = np.zeros(1, out_dt) if zp is None else contiguous(ins[2])
        out = np.empty(xs.shape, out_dt)
        fn(ptr(xs), ptr(s), ptr(z), ptr(out))
        return [out]
    return Plan(("QuantizeLinear", sig(x), out_dt.str, zp is not None, flags, dims), emit, run)


def plan_dequantize(node, ins) -> Plan | None:
    x = ins[0]
    axis, scale, zp, flags = _params(node, ins, x)
    dt = x.dtype.name
    if dt not in QDTYPES + ("int32",) or scale is None or scale.dtype != np.float32 or None in flags:
        return None
    if zp is not None and zp.dtype != x.dtype:
        return None
    dims = _split(x, axis)
    wide = I64 if dt == "int32" else I32

    def emit() -> Kernel:
        k = Kernel("dequantize", [dt, "float32", dt, "float32"])
        src, psc, pzp, dst = k.args
        zero = ir.Constant(I64, 0)
        ext = k.b.zext if dt == "uint8" else k.b.sext

        def body(c, idx):
            v = ext(k.load(src, idx), wide)
            if zp is not None:
                v = k.b.sub(v, ext(k.load(pzp, c if flags[1] else zero), wide))
            k.store(k.b.fmul(k.b.sitofp(v, F32), k.load(psc, c if flags[0] else zero)), dst, idx)
        _loop_channels(k, dims, body)
        return k

    def run(fn, ins):
        xs, s = contiguous(ins[0]), contiguous(ins[1])
        z = np.zeros(1, xs.dtype) if zp is None else contiguous(ins[2])
        out = np.empty(xs.shape, np.float32)
        fn(ptr(xs), ptr(s), ptr(z), ptr(out))
        return [out]
    return Plan(("DequantizeLinear", sig(x), zp is not None, flags, dims), emit, run)
