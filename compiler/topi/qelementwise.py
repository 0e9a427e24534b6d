"""The exact int8 elementwise ops of lowered QDQ graphs in TE (:mod:`jit_runtime.host_ops.int_elementwise`):
``QAdd`` and ``QMul`` (fixed-point rescale, rounding shift, zero points, clip; numpy broadcasting) and
``QLookup`` (a 256-entry int8 table indexed by ``x + 128``). Integer arithmetic wraps like numpy's."""
from __future__ import annotations

from compiler import te
from jit_runtime.host_ops.int_elementwise import QAddParams, QMulParams
from compiler.te import Tensor
from compiler.topi.elementwise import _bcast_index, broadcast_shape


def _c(v: int, dt: str) -> te.Expr:
    return te.const(int(v), dt)


def qadd(a_shape: tuple[int, ...], b_shape: tuple[int, ...], p: QAddParams) -> tuple[list[Tensor], Tensor]:
    """``clip(round_shift((a - za) * ma + (b - zb) * mb, shift) + zo, lo, hi)`` in int32, cast to int8."""
    out = broadcast_shape(a_shape, b_shape)
    a, b = te.placeholder(a_shape, "int8", "a"), te.placeholder(b_shape, "int8", "b")
    ia, ib = _bcast_index(a_shape, len(out)), _bcast_index(b_shape, len(out))

    def f(*i):
        acc = (a[ia(i)].astype("int32") - _c(p.a_zp, "int32")) * _c(p.a_mult, "int32")
        acc = acc + (b[ib(i)].astype("int32") - _c(p.b_zp, "int32")) * _c(p.b_mult, "int32")
        if p.shift:
            acc = (acc + _c(1 << (p.shift - 1), "int32")) >> _c(p.shift, "int32")
        acc = acc + _c(p.out_zp, "int32")
        return te.min_(te.max_(acc, _c(p.out_min, "int32")), _c(p.out_max, "int32")).astype("int8")

    return [a, b], te.compute(out, f, name="qadd", dtype="int8")


def qmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...], p: QMulParams) -> tuple[list[Tensor], Tensor]:
    """``clip(round_shift((a - za) * (b - zb) * m, shift) + zo, -128, 127)``; int32 when ``shift <= 24``, else int64."""
    out = broadcast_shape(a_shape, b_shape)
    a, b = te.placeholder(a_shape, "int8", "a"), te.placeholder(b_shape, "int8", "b")
    ia, ib = _bcast_index(a_shape, len(out)), _bcast_index(b_shape, len(out))
    dt = "int32" if p.shift <= 24 else "int64"

    def f(*i):
        acc = (a[ia(i)].astype(dt) - _c(p.a_zp, dt)) * (b[ib(i)].astype(dt) - _c(p.b_zp, dt)) * _c(p.mult, dt)
        if p.shift:
            acc = (acc + _c(1 << (p.shift - 1), dt)) >> _c(p.shift, dt)
        acc = acc + _c(p.out_zp, dt)
        return te.min_(te.max_(acc, _c(-128, dt)), _c(127, dt)).astype("int8")

    return [a, b], te.compute(out, f, name="qmul", dtype="int8")


def qlookup(shape: tuple[int, ...]) -> tuple[list[Tensor], Tensor]:
    """``table[x + 128]`` elementwise; inputs (x int8, table int8[256])."""
    x, table = te.placeholder(shape, "int8", "x"), te.placeholder((256,), "int8", "table")
    return [x, table], te.compute(shape, lambda *i: table[x[i].astype("int32") + 128], name="qlookup", dtype="int8")
