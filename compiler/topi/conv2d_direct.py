"""Direct conv2d (NCHW in and out, any stride/padding/dilation/groups) with a fused output stage.

float32 (float accumulation) or int8 x int8 with int32 accumulation (wrapping, like the accelerator).
The compute: the padded input ``pad`` (NCHW; depthwise blocked ``(N, C/OB, H, W, OB)``; int8 borders
hold ``pad_value``, the zero point), weights pre-packed to ``(O/OB, Cg, KH, KW, OB)`` so OB output
channels are contiguous, the accumulator ``conv`` in the blocked layout ``(N, O/OB, OH, OW, OB)``, and the
output stage ``out[n, o/OB, o%OB, y, x] = act(conv[n, o/OB, y, x, o%OB] + bias[o] + residual[n, o, y, x])``
(float) or the integer requant epilogue (int8, :mod:`compiler.topi.requant_int`). The output's 5-D
shape ``(N, O/OB, OB, OH, OW)`` is NCHW memory, and index arithmetic stays free of divisions. Bias, the
residual Add and the activation cost no extra pass over memory.

The CPU schedule is a register-tiled direct convolution: per (channel block, row, XT output pixels) a
local tile of XT x OB accumulators (``compute_at`` the output stage's pixel tile) runs over the whole
reduction with OB vectorized (8 float32 lanes per vector, FMA) and XT unrolled: OB = 16 and XT = 6 (12
accumulator vectors; float32 with unit stride: tiles run over the flattened output pixels ``y * OW + x``
(``Conv2dSpec.flat``; accumulator and output tensors then have one pixel axis) and only the last one is ragged:
the padded input gets zero rows (grouped: zero columns, tiles per row) so its reads stay in bounds and the
tile runs unguarded; only the stores are guarded),
or XT = 4 (8 accumulators, other strides / int8), else OB = 8, XT = 4..8 (depthwise too: the 8 channels of a
tap are one vector load from the blocked input). The output stage is parallel over
channel blocks (2 cores).

On the llvm target without knobs, :func:`cpu_spec` switches 1x1 unit-stride convs, depthwise convs and
small-input stems to ``pixel_vectors`` layouts (pixels in the vector lanes, weights broadcast, the output
stored NCHW as whole vectors with no transpose): :func:`pointwise_tiles`, :func:`depthwise_row_tile` /
:func:`depthwise_rows` and :func:`direct_row_tiles` size their register tiles from the target's float32 lanes,
which the caller passes in (the backend asks the target CPU; this module never does), and :func:`cpu_spec` fixes
the tiles in the spec.

The GPU schedule binds (batch, channel block) and (row, pixel block) to blocks and (pixel, channel) to threads;
:class:`DirectGpuKnobs` (a tuning log's choice) set its block size, register tile and the taps' unrolling.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from compiler import te
from jit_runtime.host_arrays import aligned_copy
from compiler.te import Tensor
from compiler.topi.elementwise import activation
from typing import Callable
from compiler.topi.injective import GPU_THREADS, PARALLEL_MIN_MACS, schedule_injective_gpu
from compiler.tir.arith import pow2_pieces
from compiler.topi.row_tiles import row_tile, row_vectors, tile_rows

OC_BLOCK = 8
RAGGED_TILE = 6
# elements of the padded input copy from which it runs parallel (the native pool hands off in ~6 us): lowered from
# 1M with the flat convs' MAC threshold below in 64e8c88 (float32 ResNet-18 and MobileNetV2 ran faster with both).
# Lower than the int8 pipeline's copies (injective.COPY_PARALLEL_ELEMENTS) on purpose: the packed int8 conv shared
# this value until 3ca0382 gave it its own, higher one with its other thresholds, to cut the parallel launches of an
# int8 run (MobileNetV2 80 -> 44), whose layers take a fraction of the float32 ones' time; the float32 value was not
# measured again then. It also serves this module's unpacked int8 convs.
PAD_PARALLEL_MIN = 1 << 16
CONV_PARALLEL_MIN_MACS = 2 << 20  # flat convs: many even chunks, so smaller layers gain too


@dataclass(frozen=True)
class Conv2dSpec:
    """Geometry of one float conv2d (NCHW x OIHW)."""

    n: int
    c: int
    h: int
    w: int
    o: int
    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    dilations: tuple[int, int] = (1, 1)
    groups: int = 1
    dtype: str = "float32"  # or "int8" (int32 accumulation)
    pad_value: int = 0      # int8: what the border holds
    oc_block: int = 0       # output channels per vector block (0: chosen, see ``block``)
    pixel_tile: int = 0     # output pixels per register tile (0: chosen, see ``tile``; a tuning knob)
    pixel_vectors: bool = False  # float32 1x1 or depthwise: pixels in the vector lanes (see :func:`cpu_spec`)
    row_tile: int = 0       # pixel_vectors depthwise: output rows per register tile (see :func:`depthwise_rows`)
    in_block: int = 0       # flat float32: input channels per block of the padded input copy (see :func:`in_block`)

    @property
    def oh(self) -> int:
        return (self.h + self.pads[0] + self.pads[2] - (self.kh - 1) * self.dilations[0] - 1) // self.stride[0] + 1

    @property
    def ow(self) -> int:
        return (self.w + self.pads[1] + self.pads[3] - (self.kw - 1) * self.dilations[1] - 1) // self.stride[1] + 1

    @property
    def cg(self) -> int:
        return self.c // self.groups

    @property
    def og(self) -> int:
        return self.o // self.groups

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.cg == 1 and self.og == 1

    @property
    def block(self) -> int:
        """Output channels per vector block: 8 when each group's outputs split into 8s (always for depthwise);
        ``pixel_vectors``: the output channels per register tile (each a broadcast weight)."""
        if self.pixel_vectors:
            return 1 if self.depthwise else self.oc_block
        if self.oc_block:
            return self.oc_block
        if self.depthwise:  # channel vectors (measured 1.4-2.6x faster than vectors along the output row)
            return OC_BLOCK if self.o % OC_BLOCK == 0 else 1
        if self.og % (2 * OC_BLOCK) == 0 and self.dtype == "float32" and self.groups == 1:
            return 2 * OC_BLOCK  # flat 6 x 16 tiles (any input depth: ResNet-18's 3-channel 7x7 stem 3.4 -> 2.7 ms)
        if self.og % (2 * OC_BLOCK) == 0 and self.cg >= 2 * OC_BLOCK and (self.ow % 4 == 0 or self.ragged_ok):
            return 2 * OC_BLOCK  # two vectors x 4 pixels: 8 accumulators, 2 weight loads per 4 broadcasts
        return OC_BLOCK if self.og % OC_BLOCK == 0 else 1

    @property
    def ragged_ok(self) -> bool:
        """float32 (not depthwise), unit stride or one group: ragged 6 x 16 tiles (zero-padded input) beat 4 x 16
        and 7 x 8. (Tiles along rows with stride 2 read strided pixels that LLVM gathers: 2-3x slower; ``flat``
        de-interleaves the padded input's columns instead.)"""
        return self.dtype == "float32" and not self.depthwise and (self.stride == (1, 1) or self.groups == 1)

    @property
    def pointwise(self) -> bool:
        """A float32 1x1 convolution with unit stride, no padding and one group: a matrix product over the
        flattened pixels, which :func:`pointwise_tiles` can tile with the pixels in the vector lanes."""
        return (self.dtype == "float32" and self.groups == 1 and (self.kh, self.kw) == (1, 1)
                and self.stride == (1, 1) and not any(self.pads))

    @property
    def flat(self) -> bool:
        """6 x 16 tiles over the flattened output pixels (y * OW + x), only the very last one ragged: wastes almost
        nothing where 6 x 16 tiles per row would (7x7 maps: 12 of 7). Single-thread CPU time per ResNet-18 layer
        vs tiles per row: -20% (7x7), -9..-21% (56, 28, 14 wide)."""
        return self.ragged_ok and self.groups == 1 and self.block > OC_BLOCK and not self.pixel_vectors

    @property
    def tile(self) -> int:
        """Output pixels per register tile (along the flattened pixels for ``flat`` and ``pixel_vectors``, else
        along a row)."""
        if self.pixel_vectors:
            return self.pixel_tile
        if self.pixel_tile:
            return min(self.pixel_tile, self.oh * self.ow if self.flat else self.ow)
        if self.flat:
            return flat_tile(self.oh * self.ow)
        return pixel_tile(self.ow, self.block, self.ragged_ok)

    def check(self) -> None:
        if self.groups < 1 or self.c % self.groups or self.o % self.groups:
            raise te.TeError(f"conv2d: {self.c} input and {self.o} output channels do not split into {self.groups} groups")
        if min(self.stride) < 1 or min(self.dilations) < 1 or min(self.pads) < 0:
            raise te.TeError(f"conv2d: stride {self.stride} / dilations {self.dilations} must be >= 1, pads {self.pads} >= 0")
        if self.oh < 1 or self.ow < 1:
            raise te.TeError(f"conv2d: kernel {self.kh}x{self.kw} does not fit the padded {self.h}x{self.w} input")
        if self.in_block and not in_block_ok(self, self.in_block):
            raise te.TeError(f"conv2d: in_block={self.in_block} needs a float32 flat conv (one group, 16-channel "
                             f"output blocks) whose {self.c} input channels split into blocks of {self.in_block}")
        if self.pixel_vectors and self.depthwise:
            if self.dtype != "float32" or not 1 <= self.tile <= self.ow or not 1 <= self.row_tile <= self.oh:
                raise te.TeError(f"conv2d: pixel_vectors depthwise needs float32, a row tile of 1..{self.ow} "
                                 f"pixels and 1..{self.oh} rows, got {self.dtype}, {self.tile} x {self.row_tile}")
        elif self.pixel_vectors and self.groups == 1 and not self.pointwise:  # direct rows (small reductions)
            if self.dtype != "float32" or not self.oc_block or self.o % self.oc_block or not 1 <= self.tile <= self.ow:
                raise te.TeError(f"conv2d: pixel_vectors rows need float32, oc_block dividing the {self.o} output "
                                 f"channels and a row tile of 1..{self.ow} pixels, got {self.dtype}, "
                                 f"{self.oc_block}, {self.tile}")
        elif self.pixel_vectors:
            if not self.pointwise:
                raise te.TeError("conv2d: pixel_vectors takes float32 depthwise convs, one-group direct convs and 1x1 "
                                 f"ones (unit stride, no padding), got {self.kh}x{self.kw} stride {self.stride} pads "
                                 f"{self.pads} groups {self.groups} {self.dtype}")
            p, ot, pv = self.oh * self.ow, self.block, self.tile
            if ot < 1 or self.o % ot or pv < 1 or pv > p:
                raise te.TeError(f"conv2d: pixel_vectors tiles of {ot} channels x {pv} pixels: the channels must "
                                 f"divide the {self.o} output channels, the pixels be 1..{p}")

    @property
    def macs(self) -> int:
        return self.n * self.o * self.oh * self.ow * self.cg * self.kh * self.kw


def pack_weight(spec: Conv2dSpec, w: np.ndarray) -> np.ndarray:
    """OIHW weights -> ``(O/OB, Cg, KH, KW, OB)`` (depthwise: ``(O/OB, KH, KW, OB)``), C-contiguous, spec dtype."""
    ob = spec.block
    w = np.asarray(w, np.float32 if spec.dtype == "float32" else np.int8)
    return aligned_copy(_packed(spec, w, ob))


def _packed(spec: Conv2dSpec, w: np.ndarray, ob: int) -> np.ndarray:
    if spec.depthwise:
        return np.ascontiguousarray(w[:, 0].reshape(spec.o // ob, ob, spec.kh, spec.kw).transpose(0, 2, 3, 1))
    if spec.pixel_vectors and spec.pointwise:  # (O/OT, C, OT): a tile's OT weights of one channel are adjacent
        return np.ascontiguousarray(w.reshape(spec.o // ob, ob, spec.c).transpose(0, 2, 1))
    if spec.in_block:  # (O/OB, C/CB, KH, KW, CB, OB): the order the blocked reduction reads them
        cb = spec.in_block
        return np.ascontiguousarray(w.reshape(spec.o // ob, ob, spec.c // cb, cb, spec.kh, spec.kw)
                                    .transpose(0, 2, 4, 5, 3, 1))
    return np.ascontiguousarray(w.reshape(spec.o // ob, ob, spec.cg, spec.kh, spec.kw).transpose(0, 2, 3, 4, 1))


@dataclass
class Conv2dOp:
    """The tensors of one conv2d: ``inputs`` in call order (data, packed weight, [bias], [residual]) and stages."""

    spec: Conv2dSpec
    inputs: list[Tensor]
    pad: Tensor
    conv: Tensor
    out: Tensor


OutputStage = Callable[[te.Expr, te.Expr], te.Expr]  # (accumulator value, output channel) -> output value


def conv2d(spec: Conv2dSpec, bias: bool = False, residual: bool = False, act: str | None = None,
           act_params: tuple = (), stage: "tuple[list[Tensor], OutputStage, str] | None" = None) -> Conv2dOp:
    """The conv2d compute (see the module docstring); ``residual``: an NCHW tensor added before ``act``.

    ``stage``: instead of bias/residual/act, ``(extra placeholders, fn(acc, channel), out dtype)`` (int8 requant).
    """
    spec.check()
    if spec.dtype not in ("float32", "int8"):
        raise te.TeError(f"conv2d: dtype {spec.dtype!r} not supported; allowed: float32, int8")
    f32 = spec.dtype == "float32"
    acc_t = "float32" if f32 else "int32"
    zero = te.const(0.0, "float32") if f32 else te.const(int(spec.pad_value), "int8")

    def mul(a, b):
        return a * b if f32 else a.astype("int32") * b.astype("int32")
    n, c, h, w, o = spec.n, spec.c, spec.h, spec.w, spec.o
    (t, l, b, r), (sy, sx), (dy, dx) = spec.pads, spec.stride, spec.dilations
    ob = spec.block
    if spec.pixel_vectors:
        if stage is not None:
            raise te.TeError("conv2d: pixel_vectors is a float32 layout (int8 output stages use the channel-vector "
                             "one)")
        if spec.pointwise:
            return _pointwise(spec, bias, residual, act, act_params)
        return _rows(spec, bias, residual, act, act_params)
    data = te.placeholder((n, c, h, w), spec.dtype, "data")
    hp, wp = h + t + b, w + l + r
    xt = spec.tile
    flat = spec.flat
    if flat:  # the last tile of the flattened pixels pokes into zero rows below the padded input
        hp, wq = flat_pad_extent(spec, xt)  # wq: columns per phase (stride sx)
    elif ob > OC_BLOCK and spec.ow % xt:  # ragged pixel tiles: zero columns on the right so the last tile reads in bounds, unguarded
        wp = max(wp, (-(-spec.ow // xt) * xt - 1) * sx + (spec.kw - 1) * dx + 1)
    inside = lambda y, x: (y >= t) & (y < h + t) & (x >= l) & (x < w + l)  # noqa: E731
    if spec.in_block:
        if stage is not None:
            raise te.TeError("conv2d: in_block is a float32 layout (int8 output stages use plain NCHW input)")
        pad, weight, conv = _flat_blocked(spec, data, hp, wp, wq, inside)
    elif spec.depthwise:  # padded and blocked (N, C/OB, H, W, OB): the OB channels of a tap are one vector load
        pad = te.compute((n, c // ob, hp, wp, ob), lambda i, cb, y, x, ci: te.select(
            inside(y, x), data[i, cb * ob + ci, y - t, x - l], zero), name="pad", dtype=spec.dtype)
    elif flat and sx > 1:  # columns de-interleaved by phase: (N, C, H, SX, W/SX), a tile's pixels are contiguous
        pad = te.compute((n, c, hp, sx, wq), lambda i, j, y, ph, xq: te.select(
            inside(y, xq * sx + ph), data[i, j, y - t, xq * sx + ph - l], zero), name="pad", dtype=spec.dtype)
    elif any(spec.pads) or wp > w + l + r or hp > h + t + b:
        pad = te.compute((n, c, hp, wp), lambda i, j, y, x: te.select(inside(y, x), data[i, j, y - t, x - l], zero),
                         name="pad", dtype=spec.dtype)
    else:
        pad = data
    ky, kx = te.reduce_axis(spec.kh, "ky"), te.reduce_axis(spec.kw, "kx")
    shape = (n, o // ob, spec.oh, spec.ow, ob)
    if spec.in_block:
        pass  # _flat_blocked made its weight and conv above
    elif spec.depthwise:
        weight = te.placeholder((o // ob, spec.kh, spec.kw, ob), spec.dtype, "weight")
        conv = te.compute(shape, lambda i, oo, y, x, oi: te.sum(
            mul(pad[i, oo, y * sy + ky * dy, x * sx + kx * dx, oi], weight[oo, ky, kx, oi]), [ky, kx]),
            name="conv", dtype=acc_t)
    else:
        cg, og = spec.cg, spec.og
        weight = te.placeholder((o // ob, cg, spec.kh, spec.kw, ob), spec.dtype, "weight")
        rc = te.reduce_axis(cg, "rc")
        if flat:
            conv = te.compute((n, o // ob, spec.oh * spec.ow, ob), lambda i, oo, q, oi: te.sum(
                mul(pad[(i, rc, *_flat_tap(spec, q, ky, kx))], weight[oo, rc, ky, kx, oi]), [rc, ky, kx]),
                name="conv", dtype=acc_t)
        elif spec.groups == 1:
            conv = te.compute(shape, lambda i, oo, y, x, oi: te.sum(
                mul(pad[i, rc, y * sy + ky * dy, x * sx + kx * dx], weight[oo, rc, ky, kx, oi]), [rc, ky, kx]),
                name="conv", dtype=acc_t)
        else:  # grouped: block oo lies in group (oo * ob) // og (ob divides og)
            conv = te.compute(shape, lambda i, oo, y, x, oi: te.sum(
                mul(pad[i, (oo * ob) // og * cg + rc, y * sy + ky * dy, x * sx + kx * dx], weight[oo, rc, ky, kx, oi]),
                [rc, ky, kx]), name="conv", dtype=acc_t)
    inputs = [data, weight]
    out_shape = output_shape(spec)
    if stage is not None:
        extra, fn, out_dtype = stage
        out = te.compute(out_shape, lambda i, oo, oi, *yx: fn(conv[(i, oo, *yx, oi)], oo * ob + oi),
                         name="out", dtype=out_dtype)
        return Conv2dOp(spec, inputs + list(extra), pad, conv, out)
    if not f32:
        raise te.TeError("conv2d: int8 convolutions need an output stage (the requant epilogue)")
    bias_t = res_t = None
    if bias:
        bias_t = te.placeholder((o,), "float32", "bias")
        inputs.append(bias_t)
    if residual:
        res_t = te.placeholder(out_shape, "float32", "residual")  # NCHW viewed as out_shape
        inputs.append(res_t)

    def epilogue(i, oo, oi, *yx):
        v = conv[(i, oo, *yx, oi)]
        if bias_t is not None:
            v = v + bias_t[oo * ob + oi]
        if res_t is not None:
            v = v + res_t[(i, oo, oi, *yx)]
        return activation(v, act, act_params)

    out = te.compute(out_shape, epilogue, name="out", dtype="float32")
    return Conv2dOp(spec, inputs, pad, conv, out)


def in_block_ok(spec: Conv2dSpec, cb: int = OC_BLOCK) -> bool:
    """Whether ``spec`` can take a channel-blocked padded input of ``cb`` channels per block (``in_block``): a
    float32 conv with flat 6 x 16 tiles (one group) whose input channels split into blocks of ``cb``, with unit
    stride or a 1x1 unpadded kernel (strided 3x3 convs read the blocked phase-split copy ~1.5x slower: measured),
    but not an unpadded 1x1 conv with unit stride: its NCHW input is already the flat layout the tiles read (a
    tile's pixels of one channel adjacent), and the copy only adds a pass over the input. Kernels alone, Zen 5,
    min of alternating calls, plain over blocked: MobileNetV2's 1x1 convs at 14x14 and 7x7 0.76-1.0 on two threads
    (960->160 7x7 0.77, 192->64 14x14 0.76, 320->1280 7x7 0.995), 0.86-1.02 on one, 0.93-1.02 as AVX2 code; the
    strided 1x1 convs keep the copy (plain 1.08-1.16, ResNet-18's downsamples)."""
    one = (spec.kh, spec.kw) == (1, 1) and not any(spec.pads)
    strided = spec.stride != (1, 1)
    return (cb >= 1 and spec.dtype == "float32" and spec.groups == 1 and not spec.pixel_vectors
            and spec.c % cb == 0 and (one if strided else not one)
            and dataclasses.replace(spec, in_block=0).flat)


def _flat_blocked(spec: Conv2dSpec, data: Tensor, hp: int, wp: int, wq: int, inside) -> tuple:
    """``in_block`` (flat tiles): the padded input copied channel-blocked, ``(N, C/CB, Hp, Wp, CB)`` (stride > 1:
    columns de-interleaved by phase, ``(N, C/CB, Hp, SX, Wq, CB)``; an unpadded 1x1 conv with stride: only the
    pixels it reads, ``(N, C/CB, rows, OW, CB)``), so one tile's taps of CB input channels are CB adjacent floats
    per pixel instead of CB planes apart; weights ``(O/OB, C/CB, KH, KW, CB, OB)``; the reduction runs over
    (channel block, ky, kx, channel in block). Returns ``(pad, weight, conv)``."""
    n, c, o, ob, cb, ow_ = spec.n, spec.c, spec.o, spec.block, spec.in_block, spec.ow
    (t, l, _, _), (sy, sx) = spec.pads, spec.stride
    zero = te.const(0.0, "float32")
    rco, rci = te.reduce_axis(c // cb, "rco"), te.reduce_axis(cb, "rci")
    ky, kx = te.reduce_axis(spec.kh, "ky"), te.reduce_axis(spec.kw, "kx")
    subsampled = (spec.kh, spec.kw) == (1, 1) and not any(spec.pads) and (sy, sx) != (1, 1)
    if subsampled:
        rows = (-(-spec.oh * ow_ // spec.tile) * spec.tile - 1) // ow_ + 1  # the ragged last tile reads zero rows
        pad = te.compute((n, c // cb, rows, ow_, cb), lambda i, j, y, x, ci: te.select(
            y < spec.oh, data[i, j * cb + ci, y * sy, x * sx], zero), name="pad", dtype="float32")
    elif sx > 1:
        pad = te.compute((n, c // cb, hp, sx, wq, cb), lambda i, j, y, ph, xq, ci: te.select(
            inside(y, xq * sx + ph), data[i, j * cb + ci, y - t, xq * sx + ph - l], zero), name="pad",
            dtype="float32")
    else:
        pad = te.compute((n, c // cb, hp, wp, cb), lambda i, j, y, x, ci: te.select(
            inside(y, x), data[i, j * cb + ci, y - t, x - l], zero), name="pad", dtype="float32")

    def tap(q, ky, kx):  # the subsampled copy holds only the pixels read: pixel q is row q // OW, column q % OW
        return (q // ow_, q % ow_) if subsampled else _flat_tap(spec, q, ky, kx)

    weight = te.placeholder((o // ob, c // cb, spec.kh, spec.kw, cb, ob), "float32", "weight")
    conv = te.compute((n, o // ob, spec.oh * ow_, ob), lambda i, oo, q, oi: te.sum(
        pad[(i, rco, *tap(q, ky, kx), rci)] * weight[oo, rco, ky, kx, rci, oi], [rco, ky, kx, rci]), name="conv",
        dtype="float32")
    return pad, weight, conv


def _flat_tap(spec: Conv2dSpec, q, ky, kx) -> tuple:
    """Where flat output pixel ``q``'s tap ``(ky, kx)`` lies in the padded input of the flat layouts (plain or
    channel-blocked): ``(row, column)``, or with stride ``SX > 1`` (columns de-interleaved by phase) ``(row,
    phase, column within the phase)``."""
    ow_, (sy, sx), (dy, dx) = spec.ow, spec.stride, spec.dilations
    if sx > 1:
        return q // ow_ * sy + ky * dy, kx * dx % sx, q % ow_ + kx * dx // sx
    return q // ow_ * sy + ky * dy, q % ow_ + kx * dx


def _epilogue_stage(conv: Tensor, shape: tuple, ob: int, bias: bool, residual: bool, act: str | None,
                    act_params: tuple, inputs: list) -> Tensor:
    """``out = act(conv + bias[channel] + residual)`` of the ``pixel_vectors`` layouts (``conv`` and ``out`` of
    ``shape``, axis 1 x ``ob`` + axis 2 the channel); appends the bias/residual placeholders to ``inputs``."""
    bias_t = res_t = None
    if bias:
        bias_t = te.placeholder((shape[1] * ob,), "float32", "bias")
        inputs.append(bias_t)
    if residual:
        res_t = te.placeholder(shape, "float32", "residual")
        inputs.append(res_t)

    def epilogue(i, oo, oi, *px):
        v = conv[(i, oo, oi, *px)]
        if bias_t is not None:
            v = v + bias_t[oo * ob + oi]
        if res_t is not None:
            v = v + res_t[(i, oo, oi, *px)]
        return activation(v, act, act_params)

    return te.compute(shape, epilogue, name="out", dtype="float32")


def depthwise_row_tile(spec: Conv2dSpec, lanes: int) -> int:
    """Output pixels per register tile of a ``pixel_vectors`` depthwise conv (along a row):
    :data:`NARROW_TILE` for a row of 5-7 pixels whose whole-row pieces take more vector operations per tap than
    4-pixel tiles (7 = 4 + 2 + 1: three, against two tiles, the second ragged); else
    :func:`~compiler.topi.row_tiles.row_tile` of the output row; 0 (the channel-vector layout, its blocked input
    copied by in-register transposes) for a strided conv whose output row is narrower than half a vector (the rows
    would de-interleave their input for under half a vector of pixels).
    7-pixel rows (MobileNetV2's 7x7 maps: three 960-channel unit-stride convs and the 576-channel stride-2 one), in
    the model, Zen 4, two threads, min of 15 alternating runs, three runs each: 4-pixel tiles of all 7 rows over
    7-pixel pieces of 4 rows 0.113 -> 0.091 ms as AVX2 code, 0.148 -> 0.102 on AVX-512 (where the stride-2 conv
    had taken channel vectors: 0.055 -> 0.032); 7-pixel pieces of 7 rows did not do it (0.113 -> 0.127, 0.150 ->
    0.133), and 4-pixel tiles of 14-pixel rows lost (0.166 -> 0.236, 0.168 -> 0.240: four operations a tap
    against three). (Earlier, Zen 5: the 576-channel stride-2 conv to 7x7 0.025 -> 0.015 ms alone and 0.061 ->
    0.041 in the model with channel vectors against 7-pixel pieces; the 960-channel unit-stride ones faster so
    alone (0.018 -> 0.014) but slower in the model (0.024 -> 0.027: the copy is a second parallel pass).)"""
    w = spec.ow
    if NARROW_TILE < w < 2 * NARROW_TILE and len(pow2_pieces(w)) > -(-w // NARROW_TILE):
        return NARROW_TILE
    if 2 * w < lanes and spec.stride[1] > 1:
        return 0
    return row_tile(w, lanes)


NARROW_TILE = 4  # pixels: one SSE register (every x86 target has it), the narrow rows' tile (depthwise_row_tile)


def depthwise_rows(spec: Conv2dSpec, lanes: int) -> int:
    """Output rows per register tile of a ``pixel_vectors`` depthwise conv: independent accumulator chains (one
    row's KH x KW taps are a chain of dependent FMAs: 2 vectors alone ran at ~1/4 of the FMA rate), at most 12
    accumulator vectors (24 for strided convs with AVX-512's 32 registers; :func:`row_vectors` a row), a divisor of
    the output rows where one fits, else the last tile is ragged (zero rows below the padded input). (Unit-stride
    ones on AVX-512 with 24: MobileNetV2's six took 158 us against 135 with 12, kernels alone, hot, two threads,
    Zen 5, min of 7 alternating; 236 vs 208 flushed: the 112x112 layer 41 -> 30 us with 8-row tiles instead of 16,
    the 56x56 one 49 -> 39 with 2 rows instead of 4; its strided 112x112 layer lost with 12: 57 -> 65 us.
    AVX2's 12 with 6 instead: mixed, kept.)"""
    wide = lanes >= 16 and spec.stride[0] > 1
    return tile_rows(spec.oh, row_vectors(spec.tile, lanes), 24 if wide else 12)


def _rows(spec: Conv2dSpec, bias: bool, residual: bool, act: str | None, act_params: tuple) -> Conv2dOp:
    """The ``pixel_vectors`` depthwise (and small direct) compute, NCHW throughout: the padded input with its
    columns de-interleaved by stride phase, ``(N, C, Hp, SX, Wq)`` (a tap's pixels along a row are contiguous;
    zero columns past the last ragged tile), depthwise ``conv[n, c, 0, y, x] = sum_{ky,kx} pad[n, c, y*SY + ky*DY,
    kx*DX % SX, x + kx*DX // SX] * weight[c, ky, kx, 0]`` with the output ``(N, C, 1, OH, OW)``; direct (one
    group): the same taps summed over the input channels too, weights ``(O/OT, C, KH, KW, OT)``, output
    ``(N, O/OT, OT, OH, OW)``."""
    n, c, h, w, o = spec.n, spec.c, spec.h, spec.w, spec.o
    (t, l, _, _), (sy, sx), (dy, dx) = spec.pads, spec.stride, spec.dilations
    xt, yt = spec.tile, spec.row_tile if spec.depthwise else 1
    data = te.placeholder((n, c, h, w), "float32", "data")
    hp, wq = row_pad_extent(spec, xt, yt)  # a ragged last row tile reads zeros
    zero = te.const(0.0, "float32")
    pad = te.compute((n, c, hp, sx, wq), lambda i, j, y, ph, xq: te.select(
        (y >= t) & (y < h + t) & (xq * sx + ph >= l) & (xq * sx + ph < w + l),
        data[i, j, y - t, xq * sx + ph - l], zero), name="pad", dtype="float32")
    ky, kx = te.reduce_axis(spec.kh, "ky"), te.reduce_axis(spec.kw, "kx")
    if spec.depthwise:
        weight = te.placeholder((o, spec.kh, spec.kw, 1), "float32", "weight")
        shape = (n, o, 1, spec.oh, spec.ow)
        conv = te.compute(shape, lambda i, j, z, y, x: te.sum(
            pad[i, j, y * sy + ky * dy, kx * dx % sx, x + kx * dx // sx] * weight[j, ky, kx, z], [ky, kx]),
            name="conv", dtype="float32")
    else:
        ot = spec.block
        weight = te.placeholder((o // ot, c, spec.kh, spec.kw, ot), "float32", "weight")
        rc = te.reduce_axis(c, "rc")
        shape = (n, o // ot, ot, spec.oh, spec.ow)
        conv = te.compute(shape, lambda i, oo, oi, y, x: te.sum(
            pad[i, rc, y * sy + ky * dy, kx * dx % sx, x + kx * dx // sx] * weight[oo, rc, ky, kx, oi], [rc, ky, kx]),
            name="conv", dtype="float32")
    inputs = [data, weight]
    out = _epilogue_stage(conv, shape, shape[2], bias, residual, act, act_params, inputs)
    return Conv2dOp(spec, inputs, pad, conv, out)


def _pointwise(spec: Conv2dSpec, bias: bool, residual: bool, act: str | None, act_params: tuple) -> Conv2dOp:
    """The ``pixel_vectors`` 1x1 compute: ``conv[n, oo, oi, q] = sum_c data[n, c, q] * weight[oo, c, oi]`` over the
    flattened pixels ``q`` (data ``(N, C, H*W)``), output ``(N, O/OT, OT, H*W)``; both NCHW memory."""
    n, c, o, p, ot, pv = spec.n, spec.c, spec.o, spec.oh * spec.ow, spec.block, spec.tile
    data = te.placeholder((n, c, p), "float32", "data")
    src = data
    if p % pv:  # a ragged last pixel tile reads the input panel padded with zero pixels
        zero = te.const(0.0, "float32")
        src = te.compute((n, c, -(-p // pv) * pv), lambda i, j, q: te.select(q < p, data[i, j, q], zero),
                         name="panel", dtype="float32")
    weight = te.placeholder((o // ot, c, ot), "float32", "weight")
    rc = te.reduce_axis(c, "rc")
    shape = (n, o // ot, ot, p)
    conv = te.compute(shape, lambda i, oo, oi, q: te.sum(src[i, rc, q] * weight[oo, rc, oi], [rc]),
                      name="conv", dtype="float32")
    inputs = [data, weight]
    out = _epilogue_stage(conv, shape, ot, bias, residual, act, act_params, inputs)
    return Conv2dOp(spec, inputs, src, conv, out)


def input_shape(spec: Conv2dSpec) -> tuple[int, ...]:
    """The data argument's shape: NCHW, or ``(N, C, H*W)`` for a ``pixel_vectors`` 1x1 conv (the same memory)."""
    if spec.pixel_vectors and spec.pointwise:
        return (spec.n, spec.c, spec.h * spec.w)
    return (spec.n, spec.c, spec.h, spec.w)


def output_shape(spec: Conv2dSpec) -> tuple[int, ...]:
    """The output (and residual) tensor's shape: ``(N, O/OB, OB, OH, OW)``, or ``(N, O/OB, OB, OH*OW)`` for
    ``spec.flat`` and ``spec.pixel_vectors``; all NCHW memory."""
    ob = spec.block
    if spec.flat or spec.pixel_vectors and spec.pointwise:
        return (spec.n, spec.o // ob, ob, spec.oh * spec.ow)
    return (spec.n, spec.o // ob, ob, spec.oh, spec.ow)


def _size(shape) -> int:
    return int(np.prod(shape))


def flat_pad_extent(spec: Conv2dSpec, xt: int) -> tuple[int, int]:
    """``(rows, columns per stride phase)`` of the padded input (columns de-interleaved by phase: ``SX`` pieces)
    that register tiles of ``xt`` flattened output pixels (``y * OW + x``) read with no guard: at least the padded
    map, plus zero rows below it for the last tile where it runs past the last output pixel, and the columns that
    output column ``OW - 1``'s last tap reads. Used by the float32 ``flat`` conv and the packed int8 conv
    (:mod:`compiler.topi.conv2d_int8`)."""
    (t, l, b, r), (sy, sx), (dy, dx) = spec.pads, spec.stride, spec.dilations
    last = -(-spec.oh * spec.ow // xt) * xt - 1  # the last tile's last pixel (past the map when it is ragged)
    rows = max(spec.h + t + b, last // spec.ow * sy + (spec.kh - 1) * dy + 1)
    return rows, max(-(-(spec.w + l + r) // sx), spec.ow + (spec.kw - 1) * dx // sx)


def row_pad_extent(spec: Conv2dSpec, xt: int, yt: int = 1) -> tuple[int, int]:
    """``(rows, columns per stride phase)`` of the padded input (columns de-interleaved by phase) that register
    tiles of ``yt`` output rows x ``xt`` pixels along a row read with no guard: at least the padded map, plus zero
    rows below it for a ragged last row tile and zero columns right of it for the ragged last tile of each row. Used
    by the float32 ``pixel_vectors`` row layouts and the packed int8 depthwise conv (``yt = 1``)."""
    (t, l, b, r), (sy, sx), (dy, dx) = spec.pads, spec.stride, spec.dilations
    rows = max(spec.h + t + b, (-(-spec.oh // yt) * yt - 1) * sy + (spec.kh - 1) * dy + 1)
    return rows, max(-(-(spec.w + l + r) // sx), -(-spec.ow // xt) * xt + (spec.kw - 1) * dx // sx)


def flat_tile(pixels: int, lanes: int = 8) -> int:
    """Output pixels per register tile of a ``flat`` conv over ``pixels`` flattened output pixels, for two-vector
    channel blocks of the target's float32 ``lanes``. AVX2 (16 channels): 6 (12 accumulators) or 5, whichever runs
    fewer tile slots counting one slot per tile for its fixed work (epilogue, addresses): ``ceil(P / t) * (t + 1)``,
    ties to the larger. 7x7 maps take 10 tiles of 5 rather than 9 of 6 (54 slots for 49 pixels): ResNet-18's
    512-channel 3x3 convs and MobileNetV2's 7x7 1x1 convs 2-7 % faster on one thread (calls of both in turn, min of
    300), the stride-2 3x3 conv to 7x7 15 %; 14x14 and larger maps keep 6 (within +-3 %). AVX-512 (32 channels,
    32 registers): 8, 7 or 6 by the same count (see :data:`WIDE_FLAT_TILES`)."""
    tiles = WIDE_FLAT_TILES if lanes >= 16 else (RAGGED_TILE, RAGGED_TILE - 1)
    if pixels <= tiles[-1]:
        return pixels
    return min(tiles, key=lambda t: (-(-pixels // t) * (t + 1), -t))


# AVX-512's flat tiles: 32 channels (two zmm vectors) x 8..6 pixels, 12-16 accumulators of the 32 registers. Kernels
# alone, two threads, Zen 5 (znver5), min of alternating calls, vs the AVX2-sized 16 x 6 tiles (one zmm: 6 chains
# of dependent FMAs, under the 8 that keep both FMA pipes busy): ResNet-18's stride-2 3x3 convs 0.72-0.79, its
# strided 1x1 convs 0.81-0.88, the direct 128-channel 28x28 3x3 conv 0.78.
WIDE_FLAT_TILES = (8, 7, 6)


def pixel_tile(ow: int, ob: int = OC_BLOCK, ragged: bool = False) -> int:
    """Output pixels per register tile. Two-vector channel blocks: 6 (12 accumulators, a ragged last tile over
    zero columns of the padded input) when ``ragged`` (float32, unit stride, see ``Conv2dSpec.ragged_ok``), else 4
    (``ow % 4 == 0`` then). One vector: the largest divisor of ``ow`` in 8..4, else min(ow, 8) with a tail.
    (Single-thread CPU time per ResNet-18 layer: 6 x 16 beats 4 x 16 by 10-17% on 56/28-pixel rows and 7 x 8
    by ~8% on 14-pixel rows; with stride 2 it was 2-3x slower, and 7 x 16 (14 accumulators) spills.)"""
    if ob > OC_BLOCK:
        return min(RAGGED_TILE, ow) if ragged else 4
    for xt in (8, 7, 6, 5, 4):
        if ow % xt == 0:
            return xt
    return min(ow, 8)


def pointwise_tiles(spec: Conv2dSpec, lanes: int) -> tuple[int, int]:
    """``(channels, pixels)`` of the register tile of a ``pixel_vectors`` 1x1 conv, or ``(0, 0)`` where the
    channel-vector layout is kept. Pixels in the vector lanes: two vectors of ``lanes`` where they divide the pixel
    count or a ragged last tile (its input panel zero-padded) wastes at most a tenth of the pixels (14x14 maps: 13
    tiles of 16 on AVX2), else one vector where it divides them; none otherwise (7x7 maps: one-vector tiles of 8
    ran up to 2x slower than the channel-vector layout: one input load per OT weight broadcasts). One broadcast
    weight per output channel, at most 12 accumulator vectors (16 registers; 24 with AVX-512's 32), the channels
    dividing ``O``. ``lanes``: the target CPU's float32 lanes (the backend supplies them)."""
    p = spec.oh * spec.ow
    if p >= 2 * lanes and 10 * (-p % (2 * lanes)) <= p:
        pv = 2 * lanes
    elif p % lanes == 0:
        pv = lanes
    else:
        return 0, 0
    budget = 24 if lanes >= 16 else 12
    ot = next(t for t in (12, 8, 6, 4, 3, 2, 1) if t * (pv // lanes) <= budget and spec.o % t == 0)
    return ot, pv


def cpu_spec(spec: Conv2dSpec, lanes: int) -> Conv2dSpec:
    """The spec the CPU schedule uses without knobs: ``pixel_vectors`` (pixels in the vector lanes: the output stays
    NCHW and is stored as whole vectors with no transpose) for a float32 1x1 unit-stride conv whose pixels split
    into the target's vectors (MobileNetV2's 112/56/28-wide pointwise convs ran 3-4.5x onnxruntime with channels in
    the lanes) and a float32 depthwise conv whose rows are a vector wide (no channel-blocked copy of the input and
    no transposed output); a ``flat`` conv with two-vector channel blocks of the target (:func:`wide_flat`) and
    its channel-blocked input where :func:`in_block_ok`; others as they are. ``lanes``: float32 lanes of the
    target's vector registers (8 on AVX2, 16 on AVX-512, 4 on SSE), supplied by the backend."""
    if spec.oc_block or spec.pixel_tile or spec.pixel_vectors or spec.dtype != "float32":
        return spec
    if spec.pointwise:
        ot, pv = pointwise_tiles(spec, lanes)
        if ot:  # the tiles fixed in the spec (the kernel's shapes must not follow a later change of target CPU)
            return dataclasses.replace(spec, pixel_vectors=True, oc_block=ot, pixel_tile=pv)
    elif spec.depthwise:
        xt = depthwise_row_tile(spec, lanes)
        if xt:
            spec = dataclasses.replace(spec, pixel_vectors=True, pixel_tile=xt)
            return dataclasses.replace(spec, row_tile=depthwise_rows(spec, lanes))
    elif spec.groups == 1 and spec.c <= 4 and stem_takes_rows(spec):
        ot, xt = direct_row_tiles(spec, lanes)
        if ot:
            return dataclasses.replace(spec, pixel_vectors=True, oc_block=ot, pixel_tile=xt)
    return with_in_block(wide_flat(spec, lanes))


def wide_flat(spec: Conv2dSpec, lanes: int) -> Conv2dSpec:
    """``spec`` with two-vector channel blocks of ``lanes`` (32 channels on AVX-512) and :func:`flat_tile`'s pixel
    tile where it is a ``flat`` conv whose default 16-channel block is narrower than two of the target's vectors and
    whose output channels split into the wide blocks; else ``spec`` unchanged (AVX2: always)."""
    wide = 2 * lanes
    if spec.oc_block or spec.pixel_tile or not spec.flat or spec.block >= wide or spec.og % wide:
        return spec
    return dataclasses.replace(spec, oc_block=wide, pixel_tile=flat_tile(spec.oh * spec.ow, lanes))


def with_in_block(spec: Conv2dSpec) -> Conv2dSpec:
    """``spec`` with a channel-blocked padded input (``in_block`` = 8 channels) where :func:`in_block_ok`, else
    without. One tile's taps of 8 input channels then lie in one 32-byte run per pixel (plain NCHW: 8 planes apart,
    each a different cache line): ResNet-18's 64-channel 56x56 3x3 conv ~8% faster on two threads."""
    return dataclasses.replace(spec, in_block=OC_BLOCK if in_block_ok(spec) else 0)


# direct convs with C <= 4 input channels (image stems) and at most this many C x KH x KW taps take pixel-vector
# rows: MobileNetV2's stem (27 taps) 0.62 -> 0.40 ms on one thread, ResNet-18's 7x7/2 stem (147 taps) 3.11-3.18 ->
# 2.74-2.82 ms on one thread and 1.67 -> 1.58 ms on two (both kernels called in turn in one process, min of 200
# calls, loaded host). Larger stems are unmeasured and keep the channel-vector layout (which the llvm tuner covers).
DIRECT_ROWS_MAX_TAPS = 7 * 7 * 3
# ... except stems of >= 75 taps (5x5, 7x7 on 3 channels) with output channels in 32s: since the channel-vector
# layout's output stage is transposed in registers and its input copies are vector rows, it beats the rows there.
# Kernels alone, two threads, Zen 5, min of 40 alternating calls, channel vectors over rows: ResNet-18's 7x7/2 stem
# 0.82 on AVX-512 (0.598 -> 0.491 ms) and 0.89 as AVX2 code (x86-64-v3), at 112x112 0.95 / 0.87, a 32-output 5x5/2
# 0.85 / 0.92; a 48-output 5x5/2 1.18 / 1.09 and 3x3 stems (27 taps) 0.90-1.13 / 0.98-1.68 keep the rows.
WIDE_STEM_TAPS = 75
WIDE_STEM_CHANNELS = 32


def stem_takes_rows(spec: Conv2dSpec) -> bool:
    """Whether an image stem's taps (C x KH x KW) suit the pixel-vector rows (see the two notes above)."""
    taps = spec.c * spec.kh * spec.kw
    return taps <= DIRECT_ROWS_MAX_TAPS and not (taps >= WIDE_STEM_TAPS and spec.o % WIDE_STEM_CHANNELS == 0)


def direct_row_tiles(spec: Conv2dSpec, lanes: int) -> tuple[int, int]:
    """``(channels, pixels)`` of a ``pixel_vectors`` direct conv's register tile (one row): the row tile of
    :func:`~compiler.topi.row_tiles.row_tile`, channels dividing ``O`` with at most 12 accumulator vectors (24 with
    AVX-512); ``(0, 0)`` for rows narrower than half a vector."""
    xt = row_tile(spec.ow, lanes)
    if not xt:
        return 0, 0
    budget, vecs = (24 if lanes >= 16 else 12), row_vectors(xt, lanes)
    return next(t for t in (12, 8, 6, 4, 3, 2, 1) if t * vecs <= budget and spec.o % t == 0), xt


# no parallel loop; channel blocks; channel blocks x pixel tiles/rows; Winograd only: one row of 2x2 tiles a task,
# its transforms and GEMM kept in local buffers (:func:`compiler.topi.conv2d_winograd.schedule_cpu`)
PARALLEL_CHOICES = ("none", "outer", "fused", "rows")
ORDER_CHOICES = ("rc_ky_kx", "ky_kx_rc")        # the reduction loops around the register tile, outermost first
# this module's conv (channel vectors); compiler.topi.conv2d_winograd (3x3, stride 1); this module's pixel-vector
# layouts (1x1 unit-stride, depthwise and image-stem convs: :func:`cpu_spec`)
ALGO_CHOICES = ("direct", "winograd", "pixels")
PIXEL_PARALLEL_CHOICES = ("none", "outer")  # algo="pixels": serial, or the layout's parallel loop


def winograd_ok(spec: Conv2dSpec) -> bool:
    """Whether the Winograd conv (:mod:`compiler.topi.conv2d_winograd`, ``algo="winograd"``) can take ``spec``:
    float32 3x3, unit stride and dilation, one group (any padding, batch and map)."""
    return (spec.dtype == "float32" and (spec.kh, spec.kw) == (3, 3) and spec.stride == (1, 1)
            and spec.dilations == (1, 1) and spec.groups == 1 and not spec.pixel_vectors)


def winograd_refusal(spec: Conv2dSpec) -> str:
    """What the Winograd conv takes and what ``spec`` is (the message of a refusal)."""
    return (f"takes float32 3x3 convs with unit stride and dilation and one group, got {spec.kh}x{spec.kw} stride "
            f"{spec.stride} dilations {spec.dilations} groups {spec.groups} {spec.dtype}"
            f"{' (pixel-vector layout)' if spec.pixel_vectors else ''}")


@dataclass(frozen=True)
class CpuConvKnobs:
    """The CPU schedule's knobs (a tuning log's ``config`` for the llvm target; see :func:`schedule_cpu`).

    ``ob``: output channels per vector block (the vector width in float32 lanes: 8, 16 or 32; it also sets the
    weight packing), ``xt``: output pixels per register tile (``ob / 8 * xt`` accumulator vectors), ``parallel``:
    what the parallel loop runs over (:data:`PARALLEL_CHOICES`; ``"rows"`` is the Winograd conv's), ``unroll``: 0
    none, 1 the tile's pixels, 2 also the innermost kernel tap (``kx``), ``order``: the reduction loop order
    (:data:`ORDER_CHOICES`). They set the
    channel-vector layout (not ``pixel_vectors``). ``algo="winograd"``: the Winograd conv
    (:mod:`compiler.topi.conv2d_winograd`) with ``ob`` output channels per GEMM vector block, ``xt`` tiles per
    register tile, ``parallel`` and ``unroll`` (0 or 1) as there; ``order`` stays ``rc_ky_kx``.
    ``algo="pixels"``: the ``pixel_vectors`` layout (pixels in the vector lanes, :func:`cpu_spec`) of a 1x1
    unit-stride, depthwise or image-stem (<= 4 input channels) conv with ``ob`` output channels per register tile
    (1 for depthwise), ``xt`` pixels per tile, ``rows`` output rows per tile (depthwise only; else 0) and
    ``parallel`` "outer" (the layout's parallel loop) or "none"; ``unroll`` 1 and ``order`` ``rc_ky_kx``."""

    ob: int
    xt: int
    parallel: str = "outer"
    unroll: int = 1
    order: str = "rc_ky_kx"
    algo: str = "direct"
    rows: int = 0

    def check(self, spec: Conv2dSpec) -> None:
        """Raise ``TeError`` when these knobs cannot schedule ``spec`` (what is wrong and what is allowed)."""
        if self.algo not in ALGO_CHOICES:
            raise te.TeError(f"CpuConvKnobs: algo={self.algo!r}; allowed: {ALGO_CHOICES}")
        if self.algo == "pixels":
            self._check_pixels(spec)
            return
        if self.rows:
            raise te.TeError(f"CpuConvKnobs: rows={self.rows} is the pixel-vector depthwise conv's (algo='pixels')")
        if self.algo == "winograd":  # which convs, unroll and order (the rest is checked below)
            if not winograd_ok(spec):
                raise te.TeError(f"CpuConvKnobs: algo='winograd' {winograd_refusal(spec)}")
            if self.unroll not in (0, 1):
                raise te.TeError(f"CpuConvKnobs: unroll={self.unroll}; the Winograd conv allows 0, 1")
            if self.order != "rc_ky_kx":
                raise te.TeError(f"CpuConvKnobs: order={self.order!r}; the Winograd conv's reduction is over "
                                 "channels only (order 'rc_ky_kx')")
        elif spec.depthwise or spec.dtype != "float32":
            raise te.TeError(f"CpuConvKnobs: algo={self.algo!r} (channel vectors) takes float32 convs that are not "
                             f"depthwise; depthwise float32 convs take algo='pixels'")
        if self.ob < 1 or spec.og % self.ob:
            raise te.TeError(f"CpuConvKnobs: ob={self.ob} must divide the {spec.og} output channels per group")
        if self.xt < 1:
            raise te.TeError(f"CpuConvKnobs: xt={self.xt} must be >= 1")
        if self.parallel not in PARALLEL_CHOICES:
            raise te.TeError(f"CpuConvKnobs: parallel={self.parallel!r}; allowed: {PARALLEL_CHOICES}")
        if self.algo == "winograd":
            return
        if self.parallel == "rows":
            raise te.TeError("CpuConvKnobs: parallel='rows' is the Winograd conv's (algo='winograd'); the direct conv "
                             "allows 'none', 'outer', 'fused'")
        if self.unroll not in (0, 1, 2):
            raise te.TeError(f"CpuConvKnobs: unroll={self.unroll}; allowed: 0, 1, 2")
        if self.order not in ORDER_CHOICES:
            raise te.TeError(f"CpuConvKnobs: order={self.order!r}; allowed: {ORDER_CHOICES}")

    def _check_pixels(self, spec: Conv2dSpec) -> None:
        if not pixels_ok(spec):
            raise te.TeError("CpuConvKnobs: algo='pixels' takes float32 1x1 unit-stride convs without padding, depthwise "
                             f"convs and one-group convs of <= 4 input channels; got {spec.kh}x{spec.kw} stride "
                             f"{spec.stride} groups {spec.groups}, {spec.c} input channels, {spec.dtype}")
        if self.parallel not in PIXEL_PARALLEL_CHOICES or (self.unroll, self.order) != (1, "rc_ky_kx"):
            raise te.TeError(f"CpuConvKnobs: algo='pixels' takes parallel in {PIXEL_PARALLEL_CHOICES}, unroll 1 and "
                             f"order 'rc_ky_kx'; got {self.parallel!r}, {self.unroll}, {self.order!r}")
        if spec.depthwise and (self.ob != 1 or self.rows < 1):
            raise te.TeError(f"CpuConvKnobs: a pixel-vector depthwise conv takes ob=1 and rows >= 1; got ob={self.ob}, "
                             f"rows={self.rows}")
        if not spec.depthwise and self.rows:
            raise te.TeError(f"CpuConvKnobs: rows={self.rows}: only pixel-vector depthwise convs tile rows")
        self._pixel_spec(spec).check()

    def _pixel_spec(self, spec: Conv2dSpec) -> Conv2dSpec:
        return dataclasses.replace(spec, pixel_vectors=True, oc_block=0 if spec.depthwise else self.ob,
                                   pixel_tile=self.xt, row_tile=self.rows, in_block=0)

    def apply(self, spec: Conv2dSpec) -> Conv2dSpec:
        """``spec`` with this block and tile (pass the result to :func:`conv2d` and :func:`pack_weight`); Winograd
        knobs: ``spec`` as it is (the Winograd conv takes the knobs themselves)."""
        self.check(spec)
        if self.algo == "winograd":
            return spec
        if self.algo == "pixels":
            return self._pixel_spec(spec)
        return with_in_block(dataclasses.replace(spec, oc_block=self.ob, pixel_tile=self.xt, pixel_vectors=False,
                                                 row_tile=0, in_block=0))


def pixels_ok(spec: Conv2dSpec) -> bool:
    """Whether ``spec`` can take a ``pixel_vectors`` layout (``CpuConvKnobs(algo="pixels")``)."""
    return spec.dtype == "float32" and (spec.pointwise or spec.depthwise or (spec.groups == 1 and spec.c <= 4))


def pixel_parallel(spec: Conv2dSpec) -> bool:
    """Whether a ``pixel_vectors`` conv runs its parallel loop without knobs (from a size that gains on two
    threads: :data:`CONV_PARALLEL_MIN_MACS`, depthwise :data:`DW_PARALLEL_MIN_MACS`)."""
    if spec.depthwise:
        return spec.macs >= DW_PARALLEL_MIN_MACS and spec.n * spec.c > 1
    return spec.macs >= CONV_PARALLEL_MIN_MACS


def default_pixel_knobs(spec: Conv2dSpec) -> CpuConvKnobs:
    """The knobs of a ``pixel_vectors`` spec as :func:`cpu_spec` chose it (the library's choice, as knobs)."""
    return CpuConvKnobs(1 if spec.depthwise else spec.oc_block, spec.pixel_tile,
                        "outer" if pixel_parallel(spec) else "none", 1, "rc_ky_kx", "pixels",
                        spec.row_tile if spec.depthwise else 0)


def default_cpu_knobs(spec: Conv2dSpec) -> CpuConvKnobs:
    """The knobs :func:`schedule_cpu` uses without a tuning log for the channel-vector layout of ``spec`` (the
    library's own choice; ``pixel_vectors`` specs: :func:`default_pixel_knobs`)."""
    par = "none"
    if spec.macs >= (CONV_PARALLEL_MIN_MACS if spec.flat else PARALLEL_MIN_MACS):
        par = "fused" if spec.flat else "outer"
    return CpuConvKnobs(spec.block, spec.tile, par, 1, "rc_ky_kx")


def pixels_outer(spec: Conv2dSpec) -> bool:
    """Flat tiles: pixel tiles outside the channel blocks where the weights are smaller than the padded input (and
    fit the L2 cache), so the weights stay cached and the input streams once (channel blocks outer re-read the whole
    input per block: ResNet-18's 56x56 layers)."""
    wbytes = 4 * spec.o * spec.cg * spec.kh * spec.kw
    ibytes = 4 * spec.n * spec.c * (spec.h + spec.pads[0] + spec.pads[2]) * (spec.w + spec.pads[1] + spec.pads[3])
    return spec.flat and wbytes < ibytes and wbytes <= PX_OUTER_MAX_WEIGHT_BYTES


PX_OUTER_MAX_WEIGHT_BYTES = 256 << 10


def _transposed_output(so, oi, xi, spec: Conv2dSpec) -> None:
    """The channel-vector output stage (``oi``: the block's OB channels, ``xi``: the tile's XT pixels, stored NCHW)
    as XT unrolled rows of 8- or 16-channel vectors, which the code generator transposes in registers and stores
    as one row of XT pixels per channel (``codegen._transposed_stores``; the stores were scattered lane by lane,
    ``vscatterdps`` on AVX-512: MobileNetV2's 64->384 1x1 conv at 14x14 spent half its time there; a ragged last
    tile keeps its guarded lane stores). Where XT rounded up to a power of two divides the vector (float32)."""
    ob, xt = spec.block, spec.tile
    width = 16 if ob % 16 == 0 else 8 if ob % 8 == 0 else 0
    if (spec.dtype != "float32" or not width or not 2 <= xt <= width
            or width % (1 << (xt - 1).bit_length())):  # (int8 outputs: bytes, which the transpose does not take)
        return
    oio, oii = so.split(oi, width)
    so.reorder(oio, xi, oii)
    so.unroll(xi)
    so.vectorize(oii)


def schedule_cpu(op: Conv2dOp, s, knobs: CpuConvKnobs | None = None) -> None:
    """Register-tiled direct convolution (see the module docstring); ``knobs`` (their ``ob``/``xt`` must be the
    spec's: build the op from ``knobs.apply(spec)``): default :func:`default_cpu_knobs`. (Tried on ResNet-18 and
    dropped: a whole channel block's accumulators in L1 per chunk of 32 input channels, for weight reuse on 7x7 and
    14x14 layers, measured slower; the accumulators then live in memory instead of registers.)"""
    spec = op.spec
    ob = spec.block
    if knobs is not None and knobs.algo not in ("direct", "pixels"):
        raise te.TeError(f"schedule_cpu: knobs for the {knobs.algo} conv (compiler.topi.conv2d_winograd schedules "
                         "it); this schedule takes algo='direct' or 'pixels'")
    if knobs is not None and (knobs.algo == "pixels") != spec.pixel_vectors:
        raise te.TeError("schedule_cpu: the knobs' layout (algo 'pixels': pixel vectors, 'direct': channel vectors) "
                         "is not the op's: build the op from knobs.apply(spec)")
    if spec.pixel_vectors:
        if knobs is not None and knobs.apply(dataclasses.replace(spec, pixel_vectors=False, oc_block=0,
                                                                 pixel_tile=0, row_tile=0)) != spec:
            raise te.TeError(f"schedule_cpu: knobs {knobs} do not match the op's spec: build the op from "
                             "knobs.apply(spec)")
        par = pixel_parallel(spec) if knobs is None else knobs.parallel == "outer"
        if spec.depthwise:
            _schedule_depthwise_rows(op, s, par)
        elif spec.pointwise:
            _schedule_pointwise(op, s, par)
        else:
            _schedule_direct_rows(op, s, par)
        return
    k = knobs or default_cpu_knobs(spec)
    if knobs is not None and (spec.oc_block, spec.pixel_tile) != (k.ob, k.xt):
        raise te.TeError(f"schedule_cpu: knobs ob={k.ob} xt={k.xt} do not match the op's spec (oc_block "
                         f"{spec.oc_block}, pixel_tile {spec.pixel_tile}): build the op from knobs.apply(spec)")
    if op.pad is not op.inputs[0]:
        sp = s[op.pad]
        if _size(op.pad.shape) >= PAD_PARALLEL_MIN:  # (channels or blocks) x rows: a 3-channel stem splits evenly
            sp.parallel(sp.fuse(*sp.leaf_iter_vars[1:3]))
        if spec.in_block > 1:
            _schedule_blocked_copy(sp, spec.in_block)
        elif spec.depthwise and ob > 1:
            _schedule_blocked_copy(sp, ob)
        elif spec.flat and spec.dtype == "float32":
            _schedule_plain_copy(sp, spec.stride[1])
    so = s[op.out]
    xt = spec.tile
    px_outer = spec.flat and k.parallel != "outer" and pixels_outer(spec)
    if spec.flat:
        n, oo, oi, q = so.leaf_iter_vars
        xo, xi = so.split(q, xt)
        so.reorder(*((n, xo, oo, oi, xi) if px_outer else (n, oo, xo, oi, xi)))
    else:
        n, oo, oi, y, x = so.leaf_iter_vars
        xo, xi = so.split(x, xt)
        so.reorder(n, oo, y, xo, oi, xi)
    _transposed_output(so, oi, xi, spec)
    at = oo if px_outer else xo
    if k.parallel == "fused":  # (channel block, pixel tile) pairs (flat) or (channel block, row): many even chunks
        if spec.flat:
            at = so.fuse(xo, oo) if px_outer else so.fuse(oo, xo)
            so.parallel(at)
        else:
            so.parallel(so.fuse(oo, y))
    elif k.parallel == "outer":
        so.parallel(oo)
    sc = s[op.conv]
    sc.set_scope("local")  # the XT x OB accumulator tile: registers
    sc.compute_at(so, at)
    if spec.flat:
        cn, coo, cx, coi, *red = sc.leaf_iter_vars
    else:
        cn, coo, cy, cx, coi, *red = sc.leaf_iter_vars
    kx_axis = red[2] if len(red) >= 3 else red[-1]  # (rc, ky, kx[, channel in block]) or depthwise (ky, kx)
    if k.order == "ky_kx_rc" and len(red) >= 3:  # in_block: the channel within the block stays innermost
        red = [red[1], red[2], red[0], *red[3:]]
    if spec.flat:
        sc.reorder(cn, coo, *red, cx, coi)
    else:
        sc.reorder(cn, coo, cy, *red, cx, coi)
    if k.unroll >= 1:
        sc.unroll(cx)
    if k.unroll >= 2 and spec.kw > 1:
        sc.unroll(kx_axis)
    elif k.unroll >= 1 and spec.in_block:  # CB channels x the tile: one straight run of loads and FMAs (kx and
        sc.unroll(red[-1])                 # the channel both unrolled measured 4x slower: spills)
    if ob > 1:
        sc.vectorize(coi)


def _schedule_plain_copy(sp, sx: int) -> None:
    """The flat layouts' plain padded copy (NCHW; stride SX > 1: columns de-interleaved by phase, ``(N, C, Hp, SX,
    Wq)``) as vector rows: the phases unrolled (each piece's column mask a constant), the columns vectorized (masked
    window loads at the borders, a wide load + shuffle per stride-2 window)."""
    if sx > 1:
        sp.unroll(sp.leaf_iter_vars[-2])
    sp.vectorize(sp.leaf_iter_vars[-1])


def _schedule_blocked_copy(sp, cb: int) -> None:
    """The channel-blocked padded copy (``in_block``, ``(..., columns, CB)`` from NCHW data): columns in groups of
    CB, each group's CB columns unrolled around the CB channels as one vector, so the code generator reads the
    CB x CB block as CB row loads and transposes it in registers (``codegen._transposed_loads``) instead of
    gathering every element from CB planes. One thread, the copy alone (min of 160 calls, both in turn): 64 x 56 x
    56 0.14-0.20 -> 0.07 ms."""
    x, ci = sp.leaf_iter_vars[-2:]
    if cb in (4, 8, 16) and x.extent >= cb:
        xo, xi = sp.split(x, cb)
        sp.reorder(xo, xi, ci)
        sp.unroll(xi)
    sp.vectorize(ci)


POINTWISE_BLOCK_BYTES = 32 << 10  # a pixel block's input panel (C x block pixels, float32): about a core's L1d
POINTWISE_MIN_BLOCKS = 8  # pixel blocks at least (the parallel loop's chunks), where the tiles allow


def pointwise_block_tiles(spec: Conv2dSpec) -> int:
    """Pixel tiles per block of a ``pixel_vectors`` 1x1 conv (pixels outer): the most tiles dividing the tile count
    whose input panel (``C`` x the block's pixels, float32) fits :data:`POINTWISE_BLOCK_BYTES` and that leave at
    least :data:`POINTWISE_MIN_BLOCKS` blocks for the parallel loop, at least one. Each
    channel tile then stores OT runs of the block's pixels, not one tile's pixels to all ``O`` channel planes
    (MobileNetV2's 16->96 112x112 expand conv, two threads, min of 100 alternating calls: 0.92 -> 0.47 ms with 28
    tiles; 24->144 56x56 0.42 -> 0.27; 144->24 56x56 0.33 -> 0.26 with 2; 14x14 maps keep one: 13 tiles)."""
    tiles = -(-spec.oh * spec.ow // spec.tile)
    return block_tiles(tiles, spec.c * spec.tile * 4, POINTWISE_BLOCK_BYTES, POINTWISE_MIN_BLOCKS) or 1


def block_tiles(tiles: int, tile_bytes: int, budget: int, min_blocks: int) -> int:
    """The most tiles per block that divide ``tiles``, whose ``tile_bytes`` each fit ``budget`` bytes together and
    that leave at least ``min_blocks`` blocks; 0 where none does (the float32 and int8 1x1 convs' pixel blocks)."""
    fit = min(budget // tile_bytes, tiles // min_blocks)
    return max((t for t in range(1, fit + 1) if tiles % t == 0), default=0)


def _schedule_pointwise(op: Conv2dOp, s, parallel: bool) -> None:
    """``pixel_vectors``: per pixel tile and channel tile, an OT x PV accumulator tile in registers over the input
    channels (per channel: PV/lanes vector loads, OT weight broadcasts); the epilogue stores whole pixel vectors.
    Loop order: pixel blocks outer (:func:`pointwise_block_tiles` tiles; the block's input panel stays in L1 over
    the channel tiles, and each channel tile writes OT runs of the block's pixels rather than one tile's pixels
    to every output channel) when the input is the larger operand, else channel tiles outer (each C x OT weight
    panel read once: 7x7 maps with 960 channels ran 2x slower pixel tiles outer). The parallel loop is the outer
    one."""
    spec = op.spec
    so = s[op.out]
    n, oo, oi, q = so.leaf_iter_vars
    qo, qi = so.split(q, spec.tile)
    pixels_outer = spec.oh * spec.ow >= spec.o
    if pixels_outer:
        qb, qo = so.split(qo, pointwise_block_tiles(spec))
        so.reorder(n, qb, oo, qo, oi, qi)
    else:
        so.reorder(n, oo, qo, oi, qi)
    outer = qb if pixels_outer else oo
    if parallel and outer.extent > 1:
        so.parallel(outer)
    so.vectorize(qi)
    if op.pad is not op.inputs[0]:  # the zero-padded input panel: per pixel block (C x its pixels) or once
        sp = s[op.pad]
        if pixels_outer:
            sp.set_scope("local")
            sp.compute_at(so, qb)
        sp.vectorize(sp.leaf_iter_vars[-1])
    sc = s[op.conv]
    sc.set_scope("local")
    sc.compute_at(so, qo)
    cn, coo, coi, cq, rc = sc.leaf_iter_vars
    sc.reorder(cn, coo, rc, coi, cq)
    sc.unroll(coi)
    sc.vectorize(cq)


DW_PARALLEL_MIN_MACS = 1 << 18  # pixel-vector depthwise convs: parallel over channels from here (a 7x7 map of
# 960 channels, 0.08 ms on one thread, gains on two: the hand-off costs ~10 us)


DW_PLANE_L1_BYTES = 32 << 10  # a depthwise channel's padded plane above this (a core's L1d) is built in row bands


def depthwise_plane_bands(spec: Conv2dSpec, pad_shape: tuple) -> bool:
    """Whether a ``pixel_vectors`` depthwise conv builds its channel's padded plane per output row tile (the rows
    that tile reads) rather than whole: where the plane (``pad_shape`` ``(N, C, Hp, SX, Wq)``) outgrows L1 and the
    rows two neighbouring tiles both read are at most a quarter of a band's (MobileNetV2's 96-channel 112x112
    stride-2 layer, 52 KB planes: 0.28-0.36 -> 0.24 ms on one thread; a stride-1 112x112 layer with 4-row tiles
    re-reads half its rows and gained nothing)."""
    plane = int(np.prod(pad_shape[2:])) * 4
    sy, dy = spec.stride[0], spec.dilations[0]
    band = (spec.row_tile - 1) * sy + (spec.kh - 1) * dy + 1
    return plane > DW_PLANE_L1_BYTES and spec.oh > spec.row_tile and 4 * (band - spec.row_tile * sy) <= band


def _schedule_depthwise_rows(op: Conv2dOp, s, parallel: bool) -> None:
    """``pixel_vectors`` depthwise: parallel over (image, channel); per channel its padded, phase-split plane is
    built in a local buffer right before use (per row tile where :func:`depthwise_plane_bands`), then per output
    row and pixel tile an XT-pixel accumulator
    (XT/lanes vectors) runs the KH x KW taps (weights broadcast, input rows contiguous); the epilogue stores whole
    rows (guarded in a ragged last tile)."""
    spec = op.spec
    so = s[op.out]
    n, c, z, y, x = so.leaf_iter_vars
    yo, yi = so.split(y, spec.row_tile)
    xo, xi = so.split(x, spec.tile)
    so.reorder(n, c, z, yo, xo, yi, xi)
    nc = so.fuse(n, c)
    if parallel and spec.n * spec.c > 1:
        so.parallel(nc)
    so.vectorize(xi)  # a ragged tile's stores: whole vectors where every lane is inside, else one by one
    sp = s[op.pad]
    sp.set_scope("local")
    sp.compute_at(so, yo if depthwise_plane_bands(spec, op.pad.shape) else nc)
    sp.unroll(sp.leaf_iter_vars[-2])  # the stride phases: each piece's column mask a constant
    sp.vectorize(sp.leaf_iter_vars[-1])  # whole padded rows: masked (and for stride 2 de-interleaved) row loads
    sc = s[op.conv]
    sc.set_scope("local")
    sc.compute_at(so, xo)
    cn, cc, cz, cy, cx, ky, kx = sc.leaf_iter_vars
    sc.reorder(cn, cc, cz, ky, kx, cy, cx)
    # sc.unroll(ky)  # all taps unrolled: a padded row's vector serves several output rows (loads merge)
    sc.unroll(kx)
    sc.unroll(cy)
    sc.vectorize(cx)


def _schedule_direct_rows(op: Conv2dOp, s, parallel: bool) -> None:
    """``pixel_vectors`` direct conv with a small reduction (a 3-channel stem): the padded, phase-split input
    computed once (vector rows, parallel over channels when large); per (channel tile, row) in parallel and pixel
    tile, an OT x XT accumulator tile over the C x KH x KW taps (XT/lanes contiguous loads and OT weight
    broadcasts each); the epilogue stores whole row vectors (no transpose)."""
    spec = op.spec
    sp = s[op.pad]
    pn, pc, py = sp.leaf_iter_vars[:3]
    if _size(op.pad.shape) >= PAD_PARALLEL_MIN:  # (image, channel, row): 3 channels alone split 2:1 on two threads
        sp.parallel(sp.fuse(sp.fuse(pn, pc), py))
    sp.unroll(sp.leaf_iter_vars[-2])  # the stride phases: each piece's column mask a constant
    sp.vectorize(sp.leaf_iter_vars[-1])
    so = s[op.out]
    n, oo, oi, y, x = so.leaf_iter_vars
    xo, xi = so.split(x, spec.tile)
    so.reorder(n, oo, y, xo, oi, xi)
    at = so.fuse(oo, y)
    if parallel:
        so.parallel(at)
    so.vectorize(xi)
    sc = s[op.conv]
    sc.set_scope("local")
    sc.compute_at(so, xo)
    cn, coo, coi, cy, cx, rc, ky, kx = sc.leaf_iter_vars
    sc.reorder(cn, coo, cy, rc, ky, kx, coi, cx)
    sc.unroll(kx)
    sc.unroll(coi)
    sc.vectorize(cx)


MAX_GPU_THREADS = 1024
MAX_GPU_ACCUMULATORS = 64  # xt x yt registers of accumulators a thread may hold (beyond: spills on every GPU)


@dataclass(frozen=True)
class DirectGpuKnobs:
    """Knobs of :func:`schedule_gpu` for grouped convs (depthwise and the others that do not go to
    :mod:`compiler.topi.conv2d_gpu`): ``ob`` output channels per block of the layout (the threads' channel axis;
    the weight is packed for it), at most ``threads`` threads a block (``threads // ob`` pixel columns, fewer where
    a row has fewer tiles), ``xt`` x ``yt`` output pixels x rows per thread (a register tile: the accumulators in
    registers, then stored), ``unroll`` the taps. :func:`default_gpu_knobs` (``xt = yt = 1``, 256 threads, the
    spec's block, taps not unrolled) is the schedule of a build without knobs."""

    ob: int = OC_BLOCK
    threads: int = GPU_THREADS
    xt: int = 1
    yt: int = 1
    unroll: bool = False

    def check(self, spec: Conv2dSpec) -> None:
        """Raise :class:`te.TeError` (a ValueError) naming the knob that does not fit ``spec``."""
        if spec.groups < 2 or spec.pixel_vectors:
            raise te.TeError(f"conv2d_direct: DirectGpuKnobs take grouped convs (groups > 1, not pixel_vectors); got "
                             f"groups={spec.groups} (one-group convs take conv2d_gpu.GpuConvKnobs)")
        for name in ("ob", "threads", "xt", "yt"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise te.TeError(f"conv2d_direct: knob {name} must be a positive int, got {v!r}")
        if not isinstance(self.unroll, bool):
            raise te.TeError(f"conv2d_direct: knob unroll must be a bool, got {self.unroll!r}")
        if spec.depthwise and spec.o % self.ob:
            raise te.TeError(f"conv2d_direct: knob ob={self.ob} must divide the {spec.o} channels")
        if not spec.depthwise and spec.og % self.ob:
            raise te.TeError(f"conv2d_direct: knob ob={self.ob} must divide the {spec.og} output channels a group")
        if self.threads > MAX_GPU_THREADS or self.threads % self.ob:
            raise te.TeError(f"conv2d_direct: knob threads={self.threads} must be a multiple of ob={self.ob} and at "
                             f"most {MAX_GPU_THREADS}")
        if self.xt > spec.ow or self.yt > spec.oh:
            raise te.TeError(f"conv2d_direct: knobs xt={self.xt} and yt={self.yt} must be at most the output's "
                             f"{spec.ow} pixels and {spec.oh} rows")
        if self.xt * self.yt > MAX_GPU_ACCUMULATORS:
            raise te.TeError(f"conv2d_direct: xt x yt = {self.xt * self.yt} accumulators a thread; at most "
                             f"{MAX_GPU_ACCUMULATORS}")

    def apply(self, spec: Conv2dSpec) -> Conv2dSpec:
        """``spec`` with this layout block (checked)."""
        self.check(spec)
        return dataclasses.replace(spec, oc_block=self.ob)

    def columns(self, spec: Conv2dSpec) -> int:
        """Thread columns of a block: pixel tiles of a row (``xt`` pixels each), at most ``threads // ob``."""
        return max(1, min(-(-spec.ow // self.xt), self.threads // self.ob))


def default_gpu_knobs(spec: Conv2dSpec) -> DirectGpuKnobs:
    """The knobs of the untuned schedule: the spec's channel block, one output a thread, 256 threads at most."""
    return DirectGpuKnobs(spec.block)


def schedule_gpu(op: Conv2dOp, s, knobs: DirectGpuKnobs | None = None) -> None:
    """Blocks over (batch x channel block, row tile), threads over output pixel tiles x channels in the block.
    ``knobs`` (grouped convs; ``op`` built for ``knobs.apply(spec)``): the block's threads, each thread's register
    tile of ``xt`` x ``yt`` outputs (accumulated in registers, the taps outermost) and the taps' unrolling; None:
    ``xt = yt = 1``, ``GPU_THREADS // ob`` columns."""
    spec = op.spec
    if spec.pixel_vectors:
        raise te.TeError("conv2d: pixel_vectors is the CPU schedule's layout; the GPU schedule takes the spec "
                         "without it")
    if knobs is not None:
        knobs.check(spec)
        if knobs.ob != spec.block:
            raise te.TeError(f"conv2d_direct: knobs for ob={knobs.ob}, but the op was built with blocks of "
                             f"{spec.block} channels (build it for knobs.apply(spec))")
    if op.pad is not op.inputs[0]:
        schedule_injective_gpu(s, op.pad)
    if knobs is not None and (knobs.xt > 1 or knobs.yt > 1):
        _schedule_gpu_tiles(op, s, knobs)
    else:
        _schedule_gpu_plain(op, s, knobs)
    schedule_injective_gpu(s, op.out)


def _schedule_gpu_plain(op: Conv2dOp, s, knobs: DirectGpuKnobs | None) -> None:
    """One output a thread (the untuned schedule; ``knobs``: its block size and the taps' unrolling)."""
    spec = op.spec
    sc = s[op.conv]
    if spec.flat:  # one pixel axis
        n, oo, q, oi = sc.leaf_iter_vars[:4]
        sc.bind(sc.fuse(n, oo), "blockIdx.y")
        xo, xi = sc.split(q, max(1, min(spec.oh * spec.ow, GPU_THREADS // spec.block)))
        sc.bind(xo, "blockIdx.x")
        sc.bind(sc.fuse(xi, oi), "threadIdx.x")
    else:
        n, oo, y, x, oi = sc.leaf_iter_vars[:5]
        sc.bind(sc.fuse(n, oo), "blockIdx.y")
        cols = knobs.columns(spec) if knobs is not None else max(1, min(spec.ow, GPU_THREADS // spec.block))
        xo, xi = sc.split(x, cols)
        sc.bind(sc.fuse(y, xo), "blockIdx.x")
        sc.bind(sc.fuse(xi, oi), "threadIdx.x")
    if knobs is not None and knobs.unroll:
        for a in [v for v in sc.leaf_iter_vars if v.kind == "reduce"][-2:]:  # ky, kx
            sc.unroll(a)


def _schedule_gpu_tiles(op: Conv2dOp, s, k: DirectGpuKnobs) -> None:
    """Register tiles: each thread accumulates ``yt`` x ``xt`` outputs of one channel in registers (a local cache of
    ``conv``, the taps outermost so neighbouring outputs reuse a loaded input row), then stores them."""
    spec = op.spec
    acc = s.cache_write(op.conv, "local")
    sc = s[op.conv]
    n, oo, y, x, oi = sc.leaf_iter_vars
    yo, yv = sc.split(y, k.yt)
    xo, xi = sc.split(x, min(spec.ow, k.xt * k.columns(spec)))
    xi, xv = sc.split(xi, k.xt)
    sc.reorder(n, oo, yo, xo, xi, oi, yv, xv)
    sc.bind(sc.fuse(n, oo), "blockIdx.y")
    sc.bind(sc.fuse(yo, xo), "blockIdx.x")
    thread = sc.fuse(xi, oi)
    sc.bind(thread, "threadIdx.x")
    sc.unroll(yv)
    sc.unroll(xv)
    a = s[acc]
    a.compute_at(sc, thread)
    data = [v for v in a.leaf_iter_vars if v.kind == "data"]
    red = [v for v in a.leaf_iter_vars if v.kind == "reduce"]
    a.reorder(*red, *data)
    for d in data[-3:]:  # y, x, the one channel
        a.unroll(d)
    if k.unroll:
        for r in red[-2:]:  # ky, kx (a grouped conv's channels stay a loop)
            a.unroll(r)
