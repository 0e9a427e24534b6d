"""Elementwise operators in TE: activations on one tensor and broadcasting binary arithmetic.

Float math is float32 and follows the numpy kernels of :mod:`jit_runtime.host_ops.kernels` operation for
operation (so the CPU/GPU targets agree with onnxruntime to rounding).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from compiler import te
from compiler.te import Tensor

ACTIVATIONS = ("relu", "clip", "sigmoid", "hardsigmoid", "hardswish", "leakyrelu", "erf", "tanh", "sqrt", "exp", "log",
               "neg", "reciprocal", "abs", "floor", "ceil", "round", "sign", "softplus", "softsign", "elu", "selu",
               "celu", "gelu", "gelu_tanh", "mish", "thresholdedrelu", "pow", "swish", "sin", "cos")
# Odd functions as x P(x^2) / Q(x^2) with all coefficients positive (Q >= 1), fitted here to float64 references
# (scipy's erf, numpy's tanh) on [0, saturation] by linearized least squares reweighted by 1/Q; evaluated in float32
# (Horner). erf: degree 5 / 5, max abs error 3.9e-7 on [-3.9, 3.9] (erf(3.9) rounds to 1 - 6e-8); tanh: degree
# 4 / 4, max abs error 3.4e-7 on [-9, 9] (tanh(9) rounds to 1 - 6e-8); +-1 beyond.
ERF_P = (1.1283790642469311, 0.1921206607947379, 0.05295699450899496, 0.003836504110270906, 0.0002859714697000769,
         2.0284038086959555e-06)
ERF_Q = (1.0, 0.5035945210114334, 0.11480192216930797, 0.015108285196829413, 0.0011789940819192483,
         3.792860242367996e-05)
ERF_SATURATES = 3.9
TANH_P = (0.9999999258210664, 0.13384993097678155, 0.003500528839539233, 2.0699019761481405e-05,
          1.3494871053953972e-08)
TANH_Q = (1.0, 0.4671829668080059, 0.025895196163674996, 0.0003294092471273605, 7.830676394433855e-07)
TANH_SATURATES = 9.0


def _horner(t: te.Expr, coefs: tuple) -> te.Expr:
    acc = _c(coefs[-1])
    for c in reversed(coefs[:-1]):
        acc = acc * t + _c(c)
    return acc


def _odd_rational(x: te.Expr, p: tuple, q: tuple, saturates: float) -> te.Expr:
    """``x P(x^2) / Q(x^2)`` clamped to [-1, 1], +-1 beyond ``+-saturates``; NaN stays NaN (every comparison with it
    is false). Multiplies, adds and one division: it vectorizes, where libm's ``erff``/``tanhf`` are a scalar call per
    element (~12 ns: the GELUs of a 128-token BERT took as long as its dense layers)."""
    t = x * x
    y = x * _horner(t, p) / _horner(t, q)
    one, minus = _c(1.0), _c(-1.0)
    y = te.select(y > one, one, te.select(y < minus, minus, y))
    return te.select(x > _c(saturates), one, te.select(x < _c(-saturates), minus, y))


def erf_rational(x: te.Expr) -> te.Expr:
    """float32 erf (:data:`ERF_P` / :data:`ERF_Q`, see :func:`_odd_rational`)."""
    return _odd_rational(x, ERF_P, ERF_Q, ERF_SATURATES)


def tanh_rational(x: te.Expr) -> te.Expr:
    """float32 tanh (:data:`TANH_P` / :data:`TANH_Q`, see :func:`_odd_rational`)."""
    return _odd_rational(x, TANH_P, TANH_Q, TANH_SATURATES)


def expm1(x: te.Expr) -> te.Expr:
    """float32 ``e^x - 1`` without the cancellation of ``exp(x) - 1`` near 0 (Taylor to x^7 for |x| < 1/4: relative
    error below 1e-9 there)."""
    t = _horner(x, (1.0, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040)) * x
    return te.select(te.abs_(x) < _c(0.25), t, te.exp(x) - _c(1.0))


def log1p(u: te.Expr) -> te.Expr:
    """float32 ``log(1 + u)`` without losing ``u``'s digits when it is small: ``log(w) * u / (w - 1)`` with
    ``w = 1 + u`` rounded (the rounding's error cancels; ``u`` itself where ``w`` rounds to 1)."""
    w = _c(1.0) + u
    return te.select(w.equal(_c(1.0)), u, te.log(w) * u / (w - _c(1.0)))


def softplus(x: te.Expr) -> te.Expr:
    """float32 ``log(1 + e^x)`` as ``max(x, 0) + log1p(e^-|x|)``: no overflow, full precision for very negative x."""
    zero = _c(0.0)
    return te.max_(x, zero) + log1p(te.exp(zero - te.abs_(x)))


def power(x: te.Expr, p: te.Expr) -> te.Expr:
    """float32 ``x ** p`` (ONNX Pow) as ``e^(p log|x|)``: a negative base keeps its sign for odd integer ``p``, is
    NaN for a non-integer one (but -inf gives |x| ** p, as C's powf and numpy); ``x ** 0`` is 1 (also for NaN x)."""
    zero, one = _c(0.0), _c(1.0)
    mag = te.exp(p * te.log(te.abs_(x)))
    whole = te.floor(p).equal(p)
    odd = whole & te.floor(p * _c(0.5)).not_equal(p * _c(0.5))
    nan = (zero - one) * te.sqrt(zero - one)
    neg = te.select(whole, te.select(odd, zero - mag, mag), te.select(x.equal(_c(-np.inf)), mag, nan))
    return te.select(p.equal(zero), one, te.select(x < zero, neg, mag))


def power_const(x: te.Expr, p: float) -> te.Expr:
    """``x ** p`` for a constant exponent: small integers as products (as numpy's float32 power), 1/2 as a square
    root (as numpy), anything else :func:`power`."""
    n = int(p) if float(p).is_integer() and abs(p) <= 4 else None
    if n is not None:
        if n == 0:
            return _c(1.0)
        y = x
        for _ in range(abs(n) - 1):
            y = y * x
        return y if n > 0 else _c(1.0) / y
    if p == 0.5:  # as numpy's power (a square root there too: NaN for -inf, where C's powf gives inf)
        return te.sqrt(x)
    return power(x, _c(p))


_SQRT1_2 = 0.7071067811865476
_GELU_TANH = 0.7978845608028654  # sqrt(2 / pi)
_MATH = {  # float32 math functions and parameterless activations
    "erf": erf_rational, "tanh": tanh_rational, "sqrt": te.sqrt, "exp": te.exp, "log": te.log, "abs": te.abs_,
    "floor": te.floor, "round": te.round_, "sin": te.sin, "cos": te.cos,
    "neg": lambda x: _c(0.0) - x,
    "reciprocal": lambda x: _c(1.0) / x,
    "ceil": lambda x: _c(0.0) - te.floor(_c(0.0) - x),
    "sign": lambda x: te.select(x > _c(0.0), _c(1.0), te.select(x < _c(0.0), _c(-1.0), x)),  # 0 and NaN kept
    "softplus": softplus,
    "softsign": lambda x: x / (_c(1.0) + te.abs_(x)),
    "gelu": lambda x: _c(0.5) * x * (_c(1.0) + erf_rational(x * _c(_SQRT1_2))),
    "gelu_tanh": lambda x: _c(0.5) * x * (_c(1.0) + tanh_rational(_c(_GELU_TANH) * (x + _c(0.044715) * x * x * x))),
    "mish": lambda x: x * tanh_rational(softplus(x)),
}


def activation(x: te.Expr, kind: str | None, params: tuple = ()) -> te.Expr:
    """``x`` through activation or math function ``kind`` (None: unchanged); ``params``: clip (lo, hi), hardsigmoid
    (alpha, beta), leakyrelu / elu / celu / thresholdedrelu / swish (alpha,), selu (alpha, gamma), pow (exponent,)."""
    if kind is None:
        return x
    f32 = x.dtype == "float32"
    zero = te.const(0.0, "float32") if f32 else te.const(0, x.dtype)
    if kind == "relu":
        return te.max_(x, zero)
    if kind == "clip":
        lo, hi = params
        y = x if lo is None else te.max_(x, _c(lo, x.dtype))
        return y if hi is None else te.min_(y, _c(hi, x.dtype))
    if not f32:
        raise te.TeError(f"activation {kind!r} needs float32 input, got {x.dtype}")
    one = te.const(1.0, "float32")
    if kind == "sigmoid":
        return one / (one + te.exp(zero - x))
    if kind == "hardsigmoid":
        alpha, beta = params
        return te.min_(te.max_(x * _c(alpha) + _c(beta), zero), one)
    if kind == "hardswish":
        return x * te.min_(te.max_(x / _c(6.0) + _c(0.5), zero), one)
    if kind in _MATH:
        return _MATH[kind](x)
    if kind == "leakyrelu":
        (alpha,) = params
        return te.select(x >= zero, x, x * _c(alpha))
    if kind == "elu":
        (alpha,) = params
        return te.select(x >= zero, x, _c(alpha) * expm1(x))
    if kind == "selu":
        alpha, gamma = params
        return _c(gamma) * te.select(x > zero, x, _c(alpha) * expm1(x))
    if kind == "celu":
        (alpha,) = params
        return te.max_(x, zero) + te.min_(zero, _c(alpha) * expm1(x / _c(alpha)))
    if kind == "swish":
        (alpha,) = params
        return x / (one + te.exp(zero - _c(alpha) * x))
    if kind == "thresholdedrelu":
        (alpha,) = params
        return te.select(x > _c(alpha), x, zero)
    if kind == "pow":
        (p,) = params
        return power_const(x, p)
    raise te.TeError(f"unknown activation {kind!r}; known: {ACTIVATIONS}")


def _c(v, dtype: str = "float32") -> te.Expr:
    return te.const(float(np.float32(v)) if dtype == "float32" else int(v), dtype)


def unary(shape: tuple[int, ...], dtype: str, kind: str, params: tuple = (), name: str = "act") -> tuple[list[Tensor], Tensor]:
    """``y = kind(x)`` elementwise."""
    x = te.placeholder(shape, dtype, "x")
    y = te.compute(shape, lambda *i: activation(x[i], kind, params), name=name, dtype=dtype)
    return [x], y


def _nan_or(a: te.Expr, b: te.Expr, y: te.Expr) -> te.Expr:
    """``y``, or the NaN operand where there is one (ONNX Min/Max propagate NaN, as numpy's minimum/maximum)."""
    if a.dtype != "float32":
        return y
    return te.select(a.not_equal(a), a, te.select(b.not_equal(b), b, y))


BINARY: dict[str, Callable[[te.Expr, te.Expr], te.Expr]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "prelu": lambda a, b: te.select(a >= te.const(0.0, "float32"), a, a * b),  # ONNX PRelu: b the slope (float32)
    "min": lambda a, b: _nan_or(a, b, te.min_(a, b)), "max": lambda a, b: _nan_or(a, b, te.max_(a, b)),
    "pow": power,  # float32 only
}


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(a, b))
    except ValueError:
        raise te.TeError(f"shapes {a} and {b} do not broadcast") from None


