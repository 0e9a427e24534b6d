"""CPU execution of non-accelerator operators (numpy now, LLVM later)."""
from compiler.cpu.backend import CPU_BACKENDS, CpuBackend, NumpyCpuBackend, create_cpu_backend, supported_ops

__all__ = ["CPU_BACKENDS", "CpuBackend", "NumpyCpuBackend", "create_cpu_backend", "supported_ops"]
