"""The exact int8 elementwise ops of lowered QDQ graphs in TE (:mod:`jit_runtime.host_ops.int_elementwise`):
``QAdd`` and ``QMul`` (fixed-point rescale, rounding shift, zero points, clip; numpy broadcasting),
``QLookup`` (a 256-entry int8 table indexed by ``x + 128``) and ``QGlobalAveragePool`` (an int32 sum, then the
fixed-point rescale in int64). Integer arithmetic wraps like numpy's."""
from __future__ import annotations

from compiler import te
from jit_runtime.host_ops.int_elementwise import QAddParams, QMulParams, QPoolParams
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


QGAP_MAX_COUNT = 1 << 23  # summed elements per output: |sum| <= 2**30 stays exact in int32


def check_qgap(count: int, p: QPoolParams) -> None:
    """Raise ``TeError`` where :func:`qgap` cannot compute exactly: ``count`` elements per sum or the shift."""
    if not 0 < count <= QGAP_MAX_COUNT or not 0 <= p.shift <= 62:
        raise te.TeError(f"qgap: {count} elements per sum (1..{QGAP_MAX_COUNT}) and shift {p.shift} (0..62)")


def qgap(front: int, count: int, back: int, p: QPoolParams) -> tuple[list[Tensor], Tensor]:
    """``qgap`` (:func:`jit_runtime.host_ops.int_elementwise.qgap`) of an int8 ``(front, count, back)`` array over
    axis 1 -> ``(front, 1, back)``: ``clip(((sum - n * zx) * m + 2**(s-1)) >> s) + zy, -128, 127)`` (the sum in
    int32, exact up to :data:`QGAP_MAX_COUNT` elements; the rescale in int64 as numpy's)."""
    check_qgap(count, p)
    x = te.placeholder((front, count, back), "int8", "x")
    r = te.reduce_axis(count, "r")
    total = te.compute((front, back), lambda f, b: te.sum(x[f, r, b].astype("int32"), [r]), name="qgap_sum",
                       dtype="int32")
    rnd = (1 << (p.shift - 1)) if p.shift > 0 else 0

    def f(i, o, b):
        acc = (total[i, b].astype("int64") - _c(p.count * p.in_zp, "int64")) * _c(p.mult, "int64") + _c(rnd, "int64")
        y = (acc >> _c(p.shift, "int64")) + _c(p.out_zp, "int64")
        return te.min_(te.max_(y, _c(-128, "int64")), _c(127, "int64")).astype("int8")

    return [x], te.compute((front, 1, back), f, name="qgap", dtype="int8")


def schedule_qgap_cpu(s, out: Tensor) -> None:
    """The sum over ``count`` outer and the ``back`` axis (a packed pixel's channels) innermost, vectorized; the
    rescale one flat vector loop."""
    from compiler.topi.injective import schedule_injective_cpu

    total = out.op.inputs[0]
    st = s[total]
    f, b, r = st.leaf_iter_vars
    st.reorder(f, r, b)
    if b.extent % 8 == 0:
        st.vectorize(b)
    schedule_injective_cpu(s, out)
