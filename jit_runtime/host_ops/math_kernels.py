"""Numpy kernels of ONNX's elementwise math, comparisons and reductions (ONNX semantics, the input's float type).

Unary math (Exp, Log, Neg, Reciprocal, Abs, Floor, Ceil, Round, Sign, Sin, Cos), the smooth activations exporters
write (Softplus, Softsign, Elu, Selu, Celu, Gelu, Mish, ThresholdedRelu), Min/Max over any number of broadcast
inputs, the comparisons and logic of masks (Greater, Less, GreaterOrEqual, LessOrEqual, Or, Xor, Not), the Reduce*
family over any axes, ArgMax/ArgMin and LogSoftmax. Registered into :data:`jit_runtime.host_ops.registry.KERNELS`.
"""
from __future__ import annotations

import numpy as np

from jit_runtime.host_ops.registry import kernel


def _float(x) -> np.ndarray:
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float32)


def _unary(fn):
    def run(a, x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, x)).astype(x.dtype)
    return run


# ---- unary math ------------------------------------------------------------------------------------------------
_UNARY = {
    "Exp": lambda a, x: np.exp(x),
    "Log": lambda a, x: np.log(x),
    "Neg": lambda a, x: np.negative(x),
    "Reciprocal": lambda a, x: np.reciprocal(_float(x)),
    "Abs": lambda a, x: np.abs(x),
    "Floor": lambda a, x: np.floor(x),
    "Ceil": lambda a, x: np.ceil(x),
    "Round": lambda a, x: np.rint(x),  # half to even, as ONNX
    "Sign": lambda a, x: np.sign(x),
    "Sin": lambda a, x: np.sin(x),
    "Cos": lambda a, x: np.cos(x),
    "Softplus": lambda a, x: np.logaddexp(x, x.dtype.type(0)),  # log(1 + e^x) without overflow
    "Softsign": lambda a, x: x / (1 + np.abs(x)),
    "Elu": lambda a, x: np.where(x >= 0, x, float(a.get("alpha", 1.0)) * np.expm1(x)),
    "Selu": lambda a, x: float(a.get("gamma", 1.0507009873554805)) * np.where(
        x > 0, x, float(a.get("alpha", 1.6732632423543772)) * np.expm1(x)),
    "Celu": lambda a, x: np.maximum(x, 0) + np.minimum(0, float(a.get("alpha", 1.0)) * np.expm1(
        x / float(a.get("alpha", 1.0)))),
    "Mish": lambda a, x: x * np.tanh(np.logaddexp(x, x.dtype.type(0))),
    "ThresholdedRelu": lambda a, x: np.where(x > float(a.get("alpha", 1.0)), x, 0),
    "Swish": lambda a, x: x / (1 + np.exp(-float(a.get("alpha", 1.0)) * x.astype(np.float64))),
    "Tan": lambda a, x: np.tan(x), "Asin": lambda a, x: np.arcsin(x), "Acos": lambda a, x: np.arccos(x),
    "Atan": lambda a, x: np.arctan(x), "Sinh": lambda a, x: np.sinh(x), "Cosh": lambda a, x: np.cosh(x),
    "Asinh": lambda a, x: np.arcsinh(x), "Acosh": lambda a, x: np.arccosh(x), "Atanh": lambda a, x: np.arctanh(x),
}
for _op, _fn in _UNARY.items():
    kernel(_op)(_unary(_fn))


@kernel("Gelu")
def gelu(a, x):
    """``x * Phi(x)`` (``approximate="none"``: erf) or its tanh approximation (``"tanh"``)."""
    x = np.asarray(x)
    xf = x.astype(np.float64)
    with np.errstate(all="ignore"):
        return _gelu(xf, a.get("approximate", "none")).astype(x.dtype)


