"""Packing 2-D matrices into scratchpad-element order (the layouts the suite and blocked GEMM use).

``pack(x, r, c)`` turns an (R, C) matrix into (R/r, C/c, r, c) blocks: for an activation
(N, K) that is (N/BATCH, K/BLOCK_IN, BATCH, BLOCK_IN) -- one INP element per [i, k] --
and for a weight (M, K) it is one WGT element per [o, k].
"""
from __future__ import annotations

import numpy as np


def pack(x: np.ndarray, r: int, c: int) -> np.ndarray:
    rows, cols = x.shape
    if rows % r or cols % c:
        raise ValueError(f"cannot pack a {rows}x{cols} matrix into {r}x{c} blocks: sizes must be multiples")
    return np.ascontiguousarray(x.reshape(rows // r, r, cols // c, c).transpose(0, 2, 1, 3))


def unpack(x: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack`."""
    rb, cb, r, c = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(rb * r, cb * c))


def elements(values: np.ndarray, elem_shape: tuple[int, int]) -> np.ndarray:
    """A flat array cut into whole elements of ``elem_shape`` (zero-padded at the end)."""
    per = elem_shape[0] * elem_shape[1]
    flat = values.reshape(-1)
    n = -(-flat.size // per)
    out = np.zeros(n * per, dtype=values.dtype)
    out[:flat.size] = flat
    return out.reshape(n, *elem_shape)
