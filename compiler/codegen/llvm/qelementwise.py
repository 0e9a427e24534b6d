"""``QAdd``, ``QMul`` and ``QLookup`` (compiler.quant.int_elementwise) as LLVM kernels, bit-exact with numpy.

Fixed-point parameters are compile-time constants of the node, baked into the IR (and into the
plan's cache key); the arithmetic widths follow the numpy kernels (int32; QMul int64 for large
shifts). QLookup takes its 256-entry table as a buffer, so one kernel serves every table.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.llvm.elementwise import _emit_nest, broadcast_strides, collapse
from compiler.codegen.llvm.irutil import Kernel
from compiler.codegen.llvm.plan import Plan, c_strides, contiguous, ptr, sig

I32 = ir.IntType(32)


def _broadcast_int8(ins) -> tuple | None:
    """``(out_shape, collapsed shape, strides)`` of two int8 operands with numpy broadcasting; else None."""
    if len(ins) != 2 or any(v is None or v.dtype != np.int8 for v in ins):
        return None
    x, y = ins
    try:
        out_shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return None
    shape, strides = collapse(out_shape, [broadcast_strides(x.shape, out_shape), broadcast_strides(y.shape, out_shape),
                                          c_strides(out_shape)])
    return out_shape, shape, strides


def _shift_zp_clip(b, acc, const, shift: int, zp: int, lo: int, hi: int):
    """numpy's ``clip(round_shift(acc, shift) + zp, lo, hi)`` (round half up) on an integer IR value."""
    if shift:
        acc = b.ashr(b.add(acc, const(1 << (shift - 1))), const(shift))
    acc = b.add(acc, const(zp))
    lo_c, hi_c = const(lo), const(hi)
    acc = b.select(b.icmp_signed("<", acc, lo_c), lo_c, acc)
    return b.select(b.icmp_signed(">", acc, hi_c), hi_c, acc)


def _binary_plan(name: str, ins, key: tuple, width: int, combine) -> Plan | None:
    """A broadcasting int8 x int8 -> int8 kernel: ``combine(b, va, vc, const)`` on ``width``-bit values, then
    shift, zero point and clip by ``key``'s ``(shift, out_zp, lo, hi)`` (its last four entries)."""
    shapes = _broadcast_int8(ins)
    if shapes is None:
        return None
    out_shape, shape, strides = shapes
    shift, zp, lo, hi = key[-4:]
    wide = ir.IntType(width)

    def emit() -> Kernel:
        k = Kernel(name.lower(), ["int8", "int8", "int8"])
        a, c, o = k.args
        b = k.b

        def const(v: int):
            return ir.Constant(wide, int(v))

        def body(offs):
            va, vc = b.sext(k.load(a, offs[0]), wide), b.sext(k.load(c, offs[1]), wide)
            acc = _shift_zp_clip(b, combine(b, va, vc, const), const, shift, zp, lo, hi)
            k.store(b.trunc(acc, ir.IntType(8)), o, offs[2])
        _emit_nest(k, shape, strides, body)
        return k

    def run(fn, ins):
        a, c = contiguous(ins[0]), contiguous(ins[1])
        out = np.empty(out_shape, np.int8)
        fn(ptr(a), ptr(c), ptr(out))
        return [out]
    return Plan((name, sig(ins[0]), sig(ins[1]), key), emit, run)


def plan_qadd(node, ins) -> Plan | None:
    """int8 ``QAdd`` with numpy broadcasting (int32 math, as in numpy)."""
    p = node.attrs["qadd"]

    def combine(b, va, vc, const):
        return b.add(b.mul(b.sub(va, const(p.a_zp)), const(p.a_mult)), b.mul(b.sub(vc, const(p.b_zp)), const(p.b_mult)))
    key = (p.a_mult, p.b_mult, p.a_zp, p.b_zp, p.shift, p.out_zp, max(p.out_min, -128), min(p.out_max, 127))
    return _binary_plan("QAdd", ins, key, 32, combine)


def plan_qmul(node, ins) -> Plan | None:
    """int8 ``QMul`` with numpy broadcasting (int32 math; int64 when the shift could overflow it, as in numpy)."""
    p = node.attrs["qmul"]

    def combine(b, va, vc, const):
        return b.mul(b.mul(b.sub(va, const(p.a_zp)), b.sub(vc, const(p.b_zp))), const(p.mult))
    key = (p.mult, p.a_zp, p.b_zp, p.shift, p.out_zp, -128, 127)
    return _binary_plan("QMul", ins, key, 32 if p.shift <= 24 else 64, combine)


def plan_qlookup(node, ins) -> Plan | None:
    """int8 ``QLookup``: ``out[i] = table[x[i] + 128]`` (the table is passed as a buffer)."""
    x = ins[0]
    if x is None or x.dtype != np.int8:
        return None
    table = np.ascontiguousarray(node.attrs["table"], np.int8)
    if table.shape != (256,):
        return None
    n = int(x.size)

    def emit() -> Kernel:
        k = Kernel("qlookup", ["int8", "int8", "int8"])
        src, dst, tab = k.args
        b = k.b
        with k.loop(n) as i:
            idx = b.add(b.sext(k.load(src, i), ir.IntType(64)), ir.Constant(ir.IntType(64), 128))
            k.store(k.load(tab, idx), dst, i)
        return k

    def run(fn, ins):
        a = contiguous(ins[0])
        out = np.empty(a.shape, np.int8)
        fn(ptr(a), ptr(out), ptr(table))
        return [out]
    return Plan(("QLookup", sig(x)), emit, run)
