"""Softmax over one axis in TE: row max, sum of exp(x - max), then exp(x - max) / sum (float32)."""
from __future__ import annotations

from compiler import te
from compiler.te import Tensor


def softmax(shape: tuple[int, ...], axis: int = -1) -> tuple[list[Tensor], list[Tensor]]:
    """``(inputs, stages)`` of softmax over ``axis`` of ``shape``; the last stage is the output."""
    x = te.placeholder(shape, "float32", "x")
    ax = axis % len(shape)
    k = shape[ax]
    red = shape[:ax] + (1,) + shape[ax + 1:]
    r1, r2 = te.reduce_axis(k, "r1"), te.reduce_axis(k, "r2")

    def at(i, v):
        return tuple(i[:ax]) + (v,) + tuple(i[ax + 1:])

    mx = te.compute(red, lambda *i: te.max_(x[at(i, r1)], axis=r1), name="row_max", dtype="float32")
    ex = te.compute(shape, lambda *i: te.exp(x[i] - mx[at(i, 0)]), name="exp", dtype="float32")
    sm = te.compute(red, lambda *i: te.sum(ex[at(i, r2)], r2), name="row_sum", dtype="float32")
    out = te.compute(shape, lambda *i: ex[i] / sm[at(i, 0)], name="softmax", dtype="float32")
    return [x], [mx, ex, sm, out]


def schedule_cpu(s, stages: list[Tensor]) -> None:
    from compiler.topi.injective import schedule_injective_cpu

    schedule_injective_cpu(s, stages[1])
    schedule_injective_cpu(s, stages[3])


def schedule_gpu(s, stages: list[Tensor]) -> None:
    from compiler.topi.injective import schedule_data_gpu

    schedule_data_gpu(s, stages)