def _bcast_index(shape: tuple[int, ...], out_ndim: int):
    """Index function of an operand of ``shape`` inside an output of ``out_ndim`` dims (numpy broadcasting)."""
    lead = out_ndim - len(shape)

    def idx(i):
        return tuple(0 if shape[k] == 1 else i[lead + k] for k in range(len(shape)))
    return idx


def binary(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str, op: str,
           act: str | None = None, act_params: tuple = ()) -> tuple[list[Tensor], Tensor]:
    """``y = act(a op b)`` with numpy broadcasting; ``op`` in add/sub/mul/div/prelu (div, prelu: float32 only)."""
    if op not in BINARY:
        raise te.TeError(f"unknown binary op {op!r}; known: {sorted(BINARY)}")
    out = broadcast_shape(a_shape, b_shape)
    a = te.placeholder(a_shape or (1,), dtype, "a")
    b = te.placeholder(b_shape or (1,), dtype, "b")
    ia, ib = _bcast_index(a.shape, len(out)), _bcast_index(b.shape, len(out))
    fn = BINARY[op]
    y = te.compute(out or (1,), lambda *i: activation(fn(a[ia(i)], b[ib(i)]), act, act_params), name=op, dtype=dtype)
    return [a, b], y


def channel_affine(shape: tuple[int, ...], name: str = "affine") -> tuple[list[Tensor], Tensor]:
    """``y[n, c, ...] = x[n, c, ...] * scale[c] + shift[c]`` (float32): inference BatchNormalization."""
    if len(shape) < 2:
        raise te.TeError(f"a per-channel affine needs an (N, C, ...) input, got shape {shape}")
    x = te.placeholder(shape, "float32", "x")
    scale = te.placeholder((shape[1],), "float32", "scale")
    shift = te.placeholder((shape[1],), "float32", "shift")
    y = te.compute(shape, lambda *i: x[i] * scale[i[1]] + shift[i[1]], name=name, dtype="float32")
    return [x, scale, shift], y


