"""Run a packed conv2d whose planes are too large for the DMA fields as horizontal stripes.

LOAD/STORE address a channel block's ``H x W`` plane with 16-bit (``isa.encoding.SIZE_BITS``)
sizes and strides, so a plane of 65536 elements or more (a 1x3x256x256 input) cannot be moved in
one instruction. The conv is then split along output rows: each stripe reads the input rows its
outputs need (with the halo of the kernel), takes the border padding that falls inside it, and
the stripes' outputs are concatenated. Exact: every output is computed from the same inputs.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from isa.encoding import SIZE_BITS

PLANE_LIMIT = (1 << SIZE_BITS) - 1


def _out_size(n: int, k: int, s: int, p0: int, p1: int) -> int:
    return (n + p0 + p1 - k) // s + 1


def stripe_rows(h: int, w: int, kh: int, kw: int, stride, padding, limit: int = PLANE_LIMIT) -> int | None:
    """Output rows per stripe so that every stripe's input and output planes fit ``limit`` elements;
    None when the conv fits whole. Raises when even one output row does not fit."""
    sy, sx = stride
    t, l, b, r = padding
    oh, ow = _out_size(h, kh, sy, t, b), _out_size(w, kw, sx, l, r)
    if h * w <= limit and oh * ow <= limit:
        return None
    rows = min(oh, limit // max(ow, 1), max(0, (limit // max(w, 1) - kh) // sy + 1))
    if rows < 1:
        raise ValueError(f"conv2d: a row of {w} input / {ow} output elements is too wide for the {SIZE_BITS}-bit DMA "
                         f"fields (one output row needs {kh} input rows of {w} <= {limit} elements)")
    return rows


def conv2d_in_stripes(conv: Callable[..., np.ndarray], x: np.ndarray, w: np.ndarray, bias, *, stride, padding,
                      rows: int, **kw) -> np.ndarray:
    """``conv(x_stripe, w, bias, stride=..., padding=..., **kw)`` over output-row stripes of ``rows``, concatenated
    on the output's row axis (packed layouts: rows are axis 2)."""
    sy, _ = stride
    t, l, b, r = padding
    h, kh = x.shape[2], w.shape[2]
    oh = _out_size(h, kh, sy, t, b)
    outs = []
    for o0 in range(0, oh, rows):
        o1 = min(oh, o0 + rows)
        lo, hi = o0 * sy - t, (o1 - 1) * sy - t + kh  # padded-coordinate input rows [lo, hi)
        pt, pb = max(0, -lo), max(0, hi - h)
        xs = x[:, :, max(lo, 0):min(hi, h)]
        outs.append(conv(np.ascontiguousarray(xs), w, bias, stride=stride, padding=(pt, l, pb, r), **kw))
    return np.concatenate(outs, axis=2)
