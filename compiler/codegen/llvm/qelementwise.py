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


def plan_qadd(node, ins) -> Plan | None:
    """int8 ``QAdd`` with numpy broadcasting."""
    if len(ins) != 2 or any(v is None or v.dtype != np.int8 for v in ins):
        return None
    p = node.attrs["qadd"]
    x, y = ins
    try:
        out_shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return None
    shape, strides = collapse(out_shape, [broadcast_strides(x.shape, out_shape), broadcast_strides(y.shape, out_shape),
                                          c_strides(out_shape)])
    params = (p.a_mult, p.b_mult, p.shift, p.a_zp, p.b_zp, p.out_zp, p.out_min, p.out_max)

    def emit() -> Kernel:
        k = Kernel("qadd", ["int8", "int8", "int8"])
        a, c, o = k.args
        b = k.b

        def const(v: int):
            return ir.Constant(I32, int(v))

        def term(v, zp: int, mult: int):
            return b.mul(b.sub(b.sext(v, I32), const(zp)), const(mult))

        def body(offs):
            acc = b.add(term(k.load(a, offs[0]), p.a_zp, p.a_mult), term(k.load(c, offs[1]), p.b_zp, p.b_mult))
            if p.shift:
                acc = b.ashr(b.add(acc, const(1 << (p.shift - 1))), const(p.shift))
            acc = b.add(acc, const(p.out_zp))
            lo, hi = const(max(p.out_min, -128)), const(min(p.out_max, 127))
            acc = b.select(b.icmp_signed("<", acc, lo), lo, acc)
            acc = b.select(b.icmp_signed(">", acc, hi), hi, acc)
            k.store(b.trunc(acc, ir.IntType(8)), o, offs[2])
        _emit_nest(k, shape, strides, body)
        return k

    def run(fn, ins):
        a, c = contiguous(ins[0]), contiguous(ins[1])
        out = np.empty(out_shape, np.int8)
        fn(ptr(a), ptr(c), ptr(out))
        return [out]
    return Plan(("QAdd", sig(x), sig(y), params), emit, run)


def plan_qmul(node, ins) -> Plan | None:
    """int8 ``QMul`` with numpy broadcasting (int32 math; int64 when the shift could overflow it, as in numpy)."""
    if len(ins) != 2 or any(v is None or v.dtype != np.int8 for v in ins):
        return None
    p = node.attrs["qmul"]
    x, y = ins
    try:
        out_shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return None
    shape, strides = collapse(out_shape, [broadcast_strides(x.shape, out_shape), broadcast_strides(y.shape, out_shape),
                                          c_strides(out_shape)])
    wide = ir.IntType(32 if p.shift <= 24 else 64)

    def emit() -> Kernel:
        k = Kernel("qmul", ["int8", "int8", "int8"])
        a, c, o = k.args
        b = k.b

        def const(v: int):
            return ir.Constant(wide, int(v))

        def body(offs):
            va = b.sub(b.sext(k.load(a, offs[0]), wide), const(p.a_zp))
            vc = b.sub(b.sext(k.load(c, offs[1]), wide), const(p.b_zp))
            acc = b.mul(b.mul(va, vc), const(p.mult))
            if p.shift:
                acc = b.ashr(b.add(acc, const(1 << (p.shift - 1))), const(p.shift))
            acc = b.add(acc, const(p.out_zp))
            lo, hi = const(-128), const(127)
            acc = b.select(b.icmp_signed("<", acc, lo), lo, acc)
            acc = b.select(b.icmp_signed(">", acc, hi), hi, acc)
            k.store(b.trunc(acc, ir.IntType(8)), o, offs[2])
        _emit_nest(k, shape, strides, body)
        return k

    def run(fn, ins):
        a, c = contiguous(ins[0]), contiguous(ins[1])
        out = np.empty(out_shape, np.int8)
        fn(ptr(a), ptr(c), ptr(out))
        return [out]
    return Plan(("QMul", sig(x), sig(y), (p.mult, p.shift, p.a_zp, p.b_zp, p.out_zp)), emit, run)


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