def sum_n(shapes: list[tuple[int, ...]], dtype: str, op: str = "add") -> tuple[list[Tensor], Tensor]:
    """``y = x0 op x1 op ...`` with numpy broadcasting over all operands: ONNX ``Sum`` (``op="add"``), ``Min`` and
    ``Max`` (``"min"``, ``"max"``) and ``Mean`` (``"mean"``: the sum times 1/n)."""
    if op not in ("add", "min", "max", "mean"):
        raise te.TeError(f"sum_n: op must be add, min, max or mean, got {op!r}")
    fn = BINARY["add" if op == "mean" else op]
    if not shapes:
        raise te.TeError("sum_n needs at least one operand")
    try:
        out = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise te.TeError(f"shapes {shapes} do not broadcast") from None
    xs = [te.placeholder(sh or (1,), dtype, f"x{k}") for k, sh in enumerate(shapes)]
    idx = [_bcast_index(x.shape, len(out)) for x in xs]

    def body(*i):
        acc = xs[0][idx[0](i)]
        for x, ix in zip(xs[1:], idx[1:]):
            acc = fn(acc, x[ix(i)])
        return acc * _c(1.0 / len(xs)) if op == "mean" else acc
    y = te.compute(out or (1,), body, name=op if op != "add" else "sum", dtype=dtype)
    return xs, y
