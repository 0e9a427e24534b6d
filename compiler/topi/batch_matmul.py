"""Batched matrix products of two activations in TE (float32): ``out[..., m, n] = sum_k a[..., m, k] * b[..., k, n]``
with numpy's broadcasting over the leading (batch) axes, as ONNX MatMul of two >= 2-D tensors (attention's
``Q @ K^T`` and ``softmax @ V``)."""
from __future__ import annotations

from compiler import te
from compiler.te import Tensor
from compiler.topi.elementwise import broadcast_shape

VECTOR = 8  # float32 lanes the CPU schedule vectorizes the columns by, where they divide N
PARALLEL_MIN_MACS = 1 << 16  # from this many multiply-adds the (batch x rows) loop runs on all threads


def batch_matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[list[Tensor], Tensor]:
    """``([a, b], out)`` for operands of ``a_shape`` (..., M, K) and ``b_shape`` (..., K, N), both at least 2-D."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise te.TeError(f"batch_matmul: both operands must be at least 2-D, got {a_shape} and {b_shape}")
    m, k = a_shape[-2:]
    k2, n = b_shape[-2:]
    if k != k2:
        raise te.TeError(f"batch_matmul: {a_shape} @ {b_shape}: the inner sizes differ ({k} vs {k2})")
    batch = broadcast_shape(a_shape[:-2], b_shape[:-2])
    a = te.placeholder(a_shape, "float32", "a")
    b = te.placeholder(b_shape, "float32", "b")
    nb = len(batch)
    rk = te.reduce_axis(k, "rk")

    def at(shape, i):  # the operand's batch index inside the output's (size-1 axes broadcast)
        lead = nb - (len(shape) - 2)
        return tuple(0 if shape[q] == 1 else i[lead + q] for q in range(len(shape) - 2))

    out = te.compute(batch + (m, n), lambda *i: te.sum_(a[at(a_shape, i) + (i[nb], rk)] * b[at(b_shape, i) + (rk, i[nb + 1])],
                                                        rk), name="batch_matmul", dtype="float32")
    return [a, b], out


def schedule_cpu(s, out: Tensor) -> None:
    """Per (batch, row): the reduction outside the columns, which are vectorized by :data:`VECTOR` where it divides
    them (each step one broadcast of ``a`` times a row of ``b``); the (batch x rows) loop parallel from
    :data:`PARALLEL_MIN_MACS`."""
    st = s[out]
    *data, rk = st.leaf_iter_vars
    outer = data[0]
    for v in data[1:-1]:
        outer = st.fuse(outer, v)
    cols = data[-1]
    macs = outer.extent * cols.extent * rk.extent
    if cols.extent % VECTOR == 0:
        co, ci = st.split(cols, VECTOR)
        st.reorder(outer, co, rk, ci)
        st.vectorize(ci)
    else:
        st.reorder(outer, rk, cols)
    if outer.extent >= 2 and macs >= PARALLEL_MIN_MACS:
        st.parallel(outer)


def schedule_gpu(s, out: Tensor) -> None:
    """One thread per output element (its reduction serial)."""
    from compiler.topi.injective import schedule_data_gpu

    schedule_data_gpu(s, [out])
