"""N-D pooling (MaxPool with indices, AveragePool) by the ONNX rules: pads, strides, dilations, ceil_mode.

Output length per spatial axis: ``floor_or_ceil((in + pad_begin + pad_end - ((k - 1) * d + 1)) / s) + 1``;
in ``ceil_mode`` a last window that would start in the end padding is dropped (it must start inside
the input or the begin padding). AveragePool divides by the number of window taps inside the input
(``count_include_pad=0``) or inside the input plus its explicit pads (``=1``; the ceil_mode extension
never counts).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PoolAxis:
    """Geometry of one spatial axis: kernel, stride, dilation, explicit pads, output length."""

    k: int
    s: int
    d: int
    begin: int
    end: int
    size: int
    out: int

    @property
    def span(self) -> int:
        return (self.k - 1) * self.d + 1

    @property
    def end_needed(self) -> int:
        """Padding the last window needs after the input (may exceed ``end`` in ceil_mode, or be < 0)."""
        return (self.out - 1) * self.s + self.span - self.size - self.begin


def pool_axes(a: dict, spatial: tuple[int, ...]) -> list[PoolAxis]:
    """Per-axis geometry of a pool node (attrs already normalized by the frontend) on ``spatial``."""
    nd = len(spatial)
    ks = [int(v) for v in a["kernel_shape"]]
    ss = [int(v) for v in a.get("strides") or [1] * nd]
    ds = [int(v) for v in a.get("dilations") or [1] * nd]
    pads = [int(v) for v in a.get("pads") or [0] * (2 * nd)]
    axes = []
    for i in range(nd):
        k, s, d, b, e = ks[i], ss[i], ds[i], pads[i], pads[nd + i]
        num = spatial[i] + b + e - ((k - 1) * d + 1)
        if a.get("ceil_mode", 0):
            out = -(-num // s) + 1
            if (out - 1) * s >= spatial[i] + b:
                out -= 1
        else:
            out = num // s + 1
        axes.append(PoolAxis(k, s, d, b, e, spatial[i], max(out, 0)))
    return axes


def pool_windows(x: np.ndarray, axes: list[PoolAxis], pad_value) -> np.ndarray:
    """View (N, C, *out, *k) of the dilated windows of ``x`` padded with ``pad_value``."""
    nd = len(axes)
    width = [(0, 0), (0, 0)] + [(ax.begin, max(ax.end_needed, 0)) for ax in axes]
    xp = np.pad(x, width, constant_values=pad_value)
    win = np.lib.stride_tricks.sliding_window_view(xp, [ax.span for ax in axes], axis=tuple(range(2, 2 + nd)))
    sel = (slice(None), slice(None)) + tuple(slice(0, (ax.out - 1) * ax.s + 1, ax.s) for ax in axes) \
        + tuple(slice(None, None, ax.d) for ax in axes)
    return win[sel]


def max_pool(a: dict, x: np.ndarray, want_indices: bool = False):
    """MaxPool; with ``want_indices`` also the flat input index of each maximum (``storage_order``)."""
    axes = pool_axes(a, x.shape[2:])
    low = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    win = pool_windows(x, axes, low)
    nd = len(axes)
    y = win.max(axis=tuple(range(-nd, 0))) if win.size else np.zeros(win.shape[:2 + nd], x.dtype)
    if not want_indices:
        return y
    flat = win.reshape(win.shape[:2 + nd] + (-1,))
    arg = flat.argmax(axis=-1)
    taps = np.unravel_index(arg, [ax.k for ax in axes])
    coords = []
    for i, ax in enumerate(axes):
        o = np.arange(ax.out).reshape([-1 if j == i else 1 for j in range(nd)])
        coords.append(o * ax.s - ax.begin + taps[i] * ax.d)
    spatial = [ax.size for ax in axes]
    if int(a.get("storage_order", 0)):  # column major over the spatial axes
        idx = np.ravel_multi_index(coords[::-1], spatial[::-1])
    else:
        idx = np.ravel_multi_index(coords, spatial)
    n, c = x.shape[:2]
    base = (np.arange(n).reshape(-1, 1) * c + np.arange(c).reshape(1, -1)) * int(np.prod(spatial))
    return y, (idx + base.reshape((n, c) + (1,) * nd)).astype(np.int64)


def _axis_counts(ax: PoolAxis, include_pad: bool) -> np.ndarray:
    """Taps of each output window that lie inside the input (or input + explicit pads)."""
    lo, hi = (-ax.begin, ax.size + ax.end) if include_pad else (0, ax.size)
    pos = np.arange(ax.out).reshape(-1, 1) * ax.s - ax.begin + np.arange(ax.k).reshape(1, -1) * ax.d
    return ((pos >= lo) & (pos < hi)).sum(axis=1)


def average_pool(a: dict, x: np.ndarray) -> np.ndarray:
    """AveragePool in float32 (the divisor follows ``count_include_pad``)."""
    x = np.asarray(x, np.float32)
    axes = pool_axes(a, x.shape[2:])
    nd = len(axes)
    s = pool_windows(x, axes, 0).sum(axis=tuple(range(-nd, 0)), dtype=np.float32)
    cnt = np.ones((), np.float32)
    for i, ax in enumerate(axes):
        c = _axis_counts(ax, bool(a.get("count_include_pad", 0))).astype(np.float32)
        cnt = cnt * c.reshape([-1 if j == i else 1 for j in range(nd)])
    return (s / np.maximum(cnt, 1)).astype(np.float32)


def pool_pads(a: dict, h: int, w: int) -> tuple[int, ...]:
    """(kh, kw, sh, sw, top, left, bottom, right) of an undilated 2-D pool on an h x w input: bottom/right
    are the pads the last window really needs, so ``(h + top + bottom - kh) // sh + 1`` is the output height."""
    ah, aw = pool_axes(a, (h, w))
    return ah.k, aw.k, ah.s, aw.s, ah.begin, aw.begin, max(ah.end_needed, 0), max(aw.end_needed, 0)
