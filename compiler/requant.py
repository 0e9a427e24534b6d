"""The integer requantization epilogue shared by every int8 operator.

This is the exact integer contract between the graph level (quantizer, CPU
reference) and the accelerator operator library: an accelerator conv2d/dense
must reproduce :func:`apply_requant` bit for bit using only the ISA's ALU ops
(ADD, SHR, MUL, MIN, MAX on wrapping int32 accumulators).

    acc = acc + bias                                  (int32, wraps)
    acc = round_shift(acc, pre_shift)                 (arithmetic, round half up)
    acc = acc * multiplier                            (int32, wraps)
    acc = round_shift(acc, shift)
    acc = acc + zero_point                            (output zero point, int32)
    acc = max(acc, zero_point)                        (if relu: real zero is zero_point)
    acc = clip(acc, out_min, out_max)
    out = int8(acc)

``round_shift(a, s) = (a + (1 << (s - 1))) >> s`` for ``s > 0`` and ``a`` for
``s == 0``. ``multiplier`` fits a signed 16-bit immediate. ``multiplier`` and
``shift`` may be per-output-channel int arrays (the accelerator then uses ALU
ops with a tensor operand).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa.alu import wrap


def wrap_int32(a: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of an integer array to int32 (returned as int64): the ALU's wrap."""
    return wrap(np.asarray(a, dtype=np.int64), 32)


def round_shift(a: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """Arithmetic right shift with round-half-up; ``s`` may broadcast."""
    a = np.asarray(a, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    if np.any(s < 0) or np.any(s > 31):
        raise ValueError(f"shift amounts must be in 0..31, got {s.min()}..{s.max()}")
    rnd = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    return wrap_int32(np.right_shift(wrap_int32(a + rnd), s))


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
        if np.any(m < -(1 << 15)) or np.any(m >= (1 << 15)):
            raise ValueError("Requant.multiplier must fit a signed 16-bit immediate (-32768..32767)")
        for name in ("pre_shift", "shift"):
            v = np.asarray(getattr(self, name))
            if np.any(v < 0) or np.any(v > 31):
                raise ValueError(f"Requant.{name} must be in 0..31, got {v}")
        if not -(1 << 15) <= int(self.zero_point) < (1 << 15):
            raise ValueError(f"Requant.zero_point must fit a signed 16-bit immediate, got {self.zero_point}")
        if not -(1 << 31) <= self.out_min <= self.out_max < (1 << 31):
            raise ValueError(f"Requant out range [{self.out_min}, {self.out_max}] is empty or not int32")


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
    acc = wrap_int32(acc * per_channel(rq.multiplier))
    acc = round_shift(acc, per_channel(rq.shift))
    if rq.zero_point:
        acc = wrap_int32(acc + int(rq.zero_point))
    if rq.relu:
        acc = np.maximum(acc, int(rq.zero_point))
    acc = np.clip(acc, rq.out_min, rq.out_max)
    if rq.out_min >= -128 and rq.out_max <= 127:
        return acc.astype(np.int8)
    return acc.astype(np.int32)
