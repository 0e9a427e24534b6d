"""conv2d for the GPU: an implicit GEMM with shared-memory tiles, register blocking and split-K.

The convolution is the product of the packed weight ``W[K, O]`` (``K = C * KH * KW`` in (channel, ky, kx) order,
zero rows up to a multiple of the split) and the input's im2col matrix ``col[N, K, P]`` (``P = OH * OW`` output
pixels), which is never stored: ``col`` is inlined into the shared-memory copy that each thread block fills for
its reduction chunk. A block computes a ``bo x bp`` (channels x pixels) tile of the output with
``(bo / vo) x (bp / vp)`` threads, each accumulating ``vo x vp`` outputs in registers over ``rk``-deep chunks of
``K`` staged in shared memory (weights ``rk x bo``, input ``rk x bp``, filled cooperatively, coalesced along
pixels and channels). With ``split > 1`` the reduction is cut into ``split`` parts computed by separate blocks
into a partial-sum tensor, and a second kernel adds the parts and applies the output stage: small maps with many
channels (ResNet's 7x7 and 14x14 stages) then still give every streaming multiprocessor blocks to run.

float32, or int8 x int8 with int32 accumulation and an integer output stage (the requant epilogue), NCHW in and
out, any stride, padding and dilation, one group (depthwise and grouped convs use
:func:`compiler.topi.conv2d_direct.schedule_gpu`). :class:`GpuConvKnobs` are the schedule's tuning knobs;
:func:`default_knobs` picks them from the layer's shape.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler import te
from compiler.te import Tensor
from compiler.topi.conv2d_direct import Conv2dSpec
from compiler.topi.elementwise import activation
from compiler.topi.injective import schedule_injective_gpu

MAX_THREADS = 1024
SHARED_BYTES = 48 << 10  # static shared memory a block may use on every CUDA GPU
TARGET_BLOCKS = 256  # default knobs split the reduction until about this many blocks run (2 per SM of an H100/H200)


@dataclass(frozen=True)
class GpuConvKnobs:
    """``bo`` x ``bp`` (output channels x pixels) per thread block, ``vo`` x ``vp`` per thread, ``rk`` reduction
    steps per shared-memory chunk, ``split`` parts of the reduction (split-K)."""

    bo: int = 64
    bp: int = 64
    vo: int = 4
    vp: int = 4
    rk: int = 8
    split: int = 1

    @property
    def threads(self) -> int:
        return (self.bo // self.vo) * (self.bp // self.vp)

    def check(self, spec: Conv2dSpec) -> None:
        """Raise :class:`te.TeError` naming the knob that does not fit ``spec``."""
        if not gpu_conv_ok(spec):
            raise te.TeError(f"conv2d_gpu: one group and float32 or int8 needed, got groups={spec.groups} "
                             f"{spec.dtype}")
        self.check_product(reduction(spec))

    def check_product(self, k: int) -> None:
        """Raise :class:`te.TeError` naming the knob that does not fit a tiled product over a reduction of ``k``."""
        for name in ("bo", "bp", "vo", "vp", "rk", "split"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise te.TeError(f"conv2d_gpu: knob {name} must be a positive int, got {v!r}")
        if self.bo % self.vo or self.bp % self.vp:
            raise te.TeError(f"conv2d_gpu: vo={self.vo} must divide bo={self.bo} and vp={self.vp} divide "
                             f"bp={self.bp}")
        if not 1 <= self.threads <= MAX_THREADS:
            raise te.TeError(f"conv2d_gpu: (bo/vo) x (bp/vp) = {self.threads} threads a block; 1..{MAX_THREADS} "
                             f"allowed")
        if self.split > k:
            raise te.TeError(f"conv2d_gpu: split={self.split} exceeds the reduction's {k} steps")
        if self.rk > -(-k // self.split):
            raise te.TeError(f"conv2d_gpu: rk={self.rk} exceeds the {-(-k // self.split)} reduction steps of a part")
        shared = 4 * self.rk * (self.bo + self.bp)
        if shared > SHARED_BYTES:
            raise te.TeError(f"conv2d_gpu: rk x (bo + bp) = {shared} bytes of shared memory; at most {SHARED_BYTES}")


def gpu_conv_ok(spec: Conv2dSpec) -> bool:
    """Whether this kernel computes ``spec`` (one group; float32 or int8)."""
    return spec.groups == 1 and spec.dtype in ("float32", "int8")


def reduction(spec: Conv2dSpec) -> int:
    """K: the reduction's length (input channels x kernel taps)."""
    return spec.c * spec.kh * spec.kw


def _pow2_at_most(v: int, cap: int) -> int:
    p = 1
    while p * 2 <= min(v, cap):
        p *= 2
    return p


