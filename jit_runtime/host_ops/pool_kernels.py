"""Max pooling on packed int8 activations ``(N//B, C//BI, H, W, B, BI)`` without unpacking.

The packed layout keeps H and W as axes 2 and 3, so a max pool is a running ``np.maximum`` over
the ``KH*KW`` strided views of the padded tensor (no window copies): the host side of the
accelerator path stays in the packed layout and in integer.
"""
from __future__ import annotations

import numpy as np


def packed_max_pool(a: dict, x: np.ndarray) -> np.ndarray:
    """ONNX MaxPool (kernel_shape, strides, pads, ceil_mode; dilations 1) on axes 2, 3 of a packed tensor."""
    from jit_runtime.host_ops.pooling import pool_pads  # the one pool padding rule (ceil_mode included)

    if tuple(a.get("dilations", (1, 1))) != (1, 1):
        raise ValueError(f"packed MaxPool supports dilations (1, 1), got {a['dilations']}")
    kh, kw, sh, sw, t, l, b, r = pool_pads(a, x.shape[2], x.shape[3])
    low = np.iinfo(x.dtype).min
    pad = [(0, 0)] * x.ndim
    pad[2], pad[3] = (t, b), (l, r)
    xp = np.pad(x, pad, constant_values=low)
    oh, ow = (xp.shape[2] - kh) // sh + 1, (xp.shape[3] - kw) // sw + 1
    out = None
    for ky in range(kh):
        for kx in range(kw):
            v = xp[:, :, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw]
            out = v.copy() if out is None else np.maximum(out, v, out=out)
    return out
