"""A BatchNormalization between a DequantizeLinear and a QuantizeLinear, as a depthwise 1x1 conv.

Quantizers leave an inference ``BatchNormalization`` that no conv absorbs (pre-activation blocks, as in
DenseNet: ``Concat -> BN -> Relu -> Conv``) in float: ``DQ -> BN [-> Relu] -> Q``. It is a per-channel
affine map ``y = a_c * x + b_c`` (``a = scale / sqrt(var + eps)``, ``b = B - mean * a``), i.e. a depthwise
1x1 conv with weight ``a`` and bias ``b``. Rewritten so, :func:`compiler.quant.qdq_lower.lower_qdq`
lowers it like any conv with float weights (per-channel int8 weights hold ``a`` exactly at 127 steps,
an int32 bias, an integer requant): it runs on the accelerator instead of as a float host op.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node


def _feeds_quantize(g: Graph, cons: dict, name: str) -> bool:
    """``name`` goes (through at most one Relu/Clip) to exactly one QuantizeLinear."""
    for _ in range(2):
        c = cons.get(name, [])
        if len(c) != 1 or name in g.outputs:
            return False
        if c[0].op == "QuantizeLinear":
            return True
        if c[0].op not in ("Relu", "Clip"):
            return False
        name = c[0].outputs[0]
    return False


def _constant(g: Graph, prod: dict, name: str) -> np.ndarray | None:
    """The value of ``name``: a constant, or a DequantizeLinear of constants (quantizers quantize BN's scale)."""
    if name in g.constants:
        return np.asarray(g.constants[name], np.float64)
    dq = prod.get(name)
    if dq is None or dq.op != "DequantizeLinear" or any(i and i not in g.constants for i in dq.inputs):
        return None
    x = np.asarray(g.constants[dq.inputs[0]], np.float64)
    s = np.asarray(g.constants[dq.inputs[1]], np.float64)
    z = np.asarray(g.constants[dq.inputs[2]], np.float64) if len(dq.inputs) > 2 and dq.inputs[2] else np.zeros(())
    if s.size > 1:  # per-axis: broadcast along ``axis``
        shape = [1] * x.ndim
        shape[int(dq.attrs.get("axis", 1)) % x.ndim] = -1
        s, z = s.reshape(shape), (z.reshape(shape) if z.size > 1 else z)
    return (x - z) * s


def batchnorm_as_depthwise(g: Graph) -> int:
    """Rewrite ``DQ -> BatchNormalization [-> Relu|Clip] -> Q`` (4-D, inference, constant parameters) in place;
    returns how many."""
    prod, cons = g.producers(), g.consumers()
    done = 0
    for i, n in enumerate(g.nodes):
        if n.op != "BatchNormalization" or n.attrs.get("training_mode", 0) or len(n.inputs) < 5:
            continue
        if any(o for o in n.outputs[1:]):
            continue
        src = prod.get(n.inputs[0])
        shape = g.tensors[n.inputs[0]].shape if n.inputs[0] in g.tensors else ()
        params = [_constant(g, prod, p) for p in n.inputs[1:5]]
        if src is None or src.op != "DequantizeLinear" or len(shape) != 4 or any(p is None for p in params):
            continue
        if any(np.size(g.constants.get(i, np.zeros(2))) != 1 for i in src.inputs[1:3] if i):
            continue  # a per-axis or non-constant activation DQ: the conv lowering would not take it either
        if not _feeds_quantize(g, cons, n.outputs[0]):
            continue
        scale, bias, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
        c = shape[1]
        if any(p.size != c for p in (scale, bias, mean, var)):
            continue
        a = scale / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
        b = bias - mean * a
        w = g.add_constant(g.fresh_name(f"{n.name}/dw_weight"), a.astype(np.float32).reshape(c, 1, 1, 1))
        bb = g.add_constant(g.fresh_name(f"{n.name}/dw_bias"), b.astype(np.float32))
        g.nodes[i] = Node("Conv", [n.inputs[0], w, bb], [n.outputs[0]],
                          {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1],
                           "group": c}, n.name)
        done += 1
    return done
