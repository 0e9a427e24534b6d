"""Host arrays aligned to a cache line, for buffers that compiled CPU kernels read and write as vectors.

numpy aligns its data to 16 bytes; a large array comes from ``mmap`` at a page offset that differs from process to
process (16, 32 or 48 bytes past a 64-byte line seen here). A kernel whose 32-byte vectors straddle cache lines
ran 12-13 % slower (MobileNetV2's 144 -> 24 and 16 -> 96 pixel-vector 1x1 convs, two threads, all buffers 16 bytes
past a line vs on one, min of 40 calls each in turn), so one process's run of a model could be that much slower
than the next's.
"""
from __future__ import annotations

import numpy as np

CACHE_LINE = 64


def aligned_empty(shape, dtype, align: int = CACHE_LINE) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align``-byte boundary (a view of a slightly
    larger byte buffer, which it keeps alive)."""
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes].view(dt).reshape(shape)


def aligned_zeros(shape, dtype, align: int = CACHE_LINE) -> np.ndarray:
    """:func:`aligned_empty`, zero-filled."""
    a = aligned_empty(shape, dtype, align)
    a[...] = 0
    return a


def aligned_copy(a: np.ndarray, align: int = CACHE_LINE) -> np.ndarray:
    """``a`` as a C-contiguous array on an ``align``-byte boundary (``a`` itself when it already is one)."""
    if a.flags.c_contiguous and a.ctypes.data % align == 0:
        return a
    out = aligned_empty(a.shape, a.dtype, align)
    out[...] = a
    return out
