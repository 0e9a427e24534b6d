"""Constant folding: evaluate nodes whose inputs are all constants (and Shape of static tensors)."""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph

# Quantized weights stay quantized so the QDQ lowering still sees DQ(int8 const).
KEEP_OPS = frozenset({"DequantizeLinear"})


def fold_constants(g: Graph, keep_ops: frozenset[str] = KEEP_OPS) -> int:
    """Fold in place; returns the number of nodes removed."""
    from compiler.graph.cpu_backend import NumpyCpuBackend

    cpu = NumpyCpuBackend()
    kept, folded = [], 0
    for n in g.nodes:
        if n.op == "Shape" and n.inputs[0] in g.tensors and n.inputs[0] not in g.value_shaped:
            shape = np.asarray(g.tensors[n.inputs[0]].shape, np.int64)
            g.add_constant(n.outputs[0], shape[n.attrs.get("start", 0): n.attrs.get("end", None)])
            folded += 1
            continue
        ins = [i for i in n.inputs if i]
        if n.op in keep_ops or not ins or not all(i in g.constants for i in ins) or not cpu.supports(n.op):
            kept.append(n)
            continue
        outs = cpu.run_node(n, [g.constants[i] if i else None for i in n.inputs])
        for name, v in zip(n.outputs, outs):
            if name:
                g.add_constant(name, v)
        folded += 1
    g.nodes = kept
    g.remove_dead()
    return folded
