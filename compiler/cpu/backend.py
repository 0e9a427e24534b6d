"""The CPU side of execution: a small protocol plus the numpy implementation."""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from compiler.cpu.kernels import KERNELS, TAKES_N_OUTPUTS
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
        if fn in TAKES_N_OUTPUTS:
            used = max((i + 1 for i, o in enumerate(node.outputs) if o), default=1)
            out = fn(node.attrs, *inputs, n_outputs=used)
        else:
            out = fn(node.attrs, *inputs)
        outs = list(out) if isinstance(out, tuple) else [out]
        return [np.asarray(o) for o in outs]


def supported_ops() -> frozenset[str]:
    """Op types the numpy CPU backend can execute."""
    return frozenset(KERNELS)


CPU_BACKENDS = ("numpy", "llvm")


def create_cpu_backend(cpu: "CpuBackend | str | None") -> CpuBackend:
    """A CPU backend from a name in ``CPU_BACKENDS`` (None = numpy) or an existing backend object."""
    if cpu is None or cpu == "numpy":
        return NumpyCpuBackend()
    if cpu == "llvm":
        from compiler.codegen.llvm import LlvmCpuBackend  # imported lazily: it pulls in llvmlite

        return LlvmCpuBackend()
    if isinstance(cpu, str):
        raise ValueError(f"unknown CPU backend {cpu!r}; available: {', '.join(CPU_BACKENDS)}")
    if not isinstance(cpu, CpuBackend):
        raise TypeError(f"cpu={cpu!r} is neither a backend name {CPU_BACKENDS} nor a CpuBackend object")
    return cpu
