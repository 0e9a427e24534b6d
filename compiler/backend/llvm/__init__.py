"""LLVM (llvmlite) CPU backend: JIT-compiled kernels for the operators the accelerator leaves on the CPU."""
from compiler.backend.llvm.backend import LlvmCpuBackend, compiled_kernels
from compiler.backend.llvm.registry import PLANNERS, VIEW_OPS

__all__ = ["LlvmCpuBackend", "compiled_kernels", "PLANNERS", "VIEW_OPS"]
