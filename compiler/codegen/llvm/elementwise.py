"""Static numpy broadcasting for the generated int8 elementwise kernels (QAdd/QMul): strides, dim merging,
the loop nest. (Relu/Clip/Add/Sub/Mul/Div come from the operator library.)"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from compiler.codegen.llvm.irutil import Kernel
from compiler.codegen.llvm.plan import c_strides

def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides of a contiguous ``shape`` read at each index of ``out_shape`` (0 = broadcast)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(shape, out_shape, c_strides(shape))]


def collapse(out_shape: Sequence[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Merge adjacent dims that every operand walks linearly; returns (shape, per-operand strides)."""
    dims = [(int(d), [s[i] for s in strides]) for i, d in enumerate(out_shape) if d != 1] or [(1, [0] * len(strides))]
    merged = [dims[0]]
    for d, st in dims[1:]:
        pd, pst = merged[-1]
        if all(p == s * d for p, s in zip(pst, st)):
            merged[-1] = (pd * d, st)
        else:
            merged.append((d, st))
    return [d for d, _ in merged], [[st[k] for _, st in merged] for k in range(len(strides))]


def _emit_nest(k: Kernel, shape, strides, body) -> None:
    """Loop over ``shape``; call ``body(offsets)`` with one i64 offset per operand (output last)."""
    def rec(level, offs):
        if level == len(shape):
            body(offs)
            return
        with k.loop(shape[level]) as i:
            rec(level + 1, [k.b.add(o, k.madd((i, st[level])), flags=["nsw"]) for o, st in zip(offs, strides)])
    rec(0, [ir.Constant(ir.IntType(64), 0)] * len(strides))
