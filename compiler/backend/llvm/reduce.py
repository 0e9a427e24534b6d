"""Emit float32 sums in numpy's exact association order (pairwise summation, 8 accumulators)."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from compiler.backend.llvm.irutil import F32, Kernel, i64

BLOCK = 128  # numpy's PW_BLOCKSIZE


def pairwise_sum(k: Kernel, load: Callable[[ir.Value], ir.Value], base: ir.Value, n: int, stride: int = 1,
                 load8: Callable[[ir.Value], ir.Value] | None = None) -> ir.Value:
    """numpy's ``pairwise_sum`` of ``load(base + i*stride)`` for i < n (static n), as float32. ``load8`` (unit
    stride): the ``<8 x float>`` of elements ``i .. i+7``; the 8 accumulators of a block then live in one vector
    (lane j adds the same elements in the same order as accumulator j: the sum is the same, bit for bit)."""
    b = k.b

    def at(i) -> ir.Value:
        off = k.madd((i, stride)) if isinstance(i, ir.Value) else i64(int(i) * stride)
        return load(b.add(base, off))

    def block_accumulators(start: int, full: int) -> list:
        """numpy's 8 accumulators over ``full`` (a multiple of 8) elements from ``start``: one vector (``load8``)
        or 8 scalars."""
        if load8 is not None and stride == 1:
            acc = k.alloca(ir.VectorType(F32, 8))
            b.store(load8(b.add(base, i64(start))), acc)
            if full > 8:
                with k.loop(start + full, start=start + 8, step=8) as i:
                    b.store(b.fadd(b.load(acc), load8(b.add(base, i))), acc)
            v = b.load(acc)
            return [b.extract_element(v, i64(j)) for j in range(8)]
        slots = []
        for j in range(8):
            slot = k.alloca(F32)
            b.store(at(start + j), slot)
            slots.append(slot)
        if full > 8:
            with k.loop(start + full, start=start + 8, step=8) as i:
                for j in range(8):
                    b.store(b.fadd(b.load(slots[j]), at(b.add(i, i64(j)))), slots[j])
        return [b.load(slot) for slot in slots]

    def rec(start: int, m: int) -> ir.Value:
        if m < 8:
            res = ir.Constant(F32, -0.0)
            for i in range(m):
                res = b.fadd(res, at(start + i))
            return res
        if m <= BLOCK:
            full = m - m % 8
            r = block_accumulators(start, full)
            res = b.fadd(b.fadd(b.fadd(r[0], r[1]), b.fadd(r[2], r[3])), b.fadd(b.fadd(r[4], r[5]), b.fadd(r[6], r[7])))
            for i in range(start + full, start + m):
                res = b.fadd(res, at(i))
            return res
        half = m // 2
        half -= half % 8
        return b.fadd(rec(start, half), rec(start + half, m - half))

    return rec(0, n)
