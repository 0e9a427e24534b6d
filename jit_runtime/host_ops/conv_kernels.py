"""Vectorized convolution / dense kernels (im2col + matmul), float and exact-integer variants."""
from __future__ import annotations

import numpy as np

from jit_runtime.host_ops.requant import Requant, apply_requant, wrap_int32


def conv2d_nchw(x: np.ndarray, w: np.ndarray, *, stride=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                groups: int = 1, dtype=np.float32, pad_value=0) -> np.ndarray:
    """Plain NCHW x OIHW convolution computed in ``dtype``; pads = (top, left, bottom, right).

    With ``dtype=np.float64`` and int8 data the result is exact (|sums| < 2**53).
    """
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    if c != cg * groups:
        raise ValueError(f"conv: input has {c} channels but weight expects {cg}x{groups} groups")
    t, l, b, r = (int(p) for p in pads)
    xp = np.pad(x.astype(dtype, copy=False), ((0, 0), (0, 0), (t, b), (l, r)), constant_values=pad_value)
    dh, dw = dilations
    sh, sw = stride
    win = np.lib.stride_tricks.sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    win = win[:, :, ::sh, ::sw, ::dh, ::dw]  # (N, C, OH, OW, KH, KW)
    oh, ow = win.shape[2:4]
    og = o // groups
    cols = win.reshape(n, groups, cg, oh, ow, kh, kw).transpose(0, 1, 3, 4, 2, 5, 6).reshape(n, groups, oh * ow, cg * kh * kw)
    wm = w.astype(dtype, copy=False).reshape(groups, og, cg * kh * kw).transpose(0, 2, 1)
    out = np.matmul(cols, wm)  # (N, G, OH*OW, Og)
    return out.transpose(0, 1, 3, 2).reshape(n, o, oh, ow)


def int_conv2d_acc(x: np.ndarray, w: np.ndarray, *, stride, pads, groups: int = 1, dilations=(1, 1),
                   pad_value: int = 0) -> np.ndarray:
    """int8 NCHW x int8 OIHW -> int32 accumulators (wrapping), exact (float64 matmul); the border holds ``pad_value``."""
    acc = conv2d_nchw(x, w, stride=stride, pads=pads, groups=groups, dilations=dilations, dtype=np.float64,
                      pad_value=pad_value)
    return wrap_int32(acc.astype(np.int64))


def int_dense_acc(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """int8 (N, K) x int8 (M, K) -> int32 accumulators (N, M), exact."""
    acc = x.astype(np.float64) @ w.astype(np.float64).T
    return wrap_int32(acc.astype(np.int64))


def qconv2d(x, w, bias, rq: Requant, *, stride, pads, groups=1, dilations=(1, 1), pad_value: int = 0) -> np.ndarray:
    """Integer conv + requant epilogue on plain NCHW int8 data (padding filled with ``pad_value``)."""
    acc = int_conv2d_acc(x, w, stride=stride, pads=pads, groups=groups, dilations=dilations, pad_value=pad_value)
    return apply_requant(acc, bias, rq, 1)


def qdense(x, w, bias, rq: Requant) -> np.ndarray:
    """Integer dense + requant epilogue on plain (N, K) int8 data; w is (M, K)."""
    return apply_requant(int_dense_acc(x, w), bias, rq, 1)