def _gelu(xf: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        y = 0.5 * xf * (1 + np.tanh(np.sqrt(2 / np.pi) * (xf + 0.044715 * xf ** 3)))
    else:
        from scipy.special import erf  # scipy comes with scikit-learn (a dependency)

        y = 0.5 * xf * (1 + erf(xf / np.sqrt(2)))
    return y


# ---- n-ary and comparisons ---------------------------------------------------------------------------------------
def fold(fn, xs) -> np.ndarray:
    """``fn`` folded over every input (numpy broadcasting), as a fresh array: ONNX Sum, Max, Min (NaN propagates
    through numpy's maximum/minimum, as ONNX asks)."""
    out = xs[0]
    for x in xs[1:]:
        out = fn(out, x)
    return np.array(out, copy=True)


kernel("Max")(lambda a, *xs: fold(np.maximum, xs))
kernel("Min")(lambda a, *xs: fold(np.minimum, xs))


for _op, _fn in {"Greater": np.greater, "Less": np.less, "GreaterOrEqual": np.greater_equal,
                 "LessOrEqual": np.less_equal, "Or": np.logical_or, "Xor": np.logical_xor}.items():
    kernel(_op)(lambda a, x, y, _fn=_fn: _fn(x, y))


@kernel("Not")
def logical_not(a, x):
    return np.logical_not(x)


for _op, _fn in {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor}.items():
    kernel(_op)(lambda a, x, y, _fn=_fn: _fn(x, y))
kernel("BitwiseNot")(lambda a, x: np.invert(x))


@kernel("BitShift")
def bit_shift(a, x, y):
    """Unsigned shifts (``direction`` LEFT or RIGHT); bits shifted out are dropped, in the input's width."""
    x, y = np.asarray(x), np.asarray(y)
    return (np.left_shift(x, y) if a["direction"] == "LEFT" else np.right_shift(x, y)).astype(x.dtype)


@kernel("IsInf")
def is_inf(a, x):
    x = np.asarray(x)
    return ((np.isposinf(x) & bool(a.get("detect_positive", 1))) | (np.isneginf(x) & bool(a.get("detect_negative", 1))))


# ---- reductions ---------------------------------------------------------------------------------------------------
def reduce_axes(a: dict, ndim: int, axes=None) -> tuple[int, ...] | None:
    """The non-negative axes a Reduce* node reduces (attribute before opset 18 / 13 for ReduceSum, else its input);
    None: reduce nothing (empty axes with ``noop_with_empty_axes``)."""
    axes = a.get("axes") if axes is None else axes
    axes = [] if axes is None else [int(v) for v in np.ravel(axes)]
    if not axes:
        return None if a.get("noop_with_empty_axes", 0) else tuple(range(ndim))
    return tuple(sorted({v % max(ndim, 1) for v in axes}))


_REDUCE = {
    "ReduceSum": lambda x, ax, k: np.sum(x, axis=ax, keepdims=k),
    "ReduceMax": lambda x, ax, k: np.max(x, axis=ax, keepdims=k),
    "ReduceMin": lambda x, ax, k: np.min(x, axis=ax, keepdims=k),
    "ReduceProd": lambda x, ax, k: np.prod(x, axis=ax, keepdims=k),
    "ReduceSumSquare": lambda x, ax, k: np.sum(x * x, axis=ax, keepdims=k),
    "ReduceL1": lambda x, ax, k: np.sum(np.abs(x), axis=ax, keepdims=k),
    "ReduceL2": lambda x, ax, k: np.sqrt(np.sum(_float(x) * _float(x), axis=ax, keepdims=k)),
    "ReduceLogSumExp": lambda x, ax, k: _logsumexp(_float(x), ax, k),
    "ReduceLogSum": lambda x, ax, k: np.log(np.sum(_float(x), axis=ax, keepdims=k)),
}


def _logsumexp(x: np.ndarray, ax, keep: bool) -> np.ndarray:
    m = np.max(x, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    return out if keep else np.squeeze(out, axis=ax)


def _lowest(dt: np.dtype):
    return -np.inf if dt.kind == "f" else (False if dt.kind == "b" else np.iinfo(dt).min)


def _highest(dt: np.dtype):
    return np.inf if dt.kind == "f" else (True if dt.kind == "b" else np.iinfo(dt).max)


# ONNX (opset 18): over an empty set Max is the lowest value, Min the highest, LogSum(Exp) -inf (log of an empty sum)
_EMPTY = {"ReduceMax": _lowest, "ReduceMin": _highest, "ReduceLogSumExp": lambda dt: -np.inf,
          "ReduceLogSum": lambda dt: -np.inf}


def _reducer(op: str):
    fn = _REDUCE[op]

    def run(a, x, axes=None):
        x = np.asarray(x)
        ax = reduce_axes(a, x.ndim, axes)
        if ax is None:
            return np.array(x, copy=True)
        keep = bool(a.get("keepdims", 1))
        if any(x.shape[i] == 0 for i in ax) and op in _EMPTY:  # an empty set: the identity of the reduction
            shape = tuple(1 if i in ax else d for i, d in enumerate(x.shape) if keep or i not in ax)
            return np.full(shape, _EMPTY[op](x.dtype), x.dtype)
        with np.errstate(all="ignore"):
            return np.asarray(fn(x, ax, keep)).astype(x.dtype)
    return run


for _op in _REDUCE:
    kernel(_op)(_reducer(_op))


def _arg(pick):
    def run(a, x):
        x = np.asarray(x)
        axis = int(a.get("axis", 0)) % max(x.ndim, 1)
        if a.get("select_last_index", 0):
            flipped = np.flip(x, axis=axis)
            idx = x.shape[axis] - 1 - pick(flipped, axis=axis)
        else:
            idx = pick(x, axis=axis)
        idx = np.asarray(idx, np.int64)
        return np.expand_dims(idx, axis) if a.get("keepdims", 1) else idx
    return run


kernel("ArgMax")(_arg(np.argmax))
kernel("ArgMin")(_arg(np.argmin))


@kernel("LogSoftmax")
def log_softmax(a, x):
    x = np.asarray(x)
    axis = int(a.get("axis", -1))
    xf = _float(x)
    d = xf - xf.max(axis=axis, keepdims=True)
    return (d - np.log(np.exp(d).sum(axis=axis, keepdims=True))).astype(x.dtype)


@kernel("Einsum")
def einsum(a, *xs):
    """numpy's einsum of the ``equation`` (ONNX's grammar is numpy's: explicit ``->`` or implicit output,
    ``...`` broadcasting), in the inputs' type."""
    xs = [np.asarray(x) for x in xs]
    t = xs[0].dtype
    if t.kind not in "fiub":  # bfloat16 (ml_dtypes): numpy's einsum has no loop for it, float32 does
        xs = [x.astype(np.float32) for x in xs]
    return np.asarray(np.einsum(a["equation"].replace(" ", ""), *xs, optimize=True)).astype(t)
