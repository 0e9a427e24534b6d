"""QuantizeLinear / DequantizeLinear in TE (per-tensor or per-channel scale and zero point, int8/uint8).

Quantize follows ONNX: ``saturate(round_half_even(x / scale) + zero_point)``; dequantize
``(q - zero_point) * scale`` in float32.
"""
from __future__ import annotations

from compiler import te
from compiler.te import Tensor

QDTYPES = ("int8", "uint8")


def _axis_index(shape: tuple[int, ...], axis: int, per_channel: bool):
    ax = axis % len(shape) if shape else 0
    return (lambda i: (i[ax],)) if per_channel else (lambda i: (0,))


def quantize(shape: tuple[int, ...], qdtype: str, axis: int, per_channel: bool) -> tuple[list[Tensor], Tensor]:
    """``q = clip(round(x / scale[c]) + zp[c], qmin, qmax)``; inputs (x float32, scale float32, zp int32)."""
    if qdtype not in QDTYPES:
        raise te.TeError(f"quantize: output dtype {qdtype!r} not supported; allowed: {QDTYPES}")
    nch = shape[axis % len(shape)] if per_channel else 1
    x = te.placeholder(shape, "float32", "x")
    scale = te.placeholder((nch,), "float32", "scale")
    zp = te.placeholder((nch,), "int32", "zero_point")
    ci = _axis_index(shape, axis, per_channel)
    lo, hi = (-128.0, 127.0) if qdtype == "int8" else (0.0, 255.0)
    store = "int8" if qdtype == "int8" else "int16"  # uint8 results are stored through int16 (see ops.run)

    def f(*i):
        q = te.round_(x[i] / scale[ci(i)]) + te.cast("float32", zp[ci(i)])
        q = te.min_(te.max_(q, te.const(lo, "float32")), te.const(hi, "float32"))
        return te.cast(store, te.cast("int32", q))

    return [x, scale, zp], te.compute(shape, f, name="quantize", dtype=store)


def dequantize(shape: tuple[int, ...], qdtype: str, axis: int, per_channel: bool) -> tuple[list[Tensor], Tensor]:
    """``x = (q - zp[c]) * scale[c]``; inputs (q int8 or int32, scale float32, zp int32)."""
    nch = shape[axis % len(shape)] if per_channel else 1
    q = te.placeholder(shape, qdtype, "q")
    scale = te.placeholder((nch,), "float32", "scale")
    zp = te.placeholder((nch,), "int32", "zero_point")
    ci = _axis_index(shape, axis, per_channel)
    out = te.compute(shape, lambda *i: te.cast("float32", q[i].astype("int64") - zp[ci(i)].astype("int64"))
                     * scale[ci(i)], name="dequantize", dtype="float32")  # int64: an int32 q - zp cannot wrap
    return [q, scale, zp], out
