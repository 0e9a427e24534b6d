"""The CPU side of execution: a small protocol plus the numpy implementation."""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from compiler.cpu.kernels import KERNELS
from compiler.graph.ir import Node


@runtime_checkable
class CpuBackend(Protocol):
    """Runs one IR node on the host. An LLVM backend implements the same two methods."""

    name: str

    def supports(self, op: str) -> bool: ...

    def run_node(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]: ...


class NumpyCpuBackend:
    """Executes nodes with the numpy kernels in :mod:`compiler.cpu.kernels`."""

    name = "numpy"

    def supports(self, op: str) -> bool:
        return op in KERNELS

    def run_node(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        fn = KERNELS.get(node.op)
        if fn is None:
            raise ValueError(f"CPU backend has no kernel for op {node.op!r} (node {node.name!r})")
        out = fn(node.attrs, *inputs)
        outs = list(out) if isinstance(out, tuple) else [out]
        return [np.asarray(o) for o in outs]


def supported_ops() -> frozenset[str]:
    """Op types the numpy CPU backend can execute."""
    return frozenset(KERNELS)
