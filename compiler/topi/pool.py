"""Pooling in TE on NCHW float32: max and average pooling (ONNX pads, strides, count_include_pad) and global average;
the CPU and GPU schedules (the GPU's knobs: :class:`PoolGpuKnobs`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler import te
from compiler.te import Tensor
from compiler.topi.row_tiles import row_tile, row_vectors, tile_rows


@dataclass(frozen=True)
class PoolSpec:
    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    oh: int = 0  # output size (ONNX rules incl. ceil_mode: jit_runtime.host_ops.pooling.pool_axes)
    ow: int = 0


def _window(spec: PoolSpec, data: Tensor, y, x, ky, kx):
    sy, sx = spec.stride
    t, l = spec.pads[0], spec.pads[1]
    iy, ix = y * sy + ky - t, x * sx + kx - l
    inside = (iy >= 0) & (iy < spec.h) & (ix >= 0) & (ix < spec.w)
    return iy, ix, inside


def max_pool(spec: PoolSpec, dtype: str = "float32") -> tuple[list[Tensor], Tensor]:
    """Max over each window (float32 or an integer dtype); padding never wins (-inf / the dtype's minimum)."""
    data = te.placeholder((spec.n, spec.c, spec.h, spec.w), dtype, "data")
    ky, kx = te.reduce_axis(spec.kh, "ky"), te.reduce_axis(spec.kw, "kx")
    low = te.const(float("-inf"), "float32") if dtype == "float32" else te.const(int(np.iinfo(dtype).min), dtype)

    def f(n, c, y, x):
        iy, ix, inside = _window(spec, data, y, x, ky, kx)
        return te.max_(te.select(inside, data[n, c, iy, ix], low), axis=[ky, kx])

    return [data], te.compute((spec.n, spec.c, spec.oh, spec.ow), f, name="max_pool", dtype=dtype)


def avg_pool(spec: PoolSpec, count_include_pad: bool) -> tuple[list[Tensor], Tensor]:
    """Window sums divided by the window size (``count_include_pad``) or by the valid pixel count."""
    data = te.placeholder((spec.n, spec.c, spec.h, spec.w), "float32", "data")
    ky, kx = te.reduce_axis(spec.kh, "ky"), te.reduce_axis(spec.kw, "kx")
    zero = te.const(0.0, "float32")

    def fsum(n, c, y, x):
        iy, ix, inside = _window(spec, data, y, x, ky, kx)
        return te.sum(te.select(inside, data[n, c, iy, ix], zero), [ky, kx])

    s = te.compute((spec.n, spec.c, spec.oh, spec.ow), fsum, name="pool_sum", dtype="float32")
    sy, sx = spec.stride
    t, l, b, r = spec.pads

    def count(y, x):
        if count_include_pad:  # the window clipped to the padded image
            y0, x0 = y * sy - t, x * sx - l
            hy = te.min_(y0 + spec.kh, spec.h + b) - y0
            hx = te.min_(x0 + spec.kw, spec.w + r) - x0
        else:
            y0, x0 = y * sy - t, x * sx - l
            hy = te.min_(y0 + spec.kh, spec.h) - te.max_(y0, 0)
            hx = te.min_(x0 + spec.kw, spec.w) - te.max_(x0, 0)
        return te.cast("float32", hy * hx)

    out = te.compute(s.shape, lambda n, c, y, x: s[n, c, y, x] / count(y, x), name="avg_pool", dtype="float32")
    return [data], out


def global_avg_pool(n: int, c: int, h: int, w: int) -> tuple[list[Tensor], Tensor]:
    """(N, C, H, W) -> (N, C, 1, 1) mean."""
    data = te.placeholder((n, c, h, w), "float32", "data")
    ry, rx = te.reduce_axis(h, "ry"), te.reduce_axis(w, "rx")
    s = te.compute((n, c, 1, 1), lambda i, j, a, b: te.sum(data[i, j, ry, rx], [ry, rx]), name="gap_sum", dtype="float32")
    out = te.compute((n, c, 1, 1), lambda i, j, a, b: s[i, j, a, b] * te.const(1.0 / (h * w), "float32"),
                     name="gap", dtype="float32")
    return [data], out


GAP_ACCUMULATORS = 8  # numpy's pairwise_sum keeps 8 running sums over a block (its PW_BLOCKSIZE = 128 elements)
GAP_EXACT_MAX = 128  # up to this many pixels a channel's sum takes numpy's association order exactly


def global_avg_pool_cpu(n: int, c: int, pixels: int) -> tuple[list[Tensor], Tensor, Tensor | None]:
    """(N, C, P) -> (N, C) mean for the CPU, summed as numpy sums a contiguous run of up to 128 elements: 8
    accumulators ``part[n, c, k] = x[k] + x[8 + k] + ...`` over the whole 8-element groups (one vector of
    contiguous loads an iteration, :func:`schedule_gap_cpu`), then ``((p0 + p1) + (p2 + p3)) + ((p4 + p5) +
    (p6 + p7))``, then the ragged elements in order, divided by P (as ``np.mean``): bit-exact with numpy for
    P <= :data:`GAP_EXACT_MAX` (MobileNetV2's 7x7, ResNet-18's 7x7); beyond, numpy splits the run in halves
    first and the sums differ by rounding. Fewer than 8 pixels: summed in order. Returns ``(inputs, out,
    part)`` (``part`` None below 8 pixels)."""
    data = te.placeholder((n, c, pixels), "float32", "data")
    acc = GAP_ACCUMULATORS
    full = pixels - pixels % acc
    zero = te.const(0.0, "float32")
    part = None
    if full:
        r = te.reduce_axis(full // acc, "r")
        part = te.compute((n, c, acc), lambda i, j, k: te.sum(data[i, j, r * acc + k], [r]), name="gap_part",
                          dtype="float32")

    def mean(i, j):
        if part is None:
            total = zero
            for q in range(pixels):
                total = total + data[i, j, q]
        else:
            p = [part[i, j, k] for k in range(acc)]
            total = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
            for q in range(full, pixels):
                total = total + data[i, j, q]
        return total / te.const(float(pixels), "float32")

    out = te.compute((n, c), mean, name="gap", dtype="float32")
    return [data], out, part


def schedule_gap_cpu(s, out: Tensor, part: Tensor | None) -> None:
    """:func:`global_avg_pool_cpu`: per channel its 8 accumulators as one vector (``compute_at`` the channel,
    in registers), parallel over the channels when the input is large."""
    from compiler.topi.injective import PARALLEL_MIN

    so = s[out]
    i, j = so.leaf_iter_vars
    fused = so.fuse(i, j)
    if part is not None:
        work = int(np.prod(part.shape)) * part.op.reduce_axes[0].extent
        if work >= PARALLEL_MIN:
            so.parallel(fused)
        sp = s[part]
        sp.set_scope("local")
        sp.compute_at(so, fused)
        pi, pj, pk, pr = sp.leaf_iter_vars
        sp.reorder(pi, pj, pr, pk)  # the 8 accumulators innermost: one vector add of 8 contiguous elements
        sp.vectorize(pk)


def schedule_cpu(s, outs: list[Tensor]) -> None:
    """Pools: reduction stages parallel over channels when the input is large, the final stage flat (injective)."""
    from compiler.topi.injective import PARALLEL_MIN, schedule_injective_cpu

    for t in outs:
        st = s[t]
        if not st.op.reduce_axes:
            schedule_injective_cpu(s, t)
            continue
        work = int(np.prod(t.shape)) * int(np.prod([a.extent for a in st.op.reduce_axes]))
        if work >= PARALLEL_MIN:
            st.parallel(st.leaf_iter_vars[1])


POOL_GPU_THREADS = 64  # threads a block of the untuned schedule
POOL_AXES = ("flat", "plane")
MAX_THREADS = 1024
FLOAT_POOLS = ("MaxPool", "AveragePool", "GlobalAveragePool")


@dataclass(frozen=True)
class PoolGpuKnobs:
    """Knobs of :func:`schedule_gpu` (pools on cuda): ``threads`` a block, ``vt`` outputs a thread (``threads``
    apart: a warp's loads and stores stay coalesced), ``axes`` what blocks run over (``"flat"``: all outputs in
    one range; ``"plane"``: blockIdx.y over the (image, channel) planes, blockIdx.x x threads over a plane's
    pixels), ``fused`` (two-stage pools: average, global average) the window sum kept in a register of the
    output's thread (one kernel, no sums in memory; a one-stage pool has nothing to fuse), ``unroll`` the window's
    taps. The defaults (64 threads, one output each, flat, two kernels, loops) are the untuned schedule."""

    threads: int = POOL_GPU_THREADS
    vt: int = 1
    axes: str = "flat"
    fused: bool = False
    unroll: bool = False

    def check(self) -> None:
        """Raise :class:`te.TeError` (a ValueError) naming a knob with a value it cannot take."""
        for name in ("threads", "vt"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise te.TeError(f"pool: knob {name} must be a positive int, got {v!r}")
        if self.threads > MAX_THREADS:
            raise te.TeError(f"pool: knob threads={self.threads}; at most {MAX_THREADS}")
        if self.axes not in POOL_AXES:
            raise te.TeError(f"pool: knob axes={self.axes!r}; allowed: {', '.join(POOL_AXES)}")
        for name in ("fused", "unroll"):
            if not isinstance(getattr(self, name), bool):
                raise te.TeError(f"pool: knob {name} must be a bool, got {getattr(self, name)!r}")


def float_pool(kind: str, spec: PoolSpec, count_include_pad: bool = False,
               dtype: str = "float32") -> tuple[list[Tensor], Tensor, list[Tensor]]:
    """``(inputs, out, stages)`` of a ``MaxPool`` (any ``dtype`` :func:`max_pool` takes), ``AveragePool`` or
    ``GlobalAveragePool`` (``spec``: the whole plane one window, 1 x 1 out) for the GPU schedule (``stages``: what
    :func:`schedule_gpu` schedules, the window reduction first)."""
    if kind == "MaxPool":
        ins, y = max_pool(spec, dtype)
        return ins, y, [y]
    if dtype != "float32":
        raise te.TeError(f"pool: {kind} takes float32, got {dtype}")
    if kind == "AveragePool":
        ins, y = avg_pool(spec, count_include_pad)
    elif kind == "GlobalAveragePool":
        ins, y = global_avg_pool(spec.n, spec.c, spec.h, spec.w)
    else:
        raise te.TeError(f"pool: unknown pool {kind!r}; allowed: {', '.join(FLOAT_POOLS)}")
    return ins, y, [y.op.inputs[0], y]


def schedule_gpu(s, outs: list[Tensor], knobs: PoolGpuKnobs | None = None) -> None:
    """Each stage of ``outs`` (data axes, then its reductions) a kernel of one output a thread, 64 threads a block;
    ``knobs``: :class:`PoolGpuKnobs` (``fused``: a reduction stage followed by its one consumer in ``outs`` is
    computed in that consumer's threads)."""
    k = knobs or PoolGpuKnobs()
    k.check()
    inline: list[Tensor] = []  # reduction stages computed in their consumer's threads
    if k.fused:
        for a, b in zip(outs, outs[1:]):
            if s[a].op.reduce_axes and any(x is a for x in b.op.inputs):
                inline.append(a)
    for t in outs:
        if any(t is a for a in inline):
            continue
        st = s[t]
        data = [a for a in st.leaf_iter_vars if a.kind == "data"]
        red = [a for a in st.leaf_iter_vars if a.kind == "reduce"]
        st.reorder(*data, *red)
        if k.axes == "plane" and len(data) > 2:
            st.bind(st.fuse(data[0], data[1]), "blockIdx.y")
            data = data[2:]
        flat = data[0]
        for a in data[1:]:
            flat = st.fuse(flat, a)
        if k.vt > 1 and flat.extent > 1:
            rest, v = st.split(flat, min(k.vt, flat.extent))
            bx, tx = st.split(rest, min(k.threads, rest.extent))
            st.reorder(bx, v, tx)  # a thread's outputs ``threads`` apart
        else:
            bx, tx = st.split(flat, min(k.threads, flat.extent))
        st.bind(bx, "blockIdx.x")
        st.bind(tx, "threadIdx.x")
        if k.unroll:
            for r in red:
                st.unroll(r)
        for src in [a for a in inline if any(x is a for x in t.op.inputs)]:
            ss = s[src]
            ss.set_scope("local")
            ss.compute_at(st, tx)
            if k.unroll:
                for r in [a for a in ss.leaf_iter_vars if a.kind == "reduce"]:
                    ss.unroll(r)


def max_pool_rows(spec: PoolSpec, xt: int, yt: int) -> tuple[list[Tensor], Tensor, Tensor, Tensor]:
    """float32 max pooling for the CPU's row schedule (:func:`schedule_rows_cpu`): ``(inputs, out, pad, window)``.
    ``pad`` is a channel's padded plane with its columns de-interleaved by stride phase, ``(N, C, Hp, SX, Wq)``
    (-inf outside the image, rows and columns past the last ``yt`` x ``xt`` output tile included), ``window`` the max
    over each window read from it (a tap's pixels along a row are contiguous), ``out`` its NCHW copy."""
    n, c, h, w = spec.n, spec.c, spec.h, spec.w
    sy, sx = spec.stride
    t, l = spec.pads[0], spec.pads[1]
    hp = max(t + h, (-(-spec.oh // yt) * yt - 1) * sy + spec.kh)
    wq = max(-(-(l + w) // sx), -(-spec.ow // xt) * xt + (spec.kw - 1) // sx)
    data = te.placeholder((n, c, h, w), "float32", "data")
    low = te.const(float("-inf"), "float32")
    pad = te.compute((n, c, hp, sx, wq), lambda i, j, y, ph, xq: te.select(
        (y >= t) & (y < h + t) & (xq * sx + ph >= l) & (xq * sx + ph < w + l),
        data[i, j, y - t, xq * sx + ph - l], low), name="pool_pad", dtype="float32")
    ky, kx = te.reduce_axis(spec.kh, "ky"), te.reduce_axis(spec.kw, "kx")
    window = te.compute((n, c, spec.oh, spec.ow), lambda i, j, y, x: te.max_(
        pad[i, j, y * sy + ky, kx % sx, x + kx // sx], axis=[ky, kx]), name="pool_window", dtype="float32")
    out = te.compute(window.shape, lambda *i: window[i], name="max_pool", dtype="float32")
    return [data], out, pad, window


POOL_PARALLEL_CHOICES = ("nc", "none")


@dataclass(frozen=True)
class CpuPoolKnobs:
    """The CPU max-pool row schedule's knobs (:func:`schedule_rows_cpu`): a register tile of ``xt`` output pixels
    (in the vector lanes) by ``yt`` rows, and ``parallel``: ``"nc"`` (the (image, channel) loop on all threads) or
    ``"none"``."""

    xt: int
    yt: int
    parallel: str = "nc"

    def check(self, spec: PoolSpec) -> None:
        """A :class:`te.TeError` naming the knob that does not fit ``spec``'s output."""
        for name, v, top in (("xt", self.xt, spec.ow), ("yt", self.yt, spec.oh)):
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
                raise te.TeError(f"CpuPoolKnobs: {name}={v!r} must be an int in 1..{top} (the output's "
                                 f"{'width' if name == 'xt' else 'height'})")
        if self.parallel not in POOL_PARALLEL_CHOICES:
            raise te.TeError(f"CpuPoolKnobs: parallel={self.parallel!r}; allowed: {POOL_PARALLEL_CHOICES}")


def default_pool_knobs(spec: PoolSpec, lanes: int) -> CpuPoolKnobs | None:
    """The library's knobs (:func:`row_tiles`; parallel from a quarter of
    :data:`~compiler.topi.injective.PARALLEL_MIN` window reads over two or more planes), or None where no row tile
    fits (the library's other max pool then)."""
    from compiler.topi.injective import PARALLEL_MIN

    xt, yt = row_tiles(spec, lanes)
    if not xt:
        return None
    work = spec.n * spec.c * spec.oh * spec.ow * spec.kh * spec.kw
    return CpuPoolKnobs(xt, yt, "nc" if work >= PARALLEL_MIN // 4 and spec.n * spec.c > 1 else "none")


def row_tiles(spec: PoolSpec, lanes: int) -> tuple[int, int]:
    """``(xt, yt)`` output pixels x rows per register tile of :func:`max_pool_rows`: the row tile of
    :func:`~compiler.topi.row_tiles.row_tile` (ResNet-18's 56-pixel rows on AVX-512: the whole row), rows of
    :func:`~compiler.topi.row_tiles.tile_rows` within 8 accumulator registers; ``(0, 0)`` where no row tile fits.
    ``lanes``: the target's float32 lanes (the backend supplies them)."""
    xt = row_tile(spec.ow, lanes)
    if not xt:
        return 0, 0
    return xt, tile_rows(spec.oh, row_vectors(xt, lanes), 8)


def schedule_rows_cpu(s, out: Tensor, pad: Tensor, window: Tensor, knobs: CpuPoolKnobs) -> None:
    """Parallel over (image, channel) with ``knobs.parallel="nc"``; per channel its padded plane in a local buffer
    (vector row loads), then per ``yt`` x ``xt`` output tile (``knobs``; :func:`max_pool_rows` built for them) the
    window max in registers (pixels in the vector lanes)."""
    so = s[out]
    n, c, y, x = so.leaf_iter_vars
    yo, yi = so.split(y, knobs.yt)
    xo, xi = so.split(x, knobs.xt)
    so.reorder(n, c, yo, xo, yi, xi)
    nc = so.fuse(n, c)
    if knobs.parallel == "nc" and nc.extent > 1:
        so.parallel(nc)
    so.vectorize(xi)
    sp = s[pad]
    sp.set_scope("local")
    sp.compute_at(so, nc)
    sp.unroll(sp.leaf_iter_vars[-2])  # the stride phases: each piece's column mask a constant
    sp.vectorize(sp.leaf_iter_vars[-1])
    sw = s[window]
    sw.set_scope("local")
    sw.compute_at(so, xo)
    wn, wc, wy, wx, ky, kx = sw.leaf_iter_vars
    sw.reorder(wn, wc, ky, kx, wy, wx)
    sw.unroll(kx)
    sw.unroll(wy)
    sw.vectorize(wx)
