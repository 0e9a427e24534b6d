"""Batched float32 GEMMs for the GPU with the tiled conv's schedule: shared-memory chunks, register blocking,
split-K (:func:`compiler.topi.conv2d_gpu.schedule_tiled`).

``out[..., i, j] = act(sum_r a[..., i, r] * b[..., r, j] + bias[j])``, numpy broadcasting over the batch axes: a
transformer's dense layers over its tokens (``x @ W^T``, ``W^T`` packed once) and attention's two-activation
MatMuls. The knobs are :class:`~compiler.topi.conv2d_gpu.GpuConvKnobs` with rows of ``a`` in place of output
channels (``bo``, ``vo``) and columns of ``b`` in place of pixels (``bp``, ``vp``). Where the split does not divide
the reduction, the operands are read through inlined stages that are zero past its end.
"""
from __future__ import annotations

from dataclasses import dataclass

from compiler import te
from compiler.te import Tensor
from compiler.topi.conv2d_gpu import GpuConvKnobs, default_tiles, schedule_tiled
from compiler.topi.elementwise import activation, broadcast_shape
from compiler.topi.gemm import batch_index, product_dims


@dataclass
class GpuGemmOp:
    """The tensors of one GPU GEMM: ``inputs`` (a, b, [bias]), the inlined operand views ``a_in``/``b_in``, the
    partial sums ``part`` (None without split-K), the accumulator ``conv`` and ``out``."""

    knobs: GpuConvKnobs
    inputs: list[Tensor]
    a_in: Tensor
    b_in: Tensor
    part: Tensor | None
    conv: Tensor
    out: Tensor


def default_knobs(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> GpuConvKnobs:
    """:func:`~compiler.topi.conv2d_gpu.default_tiles` of the product's rows, columns, reduction and batch."""
    batch = 1
    for d in broadcast_shape(tuple(a_shape[:-2]), tuple(b_shape[:-2])):
        batch *= d
    return default_tiles(a_shape[-2], b_shape[-1], a_shape[-1], batch)


def gemm(a_shape: tuple[int, ...], b_shape: tuple[int, ...], knobs: GpuConvKnobs, *, bias: bool = False,
         act: str | None = None, act_params: tuple = ()) -> GpuGemmOp:
    """The op for ``a`` (..., M, K) times ``b`` (..., K, N) (both >= 2-D) with a ``bias`` (N,) and ``act``."""
    m, k, n, batch = product_dims(a_shape, b_shape, "gemm_gpu")
    knobs.check_product(k)
    nb = len(batch)
    split = knobs.split
    ks = -(-k // split)
    kp = split * ks
    a = te.placeholder(a_shape, "float32", "a")
    b = te.placeholder(b_shape, "float32", "b")
    zero = te.const(0.0, "float32")
    if kp > k:  # zero past the reduction's end (the loads clamped, the select discards them)
        a_in = te.compute(tuple(a_shape[:-1]) + (kp,), lambda *i: te.select(i[-1] < k, a[i], zero), name="a_in",
                          dtype="float32")
        b_in = te.compute(tuple(b_shape[:-2]) + (kp, n), lambda *i: te.select(i[-2] < k, b[i], zero), name="b_in",
                          dtype="float32")
    else:
        a_in = te.compute(tuple(a_shape), lambda *i: a[i], name="a_in", dtype="float32")
        b_in = te.compute(tuple(b_shape), lambda *i: b[i], name="b_in", dtype="float32")

    def at(shape, i):
        return batch_index(shape, i, nb)

    rr = te.reduce_axis(ks, "rr")
    part = None
    if split == 1:
        conv = te.compute(batch + (m, n), lambda *i: te.sum(
            a_in[at(a_shape, i) + (i[nb], rr)] * b_in[at(b_shape, i) + (rr, i[nb + 1])], [rr]),
            name="conv", dtype="float32")
    else:
        part = te.compute((split,) + batch + (m, n), lambda s_, *i: te.sum(
            a_in[at(a_shape, i) + (i[nb], s_ * ks + rr)] * b_in[at(b_shape, i) + (s_ * ks + rr, i[nb + 1])], [rr]),
            name="part", dtype="float32")
        rs = te.reduce_axis(split, "rs")
        conv = te.compute(batch + (m, n), lambda *i: te.sum(part[(rs,) + i], [rs]), name="conv", dtype="float32")
    inputs = [a, b]
    bt = None
    if bias:
        bt = te.placeholder((n,), "float32", "bias")
        inputs.append(bt)
    out = te.compute(batch + (m, n), lambda *i: activation(conv[i] + (bt[i[-1]] if bt is not None else zero), act,
                                                           act_params), name="gemm", dtype="float32")
    return GpuGemmOp(knobs, inputs, a_in, b_in, part, conv, out)


def schedule_gpu(op: GpuGemmOp, s) -> None:
    """:func:`~compiler.topi.conv2d_gpu.schedule_tiled` with the operands' views inlined into the shared fills."""
    s[op.a_in].compute_inline()
    s[op.b_in].compute_inline()
    schedule_tiled(s, op.knobs, part=op.part, conv=op.conv, out=op.out, sources=[op.a_in, op.b_in])