def default_knobs(spec: Conv2dSpec) -> GpuConvKnobs:
    """Tiles from the layer's shape (:func:`default_tiles` of its output channels, pixels, reduction and batch)."""
    return default_tiles(spec.o, spec.oh * spec.ow, reduction(spec), spec.n)


def default_tiles(rows: int, cols: int, k: int, batch: int = 1) -> GpuConvKnobs:
    """Knobs of a tiled product of ``rows x cols`` outputs over a reduction of ``k``, ``batch`` times: 64 x 64
    blocks of 4 x 4 threads (smaller where the output is), ``rk`` 8 (or the reduction), and the reduction split until
    about :data:`TARGET_BLOCKS` blocks run (parts of at least 64 steps)."""
    bo = max(4, _pow2_at_most(rows, 64))
    bp = max(4, _pow2_at_most(cols, 64))
    vo, vp = min(4, bo), min(4, bp)
    blocks = -(-rows // bo) * -(-cols // bp) * batch
    split = 1
    while blocks * split * 2 <= TARGET_BLOCKS and k // (split * 2) >= 64:
        split *= 2
    rk = min(8, -(-k // split))
    return GpuConvKnobs(bo, bp, vo, vp, rk, split)


def pack_weight(spec: Conv2dSpec, w: np.ndarray, knobs: GpuConvKnobs) -> np.ndarray:
    """OIHW -> ``(split * ceil(K / split), O)``: row ``(c * KH + ky) * KW + kx``, zero rows at the end."""
    k = reduction(spec)
    ks = -(-k // knobs.split)
    dt = np.float32 if spec.dtype == "float32" else np.int8
    out = np.zeros((knobs.split * ks, spec.o), dt)
    out[:k] = np.asarray(w, dt).reshape(spec.o, k).T
    return out


@dataclass
class GpuConvOp:
    """The tensors of one GPU conv2d: ``inputs`` in call order (data, packed weight, [bias], [residual] or the
    output stage's), the inlined ``col``, the partial sums ``part`` (None without split-K), ``conv`` and ``out``
    (``(N, O, OH * OW)``: NCHW memory)."""

    spec: Conv2dSpec
    knobs: GpuConvKnobs
    inputs: list[Tensor]
    col: Tensor
    part: Tensor | None
    conv: Tensor
    out: Tensor


def output_shape(spec: Conv2dSpec) -> tuple[int, int, int]:
    return spec.n, spec.o, spec.oh * spec.ow


def conv2d(spec: Conv2dSpec, knobs: GpuConvKnobs, bias: bool = False, residual: bool = False,
           act: str | None = None, act_params: tuple = (),
           stage: "tuple[list[Tensor], object, str] | None" = None) -> GpuConvOp:
    """The compute; ``stage``: ``(extra placeholders, fn(acc, channel), out dtype)`` instead of
    bias/residual/activation (int8's requant epilogue)."""
    spec.check()
    knobs.check(spec)
    f32 = spec.dtype == "float32"
    acc_t = "float32" if f32 else "int32"
    zero = te.const(0.0, "float32") if f32 else te.const(int(spec.pad_value), "int8")
    n, c, h, w, o = spec.n, spec.c, spec.h, spec.w, spec.o
    kh, kw, ow, p = spec.kh, spec.kw, spec.ow, spec.oh * spec.ow
    (t, l, _, _), (sy, sx), (dy, dx) = spec.pads, spec.stride, spec.dilations
    k = reduction(spec)
    split = knobs.split
    ks = -(-k // split)
    data = te.placeholder((n, c, h, w), spec.dtype, "data")
    weight = te.placeholder((split * ks, o), spec.dtype, "weight")

    def col_value(i, r, q):
        y = (q // ow) * sy + ((r // kw) % kh) * dy - t
        x = (q % ow) * sx + (r % kw) * dx - l
        inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
        if split * ks > k:
            inside = inside & (r < k)
        return te.select(inside, data[i, r // (kh * kw), y, x], zero)

    col = te.compute((n, split * ks, p), col_value, name="col", dtype=spec.dtype)

    def mul(a, b):
        return a * b if f32 else a.astype("int32") * b.astype("int32")

    rr = te.reduce_axis(ks, "rr")
    part = None
    if split == 1:
        conv = te.compute((n, o, p), lambda i, oc, q: te.sum(mul(col[i, rr, q], weight[rr, oc]), [rr]),
                          name="conv", dtype=acc_t)
    else:
        part = te.compute((split, n, o, p), lambda s_, i, oc, q: te.sum(
            mul(col[i, s_ * ks + rr, q], weight[s_ * ks + rr, oc]), [rr]), name="part", dtype=acc_t)
        rs = te.reduce_axis(split, "rs")
        conv = te.compute((n, o, p), lambda i, oc, q: te.sum(part[rs, i, oc, q], [rs]), name="conv", dtype=acc_t)
    inputs = [data, weight]
    shape = (n, o, p)
    if stage is not None:
        extra, fn, out_dtype = stage
        out = te.compute(shape, lambda i, oc, q: fn(conv[i, oc, q], oc), name="out", dtype=out_dtype)
        return GpuConvOp(spec, knobs, inputs + list(extra), col, part, conv, out)
    if not f32:
        raise te.TeError("conv2d_gpu: int8 convolutions need an output stage (the requant epilogue)")
    bias_t = res_t = None
    if bias:
        bias_t = te.placeholder((o,), "float32", "bias")
        inputs.append(bias_t)
    if residual:
        res_t = te.placeholder(shape, "float32", "residual")
        inputs.append(res_t)

    def epilogue(i, oc, q):
        v = conv[i, oc, q]
        if bias_t is not None:
            v = v + bias_t[oc]
        if res_t is not None:
            v = v + res_t[i, oc, q]
        return activation(v, act, act_params)

    out = te.compute(shape, epilogue, name="out", dtype="float32")
    return GpuConvOp(spec, knobs, inputs, col, part, conv, out)


def _fill_cooperatively(s, cache: Tensor, ty: int, tx: int) -> None:
    """A shared-memory tile filled by the block's ``ty x tx`` threads, consecutive threads on consecutive
    elements (the tile's innermost axis)."""
    st = s[cache]
    axes = list(st.leaf_iter_vars)
    flat = axes[0]
    for a in axes[1:]:
        flat = st.fuse(flat, a)
    threads = ty * tx
    if flat.extent >= threads:
        _, inner = st.split(flat, threads)
        y, x = st.split(inner, tx)
        st.bind(y, "threadIdx.y")
        st.bind(x, "threadIdx.x")
    elif flat.extent >= tx:
        _, x = st.split(flat, tx)
        st.bind(x, "threadIdx.x")
    else:
        st.bind(flat, "threadIdx.x")


def schedule_gpu(op: GpuConvOp, s) -> None:
    """Blocks over (split part, batch) x channel tiles x pixel tiles; each thread's ``vo x vp`` accumulators in
    registers over shared-memory chunks of the reduction; with split-K a second kernel sums the parts into the
    output stage (one thread per output)."""
    s[op.col].compute_inline()
    schedule_tiled(s, op.knobs, part=op.part, conv=op.conv, out=op.out, sources=[op.col, op.inputs[1]])


def schedule_tiled(s, k: GpuConvKnobs, *, part: Tensor | None, conv: Tensor, out: Tensor,
                   sources: list[Tensor]) -> None:
    """The tiled product's schedule: ``out`` (or, with split-K, ``part``) has axes ``(*lead, rows, cols)``, tiled
    ``bo x bp`` per block (lead axes fused on blockIdx.z) and ``vo x vp`` per thread; the accumulator (``conv``, or
    ``part``'s local cache) runs in registers over ``rk``-deep chunks of the reduction, each chunk of ``sources``
    (the two operands) staged in shared memory first; with split-K, ``out`` sums ``part`` (``conv``, one thread
    per output)."""
    main = part if part is not None else out
    if part is not None:
        acc = s.cache_write(part, "local")
    else:
        acc = conv
        s[conv].set_scope("local")
    caches = [s.cache_read(t, "shared", [acc]) for t in sources]
    m = s[main]
    *lead, oc, q = m.leaf_iter_vars
    oo, oi = m.split(oc, min(k.bo, oc.extent))
    po, pi = m.split(q, min(k.bp, q.extent))
    oit, oiv = m.split(oi, min(k.vo, oi.extent))
    pit, piv = m.split(pi, min(k.vp, pi.extent))
    m.reorder(*lead, oo, po, oit, pit, oiv, piv)
    if lead:
        z = lead[0]
        for a in lead[1:]:
            z = m.fuse(z, a)
        m.bind(z, "blockIdx.z")
    m.bind(oo, "blockIdx.y")
    m.bind(po, "blockIdx.x")
    m.bind(oit, "threadIdx.y")
    m.bind(pit, "threadIdx.x")
    a = s[acc]
    a.compute_at(m, pit)
    *data, rr = a.leaf_iter_vars
    ko, ki = a.split(rr, min(k.rk, rr.extent))
    a.reorder(ko, ki, *data)
    a.unroll(ki)
    for d in data[-2:]:
        a.unroll(d)
    for c in caches:
        s[c].compute_at(a, ko)
        _fill_cooperatively(s, c, oit.extent, pit.extent)
    if part is not None:
        schedule_injective_gpu(s, out)
        s[conv].set_scope("local")
        s[conv].compute_at(s[out], s[out].leaf_iter_vars[-1])
