"""Winograd F(2x2, 3x3) float32 conv2d for the CPU: 3x3 kernels, unit stride and dilation, one group.

Each 2x2 output tile is ``A^T [(G g G^T) . (B^T d B)] A`` over its 4x4 input window ``d``: 16 multiplies per tile
and channel pair where the direct conv does 36 (2.25x fewer), paid for with an input and an output transform made
of additions only. Stages (float32; ``KB`` output channels per vector block, ``T`` tiles per register tile):

- ``pad``: the zero-padded input with columns de-interleaved by phase, ``(N, C, Hp, 2, TW + 1)``: window column
  ``j`` of tile ``(ty, tx)`` is phase ``j % 2``, column ``tx + j // 2``, so a row of tiles reads contiguous memory.
- ``wino_in``: ``V[n, a*4+b, c, ty, tx] = (B^T d B)[a, b]``, ``(N, 16, C, THp, TW)``: each element a signed sum of 4
  window values; tile rows past the map (up to the GEMM's last register tile) read zeros.
- ``wino_gemm``: 16 independent matrix products ``M[n, e, ko, t, ki] = sum_c V[n, e, c, t] U[e, ko, c, ki]`` over the
  flattened tiles ``t = ty * TW + tx``, the weights transformed and packed at build time (:func:`pack_weight`,
  ``(16, K/KB, C, KB)``); ``T x KB`` register tiles like the direct conv's flat tiles.
- ``out``: ``Y = A^T M A`` (three sums of three, then one) plus bias, residual and activation, stored NCHW as
  ``(N, K/KB, KB, OH, OW)``; an odd map's last tile row/column is computed and not stored.

The result differs from the direct conv's by rounding only (the transforms' coefficients are 0, +-1, +-1/2). The
schedule's knobs are :class:`~compiler.topi.conv2d_direct.CpuConvKnobs` with ``algo="winograd"`` (``ob`` = KB,
``xt`` = T, ``parallel``, ``unroll``); :func:`default_knobs` is the llvm target's choice without a tuning log.
With ``parallel="rows"`` the stages above are not all at root: each task takes one row of tiles and computes that
row's ``wino_in`` and ``wino_gemm`` into local buffers before its output transform, so V and M never travel through
the last-level cache (the default where the transformed weights fit 1 MB: ResNet-18's 56x56 and 28x28 layers).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler import te
from jit_runtime.host_arrays import aligned_copy
from compiler.te import Tensor
from compiler.topi.conv2d_direct import (CONV_PARALLEL_MIN_MACS, Conv2dSpec, CpuConvKnobs,  # noqa: F401
                                         winograd_ok, winograd_refusal)  # winograd_ok re-exported
from compiler.topi.elementwise import activation

KB = 16          # default output channels per GEMM vector block (two AVX2 vectors; AVX-512: see WIDE_KB)
TILES = (6, 5, 4)  # default tiles per register tile: the one running the fewest tile slots (see default_tile)
# AVX-512 (32 float32 lanes in two zmm vectors, 32 registers): 32-channel GEMM blocks and up to 8 tiles, 16
# accumulators. Kernels alone, two threads, Zen 5, min of alternating calls, vs the AVX2-sized default (16 channels,
# one zmm): ResNet-18's 64-channel 56x56 layers (rows, T 7) 0.70-0.72, 128-channel 28x28 (rows, T 7; AVX2 takes KB 8)
# 0.50-0.53, 256-channel 14x14 (staged, T 7) 0.76-0.81, 512-channel 7x7 (staged, T 4 of 16 tiles) 0.79-0.81. T 8
# (two register tiles for a 7x7 map's 16 tiles, none ragged): those 7x7 layers in the model 0.555-0.570 -> 0.508-0.523
# ms (per-layer minima of 15 runs, two builds each; the llvm tuner found it first).
WIDE_KB = 32
WIDE_TILES = (8, 7, 6, 5, 4)
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])

# Where the default schedule takes Winograd (two threads, kernels called in turn, min of 30; ResNet-18's layers
# 0.59-0.71 of the direct conv): the transforms cost per tile in proportion to C + K, the GEMM saves in proportion to
# C * K, so small channel counts lose (16 -> 16 at 56x56: 1.34x the direct conv; 16 -> 32: 0.95; 32 -> 32: 0.81);
# and the transformed input and GEMM result (16 values per tile and channel each) must stay in the last-level cache
# (64 -> 64 at 112x112, 26 MB of them: 1.18x; 128 -> 128 at 56x56, 13 MB: 0.68).
MIN_CHANNEL_HARMONIC = 16     # C * K / (C + K) at least this
MAX_TRANSFORMED_BYTES = 16 << 20
# parallel="rows" (one row of tiles a task, its transformed input V and GEMM result M in local buffers, so they never
# leave the core's cache): each task reads all the transformed weights (16 C K floats), so the default takes it where
# they are at most 1 MB. Kernels alone, two threads, bias + relu, alternating calls, min of 40 (ms), rows vs staged
# ("fused") vs direct: 64 -> 64 at 56x56 1.09 / 1.60 / 1.81; 128 -> 128 at 28x28 (KB 8, T 7) 1.25 / 1.35 / 1.81;
# 64 -> 64 at 112x112 (26 MB staged: the default took the direct conv) 3.99 / - / 6.43; 256 -> 256 at 14x14 (4 MB)
# rows ran 1.3x staged. The local buffers live on the task's stack: at most ROWS_MAX_LOCAL_BYTES.
ROWS_MAX_WEIGHT_BYTES = 1 << 20
ROWS_MAX_LOCAL_BYTES = 512 << 10
ROW_TILES = ((16, 6), (16, 5), (16, 4), (8, 7))  # (KB, T) the default tries in turn: T must divide a row's tiles
WIDE_ROW_TILES = ((32, 7), (32, 6), (32, 4)) + ROW_TILES  # AVX-512's (two zmm vectors first)


def gemm_blocks(lanes: int) -> tuple[int, tuple[int, ...], tuple[tuple[int, int], ...]]:
    """``(KB, TILES, ROW_TILES)`` of the default schedule for a target with ``lanes`` float32 lanes a vector: the
    AVX-512 ones (:data:`WIDE_KB`, :data:`WIDE_TILES`, :data:`WIDE_ROW_TILES`) from 16 lanes, else AVX2's."""
    return (WIDE_KB, WIDE_TILES, WIDE_ROW_TILES) if lanes >= 16 else (KB, TILES, ROW_TILES)


