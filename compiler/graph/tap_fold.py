"""Fold kernel taps into the reduction axis for convs with few input channels (the 3-channel stem).

A ``QConv2D`` with ``C`` input channels and a ``KH x KW`` kernel reads ``ceil(C/BI)*BI`` channels per
tap on the accelerator: 16 lanes for 3 real channels. Folding the ``KW`` horizontal taps into the
channel axis makes it a ``KH x 1`` conv over ``C*KW`` channels:

    x'[n, c*KW + kw, h, ox] = xpad[n, c, h, ox*sx + kw]          (host op ``FoldTaps``)
    w'[o, c*KW + kw, kh, 0] = w[o, c, kh, kw]

with ``xpad`` the input padded with the conv's ``pad_value`` (its zero point), so the folded conv
has no padding and stride ``(sy, 1)``. Bias and requant are unchanged (same products, same sums).
Folding the vertical taps too makes it a 1x1 conv over ``C*KH*KW`` channels on an im2col input
(``fold_plan`` picks the variant with the fewest padded MACs). For the ResNet stem (C=3, 7x7) the
accelerator MACs per output drop from 16*49 to 160.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.accel_interface import ceil_to
from jit_runtime.host_ops.layout import fold_taps  # noqa: F401 (re-exported)
from compiler.graph.ir import Graph, Node


def fold_plan(c: int, kh: int, kw: int, block_in: int) -> int:
    """How many vertical taps to fold with the horizontal ones (1 or ``kh``), or 0 when folding saves no MACs.

    Padded MACs per output: ``ceil(C)*KH*KW`` unfolded, ``ceil(C*KW)*KH`` folding KW, ``ceil(C*KH*KW)`` folding both
    (``ceil`` rounds up to the block); the fewest wins, ties fold less. On pynq-z1 the ResNet stem (3 channels,
    7x7, stride 2) takes 3.03M cycles unfolded, 1.17M folding KW and 0.96M folding both."""
    if kw <= 1 or c >= block_in:
        return 0
    base, fw, fhw = ceil_to(c, block_in) * kh * kw, ceil_to(c * kw, block_in) * kh, ceil_to(c * kh * kw, block_in)
    if kh > 1 and fhw < min(fw, base):
        return kh
    return 1 if fw < base else 0


def fold_conv_taps(g: Graph, cfg) -> int:
    """Rewrite qualifying ``QConv2D`` nodes in place; returns how many were folded."""
    folded = 0
    new_nodes: list[Node] = []
    for n in g.nodes:
        if n.op != "QConv2D" or int(n.attrs.get("group", 1)) != 1 or tuple(n.attrs.get("dilations", (1, 1))) != (1, 1):
            new_nodes.append(n)
            continue
        w = g.constants.get(n.inputs[1])
        x_info = g.tensors[n.inputs[0]]
        fkh = 0 if w is None or len(x_info.shape) != 4 else fold_plan(w.shape[1], w.shape[2], w.shape[3], cfg.block_in)
        if not fkh:
            new_nodes.append(n)
            continue
        o, c, kh, kw = w.shape
        sy, sx = (int(s) for s in n.attrs["strides"])
        pads = tuple(int(p) for p in n.attrs["pads"])
        nb, _, h, wd = x_info.shape
        hp = h + pads[0] + pads[2]
        ow, oh = (wd + pads[1] + pads[3] - kw) // sx + 1, (hp - fkh) // (sy if fkh > 1 else 1) + 1
        xf = g.fresh_name(f"{n.inputs[0]}/taps{fkh}x{kw}")
        g.set_info(xf, (nb, c * fkh * kw, oh, ow), x_info.dtype)
        attrs = {"kw": kw, "sx": sx, "kh": fkh, "sy": sy if fkh > 1 else 1, "pads": pads,
                 "pad_value": int(n.attrs.get("pad_value", 0))}
        new_nodes.append(Node("FoldTaps", [n.inputs[0]], [xf], attrs, f"{n.name}/fold_taps"))
        if fkh > 1:  # every tap folded: a 1x1 conv
            wf, strides = w.reshape(o, c * kh * kw, 1, 1), (1, 1)
        else:
            wf, strides = w.transpose(0, 1, 3, 2).reshape(o, c * kw, kh, 1), (sy, 1)
        w_name = g.add_constant(g.fresh_name(f"{n.name}/w_taps"), np.ascontiguousarray(wf))
        a = dict(n.attrs, strides=strides, pads=(0, 0, 0, 0), folded_taps=fkh * kw)
        a.pop("pad_value", None)
        new_nodes.append(Node("QConv2D", [xf, w_name, *n.inputs[2:]], list(n.outputs), a, n.name))
        folded += 1
    g.nodes = new_nodes
    if folded:
        g.remove_dead()
    return folded
