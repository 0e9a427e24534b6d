"""Dilated convs as undilated ones with zero-inserted kernels, so they run on the accelerator.

The accelerator conv has dilation 1. A dilated ``QConv2D`` (atrous convs of segmentation and
detection heads) equals the undilated conv whose ``((KH-1)*DH+1) x ((KW-1)*DW+1)`` kernel holds the
original taps every ``DH``/``DW`` positions and zeros between: same pads, strides and output size,
exact integer results, more MACs on the accelerator (at most ``MAX_GROWTH`` times the real ones;
larger growths stay on the host). ``attrs["orig_weight_shape"]`` keeps the real weight shape.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph

MAX_GROWTH = 16


def dilate_kernel(w: np.ndarray, dh: int, dw: int) -> np.ndarray:
    """(O, C, KH, KW) -> (O, C, (KH-1)*dh+1, (KW-1)*dw+1) with the taps at multiples of the dilation."""
    o, c, kh, kw = w.shape
    out = np.zeros((o, c, (kh - 1) * dh + 1, (kw - 1) * dw + 1), dtype=w.dtype)
    out[:, :, ::dh, ::dw] = w
    return out


def expand_dilated_convs(g: Graph) -> int:
    """Rewrite dilated int8 ``QConv2D`` nodes in place; returns how many."""
    done = 0
    for n in g.nodes:
        d = tuple(int(v) for v in n.attrs.get("dilations", (1, 1)))
        if n.op != "QConv2D" or d == (1, 1) or len(d) != 2 or n.inputs[1] not in g.constants:
            continue
        w = g.constants[n.inputs[1]]
        if w.ndim != 4:
            continue
        kh, kw = w.shape[2:]
        growth = ((kh - 1) * d[0] + 1) * ((kw - 1) * d[1] + 1) / (kh * kw)
        if growth > MAX_GROWTH:
            n.attrs["host_reason"] = (f"dilations {d} (the accelerator conv has dilation 1; a zero-inserted "
                                      f"kernel would do {growth:.0f}x the MACs, more than {MAX_GROWTH}x)")
            continue
        n.inputs[1] = g.add_constant(g.fresh_name(f"{n.name}/w_dilated"), dilate_kernel(w, *d))
        n.attrs["dilations"] = [1, 1]
        n.attrs.setdefault("orig_weight_shape", tuple(w.shape))
        done += 1
    if done:
        g.remove_dead()
    return done
