"""Small llvmlite.ir helpers: kernel functions over typed buffers, counted loops, dtype mapping."""
from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np
from llvmlite import ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
_IDS = itertools.count()

_TYPES = {"int8": I8, "uint8": I8, "int16": ir.IntType(16), "uint16": ir.IntType(16), "int32": I32,
          "int64": I64, "float32": F32, "float64": F64}


def llvm_type(dtype) -> ir.Type:
    """LLVM element type of a numpy dtype (signedness lives in the ops, not the type)."""
    name = np.dtype(dtype).name
    if name not in _TYPES:
        raise TypeError(f"no LLVM element type for numpy dtype {name!r}; supported: {sorted(_TYPES)}")
    return _TYPES[name]


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


class Kernel:
    """``void <name>(T0* a0, T1* a1, ...)`` in a fresh module; ``args`` are the typed buffer pointers."""

    def __init__(self, base: str, dtypes: Sequence) -> None:
        self.name = f"vta_{base}_{next(_IDS)}"
        self.module = ir.Module(name=self.name)
        tys = [llvm_type(d).as_pointer() for d in dtypes]
        self.fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), tys), self.name)
        for a in self.fn.args:
            a.add_attribute("noalias")
        self.args = list(self.fn.args)
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))

    def load(self, ptr, idx) -> ir.Value:
        return self.b.load(self.b.gep(ptr, [idx], inbounds=True))

    def store(self, val, ptr, idx) -> None:
        self.b.store(val, self.b.gep(ptr, [idx], inbounds=True))

    def alloca(self, ty: ir.Type) -> ir.Value:
        """A stack slot created in the entry block (so loops do not grow the stack)."""
        cur = self.b.block
        self.b.position_at_start(self.fn.entry_basic_block)
        slot = self.b.alloca(ty)
        self.b.position_at_end(cur)
        return slot

    def finish(self) -> ir.Module:
        self.b.ret_void()
        return self.module

    def intrinsic(self, name: str, ty: ir.Type, nargs: int = 1):
        return self.module.declare_intrinsic(name, [ty], ir.FunctionType(ty, [ty] * nargs))

    @contextmanager
    def loop(self, stop, start=0, step: int = 1) -> Iterator[ir.Value]:
        """``for (i = start; i < stop; i += step)`` with i64 bounds (constants or values)."""
        b = self.b
        start = i64(start) if isinstance(start, int) else start
        stop = i64(stop) if isinstance(stop, int) else stop
        pre = b.block
        head = b.append_basic_block("loop.head")
        body = b.append_basic_block("loop.body")
        end = b.append_basic_block("loop.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", i, stop), body, end)
        b.position_at_end(body)
        yield i
        nxt = b.add(i, i64(step), flags=["nsw"])
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(end)

    def madd(self, *terms: tuple) -> ir.Value:
        """Sum of ``value * const`` terms (i64); constants of 0 are skipped."""
        acc = None
        for v, c in terms:
            if c == 0:
                continue
            t = v if c == 1 else self.b.mul(v, i64(c), flags=["nsw"])
            acc = t if acc is None else self.b.add(acc, t, flags=["nsw"])
        return i64(0) if acc is None else acc
