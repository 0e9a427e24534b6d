"""Fuse ``AccelConv2D -> QAdd`` (the quantized residual Add, + Relu folded in its clip) into the conv.

The fused ``AccelConv2D`` takes the Add's other operand as a fourth input and carries
``attrs["residual"]`` (a :class:`compiler.topi.residual.Residual`): the accelerator computes the Add
in the conv's epilogue, bit-exact with the host ``QAdd``. The fused node takes the Add's place in the
node order, so the other operand is always computed before it. Applies where the conv's result feeds
only the Add, both operands are int8 with the same packed shape (no broadcast) and the config can run
it (:func:`compiler.topi.residual.residual_supported`). :func:`offload_standalone_adds` moves the remaining
Adds of two accelerator conv results onto the accelerator through the same path.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.accel_interface import as_hw_config
from compiler.graph.ir import Graph, Node


def fuse_residual_adds(g: Graph, cfg) -> int:
    """Rewrite ``g`` in place; returns the number of Adds fused into a conv."""
    from compiler.topi.residual import Residual, residual_supported

    hw = as_hw_config(cfg)
    prod = g.producers()
    cons = g.consumers()
    order = {id(n): k for k, n in enumerate(g.nodes)}
    drop: set[int] = set()
    fused = 0
    for n in list(g.nodes):
        if n.op != "QAdd" or len(n.inputs) != 2 or len(n.outputs) != 1 or "qadd" not in n.attrs:
            continue
        shapes = [g.tensors[i].shape if i in g.tensors else None for i in n.inputs]
        if shapes[0] is None or shapes[0] != shapes[1] or len(shapes[0]) != 6 or n.inputs[0] == n.inputs[1]:
            continue
        if any(g.tensors[i].dtype != np.int8 for i in n.inputs):
            continue
        cands = []
        for k, t in enumerate(n.inputs):
            c = prod.get(t)
            if (c is None or c.op != "AccelConv2D" or id(c) in drop or len(c.inputs) != 3 or t in g.outputs
                    or len(cons.get(t, [])) != 1 or "requant" not in c.attrs):
                continue
            res = Residual(n.attrs["qadd"], conv_is_a=(k == 0))
            if residual_supported(hw, res) is None:
                cands.append((order[id(c)], k, c, res))
        if not cands:
            continue
        _, k, conv, res = max(cands, key=lambda c: c[0])  # the later conv: the main branch of a block
        attrs = dict(conv.attrs, residual=res, residual_from=n.name)
        new = Node("AccelConv2D", list(conv.inputs) + [n.inputs[1 - k]], list(n.outputs), attrs, conv.name)
        g.nodes[g.nodes.index(n)] = new
        drop.add(id(conv))
        fused += 1
    if drop:
        g.nodes = [n for n in g.nodes if id(n) not in drop]
        g.remove_dead()
    return fused


def offload_standalone_adds(g: Graph, cfg) -> int:
    """A ``QAdd`` of two accelerator results that could not be fused (both are used elsewhere too) runs on the
    accelerator as a grouped 1x1 conv with identity weights (one channel block per group: one GEMM per
    vector, its requant the identity) with the other operand fused as above. Returns the number rewritten."""
    from jit_runtime.host_ops.requant import Requant
    from compiler.topi.residual import Residual, residual_supported

    hw = as_hw_config(cfg)
    prod = g.producers()
    count = 0
    for k, n in enumerate(g.nodes):
        if n.op != "QAdd" or len(n.inputs) != 2 or len(n.outputs) != 1 or "qadd" not in n.attrs:
            continue
        infos = [g.tensors.get(i) for i in n.inputs]
        if (any(t is None or t.dtype != np.int8 for t in infos) or infos[0].shape != infos[1].shape
                or len(infos[0].shape) != 6 or infos[0].shape[4:] != (hw.batch, hw.block_out)):
            continue
        if not all(i in prod and prod[i].op == "AccelConv2D" for i in n.inputs):
            continue
        res = Residual(n.attrs["qadd"], conv_is_a=True)
        if residual_supported(hw, res) is not None:
            continue
        cb = infos[0].shape[1]
        eye = np.broadcast_to(np.eye(hw.block_out, hw.block_in, dtype=np.int8),
                              (cb, 1, 1, 1, hw.block_out, hw.block_in)).copy()
        w = g.add_constant(g.fresh_name(f"{n.name}/identity"), eye)
        attrs = {"strides": (1, 1), "pads": (0, 0, 0, 0), "group": cb, "residual": res, "residual_from": n.name,
                 "requant": Requant(),  # multiplier 1, shift 0: exactly the int8 operand
                 "orig_weight_shape": (cb * hw.block_out, 0, 1, 1)}  # an Add does no real MACs
        g.nodes[k] = Node("AccelConv2D", [n.inputs[0], w, "", n.inputs[1]], list(n.outputs), attrs, n.name)
        count += 1
    return count
