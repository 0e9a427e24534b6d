"""Pooling kernels: MaxPool (int8/uint8/float32, pads, strides, ceil_mode) and GlobalAveragePool."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.llvm.irutil import F32, Kernel, i64, llvm_type
from compiler.codegen.llvm.plan import Plan, contiguous, ptr, sig
from compiler.codegen.llvm.reduce import pairwise_sum
from compiler.cpu.kernels import pool_pads

POOL_DTYPES = ("int8", "uint8", "float32")


def pool_geometry(a: dict, h: int, w: int) -> tuple:
    """(kh, kw, sh, sw, top, left, oh, ow) exactly as the numpy kernel windows the input."""
    kh, kw, sh, sw, t, l, b, r = pool_pads(a, h, w)
    return kh, kw, sh, sw, t, l, (h + t + b - kh) // sh + 1, (w + l + r - kw) // sw + 1


def valid_range(k: int, stride: int, pad: int, size: int, out: int) -> tuple[int, int]:
    """Output indices o in [lo, hi) whose input index o*stride - pad + k lies inside [0, size)."""
    lo = max(0, -(-(pad - k) // stride))
    hi = min(out, (size - 1 + pad - k) // stride + 1)
    return lo, max(lo, hi)


def _max(k: Kernel, a, c, dt: str):
    if dt == "float32":
        return k.b.call(k.intrinsic("llvm.maximum", F32, 2), [a, c])
    cmp = k.b.icmp_unsigned if dt == "uint8" else k.b.icmp_signed
    return k.b.select(cmp(">", c, a), c, a)


def plan_maxpool(node, ins) -> Plan | None:
    x = ins[0]
    a = node.attrs
    dt = x.dtype.name
    if x.ndim != 4 or dt not in POOL_DTYPES or len(a.get("kernel_shape", ())) != 2 or len(node.outputs) > 1 and node.outputs[1]:
        return None
    if any(int(d) != 1 for d in a.get("dilations", (1, 1))) or int(a.get("storage_order", 0)):
        return None
    n, c, h, w = x.shape
    kh, kw, sh, sw, t, l, oh, ow = pool_geometry(a, h, w)
    if oh < 1 or ow < 1:
        return None
    low = -np.inf if dt == "float32" else np.iinfo(x.dtype).min

    def emit() -> Kernel:
        k = Kernel("maxpool", [dt, dt])
        src, dst = k.args
        ty = llvm_type(dt)
        init = ir.Constant(ty, float(low) if dt == "float32" else int(low))
        with k.loop(n * c) as nc:
            xb, ob = k.madd((nc, h * w)), k.madd((nc, oh * ow))
            with k.loop(oh * ow) as i:
                k.store(init, dst, k.b.add(ob, i))
            for dy in range(kh):
                lo_y, hi_y = valid_range(dy, sh, t, h, oh)
                if lo_y >= hi_y:
                    continue
                with k.loop(hi_y, start=lo_y) as y:
                    orow = k.b.add(ob, k.madd((y, ow)))
                    irow = k.b.add(xb, k.b.add(k.madd((y, sh * w)), i64((dy - t) * w)))
                    for dx in range(kw):
                        lo_x, hi_x = valid_range(dx, sw, l, w, ow)
                        if lo_x >= hi_x:
                            continue
                        with k.loop(hi_x, start=lo_x) as xo:
                            o = k.b.add(orow, xo)
                            v = k.load(src, k.b.add(irow, k.b.add(k.madd((xo, sw)), i64(dx - l))))
                            k.store(_max(k, k.load(dst, o), v, dt), dst, o)
        return k

    def run(fn, ins):
        xs = contiguous(ins[0])
        out = np.empty((n, c, oh, ow), xs.dtype)
        fn(ptr(xs), ptr(out))
        return [out]
    key = ("MaxPool", sig(x), kh, kw, sh, sw, t, l, oh, ow)
    return Plan(key, emit, run)


def plan_global_avg_pool(node, ins) -> Plan | None:
    """Mean over spatial dims in float32, summed in numpy's pairwise order (bit-exact)."""
    x = ins[0]
    dt = x.dtype.name
    if x.ndim < 3 or dt not in POOL_DTYPES:
        return None
    nc, s = int(np.prod(x.shape[:2])), int(np.prod(x.shape[2:]))
    out_shape = x.shape[:2] + (1,) * (x.ndim - 2)
    if s == 0:
        return None

    def emit() -> Kernel:
        k = Kernel("gap", [dt, "float32"])
        src, dst = k.args

        def load(i):
            v = k.load(src, i)
            if dt == "float32":
                return v
            return k.b.uitofp(v, F32) if dt == "uint8" else k.b.sitofp(v, F32)
        with k.loop(nc) as j:
            total = pairwise_sum(k, load, k.madd((j, s)), s)
            total = k.b.fadd(ir.Constant(F32, 0.0), total)
            k.store(k.b.fdiv(total, ir.Constant(F32, float(s))), dst, j)
        return k

    def run(fn, ins):
        xs = contiguous(ins[0])
        out = np.empty(out_shape, np.float32)
        fn(ptr(xs), ptr(out))
        return [out]
    return Plan(("GlobalAveragePool", sig(x)), emit, run)
