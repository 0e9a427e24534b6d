"""A float32 matmul written in TE and scheduled for the host CPU (packing, register tiling, SIMD, threads)."""
from __future__ import annotations

from compiler import te
from compiler.schedule import create_schedule
from compiler.backend.llvm.host import float_lanes
from compiler.topi import gemm
from compiler.topi.gemm import clamp_index


def tile_sizes(m: int, n: int, bm: int = 6, vec: int | None = None, nvec: int = 2) -> tuple[int, int, int]:
    """``(bm, vec, bn)`` of the register tile for an ``m x n`` output: ``vec`` = float lanes of the target CPU
    (:func:`~compiler.backend.llvm.host.float_lanes`: 4 SSE, 8 AVX2, 16 AVX-512), ``bn = nvec * vec``, both cut down so
    that no tile exceeds its extent (:func:`compiler.topi.gemm.tile_sizes`, the operator library's GEMM)."""
    if min(m, n, bm, nvec) < 1 or (vec is not None and vec < 1):
        raise ValueError(f"matmul tile: extents and tile sizes must be >= 1, got m={m} n={n} bm={bm} vec={vec} "
                         f"nvec={nvec}")
    return gemm.tile_sizes(m, n, vec or float_lanes(), bm, nvec)


def matmul_schedule(m: int, n: int, k: int, bm: int = 6, vec: int | None = None, nvec: int = 2):
    """``C = A @ B`` (``A: m x k``, ``B: k x n``, float32) and its CPU schedule: ``(schedule, [A, B, C])``.

    Column blocks of ``bn = nvec * vec`` (``vec`` = SIMD float lanes of the target CPU) run in parallel; each packs
    its panel of ``B`` (``k x bn``, contiguous) into a stack buffer (``compute_at``), then sweeps the rows in
    ``bm x bn`` tiles accumulated in a local buffer (``cache_write``) with rows and vectors unrolled and columns
    vectorized, so the ``bm * nvec`` accumulators stay in registers (6 x 2 vectors: 12 of the 16 ymm registers on
    AVX2, 12 zmm on AVX-512, 12 xmm on SSE) while ``A`` is broadcast row by row. Tiles never exceed the extents
    (:func:`tile_sizes`); a ragged last row tile computes clamped rows it never stores.
    """
    bm, vec, bn = tile_sizes(m, n, bm, vec, nvec)
    mp, np_ = -(-m // bm) * bm, -(-n // bn) * bn
    A = te.placeholder((m, k), "float32", "A")
    B = te.placeholder((k, n), "float32", "B")
    bpack = te.compute((np_ // bn, k, bn), lambda jo, kk, ji: B[kk, clamp_index(jo * bn + ji, n, np_)], name="Bpack")
    r = te.reduce_axis(k, "k")
    C = te.compute((m, n), lambda i, j: te.sum(A[clamp_index(i, m, mp), r] * bpack[j // bn, r, j % bn], axis=r),
                   name="C")
    s = create_schedule(C)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axes
    io, jo, ii, ji = s[C].tile(i, j, bm, bn)
    s[C].reorder(jo, io, ii, ji)
    s[C].parallel(jo)
    jvo, jvi = s[C].split(ji, vec)
    s[C].unroll(jvo)
    s[C].vectorize(jvi)
    # one B panel per column block, packed into a stack buffer by the thread that uses it
    s[bpack].compute_at(s[C], jo)
    s[bpack].vectorize(s[bpack].op.axes[2])
    s[CC].compute_at(s[C], io)
    ci, cj = s[CC].op.axes
    (ck,) = s[CC].op.reduce_axes
    cjo, cji = s[CC].split(cj, vec)
    s[CC].reorder(ck, ci, cjo, cji)
    s[CC].unroll(ci)
    s[CC].unroll(cjo)
    s[CC].vectorize(cji)
    return s, [A, B, C]
