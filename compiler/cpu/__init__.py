"""CPU execution of non-accelerator operators (numpy now, LLVM later)."""
from compiler.cpu.backend import CpuBackend, NumpyCpuBackend, supported_ops

__all__ = ["CpuBackend", "NumpyCpuBackend", "supported_ops"]
