"""Float32 Softmax over any axis (max-subtracted exp, sum in numpy's order, divide)."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.llvm.irutil import F32, Kernel
from compiler.codegen.llvm.plan import Plan, contiguous, ptr, sig
from compiler.codegen.llvm.reduce import pairwise_sum


def plan_softmax(node, ins) -> Plan | None:
    x = ins[0]
    if x.dtype != np.float32 or x.ndim == 0 or x.size == 0:
        return None
    ax = int(node.attrs.get("axis", -1)) % x.ndim
    outer, m, inner = int(np.prod(x.shape[:ax])), int(x.shape[ax]), int(np.prod(x.shape[ax + 1:]))

    def emit() -> Kernel:
        k = Kernel("softmax", ["float32", "float32"])
        src, dst = k.args
        b = k.b
        fmax = k.intrinsic("llvm.maximum", F32, 2)
        exp = k.intrinsic("llvm.exp", F32)
        mx, acc = k.alloca(F32), k.alloca(F32)
        with k.loop(outer) as o, k.loop(inner) as i:
            base = k.madd((o, m * inner), (i, 1))
            b.store(ir.Constant(F32, float("-inf")), mx)
            with k.loop(m) as j:
                b.store(b.call(fmax, [b.load(mx), k.load(src, b.add(base, k.madd((j, inner))))]), mx)
            top = b.load(mx)
            with k.loop(m) as j:
                idx = b.add(base, k.madd((j, inner)))
                k.store(b.call(exp, [b.fsub(k.load(src, idx), top)]), dst, idx)
            if inner == 1:  # numpy reduces a contiguous axis pairwise
                total = b.fadd(ir.Constant(F32, 0.0), pairwise_sum(k, lambda q: k.load(dst, q), base, m))
            else:  # a strided axis is accumulated in order
                b.store(ir.Constant(F32, 0.0), acc)
                with k.loop(m) as j:
                    b.store(b.fadd(b.load(acc), k.load(dst, b.add(base, k.madd((j, inner))))), acc)
                total = b.load(acc)
            with k.loop(m) as j:
                idx = b.add(base, k.madd((j, inner)))
                k.store(b.fdiv(k.load(dst, idx), total), dst, idx)
        return k

    def run(fn, ins):
        xs = contiguous(ins[0])
        out = np.empty(xs.shape, np.float32)
        fn(ptr(xs), ptr(out))
        return [out]
    return Plan(("Softmax", sig(x), ax), emit, run)
