"""ONNX's Reduce* family and LogSoftmax in TE (float32), over any set of axes.

The input is viewed as ``(outer, reduced, inner)`` after moving nothing: the reduced axes need not be adjacent, the
compute indexes the original layout (a reduce axis per reduced input axis). ``keepdims`` is a reshape of the result
(the planner's), so the op's output has the kept axes only.
"""
from __future__ import annotations

import numpy as np

from compiler import te
from compiler.te import Tensor

KINDS = ("sum", "mean", "max", "min", "sum_square", "l1", "l2", "log_sum_exp", "log_sum")


def _c(v: float) -> te.Expr:
    return te.const(float(np.float32(v)), "float32")


def reduce(shape: tuple[int, ...], axes: tuple[int, ...], kind: str) -> tuple[list[Tensor], list[Tensor]]:
    """``(inputs, stages)`` of ``kind`` over ``axes`` (sorted, non-negative) of a float32 ``shape``; the last stage
    is the output, shaped as the kept axes (``(1,)`` when every axis is reduced)."""
    if kind not in KINDS:
        raise te.TeError(f"unknown reduction {kind!r}; known: {KINDS}")
    axes = tuple(sorted(set(int(a) for a in axes)))
    if not axes or any(not 0 <= a < len(shape) for a in axes):
        raise te.TeError(f"reduce: axes {axes} must be a non-empty set of axes of shape {shape}")
    if any(shape[a] == 0 for a in axes):
        raise te.TeError(f"reduce: axis of size 0 in {shape}")
    kept = [a for a in range(len(shape)) if a not in axes]
    out_shape = tuple(shape[a] for a in kept) or (1,)
    count = int(np.prod([shape[a] for a in axes]))
    x = te.placeholder(shape, "float32", "x")

    def index(i, rs):
        it, ir = iter(i), iter(rs)
        return tuple(next(ir) if a in axes else next(it) for a in range(len(shape)))

    def rvars(tag: str):
        return [te.reduce_axis(shape[a], f"{tag}{a}") for a in axes]

    def stage(body, name: str, red: str):
        rs = rvars(name[0])

        def f(*i):
            v = body(x[index(i if kept else (), rs)], i)
            return te.sum_(v, rs) if red == "sum" else (te.max_(v, axis=rs) if red == "max" else te.min_(v, axis=rs))
        return te.compute(out_shape, f, name=name, dtype="float32")

    if kind in ("max", "min"):
        out = stage(lambda v, i: v, f"reduce_{kind}", kind)
        return [x], [out]
    if kind == "log_sum_exp":
        mx = stage(lambda v, i: v, "lse_max", "max")
        # a row of -inf (or all +inf) has no finite max: shift by 0 there (as the numpy kernel)
        shift = te.compute(out_shape, lambda *i: te.select(te.abs_(mx[i]) < _c(3.0e38), mx[i], _c(0.0)),
                           name="lse_shift", dtype="float32")
        tot = stage(lambda v, i: te.exp(v - shift[i]), "lse_sum", "sum")
        out = te.compute(out_shape, lambda *i: te.log(tot[i]) + shift[i], name="reduce_log_sum_exp", dtype="float32")
        return [x], [mx, shift, tot, out]
    term = {"sum": lambda v, i: v, "mean": lambda v, i: v, "sum_square": lambda v, i: v * v,
            "l1": lambda v, i: te.abs_(v), "l2": lambda v, i: v * v, "log_sum": lambda v, i: v}[kind]
    tot = stage(term, "reduce_sum", "sum")
    if kind == "mean":
        out = te.compute(out_shape, lambda *i: tot[i] * _c(1.0 / count), name="reduce_mean", dtype="float32")
    elif kind == "l2":
        out = te.compute(out_shape, lambda *i: te.sqrt(tot[i]), name="reduce_l2", dtype="float32")
    elif kind == "log_sum":
        out = te.compute(out_shape, lambda *i: te.log(tot[i]), name="reduce_log_sum", dtype="float32")
    else:
        return [x], [tot]
    return [x], [tot, out]


def log_softmax(shape: tuple[int, ...], axis: int = -1) -> tuple[list[Tensor], list[Tensor]]:
    """``(inputs, stages)`` of ``x - max - log(sum(exp(x - max)))`` over ``axis``; the last stage is the output."""
    x = te.placeholder(shape, "float32", "x")
    ax = axis % len(shape)
    red = shape[:ax] + (1,) + shape[ax + 1:]
    r1, r2 = te.reduce_axis(shape[ax], "r1"), te.reduce_axis(shape[ax], "r2")

    def at(i, v):
        return tuple(i[:ax]) + (v,) + tuple(i[ax + 1:])

    mx = te.compute(red, lambda *i: te.max_(x[at(i, r1)], axis=r1), name="row_max", dtype="float32")
    sm = te.compute(red, lambda *i: te.sum_(te.exp(x[at(i, r2)] - mx[at(i, 0)]), r2), name="row_sum", dtype="float32")
    out = te.compute(shape, lambda *i: x[i] - mx[at(i, 0)] - te.log(sm[at(i, 0)]), name="log_softmax",
                     dtype="float32")
    return [x], [mx, sm, out]


def schedule_cpu(s, stages: list[Tensor]) -> None:
    """Elementwise (non-reducing) stages flat and vectorized; the reductions serial per output value, their output
    loops parallel when large."""
    from compiler.topi.injective import PARALLEL_MIN, schedule_injective_cpu

    for t in stages:
        if any(a.kind == "reduce" for a in s[t].leaf_iter_vars):
            st = s[t]
            data = [a for a in st.leaf_iter_vars if a.kind == "data"]
            flat = data[0]
            for a in data[1:]:
                flat = st.fuse(flat, a)
            if flat.extent >= PARALLEL_MIN:
                st.parallel(flat)
        else:
            schedule_injective_cpu(s, t)


def schedule_gpu(s, stages: list[Tensor]) -> None:
    from compiler.topi.injective import schedule_data_gpu

    schedule_data_gpu(s, stages)
