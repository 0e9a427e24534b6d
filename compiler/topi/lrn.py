"""Local response normalization across channels (ONNX ``LRN``), float32, NCHW (any trailing spatial dims)."""
from __future__ import annotations

from compiler import te
from compiler.te.tensor import Tensor


def lrn(shape: tuple[int, ...], size: int, alpha: float, beta: float, bias: float) -> tuple[list[Tensor], list[Tensor]]:
    """``y = x / (bias + alpha / size * sum_{c' in window(c)} x[c']^2) ** beta``; returns ``([x], [sqsum, y])``.

    The window of channel ``c`` is ``[c - floor((size-1)/2), c + ceil((size-1)/2)]`` clipped to the channels.
    """
    if len(shape) < 3:
        raise te.TeError(f"LRN needs an (N, C, D1, ...) input, got shape {shape}")
    if size < 1:
        raise te.TeError(f"LRN size must be >= 1, got {size}")
    x = te.placeholder(shape, "float32", "x")
    channels, lo = shape[1], (size - 1) // 2
    r = te.reduce_axis(size, "rc")
    zero = te.const(0.0, "float32")

    def sq(*i):
        c = i[1] + r - lo
        v = x[(i[0], c) + tuple(i[2:])]
        return te.sum(te.select((c >= 0) & (c < channels), v * v, zero), axis=r)

    sqsum = te.compute(shape, sq, name="lrn_sqsum", dtype="float32")
    k, scale, b = te.const(float(bias), "float32"), te.const(float(alpha) / size, "float32"), te.const(float(beta), "float32")
    y = te.compute(shape, lambda *i: x[i] / te.exp(b * te.log(k + scale * sqsum[i])), name="lrn", dtype="float32")
    return [x], [sqsum, y]
