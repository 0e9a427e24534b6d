"""float32 dense ``y = act(x @ W^T + bias)`` with weights packed ``(M/MB, K, MB)`` (MB outputs contiguous)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler import te
from jit_runtime.host_arrays import aligned_copy
from compiler.te import Tensor
from compiler.topi.elementwise import activation

M_BLOCK = 8


def m_block(m: int) -> int:
    return M_BLOCK if m % M_BLOCK == 0 else 1


def pack_dense_weight(w_mk: np.ndarray) -> np.ndarray:
    """(M, K) -> (M/MB, K, MB) float32."""
    m, k = w_mk.shape
    mb = m_block(m)
    return aligned_copy(np.ascontiguousarray(np.asarray(w_mk, np.float32).reshape(m // mb, mb, k).transpose(0, 2, 1)))


@dataclass
class DenseOp:
    inputs: list[Tensor]
    acc: Tensor
    out: Tensor


def dense(n: int, k: int, m: int, bias: bool = False, act: str | None = None, act_params: tuple = ()) -> DenseOp:
    """``out[i, j] = act(sum_k x[i, k] * W[j, k] + bias[j])``; the weight placeholder is packed (see module doc)."""
    if min(n, k, m) < 1:
        raise te.TeError(f"dense: sizes must be positive, got n={n} k={k} m={m}")
    mb = m_block(m)
    x = te.placeholder((n, k), "float32", "x")
    w = te.placeholder((m // mb, k, mb), "float32", "weight")
    rk = te.reduce_axis(k, "rk")
    acc = te.compute((n, m // mb, mb), lambda i, jo, ji: te.sum(x[i, rk] * w[jo, rk, ji], rk), name="dense", dtype="float32")
    inputs = [x, w]
    b = None
    if bias:
        b = te.placeholder((m,), "float32", "bias")
        inputs.append(b)
    out = te.compute((n, m // mb, mb), lambda i, jo, ji: activation(
        acc[i, jo, ji] + (b[jo * mb + ji] if b is not None else te.const(0.0, "float32")), act, act_params),
        name="out", dtype="float32")  # (N, M/MB, MB): the (N, M) output's memory
    return DenseOp(inputs, acc, out)


DENSE_PARALLEL_MIN_MACS = 1 << 18  # multiply-adds of a dense from which it runs on all threads (its weights stream
# from memory: ResNet-18's 512 -> 1000 classifier reads 2 MB, 0.06 ms from cache, 0.12 ms cold, on one core)


def row_blocks(jo: int) -> int:
    """Output-channel blocks per register tile: independent accumulator vectors over the reduction (one vector
    alone is a chain of dependent FMAs: MobileNetV2's 1280 -> 1000 classifier ran at the FMA latency), the largest
    of 6..2 dividing the ``jo`` blocks, else 1."""
    return next((t for t in (6, 5, 4, 3, 2) if jo % t == 0), 1)


def schedule_cpu(op: DenseOp, s) -> None:
    """Per (row, tile of :func:`row_blocks` channel blocks): a local accumulator tile (registers: kept in memory,
    every FMA stored its vector and re-broadcast the input, aliasing) over the reduction, the tile's MB-output
    vectors inside (unrolled: independent accumulators); the bias/activation stored right after the tile; parallel
    over (row, tile) from ``DENSE_PARALLEL_MIN_MACS``."""
    so = s[op.out]
    i, jo, ji = so.leaf_iter_vars
    rk_extent = op.acc.op.reduce_axes[0].extent
    macs = i.extent * jo.extent * ji.extent * rk_extent
    jt = row_blocks(jo.extent) if ji.extent > 1 else 1
    joo, joi = so.split(jo, jt)
    so.reorder(i, joo, joi, ji)
    outer = so.fuse(i, joo)
    if outer.extent >= 2 and macs >= DENSE_PARALLEL_MIN_MACS:
        so.parallel(outer)
    if ji.extent > 1:
        so.vectorize(ji)
    sa = s[op.acc]
    sa.set_scope("local")
    sa.compute_at(so, outer)
    ai, ajo, aji, ark = sa.leaf_iter_vars
    sa.reorder(ai, ark, ajo, aji)
    if jt > 1:
        sa.unroll(ajo)
    if aji.extent > 1:
        sa.vectorize(aji)


def schedule_gpu(op: DenseOp, s) -> None:
    """One thread per output (row, channel block, lane)."""
    from compiler.topi.injective import schedule_injective_gpu

    sa = s[op.acc]
    i, jo, ji = sa.leaf_iter_vars[:3]
    sa.bind(sa.fuse(i, jo), "blockIdx.x")
    sa.bind(ji, "threadIdx.x")
    schedule_injective_gpu(s, op.out)
