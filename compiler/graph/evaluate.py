"""Interpret a graph on the CPU backend (used for constant folding, calibration and references)."""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph


def evaluate_graph(g: Graph, feeds: dict[str, np.ndarray], keep_all: bool = False,
                   backend=None) -> dict[str, np.ndarray]:
    """Run every node in order; returns graph outputs (or all values with ``keep_all``)."""
    from compiler.graph.cpu_backend import NumpyCpuBackend

    backend = backend or NumpyCpuBackend()
    values: dict[str, np.ndarray] = dict(g.constants)
    values.update(feeds)
    if not keep_all:
        last_use: dict[str, int] = {}
        for idx, n in enumerate(g.nodes):
            for i in n.inputs:
                last_use[i] = idx
    for idx, n in enumerate(g.nodes):
        outs = backend.run_node(n, [values[i] if i else None for i in n.inputs])
        for name, v in zip(n.outputs, outs):
            if name:
                values[name] = v
        if not keep_all:
            for i in n.inputs:
                if last_use.get(i) == idx and i not in g.outputs and i not in g.constants:
                    values.pop(i, None)
    return values if keep_all else {o: values[o] for o in g.outputs}
