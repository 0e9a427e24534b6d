"""Array layout kernels of the host ops: activation packing, conv tap folding, the uint8 -> int8 rebase.

Shared by the compiler's passes (which import them from here) and the runtime's host ops.
"""
from __future__ import annotations

import numpy as np


def ceil_to(v: int, m: int) -> int:
    """Smallest multiple of ``m`` that is >= ``v``."""
    return -(-int(v) // int(m)) * int(m)


def _pad_axes(a: np.ndarray, targets: dict[int, int]) -> np.ndarray:
    pad = [(0, 0)] * a.ndim
    for ax, t in targets.items():
        if a.shape[ax] > t:
            raise ValueError(f"axis {ax} has {a.shape[ax]} > target {t}")
        pad[ax] = (0, t - a.shape[ax])
    return np.pad(a, pad) if any(p[1] for p in pad) else a


def pack_activation(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """NCHW -> (N//B, C//BI, H, W, B, BI), or (N, K) -> (N//B, K//BI, B, BI); zero-pads N and C."""
    x = np.asarray(x)
    if x.ndim not in (2, 4):
        raise ValueError(f"pack_activation expects a 2-D (N,K) or 4-D NCHW array, got shape {x.shape}")
    n, c = x.shape[:2]
    x = _pad_axes(x, {0: ceil_to(n, batch), 1: ceil_to(c, block)})
    np_, cp = x.shape[:2]
    if x.ndim == 4:
        h, w = x.shape[2:]
        return np.ascontiguousarray(x.reshape(np_ // batch, batch, cp // block, block, h, w).transpose(0, 2, 4, 5, 1, 3))
    return np.ascontiguousarray(x.reshape(np_ // batch, batch, cp // block, block).transpose(0, 2, 1, 3))


def unpack_activation(xp: np.ndarray, n: int | None = None, c: int | None = None) -> np.ndarray:
    """Inverse of ``pack_activation``; ``n``/``c`` crop the padding (default: keep it)."""
    xp = np.asarray(xp)
    if xp.ndim == 6:
        nb, cb, h, w, b, bl = xp.shape
        x = xp.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * bl, h, w)
    elif xp.ndim == 4:
        nb, cb, b, bl = xp.shape
        x = xp.transpose(0, 2, 1, 3).reshape(nb * b, cb * bl)
    else:
        raise ValueError(f"unpack_activation expects a 4-D or 6-D packed array, got shape {xp.shape}")
    return np.ascontiguousarray(x[: x.shape[0] if n is None else n, : x.shape[1] if c is None else c])


def fold_taps(x: np.ndarray, *, kw: int, sx: int, pads, pad_value: int = 0, kh: int = 1, sy: int = 1,
              batch: int = 0, block: int = 0) -> np.ndarray:
    """``FoldTaps``: NCHW -> (N, C*KH*KW, OH', OW) with channel ``(c*KH + ky)*KW + kx`` (see the module docstring);
    ``kh == 1`` folds the horizontal taps only (``OH' = H + t + b``), else the vertical ones too (``OH' = OH``).
    With ``block`` the result comes packed, ``(N//B, C'//BI, OH', OW, B, BI)`` as ``pack_activation`` makes it
    (channels gathered last, so no strided transpose of the large folded tensor)."""
    t, l, b, r = (int(p) for p in pads)
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=np.asarray(pad_value).astype(x.dtype))
    n, c, hp, wp = xp.shape
    ow, oh = (wp - kw) // sx + 1, (hp - kh) // sy + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sy, ::sx][:, :, :oh, :ow]
    if not block:
        return np.ascontiguousarray(win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh, ow))
    cf = c * kh * kw
    nb, cb = ceil_to(n, batch) // batch, ceil_to(cf, block) // block
    out = np.zeros((nb * batch, oh, ow, cb * block), x.dtype)
    out[:n, :, :, :cf] = win.transpose(0, 2, 3, 1, 4, 5).reshape(n, oh, ow, cf)
    return np.ascontiguousarray(out.reshape(nb, batch, oh, ow, cb, block).transpose(0, 4, 2, 3, 1, 5))



def rebase_uint8_array(x: np.ndarray) -> np.ndarray:
    """``RebaseUint8``: uint8 ``u`` -> int8 ``u - 128``."""
    return (np.asarray(x, np.uint8).astype(np.int16) - 128).astype(np.int8)


def pack_weight(w: np.ndarray, block_out: int, block_in: int) -> np.ndarray:
    """OIHW -> (O//BO, I//BI, KH, KW, BO, BI), or (M, K) -> (M//BO, K//BI, BO, BI); zero-pads O and I."""
    w = np.asarray(w)
    if w.ndim not in (2, 4):
        raise ValueError(f"pack_weight expects a 2-D (M,K) or 4-D OIHW array, got shape {w.shape}")
    w = _pad_axes(w, {0: ceil_to(w.shape[0], block_out), 1: ceil_to(w.shape[1], block_in)})
    o, i = w.shape[:2]
    if w.ndim == 4:
        kh, kw = w.shape[2:]
        return np.ascontiguousarray(w.reshape(o // block_out, block_out, i // block_in, block_in, kh, kw).transpose(0, 2, 4, 5, 1, 3))
    return np.ascontiguousarray(w.reshape(o // block_out, block_out, i // block_in, block_in).transpose(0, 2, 1, 3))


def unpack_weight(wp: np.ndarray) -> np.ndarray:
    """Inverse of ``pack_weight`` (keeps the zero padding)."""
    wp = np.asarray(wp)
    if wp.ndim == 6:
        ob, ib, kh, kw, bo, bi = wp.shape
        return wp.transpose(0, 4, 1, 5, 2, 3).reshape(ob * bo, ib * bi, kh, kw)
    ob, ib, bo, bi = wp.shape
    return wp.transpose(0, 2, 1, 3).reshape(ob * bo, ib * bi)


def zero_insert(x: np.ndarray, strides, fill=0) -> np.ndarray:
    """``(N, C, H, W)`` -> ``(N, C, (H-1)*sy+1, (W-1)*sx+1)`` with ``x`` on the stride grid and ``fill`` between."""
    sy, sx = (int(s) for s in strides)
    n, c, hgt, wid = x.shape
    z = np.full((n, c, (hgt - 1) * sy + 1, (wid - 1) * sx + 1), fill, dtype=x.dtype)
    z[:, :, ::sy, ::sx] = x
    return z
