"""Choose integer Requant parameters (multiplier, shift; legacy: pre_shift) for real scales."""
from __future__ import annotations

import numpy as np

from jit_runtime.host_ops.requant import Requant

#: Multiplier magnitude bits: 31 (int32, the fused REQUANT op's 32 x 32 -> 64-bit product) by default;
#: 15 for the legacy multi-pass ALU epilogue (signed 16-bit immediate, product within int32).
MULT_BITS = 31
LEGACY_MULT_BITS = 15
MAX_SHIFT = 63


def mult_bits_for(cfg) -> int:
    """Multiplier width the accelerator layers of ``cfg`` need: :data:`MULT_BITS` (31, no pre-shift) when ``cfg``
    has the fused REQUANT op (ISA registry ``op_supported``) or is no hardware config (None, the graph level's
    ``BlockConfig``: the default 16x16 blocks of 8-bit weights have it), else :data:`LEGACY_MULT_BITS` (15,
    pre-shift, shift <= 31: the multi-pass ALU epilogue)."""
    if cfg is None or not hasattr(cfg, "wgt_width"):
        return MULT_BITS
    from isa.alu import alu_op, op_supported

    return MULT_BITS if op_supported(alu_op("REQUANT"), cfg) else LEGACY_MULT_BITS


def choose_requant(real_scale: np.ndarray | float, acc_bound: int, *, relu: bool = False,
                   out_min: int = -128, out_max: int = 127, mult_bits: int = MULT_BITS) -> Requant:
    """Fixed-point approximation of ``acc * real_scale``: ``round_shift(acc * multiplier, shift)``.

    Default (``mult_bits=31``): no pre-shift; per channel the largest ``shift`` (<= 63) keeps
    ``multiplier = round(real_scale * 2**shift)`` below 2**31, so the multiplier carries 31 significant
    bits and the result equals ``round(acc * real_scale)`` except within ``2**-31`` relative of a tie; the
    product of an int32 accumulator and the multiplier is exact in 64 bits (``acc_bound`` is not needed).

    ``mult_bits=15`` is the legacy scheme for configs without the fused op: ``pre_shift`` makes
    ``|acc >> pre_shift| < 2**16`` for ``|acc + bias| <= acc_bound`` so the product with a multiplier
    below 2**15 fits int32, and ``shift <= 31``.
    """
    if mult_bits not in (MULT_BITS, LEGACY_MULT_BITS):
        raise ValueError(f"mult_bits must be {MULT_BITS} (fused REQUANT) or {LEGACY_MULT_BITS} (legacy), got {mult_bits}")
    s = np.atleast_1d(np.asarray(real_scale, dtype=np.float64))
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("requant scales must be finite and >= 0")
    legacy = mult_bits == LEGACY_MULT_BITS
    pre = max(0, int(np.ceil(np.log2(max(int(acc_bound), 1) + 1))) - 16) if legacy else 0
    max_shift = 31 if legacy else MAX_SHIFT
    top = 2 ** mult_bits - 1
    eff = s * float(2 ** pre)
    if np.any(np.rint(eff) > top):
        raise ValueError(f"requant scale {float(eff.max())} needs a multiplier above {top}")
    with np.errstate(divide="ignore"):
        shift = np.where(eff > 0, np.floor(np.log2(top / np.maximum(eff, 1e-300))), max_shift)
    shift = np.clip(shift, 0, max_shift).astype(np.int64)
    mult = np.rint(eff * np.exp2(shift)).astype(np.int64)
    over = mult > top  # rounding up to 2**mult_bits at the boundary
    shift = np.where(over & (shift > 0), shift - 1, shift)
    mult = np.minimum(np.rint(eff * np.exp2(shift)).astype(np.int64), top)
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
