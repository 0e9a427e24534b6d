"""Elementwise kernels with static numpy broadcasting: Relu, Clip, Add, Sub, Mul, Div (float)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from llvmlite import ir

from compiler.codegen.llvm.irutil import Kernel
from compiler.codegen.llvm.plan import Plan, c_strides, contiguous, ptr, sig

INT = ("int8", "uint8", "int32", "int64")
FLOAT = ("float32", "float64")
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}


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


def _lt(k: Kernel, a, c, dt: str):
    if dt in FLOAT:
        return k.b.fcmp_ordered("<", a, c)
    return k.b.icmp_unsigned("<", a, c) if dt.startswith("u") else k.b.icmp_signed("<", a, c)


def _gt(k: Kernel, a, c, dt: str):
    if dt in FLOAT:
        return k.b.fcmp_ordered(">", a, c)
    return k.b.icmp_unsigned(">", a, c) if dt.startswith("u") else k.b.icmp_signed(">", a, c)


def _binop(k: Kernel, op: str, a, c, dt: str):
    if dt in FLOAT:
        return {"add": k.b.fadd, "sub": k.b.fsub, "mul": k.b.fmul, "div": k.b.fdiv}[op](a, c)
    return {"add": k.b.add, "sub": k.b.sub, "mul": k.b.mul}[op](a, c)


def plan_binary(node, ins) -> Plan | None:
    """Same-dtype ``Add/Sub/Mul`` (integers wrap like numpy) and float ``Div``, with broadcasting."""
    if len(ins) != 2 or any(v is None for v in ins):
        return None
    x, y = ins
    dt = x.dtype.name
    op = BINARY[node.op]
    if x.dtype != y.dtype or dt not in INT + FLOAT or (op == "div" and dt not in FLOAT):
        return None
    try:
        out_shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return None
    shape, strides = collapse(out_shape, [broadcast_strides(x.shape, out_shape), broadcast_strides(y.shape, out_shape),
                                          c_strides(out_shape)])

    def emit() -> Kernel:
        k = Kernel(node.op.lower(), [dt, dt, dt])
        a, c, o = k.args

        def body(offs):
            k.store(_binop(k, op, k.load(a, offs[0]), k.load(c, offs[1]), dt), o, offs[2])
        _emit_nest(k, shape, strides, body)
        return k

    def run(fn, ins):
        a, c = contiguous(ins[0]), contiguous(ins[1])
        out = np.empty(out_shape, a.dtype)
        fn(ptr(a), ptr(c), ptr(out))
        return [out]
    return Plan((node.op, sig(x), sig(y)), emit, run)


def _bounds(node, ins, dtype) -> tuple | None:
    """(lo, hi) as 0-d arrays of ``dtype`` (None = absent); None when a bound is not a scalar."""
    if node.op == "Relu":
        return np.zeros((), dtype), None
    lo = ins[1] if len(ins) > 1 and ins[1] is not None else node.attrs.get("min")
    hi = ins[2] if len(ins) > 2 and ins[2] is not None else node.attrs.get("max")
    if any(b is not None and np.size(b) != 1 for b in (lo, hi)):
        return None
    return tuple(None if b is None else np.asarray(b).astype(dtype).reshape(()) for b in (lo, hi))


def plan_clip(node, ins) -> Plan | None:
    """``Relu`` and ``Clip`` (bounds from inputs or attrs, cast to the data dtype like numpy)."""
    x = ins[0]
    dt = x.dtype.name
    if dt not in INT + FLOAT:
        return None
    bounds = _bounds(node, ins, x.dtype)
    if bounds is None:
        return None
    has = tuple(b is not None for b in bounds)
    n = int(x.size)

    def emit() -> Kernel:
        k = Kernel(node.op.lower(), [dt, dt, dt, dt])
        src, dst, plo, phi = k.args
        lo_v = k.load(plo, ir.Constant(ir.IntType(64), 0)) if has[0] else None
        hi_v = k.load(phi, ir.Constant(ir.IntType(64), 0)) if has[1] else None
        with k.loop(n) as i:
            v = k.load(src, i)
            if lo_v is not None:
                v = k.b.select(_lt(k, v, lo_v, dt), lo_v, v)
            if hi_v is not None:
                v = k.b.select(_gt(k, v, hi_v, dt), hi_v, v)
            k.store(v, dst, i)
        return k

    memo: list = [None, None]  # (bound input objects, converted bounds): graph constants convert once

    def run(fn, ins):
        a = contiguous(ins[0])
        src = tuple(ins[1:])
        if memo[0] is None or len(src) != len(memo[0]) or any(u is not v for u, v in zip(src, memo[0])):
            memo[:] = [src, [np.zeros((), a.dtype) if b is None else b for b in _bounds(node, ins, a.dtype)]]
        params = memo[1]
        out = np.empty(a.shape, a.dtype)
        fn(ptr(a), ptr(out), ptr(params[0]), ptr(params[1]))
        return [out]
    return Plan((node.op, sig(x), has), emit, run)
