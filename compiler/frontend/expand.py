"""Import-time rewrites: QLinearConv/QLinearMatMul -> DQ/op/Q, auto_pad -> explicit pads."""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node


def expand_qlinear(g: Graph, n: Node) -> list[Node]:
    """Rewrite a QLinear op as DequantizeLinear -> float op -> QuantizeLinear (the QDQ form)."""
    ins = list(n.inputs) + [""] * (9 - len(n.inputs))
    x, xs, xz, w, ws, wz, ys, yz = ins[:8]
    xf, wf, yf = g.fresh_name(f"{n.name}/x"), g.fresh_name(f"{n.name}/w"), g.fresh_name(f"{n.name}/y")
    w_axis = 0 if n.op == "QLinearConv" else 1
    for src, dst in ((x, xf), (w, wf), (n.outputs[0], yf)):
        if src in g.tensors:
            g.set_info(dst, g.tensors[src].shape, np.float32)
    nodes = [Node("DequantizeLinear", [x, xs, xz], [xf], {}, f"{n.name}/dq_x"),
             Node("DequantizeLinear", [w, ws, wz], [wf], {"axis": w_axis}, f"{n.name}/dq_w")]
    if n.op == "QLinearConv":
        conv_in = [xf, wf]
        if ins[8]:
            bs = g.fresh_name(f"{n.name}/bias_scale")
            g.add_constant(bs, (np.asarray(g.constants[xs], np.float32) * np.asarray(g.constants[ws], np.float32)).reshape(-1))
            bf = g.fresh_name(f"{n.name}/b")
            nodes.append(Node("DequantizeLinear", [ins[8], bs], [bf], {"axis": 0}, f"{n.name}/dq_b"))
            conv_in.append(bf)
        nodes.append(Node("Conv", conv_in, [yf], dict(n.attrs), n.name))
    else:
        nodes.append(Node("MatMul", [xf, wf], [yf], {}, n.name))
    nodes.append(Node("QuantizeLinear", [yf, ys, yz], n.outputs, {}, f"{n.name}/q_y"))
    return nodes


def _same_pads(in_size: int, k: int, s: int, d: int, upper: bool) -> tuple[int, int]:
    out = -(-in_size // s)
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - in_size)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def explicit_pads(g: Graph, n: Node) -> None:
    """Normalize Conv/pool attrs: kernel_shape, strides, dilations and 4-value pads (t, l, b, r)."""
    x_shape = g.tensors[n.inputs[0]].shape
    if n.op == "Conv":
        n.attrs.setdefault("kernel_shape", list(g.tensors[n.inputs[1]].shape[2:]))
    k = list(n.attrs["kernel_shape"])
    s = list(n.attrs.get("strides", [1] * len(k)))
    d = list(n.attrs.get("dilations", [1] * len(k)))
    auto = n.attrs.pop("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pp = [_same_pads(x_shape[2 + i], k[i], s[i], d[i], auto == "SAME_UPPER") for i in range(len(k))]
        pads = [p[0] for p in pp] + [p[1] for p in pp]
    elif auto == "VALID":
        pads = [0] * (2 * len(k))
    else:
        pads = list(n.attrs.get("pads", [0] * (2 * len(k))))
    n.attrs.update(kernel_shape=k, strides=s, dilations=d, pads=pads)
