"""GlobalAveragePool in numpy's pairwise summation order (bit-exact). (MaxPool comes from the operator library.)"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.backend.llvm.irutil import F32, Kernel, llvm_type
from compiler.backend.llvm.plan import Plan, contiguous, ptr, sig
from compiler.backend.llvm.reduce import pairwise_sum

POOL_DTYPES = ("int8", "uint8", "float32")


def plan_global_avg_pool(node, ins) -> Plan | None:
    """Mean over spatial dims in float32, summed in numpy's pairwise order (bit-exact): each channel's 8 block
    accumulators one vector of contiguous loads (MobileNetV2's 1280 x 7x7: the scalar accumulators, which LLVM
    vectorized across channels with gathers, took 0.016 ms in the model)."""
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

        def as_f32(v, ty):  # an element (ty F32) or 8 of them (ty <8 x float>) of the input's dtype as float32
            if dt == "float32":
                return v
            return k.b.uitofp(v, ty) if dt == "uint8" else k.b.sitofp(v, ty)

        def load(i):
            return as_f32(k.load(src, i), F32)

        def load8(i):  # the 8 contiguous elements from i (numpy's 8 accumulators of a block, as one vector)
            vec = ir.VectorType(llvm_type(dt), 8)
            v = k.b.load(k.b.bitcast(k.b.gep(src, [i], inbounds=True), vec.as_pointer()), align=1)
            return as_f32(v, ir.VectorType(F32, 8))
        with k.loop(nc) as j:
            total = pairwise_sum(k, load, k.madd((j, s)), s, load8=load8)
            total = k.b.fadd(ir.Constant(F32, 0.0), total)
            k.store(k.b.fdiv(total, ir.Constant(F32, float(s))), dst, j)
        return k

    def run(fn, ins):
        xs = contiguous(ins[0])
        out = np.empty(out_shape, np.float32)
        fn(ptr(xs), ptr(out))
        return [out]
    return Plan(("GlobalAveragePool", sig(x)), emit, run)
