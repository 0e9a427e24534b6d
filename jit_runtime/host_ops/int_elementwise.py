"""Integer semantics of the quantized elementwise and pooling operators that QDQ lowering produces.

Every operand is int8 with a per-tensor (scale, zero point); results are exact integer functions
of the inputs (fixed-point multipliers chosen at compile time, no float at run time):

* ``QAdd``:  ``y = clip(zy + round_shift(ma*(a - za) + mb*(b - zb), shift), lo, hi)`` with
  ``ma/2**shift ~ sa/sy`` and ``mb/2**shift ~ sb/sy`` (15-bit multipliers, so every step fits
  int32: |a - za| <= 255);
* ``QMul``: ``y = clip(zy + round_shift(m*(a - za)*(b - zb), shift), -128, 127)`` with
  ``m/2**shift ~ sa*sb/sy`` (|(a - za)(b - zb)| < 2**16 and m < 2**15 fit int32);
* ``QGlobalAveragePool``: ``y = clip(zy + round_shift(m*(sum(x) - n*zx), shift), -128, 127)``
  with ``m/2**shift ~ sx/(sy*n)`` (computed in int64 on the host);
* ``QAveragePool``: the window sums of ``x - zx`` (padding is real zero) times a per-output-position
  multiplier ``m[oy, ox]/2**shift ~ sx/(sy*count)`` (count: the window's elements, with or without
  padding per ``count_include_pad``), rounded, plus ``zy``;
* ``QLookup``: any unary elementwise op between a DQ and a Q (HardSwish, HardSigmoid, Sigmoid, ...)
  is a 256-entry int8 -> int8 table, computed at compile time exactly as ``Q(op(DQ(v)))``.

``lo``/``hi`` fold a following Relu/Clip (Relu: ``lo = zy``).
"""
from __future__ import annotations

from dataclasses import dataclass

import math

import numpy as np

MULT_BITS = 15


@dataclass(frozen=True)
class QAddParams:
    """Fixed-point parameters of one quantized Add (see the module docstring)."""

    a_mult: int
    b_mult: int
    shift: int
    a_zp: int
    b_zp: int
    out_zp: int
    out_min: int = -128
    out_max: int = 127


def _fixed_point(ratios: list[float], mult_bits: int = MULT_BITS, max_shift: int = 31) -> tuple[list[int], int]:
    """Largest shift (<= max_shift) such that every ``round(r * 2**shift)`` stays below ``2**mult_bits``."""
    top = max(max(abs(r) for r in ratios), 1e-300)
    shift = int(np.clip(np.floor(np.log2((2 ** mult_bits - 1) / top)), 0, max_shift))
    mults = [int(np.rint(r * 2.0 ** shift)) for r in ratios]
    while shift > 0 and max(abs(m) for m in mults) >= 2 ** mult_bits:
        shift -= 1
        mults = [int(np.rint(r * 2.0 ** shift)) for r in ratios]
    return mults, shift


def choose_qadd(sa: float, za: int, sb: float, zb: int, sy: float, zy: int, *, out_min: int = -128,
                out_max: int = 127) -> QAddParams:
    """Parameters of ``Q(DQ(a) + DQ(b))`` for per-tensor scales/zero points."""
    if min(sa, sb, sy) <= 0 or not np.isfinite([sa, sb, sy]).all():
        raise ValueError(f"QAdd scales must be finite and > 0, got {sa}, {sb}, {sy}")
    # |a - za| <= 255 and |m| < 2**15 keep every product and the sum inside int32
    (ma, mb), shift = _fixed_point([sa / sy, sb / sy], max_shift=22)
    return QAddParams(ma, mb, shift, int(za), int(zb), int(zy), int(out_min), int(out_max))


def qadd(a: np.ndarray, b: np.ndarray, p: QAddParams) -> np.ndarray:
    """The integer Add of two int8 tensors (numpy broadcasting); int32 throughout (|acc| < 2**24)."""
    acc = np.asarray(a, np.int32) - np.int32(p.a_zp)
    acc *= np.int32(p.a_mult)
    acc = acc + (np.asarray(b, np.int32) - np.int32(p.b_zp)) * np.int32(p.b_mult)  # a may be the smaller operand
    if p.shift:
        acc += np.int32(1 << (p.shift - 1))
        acc >>= np.int32(p.shift)
    acc += np.int32(p.out_zp)
    return np.clip(acc, p.out_min, p.out_max).astype(np.int8)


@dataclass(frozen=True)
class QMulParams:
    """Fixed-point parameters of one quantized elementwise Mul."""

    mult: int
    shift: int
    a_zp: int
    b_zp: int
    out_zp: int


def choose_qmul(sa: float, za: int, sb: float, zb: int, sy: float, zy: int) -> QMulParams:
    """Parameters of ``Q(DQ(a) * DQ(b))`` for per-tensor scales/zero points."""
    if min(sa, sb, sy) <= 0:
        raise ValueError(f"QMul scales must be > 0, got {sa}, {sb}, {sy}")
    (m,), shift = _fixed_point([sa * sb / sy])
    return QMulParams(m, shift, int(za), int(zb), int(zy))


def qmul(a: np.ndarray, b: np.ndarray, p: QMulParams) -> np.ndarray:
    """The integer Mul of two int8 tensors (numpy broadcasting, e.g. a squeeze-excite gate)."""
    dt = np.int32 if p.shift <= 24 else np.int64  # 255*255*(2**15 - 1) + 2**23 < 2**31
    acc = np.asarray(a, dt) - dt(p.a_zp)
    acc = acc * (np.asarray(b, dt) - dt(p.b_zp))  # |.| <= 255 * 255 < 2**16
    acc *= dt(p.mult)
    if p.shift:
        acc += dt(1 << (p.shift - 1))
        acc >>= dt(p.shift)
    acc += dt(p.out_zp)
    return np.clip(acc, -128, 127).astype(np.int8)


