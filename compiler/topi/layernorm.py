"""LayerNormalization (and RMSNormalization) in TE (float32): per row, the mean and the variance of the normalized axes, then
``(x - mean) / sqrt(var + eps) * scale + bias``, as onnxruntime and the numpy kernel compute it.

The normalized axes (ONNX ``axis`` to the last) are flattened: the op takes ``x`` as ``(rows, n)`` and the scale
and bias broadcast to ``(n,)`` (the plan reshapes them; no data moves).
"""
from __future__ import annotations

from compiler import te
from compiler.te import Tensor


def layer_norm(rows: int, n: int, eps: float, bias: bool = True) -> tuple[list[Tensor], list[Tensor]]:
    """``(inputs, stages)``: inputs ``x (rows, n)``, ``scale (n,)`` and (``bias``) ``bias (n,)``; stages: the row
    sums, the centred values, their squares' row sums, the inverse deviations and the output (last)."""
    if rows < 1 or n < 1:
        raise te.TeError(f"layer_norm: sizes must be positive, got rows={rows} n={n}")
    x = te.placeholder((rows, n), "float32", "x")
    g = te.placeholder((n,), "float32", "scale")
    inputs = [x, g]
    b = None
    if bias:
        b = te.placeholder((n,), "float32", "bias")
        inputs.append(b)
    inv_n = te.const(1.0 / n, "float32")
    r1, r2 = te.reduce_axis(n, "r1"), te.reduce_axis(n, "r2")
    total = te.compute((rows,), lambda r: te.sum_(x[r, r1], r1), name="ln_sum", dtype="float32")
    d = te.compute((rows, n), lambda r, j: x[r, j] - total[r] * inv_n, name="ln_centred", dtype="float32")
    sq = te.compute((rows,), lambda r: te.sum_(d[r, r2] * d[r, r2], r2), name="ln_sqsum", dtype="float32")
    one = te.const(1.0, "float32")
    inv = te.compute((rows,), lambda r: one / te.sqrt(sq[r] * inv_n + te.const(float(eps), "float32")),
                     name="ln_inv", dtype="float32")
    out = te.compute((rows, n), lambda r, j: d[r, j] * inv[r] * g[j] + (b[j] if b is not None else te.const(0.0, "float32")),
                     name="layer_norm", dtype="float32")
    return inputs, [total, d, sq, inv, out]


def rms_norm(rows: int, n: int, eps: float) -> tuple[list[Tensor], list[Tensor]]:
    """``(inputs, stages)`` of RMSNormalization: inputs ``x (rows, n)`` and ``scale (n,)``; stages: the row sums of
    squares, the inverse root mean squares and the output (last) ``x * inv * scale``."""
    if rows < 1 or n < 1:
        raise te.TeError(f"rms_norm: sizes must be positive, got rows={rows} n={n}")
    x = te.placeholder((rows, n), "float32", "x")
    g = te.placeholder((n,), "float32", "scale")
    r = te.reduce_axis(n, "r")
    sq = te.compute((rows,), lambda i: te.sum_(x[i, r] * x[i, r], r), name="rms_sqsum", dtype="float32")
    one = te.const(1.0, "float32")
    inv = te.compute((rows,), lambda i: one / te.sqrt(sq[i] * te.const(1.0 / n, "float32") + te.const(float(eps), "float32")),
                     name="rms_inv", dtype="float32")
    out = te.compute((rows, n), lambda i, j: x[i, j] * inv[i] * g[j], name="rms_norm", dtype="float32")
    return [x, g], [sq, inv, out]


def schedule_rms_cpu(s, stages: list[Tensor]) -> None:
    """The output stage flat and vectorized; the row reductions as they are."""
    from compiler.topi.injective import schedule_injective_cpu

    schedule_injective_cpu(s, stages[-1])


def schedule_cpu(s, stages: list[Tensor]) -> None:
    """The two elementwise stages flat and vectorized (:func:`~compiler.topi.injective.schedule_injective_cpu`);
    the row reductions as they are (a transformer's rows are short: 64-1024 values)."""
    from compiler.topi.injective import schedule_injective_cpu

    schedule_injective_cpu(s, stages[1])
    schedule_injective_cpu(s, stages[4])


def schedule_gpu(s, stages: list[Tensor]) -> None:
    """Every stage one thread per output element (a reduction stage: per row, its sum serial)."""
    from compiler.topi.injective import schedule_data_gpu

    schedule_data_gpu(s, stages)
