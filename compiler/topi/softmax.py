"""Softmax over one axis in TE: row max, sum of exp(x - max), then exp(x - max) / sum (float32)."""
from __future__ import annotations

from compiler import te
from compiler.te import Tensor


def softmax(shape: tuple[int, ...], axis: int = -1, safe: bool = False) -> tuple[list[Tensor], list[Tensor]]:
    """``(inputs, stages)`` of softmax over ``axis`` of ``shape``; the last stage is the output. ``safe``: a row
    whose every value is -inf (a query with no key to attend) gives zeros, not NaN (ONNX Attention's rule)."""
    x = te.placeholder(shape, "float32", "x")
    ax = axis % len(shape)
    k = shape[ax]
    red = shape[:ax] + (1,) + shape[ax + 1:]
    r1, r2 = te.reduce_axis(k, "r1"), te.reduce_axis(k, "r2")

    def at(i, v):
        return tuple(i[:ax]) + (v,) + tuple(i[ax + 1:])

    mx = te.compute(red, lambda *i: te.max_(x[at(i, r1)], axis=r1), name="row_max", dtype="float32")
    zero = te.const(0.0, "float32")

    def dead(i):  # a row whose max is -inf: every value is -inf
        return mx[at(i, 0)] < te.const(-FLOAT_MAX, "float32")

    def shift(i):  # safe: an all -inf row is shifted by 0, so its exps are 0 (not exp(-inf + inf) = NaN)
        return te.select(dead(i), zero, mx[at(i, 0)]) if safe else mx[at(i, 0)]
    ex = te.compute(shape, lambda *i: te.exp(x[i] - shift(i)), name="exp", dtype="float32")
    sm = te.compute(red, lambda *i: te.sum(ex[at(i, r2)], r2), name="row_sum", dtype="float32")

    def prob(i):  # safe: a dead row gives zeros (a NaN anywhere else still propagates)
        return te.select(dead(i), zero, ex[i] / sm[at(i, 0)]) if safe else ex[i] / sm[at(i, 0)]
    out = te.compute(shape, lambda *i: prob(i), name="softmax", dtype="float32")
    return [x], [mx, ex, sm, out]


FLOAT_MAX = 3.4028234663852886e38  # float32's largest finite value: a row max below it is -inf


def schedule_cpu(s, stages: list[Tensor]) -> None:
    from compiler.topi.injective import schedule_injective_cpu

    schedule_injective_cpu(s, stages[1])
    schedule_injective_cpu(s, stages[3])


def schedule_gpu(s, stages: list[Tensor]) -> None:
    from compiler.topi.injective import schedule_data_gpu

    schedule_data_gpu(s, stages)