def lookup_table(fn, sx: float, zx: int, sy: float, zy: int) -> np.ndarray:
    """The int8 -> int8 table of ``Q(fn(DQ(v)))`` for v = -128..127 (float32 like onnxruntime, round half even)."""
    v = np.arange(-128, 128, dtype=np.int64)
    real = ((v - zx).astype(np.float32) * np.float32(sx)).astype(np.float32)
    y = np.rint(np.asarray(fn(real), np.float32) / np.float32(sy)) + zy
    return np.clip(y, -128, 127).astype(np.int8)


def qlookup(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Apply a 256-entry table to an int8 tensor."""
    return table[np.ascontiguousarray(x, np.int8).view(np.uint8) ^ np.uint8(0x80)]  # index v + 128


@dataclass(frozen=True)
class QPoolParams:
    """Fixed-point parameters of one quantized global average pool over ``count`` elements."""

    mult: int
    shift: int
    count: int
    in_zp: int
    out_zp: int


def choose_qgap(sx: float, zx: int, sy: float, zy: int, count: int) -> QPoolParams:
    """Parameters of ``Q(GlobalAveragePool(DQ(x)))`` over ``count`` spatial elements."""
    if min(sx, sy) <= 0 or count < 1:
        raise ValueError(f"QGlobalAveragePool needs scales > 0 and count >= 1, got {sx}, {sy}, {count}")
    (m,), shift = _fixed_point([sx / (sy * count)], mult_bits=24, max_shift=40)
    return QPoolParams(m, shift, int(count), int(zx), int(zy))


EXACT_F32_SUM_COUNT = 1 << 16  # sums of up to this many 8-bit values stay below 2**24: exact in float32


def qgap(x: np.ndarray, p: QPoolParams, packed: bool = False) -> np.ndarray:
    """Integer global average pool of an NC... int8 tensor (keeps the reduced dims as 1); ``packed``: a packed
    activation ``(N//B, C//BI, H, W, B, BI)``, reduced over H and W."""
    x = np.asarray(x)
    axes = (2, 3) if packed else tuple(range(2, x.ndim))
    keep = tuple(1 if k in axes else d for k, d in enumerate(x.shape))
    n = math.prod(x.shape[k] for k in axes)
    if x.dtype in (np.int8, np.uint8) and n <= EXACT_F32_SUM_COUNT:  # a float32 matmul with ones: exact, ~5x faster
        front, back = math.prod(x.shape[:axes[0]]), math.prod(x.shape[axes[-1] + 1:])
        xs = x.reshape(front, n, back).astype(np.float32)
        s = (np.ones(n, np.float32) @ xs).astype(np.int64).reshape(keep) - p.count * p.in_zp
    else:
        s = np.asarray(x, np.int64).sum(axis=axes, keepdims=True) - p.count * p.in_zp
    acc = s * p.mult
    rnd = (1 << (p.shift - 1)) if p.shift > 0 else 0
    y = ((acc + rnd) >> p.shift) + p.out_zp
    return np.clip(y, -128, 127).astype(np.int8)


@dataclass(frozen=True)
class QAvgPoolParams:
    """A quantized 2-D average pool: window geometry, zero points and per-position fixed-point multipliers."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    mult: np.ndarray  # (OH, OW) int64
    shift: int
    in_zp: int
    out_zp: int


def _window_sums(x: np.ndarray, kernel, strides, pads) -> np.ndarray:
    kh, kw = kernel
    sh, sw = strides
    t, l, b, r = pads
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    return win.sum(axis=(-2, -1))


def choose_qavgpool(sx: float, zx: int, sy: float, zy: int, h: int, w: int, kernel, strides, pads,
                    count_include_pad: bool) -> QAvgPoolParams:
    """Parameters of ``Q(AveragePool(DQ(x)))`` on an ``h x w`` input (``pads`` already resolved for ceil_mode)."""
    if min(sx, sy) <= 0:
        raise ValueError(f"QAveragePool scales must be > 0, got {sx}, {sy}")
    kernel, strides, pads = tuple(int(v) for v in kernel), tuple(int(v) for v in strides), tuple(int(v) for v in pads)
    if count_include_pad:
        t, l, b, r = pads
        cnt = _window_sums(np.pad(np.ones((1, 1, h, w), np.int64), ((0, 0), (0, 0), (t, b), (l, r)), constant_values=1),
                           kernel, strides, (0, 0, 0, 0))[0, 0]
    else:
        cnt = _window_sums(np.ones((1, 1, h, w), np.int64), kernel, strides, pads)[0, 0]
    ratios = sx / (sy * np.maximum(cnt, 1).astype(np.float64))
    (_,), shift = _fixed_point([float(ratios.max())], mult_bits=24, max_shift=40)
    mult = np.rint(ratios * 2.0 ** shift).astype(np.int64)
    return QAvgPoolParams(kernel, strides, pads, mult, shift, int(zx), int(zy))


def qavgpool(x: np.ndarray, p: QAvgPoolParams) -> np.ndarray:
    """Integer average pool of an NCHW int8 tensor."""
    s = _window_sums(np.asarray(x, np.int64) - p.in_zp, p.kernel, p.strides, p.pads)
    rnd = (1 << (p.shift - 1)) if p.shift > 0 else 0
    y = ((s * p.mult + rnd) >> p.shift) + p.out_zp
    return np.clip(y, -128, 127).astype(np.int8)