def winograd_default(spec: Conv2dSpec, lanes: int) -> bool:
    """Whether the llvm target's default schedule (no tuning log) takes Winograd for ``spec`` (see
    :data:`MIN_CHANNEL_HARMONIC`; :data:`MAX_TRANSFORMED_BYTES` unless :func:`default_rows_knobs` takes it), with
    output channels in blocks of 16; ``lanes``: the target's float32 lanes a vector."""
    if not winograd_ok(spec) or spec.o % KB:
        return False
    tiles = spec.n * -(-spec.oh // 2) * -(-spec.ow // 2)
    return (spec.c * spec.o >= MIN_CHANNEL_HARMONIC * (spec.c + spec.o)
            and (16 * 4 * tiles * (spec.c + spec.o) <= MAX_TRANSFORMED_BYTES  # staged: V and M in the LLC
                 or default_rows_knobs(spec, lanes) is not None))  # per tile row: they stay in local buffers


def default_tile(tiles: int, lanes: int) -> int:
    """Tiles per register tile for ``tiles`` Winograd tiles of one image: of the target's candidates
    (:func:`gemm_blocks`: :data:`TILES` on AVX2), the one that runs the fewest tile slots counting one slot per
    register tile for its fixed work, ``ceil(tiles / T) * (T + 1)``, ties to the larger (AVX2: a 7x7 map's 16
    tiles: 4; 14x14: 49 tiles, 5; 28x28: 6; AVX-512: 8, 7, 7). ResNet-18's 512-channel 7x7 conv (AVX2): T = 4 1.25
    ms, 6 1.33 ms."""
    cands = gemm_blocks(lanes)[1]
    if tiles <= cands[-1]:
        return tiles
    return min(cands, key=lambda t: (-(-tiles // t) * (t + 1), -t))


def row_tiles(spec: Conv2dSpec) -> int:
    """2x2 tiles in a row of ``spec``'s output (``TW``; an odd map's last one half outside)."""
    return -(-spec.ow // 2)


def rows_local_bytes(spec: Conv2dSpec) -> int:
    """Bytes of the local buffers a ``parallel="rows"`` task holds: one tile row's V and M (``16 (C + K) TW``
    floats)."""
    return 16 * (spec.c + spec.o) * row_tiles(spec) * 4


def default_rows_knobs(spec: Conv2dSpec, lanes: int) -> CpuConvKnobs | None:
    """``parallel="rows"`` knobs where the default takes them (the transformed weights within
    :data:`ROWS_MAX_WEIGHT_BYTES`, a (KB, T) of the target's row tiles (:func:`gemm_blocks`: :data:`ROW_TILES` on
    AVX2) that fits a row), else None."""
    tw = row_tiles(spec)
    if 16 * spec.c * spec.o * 4 > ROWS_MAX_WEIGHT_BYTES or rows_local_bytes(spec) > ROWS_MAX_LOCAL_BYTES:
        return None
    for kb, t in gemm_blocks(lanes)[2]:
        if spec.o % kb == 0 and t <= tw and tw % t == 0:
            return CpuConvKnobs(kb, t, "rows", 1, "rc_ky_kx", "winograd")
    return None


def default_knobs(spec: Conv2dSpec, lanes: int) -> CpuConvKnobs | None:
    """The Winograd knobs the llvm target uses without a tuning log on a target with ``lanes`` float32 lanes a
    vector, or None where it takes the direct conv (:func:`winograd_default`): per tile row where
    :func:`default_rows_knobs` takes it, else staged (the target's two-vector block where the output channels split
    into it, else :data:`KB`)."""
    if not winograd_default(spec, lanes):
        return None
    kb = gemm_blocks(lanes)[0]
    return default_rows_knobs(spec, lanes) or CpuConvKnobs(
        kb if spec.o % kb == 0 else KB, default_tile(-(-spec.oh // 2) * -(-spec.ow // 2), lanes), "fused", 1,
        "rc_ky_kx", "winograd")


def check_knobs(spec: Conv2dSpec, knobs: CpuConvKnobs) -> None:
    """Raise ``TeError`` when ``knobs`` are not Winograd knobs that can schedule ``spec`` (what is wrong and what
    is allowed)."""
    if knobs.algo != "winograd":
        raise te.TeError(f"conv2d_winograd: knobs with algo={knobs.algo!r}; this conv takes algo='winograd'")
    knobs.check(spec)
    if knobs.parallel == "rows":
        tw = row_tiles(spec)
        if tw % knobs.xt:
            raise te.TeError(f"conv2d_winograd: parallel='rows' needs xt (tiles per register tile) to divide the {tw} "
                             f"tiles of a row, got xt={knobs.xt}")
        if rows_local_bytes(spec) > ROWS_MAX_LOCAL_BYTES:
            raise te.TeError(f"conv2d_winograd: parallel='rows' keeps a tile row's transforms on the stack, "
                             f"{rows_local_bytes(spec)} bytes for {spec.c} -> {spec.o} channels and {tw} tiles a row; "
                             f"at most {ROWS_MAX_LOCAL_BYTES} (use 'fused' or 'outer')")


@dataclass(frozen=True)
class Geometry:
    """Tiles of a Winograd conv with ``tile`` tiles per GEMM register tile."""

    th: int   # tile rows (the last one half outside an odd map)
    tw: int   # tiles per row
    tp: int   # flattened tiles the GEMM runs over (a multiple of ``tile``)
    thp: int  # tile rows of the transformed input (covering ``tp``; rows past ``th`` are zero)


def geometry(spec: Conv2dSpec, tile: int) -> Geometry:
    th, tw = -(-spec.oh // 2), row_tiles(spec)
    tp = -(-spec.n * th * tw // tile) * tile
    return Geometry(th, tw, tp, -(-tp // tw))


def pack_weight(spec: Conv2dSpec, w: np.ndarray, kb: int) -> np.ndarray:
    """OIHW 3x3 weights -> ``U = G g G^T`` as ``(16, O/kb, C, kb)`` float32 (computed in float64)."""
    if spec.o % kb:
        raise te.TeError(f"conv2d_winograd: kb={kb} must divide the {spec.o} output channels")
    w = np.asarray(w, np.float64)
    u = np.einsum("ai,kcij,bj->abkc", _G, w, _G).reshape(16, spec.o // kb, kb, spec.c)
    return aligned_copy(np.ascontiguousarray(u.transpose(0, 1, 3, 2), dtype=np.float32))


@dataclass
class WinogradOp:
    """The tensors of one Winograd conv: ``inputs`` in call order (data, packed weight, [bias], [residual])."""

    spec: Conv2dSpec
    kb: int
    tile: int
    inputs: list[Tensor]
    pad: Tensor
    v: Tensor
    m: Tensor
    out: Tensor


def output_shape(spec: Conv2dSpec, kb: int) -> tuple[int, ...]:
    """``(N, O/kb, kb, OH, OW)``: NCHW memory."""
    return (spec.n, spec.o // kb, kb, spec.oh, spec.ow)


def _sign(cond: te.Expr) -> te.Expr:
    return te.select(cond, te.const(-1.0, "float32"), te.const(1.0, "float32"))


def conv2d(spec: Conv2dSpec, kb: int = KB, tile: int = 6, bias: bool = False, residual: bool = False,
           act: str | None = None, act_params: tuple = ()) -> WinogradOp:
    """The stages of the module docstring with ``kb`` output channels per vector block and ``tile`` Winograd tiles
    per register tile; ``residual``: an NCHW tensor (viewed as :func:`output_shape`) added before ``act``."""
    if not winograd_ok(spec):
        raise te.TeError(f"conv2d_winograd: {winograd_refusal(spec)}")
    if kb < 1 or spec.o % kb or tile < 1:
        raise te.TeError(f"conv2d_winograd: kb={kb} must divide the {spec.o} output channels and tile={tile} be >= 1")
    g = geometry(spec, tile)
    n, c, h, w, k = spec.n, spec.c, spec.h, spec.w, spec.o
    t, l = spec.pads[0], spec.pads[1]
    tw = g.tw
    zero = te.const(0.0, "float32")
    data = te.placeholder((n, c, h, w), "float32", "data")
    pad = te.compute((n, c, 2 * g.thp + 2, 2, tw + 1), lambda i, j, y, ph, xq: te.select(
        (y >= t) & (y < h + t) & (xq * 2 + ph >= l) & (xq * 2 + ph < w + l),
        data[i, j, y - t, xq * 2 + ph - l], zero), name="pad", dtype="float32")

    # B^T's rows: a=0: d0 - d2, a=1: d1 + d2, a=2: d2 - d1, a=3: d1 - d3: the first index min(a, 1), the second
    # max(a, 2); the first term negative for a = 2, the second for a in (0, 3)
    def v_fn(i, e, ci, ty, tx):
        a, b = e // 4, e % 4
        rows = ((te.min(a, 1), _sign(a.equal(2))), (te.max(a, 2), _sign(a.equal(0) | a.equal(3))))
        cols = ((te.min(b, 1), _sign(b.equal(2))), (te.max(b, 2), _sign(b.equal(0) | b.equal(3))))
        acc = None
        for ri, rs in rows:
            for cj, cs in cols:
                term = pad[i, ci, ty * 2 + ri, cj % 2, tx + cj // 2] * (rs * cs)
                acc = term if acc is None else acc + term
        return acc

    v = te.compute((n, 16, c, g.thp, tw), v_fn, name="wino_in", dtype="float32")
    u = te.placeholder((16, k // kb, c, kb), "float32", "weight")
    rc = te.reduce_axis(c, "rc")
    m = te.compute((n, 16, k // kb, g.tp, kb), lambda i, e, ko, q, ki: te.sum(
        v[i, e, rc, q // tw, q % tw] * u[e, ko, rc, ki], rc), name="wino_gemm", dtype="float32")
    inputs = [data, u]
    bias_t = res_t = None
    if bias:
        bias_t = te.placeholder((k,), "float32", "bias")
        inputs.append(bias_t)
    oshape = output_shape(spec, kb)
    if residual:
        res_t = te.placeholder(oshape, "float32", "residual")
        inputs.append(res_t)

    # A^T's rows: u=0: m0 + m1 + m2, u=1: m1 - m2 - m3, i.e. m_u + (1 - 2u) (m_(u+1) + m_(u+2)), in both directions
    def out_fn(i, ko, ki, y, x):
        q, uu, vv = y // 2 * tw + x // 2, y % 2, x % 2
        su = te.const(1.0, "float32") - uu.astype("float32") * 2.0
        sv = te.const(1.0, "float32") - vv.astype("float32") * 2.0

        def row(ra):
            e = (uu + ra) * 4 + vv
            return m[i, e, ko, q, ki] + sv * (m[i, e + 1, ko, q, ki] + m[i, e + 2, ko, q, ki])
        acc = row(0) + su * (row(1) + row(2))
        if bias_t is not None:
            acc = acc + bias_t[ko * kb + ki]
        if res_t is not None:
            acc = acc + res_t[i, ko, ki, y, x]
        return activation(acc, act, act_params)

    out = te.compute(oshape, out_fn, name="out", dtype="float32")
    return WinogradOp(spec, kb, tile, inputs, pad, v, m, out)


PARALLEL_MIN_MACS = CONV_PARALLEL_MIN_MACS  # the direct flat conv's: below it, one thread


def op_for(spec: Conv2dSpec, knobs: CpuConvKnobs, bias: bool = False, residual: bool = False,
           act: str | None = None, act_params: tuple = ()) -> WinogradOp:
    """:func:`conv2d` with the block and tile of Winograd ``knobs`` (checked)."""
    check_knobs(spec, knobs)
    return conv2d(spec, knobs.ob, knobs.xt, bias, residual, act, act_params)


def schedule_cpu(op: WinogradOp, s, knobs: CpuConvKnobs | None = None) -> None:
    """Stages at root: the padded copy and the input transform parallel over channels (rows of tiles vectorized,
    the 16 transform elements unrolled so they share the window loads); the GEMM parallel over (element, channel
    block, tile group) (``knobs.parallel="outer"``: over elements, ``"none"``: one thread) with a ``T x KB``
    register tile in a local buffer over the input channels (``unroll=1``: the tile's rows unrolled); the output
    transform parallel over (channel block, output row pair), ``KB`` channels a vector. Small convs
    (:data:`PARALLEL_MIN_MACS`) run on one thread. ``knobs``: default the op's block and tile, fused, unrolled.
    ``knobs.parallel="rows"``: only the padded copy at root, the rest per tile row (:func:`_schedule_rows`)."""
    spec = op.spec
    knobs = knobs or CpuConvKnobs(op.kb, op.tile, "fused", 1, "rc_ky_kx", "winograd")
    check_knobs(spec, knobs)
    if (knobs.ob, knobs.xt) != (op.kb, op.tile):
        raise te.TeError(f"conv2d_winograd: knobs ob={knobs.ob} xt={knobs.xt} do not match the op's block {op.kb} "
                         f"and tile {op.tile}: build the op with op_for(spec, knobs)")
    parallel, unroll = knobs.parallel, knobs.unroll
    par = parallel != "none" and spec.macs >= PARALLEL_MIN_MACS
    _schedule_pad(op, s, par)
    if parallel == "rows":
        _schedule_rows(op, s, par, unroll)
        return
    sv = s[op.v]
    vn, ve, vc, vy, vx = sv.leaf_iter_vars
    sv.reorder(vn, vc, vy, ve, vx)
    if par:
        sv.parallel(sv.fuse(vn, vc))
    sv.unroll(ve)
    sv.vectorize(vx)
    mc = s.cache_write(op.m, "local")
    sm = s[op.m]
    mn, me, mko, mq, mki = sm.leaf_iter_vars
    qo, qi = sm.split(mq, op.tile)
    sm.reorder(mn, me, mko, qo, qi, mki)
    if parallel == "outer":  # threads over (image, element); (channel block, tile group) inside
        ne = sm.fuse(mn, me)
        outer = sm.fuse(mko, qo)
        if par:
            sm.parallel(ne)
    else:
        outer = sm.fuse(sm.fuse(sm.fuse(mn, me), mko), qo)
        if par:
            sm.parallel(outer)
    _schedule_gemm_tile(op, s, mc, qi, mki, outer, unroll)
    so = s[op.out]
    on, oko, oki, oy, ox = so.leaf_iter_vars
    # rows and columns in pairs (a tile's; the output transform's signs then constants); a 1-wide map: as it is
    yo, yi = so.split(oy, 2) if oy.extent > 1 else (oy, None)
    xo, xi = so.split(ox, 2) if ox.extent > 1 else (ox, None)
    so.reorder(on, oko, yo, xo, *(v for v in (yi, xi) if v is not None), oki)
    if par:
        so.parallel(so.fuse(so.fuse(on, oko), yo))
    for v in (yi, xi):
        if v is not None:
            so.unroll(v)
    if op.kb > 1:
        so.vectorize(oki)


def _schedule_rows(op: WinogradOp, s, par: bool, unroll: int) -> None:
    """``parallel="rows"``: the output transform's loop over tile rows (x images) is the task; inside it the row's
    transformed input and its GEMM result are computed into local buffers (``16 C TW`` and ``16 K TW`` floats,
    cache-resident), the GEMM with the same ``T x KB`` register tiles over the input channels. The padded copy stays
    at root (:func:`_schedule_pad`)."""
    so = s[op.out]
    on, oko, oki, oy, ox = so.leaf_iter_vars
    yo, yi = so.split(oy, 2) if oy.extent > 1 else (oy, None)
    xo, xi = so.split(ox, 2) if ox.extent > 1 else (ox, None)
    so.reorder(on, yo, oko, *(v for v in (yi, xo, xi) if v is not None), oki)
    row = so.fuse(on, yo)
    if par:
        so.parallel(row)
    if xi is not None:
        so.unroll(xi)
    if op.kb > 1:
        so.vectorize(oki)
    mc = s.cache_write(op.m, "local")
    sm = s[op.m]
    sm.set_scope("local")
    sm.compute_at(so, row)
    mn, me, mko, mq, mki = sm.leaf_iter_vars
    qo, qi = sm.split(mq, op.tile)
    sm.reorder(mn, me, mko, qo, qi, mki)
    _schedule_gemm_tile(op, s, mc, qi, mki, qo, unroll)
    sv = s[op.v]
    sv.set_scope("local")
    sv.compute_at(so, row)
    vn, ve, vc, vy, vx = sv.leaf_iter_vars
    sv.reorder(vn, vc, vy, ve, vx)
    sv.unroll(ve)
    sv.vectorize(vx)


def _schedule_pad(op: WinogradOp, s, par: bool) -> None:
    """The padded copy at root: parallel over (image, channel), a row's two phases unrolled, columns vectorized."""
    sp = s[op.pad]
    pn, pc = sp.leaf_iter_vars[:2]
    if par:
        sp.parallel(sp.fuse(pn, pc))
    sp.unroll(sp.leaf_iter_vars[-2])
    sp.vectorize(sp.leaf_iter_vars[-1])


def _schedule_gemm_tile(op: WinogradOp, s, mc, qi, mki, at, unroll: int) -> None:
    """The GEMM's ``T x KB`` register tile: the local accumulator ``mc`` computed at ``at`` over the input channels
    (outermost), its ``T`` tiles (``qi``) unrolled where ``unroll``, its ``KB`` channels (``mki``) vectorized."""
    sm = s[op.m]
    if unroll:
        sm.unroll(qi)
    if op.kb > 1:
        sm.vectorize(mki)
    s[mc].compute_at(sm, at)
    cn, ce, cko, cq, cki, crc = s[mc].leaf_iter_vars
    s[mc].reorder(cn, ce, cko, crc, cq, cki)
    if unroll:
        s[mc].unroll(cq)
    if op.kb > 1:
        s[mc].vectorize(cki)
