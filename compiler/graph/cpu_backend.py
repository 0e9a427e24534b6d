"""The CPU side of execution: the ``CpuBackend`` protocol and its numpy reference implementation (the host-op
kernels of :mod:`jit_runtime.host_ops`); the compiled one is :mod:`compiler.backend.plans.backend`."""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from jit_runtime.host_ops.kernels import KERNELS, TAKES_N_OUTPUTS
from compiler.graph.ir import Node


@runtime_checkable
class CpuBackend(Protocol):
    """Runs one IR node on the host. An LLVM backend implements the same two methods."""

    name: str

    def supports(self, op: str) -> bool: ...

    def run_node(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]: ...


class NumpyCpuBackend:
    """Executes nodes with the numpy kernels in :mod:`jit_runtime.host_ops.kernels`."""

    name = "numpy"

    def supports(self, op: str) -> bool:
        return op in KERNELS

    def run_node(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        fn = KERNELS.get(node.op)
        if fn is None:
            raise ValueError(f"CPU backend has no kernel for op {node.op!r} (node {node.name!r})")
        if fn in TAKES_N_OUTPUTS:
            used = max((i + 1 for i, o in enumerate(node.outputs) if o), default=1)
            out = fn(node.attrs, *inputs, n_outputs=used)
        else:
            out = fn(node.attrs, *inputs)
        outs = list(out) if isinstance(out, tuple) else [out]
        return [np.asarray(o) for o in outs]
