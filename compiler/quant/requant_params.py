"""Choose integer Requant parameters (pre_shift, 16-bit multiplier, shift) for real scales."""
from __future__ import annotations

import numpy as np

from compiler.requant import Requant

MULT_BITS = 15  # multiplier magnitude < 2**15 (signed 16-bit immediate)


def choose_requant(real_scale: np.ndarray | float, acc_bound: int, *, relu: bool = False,
                   out_min: int = -128, out_max: int = 127) -> Requant:
    """Fixed-point approximation of ``acc * real_scale`` that can never overflow int32.

    ``acc_bound`` bounds |acc + bias| over all channels. ``pre_shift`` makes
    |acc >> pre_shift| < 2**16 so the product with a multiplier < 2**15 fits int32; then per
    channel the largest ``shift`` (<= 31) keeps ``round(real_scale * 2**(pre_shift+shift))``
    below 2**15, which maximizes precision.
    """
    s = np.atleast_1d(np.asarray(real_scale, dtype=np.float64))
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("requant scales must be finite and >= 0")
    pre = max(0, int(np.ceil(np.log2(max(int(acc_bound), 1) + 1))) - 16)
    eff = s * float(2 ** pre)
    with np.errstate(divide="ignore"):
        shift = np.where(eff > 0, np.floor(np.log2((2 ** MULT_BITS - 1) / np.maximum(eff, 1e-300))), 31)
    shift = np.clip(shift, 0, 31).astype(np.int64)
    mult = np.rint(eff * np.exp2(shift)).astype(np.int64)
    over = mult >= 2 ** MULT_BITS  # rounding up to 2**15 at the boundary
    shift = np.where(over & (shift > 0), shift - 1, shift)
    mult = np.minimum(np.rint(eff * np.exp2(shift)).astype(np.int64), 2 ** MULT_BITS - 1)
    if np.ndim(real_scale) == 0:
        mult, shift = int(mult[0]), int(shift[0])
    return Requant(pre_shift=pre, multiplier=mult, shift=shift, relu=relu, out_min=int(out_min), out_max=int(out_max),
                   extra={"real_scale": np.asarray(real_scale, dtype=np.float64)})


def acc_bound(w_int: np.ndarray, bias_int: np.ndarray | None, in_absmax: int = 128) -> int:
    """Worst-case |accumulator + bias| for int8 inputs of magnitude <= ``in_absmax``."""
    w = np.abs(np.asarray(w_int, dtype=np.int64)).reshape(w_int.shape[0], -1).sum(axis=1) * in_absmax
    if bias_int is not None:
        w = w + np.abs(np.asarray(bias_int, dtype=np.int64))
    return int(w.max()) if w.size else 0
