"""int8 conv2d on the accelerator's packed activation layout, for the CPU target (no repacking between layers).

Input and output stay in the packed layout ``(N/B, C/BI, H, W, B, BI)`` that the int8 pipeline passes between
layers (:func:`jit_runtime.host_ops.layout.pack_activation`), so a layer reads its producer's output as is and
writes what the next layer reads: no numpy unpack/pack around the kernel.

The reduction runs on pairs of input channels in int16: the padded input ``pad`` is int16 in the input's
blocking, ``(N, C/BI, H, SX, W/SX, BI)`` (columns de-interleaved by stride phase so a tile's taps stay
contiguous; the copy is one BI-lane vector per pixel), the weights are packed once to
``(O/OB, C/BI, KH, KW, BI/2, OB, 2)`` int16 (the reduction's order), and the accumulator update is
``int32(x0) * int32(w0) + int32(x1) * int32(w1)``: the LLVM code generator emits that as ``pmaddwd`` (the
target's widest: SSE2 / AVX2 / AVX-512BW), which with the accumulator add becomes ``vpdpwssd`` where the target
has AVX-VNNI or AVX512-VNNI. Exact: int8 x int8 products and their pair sums fit int16 x int16 -> int32
(no saturation, unlike ``pmaddubsw``); the accumulator wraps in int32 like the accelerator's.

Where the target has an int8 dot product (AVX512-VNNI, AVX-VNNI: :func:`compiler.backend.llvm.host.int8_dot`) the
reduction runs on quads instead (``PackedConvSpec.quads``): ``pad`` holds ``x + 128`` as uint8 (the input's
sign bit flipped), the weights are packed to ``(O/OB, C/BI, KH, KW, BI/4, OB, 4)`` int8 and each step is
``sum_k int32(u_k) * int32(w_k)`` over four channels, which the code generator emits as one ``vpdpbusd`` (u8 x s8
quads into int32: exact, no saturation) with the pixel's quad broadcast from memory: half the instructions and
half the copy of the int16 pairs. The ``+ 128`` adds ``128 * sum(w)`` per output channel (padding included: it
holds the zero point + 128), which the caller subtracts through the requant bias (:func:`u8_offset`).

Register tiles as the float32 schedule (:mod:`compiler.topi.conv2d_direct`): XT output pixels (over the
flattened ``y * OW + x``, the last tile ragged over zero rows of ``pad``) x OB = 16 output channels,
``compute_at`` the output stage, which applies the requant epilogue (:mod:`compiler.topi.requant_int`) and
stores int8 straight into the packed output. 1x1 unit-stride convs with few input channels (a short reduction, where
the copy would weigh) read the packed input in place (no ``pad``); wider ones copy over the flattened pixels,
per pixel block into a local buffer where the blocks allow (:meth:`PackedConvSpec.panel_tiles`). Depthwise convs: OB = 16 channels per vector from an
int8 ``pad`` in the same blocking, int32 products (``pmaddwd`` with a zero partner), register tiles of up to XT
pixels along one output row (parallel over channel block x row; the row's last tile ragged over zero columns).
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import numpy as np

from compiler import te
from compiler.te import Tensor
from compiler.topi.conv2d_direct import Conv2dSpec, block_tiles, flat_pad_extent, row_pad_extent
from compiler.topi.injective import COPY_PARALLEL_ELEMENTS

OB = 16  # output channels per register tile (int32 lanes: two AVX2 vectors)
ACC_REGS = {128: 8, 256: 12, 512: 24}  # accumulator vectors per tile by the target's vector width
DIRECT_MAX_CHANNELS = 16  # 1x1 convs read their packed int8 input in place up to this many input channels; above,
# the int16 copy's 6-pixel tiles with one-load pair broadcasts win (measured 0.72-0.87x the time from 64 channels on;
# at 24-32 channels 0.87-0.96x (MobileNetV2's 24x56x56 -> 144: 0.37 -> 0.32 ms, 32x28x28 -> 192: 0.128 -> 0.114,
# min of 4 alternating runs, one thread); equal at 16, where the copy weighs against 8 pair steps)
WEIGHT_INT8_MAX_PIXELS = 64  # output pixels (all images) up to which the pair weights stay int8 (1280x1000 fc:
# 0.22 -> 0.16 ms, 7x7 maps ~0.9x; measured 1 thread, loaded)
# parallel loops for stages of ~20-30 us of one thread's work (the native hand-off to a spinning worker costs a few
# us, far more on a loaded machine; the Module wakes the workers as a run starts): convs run ~40 GMAC/s, depthwise
# ~8-15 GMAC/s, padded copies ~14 G elements/s (injective.COPY_PARALLEL_ELEMENTS)
CONV_PARALLEL_MIN_MACS = 1 << 20  # (the 1280 x 1000 classifier: 1.3M)
DW_PARALLEL_MIN_MACS = 3 << 16  # (MobileNetV2's 14x14 and 7x7 depthwise layers: 0.25-0.68M; were serial)


@dataclass(frozen=True)
class PackedConvSpec:
    """An int8 conv (``conv``: the unpacked geometry, channels padded to the blocks) on packed activations with
    ``batch`` x ``block_in`` input blocks and ``batch`` x ``block_out`` output blocks."""

    conv: Conv2dSpec
    batch: int
    block_in: int
    block_out: int
    pairs: int = 0  # one input block whose weights are zero past ``2 * pairs`` channels (a 3-channel stem): 0 = all
    quads: bool = False  # u8 x s8 channel quads (``vpdpbusd``) instead of int16 pairs (see the module docstring)

    @property
    def group(self) -> int:
        """Input channels per reduction step: 4 (quads) or 2 (pairs)."""
        return 4 if self.quads else 2

    @property
    def reduce_steps(self) -> int:
        """Channel groups (:attr:`group`) the reduction runs over per input block."""
        return -(-2 * self.pairs // self.group) if self.pairs else self.block_in // self.group

    def check(self) -> None:
        """Raise ``TeError`` when this kernel cannot compute the conv (say what is allowed)."""
        c = self.conv
        c.check()
        if c.dtype != "int8":
            raise te.TeError(f"packed int8 conv2d: dtype {c.dtype!r}; only int8")
        if c.dilations != (1, 1):
            raise te.TeError(f"packed int8 conv2d: dilations {c.dilations}; only (1, 1)")
        if not (c.groups == 1 or c.depthwise):
            raise te.TeError(f"packed int8 conv2d: {c.groups} groups of {c.cg} channels; only 1 group or depthwise")
        if self.block_out % OB or c.o % self.block_out or c.n % self.batch or c.c % self.block_in:
            raise te.TeError(f"packed int8 conv2d: {c.o} outputs in blocks of {self.block_out} (a multiple of {OB}), "
                             f"{c.c} inputs in blocks of {self.block_in}, batch {c.n} in blocks of {self.batch}")
        if not c.depthwise and (c.c % 2 or self.block_in % 2):
            raise te.TeError(f"packed int8 conv2d: {c.c} input channels in blocks of {self.block_in}; both must be "
                             f"even")
        if self.quads and (c.depthwise or c.c % 4 or self.block_in % 4):
            raise te.TeError(f"packed int8 conv2d: channel quads need {c.c} input channels in blocks of "
                             f"{self.block_in}, both multiples of 4, and no depthwise conv")
        if self.pairs and (c.depthwise or c.c != self.block_in or not 0 < 2 * self.pairs <= self.block_in):
            raise te.TeError(f"packed int8 conv2d: pairs={self.pairs} needs one input block of {self.block_in} "
                             f"channels (got {c.c}) and 1..{self.block_in // 2} pairs")
        if c.depthwise and (self.block_in % OB or self.block_out != OB or self.batch != 1):
            raise te.TeError(f"packed int8 depthwise conv2d: input blocks of {self.block_in}, output blocks of "
                             f"{self.block_out}, batch blocks of {self.batch}; allowed: a multiple of {OB}, {OB} and 1")

    @property
    def pointwise(self) -> bool:
        """1x1, unit stride, no padding, batch blocks of 1 and a pixel count that some tile of 3..6 pixels divides
        (no rows to read past the end): the kernel reads the packed input over flattened pixels, in place
        (:attr:`direct`) or through an int16 copy of the same shape (``(N, C/BI, H*W, BI)``)."""
        c = self.conv
        return ((c.kh, c.kw, c.stride) == (1, 1, (1, 1)) and not any(c.pads) and self.batch == 1 and not c.depthwise
                and any((c.oh * c.ow) % xt == 0 for xt in range(3, 7)))

    @property
    def direct(self) -> bool:
        """:attr:`pointwise` with at most ``DIRECT_MAX_CHANNELS`` input channels: the kernel reads the packed
        input itself (no ``pad``)."""
        return self.pointwise and self.conv.c <= DIRECT_MAX_CHANNELS and not self.quads

    def panel_tiles(self, vector_bits: int) -> int:
        """Pixel tiles per block of a :attr:`pointwise` conv with an int16 copy: the most dividing the tile count
        whose copy (``C`` x the block's pixels, int16) fits :data:`PANEL_BYTES` and that leave at least
        :data:`PANEL_MIN_BLOCKS` blocks; 0 where no such block has two tiles (or no copy is made). Each block's
        copy is then made in a local buffer right before its output blocks read it (L1), not as a whole-map
        pass through memory (MobileNetV2's 144->24 56x56 layer: a 0.9 MB int16 copy)."""
        if not self.pointwise or self.direct:
            return 0
        xt = self.tile(vector_bits)
        best = block_tiles(self.conv.oh * self.conv.ow // xt, self.pad_bytes * self.conv.c * xt, PANEL_BYTES,
                           PANEL_MIN_BLOCKS)
        return best if best >= 2 else 0

    @property
    def pad_dtype(self) -> str:
        """The padded copy's dtype: uint8 (quads: ``x + 128``), int8 (depthwise) or int16 (pairs)."""
        return "uint8" if self.quads else "int8" if self.conv.depthwise else "int16"

    @property
    def pad_bytes(self) -> int:
        return 2 if self.pad_dtype == "int16" else 1

    @property
    def weight_dtype(self) -> str:
        """int16 pairs (one load per pair vector), or int8 where few pixels reuse each weight load (a dense layer,
        7x7 maps): the weights' memory traffic then weighs more than one sign extension per load; quads: int8."""
        c = self.conv
        return "int8" if self.quads or (not c.depthwise and c.n * c.oh * c.ow <= WEIGHT_INT8_MAX_PIXELS) else "int16"

    @property
    def out_shape(self) -> tuple[int, ...]:
        """The kernel's output shape: the packed layout (pixels flattened unless depthwise; the same memory)."""
        c = self.conv
        if c.depthwise:
            return (c.n, c.o // self.block_out, c.oh, c.ow, 1, self.block_out)
        return (c.n // self.batch, c.o // self.block_out, c.oh * c.ow, self.batch, self.block_out)

    @property
    def data_shape(self) -> tuple[int, ...]:
        """The kernel's input shape: the packed layout, with the pixels flattened when ``direct``."""
        c = self.conv
        if self.pointwise:
            return (c.n, c.c // self.block_in, c.h * c.w, 1, self.block_in)
        return (c.n // self.batch, c.c // self.block_in, c.h, c.w, self.batch, self.block_in)

    def tile(self, vector_bits: int) -> int:
        """Output pixels per register tile (``OB / lanes * XT`` accumulator vectors fill the register budget)."""
        lanes = vector_bits // 32
        regs = ACC_REGS.get(vector_bits, 12)
        if self.conv.depthwise:  # each tap's weight and input are vectors too: leave them registers (no spills)
            regs = regs * 2 // 3
        xt = min(max(1, regs * lanes // OB), self.conv.oh * self.conv.ow)
        if self.conv.depthwise:  # along one output row, the last tile ragged: fewest (tiles x (pixels + 2)), where
            ow = self.conv.ow  # 2 ~ a tile's fixed cost (its taps' weight vectors, the loop)
            return min(range(1, min(xt, ow) + 1), key=lambda d: (-(-ow // d) * (d + 2), -d))
        if self.pointwise:  # a divisor of the pixel count: every tile full, none reads past the input
            xt = next((d for d in range(xt, 0, -1) if (self.conv.oh * self.conv.ow) % d == 0), 1)
        return xt


def pack_weight_pairs(spec: PackedConvSpec, w_oihw: np.ndarray) -> np.ndarray:
    """OIHW int8 weights -> ``(O/OB, C/BI, KH, KW, BI/G, OB, G)`` (G = :attr:`PackedConvSpec.group`) in
    :attr:`PackedConvSpec.weight_dtype` (depthwise: ``(O/OB, KH, KW, OB)``), in the order the reduction reads them."""
    c = spec.conv
    w = np.asarray(w_oihw).astype(spec.weight_dtype)
    if c.depthwise:
        return np.ascontiguousarray(w[:, 0].reshape(c.o // OB, OB, c.kh, c.kw).transpose(0, 2, 3, 1))
    bi, g = spec.block_in, spec.group
    wp = w.reshape(c.o // OB, OB, c.c // bi, bi // g, g, c.kh, c.kw).transpose(0, 2, 5, 6, 3, 1, 4)
    return np.ascontiguousarray(wp[:, :, :, :, :spec.reduce_steps])


def u8_offset(spec: PackedConvSpec, w_oihw: np.ndarray) -> np.ndarray:
    """Per output channel, what the quads' ``x + 128`` adds to the int32 sum: ``128 * sum(w)`` (int64; zeros
    for pairs). The caller subtracts it from the requant bias (both wrap in int32: the same result)."""
    w = np.asarray(w_oihw, np.int64)
    if not spec.quads:
        return np.zeros(spec.conv.o, np.int64)
    return 128 * w.reshape(w.shape[0], -1).sum(axis=1)


def used_pairs(spec: PackedConvSpec, w_oihw: np.ndarray) -> int:
    """For one input block: the channel pairs up to the last with a non-zero weight (0: all; the block is full)."""
    c = spec.conv
    if c.depthwise or c.c != spec.block_in:
        return 0
    nz = np.flatnonzero(np.any(np.asarray(w_oihw) != 0, axis=(0, 2, 3)))
    pairs = max(1, -(-(int(nz[-1]) + 1) // 2)) if nz.size else 1
    return 0 if 2 * pairs >= spec.block_in else pairs


@dataclass
class PackedConvOp:
    """The tensors of one packed int8 conv: ``inputs`` in call order (data, weight, requant arrays), the stages,
    the register tile's pixel count ``xt`` and the pixel tiles per block of a per-block int16 copy (``panel``,
    :meth:`PackedConvSpec.panel_tiles`; 0: none)."""

    spec: PackedConvSpec
    inputs: list[Tensor]
    pad: Tensor
    conv: Tensor
    out: Tensor
    xt: int
    panel: int = 0


@functools.lru_cache(maxsize=1024)
def residual_error(params) -> str | None:
    """None when a QAdd with ``params`` (:class:`jit_runtime.host_ops.int_elementwise.QAddParams`) fuses into the
    packed conv's epilogue in int32 exactly like ``qadd``; else why not."""
    p = params
    if not 0 <= p.shift <= 31:
        return f"QAdd shift {p.shift}: the fused epilogue rounds in int32 (shift 0..31)"
    if not all(-(1 << 15) <= v < (1 << 15) for v in (p.a_mult, p.b_mult)) or not all(
            -256 <= v <= 255 for v in (p.a_zp, p.b_zp)):
        return f"QAdd multipliers {p.a_mult}, {p.b_mult} (int16) and zero points {p.a_zp}, {p.b_zp} (-256..255)"
    if not -128 <= p.out_min <= p.out_max <= 127 or not -(1 << 15) <= p.out_zp < (1 << 15):
        return f"QAdd output range [{p.out_min}, {p.out_max}] must lie in int8"
    return None


def _residual_epilogue(fn, params, conv_is_a: bool, other: Tensor):
    """``fn(acc, channel)`` (the conv's int8 result) followed by ``qadd(conv, other)`` (``conv_is_a``) or
    ``qadd(other, conv)``, as ``epi(acc, channel, index)``: ``a * ma + b * mb + (round - za * ma - zb * mb)``, then
    the shift, ``+ zy`` and the clip, in int32 (|terms| < 2**24: no wrap, the same values as ``qadd``)."""
    p = params
    i32 = lambda v: te.const(int(v), "int32")  # noqa: E731
    rnd = (1 << (p.shift - 1)) if p.shift else 0
    const = rnd - p.a_zp * p.a_mult - p.b_zp * p.b_mult

    def epi(acc, c, idx):
        y = fn(acc, c).astype("int32")
        r = other[idx].astype("int32")
        a, b = (y, r) if conv_is_a else (r, y)
        v = a * i32(p.a_mult) + b * i32(p.b_mult) + i32(const)
        if p.shift:
            v = v >> i32(p.shift)
        v = te.min_(te.max_(v + i32(p.out_zp), i32(p.out_min)), i32(p.out_max))
        return v.astype("int8")
    return epi


def conv2d_packed(spec: PackedConvSpec, stage: tuple, vector_bits: int = 256, residual=None) -> PackedConvOp:
    """The compute (see the module docstring). ``stage``: ``(extra placeholders, fn(acc, channel), "int8")``, the
    requant epilogue of :func:`compiler.topi.requant_int.requant_stage`; inputs: data, weight, then ``extra``.
    ``residual``: ``(QAddParams, conv_is_a)``: the int8 result goes through that QAdd with one more int8 input
    ``other`` (packed like the output, after ``extra``), fused in the output stage (see :func:`residual_error`)."""
    spec.check()
    extra, fn, out_dt = stage
    out_shape = spec.out_shape
    if residual is not None:
        why = residual_error(residual[0])
        if why is not None or out_dt != "int8":
            raise te.TeError(f"packed int8 conv2d: the residual Add cannot be fused: {why or 'an int32 conv output'}")
        other = te.placeholder(out_shape, "int8", "other")
        epi = _residual_epilogue(fn, residual[0], residual[1], other)
        extra = [*extra, other]
    else:
        epi = lambda acc, ch, idx: fn(acc, ch)  # noqa: E731
    c = spec.conv
    bsz, bi, bo = spec.batch, spec.block_in, spec.block_out
    n, h, w, o = c.n, c.h, c.w, c.o
    (t, l, _, _), (sy, sx) = c.pads, c.stride
    oh, ow = c.oh, c.ow
    xt = spec.tile(vector_bits)
    data = te.placeholder(spec.data_shape, "int8", "data")
    pdt = spec.pad_dtype  # depthwise: no pairs; int8 halves the copy (stride 2: 4x the output)
    zero = te.const(int(c.pad_value) + (128 if spec.quads else 0), pdt)

    def copied(v):  # an input value as the copy holds it
        return (v.astype("int16") + te.const(128, "int16")).astype(pdt) if spec.quads else v.astype(pdt)
    inside = lambda y, x: (y >= t) & (y < h + t) & (x >= l) & (x < w + l)  # noqa: E731

    # padded rows x columns per stride phase, so the last (ragged) pixel tile reads zeros in bounds
    if c.depthwise:  # row tiles: the ragged last tile of a row reads zero columns past it
        hp, wq = row_pad_extent(c, xt)
    else:  # tiles over the flattened pixels: the last one reads zero rows below the map
        hp, wq = flat_pad_extent(c, xt)
    direct = spec.direct
    if direct:  # 1x1, unit stride, no padding: the packed input itself, (N, C/BI, H*W, 1, BI), int8 pairs
        pad = data
    elif spec.pointwise:  # the same over flattened pixels as int16, (N, C/BI, H*W, BI): a block's panel or whole
        pad = te.compute((n, c.c // bi, h * w, bi), lambda i, cb, q, ci: copied(data[i, cb, q, 0, ci]),
                         name="pad", dtype=pdt)
    else:  # int16, (N, C/BI, rows, SX, columns per phase, BI): a pixel's BI channels contiguous as in the input
        lanes = spec.group * spec.reduce_steps if spec.pairs else bi  # the channels the reduction reads (a stem: 4)
        pad = te.compute((n, c.c // bi, hp, sx, wq, lanes), lambda i, cb, y, ph, xq, ci: te.select(
            inside(y, xq * sx + ph), copied(data[i // bsz, cb, y - t, xq * sx + ph - l, i % bsz, ci]), zero),
            name="pad", dtype=pdt)
    ky, kx = te.reduce_axis(c.kh, "ky"), te.reduce_axis(c.kw, "kx")

    def tap(i, cb, q, ci):
        if direct:
            return pad[i, cb, q, 0, ci].astype("int32")
        if spec.pointwise:
            return pad[i, cb, q, ci].astype("int32")
        return pad[i, cb, q // ow * sy + ky, kx % sx, q % ow + kx // sx, ci].astype("int32")

    if c.depthwise:  # channel block oo of OB lies in input block oo * OB // BI
        weight = te.placeholder((o // OB, c.kh, c.kw, OB), "int16", "weight")
        per_in = bi // OB
        conv = te.compute((n, o // OB, oh, -(-ow // xt) * xt, OB), lambda i, oo, y, x, oi: te.sum(
            pad[i, oo // per_in, y * sy + ky, kx % sx, x + kx // sx, oo % per_in * OB + oi].astype("int32")
            * weight[oo, ky, kx, oi].astype("int32"), [ky, kx]), name="conv", dtype="int32")
        out = te.compute(out_shape, lambda nb, ob, y, x, bb, oi: epi(
            conv[nb, ob, y, x, oi], ob * bo + oi, (nb, ob, y, x, bb, oi)), name="out", dtype=out_dt)
        return PackedConvOp(spec, [data, weight, *extra], pad, conv, out, xt)
    else:  # input channel groups (pairs or quads): block rb, group rj (channels rb * BI + G rj + k, k < G)
        g = spec.group
        weight = te.placeholder((o // OB, c.c // bi, c.kh, c.kw, spec.reduce_steps, OB, g), spec.weight_dtype,
                                "weight")
        rb, rj = te.reduce_axis(c.c // bi, "rb"), te.reduce_axis(spec.reduce_steps, "rj")
        conv = te.compute((n, o // OB, oh * ow, OB), lambda i, oo, q, oi: te.sum(functools.reduce(operator.add, (
            tap(i, rb, q, rj * g + k) * weight[oo, rb, ky, kx, rj, oi, k].astype("int32") for k in range(g))),
            [rb, ky, kx, rj]), name="conv", dtype="int32")
    per = bo // OB
    if per == 1:  # one register tile's channels per output block: indices free of divisions
        def acc(nb, ob, q, bb, oi):
            return conv[nb * bsz + bb, ob, q, oi]
    else:
        def acc(nb, ob, q, bb, oi):
            return conv[nb * bsz + bb, ob * per + oi // OB, q, oi % OB]
    out = te.compute(out_shape, lambda nb, ob, q, bb, oi: epi(
        acc(nb, ob, q, bb, oi), ob * bo + oi, (nb, ob, q, bb, oi)), name="out", dtype=out_dt)
    return PackedConvOp(spec, [data, weight, *extra], pad, conv, out, xt, spec.panel_tiles(vector_bits))


def schedule_packed(op: PackedConvOp, s) -> None:
    """Parallel over (output block, pixel tile), or with a per-block copy (``op.panel``) over pixel blocks, each
    block's int16 copy made in a local buffer and read by all its output blocks' tiles; the XT x OB int32 tile in
    registers over the whole reduction."""
    c = op.spec.conv
    if op.panel:
        _schedule_panel(op, s)
        return
    if op.pad is not op.inputs[0]:
        sp = s[op.pad]
        if int(np.prod(op.pad.shape)) >= COPY_PARALLEL_ELEMENTS:  # over (channel block, row): a stem has one block
            sp.parallel(sp.fuse(sp.leaf_iter_vars[1], sp.leaf_iter_vars[2]))
        sp.vectorize(sp.leaf_iter_vars[-1])
    so = s[op.out]
    if c.depthwise:  # parallel over (channel block, row); XT pixels of a row x 16 channels in registers
        nb, ob, y, x, bb, oi = so.leaf_iter_vars
        xo, xi = so.split(x, op.xt)
        so.reorder(nb, ob, y, xo, bb, xi, oi)
        row = so.fuse(ob, y)
        if c.macs >= DW_PARALLEL_MIN_MACS:
            so.parallel(row)
        so.vectorize(oi)
        sc = s[op.conv]
        sc.set_scope("local")
        sc.compute_at(so, xo)
        ci, coo, cy, cx, coi, cky, ckx = sc.leaf_iter_vars
        sc.reorder(ci, coo, cy, cky, ckx, cx, coi)
        sc.unroll(cx)
        sc.vectorize(coi)
        return
    nb, ob, q, bb, oi = so.leaf_iter_vars
    qo, qi = so.split(q, op.xt)
    so.reorder(nb, ob, qo, bb, qi, oi)  # (output block, pixel tile): measured no faster the other way round
    at = so.fuse(ob, qo)
    if c.macs >= CONV_PARALLEL_MIN_MACS:
        so.parallel(at)
    so.vectorize(oi)
    _register_tile(op, s, at)


def _register_tile(op: PackedConvOp, s, at) -> None:
    """The XT x OB int32 accumulator tile in registers, ``compute_at`` the output stage's loop ``at``, over the
    whole reduction (the pixels unrolled, the channels vectorized)."""
    sc = s[op.conv]
    sc.set_scope("local")
    sc.compute_at(s[op.out], at)
    cn, coo, cq, coi, *red = sc.leaf_iter_vars
    sc.reorder(cn, coo, *red, cq, coi)
    sc.unroll(cq)
    if op.spec.reduce_steps * op.spec.group <= 8:  # a short group loop (a 3-channel stem: 2 pairs, 1 quad): unrolled
        sc.unroll(red[-1])
    sc.vectorize(coi)


PANEL_BYTES = 32 << 10  # a pixel block's int16 copy (C x the block's pixels): about a core's L1d
PANEL_MIN_BLOCKS = 8  # pixel blocks at least (the parallel loop's chunks)


def _schedule_panel(op: PackedConvOp, s) -> None:
    """1x1 convs with a per-block copy: (pixel block) parallel, then (output block, pixel tile); the block's int16
    copy ``compute_at`` the block (a local buffer, vector rows of BI lanes)."""
    so = s[op.out]
    nb, ob, q, bb, oi = so.leaf_iter_vars
    qo, qi = so.split(q, op.xt)
    qb, qo = so.split(qo, op.panel)
    so.reorder(nb, qb, ob, qo, bb, qi, oi)
    if op.spec.conv.macs >= CONV_PARALLEL_MIN_MACS:
        so.parallel(qb)
    so.vectorize(oi)
    sp = s[op.pad]
    sp.set_scope("local")
    sp.compute_at(so, qb)
    sp.vectorize(sp.leaf_iter_vars[-1])
    _register_tile(op, s, qo)
