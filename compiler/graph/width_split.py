"""Convs whose output row does not fit a scratchpad are split along the width at build time.

The accelerator's conv schedule keeps at least one output row (``h_tile = 1``) of one channel block in
the accumulator scratchpad, with the input rows it reads in the input scratchpad. A plane as wide as a
detector head's (YOLOv8's DFL conv over ``4 x 2100`` anchors) does not fit a small config (pynq-z1), and
before this pass the failure ("no tiling fits") surfaced in the middle of ``run()``. Here every int8
``QConv2D`` is checked against the config with the smallest tiling; one that does not fit becomes
``Slice`` (the input columns each stripe reads, halo included) -> ``QConv2D`` per stripe (border padding
only at the outer edges) -> ``Concat`` along the width: exact, each output computed from the same inputs.
A conv that does not fit even one output column stays on the host, its reason in ``host_reason``
(named by the build's ``HostFallbackWarning``).
"""
from __future__ import annotations

import numpy as np

from compiler.graph.accel_interface import conv_supported_on_accel, pad_channels, pad_requant
from compiler.graph.ir import Graph, Node


def _conv_shape(cfg, x_shape, w_shape, strides, pads, group, pad_value, width: int):
    from compiler.topi.conv2d import ConvShape

    n, c, h, _ = x_shape
    o, _cg, kh, kw = w_shape
    nb, cb, ob = -(-n // cfg.batch), -(-c // cfg.block_in), -(-o // cfg.block_out)
    if group > 1 and group == c == o:  # depthwise: block-diagonal, one block per group
        groups, icb, ocb = cb, 1, 1
    else:
        groups, icb, ocb = group, cb // group, ob // group
    return ConvShape(nb, groups, icb, ocb, h, width, kh, kw, tuple(int(s) for s in strides), tuple(int(p) for p in pads),
                     int(pad_value))


def _n_consts(cfg, cs, bias, rq) -> int:
    from compiler.topi.conv2d import conv2d_compute, conv2d_epilogue

    n_out = cs.groups * cs.ocb * cfg.block_out
    b = None if bias is None else pad_channels(np.asarray(bias), n_out, np.int32)
    return len(conv2d_epilogue(cfg, cs, conv2d_compute(cfg, cs)[3], b, pad_requant(rq, n_out)).consts)


def _fits(cfg, cs, n_consts: int) -> bool:
    from compiler.graph.conv_stripes import PLANE_LIMIT
    from compiler.topi.knobs import ConvKnobs, fits

    if cs.w > PLANE_LIMIT or cs.ow > PLANE_LIMIT:
        return False
    return fits(cfg, cs, ConvKnobs(1, 1, 1, 1, "oc"), n_consts, consts_per_tile=True)


def conv_width_chunk(cfg, x_shape, w_shape, strides, pads, group, pad_value, bias, rq) -> int | None:
    """Output columns per stripe for the conv to tile on ``cfg`` (None: it fits whole; 0: not even one column)."""
    kw, sx = w_shape[3], strides[1]
    full = _conv_shape(cfg, x_shape, w_shape, strides, pads, group, pad_value, x_shape[3])
    n_consts = _n_consts(cfg, full, bias, rq)
    if _fits(cfg, full, n_consts):
        return None
    lo, hi = 0, full.ow  # largest chunk of output columns whose input stripe (no side padding) fits
    t, _, b, _ = pads
    while lo < hi:
        mid = (lo + hi + 1) // 2
        cs = _conv_shape(cfg, x_shape, w_shape, strides, (t, 0, b, 0), group, pad_value, (mid - 1) * sx + kw)
        if _fits(cfg, cs, n_consts):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _split(g: Graph, n: Node, chunk: int) -> list[Node]:
    x, w = n.inputs[0], n.inputs[1]
    xs, ws = g.tensors[x].shape, g.tensors[w].shape
    out = n.outputs[0]
    ys = g.tensors[out].shape
    sx, kw = int(n.attrs["strides"][1]), int(ws[3])
    t, left, b, right = (int(p) for p in n.attrs["pads"])
    width = xs[3]
    nodes, parts = [], []
    for c0 in range(0, ys[3], chunk):
        c1 = min(ys[3], c0 + chunk)
        start, stop = c0 * sx - left, (c1 - 1) * sx - left + kw  # input columns the stripe reads
        lo, hi = max(0, start), min(width, stop)
        tag = f"{n.name}/cols{c0}_{c1}"
        xi = g.fresh_name(f"{tag}/x")
        g.set_info(xi, (*xs[:3], hi - lo), g.tensors[x].dtype)
        consts = [g.add_constant(g.fresh_name(f"{tag}/{k}"), np.asarray([v], np.int64))
                  for k, v in (("starts", lo), ("ends", hi), ("axes", 3))]
        nodes.append(Node("Slice", [x, *consts], [xi], {}, f"{tag}/slice"))
        yi = g.fresh_name(f"{tag}/y")
        g.set_info(yi, (*ys[:3], c1 - c0), g.tensors[out].dtype)
        attrs = dict(n.attrs, pads=[t, max(0, -start), b, max(0, stop - width)], width_stripe=(c0, c1))
        nodes.append(Node(n.op, [xi, *n.inputs[1:]], [yi], attrs, tag))
        parts.append(yi)
    nodes.append(Node("Concat", parts, [out], {"axis": 3}, f"{n.name}/concat"))
    return nodes


def split_wide_convs(g: Graph, cfg) -> int:
    """Split (or keep on the host, with a reason) every int8 conv whose row does not fit ``cfg``; returns the
    number of convs split. A config without scratchpad sizes (a block-size stand-in) is checked as the
    accelerator backends run it (:func:`compiler.graph.accel_interface.as_hw_config`)."""
    from compiler.graph.accel_interface import as_hw_config

    cfg = as_hw_config(cfg)
    new, split = [], 0
    for n in g.nodes:
        if (n.op != "QConv2D" or tuple(n.attrs.get("dilations", (1, 1))) != (1, 1) or n.inputs[0] not in g.tensors
                or n.inputs[1] not in g.constants or n.outputs[0] not in g.tensors):
            new.append(n)
            continue
        xs, ws = g.tensors[n.inputs[0]].shape, g.constants[n.inputs[1]].shape
        group = int(n.attrs.get("group", 1))
        if len(xs) != 4 or not conv_supported_on_accel(xs[1], ws[0], group, cfg.block_in, cfg.block_out):
            new.append(n)
            continue
        bias = g.constants.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if bias is None and len(n.inputs) > 2 and n.inputs[2]:  # a run-time bias (zero points): same epilogue shape
            bias = np.zeros(ws[0], np.int32)
        chunk = conv_width_chunk(cfg, xs, ws, n.attrs["strides"], n.attrs["pads"], group,
                                 n.attrs.get("pad_value", 0), bias, n.attrs["requant"])
        if chunk is None:
            new.append(n)
        elif chunk == 0:
            n.attrs["host_reason"] = (f"no tiling of {cfg.name}'s scratchpads fits even one output column of this conv "
                                      f"({xs[1]} -> {ws[0]} channels, kernel {ws[2]}x{ws[3]}, input {xs[2]}x{xs[3]})")
            n.attrs["accel_infeasible"] = True
            new.append(n)
        else:
            new.extend(_split(g, n, chunk))
            split += 1
    g.nodes = new
    return split

