"""Fold inference BatchNormalization into the preceding Conv's weights and bias."""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph


def fold_batchnorm(g: Graph) -> int:
    """``Conv(W, B) -> BN`` becomes ``Conv(W*k, (B-mean)*k+beta)``, k = gamma/sqrt(var+eps). Returns count."""
    cons, prod = g.consumers(), g.producers()
    removed = set()
    for bn in g.nodes:
        if bn.op != "BatchNormalization" or not all(i in g.constants for i in bn.inputs[1:5]):
            continue
        conv = prod.get(bn.inputs[0])
        if conv is None or conv.op != "Conv" or conv.inputs[1] not in g.constants:
            continue
        if len(cons.get(conv.outputs[0], [])) != 1 or conv.outputs[0] in g.outputs:
            continue
        if len(conv.inputs) > 2 and conv.inputs[2] and conv.inputs[2] not in g.constants:
            continue
        gamma, beta, mean, var = (g.constants[i].astype(np.float64) for i in bn.inputs[1:5])
        k = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        w = g.constants[conv.inputs[1]].astype(np.float64)
        b = g.constants[conv.inputs[2]].astype(np.float64) if len(conv.inputs) > 2 and conv.inputs[2] else np.zeros(w.shape[0])
        w_name = g.add_constant(g.fresh_name(f"{conv.name}/w_bn"), (w * k.reshape(-1, 1, 1, 1)).astype(np.float32))
        b_name = g.add_constant(g.fresh_name(f"{conv.name}/b_bn"), ((b - mean) * k + beta).astype(np.float32))
        conv.inputs = [conv.inputs[0], w_name, b_name]
        conv.outputs = [bn.outputs[0]]
        removed.add(id(bn))
    g.nodes = [n for n in g.nodes if id(n) not in removed]
    g.remove_dead()
    return len(removed)
