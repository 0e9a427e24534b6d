"""Host glue that lets integer products with zero points run on the accelerator's symmetric int8 dense/conv.

The accelerator multiplies int8 by int8 into int32 and adds a per-output-channel bias. A product with zero
points (onnxruntime's asymmetric uint8 activations, rebased to int8: ``a - za`` times ``b - zb``) expands to

    sum_k (a[m,k] - za) * (w[n,k] - zb) = a.w^T  - zb * rowsum(a)[m]  - za * (rowsum(w)[n] - K * zb)

* the last term has one value per output channel ``n``: a bias, computed at run time when ``w`` or ``za`` is
  known only then (:func:`zero_point_bias`, node ``ZeroPointBias``);
* the middle term has one value per row ``m``: it rides on ``J`` extra MAC columns. ``a`` gets ``J`` int8
  digit columns of ``s[m] = -zb * rowsum(a)[m]`` and the weight ``J`` constant columns ``(1, 127, 127, ...)``
  (:func:`row_sum_digits`, node ``RowSumDigits``; :func:`digit_weights`), so ``sum_j d_j[m] * c_j = s[m]``
  exactly (:func:`digit_columns` says how many columns a bound needs).

An int32 result (``MatMulInteger``/``ConvInteger``) leaves the accelerator as int8 *bytes*: the weight's output
channels are repeated once per byte, byte ``j``'s epilogue adds ``-2**(8j-1)`` (so the rounding shift floors)
and shifts right by ``8j`` with no clipping, and the int8 output keeps the low 8 bits (the OUT scratchpad's
two's-complement narrowing). :func:`join_bytes` (node ``JoinBytes``) reassembles the int32 values.
"""
from __future__ import annotations

import numpy as np

from jit_runtime.host_ops.registry import kernel
from jit_runtime.host_ops.requant import Requant

DIGIT = 127  # the weight of every digit column after the first (the largest int8 magnitude both signs share)
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def digit_columns(bound: int) -> int:
    """Digit columns needed for ``|s| <= bound``: 0 for 0, 1 up to 127, else ``1 + ceil(q / 127)`` where
    ``|q| <= ceil((bound + 63) / 127)`` is the part carried by the weight-127 columns."""
    bound = int(bound)
    if bound <= 0:
        return 0
    if bound <= 127:
        return 1
    q = -(-(bound + 63) // DIGIT)
    return 1 + -(-q // DIGIT)


def digit_weights(n_digits: int) -> np.ndarray:
    """The constant weight of each digit column: ``(1, 127, 127, ...)`` (int8)."""
    return np.array([1] + [DIGIT] * (n_digits - 1), np.int8)[:n_digits]


def row_sum_digits(a: np.ndarray, zb: int, n_digits: int) -> np.ndarray:
    """``a`` (rows, K) int8 with ``n_digits`` int8 columns appended whose dot product with
    :func:`digit_weights` is ``-zb * rowsum(a)`` (raises when the value needs more digits)."""
    a = np.asarray(a)
    if a.dtype != np.int8 or a.ndim != 2:
        raise ValueError(f"RowSumDigits: expects a 2-D int8 operand, got {a.dtype} {a.shape}")
    s = -int(zb) * a.astype(np.int64).sum(axis=1)
    d = np.zeros((a.shape[0], n_digits), np.int64)
    if n_digits == 1:
        d[:, 0] = s
    elif n_digits > 1:
        q = np.floor_divide(s + 63, DIGIT)
        d[:, 0] = s - DIGIT * q  # in -63..63
        for j in range(1, n_digits):
            d[:, j] = np.clip(q, -DIGIT, DIGIT)
            q = q - d[:, j]
        if np.any(q != 0):
            raise ValueError(f"RowSumDigits: -zb * rowsum = {int(np.abs(s).max())} needs more than {n_digits} digits")
    if n_digits and (d.min() < -128 or d.max() > 127):
        raise ValueError(f"RowSumDigits: -zb * rowsum = {int(np.abs(s).max())} does not fit {n_digits} digit(s)")
    return np.concatenate([a, d.astype(np.int8)], axis=1)


def zero_point_bias(w: np.ndarray, za, zb: int, k: int, base=None, repeat: int = 1) -> np.ndarray:
    """int32 per-channel bias ``base - za * (rowsum(w[:, :k]) - k * zb)`` of a weight ``w`` (N, K...) (only the
    first ``k`` columns of the flattened row count: digit columns follow them), tiled ``repeat`` times
    (byte outputs) with ``base`` of length ``repeat * N`` (or None)."""
    w = np.asarray(w)
    za = int(np.asarray(za).reshape(()))
    sums = w.reshape(w.shape[0], -1)[:, :k].astype(np.int64).sum(axis=1)
    b = np.tile(-za * (sums - int(k) * int(zb)), repeat)
    if base is not None:
        b = b + np.asarray(base, np.int64).reshape(-1)
    if b.size and (b.min() < INT32_MIN or b.max() > INT32_MAX):
        raise ValueError("ZeroPointBias: the zero-point bias leaves int32")
    return b.astype(np.int32)


def byte_count(bound: int) -> int:
    """Bytes that hold every int32 value ``|v| <= bound`` in two's complement (1..4)."""
    for j in range(1, 5):
        if int(bound) < (1 << (8 * j - 1)):
            return j
    raise ValueError(f"accumulator bound {bound} leaves int32")


def byte_epilogue(n_channels: int, n_bytes: int) -> tuple[Requant, np.ndarray]:
    """``(Requant, bias offsets)`` of a layer whose ``n_bytes * n_channels`` outputs are the bytes of its int32
    accumulators (byte-major: output channel ``j * n_channels + c`` is byte ``j`` of channel ``c``)."""
    shift = np.repeat(8 * np.arange(n_bytes, dtype=np.int64), n_channels)
    offset = np.where(shift > 0, -(np.int64(1) << np.maximum(shift - 1, 0)), 0)  # makes the rounding shift floor
    return Requant(multiplier=1, shift=shift, out_min=INT32_MIN, out_max=INT32_MAX), offset


def join_bytes(y: np.ndarray, n_bytes: int, axis: int) -> np.ndarray:
    """int32 values from their ``n_bytes`` low-to-high bytes stacked along ``axis`` (byte-major; the top byte
    signed); ``y`` holds each byte in its low 8 bits (int8 or wider)."""
    y = np.asarray(y)
    axis = axis % y.ndim
    c = y.shape[axis]
    if c % n_bytes:
        raise ValueError(f"JoinBytes: axis {axis} has {c} entries, not a multiple of {n_bytes} bytes")
    parts = np.split(y.astype(np.int64) & 0xFF, n_bytes, axis=axis)
    top = parts[-1] - ((parts[-1] & 0x80) << 1)  # sign of the top byte
    v = top
    for p in reversed(parts[:-1]):
        v = (v << 8) | p
    return v.astype(np.int32)


@kernel("RowSumDigits")
def row_sum_digits_k(a, x):
    return row_sum_digits(x, int(a["zb"]), int(a["n_digits"]))


@kernel("ZeroPointBias")
def zero_point_bias_k(a, w, za=None):
    return zero_point_bias(w, a.get("za", 0) if za is None else za, int(a.get("zb", 0)), int(a["k"]),
                           a.get("base"), int(a.get("repeat", 1)))


@kernel("JoinBytes")
def join_bytes_k(a, y):
    return join_bytes(y, int(a["n_bytes"]), int(a.get("axis", -1)))
