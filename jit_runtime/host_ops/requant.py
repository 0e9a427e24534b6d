"""The integer requantization epilogue shared by every int8 operator.

This is the exact integer contract between the graph level (quantizer, CPU
reference, LLVM kernels) and the accelerator operator library: an accelerator
conv2d/dense reproduces :func:`apply_requant` bit for bit.

    acc = wrap32(acc + bias)                          (int32, wraps)
    acc = round_shift(acc, pre_shift)                 (legacy; 0 from choose_requant)
    y   = round_shift(acc * multiplier, shift)        (exact 64-bit product, shift 0..63)
    y   = y + zero_point                              (output zero point)
    y   = max(y, zero_point)                          (if relu: real zero is zero_point)
    out = clip(y, out_min, out_max)

``round_shift(a, s) = floor((a + 2**(s-1)) / 2**s)`` (round half up) for ``s > 0`` and ``a``
for ``s == 0``. ``multiplier`` is an int32 and ``shift`` is in 0..63; both may be
per-output-channel arrays. With ``pre_shift == 0`` and the range, zero point and clip bounds
within int16 the accelerator runs the whole epilogue as ONE ALU pass (the fused ``REQUANT``
op, :mod:`isa.requant`: bias, multiplier, shift, zero point and clip bounds per channel in a
WGT record). :func:`compiler.quant.requant_params.choose_requant` picks a 31-bit multiplier
and no pre-shift, so ``apply_requant`` equals ``round(acc * real_scale)`` (the QDQ reference)
except where ``acc * real_scale`` is within ``|acc| * 2**-31`` relative distance of a rounding
tie. Configs without REQUANT (``block_in * wgt_width < 128``) run the epilogue as separate ALU
passes (ADD, SHR, MUL, ADD, MAX, MIN), which is exact only while ``(acc >> pre_shift) *
multiplier`` and the rounding adds fit int32 and ``shift <= 31``: legacy parameters
(``choose_requant(..., mult_bits=15)``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa.alu import wrap


def wrap_int32(a: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of an integer array to int32 (returned as int64): the ALU's wrap."""
    return wrap(np.asarray(a, dtype=np.int64), 32)


def round_shift(a: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """Arithmetic right shift with round-half-up on int32 values (the legacy pre-shift); ``s`` in 0..31 may broadcast."""
    a = np.asarray(a, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    if np.any(s < 0) or np.any(s > 31):
        raise ValueError(f"shift amounts must be in 0..31, got {s.min()}..{s.max()}")
    rnd = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    return wrap_int32(np.right_shift(wrap_int32(a + rnd), s))


def round_shift_wide(p: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """``floor((p + 2**(s-1)) / 2**s)`` for int64 ``p`` and ``s`` in 0..63 (``p`` for ``s == 0``), without overflow:
    ``((p >> (s - 1)) + 1) >> 1`` (what the REQUANT op computes)."""
    p = np.asarray(p, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    t = np.right_shift(p, np.maximum(s - 1, 0))
    return np.where(s > 0, np.right_shift(t + 1, 1), p)


@dataclass(frozen=True)
class Requant:
    """Integer epilogue parameters; see the module docstring for semantics."""

    pre_shift: int = 0
    multiplier: np.ndarray | int = 1
    shift: np.ndarray | int = 0
    relu: bool = False
    out_min: int = -128
    out_max: int = 127
    extra: dict = field(default_factory=dict, compare=False)
    zero_point: int = 0

    def __post_init__(self) -> None:
        m = np.asarray(self.multiplier)
        if np.any(m < -(1 << 31)) or np.any(m >= (1 << 31)):
            raise ValueError("Requant.multiplier must be an int32 (-2**31..2**31-1)")
        v = np.asarray(self.pre_shift)
        if np.any(v < 0) or np.any(v > 31):
            raise ValueError(f"Requant.pre_shift must be in 0..31, got {v}")
        v = np.asarray(self.shift)
        if np.any(v < 0) or np.any(v > 63):
            raise ValueError(f"Requant.shift must be in 0..63, got {v}")
        if not -(1 << 15) <= int(self.zero_point) < (1 << 15):
            raise ValueError(f"Requant.zero_point must fit a signed 16-bit immediate, got {self.zero_point}")
        if not -(1 << 31) <= self.out_min <= self.out_max < (1 << 31):
            raise ValueError(f"Requant out range [{self.out_min}, {self.out_max}] is empty or not int32")

    @property
    def clip_low(self) -> int:
        """The effective lower bound: ``max(out_min, zero_point)`` with relu, else ``out_min``."""
        return max(int(self.out_min), int(self.zero_point)) if self.relu else int(self.out_min)


def apply_requant(acc: np.ndarray, bias: np.ndarray | None, rq: Requant, channel_axis: int = 1) -> np.ndarray:
    """Apply the epilogue to int32 accumulators; per-channel params broadcast on ``channel_axis``.

    Returns int8 when the out range fits int8, else int32.
    """
    acc = wrap_int32(acc)

    def per_channel(v):
        v = np.asarray(v, dtype=np.int64)
        if v.ndim == 0:
            return v
        shape = [1] * acc.ndim
        shape[channel_axis] = v.shape[0]
        return v.reshape(shape)

    if bias is not None:
        acc = wrap_int32(acc + per_channel(bias))
    acc = round_shift(acc, rq.pre_shift)
    y = round_shift_wide(acc * per_channel(rq.multiplier), per_channel(rq.shift))  # |acc * m| < 2**62: exact
    y = np.clip(y + int(rq.zero_point), rq.clip_low, rq.out_max)
    if rq.out_min >= -128 and rq.out_max <= 127:
        return y.astype(np.int8)
    return y.astype(np.int32)


def qmatmul(a: np.ndarray, b: np.ndarray, rq: Requant, za: int = 0, zb: int = 0) -> np.ndarray:
    """int8 ``(a - za) @ (b - zb)`` (numpy broadcasting of the batch axes) with exact int32 accumulators, then
    ``rq``."""
    acc = wrap_int32(np.matmul(np.asarray(a).astype(np.int64) - int(za), np.asarray(b).astype(np.int64) - int(zb)))
    return apply_requant(acc, None, rq, 1).astype(np.int8)
