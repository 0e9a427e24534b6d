"""Fuse float Conv/Gemm with what follows into one node: ``FusedConv`` / ``FusedDense``.

``Conv -> [Add(residual)] -> [Relu | Clip | HardSwish | HardSigmoid | Sigmoid | LeakyRelu]`` (and Gemm ->
activation) becomes one node whose kernel applies bias, the residual and the activation in the conv's output
stage (:mod:`compiler.topi.conv2d_direct`). A step fuses only when the intermediate tensor has exactly one
reader and is not a graph output; the Add's other operand must have the conv output's shape.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node

ACT_OPS = {"Relu": "relu", "Clip": "clip", "HardSwish": "hardswish", "HardSigmoid": "hardsigmoid",
           "Sigmoid": "sigmoid", "LeakyRelu": "leakyrelu"}


def _act_params(g: Graph, n: Node) -> tuple | None:
    """The activation parameters of ``n``, or None when they are not constants."""
    a = n.attrs
    if n.op == "Clip":
        lo, hi = a.get("min"), a.get("max")
        for k, name in ((1, "lo"), (2, "hi")):
            if len(n.inputs) > k and n.inputs[k]:
                if n.inputs[k] not in g.constants:
                    return None
                v = float(np.asarray(g.constants[n.inputs[k]]).reshape(()))
                lo, hi = (v, hi) if name == "lo" else (lo, v)
        return (None if lo is None else float(lo), None if hi is None else float(hi))
    if n.op == "HardSigmoid":
        return (float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)))
    if n.op == "LeakyRelu":
        return (float(a.get("alpha", 0.01)),)
    return ()


def _is_f32(g: Graph, name: str) -> bool:
    return name in g.tensors and g.tensors[name].dtype == np.float32


def fuse_conv_epilogues(g: Graph) -> int:
    """Rewrite ``g`` in place; returns how many nodes were folded into a FusedConv/FusedDense."""
    folded = 0
    changed = True
    while changed:
        changed = False
        cons = g.consumers()
        outs = set(g.outputs)
        for n in list(g.nodes):
            if n.op == "Conv" and _is_f32(g, n.outputs[0]) and len(g.tensors[n.outputs[0]].shape) == 4:
                n.op = "FusedConv"
                n.attrs.setdefault("activation", None)
                n.attrs.setdefault("residual", False)
                changed = True
            elif n.op == "Gemm" and _is_f32(g, n.outputs[0]) and not n.attrs.get("transA", 0) \
                    and float(n.attrs.get("alpha", 1.0)) == 1.0 and float(n.attrs.get("beta", 1.0)) == 1.0 \
                    and len(n.inputs) > 1 and n.inputs[1] in g.constants \
                    and (len(n.inputs) < 3 or not n.inputs[2] or (n.inputs[2] in g.constants
                                                                 and np.ndim(g.constants[n.inputs[2]]) == 1)):
                n.op = "FusedDense"
                n.attrs.setdefault("activation", None)
                changed = True
            if n.op not in ("FusedConv", "FusedDense") or n.attrs.get("activation") is not None:
                continue
            out = n.outputs[0]
            users = cons.get(out, [])
            if out in outs or len(users) != 1:
                continue
            nxt = users[0]
            if nxt.op == "Add" and n.op == "FusedConv" and not n.attrs["residual"] and len(nxt.inputs) == 2:
                other = nxt.inputs[1] if nxt.inputs[0] == out else nxt.inputs[0]
                if other == out or not _is_f32(g, other) or g.tensors[other].shape != g.tensors[out].shape:
                    continue
                while len(n.inputs) < 3:
                    n.inputs.append("")
                n.inputs.append(other)
                n.attrs["residual"] = True
            elif nxt.op in ACT_OPS:
                params = _act_params(g, nxt)
                if params is None:
                    continue
                n.attrs["activation"] = ACT_OPS[nxt.op]
                n.attrs["act_params"] = params
            else:
                continue
            n.outputs[0] = nxt.outputs[0]
            g.nodes.remove(nxt)
            folded += 1
            changed = True
            break
    g.toposort()  # a residual operand may be produced after the conv it is now fused into
    g.remove_dead()
    return folded
