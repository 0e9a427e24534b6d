"""Integer-only Softmax, LayerNorm and GELU (I-BERT-style) on int8 tensors with per-tensor (scale, zero point).

All run-time arithmetic is int64 numpy (floor shifts, floor division); every constant is chosen at compile
time from the scales. The int8 input ``q`` (scale ``s``, zero point ``z``) is first widened exactly to a finer
grid: ``x = (q - z) * M`` with scale ``s / M`` (``M`` integer, so that the polynomial constants below have
at least ~10 bits), then:

* ``QSoftmax`` (I-BERT i-exp): ``d = x - max(x) <= 0``; ``k = floor(d / L)`` (``L = floor(-ln 2 / s')``),
  ``r = d - k*L`` in ``(L, 0]``; ``e = ((r + B) * r + C) >> min(-k, 30)`` (``B = floor(b / s')``,
  ``C = floor(c / s'^2)``; ``exp(t) ~ a*(t^2 + b t + c)`` on ``(-ln 2, 0]``); output
  ``y = z_y + floor((2 * e * m + den) / (2 * den))`` with ``den = sum(e) << k_y``, ``m / 2**k_y ~ 1 / s_y``.
* ``QLayerNorm`` over the last axis (length ``n``): ``d = n*(q - z) - sum(q - z)`` (exact mean removal),
  ``D = sum(d^2) + E`` (``E = round(eps * n^3 / s^2)``), ``r = isqrt(D << 2h)`` by integer Newton
  iterations, ``u = (d << (16 + h)) // r`` (= ``d / sqrt(D) * 2**16``), ``y = z_y + ((u * G_c + H_c
  + 2**(S-1)) >> S)`` with per-channel ``G_c / 2**S ~ gamma_c * sqrt(n) / (2**16 * s_y)`` and
  ``H_c / 2**S ~ beta_c / s_y``.
* ``QGelu`` (I-BERT i-erf on ``x / sqrt 2``): ``e = sign(x) * ((min(|x|, -B) + B)^2 + C)`` with
  ``B = floor(-1.769 / s_e)``, ``C = floor(1 / (-0.2888 * s_e^2))``, ``s_e = s' / sqrt 2`` (so
  ``erf ~ e * (-0.2888 s_e^2)``); ``p = x * (e + floor(1 / (-0.2888 s_e^2)))`` (= ``x (1 + erf)``), then
  ``y = z_y + ((p * m + 2**(k-1)) >> k)`` with ``m / 2**k ~ s' * (-0.2888 s_e^2) / (2 s_y)``.

Outputs are clipped to int8.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jit_runtime.host_ops.registry import kernel

FINE_SCALE = 2.0 ** -10  # the widened grid's scale is at most this (or the input's, if finer)
EXP_A, EXP_B, EXP_C = 0.35815147, 0.96963238 / 0.35815147, 1.0 / 0.35815147  # I-BERT's exp on (-ln 2, 0]
ERF_A, ERF_B = -0.2888, -1.769  # I-BERT's erf: sign(x) * (a * (min(|x|, -b) + b)^2 + 1)
MAX_EXP_SHIFT = 30


def widen(scale: float) -> int:
    """The integer ``M`` that brings ``scale / M`` to at most :data:`FINE_SCALE`."""
    return max(1, math.ceil(scale / FINE_SCALE))


def _fixed(ratio: float, bits: int = 20, max_shift: int = 62) -> tuple[int, int]:
    """``(m, k)`` with ``m / 2**k ~ ratio`` and ``|m| < 2**bits``."""
    if ratio == 0:
        return 0, 0
    k = int(np.clip(math.floor(math.log2((2 ** bits - 1) / abs(ratio))), 0, max_shift))
    return int(round(ratio * 2.0 ** k)), k


def _check_scales(op: str, *scales: float) -> None:
    if not all(np.isfinite(s) and s > 0 for s in scales):
        raise ValueError(f"{op} scales must be finite and > 0, got {scales}")


# ---- Softmax ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QSoftmaxParams:
    axis: int
    widen: int
    ln2: int  # floor(-ln 2 / s'), negative
    b: int
    c: int
    out_mult: int
    out_shift: int
    out_zp: int


def choose_qsoftmax(sx: float, sy: float, zy: int, axis: int = -1) -> QSoftmaxParams:
    """Parameters of ``Q(Softmax(DQ(x)))`` (the input zero point cancels in ``x - max(x)``)."""
    _check_scales("QSoftmax", sx, sy)
    m = widen(sx)
    s = sx / m
    mult, shift = _fixed(1.0 / sy, bits=16, max_shift=40)
    return QSoftmaxParams(int(axis), m, math.floor(-math.log(2) / s), math.floor(EXP_B / s),
                          math.floor(EXP_C / s ** 2), mult, shift, int(zy))


def qsoftmax(q: np.ndarray, p: QSoftmaxParams) -> np.ndarray:
    x = np.asarray(q, np.int64) * p.widen
    d = x - x.max(axis=p.axis, keepdims=True)
    k = np.minimum(d // p.ln2, MAX_EXP_SHIFT)  # floor division; d <= 0 and ln2 < 0 give k >= 0
    r = np.maximum(d - k * p.ln2, p.ln2 + 1)  # (ln2, 0]; clamps the k = 30 tail
    e = ((r + p.b) * r + p.c) >> k
    den = e.sum(axis=p.axis, keepdims=True) << p.out_shift
    y = (2 * e * p.out_mult + den) // (2 * den) + p.out_zp
    return np.clip(y, -128, 127).astype(np.int8)


# ---- LayerNorm --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QLayerNormParams:
    n: int
    in_zp: int
    eps_int: int
    sqrt_shift: int  # h: D << 2h keeps below 2**62
    gain: np.ndarray  # (n,) int64
    bias: np.ndarray  # (n,) int64
    shift: int
    out_zp: int


def choose_qlayernorm(sx: float, zx: int, gamma: np.ndarray, beta: np.ndarray | None, eps: float, sy: float,
                      zy: int) -> QLayerNormParams:
    """Parameters of ``Q(LayerNormalization(DQ(x), gamma, beta, eps))`` over the last axis."""
    _check_scales("QLayerNorm", sx, sy)
    gamma = np.asarray(gamma, np.float64).ravel()
    n = gamma.size
    beta = np.zeros(n) if beta is None else np.broadcast_to(np.asarray(beta, np.float64).ravel(), (n,))
    eps_int = int(round(eps * n ** 3 / sx ** 2))
    d_max = n * (n * 255) ** 2 + eps_int
    h = max(0, (62 - d_max.bit_length()) // 2)
    g = gamma * math.sqrt(n) / (2.0 ** 16 * sy)
    top = max(float(np.abs(g).max()) * 2.0 ** 16 * math.sqrt(n), float(np.abs(beta).max()) / sy, 1e-30)
    shift = int(np.clip(math.floor(math.log2(2.0 ** 40 / top)), 0, 62))  # |u * G| < 2**40 * 2**(small)
    gain = np.rint(g * 2.0 ** shift).astype(np.int64)
    bias = np.rint(beta / sy * 2.0 ** shift).astype(np.int64)
    return QLayerNormParams(n, int(zx), eps_int, h, gain, bias, shift, int(zy))


def isqrt_newton(v: np.ndarray) -> np.ndarray:
    """floor(sqrt(v)) of non-negative int64 values by integer Newton iterations (from above)."""
    v = np.asarray(v, np.int64)
    bits, rest = np.zeros(v.shape, np.int64), v.copy()  # bit length by an integer binary search (a CLZ)
    for s in (32, 16, 8, 4, 2, 1):
        big = rest >= (np.int64(1) << s)
        bits += big * s
        rest = np.where(big, rest >> s, rest)
    bits += rest > 0
    x = np.where(v == 0, 0, np.int64(1) << ((bits + 1) >> 1))  # 2**ceil(bits/2) >= sqrt(v): Newton from above
    for _ in range(64):
        nxt = np.where(x > 0, (x + v // np.maximum(x, 1)) >> 1, 0)
        done = nxt >= x
        x = np.where(done, x, nxt)
        if done.all():
            break
    return x


def qlayernorm(q: np.ndarray, p: QLayerNormParams) -> np.ndarray:
    c = np.asarray(q, np.int64) - p.in_zp
    d = p.n * c - c.sum(axis=-1, keepdims=True)
    r = isqrt_newton(((d * d).sum(axis=-1, keepdims=True) + p.eps_int) << (2 * p.sqrt_shift))
    u = (d << (16 + p.sqrt_shift)) // np.maximum(r, 1)
    y = ((u * p.gain + p.bias + (1 << (p.shift - 1) if p.shift else 0)) >> p.shift) + p.out_zp
    return np.clip(y, -128, 127).astype(np.int8)


# ---- GELU ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QGeluParams:
    in_zp: int
    widen: int
    b: int
    c: int
    one: int
    mult: int
    shift: int
    out_zp: int


def choose_qgelu(sx: float, zx: int, sy: float, zy: int) -> QGeluParams:
    """Parameters of ``Q(x * 0.5 * (1 + erf(x / sqrt 2)))`` with ``x = DQ(q)``."""
    _check_scales("QGelu", sx, sy)
    m = widen(sx)
    s = sx / m
    se = s / math.sqrt(2.0)
    s_erf = ERF_A * se ** 2  # erf ~ e * s_erf (negative)
    c = math.floor(1.0 / s_erf)
    mult, shift = _fixed(s * s_erf / (2.0 * sy), bits=20)
    return QGeluParams(int(zx), m, math.floor(ERF_B / se), c, c, mult, shift, int(zy))


def qgelu(q: np.ndarray, p: QGeluParams) -> np.ndarray:
    x = (np.asarray(q, np.int64) - p.in_zp) * p.widen
    a = np.minimum(np.abs(x), -p.b)
    e = np.sign(x) * ((a + p.b) ** 2 + p.c)
    prod = x * (e + p.one)
    y = ((prod * p.mult + (1 << (p.shift - 1) if p.shift else 0)) >> p.shift) + p.out_zp
    return np.clip(y, -128, 127).astype(np.int8)


# ---- host-op kernels (registered on import; jit_runtime.host_ops imports this module) -------------------
@kernel("QSoftmax")
def qsoftmax_k(a, x):
    return qsoftmax(x, a["qsoftmax"])


@kernel("QLayerNorm")
def qlayernorm_k(a, x):
    return qlayernorm(x, a["qlayernorm"])


@kernel("QGelu")
def qgelu_k(a, x):
    return qgelu(x, a["qgelu"])
