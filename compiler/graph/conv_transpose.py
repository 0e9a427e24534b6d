"""ConvTranspose through the accelerator's conv path: zero-inserted input, flipped weights, stride-1 conv.

A 2-D ``ConvTranspose(x, W)`` with strides ``s``, dilations ``d`` and the output window of
:func:`jit_runtime.host_ops.transformer_kernels.conv_transpose_geometry` (crop start ``p``, size ``n``) equals
``Conv(Z, W')`` where ``Z`` is ``x`` with ``s - 1`` zeros inserted between neighbours (``ZeroInsert``),
``W'[g*Og + o, c] = flip(W[g*Cg + c, o])`` (the kernel reversed on both spatial axes, in/out swapped per
group), dilation ``d``, stride 1 and padding ``(k - 1) * d - p`` before and ``n - len(Z) - before +
(k - 1) * d`` after (a negative pad crops ``Z`` with a ``Slice`` instead). Exact. The conv then quantizes
and offloads like any other (DBNet / UNet decoders' upsampling). When ``x`` comes from a per-tensor
DequantizeLinear, the zeros are inserted on the integer side with the zero point as fill, so the
``DQ -> Conv`` pattern of QDQ models stays whole. Float models run without quantization keep the host
ConvTranspose kernel (no wasted multiplications by the inserted zeros).
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node
from jit_runtime.host_ops.layout import zero_insert  # noqa: F401 (re-exported: the host kernel)




def conv_weight(w: np.ndarray, group: int) -> np.ndarray:
    """ConvTranspose weight ``(C, O/g, kh, kw)`` -> the equivalent Conv weight ``(O, C/g, kh, kw)``, flipped."""
    c, og = w.shape[:2]
    k = w.shape[2:]
    wg = np.asarray(w).reshape(group, c // group, og, *k).swapaxes(1, 2).reshape(group * og, c // group, *k)
    return np.ascontiguousarray(wg[:, :, ::-1, ::-1])


def _weight(g: Graph, prod, name: str, group: int):
    """(new weight tensor name, nodes to add) for a constant or DequantizeLinear(constant) ConvTranspose weight."""
    if name in g.constants:
        return g.add_constant(g.fresh_name(f"{name}/as_conv"), conv_weight(g.constants[name], group)), []
    dq = prod.get(name)
    if dq is None or dq.op != "DequantizeLinear" or dq.inputs[0] not in g.constants:
        return None
    scale = g.constants.get(dq.inputs[1])
    zp = g.constants.get(dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] else None
    if scale is None or (len(dq.inputs) > 2 and dq.inputs[2] and zp is None):
        return None
    wq = g.constants[dq.inputs[0]]
    axis = int(dq.attrs.get("axis", 1)) % wq.ndim
    if np.size(scale) != 1 and not (axis == 1 and group == 1):
        return None  # per-channel only along the output channels (axis 1), ungrouped
    out = g.fresh_name(f"{name}/as_conv")
    g.set_info(out, (wq.shape[1] * group, wq.shape[0] // group, *wq.shape[2:]), np.float32)
    ins = [g.add_constant(g.fresh_name(f"{dq.inputs[0]}/as_conv"), conv_weight(wq, group)), dq.inputs[1]]
    if zp is not None:
        ins.append(dq.inputs[2])
    return out, [Node("DequantizeLinear", ins, [out], {"axis": 0}, f"{dq.name}/as_conv")]


def lower_conv_transposes(g: Graph) -> int:
    """Rewrite every 2-D ConvTranspose with a constant (or DQ-of-constant) weight as ZeroInsert -> Conv."""
    from jit_runtime.host_ops.transformer_kernels import conv_transpose_geometry

    prod, cons = g.producers(), g.consumers()
    new: list[Node] = []
    done = 0
    for n in g.nodes:
        x = n.inputs[0]
        if n.op != "ConvTranspose" or x not in g.tensors or len(g.tensors[x].shape) != 4 \
                or n.outputs[0] not in g.tensors:
            new.append(n)
            continue
        group = int(n.attrs.get("group", 1))
        wt = _weight(g, prod, n.inputs[1], group)
        if wt is None:
            new.append(n)
            continue
        w_name, w_nodes = wt
        xs = g.tensors[x].shape
        wshape = (g.tensors[n.inputs[1]].shape if n.inputs[1] in g.tensors else g.constants[n.inputs[1]].shape)
        k, s, d, _op, start, size = conv_transpose_geometry(n.attrs, list(xs[2:]), list(wshape))
        zlen = [(xs[2 + i] - 1) * s[i] + 1 for i in range(2)]
        before = [(k[i] - 1) * d[i] - start[i] for i in range(2)]
        after = [size[i] - zlen[i] - before[i] + (k[i] - 1) * d[i] for i in range(2)]
        src, dtype, fill = x, g.tensors[x].dtype, 0
        dq = prod.get(x)
        on_int = (dq is not None and dq.op == "DequantizeLinear" and len(cons.get(x, [])) == 1 and x not in g.outputs
                  and all(not i or (i in g.constants and np.size(g.constants[i]) == 1) for i in dq.inputs[1:]))
        if on_int:  # zeros inserted on the integer side, as the zero point
            src, dtype = dq.inputs[0], g.tensors[dq.inputs[0]].dtype
            fill = int(np.ravel(g.constants[dq.inputs[2]])[0]) if len(dq.inputs) > 2 and dq.inputs[2] else 0
        z = g.fresh_name(f"{n.name}/zero_inserted")
        g.set_info(z, (*xs[:2], *zlen), dtype)
        nodes = [Node("ZeroInsert", [src], [z], {"strides": list(s), "fill": fill}, f"{n.name}/zero_insert")]
        if any(b < 0 for b in before) or any(a < 0 for a in after):  # crop what a negative pad would remove
            lo = [max(0, -b) for b in before]
            hi = [zlen[i] - max(0, -after[i]) for i in range(2)]
            zc = g.fresh_name(f"{n.name}/cropped")
            g.set_info(zc, (*xs[:2], hi[0] - lo[0], hi[1] - lo[1]), dtype)
            consts = [g.add_constant(g.fresh_name(f"{n.name}/{t}"), np.asarray(v, np.int64))
                      for t, v in (("starts", lo), ("ends", hi), ("axes", [2, 3]))]
            nodes.append(Node("Slice", [z, *consts], [zc], {}, f"{n.name}/crop"))
            z = zc
            before, after = [max(0, b) for b in before], [max(0, a) for a in after]
        if on_int:
            zf = g.fresh_name(f"{n.name}/zero_inserted_f")
            g.set_info(zf, g.tensors[z].shape, g.tensors[x].dtype)
            nodes.append(Node("DequantizeLinear", [z, *dq.inputs[1:]], [zf], dict(dq.attrs), f"{dq.name}/zero_inserted"))
            z = zf
        conv_in = [z, w_name] + ([n.inputs[2]] if len(n.inputs) > 2 and n.inputs[2] else [])
        nodes.append(Node("Conv", conv_in, list(n.outputs),
                          {"kernel_shape": list(k), "strides": [1, 1], "dilations": list(d), "group": group,
                           "pads": [before[0], before[1], after[0], after[1]]}, n.name))
        new.extend(w_nodes + nodes)
        done += 1
    g.nodes = new
    g.toposort()
    g.remove_dead()
    return done
