"""Register-tiled float32 GEMMs in TE, batched, with a bias/activation epilogue: ``out[..., i, j] =
act(sum_k a[..., i, k] * b[..., k, j] + bias[j])``, numpy broadcasting over the batch axes.

The operator library's products of many rows: dense layers over a transformer's tokens (``x @ W^T``) and
attention's two-activation MatMuls. (The one-row classifier keeps :mod:`compiler.topi.dense_float`.) The CPU
schedule is :mod:`compiler.backend.llvm.matmul`'s, per batch: column blocks of ``bn = nvec * lanes`` outside row
tiles of ``bm``, each block's panel of ``b`` packed contiguous into a stack buffer by the thread that uses it, a
``bm x bn`` accumulator tile in registers over the whole reduction (rows and vectors unrolled, columns vectorized),
the epilogue applied as the tile is stored; (batch, column block) pairs run in parallel. Ragged edges: a last row
tile computes clamped rows it never stores, a last column block reads clamped columns of ``b``. The schedule's knobs
(:class:`CpuGemmKnobs`: rows and vectors of the register tile, the parallel loop, the reduction's unrolling) are
what the llvm target's tuner searches (:mod:`compiler.autotune.llvm_gemm`); :func:`default_cpu_knobs` is the
library's choice.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from compiler import te
from compiler.te import Tensor
from compiler.topi.elementwise import activation, broadcast_shape

PARALLEL_MIN_MACS = 1 << 17  # multiply-adds from which the (batch x column block) loop runs on all threads
GEMM_PARALLEL_CHOICES = ("cols", "none")
KUNROLL_CHOICES = (1, 2, 4)


@dataclass(frozen=True)
class CpuGemmKnobs:
    """The CPU GEMM schedule's knobs: a register tile of ``bm`` rows by ``nvec`` vectors of the target's float lanes
    (cut down to the extents), ``parallel`` ``"cols"`` (the (batch x column block) loop on all threads) or
    ``"none"``, and ``kunroll``: the reduction loop unrolled by 1, 2 or 4 (a factor that divides it)."""

    bm: int = 6
    nvec: int = 2
    parallel: str = "cols"
    kunroll: int = 1

    def check(self, k: int | None = None) -> None:
        """A :class:`te.TeError` naming the knob that is out of range (``k``: the reduction, for ``kunroll``)."""
        for name, v, top in (("bm", self.bm, 16), ("nvec", self.nvec, 8)):
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
                raise te.TeError(f"CpuGemmKnobs: {name}={v!r} must be an int in 1..{top}")
        if self.parallel not in GEMM_PARALLEL_CHOICES:
            raise te.TeError(f"CpuGemmKnobs: parallel={self.parallel!r}; allowed: {GEMM_PARALLEL_CHOICES}")
        if isinstance(self.kunroll, bool) or self.kunroll not in KUNROLL_CHOICES:
            raise te.TeError(f"CpuGemmKnobs: kunroll={self.kunroll!r}; allowed: {KUNROLL_CHOICES}")
        if k is not None and k % self.kunroll:
            raise te.TeError(f"CpuGemmKnobs: kunroll={self.kunroll} must divide the reduction ({k})")


def default_cpu_knobs(m: int, k: int, n: int, batch: int, lanes: int) -> CpuGemmKnobs:
    """The library's knobs for an ``m x k`` by ``k x n`` product over ``batch`` batches with vectors of ``lanes``:
    6 rows by 2 vectors (12 accumulators: fits the 16 vector registers of AVX2 and leaves AVX-512's room), parallel
    from :data:`PARALLEL_MIN_MACS` over two or more column blocks; cut down to the extents (as :func:`tile_sizes`
    cuts them), so equal programs have equal knobs."""
    bm, vec, bn = tile_sizes(m, n, lanes)
    outer = batch * -(-n // bn)
    par = "cols" if batch * m * k * n >= PARALLEL_MIN_MACS and outer >= 2 else "none"
    return CpuGemmKnobs(bm=bm, nvec=bn // vec, parallel=par)


@dataclass
class GemmOp:
    inputs: list[Tensor]
    pack: Tensor
    acc: Tensor
    out: Tensor
    bm: int
    vec: int
    bn: int
    knobs: CpuGemmKnobs


def tile_sizes(m: int, n: int, lanes: int, bm: int = 6, nvec: int = 2) -> tuple[int, int, int]:
    """``(bm, vec, bn)``: ``bm`` rows (at most ``m``) by ``bn = nvec' * vec`` columns of ``lanes``-wide vectors,
    cut down so that no tile exceeds its extent (one vector of ``n`` lanes when ``n`` is narrower than one)."""
    bm = min(bm, m)
    if n < lanes:
        return bm, n, n
    return bm, lanes, lanes * min(nvec, n // lanes)


def clamp_index(i, n: int, padded: int):
    """``i`` clamped to ``n - 1`` when the packed extent ``padded`` exceeds ``n`` (the extra rows or columns are read,
    never stored)."""
    return te.min_(i, te.const(n - 1, "int32")) if padded > n else i


def product_dims(a_shape: tuple[int, ...], b_shape: tuple[int, ...], what: str = "gemm") -> tuple:
    """``(m, k, n, batch)`` of ``a`` (..., M, K) times ``b`` (..., K, N), the batch axes broadcast; a
    :class:`te.TeError` (prefixed ``what``) where an operand is below 2-D, the inner sizes differ or a size is 0."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise te.TeError(f"{what}: both operands must be at least 2-D, got {a_shape} and {b_shape}")
    m, k = a_shape[-2:]
    k2, n = b_shape[-2:]
    if k != k2 or min(m, k, n) < 1:
        raise te.TeError(f"{what}: {a_shape} @ {b_shape}: inner sizes {k} and {k2} differ or a size is 0")
    return m, k, n, broadcast_shape(tuple(a_shape[:-2]), tuple(b_shape[:-2]))


def batch_index(shape: tuple[int, ...], i: tuple, nb: int) -> tuple:
    """An operand of ``shape``'s batch index inside the output's index ``i`` (``nb`` batch axes; size-1 axes
    broadcast)."""
    lead = nb - (len(shape) - 2)
    return tuple(0 if shape[q] == 1 else i[lead + q] for q in range(len(shape) - 2))


def gemm(a_shape: tuple[int, ...], b_shape: tuple[int, ...], lanes: int, *, bias: bool = False,
         act: str | None = None, act_params: tuple = (), knobs: CpuGemmKnobs | None = None) -> GemmOp:
    """The op for ``a`` of ``a_shape`` (..., M, K) times ``b`` of ``b_shape`` (..., K, N) (both >= 2-D), with a
    ``bias`` placeholder (N,) and activation ``act``; tiles for vectors of ``lanes`` float32 lanes, of ``knobs``'
    size (default :func:`default_cpu_knobs`)."""
    m, k, n, batch = product_dims(a_shape, b_shape)
    nb = len(batch)
    knobs = knobs or default_cpu_knobs(m, k, n, math.prod(batch), lanes)
    knobs.check(k)
    bm, vec, bn = tile_sizes(m, n, lanes, knobs.bm, knobs.nvec)
    mp, np_ = -(-m // bm) * bm, -(-n // bn) * bn
    a = te.placeholder(a_shape, "float32", "a")
    b = te.placeholder(b_shape, "float32", "b")

    def at(shape, i):
        return batch_index(shape, i, nb)

    pack = te.compute(batch + (np_ // bn, k, bn), lambda *i: b[at(b_shape, i) + (
        i[nb + 1], clamp_index(i[nb] * bn + i[nb + 2], n, np_))], name="b_pack", dtype="float32")
    r = te.reduce_axis(k, "rk")
    acc = te.compute(batch + (m, n), lambda *i: te.sum_(
        a[at(a_shape, i) + (clamp_index(i[nb], m, mp), r)] * pack[tuple(i[:nb]) + (i[nb + 1] // bn, r, i[nb + 1] % bn)], r),
        name="gemm_acc", dtype="float32")
    inputs = [a, b]
    bt = None
    if bias:
        bt = te.placeholder((n,), "float32", "bias")
        inputs.append(bt)
    zero = te.const(0.0, "float32")
    out = te.compute(batch + (m, n), lambda *i: activation(acc[i] + (bt[i[nb + 1]] if bt is not None else zero),
                                                           act, act_params), name="gemm", dtype="float32")
    return GemmOp(inputs, pack, acc, out, bm, vec, bn, knobs)


def schedule_cpu(op: GemmOp, s) -> None:
    """See the module docstring."""
    so = s[op.out]
    *batch, i, j = so.leaf_iter_vars
    io, jo, ii, ji = so.tile(i, j, op.bm, op.bn)
    so.reorder(*batch, jo, io, ii, ji)
    outer = jo
    for v in reversed(batch):
        outer = so.fuse(v, outer)
    knobs = op.knobs
    if outer.extent >= 2 and knobs.parallel == "cols":
        so.parallel(outer)
    jvo, jvi = so.split(ji, op.vec)
    so.unroll(jvo)
    so.vectorize(jvi)
    sp = s[op.pack]
    sp.compute_at(so, outer)
    sp.vectorize(sp.leaf_iter_vars[-1])
    sa = s[op.acc]
    sa.set_scope("local")
    sa.compute_at(so, io)
    *_b, ci, cj, ck = sa.leaf_iter_vars
    cjo, cji = sa.split(cj, op.vec)
    if knobs.kunroll > 1:
        cko, cki = sa.split(ck, knobs.kunroll)
        sa.reorder(cko, cki, ci, cjo, cji)
        sa.unroll(cki)
    else:
        sa.reorder(ck, ci, cjo, cji)
    sa.unroll(ci)
    sa.unroll(cjo)
    sa.vectorize(cji)
